"""torch.multiprocessing: `spawn(fn, args, nprocs=1)` runs fn(0, *args) in this process; several processes are
mpiexec's in tracegrad (`mpiexec -n N python train.py`, each calling fn(rank, ...) with
nn.torch.distributed.get_rank()), so nprocs > 1 raises a RuntimeError that says so."""
from __future__ import annotations

import multiprocessing as _mp

Process, Queue, Pool, get_context = _mp.Process, _mp.Queue, _mp.Pool, _mp.get_context


def spawn(fn, args=(), nprocs: int = 1, join: bool = True, daemon: bool = False, start_method: str = "spawn"):
    if nprocs != 1:
        raise RuntimeError(f"multiprocessing.spawn(nprocs={nprocs}): tracegrad's processes are started by mpiexec: "
                           f"run `mpiexec -n {nprocs} python script.py` and call fn(torch.distributed.get_rank(), "
                           "...) in each (see nn.distributed)")
    fn(0, *args)


def set_start_method(method: str, force: bool = False) -> None:
    """Accepted (spawn runs in this process)."""


def get_start_method(allow_none: bool = False) -> str:
    return "spawn"


def set_sharing_strategy(strategy: str) -> None:
    """Accepted."""


__all__ = ["Pool", "Process", "Queue", "get_context", "get_start_method", "set_sharing_strategy",
           "set_start_method", "spawn"]
