"""Issue 22 item 2: ops whose output shape depends on values are exact eagerly and a TraceError naming the op
inside a trace; searchsorted, bucketize and histc with a range trace. Compared with torch."""
import numpy as np
import pytest

import autodiff
import ir
import tracer
from tests.torch_optional import torch

X = np.array([[3, 0, 1], [1, 3, 0]], "int64")
F = np.array([[0.5, -1.0, 2.0], [0.0, 2.0, 0.25]], "float32")


def _same(ours, theirs):
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            _same(a, b)
        return
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    assert ours.shape == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


CASES = [
    ("nonzero", lambda m, a: m.nonzero(a), X),
    ("nonzero_tuple", lambda m, a: m.nonzero(a, as_tuple=True), X),
    ("nonzero_0d", lambda m, a: m.nonzero(a), np.asarray(5, "int64")),
    ("argwhere", lambda m, a: m.argwhere(a), F),
    ("masked_select", lambda m, a: m.masked_select(a, a > 0.4), F),
    ("masked_select_broadcast", lambda m, a: m.masked_select(a, m.tensor(np.array([True, False, True]))), F),
    ("unique", lambda m, a: m.unique(a), X),
    ("unique_all", lambda m, a: m.unique(a, sorted=True, return_inverse=True, return_counts=True), X),
    ("unique_dim", lambda m, a: m.unique(a, return_inverse=True, return_counts=True, dim=1),
     np.array([[1, 0, 1], [2, 5, 2]], "int64")),
    ("unique_consecutive", lambda m, a: m.unique_consecutive(a, return_inverse=True, return_counts=True),
     np.array([1, 1, 2, 2, 1, 3], "int64")),
    ("unique_consecutive_dim", lambda m, a: m.unique_consecutive(a, return_counts=True, dim=0),
     np.array([[1, 2], [1, 2], [0, 2]], "int64")),
    ("bincount", lambda m, a: m.bincount(a, minlength=7), np.array([0, 1, 1, 4], "int64")),
    ("bincount_weights", lambda m, a: m.bincount(a, weights=m.tensor(np.array([0.5, 1.0, 2.0, 4.0], "float32"))),
     np.array([0, 1, 1, 4], "int64")),
    ("histc_range", lambda m, a: m.histc(a, bins=4, min=-1, max=2), F),
    ("histc_data_range", lambda m, a: m.histc(a, bins=5), F),
    ("searchsorted", lambda m, a: m.searchsorted(m.tensor(np.array([-1.0, 0.25, 2.0], "float32")), a), F),
    ("searchsorted_right", lambda m, a: m.searchsorted(m.tensor(np.array([-1.0, 0.25, 2.0], "float32")), a,
                                                       side="right"), F),
    ("searchsorted_nd", lambda m, a: m.searchsorted(m.tensor(np.sort(F, -1)), a, right=True), F),
    ("searchsorted_sorter", lambda m, a: m.searchsorted(m.tensor(np.array([2.0, -1.0, 0.25], "float32")), a,
                                                        sorter=m.tensor(np.array([1, 2, 0]))), F),
    ("bucketize", lambda m, a: m.bucketize(a, m.tensor(np.array([-1.0, 0.25, 2.0], "float32")), right=True), F),
    ("bucketize_int32", lambda m, a: m.bucketize(a, m.tensor(np.array([0, 2], "int64")), out_int32=True), X),
]


@pytest.mark.parametrize("name, fn, a", CASES, ids=[c[0] for c in CASES])
def test_eager_matches_torch(name, fn, a):
    _same(fn(tracer, tracer.tensor(a)), fn(torch, torch.tensor(a)))


@pytest.mark.parametrize("name", ["nonzero", "argwhere", "masked_select", "unique", "unique_consecutive", "bincount",
                                  "histc_data_range"])
def test_inside_a_trace_a_trace_error_names_the_op(name):
    fn, a = next((f, a) for n, f, a in CASES if n == name)
    op = name.replace("_data_range", "")
    with pytest.raises(tracer.TraceError, match=rf"{op} inside a trace: its output shape depends on the values.*"
                                                r"outside the traced step.*mask"):
        tracer.trace(lambda t: fn(tracer, t), a)
    w = tracer.tensor(F)
    with pytest.raises(tracer.TraceError, match=op):  # in a compiled step, even on a captured (concrete) tensor
        autodiff.value_and_grad(lambda: (w * fn(tracer, tracer.tensor(a)).sum()).sum(), w)()


@pytest.mark.parametrize("name", ["searchsorted", "searchsorted_nd", "searchsorted_sorter", "bucketize",
                                  "bucketize_int32", "histc_range"])
def test_static_shape_ops_trace(name):
    fn, a = next((f, a) for n, f, a in CASES if n == name)
    mod = tracer.trace(lambda t: fn(tracer, t), a)
    out = ir.Executor(mod)["main"](a)
    _same(tracer.tensor(out), fn(torch, torch.tensor(a)))


def test_searchsorted_inside_value_and_grad_and_scalar_values():
    w = tracer.tensor(F)
    edges = tracer.tensor(np.array([0.0, 1.0], "float32"))

    def loss():
        return (w * tracer.bucketize(w, edges)).sum()
    value, g = autodiff.value_and_grad(loss, w)()
    tw = torch.tensor(F, requires_grad=True)
    tl = (tw * torch.bucketize(tw, torch.tensor([0.0, 1.0]))).sum()
    tl.backward()
    assert abs(value.item() - tl.item()) < 1e-6
    np.testing.assert_allclose(g.numpy(), tw.grad.numpy())
    _same(tracer.searchsorted(tracer.tensor([1, 3, 5]), 3), torch.searchsorted(torch.tensor([1, 3, 5]), 3))
    _same(tracer.searchsorted(tracer.tensor([1, 3, 5]), 3.5), torch.searchsorted(torch.tensor([1, 3, 5]), 3.5))


def test_masked_select_gradient_scatters_back_as_torch():
    x = tracer.tensor(F, requires_grad=True)
    (tracer.masked_select(x, x > 0.4) * tracer.tensor([1.0, 2.0, 3.0])).sum().backward()
    t = torch.tensor(F, requires_grad=True)
    (torch.masked_select(t, t > 0.4) * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("fn", [
    lambda m: m.bincount(m.tensor([-1, 2])),
    lambda m: m.bincount(m.tensor([[1, 2]])),
    lambda m: m.searchsorted(m.tensor([1, 2]), m.tensor([1]), right=True, side="left"),
    lambda m: m.bucketize(m.tensor([1]), m.tensor([[1, 2]])),
    lambda m: m.histc(m.tensor([1.0]), bins=3, min=2, max=1),
])
def test_errors_as_torch(fn):
    with pytest.raises(RuntimeError) as theirs:
        fn(torch)
    with pytest.raises(type(theirs.value)):
        fn(tracer)
