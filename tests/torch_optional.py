"""`torch` for tests that compare with it: the real module when installed; otherwise a stand-in whose
first attribute read skips the test reading it (or, at import time, the module), so that what tracegrad
itself does is still checked on a machine without torch (the README's `.[test]` set-up)."""
import pytest

try:
    import torch
except ImportError:
    class _Missing:
        def __getattr__(self, name):
            if name.startswith("__"):  # pytest's and inspect's probes (__wrapped__, __bases__): plainly absent
                raise AttributeError(name)
            pytest.skip(f"needs torch (reads torch.{name}); pip install -e '.[torch]'", allow_module_level=True)

    torch = _Missing()

__all__ = ["torch"]
