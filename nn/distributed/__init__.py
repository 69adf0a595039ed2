"""Data-parallel training over processes: MPI (mpi4py) for NumPy buffers, NCCL (CuPy) for GPU ones."""
from .api import (
           CommStats,
           DataParallel,
           all_reduce,
           barrier,
           broadcast_parameters,
           data_parallel,
           init,
           rank,
           world_size,
)

__all__ = ["CommStats", "DataParallel", "all_reduce", "barrier", "broadcast_parameters", "data_parallel", "init",
           "rank", "world_size"]
