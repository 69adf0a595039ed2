"""Compare a tracegrad module with its torch twin three ways: eagerly, inside autodiff.value_and_grad, and with
loss.backward(): outputs and their dtype, the state dict after the call (running statistics), and the gradients
of sum(output * w) for every parameter and every float input. Callers import torch with pytest.importorskip."""
import numpy as np

import autodiff
import tracer

TOL = {"float32": dict(rtol=1e-5, atol=1e-6), "float64": dict(rtol=1e-10, atol=1e-12)}
MODES = ("eager", "value_and_grad", "backward")


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def torch_run(torch, theirs, inputs, w, float_inputs):
    args = [torch.tensor(a, requires_grad=i in float_inputs) for i, a in enumerate(inputs)]
    theirs.zero_grad()
    out = _first(theirs(*args))
    (out * torch.tensor(w, dtype=out.dtype)).sum().backward()
    grads = {n: p.grad.numpy() for n, p in theirs.named_parameters() if p.requires_grad}
    grads.update({f"input {i}": args[i].grad.numpy() for i in float_inputs})
    return out.detach().numpy(), grads, {k: v.numpy() for k, v in theirs.state_dict().items()}


def ours_run(m, mode, inputs, w, float_inputs):
    """(output or None, gradients by name or None, state dict after) of one call of tracegrad's module."""
    params = [(n, p) for n, p in m.named_parameters() if p.requires_grad]
    labels = [n for n, _ in params] + [f"input {i}" for i in float_inputs]
    if mode == "eager":
        return np.asarray(_first(m(*inputs))), None, m.state_dict()
    if mode == "value_and_grad":
        args = [tracer.tensor(a) for a in inputs]
        wrt = [p for _, p in params] + [args[i] for i in float_inputs]
        step = autodiff.value_and_grad(lambda *a: (_first(m(*a)) * tracer.tensor(w)).sum(), wrt=wrt)
        _, grads = step(*args)
        return None, dict(zip(labels, [np.asarray(g) for g in grads], strict=True)), m.state_dict()
    args = [tracer.tensor(a, requires_grad=i in float_inputs) for i, a in enumerate(inputs)]
    out = _first(m(*args))
    (out * tracer.tensor(w)).sum().backward()
    grads = {n: np.asarray(p.grad) for n, p in params}
    grads.update({f"input {i}": np.asarray(args[i].grad) for i in float_inputs})
    return np.asarray(out), grads, m.state_dict()


def assert_module_matches(torch, make, make_torch, inputs, dtype, train=True, randomize=True, tol=None):
    """make() / make_torch() build the twins in `dtype`. torch's parameters are randomised, its state dict loaded
    into a fresh copy of ours for each mode (torch -> ours), and ours' state dict loads into a torch twin
    (ours -> torch); then outputs, gradients and the state after one call agree in every mode."""
    tol = tol or TOL[dtype]
    inputs = [np.asarray(a, dtype) if np.asarray(a).dtype.kind == "f" else np.asarray(a) for a in inputs]
    float_inputs = [i for i, a in enumerate(inputs) if a.dtype.kind == "f"]
    theirs = make_torch().train(train)
    if randomize:
        with torch.no_grad():
            for p in theirs.parameters():
                p.copy_(torch.randn_like(p) * 0.5 + 1.0)
    state = {k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()}
    probe = make()
    assert list(probe.state_dict()) == list(state), (list(probe.state_dict()), list(state))
    assert [n for n, _ in probe.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    probe.load_state_dict(state)
    make_torch().load_state_dict({k: torch.tensor(np.asarray(v)) for k, v in probe.state_dict().items()})
    with torch.no_grad():
        shape = tuple(_first(theirs(*[torch.tensor(a) for a in inputs])).shape)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in state.items()})  # undo the probe's statistics update
    w = np.random.default_rng(1).uniform(0.5, 1.5, shape).astype(dtype)
    want_out, want_grads, want_state = torch_run(torch, theirs, inputs, w, float_inputs)
    for mode in MODES:
        m = make().train(train)
        m.load_state_dict(state)
        out, grads, got_state = ours_run(m, mode, inputs, w, float_inputs)
        if out is not None:
            assert out.dtype == want_out.dtype, (mode, out.dtype, want_out.dtype)
            np.testing.assert_allclose(out, want_out, **tol, err_msg=f"output ({mode})")
        if grads is not None:
            assert set(grads) == set(want_grads), (mode, set(grads), set(want_grads))
            for k, g in grads.items():
                np.testing.assert_allclose(g, want_grads[k], **tol, err_msg=f"gradient of {k} ({mode})")
        assert list(got_state) == list(want_state)
        for k, v in want_state.items():
            got = np.asarray(got_state[k])
            assert got.dtype == v.dtype, (mode, k, got.dtype, v.dtype)
            np.testing.assert_allclose(got, v, **tol, err_msg=f"state {k} after one call ({mode})")
