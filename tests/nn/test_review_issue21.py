"""Review of issue 21 against public programs (pytorch/examples run with only their imports changed, /tmp/ext's
runners): what broke there, and the new pieces attacked directly (LBFGS, MaxUnpool2d, full backward hooks,
rsample), each compared with torch."""
import numpy as np
import pytest

import nn
import nn.torch as ntorch
from nn import optim
from tests.torch_optional import torch


# ------------------------------------------------------------------ dcgan/main.py: `input.is_xpu` in forward
def test_tensor_accelerator_flags_are_torch_s_on_the_cpu():
    x = ntorch.ones(2, 3)
    t = torch.ones(2, 3)
    assert (x.is_xpu, x.is_mps, x.is_cuda, x.is_cpu) == (t.is_xpu, t.is_mps, t.is_cuda, t.is_cpu) == (
        False, False, False, True)


def test_dcgan_style_forward_reads_is_xpu():
    class D(nn.Module):  # dcgan's Discriminator.forward, shortened
        def __init__(self):
            super().__init__()
            self.ngpu = 1
            self.main = nn.Sequential(nn.Conv2d(3, 4, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True))

        def forward(self, input):  # noqa: A002
            if (input.is_cuda or input.is_xpu) and self.ngpu > 1:
                raise AssertionError("no GPU here")
            return self.main(input).view(-1, 1).squeeze(1)

    assert D()(ntorch.ones(2, 3, 8, 8)).shape == (2 * 4 * 4 * 4,)


# ------------------------------------------------------------- word_language_model/main.py: `import torch.onnx`
def test_import_torch_onnx_works_and_export_refuses_clearly():
    import importlib

    onnx = importlib.import_module("nn.torch.onnx")
    assert onnx.is_in_onnx_export() is torch.onnx.is_in_onnx_export() is False
    with pytest.raises(NotImplementedError, match=r"torch\.onnx\.export.*state_dict"):
        onnx.export(nn.Linear(2, 2), (ntorch.ones(1, 2),), "/tmp/never.onnx")


# ----------------------------------------------------------------------- MaxUnpool2d with an index outside
def test_max_unpool_index_outside_the_output_is_torch_s_runtime_error():
    x = np.random.default_rng(0).normal(size=(1, 2, 5, 5))
    with pytest.raises(RuntimeError, match="invalid max index"):  # torch's type and words
        torch.nn.MaxUnpool2d(2)(*torch.nn.MaxPool2d(2, return_indices=True)(torch.tensor(x)))
    with pytest.raises(RuntimeError, match=r"max_unpool2d: Found an invalid max index: 18 .*4x4.*output_size"):
        nn.MaxUnpool2d(2)(*nn.MaxPool2d(2, return_indices=True)(ntorch.tensor(x)))
    out, idx = nn.MaxPool2d(2, return_indices=True)(ntorch.tensor(x))
    ref = torch.nn.MaxUnpool2d(2)(*torch.nn.MaxPool2d(2, return_indices=True)(torch.tensor(x)), output_size=(5, 5))
    got = nn.MaxUnpool2d(2)(out, idx, output_size=(5, 5))
    assert got.dtype == "float64"
    np.testing.assert_array_equal(got.numpy(), ref.numpy())
    with pytest.raises(IndexError):  # still scatter's IndexError for code that caught that
        nn.functional.max_unpool1d(ntorch.ones(1, 1, 2), ntorch.tensor([[[0, -1]]]), 2)


# ----------------------------------------------- LBFGS (time_sequence_prediction's optimizer) on Rosenbrock
@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_rosenbrock_trajectory_is_torch_s(line_search):
    def run(lib, opt_mod):
        x = lib.tensor(np.array([-1.5, 2.0]), requires_grad=True)
        o = opt_mod.LBFGS([x], lr=1, max_iter=15, line_search_fn=line_search, history_size=3)

        def closure():
            o.zero_grad()
            loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
            loss.backward()
            return loss
        losses = [float(o.step(closure).item()) for _ in range(3)]
        return losses, np.array(x.detach().numpy()), int(o.state_dict()["state"][0]["n_iter"])

    got, ref = run(ntorch, optim), run(torch, torch.optim)
    assert got[2] == ref[2]
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-6)


def test_lbfgs_misuse_errors():
    with pytest.raises(TypeError, match="closure"):
        optim.LBFGS([nn.Parameter(ntorch.zeros(2))]).step()
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [nn.Parameter(ntorch.zeros(2))]}, {"params": [nn.Parameter(ntorch.zeros(2))]}])


# ------------------------------------------------------- full backward hooks replacing a grad_input, removed
def test_backward_hook_replacement_and_removal_as_torch():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    m.load_state_dict(tm.state_dict())
    x = np.arange(6.0).reshape(2, 3).astype("float32")
    out = {}
    for name, lib, model in (("tg", ntorch, m), ("torch", torch, tm)):
        seen = []
        h = model[0].register_full_backward_hook(
            lambda mod, gi, go, seen=seen: seen.append(np.array(gi[0].detach().numpy(), copy=True)))
        model[2].register_full_backward_hook(lambda mod, gi, go: (gi[0] * 2,))
        xt = lib.tensor(x, requires_grad=True)
        model(xt).sum().backward()
        h.remove()
        model(xt).sum().backward()
        out[name] = (seen, np.array(xt.grad.numpy(), copy=True), np.array(model[0].weight.grad.numpy(), copy=True))
    assert len(out["tg"][0]) == len(out["torch"][0]) == 1
    for a, b in zip(out["tg"], out["torch"], strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)


# ------------------------------------------------------------------------------ rsample edge cases
def test_dirichlet_rsample_sum_has_zero_gradient_and_integer_gamma_refused():
    a = ntorch.tensor(np.array([0.5, 3.0, 1.0]), requires_grad=True)
    ntorch.distributions.Dirichlet(a).rsample((3,)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 0.0, atol=1e-12)  # each draw sums to one
    with pytest.raises((TypeError, ValueError, NotImplementedError, RuntimeError)):
        ntorch.distributions.Gamma(ntorch.tensor([2]), ntorch.tensor([1])).rsample()
    with pytest.raises(NotImplementedError):
        torch.distributions.Gamma(torch.tensor([2]), torch.tensor([1])).rsample()
