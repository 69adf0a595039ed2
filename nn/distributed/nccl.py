"""Collectives on CuPy buffers through NCCL (`cupy.cuda.nccl`), one GPU per process.

The NCCL unique id is made on rank 0 and handed to the others over the host communicator (MPI), as
NCCL's own examples do; with one process it is a single-rank communicator, which still runs every
collective on the GPU. Each process uses the GPU of its local rank (modulo the GPUs it sees).
"""
from __future__ import annotations


def _nccl():
    try:
        import cupy
        from cupy.cuda import nccl
    except ImportError as e:
        raise RuntimeError(f"nn.distributed: the NCCL backend needs CuPy built with NCCL ({e}); "
                           "install cupy-cuda12x (tracegrad[cuda])") from None
    if not getattr(nccl, "available", True):
        raise RuntimeError("nn.distributed: this CuPy has no NCCL (cupy.cuda.nccl.available is False)")
    return cupy, nccl


class NCCLComm:
    """In-place all-reduce and broadcast of contiguous CuPy arrays on the current stream."""

    name = "nccl"

    def __init__(self, host, local_rank: int):
        cupy, nccl = self.cupy, self.nccl = _nccl()
        count = cupy.cuda.runtime.getDeviceCount()
        if count < 1:
            raise RuntimeError("nn.distributed: the NCCL backend needs a GPU, and CUDA sees none")
        self.device = local_rank % count
        cupy.cuda.Device(self.device).use()
        uid = host.bcast_object(nccl.get_unique_id() if host.rank == 0 else None, root=0)
        self.rank, self.size = host.rank, host.size
        self.comm = nccl.NcclCommunicator(host.size, uid, host.rank)
        self.ops = {"sum": nccl.NCCL_SUM, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN}
        self.collectives = 0

    def _dtype(self, buf):
        name = {"float16": "FLOAT16", "float32": "FLOAT32", "float64": "FLOAT64", "int32": "INT32",
                "int64": "INT64", "uint8": "UINT8", "int8": "INT8"}.get(str(buf.dtype))
        if name is None:
            raise TypeError(f"nn.distributed: NCCL has no data type for {buf.dtype}")
        return getattr(self.nccl, "NCCL_" + name)

    def _stream(self) -> int:
        return self.cupy.cuda.get_current_stream().ptr

    def allreduce_(self, buf, op: str) -> None:
        self.collectives += 1
        ptr = buf.data.ptr
        self.comm.allReduce(ptr, ptr, buf.size, self._dtype(buf), self.ops[op], self._stream())

    def bcast_(self, buf, root: int) -> None:
        self.collectives += 1
        self.comm.bcast(buf.data.ptr, buf.size, self._dtype(buf), root, self._stream())
