import os
import sys
from pathlib import Path

from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# every compiled step verifies the module its passes built (off outside tests: ir.verifier.wanted)
os.environ.setdefault("TRACEGRAD_VERIFY", "1")

# numba's kernels (the fast extra) from the first call, not after a background load (ir.runtime.numba_hook's
# tiers): a test sees the kernels it asks for; tests/ir/test_numba_tiered.py runs the tiers in subprocesses
os.environ.setdefault("TRACEGRAD_KERNELS", "numba-sync")

# CI replays the same examples on every run (no flaky red builds); a developer's run explores anew.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
