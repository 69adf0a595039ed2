"""The user's line that a traced op comes from: the first stack frame outside tracegrad."""
from __future__ import annotations

import os
import sys

from ir import Source

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# tracegrad's own packages; any other file (a model, a test, a benchmark) is the user's
_OWN = tuple(os.path.join(_ROOT, pkg) + os.sep for pkg in ("ir", "tracer", "autodiff", "nn"))


def user_source() -> Source | None:
    """The Source of the innermost frame outside tracegrad's packages (None when there is none)."""
    frame = sys._getframe(1)
    while frame is not None:
        file = frame.f_code.co_filename
        if not file.startswith(_OWN) and not file.startswith("<frozen"):
            return Source(file, frame.f_lineno)
        frame = frame.f_back
    return None
