"""Losses that must stay finite (issue 8, item 7) and the smaller defects of item 8, tracegrad alone.
PyTorch comparisons of the same scenarios: tests/tracer/test_numerics_torch.py."""
import math
import operator

import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F
from nn import optim

FLOATS = ["float32", "float64"]


def _masked_logits(dtype):
    logits = np.array([[0.5, -1.0, 2.0], [-np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf], [1.0, -np.inf, 0.0]],
                      dtype)
    labels = np.array([2, -100, -100, 0])  # rows 1 and 2 are ignored; row 3 keeps a -inf it never picks
    return logits, labels


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the all -inf row: -inf - -inf
@pytest.mark.parametrize("dtype", FLOATS)
def test_cross_entropy_ignores_rows_holding_minus_inf(dtype):
    logits, labels = _masked_logits(dtype)
    x = tracer.tensor(logits)
    kept = logits[[0, 3]].astype("float64")
    want = np.mean([-(kept[i] - np.log(np.exp(kept[i]).sum()))[c] for i, c in enumerate([2, 0])])
    for loss in (F.cross_entropy(x, labels), F.nll_loss(F.log_softmax(x, axis=-1), labels)):
        assert math.isfinite(loss.item())
        np.testing.assert_allclose(loss.item(), want, rtol=1e-6)
    assert F.cross_entropy(x, labels, reduction="sum").item() == pytest.approx(2 * want, rel=1e-6)
    assert F.cross_entropy(x, labels, reduction="none").numpy().tolist()[1:3] == [0.0, 0.0]
    value, (g,) = autodiff.value_and_grad(lambda z: F.cross_entropy(z, labels), wrt=[x])(x)
    np.testing.assert_allclose(float(value), want, rtol=1e-6)
    g = np.asarray(g)
    assert np.isfinite(g[[0, 1, 3]]).all() and (g[1] == 0).all() and g[3, 1] == 0
    assert np.isnan(g[2]).all()  # a row of -inf has no softmax: nan, as PyTorch's gradient


@pytest.mark.parametrize("dtype", FLOATS)
def test_binary_cross_entropy_with_logits_is_finite_for_any_logit(dtype):
    x = np.array([-1e4, -200.0, -20.0, -1.0, 0.0, 1.0, 20.0, 200.0, 1e4], dtype)
    t = np.array([1.0, 1.0, 1.0, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0], dtype)
    x64, t64 = x.astype("float64"), t.astype("float64")
    want = (1 - t64) * x64 + np.logaddexp(0.0, -x64)  # -t log s(x) - (1 - t) log(1 - s(x))
    out = F.binary_cross_entropy_with_logits(tracer.tensor(x), tracer.tensor(t), reduction="none")
    assert out.dtype == dtype and np.isfinite(out.numpy()).all()
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    xt = tracer.tensor(x)
    value, (g,) = autodiff.value_and_grad(
        lambda z: F.binary_cross_entropy_with_logits(z, tracer.tensor(t), reduction="sum"), wrt=[xt])(xt)
    np.testing.assert_allclose(float(value), want.sum(), rtol=1e-6)
    sig = np.exp(-np.logaddexp(0.0, -x64))
    np.testing.assert_allclose(np.asarray(g), sig - t64, rtol=1e-5, atol=1e-7)  # d/dx = sigmoid(x) - t


def test_binary_cross_entropy_with_logits_weight_pos_weight_and_reductions():
    rng = np.random.default_rng(0)
    x, t = rng.normal(size=(4, 3)), rng.uniform(size=(4, 3))
    w, pw = rng.uniform(0.5, 2.0, size=(1, 3)), np.array([1.0, 3.0, 0.5])
    log_s, log_1ms = -np.logaddexp(0, -x), -np.logaddexp(0, x)
    want = -w * (pw * t * log_s + (1 - t) * log_1ms)
    got = F.binary_cross_entropy_with_logits(tracer.tensor(x), t, w, reduction="none", pos_weight=pw)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(F.binary_cross_entropy_with_logits(x, t, w, pos_weight=pw).item(), want.mean())
    np.testing.assert_allclose(F.binary_cross_entropy_with_logits(x, t, reduction="sum").item(),
                               -(t * log_s + (1 - t) * log_1ms).sum())
    with pytest.raises(ValueError, match="target of shape"):
        F.binary_cross_entropy_with_logits(x, t[:2])
    with pytest.raises(ValueError, match="reduction"):
        F.binary_cross_entropy_with_logits(x, t, reduction="avg")
    assert autodiff.gradcheck(lambda a: F.binary_cross_entropy_with_logits(a, t, w, pos_weight=pw), tracer.tensor(x))


def test_logsigmoid_matches_log_of_sigmoid_where_that_is_finite():
    x = np.linspace(-15, 15, 31)
    np.testing.assert_allclose(F.logsigmoid(x).numpy(), np.log(1 / (1 + np.exp(-x))), rtol=1e-9)  # the reference loses digits
    assert F.logsigmoid(tracer.tensor([-1000.0])).item() == -1000.0


# ---------------------------------------------------------------- item 8: smaller defects


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    @tracer.checkpoint
    def forward(self, x):
        return tracer.tanh(self.lin(x))


def test_checkpoint_decorates_a_method():
    block, x = Block(), tracer.tensor(np.random.default_rng(0).normal(size=(2, 3)).astype("float32"))
    eager = block(x)  # `self` is bound: the call gets (self, x)
    np.testing.assert_allclose(eager.numpy(), np.tanh(block.lin(x).numpy()))
    ops = [b.value.op for b in tracer.trace(lambda x: block(x).sum(), x)["main"].bindings]
    assert ops[0] == "grad.start_checkpoint" and "grad.end_checkpoint" in ops
    grads = autodiff.grad(lambda x: block(x).sum(), wrt=block.parameters())(x)
    plain = autodiff.grad(lambda x: tracer.tanh(block.lin(x)).sum(), wrt=block.parameters())(x)
    for g, p in zip(grads, plain, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(p), rtol=1e-6)
    assert Block.forward.__name__ == "forward"


@pytest.mark.parametrize("make", [lambda m: dict(m.named_parameters()), lambda m: m.named_parameters(),
                                  lambda m: m.parameters()], ids=["dict", "named_pairs", "plain_list"])
def test_optimizers_take_the_dict_that_grad_returns(make):
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    twin = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    twin.load_state_dict(model.state_dict())
    x = np.random.default_rng(0).normal(size=(5, 3)).astype("float32")
    params = dict(model.named_parameters())
    grads = autodiff.grad(lambda x: (model(x) ** 2).mean(), wrt=params)(x)
    assert isinstance(grads, dict)
    reordered = dict(reversed(list(grads.items())))  # keys, not order, decide
    optim.Adam(make(model), lr=0.1).step(reordered)
    optim.Adam(twin.parameters(), lr=0.1).step(
        autodiff.grad(lambda x: (twin(x) ** 2).mean(), wrt=twin.parameters())(x))
    for (name, p), q in zip(model.named_parameters(), twin.parameters(), strict=True):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-6, err_msg=name)


def test_clip_grad_norm_keeps_a_dict_a_dict():
    clipped, norm = optim.clip_grad_norm({"a": np.array([3.0]), "b": np.array([4.0])}, max_norm=1.0)
    assert norm == 5.0 and list(clipped) == ["a", "b"]
    np.testing.assert_allclose([clipped["a"][0], clipped["b"][0]], [0.6, 0.8], rtol=1e-5)


def test_optimizers_refuse_mismatched_keys():
    model = nn.Linear(2, 2)
    opt = optim.SGD(dict(model.named_parameters()), lr=0.1)
    g = np.zeros((2, 2), "float32")
    with pytest.raises(ValueError, match=r"missing \['bias'\], unexpected \['weights'\]"):
        opt.step({"weight": g, "weights": g})
    with pytest.raises(ValueError, match=r"missing \['bias'\]"):
        opt.step({"weight": g})
    loose = [tracer.tensor(np.ones(2, "float32")), tracer.tensor(np.ones(2, "float32"))]
    with pytest.raises(TypeError, match="no unique names"):
        optim.SGD(loose, lr=0.1).step({"a": np.ones(2), "b": np.ones(2)})
    with pytest.raises(ValueError, match="name appears more than once"):
        optim.SGD([("w", loose[0]), ("w", loose[1])], lr=0.1)


def test_float_and_int_of_a_non_scalar_raise_what_item_raises():
    t = tracer.tensor([1.0, 2.0])
    with pytest.raises(ValueError) as item_error:
        t.item()
    for convert in (float, int):
        with pytest.raises(ValueError) as error:
            convert(t)
        assert str(error.value) == str(item_error.value)
    assert float(tracer.tensor([[2.5]])) == 2.5 and int(tracer.tensor(3.7)) == 3
    with pytest.raises(tracer.TraceError, match="float()"):
        tracer.trace(lambda x: tracer.tensor(float(x)), tracer.spec(()))


def test_comparing_with_none_raises_type_error():
    t = tracer.tensor([1.0, 2.0])
    for compare in (operator.eq, operator.ne):  # t == None, t != None
        with pytest.raises(TypeError, match="compared with None"):
            compare(t, None)
    assert (t == 1.0).numpy().tolist() == [True, False] and t is not None
