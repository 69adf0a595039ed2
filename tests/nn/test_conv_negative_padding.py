"""Negative conv padding raises a RuntimeError, as torch's ('negative padding is not supported'), naming the
op and the argument: the F functions, the layers, tracer's conv2d, eagerly and inside a compiled step."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F
from tests.torch_optional import torch

X1, X2, X3 = (np.ones((1, 2) + (5,) * d, "float32") for d in (1, 2, 3))
W1, W2, W3 = (np.ones((3, 2) + (3,) * d, "float32") for d in (1, 2, 3))
ROWS = [("conv1d", lambda m, x, w: m.conv1d(x, w, padding=-1), X1, W1),
        ("conv2d", lambda m, x, w: m.conv2d(x, w, padding=(1, -1)), X2, W2),
        ("conv3d", lambda m, x, w: m.conv3d(x, w, padding=-2), X3, W3),
        ("conv_transpose2d", lambda m, x, w: m.conv_transpose2d(x, w, padding=-1), X2, W2.transpose(1, 0, 2, 3))]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_functions_raise_a_runtime_error_as_torch(row):
    name, fn, x, w = row
    with pytest.raises(RuntimeError, match="negative padding"):
        fn(torch.nn.functional, torch.tensor(x), torch.tensor(w))
    with pytest.raises(RuntimeError, match=f"{name}.*padding"):
        fn(F, tracer.tensor(x), tracer.tensor(w))
    step = autodiff.value_and_grad(lambda a: fn(F, a, tracer.tensor(w)).sum(), argnums=0)
    with pytest.raises(RuntimeError, match=f"{name}.*padding"):
        step(tracer.tensor(x))


def test_layers_and_tracer_conv2d_raise_runtime_errors():
    with pytest.raises(RuntimeError, match="Conv2d.*padding"):
        nn.Conv2d(2, 3, 3, padding=-1)
    with pytest.raises(RuntimeError, match="conv2d.*padding"):
        tracer.conv2d(tracer.tensor(X2), tracer.tensor(W2), padding=-1)
    with pytest.raises(RuntimeError, match="conv2d.*padding"):
        tracer.trace(lambda a: tracer.conv2d(a, tracer.tensor(W2), padding=-1), tracer.spec(X2.shape))
    with pytest.raises(ValueError):  # still the ValueError it was
        F.conv2d(tracer.tensor(X2), tracer.tensor(W2), stride=0)
