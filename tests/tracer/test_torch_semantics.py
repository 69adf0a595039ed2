"""torch's meaning for every torch spelling (issue 20 item 6): each case runs the same lambda on torch and on
nn.torch (Tensor methods and torch functions), in float32 and float64, and compares values, named-tuple
fields, shapes and dtypes; gradients through backward() where the spelling is differentiable. tracegrad's
NumPy-spelled functions keep NumPy's meaning (the last tests), as docs/from-pytorch.md's table says."""
import functools

import numpy as np
import pytest

import nn
import nn.torch as ttorch
import tracer
from nn import functional as F

torch = pytest.importorskip("torch")

rng = np.random.default_rng(0)
X = rng.standard_normal((3, 4))
TIES = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, 2.0], [0.5, 0.1, 0.5, 0.2]])
COL = rng.standard_normal((3, 1, 4))
POS = np.abs(rng.standard_normal((3, 4))) + 0.5

# name -> (fn(m, *tensors) with m the torch module, inputs, differentiable)
CASES = {
    "max_dim": (lambda m, x: x.max(dim=1), [X], True),
    "max_dim_positional_keepdim": (lambda m, x: x.max(1, True), [X], True),
    "max_ties_gradient_to_first": (lambda m, x: x.max(dim=1).values, [TIES], True),
    "min_dim_ties": (lambda m, x: x.min(dim=0), [TIES], True),
    "max_no_dim": (lambda m, x: x.max(), [X], True),
    "max_elementwise": (lambda m, x, y: m.max(x, y), [X, X.T.copy().reshape(3, 4)], True),
    "torch_max_dim": (lambda m, x: m.max(x, 1), [X], True),
    "torch_min_dim_keepdim": (lambda m, x: m.min(x, dim=-1, keepdim=True), [X], True),
    "max_values_indices_fields": (lambda m, x: (x.max(0).values, x.max(0).indices), [X], True),
    "var_default_unbiased": (lambda m, x: x.var(), [X], True),
    "var_dim": (lambda m, x: x.var(dim=1), [X], True),
    "var_positional_unbiased": (lambda m, x: x.var(1, False), [X], True),
    "var_unbiased_kw": (lambda m, x: x.var(0, unbiased=False, keepdim=True), [X], True),
    "var_correction": (lambda m, x: x.var(dim=1, correction=2), [X], True),
    "std_default": (lambda m, x: x.std(), [X], True),
    "std_dim_keepdim": (lambda m, x: x.std(dim=0, keepdim=True), [X], True),
    "torch_var_std": (lambda m, x: (m.var(x, 1), m.std(x, dim=0, unbiased=False)), [X], True),
    "torch_var_mean": (lambda m, x: m.var_mean(x, 1), [X], True),
    "squeeze_non_unit_dim": (lambda m, x: x.squeeze(0), [COL], True),
    "squeeze_unit_dim": (lambda m, x: x.squeeze(1), [COL], True),
    "squeeze_all": (lambda m, x: x.squeeze(), [COL], True),
    "squeeze_tuple": (lambda m, x: x.squeeze((0, 1)), [COL], True),
    "torch_squeeze": (lambda m, x: m.squeeze(x, 2), [COL], True),
    "split_size": (lambda m, x: x.split(2, dim=1), [X], True),
    "split_size_uneven": (lambda m, x: x.split(2), [X], True),
    "split_sizes": (lambda m, x: x.split([1, 3], dim=1), [X], True),
    "torch_split": (lambda m, x: m.split(x, 3, dim=1), [X], True),
    "torch_split_sizes": (lambda m, x: m.split(x, [2, 1]), [X], True),
    "chunk": (lambda m, x: m.chunk(x, 3, dim=1), [X], True),
    "take_flat": (lambda m, x: x.take(m.tensor([0, 5, 11])), [X], True),
    "torch_take": (lambda m, x: m.take(x, m.tensor([[1, 2], [3, 4]])), [X], True),
    "tril_diagonal": (lambda m, x: x.tril(diagonal=1), [X], True),
    "triu_negative": (lambda m, x: m.triu(x, -1), [X], True),
    "sum_dtype": (lambda m, x: x.sum(dim=0, dtype=m.float64), [X], True),
    "mean_dtype": (lambda m, x: m.mean(x, 1, keepdim=True, dtype=m.float64), [X], True),
    "cumsum_dim": (lambda m, x: m.cumsum(x, dim=1), [X], True),
    "pow_tensor_number": (lambda m, x: m.pow(x, 2), [X], True),
    "pow_number_tensor": (lambda m, x: m.pow(2.0, x), [X], True),
    "pow_keyword": (lambda m, x: m.pow(x, exponent=3), [X], True),
    "cat_dim": (lambda m, x, y: m.cat([x, y], dim=1), [X, POS], True),
    "cat_tuple_negative": (lambda m, x, y: m.cat((x, y), -2), [X, POS], True),
    "clamp_tensor_bounds": (lambda m, x, lo: m.clamp(x, min=lo, max=lo + 1.0), [X, X[:1] * 0.5], True),
    "clamp_numbers_kw": (lambda m, x: m.clamp(x, min=-0.5, max=0.5), [X], True),
    "clamp_min_method": (lambda m, x: x.clamp_min(0.1), [X], True),
    "where_3": (lambda m, x, y: m.where(x > 0, x, y), [X, POS], True),
    "where_1": (lambda m, x: m.where(x > 0), [X], False),
    "full_int": (lambda m: m.full((2, 2), 3), [], False),
    "full_float": (lambda m: m.full((2,), 1.5), [], False),
    "isnan_isinf_isfinite": (lambda m, x: (m.isnan(x / 0.0 * 0.0), m.isinf(1.0 / (x * 0.0)), m.isfinite(x)), [X],
                             False),
    "logical": (lambda m, x, y: (m.logical_and(x > 0, y > 1), m.logical_or(x > 0, y > 1), m.logical_not(x > 0),
                                 m.logical_xor(x > 0, y > 1)), [X, POS], False),
    "addcmul_addcdiv": (lambda m, x, y: (m.addcmul(x, x, y, value=0.5), m.addcdiv(x, x, y, value=2)), [X, POS], True),
    "diff": (lambda m, x: m.diff(x, dim=1), [X], True),
    "tile": (lambda m, x: m.tile(x, (2, 1)), [X], True),
    "hstack_vstack": (lambda m, x, y: (m.hstack([x, y]), m.vstack([x, y])), [X, POS], True),
    "ravel_flatten": (lambda m, x: (m.ravel(x), m.flatten(x, 0)), [X], True),
    "expand_as_view_as": (lambda m, x, y: (x[:1].expand_as(y), x.view_as(y.T)), [X, POS], True),
    "deg2rad_sinc": (lambda m, x: (m.deg2rad(x), m.sinc(x)), [X], True),
    "float_power": (lambda m, x: m.float_power(x, 2), [X], True),
    "signbit": (lambda m, x: m.signbit(x), [X], False),
    "equal": (lambda m, x: m.equal(x, x * 1.0), [X], False),
    "amax_amin": (lambda m, x: (m.amax(x, dim=(0, 1)), m.amin(x, 1)), [X], True),
    "argmax_keepdim": (lambda m, x: m.argmax(x, dim=1, keepdim=True), [X], False),
    "softmax_dtype": (lambda m, x: m.softmax(x, dim=1, dtype=m.float64), [X], True),
    "sort_topk": (lambda m, x: (m.sort(x, dim=1, descending=True), m.topk(x, 2)), [X], True),
    "trace": (lambda m, x: m.trace(x), [X], True),
    "numel_is_floating_point": (lambda m, x: (m.numel(x), x.is_floating_point(), x.element_size()), [X], False),
    "layer_norm_functional": (lambda m, x, w, b: m.nn.functional.layer_norm(x, (4,), w, b, 1e-5),
                              [X, POS[0], X[1]], True),
    "layer_norm_2d_shape": (lambda m, x, w: m.nn.functional.layer_norm(x, (3, 4), w), [X[None].repeat(2, 0), POS],
                            True),
    "layer_norm_top_level": (lambda m, x: m.layer_norm(x, [4]), [X], True),
    "torch_keyword_names": (lambda m, x, y: (m.matmul(input=x, other=y.T), m.stack(tensors=[x, y], dim=1),
                                             m.clamp(input=x, min=0.0), m.where(condition=x > 0, input=x, other=y),
                                             m.maximum(input=x, other=y), m.exp(input=x),
                                             m.unsqueeze(input=x, dim=0), m.transpose(input=x, dim0=0, dim1=1)),
                            [X, POS], True),
}


def _to(m, value, dtype):
    return m.tensor(value.astype(dtype)) if isinstance(value, np.ndarray) else value


def _flat(out):
    """Every tensor in out, with field names of named tuples; numbers and bools as they are."""
    fields = getattr(type(out), "__match_args__", None)  # a namedtuple's, or torch's return_types'
    if isinstance(out, tuple) and fields:
        return [(f, v) for f in fields for _, v in _flat(getattr(out, f))]
    if isinstance(out, (tuple, list)):
        return [v for o in out for v in _flat(o)]
    return [("", out)]


def _array(v):
    if isinstance(v, torch.Tensor):
        return v.detach().numpy()
    if isinstance(v, tracer.Tensor):
        return v.numpy()
    return v


def _run(name, dtype, backward):
    fn, inputs, differentiable = CASES[name]
    results = []
    for m in (torch, ttorch):
        args = [_to(m, v, dtype) for v in inputs]
        floats = [a for a in args if hasattr(a, "dtype") and str(a.dtype).endswith(dtype)]
        if backward:
            for a in floats:
                a.requires_grad_()
        out = fn(m, *args)
        flat = _flat(out)
        grads = None
        if backward:  # a weighted sum of every differentiable output, so each one's gradient counts
            terms = [v.sum() * (i + 1.5) for i, (_, v) in enumerate(flat)
                     if hasattr(v, "dtype") and str(v.dtype).endswith(("float32", "float64")) and v.requires_grad]
            if terms:
                functools.reduce(lambda a, b: a + b, terms).backward()
                grads = [a.grad for a in floats]
        results.append((flat, grads))
    return results


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_torch(name, dtype):
    (theirs, _), (ours, _) = _run(name, dtype, backward=False)
    assert [f for f, _ in ours] == [f for f, _ in theirs], "named-tuple fields"
    assert len(ours) == len(theirs)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for (field, o), (_, t) in zip(ours, theirs, strict=True):
        o, t = _array(o), _array(t)
        if isinstance(t, np.ndarray):
            assert isinstance(o, np.ndarray), (field, type(o))
            assert o.shape == t.shape and str(o.dtype) == str(t.dtype), (field, o.shape, t.shape, o.dtype, t.dtype)
            np.testing.assert_allclose(o, t, rtol=tol, atol=tol, err_msg=field)
        else:
            assert o == t, (field, o, t)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c[2]))
def test_gradients_match_torch(name, dtype):
    (_, theirs), (_, ours) = _run(name, dtype, backward=True)
    if theirs is None:
        pytest.skip("no floating output to differentiate")
    tol = 1e-5 if dtype == "float32" else 1e-12
    for o, t in zip(ours, theirs, strict=True):
        if t is None:
            assert o is None or not np.any(o.numpy())
            continue
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=tol, atol=tol)


def test_max_with_dim_returns_a_named_tuple_that_unpacks():
    x = ttorch.tensor([[1.0, 9.0], [4.0, 2.0]])  # first axis of length 2: unpacking the old form was silent
    values, indices = x.max(dim=1)
    assert values.tolist() == [9.0, 4.0] and indices.tolist() == [1, 0]
    assert type(x.max(dim=1)).__name__ == "max" and x.min(1)._fields == ("values", "indices")
    assert isinstance(x.max(), tracer.Tensor) and x.max().shape == ()
    with pytest.raises(TypeError, match="amax"):
        x.max(dim=(0, 1))


def test_multihead_attention_defaults_to_sequence_first_and_minus_inf_masks():
    assert nn.MultiheadAttention(4, 2).batch_first is False
    t = torch.nn.MultiheadAttention(4, 2, dtype=torch.float64)
    o = nn.MultiheadAttention(4, 2, dtype="float64")
    o.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    x = rng.standard_normal((5, 2, 4))
    mask = np.triu(np.ones((5, 5), bool), 1)
    out, w = o(x, x, x, attn_mask=mask)
    t_out, t_w = t(torch.tensor(x), torch.tensor(x), torch.tensor(x), attn_mask=torch.tensor(mask))
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-12, atol=1e-12)
    assert (w.numpy()[:, mask] == 0).all()  # exp(-inf): exactly zero, as torch's


def test_parameters_is_a_generator():
    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    params = model.parameters()
    assert iter(params) is params and len(list(params)) == 4 and list(params) == []
    assert next(model.parameters()) is model[0].weight


# ---------------------------------------------------------------- tracegrad's NumPy spellings keep NumPy's meaning


def test_numpy_spelled_functions_keep_numpys_meaning():
    a = X.astype("float64")
    x = tracer.tensor(a)
    np.testing.assert_allclose(tracer.var(x, axis=1).numpy(), a.var(axis=1), rtol=1e-12)
    np.testing.assert_allclose(tracer.std(x).numpy(), a.std(), rtol=1e-12)
    assert [p.shape for p in tracer.split(x, 2, axis=1)] == [q.shape for q in np.split(a, 2, axis=1)]
    np.testing.assert_allclose(tracer.max(x, axis=1).numpy(), a.max(axis=1))
    np.testing.assert_allclose(tracer.take(x, [0, 2], axis=1).numpy(), np.take(a, [0, 2], axis=1))
    with pytest.raises(Exception, match="squeeze"):
        tracer.squeeze(tracer.tensor(COL), 0)
    # ... while the methods of the same names are torch's
    np.testing.assert_allclose(x.var(1).numpy(), a.var(axis=1, ddof=1), rtol=1e-12)
    assert [p.shape for p in x.split(2, dim=1)] == [(3, 2), (3, 2)] and len(x.split(3, dim=1)) == 2


def test_traced_steps_give_torchs_meaning_too():
    import autodiff
    w = tracer.tensor(X.astype("float64"))
    step = autodiff.value_and_grad(lambda: (w.max(dim=1).values.sum() + w.var() + w.split(3, dim=1)[1].sum()),
                                   wrt=[w])
    value, (g,) = step()
    tw = torch.tensor(X, requires_grad=True)
    expected = tw.max(dim=1).values.sum() + tw.var() + tw.split(3, dim=1)[1].sum()
    expected.backward()
    np.testing.assert_allclose(float(value), expected.item(), rtol=1e-12)
    np.testing.assert_allclose(g.numpy(), tw.grad.numpy(), rtol=1e-12)


def test_layer_norm_of_nn_and_functional_agree():
    x = tracer.tensor(X.astype("float32"))
    ln = nn.LayerNorm(4)
    np.testing.assert_allclose(F.layer_norm(x, (4,), ln.weight, ln.bias).numpy(), ln(x).numpy(), rtol=1e-6)
