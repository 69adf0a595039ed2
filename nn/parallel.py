"""torch.nn.parallel's wrappers: `DataParallel` and `DistributedDataParallel` on one device and one process are
pass-throughs, as torch's are there: `wrapper(x)` is `wrapper.module(x)`, and the state dict's keys gain torch's
"module." prefix, so checkpoints written through a wrapper load either way.

DistributedDataParallel over several processes averages gradients during torch's backward; tracegrad's
backward() has no hook for that yet, so on more than one process the constructor raises a RuntimeError that
names the two ways tracegrad trains data-parallel: nn.distributed.data_parallel(step) around a value_and_grad
step, or averaging each p.grad with nn.distributed.all_reduce before optimizer.step().

>>> import nn
>>> wrapped = nn.parallel.DistributedDataParallel(nn.Linear(2, 1))
>>> sorted(wrapped.state_dict()), wrapped(nn.torch.ones(3, 2)).shape
(['module.bias', 'module.weight'], (3, 1))
"""
from __future__ import annotations

import contextlib

from . import distributed as _dist
from .module import Module


class DataParallel(Module):
    """torch.nn.DataParallel(module, device_ids=None, output_device=None, dim=0): `module` on its one device
    (tracegrad does not split a batch over GPUs); calls go to module."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: module must be an nn.Module, got {type(module).__name__}")
        self.module = module
        self.device_ids, self.output_device, self.dim = device_ids, output_device, dim

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


class DistributedDataParallel(DataParallel):
    """torch.nn.parallel.DistributedDataParallel(module, device_ids=None, ...): on one process, `module` as it
    is (see the module docstring for several)."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False, **kwargs):
        super().__init__(module, device_ids, output_device, dim)
        world = _dist.world_size()
        if world > 1:
            raise RuntimeError(
                f"DistributedDataParallel on {world} processes: tracegrad's loss.backward() has no hook to average "
                "gradients across processes while it runs. Train data-parallel with nn.distributed instead: "
                "wrap a value_and_grad step in nn.distributed.data_parallel(step), or after loss.backward() "
                "average each gradient (p.grad = nn.distributed.all_reduce(p.grad)) before optimizer.step(); "
                "nn.distributed.broadcast_parameters(model) starts every process from rank 0's weights")

    @contextlib.contextmanager
    def no_sync(self):
        """Gradient accumulation without synchronisation: nothing to hold back on one process."""
        yield

    def join(self, *args, **kwargs):
        return contextlib.nullcontext()


__all__ = ["DataParallel", "DistributedDataParallel"]
