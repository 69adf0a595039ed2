"""BatchNorm's running statistics: eager and compiled steps update them alike, train()/eval() switch, the
buffers are state (state_dict, save/load), and all of it matches torch."""
import numpy as np
import pytest

import autodiff
import nn
import tracer

rng = np.random.default_rng(0)
BATCHES = [rng.standard_normal((6, 3, 4, 4)) * s + s for s in (1.0, 2.0, 0.5)]


def _model():
    torch_like = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, dtype="float64"), nn.BatchNorm2d(4, momentum=0.2,
                                                                                         dtype="float64"))
    for p in torch_like.parameters():
        p._data[...] = rng.standard_normal(p.shape) * 0.5
    return torch_like


def _buffers(model):
    return {k: v.copy() for k, v in model.state_dict().items() if "running" in k or "num_batches" in k}


def test_compiled_steps_update_the_running_statistics_as_eager_calls_do():
    eager, compiled = _model(), _model()
    compiled.load_state_dict(eager.state_dict())
    step = autodiff.value_and_grad(lambda x: (compiled(x) ** 2).mean(), wrt=compiled.parameters())
    for x in BATCHES:
        (eager(x) ** 2).mean()
        step(x)
    want, got = _buffers(eager), _buffers(compiled)
    assert want["1.num_batches_tracked"] == 3 and got["1.num_batches_tracked"] == 3
    assert not np.allclose(want["1.running_mean"], 0.0)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, err_msg=k)
    assert sum(map(len, step.cache.values())) == 1  # the updates did not cost a retrace per call


def test_eval_uses_the_running_statistics_and_a_compiled_step_follows_the_mode():
    m = _model()
    step = autodiff.value_and_grad(lambda x: m(x).sum(), wrt=m.parameters())
    step(BATCHES[0])
    m.eval()
    before = _buffers(m)
    value, _ = step(BATCHES[1])
    np.testing.assert_allclose(float(value), float(m(BATCHES[1]).sum()), rtol=1e-12)
    after = _buffers(m)
    for k in before:
        np.testing.assert_array_equal(after[k], before[k])  # eval() never updates them
    x = BATCHES[1]
    mean, var = before["1.running_mean"], before["1.running_var"]
    bn = m[1]
    conv = m[0](x).numpy()
    want = (conv - mean[:, None, None]) / np.sqrt(var[:, None, None] + bn.eps) * bn.weight.numpy()[:, None, None] \
        + bn.bias.numpy()[:, None, None]
    np.testing.assert_allclose(m(x).numpy(), want, rtol=1e-12)


def test_buffers_are_state_and_survive_save_and_load(tmp_path):
    m = _model()
    m(BATCHES[0])
    state = m.state_dict()
    assert list(state) == ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
                           "1.num_batches_tracked"]
    assert state["1.num_batches_tracked"].dtype == np.int64
    assert [n for n, _ in m.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert [n for n, _ in m.named_buffers()] == ["1.running_mean", "1.running_var", "1.num_batches_tracked"]
    nn.save(state, tmp_path / "bn.npz")
    fresh = _model()
    fresh.load_state_dict(nn.load(tmp_path / "bn.npz"))
    for k, v in fresh.state_dict().items():
        np.testing.assert_array_equal(v, state[k], err_msg=k)
    with pytest.raises(nn.StateDictError, match="running_var"):
        fresh.load_state_dict({k: v for k, v in state.items() if k != "1.running_var"})


def test_register_buffer_rules():
    m = nn.Module()
    m.register_buffer("scale", tracer.ones((2,)))
    m.register_buffer("scratch", tracer.zeros((2,)), persistent=False)
    assert list(m.state_dict()) == ["scale"] and len(list(m.buffers())) == 2
    m.scale = tracer.full((2,), 3.0)  # reassigning keeps it a buffer, as in torch
    assert m.state_dict()["scale"].tolist() == [3.0, 3.0]
    with pytest.raises(TypeError, match="buffer 'scale'"):
        m.scale = 3.0
    with pytest.raises(KeyError, match=r'name can.+t contain "\."'):
        m.register_buffer("a.b", tracer.ones(()))
    m.scale = nn.Parameter(np.ones(2, "float32"))  # a parameter assigned to a buffer's name replaces it
    assert [n for n, _ in m.named_parameters()] == ["scale"] and len(list(m.buffers())) == 1


def test_running_statistics_and_outputs_match_torch_eager_and_compiled():
    torch = pytest.importorskip("torch")
    ours, compiled = _model(), _model()
    compiled.load_state_dict(ours.state_dict())
    theirs = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1, dtype=torch.float64),
                                 torch.nn.BatchNorm2d(4, momentum=0.2, dtype=torch.float64))
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    step = autodiff.value_and_grad(lambda x: (compiled(x) ** 2).mean(), wrt=compiled.parameters())
    for mode in ("train", "eval"):
        for m in (ours, compiled, theirs):
            getattr(m, mode)()
        for x in BATCHES:
            theirs.zero_grad()
            want = (theirs(torch.tensor(x)) ** 2).mean()
            want.backward()
            np.testing.assert_allclose((ours(x) ** 2).mean().item(), want.item(), rtol=1e-10)
            value, grads = step(x)
            np.testing.assert_allclose(float(value), want.item(), rtol=1e-10)
            for g, (name, p) in zip(grads, theirs.named_parameters(), strict=True):
                np.testing.assert_allclose(np.asarray(g), p.grad.numpy(), rtol=1e-8, atol=1e-10, err_msg=name)
        want_state = {k: v.numpy() for k, v in theirs.state_dict().items()}
        for m in (ours, compiled):
            for k, v in m.state_dict().items():
                np.testing.assert_allclose(v, want_state[k], rtol=1e-10, err_msg=f"{k} after {mode}")
