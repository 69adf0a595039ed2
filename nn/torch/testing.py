"""torch.testing.assert_close: NumPy's assert_allclose with torch's default tolerances per dtype."""
from __future__ import annotations

import numpy as np

_TOLERANCES = {"float16": (1e-3, 1e-5), "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7)}  # (rtol, atol)


def _array(x):
    return x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else np.asarray(x)


def assert_close(actual, expected, *, rtol=None, atol=None, equal_nan: bool = False, check_dtype: bool = True,
                 msg=None, **kwargs) -> None:
    """Raise AssertionError unless actual and expected agree to torch's tolerances for their dtype (exactly for
    integers and bools); nested lists, tuples and dicts compare leaf by leaf."""
    if isinstance(actual, dict):
        assert actual.keys() == expected.keys(), msg or f"keys differ: {sorted(actual)} vs {sorted(expected)}"
        for k in actual:
            assert_close(actual[k], expected[k], rtol=rtol, atol=atol, equal_nan=equal_nan, check_dtype=check_dtype)
        return
    if isinstance(actual, (list, tuple)) and not np.isscalar(actual):
        assert len(actual) == len(expected), msg or f"lengths differ: {len(actual)} vs {len(expected)}"
        for a, e in zip(actual, expected, strict=True):
            assert_close(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan, check_dtype=check_dtype)
        return
    a, e = _array(actual), _array(expected)
    if check_dtype and hasattr(actual, "dtype") and hasattr(expected, "dtype"):
        assert str(a.dtype) == str(e.dtype), msg or f"dtypes differ: {a.dtype} vs {e.dtype}"
    default = _TOLERANCES.get(str(a.dtype), (0.0, 0.0))
    np.testing.assert_allclose(a, e, rtol=default[0] if rtol is None else rtol,
                               atol=default[1] if atol is None else atol, equal_nan=equal_nan, err_msg=msg or "")


assert_allclose = assert_close

__all__ = ["assert_allclose", "assert_close"]
