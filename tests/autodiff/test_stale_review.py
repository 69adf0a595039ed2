"""Review of "a compiled step never runs on stale values" (issue 8, items 1-5), as a demanding user.

Each test runs one scenario through a compiled step and compares it with an eager run of the same Python
(or a fresh value_and_grad on the current state). Some fail today: each says what goes wrong and where.
"""
import functools
import gc
import types
import warnings
import weakref

import numpy as np
import pytest

import autodiff
import nn
import tracer

RNG = np.random.default_rng(0)
X = RNG.normal(size=(8, 2)).astype("float32")


def counting(fn):
    """fn, and the list that grows by one each time fn runs (each trace, or each eager call)."""
    calls = []

    @functools.wraps(fn)
    def counted(*args):
        calls.append(1)
        return fn(*args)
    return counted, calls


def compiled_and_eager(fn, *args, wrt=()):
    """(compiled value, eager value) of fn on args; NumPy arrays become Tensors for the eager run."""
    value, _ = autodiff.value_and_grad(fn, wrt=list(wrt))(*args)
    eager = fn(*[tracer.tensor(a) if isinstance(a, np.ndarray) else a for a in args])
    return value, eager


# ---------------------------------------------------------------- Python-number arguments


def test_in_place_arithmetic_on_a_number_argument():
    # `n += 1` rebinds a Python int; traced as a weak 0-d input it is recorded as a write to argument n,
    # and the step then tries `n[...] = new` on the caller's int (TypeError)
    w = tracer.tensor(np.ones(2, "float32"))

    def fn(x, n):
        n += 1
        return (x @ w).sum() * n

    step = autodiff.value_and_grad(fn, wrt=[w])
    for n in (1, 2):
        np.testing.assert_allclose(float(step(X, n)[0]), float(fn(tracer.tensor(X), n)), rtol=1e-6)


def test_number_argument_arithmetic_with_literals_keeps_the_model_dtype():
    # `s * 0.5`, `1 - s` on a number argument make a strong float64 tensor (promote turns the literal into a
    # non-weak constant, so apply's "all inputs weak" fails) and the float32 loss becomes float64
    w = tracer.tensor(np.ones(2, "float32"))
    for fn in (lambda x, s: (x @ w).sum() * (s * 0.5), lambda x, s: (x @ w).sum() * (1 - s),
               lambda x, s: (x @ w).sum() / (s + 1)):
        value, eager = compiled_and_eager(fn, X, 0.3, wrt=[w])
        assert value.dtype == eager.dtype == "float32"


def test_number_argument_in_float16_model_stays_float16():
    w = tracer.tensor(np.ones(2, "float16"))

    def fn(x, s):
        return (x.astype("float16") @ w).sum() * (s * 0.5)

    value, (g,) = autodiff.value_and_grad(fn, wrt=[w])(X, 0.3)
    assert value.dtype == fn(tracer.tensor(X), 0.3).dtype == "float16"


@pytest.mark.parametrize("make", [lambda s: tracer.tensor(s), lambda s: tracer.maximum(s, 0.1),
                                  lambda s: tracer.where(tracer.tensor([True, False]), s, 0.0)])
def test_tensor_made_from_a_number_argument_has_the_eager_dtype(make):
    # eagerly tracer.tensor(2.5), maximum(2.5, 0.1), where(c, 2.5, 0.0) are float32; from a traced number float64
    w = tracer.tensor(np.ones(2, "float32"))
    value, eager = compiled_and_eager(lambda x, s: (x @ w).sum() * make(s).sum(), X, 2.5, wrt=[w])
    assert eager.dtype == "float32"
    assert value.dtype == "float32"


def test_python_int_arithmetic_does_not_wrap_around():
    # Python ints are exact; as int64 inputs `n * n` wraps to 0 for n = 2**32, silently
    w = tracer.tensor(np.ones(2, "float32"))
    value, eager = compiled_and_eager(lambda x, n: (x @ w).sum() * (n * n), X, 2**32, wrt=[w])
    np.testing.assert_allclose(float(value), float(eager), rtol=1e-6)


def test_python_int_beyond_int64_is_accepted():
    w = tracer.tensor(np.ones(2, "float32"))
    value, eager = compiled_and_eager(lambda x, n: (x @ w).sum() + n, X, 2**63, wrt=[w])
    np.testing.assert_allclose(float(value), float(eager), rtol=1e-6)


def test_int_power_with_a_negative_number_argument():
    # 2 ** -1 is 0.5 in Python; both traced as int64 it is an int power with a negative exponent (ValueError)
    w = tracer.tensor(np.ones(2, "float32"))
    fn = lambda x, n: (x @ w).sum() * (2 ** n)  # noqa: E731
    step = autodiff.value_and_grad(fn, wrt=[w])
    for n in (1, -1):
        np.testing.assert_allclose(float(step(X, n)[0]), float(fn(tracer.tensor(X), n)), rtol=1e-6)


def test_number_argument_used_as_a_dict_key():
    # a traced number hashes by identity: dict.get / `in` miss every key silently, and the miss is baked
    w = tracer.tensor(np.ones(2, "float32"))
    table = {1: 0.5, 2: 0.25}
    fns = [lambda x, n: (x @ w).sum() * table.get(n, 1.0),
           lambda x, n: (x @ w).sum() * (2.0 if n in table else 3.0)]
    for fn in fns:
        step = autodiff.value_and_grad(fn, wrt=[w])
        for n in (1, 2, 5):
            np.testing.assert_allclose(float(step(X, n)[0]), float(fn(tracer.tensor(X), n)), rtol=1e-6)


@pytest.mark.parametrize("scalar", [np.float64, np.float32, np.int64])
def test_numpy_scalar_arguments_are_inputs_too(scalar):
    # a learning rate from a NumPy schedule (np.cos(...) is np.float64) is baked: one trace per value
    w = tracer.tensor(np.ones(2, "float32"))
    fn, calls = counting(lambda x, lr: (x @ w).sum() * lr)
    step = autodiff.value_and_grad(fn, wrt=[w])
    for k in range(1, 11):
        value, _ = step(X, scalar(k))
        np.testing.assert_allclose(float(value), float(X.sum() * k), rtol=1e-5)
    assert len(calls) <= 2


def test_numbers_baked_per_value_do_not_grow_the_cache_forever():
    # a dropout rate as an argument is baked (one trace per value, documented); every trace is kept forever
    w = tracer.tensor(np.ones(2, "float32"))
    step = autodiff.value_and_grad(lambda x, p: tracer.dropout(x @ w, p).sum(), wrt=[w])
    for k in range(40):
        step(X, 0.01 * k)
    assert sum(len(v) for v in step.cache.values()) <= 16


def test_negative_and_out_of_range_index_arguments_match_eager():
    w = tracer.tensor(np.ones(2, "float32"))
    fn = lambda x, i: (x[i] * w).sum()  # noqa: E731
    step = autodiff.value_and_grad(fn, wrt=[w])
    for i in (0, -1, 3, -8):
        np.testing.assert_allclose(float(step(X, i)[0]), float(fn(tracer.tensor(X), i)), rtol=1e-6)
    for i in (8, -9):
        with pytest.raises(IndexError):
            step(X, i)
        with pytest.raises(IndexError):
            fn(tracer.tensor(X), i)


@pytest.mark.parametrize("dtype", ["float16", "float64", "int32", "int64", "bool"])
@pytest.mark.parametrize("number", [3, 2.5, -2])
def test_number_argument_promotes_with_each_tensor_dtype_as_eagerly(dtype, number):
    from tracer.trace import trace_function

    a = (np.abs(X) * 3).astype(dtype)
    fn = lambda x, n: (x * n, x + n, x / n, x - n, n * x)  # noqa: E731
    eager = [t.dtype for t in fn(tracer.tensor(a), number)]
    traced = trace_function(fn, [a, number], scalars_as_inputs=True)
    assert [f.type.dtype for f in traced.mod["main"].body.fields] == eager


# ---------------------------------------------------------------- rebinding and containers


def assert_step_sees(fn, mutate):
    """Trace fn, mutate what it reads, and compare the next compiled call with an eager one."""
    step = autodiff.value_and_grad(fn, wrt=[])
    step(X)
    mutate()
    np.testing.assert_allclose(float(step(X)[0]), float(fn(tracer.tensor(X))), rtol=1e-5)


class _Grown(nn.Module):
    """A module whose forward reads what it holds now: its blocks, its parameters(), an optional attribute."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(2, 2)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        out = x.sum() + sum((p ** 2).sum() for p in self.parameters())
        extra = getattr(self, "extra", None)
        return out if extra is None else out + extra.sum()


def test_sequential_append_is_seen():
    # Sequential.forward iterates self._modules, a "mirror" capture never walks; the Sequential keeps its
    # identity and its attribute dict has no length guard, so the two-layer trace is replayed
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    assert_step_sees(lambda x: model(x).sum(), lambda: model.append(nn.Linear(2, 2)))


@pytest.mark.parametrize("change", ["block appended", "parameter added", "attribute added"])
def test_module_that_grows_is_seen(change):
    model = _Grown()
    mutate = {"block appended": lambda: model.blocks.append(nn.Linear(2, 2)),
              "parameter added": lambda: setattr(model, "scale", nn.Parameter(np.full(3, 10.0, "float32"))),
              "attribute added": lambda: setattr(model, "extra", tracer.tensor(np.full(2, 100.0, "float32")))}
    assert_step_sees(model, mutate[change])


@pytest.mark.parametrize("container", ["list", "sequential"])
def test_one_module_in_many_slots_then_one_slot_replaced(container):
    # capture records at most 4 routes to one object: slots 5 and 6 of [block] * 6 are never guarded
    block = nn.Linear(2, 2)
    layers = [block] * 6 if container == "list" else nn.Sequential(*[block] * 6)

    def fn(x):
        for layer in layers:
            x = layer(x)
        return x.sum()

    step = autodiff.value_and_grad(fn, wrt=[])
    step(X)
    if container == "list":
        layers[5] = nn.Linear(2, 2)
    else:
        setattr(layers, "5", nn.Linear(2, 2))
    np.testing.assert_allclose(float(step(X)[0]), float(fn(tracer.tensor(X))), rtol=1e-5)


def test_dict_reordered_is_seen():
    heads = {"a": nn.Linear(2, 2), "b": nn.Linear(2, 2)}
    heads["a"].weight.copy_(np.array([[2.0, 0.0], [0.0, 2.0]], "float32"))

    def fn(x):
        for h in heads.values():
            x = tracer.tanh(h(x))
        return x.sum()

    step = autodiff.value_and_grad(fn, wrt=[])
    step(X)
    heads["a"] = heads.pop("a")  # the same objects, now applied b first
    np.testing.assert_allclose(float(step(X)[0]), float(fn(tracer.tensor(X))), rtol=1e-5)


def test_tied_weights_untied_and_submodule_swapped():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(2, 2, bias=False)
            self.dec = nn.Linear(2, 2, bias=False)
            self.dec.weight = self.enc.weight

        def forward(self, x):
            return (self.dec(self.enc(x)) ** 2).sum()

    model = Net()
    step = autodiff.value_and_grad(model, wrt=model.parameters())
    step(X)
    model.dec.weight = nn.Parameter(model.enc.weight.numpy() * 2)
    value, _ = step(X)
    np.testing.assert_allclose(float(value), float(model(tracer.tensor(X))), rtol=1e-5)
    model.enc = nn.Sequential(nn.Linear(2, 2, bias=False), nn.Tanh())
    with pytest.raises(ValueError, match=r"wrt\[0\] \(weight, shape \(2, 2\), float32\)"):
        step(X)  # wrt names the old encoder's weight, which fn no longer reaches
    value, _ = autodiff.value_and_grad(model, wrt=model.parameters())(X)
    np.testing.assert_allclose(float(value), float(model(tracer.tensor(X))), rtol=1e-5)


def test_tensors_in_a_tuple_argument():
    # JAX style loss(params, x): a tuple argument is a hashable Python value keyed by identity, so each new
    # tuple traces again and is kept in the cache forever
    fn, calls = counting(lambda params, x: ((x @ params[0]) * params[1]).sum())
    step = autodiff.value_and_grad(fn, wrt=[])
    for i in range(1, 6):
        params = (tracer.tensor(np.full(2, float(i), "float32")), tracer.tensor(np.ones(1, "float32")))
        np.testing.assert_allclose(float(step(params, X)[0]), i * float(X.sum()), rtol=1e-5)
    assert len(calls) == 1
    assert len(step.cache) == 1


# ---------------------------------------------------------------- where tensors are found: retrace traps

HELPERS = types.ModuleType("helpers")
exec("import numpy as np\nimport tracer\nW = tracer.tensor(np.ones(2, 'float32'))\n"  # noqa: S102
     "def apply_w(x):\n    return x @ W\n", HELPERS.__dict__)


def assert_traced_once(fn, calls: int = 3):
    """A step of fn called `calls` times on the same state traces once and warns nothing."""
    fn, traces = counting(fn)
    step = autodiff.value_and_grad(fn, wrt=[])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(calls):
            step(X)
    assert len(traces) == 1
    return step


def test_helper_reached_as_a_module_attribute_is_found_again():
    # `helpers.apply_w(x)`: capture never expands a Python module, so W is "missing": a warning and a
    # trace on every call
    step = assert_traced_once(lambda x: HELPERS.apply_w(x).sum())
    HELPERS.W = tracer.tensor(np.full(2, 2.0, "float32"))
    try:
        np.testing.assert_allclose(float(step(X)[0]), 2 * float(X.sum()), rtol=1e-5)
    finally:
        HELPERS.W = tracer.tensor(np.ones(2, "float32"))


def test_class_attribute_tensor_is_found_again():
    # capture walks an instance's __dict__ and its user methods, never its class's attributes
    class Net:
        table = tracer.tensor(np.ones(2, "float32"))

        def __call__(self, x):
            return (x @ self.table).sum()

    assert_traced_once(Net())


def test_large_unrelated_structure_does_not_hide_the_model():
    # the breadth-first search spends its 20 000 expansions on a list of dicts before the model's
    # submodules: the weights are "missing" and every call traces
    model = nn.Sequential(nn.Sequential(nn.Linear(2, 1)))
    records = [{"id": i} for i in range(30_000)]
    assert_traced_once(lambda x: model(x).sum() * (1.0 if records else 0.0))


def test_realistic_training_loop_traces_once_per_mode():
    model = nn.Sequential(nn.Linear(2, 8), nn.Dropout(0.1), nn.Tanh(), nn.Linear(8, 1))
    opt = nn.optim.Adam(model.parameters(), lr=1e-2)

    def loss(x, scale):
        return (model(x) ** 2).mean() * scale

    loss, calls = counting(loss)
    step = autodiff.value_and_grad(loss, wrt=model.parameters())
    for i in range(12):
        model.train(i % 4 != 3)
        _, grads = step(X, 1.0 / (i + 1))
        grads, _ = nn.optim.clip_grad_norm(grads, 1.0)
        opt.step(grads)
    assert len(calls) == 2


# ---------------------------------------------------------------- memory


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)

    def forward(self, x):
        return self.fc(x).sum()


def test_replaced_parameter_is_not_kept_alive():
    # (was) _Compiled.guards_hold, a bound method of Traced, kept Traced.captured alive: every
    # tensor of the first trace (here the replaced weight) stays alive as long as the entry does
    model = _Net()
    step = autodiff.value_and_grad(lambda x: model(x), wrt=[])
    step(X)
    old = weakref.ref(model.fc.weight)
    model.fc.weight = nn.Parameter(np.ones((1, 2), "float32"))
    step(X)
    gc.collect()
    assert old() is None


def test_rebound_model_is_not_kept_alive():
    # the identity guards (Sources.program's expected objects) hold the old model strongly
    box = {"model": _Net()}
    step = autodiff.value_and_grad(lambda x: box["model"](x), wrt=[])
    step(X)
    old = weakref.ref(box["model"])
    box["model"] = _Net()
    step(X)
    gc.collect()
    assert old() is None


def test_models_passed_as_arguments_are_not_kept_alive():
    # the cache key ("py", type, model) holds each model passed, forever, and the key set grows without bound
    step = autodiff.value_and_grad(lambda m, x: m(x), wrt=[])
    refs = []
    for _ in range(3):
        m = _Net()
        refs.append(weakref.ref(m))
        step(m, X)
    del m
    gc.collect()
    assert [r() is None for r in refs[:-1]] == [True, True]


# ---------------------------------------------------------------- randomness


def test_generator_inside_fn_draws_anew_each_call():
    # create._seed draws from a Generator at trace time: the seed is baked and every replay adds the same noise
    w = tracer.tensor(np.ones(2, "float32"))

    def fn(x):
        return (x @ w + tracer.randn(8, generator=gen)).sum()

    gen = tracer.Generator(0)
    eager = [float(fn(tracer.tensor(X))) for _ in range(3)]
    gen = tracer.Generator(0)
    step = autodiff.value_and_grad(fn, wrt=[w])
    np.testing.assert_allclose([float(step(X)[0]) for _ in range(3)], eager, rtol=1e-5)


def test_dropout_module_seeded_through_train_eval_switches():
    def make():
        m = nn.Sequential(nn.Linear(2, 16), nn.Dropout(0.5), nn.Linear(16, 1))
        for k, p in enumerate(m.parameters()):
            p.copy_(np.random.default_rng(k).normal(size=p.shape).astype("float32"))
        return m

    modes = [True, True, False, True, False, True]
    m = make()
    tracer.manual_seed(0)
    eager = [float(m.train(mode)(tracer.tensor(X)).sum()) for mode in modes]
    m = make()
    step = autodiff.value_and_grad(lambda x: m(x).sum(), wrt=m.parameters())
    tracer.manual_seed(0)
    compiled = [float(step(X)[0]) for mode in modes if m.train(mode)]
    np.testing.assert_allclose(compiled, eager, rtol=1e-5)


def test_dropout_inside_grad_of_grad_matches_eager():
    w = tracer.tensor(np.ones(16, "float32"))
    x = np.ones((4, 16), "float32")
    inner = autodiff.grad(lambda x: (tracer.dropout(x * w, 0.5) ** 2).sum(), wrt=[w])
    outer = lambda x: (inner(x)[0] ** 2).sum()  # noqa: E731
    tracer.manual_seed(0)
    step = autodiff.value_and_grad(outer, wrt=[w])
    compiled = [float(step(x)[0]) for _ in range(3)]
    tracer.manual_seed(0)
    assert compiled == [float(outer(tracer.tensor(x))) for _ in range(3)]
    assert len(set(compiled)) > 1


# ---------------------------------------------------------------- in-place writes inside a trace


def _view_cases():
    w = tracer.tensor(np.ones(3, "float32"))

    def basic_index_then_in_place_on_view(x):
        h = x * w
        v = h[0]
        v += 1.0
        return (h * h).sum()

    def reshape_view_mul_(x):
        h = x * w
        v = h.reshape(3, 2)
        v.mul_(2.0)
        return (h * h).sum()

    def transpose_then_base_add_(x):
        h = x * w
        v = h.T
        h.add_(1.0)
        return (v * v).sum()

    def setitem_on_base_read_through_view(x):
        h = x * w
        v = h[0]
        h[0] = 5.0
        return (v * h).sum()

    return w, [basic_index_then_in_place_on_view, reshape_view_mul_, transpose_then_base_add_,
               setitem_on_base_read_through_view]


@pytest.mark.parametrize("case", range(4))
def test_in_place_through_views_inside_a_trace_matches_eager(case):
    # eager indexing/reshape/.T return NumPy views, so an in-place write shows through (as in torch); a
    # trace holds values, not buffers, so it refuses (TraceError naming the view) rather than differ
    w, fns = _view_cases()
    x = np.arange(6, dtype="float32").reshape(2, 3)
    float(fns[case](tracer.tensor(x)))  # eagerly fine
    with pytest.raises(tracer.TraceError, match="view"):
        autodiff.value_and_grad(fns[case], wrt=[w])(x)


def test_eager_views_agree_with_torch():
    torch = pytest.importorskip("torch")
    _, fns = _view_cases()
    x = np.arange(6, dtype="float32").reshape(2, 3)
    eager = [float(f(tracer.tensor(x))) for f in fns]
    t = torch.tensor(x)
    h = t * 1
    v = h[0]
    v += 1
    ref = [float((h * h).sum())]
    h = t * 1
    h.reshape(3, 2).mul_(2)
    ref.append(float((h * h).sum()))
    h = t * 1
    v = h.T
    h.add_(1)
    ref.append(float((v * v).sum()))
    h = t * 1
    v = h[0]
    h[0] = 5.0
    ref.append(float((v * h).sum()))
    assert eager == ref


def test_argument_aliasing_a_written_captured_tensor():
    # eagerly x is buf, so the copy_ is seen through x; compiled, x is an input holding the old values
    buf = tracer.tensor(np.zeros(2, "float32"))
    w = tracer.tensor(np.ones(2, "float32"))

    def fn(x):
        buf.copy_(x + 1.0)
        return (x * w).sum()

    eager = float(fn(buf))
    assert eager == 2.0 and buf.numpy().tolist() == [1.0, 1.0]
    buf.zero_()
    # the compiled step cannot alias an input with a written capture: it refuses instead of differing
    step = autodiff.value_and_grad(fn, wrt=[w])
    with pytest.raises(ValueError, match=r"argument args\[0\] is the same tensor that fn writes"):
        step(buf)
    value, _ = step(buf.clone())
    assert buf.numpy().tolist() == [1.0, 1.0] and float(value) == 0.0


def test_in_place_on_tensor_and_array_arguments_matches_eager():
    w = tracer.tensor(np.ones(2, "float32"))

    def fn(x):
        x += 1.0
        x *= 2.0
        return (x @ w).sum()

    step = autodiff.value_and_grad(fn, wrt=[w])
    xc, xe, xa = tracer.tensor(X), tracer.tensor(X), X.copy()
    for _ in range(2):
        np.testing.assert_allclose(float(step(xc)[0]), float(fn(xe)), rtol=1e-6)
    np.testing.assert_allclose(xc.numpy(), xe.numpy(), rtol=1e-6)
    step(xa)
    np.testing.assert_allclose(xa, (X + 1) * 2, rtol=1e-6)


@pytest.mark.parametrize("dtype,src", [("float32", np.arange(3.0)), ("int64", np.array([1.7, -1.7, 2.5])),
                                       ("float16", np.array([7e4, 1e-8, 1.0])), ("bool", np.array([0.0, 2.0, -0.0]))])
def test_copy_with_broadcast_and_cast_same_eager_and_compiled(dtype, src):
    eager, written = tracer.tensor(np.zeros((2, 3), dtype)), tracer.tensor(np.zeros((2, 3), dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # float16 overflow, on purpose
        eager.copy_(src)
        autodiff.value_and_grad(lambda x: (written.copy_(src), x.sum())[1], wrt=[])(np.zeros(3, "float32"))
    np.testing.assert_array_equal(written.numpy(), eager.numpy())


def test_has_aux_with_writes_in_grad_and_grad_of_grad():
    stat = tracer.tensor(np.zeros(2, "float32"))
    w = tracer.tensor(np.ones(2, "float32"))

    def inner(x):
        h = x * w
        stat.add_(h.mean(0))
        return (h ** 2).sum(), h.mean()

    grad_inner = autodiff.grad(inner, wrt=[w], has_aux=True)

    def outer(x):
        (g,), aux = grad_inner(x)
        return (g ** 2).sum() + aux

    step = autodiff.value_and_grad(outer, wrt=[w])
    compiled = [float(step(X)[0]) for _ in range(2)]
    after = stat.numpy().copy()
    stat.zero_()
    assert compiled == [float(outer(tracer.tensor(X))) for _ in range(2)]
    np.testing.assert_allclose(after, stat.numpy(), rtol=1e-6)
    np.testing.assert_allclose(after, 2 * X.mean(0), rtol=1e-5)


# ---------------------------------------------------------------- check=True: no false alarms


def test_check_never_raises_for_a_step_that_did_not_change():
    model = nn.Sequential(nn.Linear(2, 4), nn.Dropout(0.5), nn.Linear(4, 1))
    stat = tracer.tensor(np.zeros(4, "float32"))
    def fn(x, scale):
        h = model[0](x)
        stat.copy_(stat * 0.9 + h.mean(0) * 0.1)
        noise = tracer.randn(8, 1) * 0.01
        # made on each call: the parameters now (a step made once would name a replaced weight: ValueError)
        inner = autodiff.grad(lambda x: (model(x) ** 2).sum(), wrt=model.parameters())
        second = sum((g ** 2).sum() for g in inner(x))
        return ((model(x) + noise) ** 2).mean() * scale + second * 1e-3

    step = autodiff.value_and_grad(fn, wrt=model[2].parameters(), check=True)  # a layer never replaced
    for i in range(3):
        step(X, float(i))
    model.eval()
    step(X, 1.0)
    model.train()
    step(X, 2.0)
    model[0].weight = nn.Parameter(np.ones((4, 2), "float32"))  # a new object of the same type: no retrace
    step(X, 1.0)
    step(X, 1.0)


# ---------------------------------------------------------------- rebinding through every kind of fn (these pass)


def _full(v):
    return tracer.tensor(np.full(2, v, "float32"))


def _closure_of_closure():
    w = _full(1.0)

    def mid():
        def inner(x):
            return (x @ w).sum()
        return inner

    def rebind(v):
        nonlocal w
        w = _full(v)
    return mid(), rebind


def _partial_keyword():
    box = {"w": _full(1.0)}
    return functools.partial(lambda x, holder: (x @ holder["w"]).sum(), holder=box), \
        lambda v: box.__setitem__("w", _full(v))


def _bound_method():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = _full(1.0)

        def loss(self, x):
            return (x @ self.w).sum()

    m = M()
    return m.loss, lambda v: setattr(m, "w", _full(v))


def _callable_object():
    class C:
        def __init__(self):
            self.ws = [_full(1.0)]

        def __call__(self, x):
            return (x @ self.ws[0]).sum()

    c = C()
    return c, lambda v: c.ws.__setitem__(0, _full(v))


def _module_in_partial_argument():
    m = nn.Module()
    m.inner = nn.Module()
    m.inner.w = _full(1.0)
    return functools.partial(lambda m, x: (x @ m.inner.w).sum(), m), lambda v: setattr(m.inner, "w", _full(v))


def _written_buffer_rebound():
    bn = nn.Module()
    bn.stat = _full(0.0)

    def fn(x):
        bn.stat.copy_(bn.stat + 1.0)
        return (x @ bn.stat).sum()

    def rebind(v):
        bn.stat = _full(v - 1.0)
    return fn, rebind


@pytest.mark.parametrize("make", [_closure_of_closure, _partial_keyword, _bound_method, _callable_object,
                                  _module_in_partial_argument, _written_buffer_rebound])
def test_rebinding_seen_through_each_kind_of_fn_without_retracing(make):
    fn, rebind = make()
    fn, calls = counting(fn)
    step = autodiff.value_and_grad(fn, wrt=[])
    for v in (1.0, 2.0, 3.0):
        rebind(v)
        np.testing.assert_allclose(float(step(X)[0]), v * float(X.sum()), rtol=1e-5)
    assert len(calls) == 1


def test_grad_of_grad_sees_a_weight_rebound_under_the_inner_function():
    w = _full(1.0)
    p = tracer.tensor(np.ones(1, "float32"))
    inner = autodiff.grad(lambda x: (((x @ w) * p) ** 2).sum(), wrt=[p])
    outer, calls = counting(lambda x: (inner(x)[0] ** 2).sum())
    step = autodiff.value_and_grad(outer, wrt=[p])
    for v in (1.0, 2.0, 3.0):
        w = _full(v)
        np.testing.assert_allclose(float(step(X)[0]), float(outer(tracer.tensor(X))), rtol=1e-5)
    assert len(calls) == 1 + 3  # one trace, three eager references
