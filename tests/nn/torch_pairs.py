"""Run a tracegrad module and its torch twin on the same inputs, with weights copied both ways.

Only the comparison needs torch: callers import it with pytest.importorskip inside the test.
"""
import numpy as np

import autodiff
import tracer

rng = np.random.default_rng(0)


def randomize(module):
    """Random values in every parameter, so no zero bias or unit scale hides a term."""
    for p in module.parameters():
        p._data[...] = rng.standard_normal(p.shape) * 0.5
    return module


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def outputs_and_grads(module, inputs, weight, float_inputs):
    """tracegrad's output and the gradients of sum(output * weight) for the parameters and float inputs."""
    args = [tracer.tensor(a) for a in inputs]
    wrt = list(module.parameters()) + [args[i] for i in float_inputs]
    out = _first(module(*args))
    value_fn = autodiff.grad(lambda *a: (_first(module(*a)) * tracer.tensor(weight)).sum(), wrt=wrt)
    return np.asarray(out), [np.asarray(g) for g in value_fn(*args)]


def torch_outputs_and_grads(torch, module, inputs, weight, float_inputs):
    args = [torch.tensor(a, requires_grad=i in float_inputs) for i, a in enumerate(inputs)]
    out = _first(module(*args))
    (out * torch.tensor(weight)).sum().backward()
    grads = [p.grad.numpy() for p in module.parameters()] + [args[i].grad.numpy() for i in float_inputs]
    return out.detach().numpy(), grads


def copy_into_torch(torch, ours, theirs):
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})


def copy_from_torch(ours, theirs):
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})


def assert_same(torch, ours, theirs, inputs, rtol=1e-7, atol=1e-9):
    """Outputs and gradients agree with weights copied ours -> torch, then torch (re-randomized) -> ours."""
    float_inputs = [i for i, a in enumerate(inputs) if np.asarray(a).dtype.kind == "f"]
    names = [n for n, _ in ours.named_parameters()]
    assert names == [n for n, _ in theirs.named_parameters()]
    weight = rng.uniform(0.5, 1.5, _first(ours(*inputs)).shape)
    for direction in ("to torch", "from torch"):
        if direction == "to torch":
            copy_into_torch(torch, ours, theirs)
        else:
            with torch.no_grad():
                for p in theirs.parameters():
                    p.copy_(torch.randn_like(p) * 0.5)
            copy_from_torch(ours, theirs)
            theirs.zero_grad()
        want, want_grads = torch_outputs_and_grads(torch, theirs, inputs, weight, float_inputs)
        got, got_grads = outputs_and_grads(ours, inputs, weight, float_inputs)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"output, weights copied {direction}")
        labels = names + [f"input {i}" for i in float_inputs]
        for label, g, w in zip(labels, got_grads, want_grads, strict=True):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"gradient of {label} ({direction})")
