"""One module against its torch twin three ways: eager outputs, autodiff.value_and_grad (compiled), loss.backward().

Weights go ours -> torch through the state dict (so the keys must be torch's). The loss is sum(out_i * w_i) over
every float output (tuples, nested tuples and PackedSequence.data flattened), so every output and every gradient
counts. Only the comparison needs torch: callers import it with pytest.importorskip.
"""
import numpy as np

import autodiff
import tracer
from nn.utils.rnn import PackedSequence

rng = np.random.default_rng(1)
TOLERANCE = {"float64": dict(rtol=1e-10, atol=1e-12), "float32": dict(rtol=1e-5, atol=1e-6)}


def flat_outputs(out) -> list:
    if out is None:
        return []
    if isinstance(out, PackedSequence) or type(out).__name__ == "PackedSequence":
        return [out.data]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat_outputs(o)]
    return [out]


def _loss(outs, weights, lib):
    return sum((o * lib.tensor(w)).sum() for o, w in zip(outs, weights, strict=True))


def compare(torch, ours, theirs, inputs, call=None, dtype="float64", train=False):
    """inputs: numpy arrays (float ones get gradients); call(module, lib, *tensors) -> outputs (default module(*t))."""
    call = call or (lambda m, lib, *t: m(*t))
    tol = TOLERANCE[dtype]
    ours_keys = list(ours.state_dict())
    assert ours_keys == list(theirs.state_dict()), (ours_keys, list(theirs.state_dict()))
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    ours.train(train)
    theirs.train(train)
    floats = [i for i, a in enumerate(inputs) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    t_args = [torch.tensor(a, requires_grad=i in floats) if isinstance(a, np.ndarray) else a
              for i, a in enumerate(inputs)]
    t_outs = flat_outputs(call(theirs, torch, *t_args))
    weights = [rng.uniform(0.5, 1.5, tuple(o.shape)).astype(dtype) for o in t_outs]
    t_loss = _loss(t_outs, weights, torch)
    t_loss.backward()
    want = [p.grad.numpy() for p in theirs.parameters()] + [t_args[i].grad.numpy() for i in floats]
    want_outs = [o.detach().numpy() for o in t_outs]

    args = [tracer.tensor(a) if isinstance(a, np.ndarray) else a for a in inputs]
    eager = flat_outputs(call(ours, tracer, *args))
    assert len(eager) == len(want_outs)
    for i, (got, w) in enumerate(zip(eager, want_outs, strict=True)):
        assert got.dtype == dtype, f"output {i}: dtype {got.dtype}, want {dtype}"
        np.testing.assert_allclose(got.numpy(), w, **tol, err_msg=f"eager output {i}")

    params = list(ours.parameters())
    step = autodiff.value_and_grad(lambda *a: _loss(flat_outputs(call(ours, tracer, *a)), weights, tracer),
                                   wrt=params + [args[i] for i in floats])
    value, grads = step(*args)
    np.testing.assert_allclose(float(value), float(t_loss.detach()), **tol, err_msg="value_and_grad loss")
    labels = [n for n, _ in ours.named_parameters()] + [f"input {i}" for i in floats]
    for label, g, w in zip(labels, grads, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, **tol, err_msg=f"value_and_grad: gradient of {label}")

    ours.zero_grad()
    b_args = [tracer.tensor(a, requires_grad=i in floats) if isinstance(a, np.ndarray) else a
              for i, a in enumerate(inputs)]
    loss = _loss(flat_outputs(call(ours, tracer, *b_args)), weights, tracer)
    loss.backward()
    got = [p.grad for p in params] + [b_args[i].grad for i in floats]
    for label, g, w in zip(labels, got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w, **tol, err_msg=f"loss.backward(): gradient of {label}")
