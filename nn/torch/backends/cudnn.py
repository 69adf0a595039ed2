"""torch.backends.cudnn's flags: set and read as in torch, with no effect (tracegrad's kernels are NumPy's and
CuPy's; a step's results do not depend on them). `import torch.backends.cudnn as cudnn` maps to
`from nn.torch.backends import cudnn`."""
benchmark = False
deterministic = False
enabled = True
allow_tf32 = True


def is_available() -> bool:
    """False: tracegrad does not call cuDNN."""
    return False


def version():
    """None: tracegrad does not call cuDNN."""
    return None


__all__ = ["allow_tf32", "benchmark", "deterministic", "enabled", "is_available", "version"]
