"""searchsorted (torch.searchsorted / bucketize): positions, no gradient."""
import numpy as np

import tracer as T

from . import OpCase, rand

_seq = np.array([-0.5, 0.0, 0.25, 0.75], "float32")
_rows = np.sort(rand(2, 4), -1)

CASES = [
    OpCase("searchsorted_left", lambda s, v: T.searchsorted(s, v), lambda s, a: np.searchsorted(s, a),
           [_seq, rand(3, 2)], ("searchsorted",), grad=False),
    OpCase("searchsorted_rows_right", lambda s, v: T.searchsorted(s, v, right=True),
           lambda s, a: np.stack([np.searchsorted(r, x, side="right") for r, x in zip(s, a, strict=True)]),
           [_rows, rand(2, 3)], ("searchsorted",), grad=False),
    OpCase("bucketize_int32", lambda v, b: T.bucketize(v, b, out_int32=True),
           lambda a, b: np.searchsorted(b, a).astype("int32"), [rand(5), _seq], ("searchsorted",), grad=False),
]
