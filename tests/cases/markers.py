"""Op cases of the markers: checkpoint regions are the identity forward and pass gradients through."""
import numpy as np

import tracer as T
from tests.cases import OpCase, rand


def _region(x, w):
    with T.checkpoint():
        h = T.tanh(x @ w) * x
    return T.sin(h)


def _region_ref(x, w):
    return np.sin(np.tanh(x @ w) * x)


def _nested(x):
    with T.checkpoint():
        y = T.exp(x)
        with T.checkpoint():
            y = y * x
    return y + x


CASES = [
    OpCase("checkpoint_region", _region, _region_ref, [rand(3, 3), rand(3, 3, seed=1)],
           ("grad.start_checkpoint", "grad.end_checkpoint")),
    OpCase("checkpoint_wrapper", lambda x: T.checkpoint(T.cos)(x) * 2.0, lambda x: np.cos(x) * np.float32(2),
           [rand(4)], ("grad.start_checkpoint", "grad.end_checkpoint")),
    OpCase("checkpoint_nested", _nested, lambda x: np.exp(x) * x + x, [rand(2, 3)],
           ("grad.start_checkpoint", "grad.end_checkpoint")),
]
