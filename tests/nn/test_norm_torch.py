"""Normalisation layers and their F functions against torch: outputs, every parameter's and the input's gradient,
running statistics after the call, in float32 and float64, eagerly, in value_and_grad and with backward()."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F

from .torch_compare import TOL, assert_module_matches

rng = np.random.default_rng(0)


def _x(*shape):
    return rng.standard_normal(shape) * 1.5 + 0.5


# name: (ours(dtype), torch's(tnn, dtype), inputs, train)
CASES = {
    "bn1d": (lambda d: nn.BatchNorm1d(3, dtype=d), lambda t, d: t.BatchNorm1d(3, dtype=d), [_x(5, 3)], True),
    "bn3d_5d": (lambda d: nn.BatchNorm3d(2, momentum=0.3, dtype=d), lambda t, d: t.BatchNorm3d(2, momentum=0.3, dtype=d),
                [_x(3, 2, 2, 3, 2)], True),
    "bn3d_eval": (lambda d: nn.BatchNorm3d(2, dtype=d), lambda t, d: t.BatchNorm3d(2, dtype=d), [_x(2, 2, 2, 2, 3)], False),
    "bn2d_momentum_none": (lambda d: nn.BatchNorm2d(3, momentum=None, dtype=d),
                           lambda t, d: t.BatchNorm2d(3, momentum=None, dtype=d), [_x(2, 3, 2, 2)], True),
    "bn2d_no_stats": (lambda d: nn.BatchNorm2d(3, track_running_stats=False, dtype=d),
                      lambda t, d: t.BatchNorm2d(3, track_running_stats=False, dtype=d), [_x(2, 3, 2, 2)], False),
    "bn1d_no_affine": (lambda d: nn.BatchNorm1d(3, affine=False, dtype=d), lambda t, d: t.BatchNorm1d(3, affine=False, dtype=d),
                       [_x(4, 3, 2)], True),
    "bn1d_no_bias": (lambda d: nn.BatchNorm1d(3, bias=False, dtype=d), lambda t, d: t.BatchNorm1d(3, bias=False, dtype=d),
                     [_x(4, 3)], True),
    "in1d": (lambda d: nn.InstanceNorm1d(3, dtype=d), lambda t, d: t.InstanceNorm1d(3, dtype=d), [_x(2, 3, 5)], True),
    "in1d_unbatched": (lambda d: nn.InstanceNorm1d(3, affine=True, dtype=d),
                       lambda t, d: t.InstanceNorm1d(3, affine=True, dtype=d), [_x(3, 5)], True),
    "in2d_stats": (lambda d: nn.InstanceNorm2d(2, affine=True, track_running_stats=True, momentum=0.2, dtype=d),
                   lambda t, d: t.InstanceNorm2d(2, affine=True, track_running_stats=True, momentum=0.2, dtype=d),
                   [_x(3, 2, 3, 2)], True),
    "in2d_stats_eval": (lambda d: nn.InstanceNorm2d(2, affine=True, track_running_stats=True, dtype=d),
                        lambda t, d: t.InstanceNorm2d(2, affine=True, track_running_stats=True, dtype=d),
                        [_x(2, 2, 3, 2)], False),
    "in3d": (lambda d: nn.InstanceNorm3d(2, affine=True, dtype=d), lambda t, d: t.InstanceNorm3d(2, affine=True, dtype=d),
             [_x(2, 2, 2, 2, 3)], True),
    "layernorm_2d_shape": (lambda d: nn.LayerNorm((3, 4), dtype=d), lambda t, d: t.LayerNorm((3, 4), dtype=d),
                           [_x(2, 3, 4)], True),
    "layernorm_no_bias": (lambda d: nn.LayerNorm(4, bias=False, dtype=d), lambda t, d: t.LayerNorm(4, bias=False, dtype=d),
                          [_x(3, 4)], True),
    "rmsnorm": (lambda d: nn.RMSNorm(4, dtype=d), lambda t, d: t.RMSNorm(4, dtype=d), [_x(3, 4)], True),
    "rmsnorm_2d_eps_no_affine": (lambda d: nn.RMSNorm((2, 3), eps=1e-3, elementwise_affine=False, dtype=d),
                                 lambda t, d: t.RMSNorm((2, 3), eps=1e-3, elementwise_affine=False, dtype=d),
                                 [_x(2, 2, 3)], True),
    "groupnorm": (lambda d: nn.GroupNorm(2, 4, dtype=d), lambda t, d: t.GroupNorm(2, 4, dtype=d), [_x(2, 4, 3)], True),
    "groupnorm_no_affine": (lambda d: nn.GroupNorm(3, 6, affine=False, dtype=d),
                            lambda t, d: t.GroupNorm(3, 6, affine=False, dtype=d), [_x(2, 6, 2, 2)], True),
    "lrn_3d": (lambda d: nn.LocalResponseNorm(3, alpha=0.5, beta=0.6, k=2.0),
               lambda t, d: t.LocalResponseNorm(3, alpha=0.5, beta=0.6, k=2.0), [_x(2, 5, 3)], True),
    "lrn_4d_even": (lambda d: nn.LocalResponseNorm(2), lambda t, d: t.LocalResponseNorm(2), [_x(1, 4, 2, 3)], True),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", CASES)
def test_norm_layer_matches_torch(name, dtype):
    torch = pytest.importorskip("torch")
    ours, theirs, inputs, train = CASES[name]
    assert_module_matches(torch, lambda: ours(dtype), lambda: theirs(torch.nn, getattr(torch, dtype)), inputs, dtype,
                          train=train)


def test_momentum_none_is_the_cumulative_average_over_steps_as_torch():
    torch = pytest.importorskip("torch")
    ours, eager = nn.BatchNorm1d(2, momentum=None, dtype="float64"), nn.BatchNorm1d(2, momentum=None, dtype="float64")
    theirs = torch.nn.BatchNorm1d(2, momentum=None, dtype=torch.float64)
    step = autodiff.value_and_grad(lambda x: ours(x).sum(), wrt=ours.parameters())
    batches = [_x(4, 2) * s for s in (1.0, 3.0, 0.2)]
    for x in batches:
        step(x)
        eager(x)
        theirs(torch.tensor(x))
    want = {k: v.numpy() for k, v in theirs.state_dict().items()}
    assert int(want["num_batches_tracked"]) == 3
    for m in (ours, eager):
        for k, v in m.state_dict().items():
            np.testing.assert_allclose(v, want[k], rtol=1e-12, err_msg=k)
    np.testing.assert_allclose(ours.running_mean.numpy(), 0.9 * 0 + np.mean([b.mean(0) for b in batches], 0) * 1.0,
                               rtol=1e-12)


def test_a_torch_batchnorm_state_dict_loads_both_ways_with_num_batches_tracked():
    torch = pytest.importorskip("torch")
    theirs = torch.nn.BatchNorm2d(3)
    for _ in range(2):
        theirs(torch.randn(2, 3, 2, 2))
    ours = nn.BatchNorm2d(3)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    assert ours.num_batches_tracked.dtype == "int64" and int(ours.num_batches_tracked.item()) == 2
    ours(np.ones((2, 3, 2, 2), "float32"))
    back = torch.nn.BatchNorm2d(3)
    back.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    assert int(back.num_batches_tracked) == 3
    assert repr(ours) == repr(theirs)


def test_reprs_and_state_keys_are_torchs():
    torch = pytest.importorskip("torch")
    pairs = [(nn.BatchNorm3d(3), torch.nn.BatchNorm3d(3)),
             (nn.BatchNorm1d(3, momentum=None), torch.nn.BatchNorm1d(3, momentum=None)),
             (nn.InstanceNorm2d(3), torch.nn.InstanceNorm2d(3)),
             (nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
              torch.nn.InstanceNorm1d(3, affine=True, track_running_stats=True)),
             (nn.RMSNorm([2, 3], eps=1e-3), torch.nn.RMSNorm([2, 3], eps=1e-3)),
             (nn.GroupNorm(2, 4, bias=False), torch.nn.GroupNorm(2, 4, bias=False)),
             (nn.LocalResponseNorm(3), torch.nn.LocalResponseNorm(3))]
    for ours, theirs in pairs:
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_functional_norms_match_torch(dtype):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    x, w, b = _x(3, 4, 5).astype(dtype), _x(4).astype(dtype), _x(4).astype(dtype)
    w2, b2 = _x(4, 5).astype(dtype), _x(4, 5).astype(dtype)
    mean, var = _x(4).astype(dtype), rng.uniform(0.5, 2, 4).astype(dtype)
    calls = [
        (lambda m, a: m.batch_norm(a, _t(m, mean), _t(m, var), _t(m, w), _t(m, b), False, 0.1, 1e-3)),
        (lambda m, a: m.batch_norm(a, None, None, _t(m, w), _t(m, b), True)),
        (lambda m, a: m.instance_norm(a, weight=_t(m, w), bias=_t(m, b), eps=1e-4)),
        (lambda m, a: m.layer_norm(a, (4, 5), _t(m, w2), _t(m, b2), 1e-3)),
        (lambda m, a: m.layer_norm(a, [5])),
        (lambda m, a: m.rms_norm(a, (4, 5), _t(m, w2))),
        (lambda m, a: m.group_norm(a, 2, _t(m, w), _t(m, b))),
        (lambda m, a: m.local_response_norm(a, 3, 1e-2, 0.7, 1.5)),
    ]
    out_w = rng.uniform(0.5, 1.5, x.shape).astype(dtype)  # a weighted sum: sum(y ** 2) of a norm is nearly constant
    for i, call in enumerate(calls):
        tx = torch.tensor(x, requires_grad=True)
        want = call(tf, tx)
        (want * torch.tensor(out_w)).sum().backward()
        xt = tracer.tensor(x)
        value, grad = autodiff.value_and_grad(lambda a, call=call: (call(F, a) * out_w).sum(), wrt=xt)(xt)
        got = call(F, x)
        assert got.dtype == dtype
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), **TOL[dtype], err_msg=f"call {i}")
        np.testing.assert_allclose(np.asarray(grad), tx.grad.numpy(), **TOL[dtype], err_msg=f"grad of call {i}")


def _t(m, a):
    return a if m is F else __import__("torch").tensor(a)


def test_functional_batch_norm_updates_running_statistics_as_torch():
    torch = pytest.importorskip("torch")
    x = _x(4, 3, 2)
    mean, var = tracer.zeros((3,), "float64"), tracer.ones((3,), "float64")
    tmean, tvar = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    F.batch_norm(x, mean, var, training=True, momentum=0.3)
    torch.nn.functional.batch_norm(torch.tensor(x), tmean, tvar, training=True, momentum=0.3)
    np.testing.assert_allclose(mean.numpy(), tmean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(var.numpy(), tvar.numpy(), rtol=1e-12)


def test_norm_errors_name_the_layer_and_shapes():
    with pytest.raises(ValueError, match=r"BatchNorm3d: expected 5-d input with 2 channels"):
        nn.BatchNorm3d(2)(np.zeros((2, 2, 3), "float32"))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(2)(np.zeros((1, 2), "float32"))
    with pytest.raises(ValueError, match="InstanceNorm2d: expected 3D or 4D"):
        nn.InstanceNorm2d(2)(np.zeros((2, 2), "float32"))
    with pytest.raises(ValueError, match="num_features"):
        nn.InstanceNorm1d(2, affine=True)(np.zeros((1, 3, 4), "float32"))
    with pytest.raises(RuntimeError, match=r"normalized_shape \(3,\)"):
        F.rms_norm(np.zeros((2, 4), "float32"), (3,))
    with pytest.raises(ValueError, match="3D or higher"):
        nn.LocalResponseNorm(2)(np.zeros((2, 3), "float32"))
    with pytest.raises(ValueError, match="momentum"):
        nn.BatchNorm1d(2, momentum=1.5)
