"""The Module API against torch.nn.Module (issue 21 item 1): generators and their arguments, registration and
lookup with torch's errors, forward hooks eagerly and in compiled steps, casts, state dicts (torch's keys, error
text, strict=False result, BatchNorm's num_batches_tracked both ways), reprs, device=/dtype= factory arguments."""
import types

import numpy as np
import pytest

import autodiff
import nn
import tracer

torch = pytest.importorskip("torch")
tnn = torch.nn
RNG = np.random.default_rng(1)
X = RNG.standard_normal((2, 4)).astype("float32")


def build(lib):
    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.shared = lib.Linear(4, 4)
            self.body = lib.Sequential(self.shared, lib.ReLU(), lib.Dropout(0.1), self.shared)
            self.blocks = lib.ModuleList([lib.Linear(4, 4, bias=False) for _ in range(2)])
            self.heads = lib.ModuleDict({"ln": lib.LayerNorm(4), "emb": lib.Embedding(6, 4, padding_idx=0)})
            self.conv = lib.Conv2d(1, 2, 3, stride=2, padding=1, bias=False)
            self.bn = lib.BatchNorm1d(4)
            self.register_buffer("steps", (torch if lib is tnn else tracer).zeros(3), persistent=False)

        def forward(self, x):
            x = self.body(x)
            for b in self.blocks:
                x = b(x)
            return self.heads["ln"](x)

    return Net()


def names(it):
    return [n for n, _ in it]


def test_traversals_are_generators_with_torchs_names_and_arguments():
    ours, theirs = build(nn), build(tnn)
    for method in ("parameters", "named_parameters", "buffers", "named_buffers", "named_modules", "modules",
                   "children", "named_children"):
        assert isinstance(getattr(ours, method)(), types.GeneratorType), method
    assert names(ours.named_parameters()) == names(theirs.named_parameters())
    assert names(ours.named_parameters(prefix="m", recurse=True)) == names(theirs.named_parameters(prefix="m"))
    assert names(ours.named_parameters(remove_duplicate=False)) == names(theirs.named_parameters(
        remove_duplicate=False))
    assert names(ours.bn.named_parameters(recurse=False)) == ["weight", "bias"]
    assert names(ours.named_buffers()) == names(theirs.named_buffers())
    assert names(ours.named_buffers(recurse=False)) == names(theirs.named_buffers(recurse=False)) == ["steps"]
    assert names(ours.named_modules()) == names(theirs.named_modules())
    assert names(ours.named_modules(prefix="net", remove_duplicate=False)) == \
        names(theirs.named_modules(prefix="net", remove_duplicate=False))
    assert names(ours.named_children()) == names(theirs.named_children())
    assert len(list(ours.modules())) == len(list(theirs.modules()))


def test_state_dict_keys_non_persistent_buffers_and_arguments_as_torch():
    ours, theirs = build(nn), build(tnn)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert "steps" not in ours.state_dict() and "bn.num_batches_tracked" in ours.state_dict()
    assert list(ours.state_dict(prefix="p.")) == list(theirs.state_dict(prefix="p."))
    kept = ours.state_dict(keep_vars=True)
    assert kept["shared.weight"] is ours.shared.weight
    dest = {"x": 1}
    assert ours.state_dict(destination=dest) is dest and list(dest)[1:] == list(theirs.state_dict())


def test_load_torch_state_dicts_both_ways_with_batchnorm_counters():
    ours, theirs = build(nn), build(tnn)
    theirs.bn.train()
    theirs.bn(torch.randn(5, 4))
    theirs.bn(torch.randn(5, 4))
    ours.load_state_dict(theirs.state_dict())  # torch tensors directly
    assert ours.bn.num_batches_tracked.dtype == "int64" and int(ours.bn.num_batches_tracked.item()) == 2
    np.testing.assert_array_equal(ours.bn.running_var.numpy(), theirs.bn.running_var.numpy())
    ours.bn(RNG.standard_normal((5, 4)).astype("float32"))
    assert int(ours.bn.num_batches_tracked.item()) == 3
    back = build(tnn)
    back.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in ours.state_dict().items()})
    assert int(back.bn.num_batches_tracked) == 3
    old_style = {k: v for k, v in theirs.bn.state_dict().items() if k != "num_batches_tracked"}
    assert tuple(nn.BatchNorm1d(4).load_state_dict(old_style)) == tuple(tnn.BatchNorm1d(4).load_state_dict(old_style))


def test_load_state_dict_results_and_errors_in_torchs_words():
    ours, theirs = nn.Linear(2, 3), tnn.Linear(2, 3)
    partial = {"weight": np.zeros((3, 2), "float32"), "junk": np.zeros(1, "float32")}
    got = ours.load_state_dict(partial, strict=False)
    want = theirs.load_state_dict({k: torch.tensor(v) for k, v in partial.items()}, strict=False)
    assert got == (want.missing_keys, want.unexpected_keys) and got.missing_keys == ["bias"]
    bad = {"weight": np.zeros((2, 2), "float32"), "junk": np.zeros(1, "float32")}
    with pytest.raises(RuntimeError) as ours_error:
        ours.load_state_dict(bad)
    with pytest.raises(RuntimeError) as torch_error:
        theirs.load_state_dict({k: torch.tensor(v) for k, v in bad.items()})
    assert str(ours_error.value) == str(torch_error.value)
    new = {"weight": np.ones((3, 2)), "bias": np.ones(3)}  # float64 values
    ours.load_state_dict(new)
    assert ours.weight.dtype == "float32"  # copied into the float32 parameter
    ours.load_state_dict(new, assign=True)
    assert ours.weight.dtype == "float64" and isinstance(ours.weight, nn.Parameter)


def test_registration_and_lookup_errors_as_torch():
    for lib in (nn, tnn):
        m = lib.Linear(2, 2)
        with pytest.raises(KeyError, match="already exists"):
            m.register_buffer("forward", None)
        with pytest.raises(KeyError, match="contain"):
            m.add_module("a.b", lib.ReLU())
        with pytest.raises(TypeError, match="is not a Module subclass"):
            m.add_module("x", 3)
        with pytest.raises(TypeError, match="cannot assign"):
            m.register_parameter("p", np.zeros(2) if lib is nn else torch.zeros(2))
        with pytest.raises(KeyError, match="empty string"):
            m.register_parameter("", None)
    ours, theirs = build(nn), build(tnn)
    ours.register_module("extra", nn.Tanh())
    ours.register_parameter("scale", nn.Parameter(np.ones(2, "float32")))
    assert names(ours.named_parameters())[0] == "scale" and ours.get_submodule("extra") is ours.extra
    assert ours.get_submodule("blocks.1") is ours.blocks[1] and ours.get_submodule("") is ours
    assert ours.get_parameter("heads.ln.weight") is ours.heads["ln"].weight
    assert ours.get_buffer("bn.running_mean") is ours.bn.running_mean
    for m in (ours, theirs):
        for call, target, text in ((m.get_submodule, "body.9", "has no attribute `9`"),
                                   (m.get_parameter, "bn.running_mean", "`running_mean` is not an nn.Parameter"),
                                   (m.get_buffer, "bn.weight", "`weight` is not a buffer")):
            with pytest.raises(AttributeError, match=text):
                call(target)


def hooks_trace(lib):
    """Fire order and rewrites of pre/forward hooks (prepend, with_kwargs, remove) on a small model."""
    log = []
    model = lib.Sequential(lib.Linear(4, 3), lib.ReLU())
    h1 = model.register_forward_hook(lambda m, a, out: log.append(("post", type(m).__name__)))
    model.register_forward_hook(lambda m, a, out: log.append(("post-first",)), prepend=True)
    model[0].register_forward_pre_hook(lambda m, a: (a[0] * 2,))
    model[0].register_forward_pre_hook(lambda m, a, kw: log.append(("pre-kw", sorted(kw))) or None, with_kwargs=True)
    model[1].register_forward_hook(lambda m, a, kw, out: out + 1, with_kwargs=True)
    model.load_state_dict(shared_state)
    x = torch.tensor(X) if lib is tnn else X
    first = model(x)
    h1.remove()
    h1.remove()  # twice: nothing happens
    second = model(x)
    return log, np.asarray(first.detach().numpy() if lib is tnn else first.numpy()), np.asarray(
        second.detach().numpy() if lib is tnn else second.numpy())


shared_state = {"0.weight": RNG.standard_normal((3, 4)).astype("float32"), "0.bias": np.zeros(3, "float32")}


def test_forward_hooks_fire_and_rewrite_as_torch():
    shared_state_torch = {k: torch.tensor(v) for k, v in shared_state.items()}
    ours = hooks_trace(nn)
    globals()["shared_state"], saved = shared_state_torch, shared_state
    try:
        theirs = hooks_trace(tnn)
    finally:
        globals()["shared_state"] = saved
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5)


def test_hooks_run_inside_a_compiled_step_and_changes_retrace():
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh())
    step = autodiff.value_and_grad(lambda x: (model(x) ** 2).sum(), wrt=list(model.parameters()))

    def eager_value():
        return float((model(tracer.tensor(X)) ** 2).sum().item())

    plain = step(X)[0]
    handle = model[1].register_forward_hook(lambda m, args, out: out * 3)
    hooked = step(X)[0]
    np.testing.assert_allclose(float(hooked), eager_value(), rtol=1e-6)
    np.testing.assert_allclose(float(hooked), 9 * float(plain), rtol=1e-5)
    handle.remove()
    np.testing.assert_allclose(float(step(X)[0]), float(plain), rtol=1e-6)
    handle = model.register_full_backward_hook(lambda m, gi, go: None)  # runs with loss.backward() (see
    with pytest.raises(NotImplementedError, match="backward hooks"):  # test_backward_hooks), not in a step
        step(X)
    handle.remove()


def test_casts_and_modes_as_torch():
    ours, theirs = build(nn), build(tnn)
    for m in (ours, theirs):
        assert m.double() is m and m.eval() is m and m.train(False) is m and m.train() is m
    assert {p.dtype for p in ours.parameters()} == {"float64"}
    assert ours.bn.num_batches_tracked.dtype == "int64"
    assert ours.half().shared.weight.dtype == "float16" and ours.float().shared.weight.dtype == "float32"
    ours.type("float64")
    theirs.type(torch.float64)
    assert ours.bn.num_batches_tracked.dtype == "float64" and theirs.bn.num_batches_tracked.dtype == torch.float64
    for m in (ours, theirs):
        with pytest.raises(ValueError, match="training mode is expected to be boolean"):
            m.train("yes")
    assert ours.requires_grad_(False) is ours and not any(p.requires_grad for p in ours.parameters())
    seen = []
    ours.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and seen[0] == "Linear"


def test_repr_as_torch():
    ours, theirs = build(nn), build(tnn)
    assert repr(ours) == repr(theirs)
    for make in (lambda lib: lib.Conv2d(3, 8, (3, 5), dilation=2, groups=1),
                 lambda lib: lib.Conv2d(2, 4, 3, padding="same", groups=2),
                 lambda lib: lib.Conv1d(2, 4, 3, stride=2, padding=1),
                 lambda lib: lib.MaxPool2d(2), lambda lib: lib.AvgPool2d(3, 1),
                 lambda lib: lib.Dropout(), lambda lib: lib.LayerNorm((2, 3), elementwise_affine=False),
                 lambda lib: lib.Embedding(10, 3), lambda lib: lib.Flatten(0, 2), lambda lib: lib.Identity()):
        assert repr(make(nn)) == repr(make(tnn))

    class Custom(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(1, 1)

        def extra_repr(self):
            return "depth=2"

    class TorchCustom(tnn.Module):
        def __init__(self):
            super().__init__()
            self.inner = tnn.Linear(1, 1)

        def extra_repr(self):
            return "depth=2"

    assert repr(Custom()).replace("Custom", "X") == repr(TorchCustom()).replace("TorchCustom", "X")


@pytest.mark.parametrize("make", [
    lambda lib, **kw: lib.Linear(3, 2, **kw), lambda lib, **kw: lib.Conv2d(1, 2, 3, **kw),
    lambda lib, **kw: lib.Conv1d(1, 2, 3, **kw), lambda lib, **kw: lib.Embedding(4, 3, **kw),
    lambda lib, **kw: lib.LayerNorm(3, **kw), lambda lib, **kw: lib.BatchNorm2d(3, **kw),
    lambda lib, **kw: lib.GroupNorm(1, 3, **kw), lambda lib, **kw: lib.MultiheadAttention(4, 2, **kw)])
def test_device_and_dtype_factory_arguments(make):
    for dtype in ("float64", np.float64, torch.float64):
        m = make(nn, device="cpu", dtype=dtype)
        assert {p.dtype for p in m.parameters()} == {"float64"}, dtype
        assert all(str(p.device) == "cpu" for p in m.parameters())
    t = make(tnn, device="cpu", dtype=torch.float64)
    assert [p.shape for p in make(nn).parameters()] == [tuple(p.shape) for p in t.parameters()]
    assert {p.dtype for p in make(nn).parameters()} == {"float32"}


def test_zero_dim_parameter_keeps_its_shape():
    p = nn.Parameter(np.float32(2.0))
    assert p.shape == tuple(tnn.Parameter(torch.tensor(2.0)).shape) == ()
    m = nn.Module()
    m.t = p
    assert m.state_dict()["t"].shape == ()
    m.load_state_dict({"t": np.float32(5.0)})
    assert float(m.t.item()) == 5.0
