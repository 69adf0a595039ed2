"""A case row run on the CPU and on a CuPy device (the real one in test_cuda.py, the fake in test_cupy_paths.py)."""
import autodiff
import ir
import tracer


def flat(x):
    return list(x) if isinstance(x, tuple) else [x]


def forward_on_both(case, cp, device="cuda"):
    """[(CPU output, device output)] of the traced row (device="cpu" with cp=numpy: the CPU against itself)."""
    mod = tracer.trace(lambda *xs: case.fn(*xs, **case.kwargs), *case.inputs)
    cpu = ir.Executor(mod)["main"](*case.inputs)
    gpu = ir.Executor(mod, device=device, check_types=True)["main"](*[cp.asarray(a) for a in case.inputs])
    return list(zip(flat(cpu), flat(gpu), strict=True))


def gradients_on_both(case, cp, device="cuda"):
    """[(CPU gradient, device gradient)] of the sum of the row's outputs, in float64."""
    inputs = [a.astype("float64") if a.dtype.kind == "f" else a for a in case.inputs]

    def loss(*xs):
        return sum(tracer.astype(o, "float64").sum() for o in flat(case.fn(*xs, **case.kwargs)))
    mod = ir.transform.cleanup()(autodiff.Gradient("main")(tracer.trace(loss, *inputs)))
    cpu = ir.Executor(mod)["main_adjoint"](*inputs)[1]
    gpu = ir.Executor(mod, device=device, check_types=True)["main_adjoint"](*[cp.asarray(a) for a in inputs])[1]
    return list(zip(cpu, gpu, strict=True))


# rows whose function mixes in a host tensor of its own (T.arange(4) * x, W @ x with W a NumPy array): eagerly
# a device error, as in torch (torch.arange(4) * x_cuda); traced, the host tensor is a constant and runs anywhere
HOST_OPERAND_ROWS = frozenset({"arange_times_x", "matmul_rmatmul_array",
                               # a host mask, or a host identity / triangle mask built into the operand
                               "sdpa_bool_mask_scale", "sdpa_row_fully_masked", "cholesky", "cholesky_batched_upper",
                               "solve_triangular_lower_broadcast", "solve_triangular_upper_right"})


def eager_on_device(case, cp):
    """The row run eagerly on tensors on the device: [outputs], as tracer Tensors."""
    return flat(case.fn(*[tracer.tensor(cp.asarray(a)) for a in case.inputs], **case.kwargs))
