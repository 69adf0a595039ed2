"""torch.distributed's process-group calls on nn.distributed (MPI on the CPU, NCCL for CuPy arrays), for
programs launched with `mpiexec -n N python train.py` (torchrun's environment variables are not read: the
processes are MPI's). The collectives write their result into the tensor, as torch's do.

>>> import nn.torch as torch
>>> torch.distributed.init_process_group("gloo"); torch.distributed.get_rank(), torch.distributed.get_world_size()
(0, 1)
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import tracer

from .. import distributed as _dist
from . import hints as _hints

__getattr__ = _hints.module_getattr("nn.torch.distributed", "torch.distributed", globals())

ReduceOp = SimpleNamespace(SUM="sum", AVG="mean", MAX="max", MIN="min")
_BACKENDS = {None: None, "gloo": None, "mpi": "mpi", "nccl": "nccl"}
_initialized = [False]


def is_available() -> bool:
    """True: one process always works; several need mpi4py (CPU) or CuPy's NCCL (GPU)."""
    return True


def is_initialized() -> bool:
    return _initialized[0]


def is_mpi_available() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_nccl_available() -> bool:
    from .cuda import is_available as _gpu

    return _gpu()


def init_process_group(backend=None, init_method=None, timeout=None, world_size: int = -1, rank: int = -1,
                       store=None, group_name: str = "", pg_options=None, device_id=None) -> None:
    """Join the processes mpiexec started ("gloo" and None: MPI for host arrays, "nccl": NCCL for GPU ones).
    world_size / rank, when given, must agree with MPI's."""
    if backend not in _BACKENDS:
        raise ValueError(f"init_process_group: backend {backend!r} is not available; use 'gloo', 'mpi' or 'nccl'")
    _dist.init(_BACKENDS[backend])
    if world_size not in (-1, _dist.world_size()) or rank not in (-1, _dist.rank()):
        raise RuntimeError(f"init_process_group(world_size={world_size}, rank={rank}): tracegrad's processes are "
                           f"mpiexec's ({_dist.world_size()} of them, this one rank {_dist.rank()}); launch with "
                           f"mpiexec -n {world_size} python ... instead of torchrun")
    _initialized[0] = True


def destroy_process_group(group=None) -> None:
    _initialized[0] = False


def get_rank(group=None) -> int:
    return _dist.rank()


def get_world_size(group=None) -> int:
    return _dist.world_size()


def get_backend(group=None) -> str:
    return "mpi" if _dist.world_size() > 1 else "gloo"


def barrier(group=None, async_op: bool = False, device_ids=None) -> None:
    _dist.barrier()


def _write(tensor, value) -> None:
    array = value._data if isinstance(value, tracer.Tensor) else value
    if isinstance(tensor, tracer.Tensor):
        with tracer.no_grad():
            tensor.copy_(tracer.tensor(np.asarray(array)) if isinstance(array, np.ndarray) else array)
    else:
        tensor[...] = array


def all_reduce(tensor, op="sum", group=None, async_op: bool = False):
    """tensor := its reduction over the processes (ReduceOp.SUM by default, as torch), in place."""
    _write(tensor, _dist.all_reduce(tensor, op=op))


def broadcast(tensor, src: int = 0, group=None, async_op: bool = False):
    """tensor := process src's tensor, in place."""
    _dist.broadcast_parameters([tensor], root=src)


def all_gather(tensor_list, tensor, group=None, async_op: bool = False):
    """tensor_list[r] := process r's tensor."""
    n = _dist.world_size()
    if len(tensor_list) != n:
        raise ValueError(f"all_gather: tensor_list must hold world_size ({n}) tensors, got {len(tensor_list)}")
    t = tensor if isinstance(tensor, tracer.Tensor) else tracer.tensor(tensor)
    for r in range(n):  # each rank's contribution in turn: a sum of one-hot copies
        piece = t if r == _dist.rank() else tracer.zeros_like(t)
        _write(tensor_list[r], _dist.all_reduce(piece, op="sum"))


__all__ = ["ReduceOp", "all_gather", "all_reduce", "barrier", "broadcast", "destroy_process_group", "get_backend",
           "get_rank", "get_world_size", "init_process_group", "is_available", "is_initialized",
           "is_mpi_available", "is_nccl_available"]
