"""Optimizer.step with value_and_grad's list of concrete Tensors: the same updates as arrays, and the per-gradient
loop's rules wherever one gradient or parameter is not plain (frozen, None, another dtype or shape, a Parameter)."""
import numpy as np
import pytest

import nn
import tracer
from nn import optim


def _setup(cls=optim.SGD, **kw):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype("float32") for s in [(4, 3), (3,), (2, 2)]]
    grads = [rng.standard_normal(a.shape).astype("float32") for a in arrays]
    made = []
    for _ in range(2):
        ps = [nn.Parameter(a.copy()) for a in arrays]
        made.append((ps, cls(ps, lr=0.1, **kw)))
    return made, grads


@pytest.mark.parametrize("cls", [optim.SGD, optim.Adam, optim.RMSprop])
def test_tensor_list_matches_arrays(cls):
    ((pa, oa), (pb, ob)), grads = _setup(cls)
    for _ in range(3):
        oa.step([tracer.tensor(g) for g in grads])
        ob.step([g.copy() for g in grads])
    for x, y in zip(pa, pb, strict=True):
        np.testing.assert_array_equal(x._data, y._data)
    assert oa.step_count == ob.step_count == 3


def test_frozen_parameter_is_left_alone():
    ((ps, opt), _), grads = _setup()
    ps[1].requires_grad = False
    before = ps[1]._data.copy()
    opt.step([tracer.tensor(g) for g in grads])
    np.testing.assert_array_equal(ps[1]._data, before)
    assert not np.array_equal(ps[0]._data, _setup()[0][1][0][0]._data)  # the others were updated


def test_other_dtype_and_wrong_shape_take_the_loop():
    ((ps, opt), (qs, ref)), grads = _setup()
    opt.step([tracer.tensor(grads[0].astype("float64"))] + [tracer.tensor(g) for g in grads[1:]])
    ref.step(grads)
    for x, y in zip(ps, qs, strict=True):
        np.testing.assert_array_equal(x._data, y._data)
    with pytest.raises(ValueError, match="gradient 2 has shape"):
        opt.step([tracer.tensor(g) for g in grads[:2]] + [tracer.tensor(np.zeros(3, "float32"))])
    with pytest.raises(ValueError, match="got 2 gradients"):
        opt.step([tracer.tensor(g) for g in grads[:2]])
    opt.step([tracer.tensor(grads[0]), None, nn.Parameter(grads[2])])  # None and a Parameter: the loop's rules
