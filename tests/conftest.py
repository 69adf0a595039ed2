import os
import sys
from pathlib import Path

from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# every compiled step verifies the module its passes built (off outside tests: ir.verifier.wanted)
os.environ.setdefault("TRACEGRAD_VERIFY", "1")

# CI replays the same examples on every run (no flaky red builds); a developer's run explores anew.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
