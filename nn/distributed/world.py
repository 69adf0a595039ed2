"""Which processes train together: the world that `init()` finds, and the communicators it talks through.

A World has a host communicator for NumPy buffers (MPI through mpi4py, or the one-process `Single`) and,
made on first need, an NCCL communicator for CuPy buffers. Launched without mpiexec, the world is one
process and mpi4py is never imported; launched by mpiexec with several processes, mpi4py must be there.
"""
from __future__ import annotations

import os
import sys
import time

from .buckets import on_gpu

# Set by the launchers for every process they start: MPICH's and Intel MPI's hydra, Open MPI, MVAPICH.
_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
_LOCAL_RANK_VARIABLES = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK")
BACKENDS = ("mpi", "nccl", "single")
ABORT_GRACE_S = 0.5  # how long an uncaught exception's report gets to reach mpiexec before MPI_Abort


def launched_size() -> int | None:
    """The number of processes a launcher says it started (None: not started by a known launcher)."""
    for name in _SIZE_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def local_rank() -> int:
    """This process's index among those on the same machine (its GPU), 0 when no launcher says."""
    for name in _LOCAL_RANK_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


class Single:
    """The one-process communicator: every collective is the identity and runs nothing."""

    rank, size, name = 0, 1, "single"

    def __init__(self):
        self.collectives = 0

    def allreduce_(self, buf, op: str) -> None:
        pass

    def bcast_(self, buf, root: int) -> None:
        pass

    def bcast_object(self, obj, root: int):
        return obj

    def allgather_object(self, obj) -> list:
        return [obj]

    def barrier(self) -> None:
        pass


class MPIComm:
    """Collectives on NumPy buffers, in place, through an mpi4py communicator (COMM_WORLD by default)."""

    name = "mpi"

    def __init__(self, comm, mpi):
        self.comm, self.mpi = comm, mpi
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.ops = {"sum": mpi.SUM, "max": mpi.MAX, "min": mpi.MIN}
        self.collectives = 0

    def allreduce_(self, buf, op: str) -> None:
        self.collectives += 1
        self.comm.Allreduce(self.mpi.IN_PLACE, buf, op=self.ops[op])

    def bcast_(self, buf, root: int) -> None:
        self.collectives += 1
        self.comm.Bcast(buf, root=root)

    def bcast_object(self, obj, root: int):
        return self.comm.bcast(obj, root=root)

    def allgather_object(self, obj) -> list:
        """Every process's `obj`, in rank order (pickled: for small things, shapes and messages)."""
        return self.comm.allgather(obj)

    def barrier(self) -> None:
        self.comm.Barrier()

    def abort(self, code: int = 1) -> None:
        self.comm.Abort(code)


def abort_on_uncaught_exception(host) -> None:
    """Make an exception that ends this process end every process of the job (once per process).

    Without it, a process that raises outside a data_parallel step exits while the others wait in their
    next collective forever, each polling a core: MPI has no timeout, and mpiexec keeps waiting for them.
    The hook prints which rank failed and the traceback, then calls MPI_Abort, which makes mpiexec end
    every process at once. An exception the program catches is not affected. (mpi4py's
    `python -m mpi4py script.py` does the same for scripts started that way.)
    """
    previous = sys.excepthook
    if getattr(previous, "_tracegrad_abort", False):
        return

    def hook(kind, value, tb):
        try:
            print(f"nn.distributed: rank {host.rank} of {host.size} stopped with an uncaught {kind.__name__}: "
                  f"{value}; aborting all {host.size} processes (MPI_Abort) so that none waits forever",
                  file=sys.stderr, flush=True)
            previous(kind, value, tb)
            sys.stdout.flush()
            sys.stderr.flush()
            # mpiexec's proxy forwards what a process wrote and handles its MPI_Abort as separate events: an
            # abort handled first ends the job with the message and traceback still unread in the pipe (seen
            # on a loaded machine: the job ended with empty output). A moment for the proxy to read them.
            time.sleep(ABORT_GRACE_S)
        finally:
            host.abort(1)

    hook._tracegrad_abort = True
    sys.excepthook = hook


def mpi_comm() -> MPIComm:
    """COMM_WORLD through mpi4py (imported here, and only here)."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        size = launched_size()
        launched = f"this process is one of {size} started by mpiexec, but " if size else ""
        raise RuntimeError(f"nn.distributed.init: {launched}mpi4py is not installed ({e}); "
                           "install it with `pip install tracegrad[mpi]` (mpi4py and mpich)") from None
    return MPIComm(MPI.COMM_WORLD, MPI)


class World:
    """The host communicator, and the NCCL one for CuPy buffers once it is needed (or asked for)."""

    def __init__(self, host, backend: str):
        self.host, self.backend = host, backend
        self.rank, self.size = host.rank, host.size
        self._device = None

    @property
    def reduces(self) -> bool:
        """Whether collectives do anything: with one process and no NCCL communicator they are skipped."""
        return self.size > 1 or self.backend == "nccl"

    def device_comm(self):
        if self._device is None:
            from .nccl import NCCLComm  # imports CuPy
            self._device = NCCLComm(self.host, local_rank())
        return self._device

    def comm_for(self, buf):
        """NCCL for CuPy buffers, the host communicator for NumPy ones."""
        return self.device_comm() if on_gpu(buf) else self.host

    @property
    def collectives(self) -> int:
        """Collectives run so far through either communicator."""
        return self.host.collectives + (self._device.collectives if self._device is not None else 0)


def make_world(backend: str | None) -> World:
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"nn.distributed.init: backend must be one of {', '.join(BACKENDS)} or None, "
                         f"got {backend!r}")
    if backend == "single":
        return World(Single(), "single")
    size = launched_size()
    # mpiexec -n 1, or no launcher at all: one process, and MPI is not imported unless asked for
    # (or already imported by the user, who may have set it up themselves)
    wants_mpi = backend == "mpi" or (size or 1) > 1 or "mpi4py.MPI" in sys.modules
    host = mpi_comm() if wants_mpi else Single()
    if host.size > 1:
        abort_on_uncaught_exception(host)
    world = World(host, backend or ("mpi" if host.size > 1 else "single"))
    if backend == "nccl":
        world.device_comm()
    return world
