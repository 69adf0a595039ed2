"""Data-parallel training: every process runs the same step on its own shard of each batch, and the
gradients are averaged over the processes before the optimizer sees them (PyTorch DDP, Horovod).

Launch the same script on N processes with `mpiexec -n N python train.py`; started without mpiexec it
is one process, every collective is skipped and MPI is never imported.
"""
from __future__ import annotations

import collections.abc
import time
from dataclasses import dataclass

import numpy as np

from autodiff.api import _GradFunction
from tracer.tensor import array_module_of

from ..module import Module
from ..optim import Optimizer
from . import world as _worlds
from .agree import broadcast_values, reduce_values, tell_failure
from .buckets import DEFAULT_BUCKET_BYTES, as_array, broadcast_arrays, flatten, unflatten
from .start import start_tensors

OPS = ("mean", "sum", "max", "min")
_world: _worlds.World | None = None


def init(backend: str | None = None) -> None:
    """Join the processes that mpiexec started (or be the only one). Calling it again keeps the world.

    backend=None: MPI when launched on several processes, else one process (no MPI import); an NCCL
    communicator is made the first time a CuPy buffer is reduced. "mpi" insists on mpi4py, "nccl" makes
    the NCCL communicator now (one GPU per process; a single-rank one on one process), "single" ignores
    any launcher.

    On several processes it also sets `sys.excepthook` so that an exception nothing catches, on any
    process, prints the rank and the traceback and ends the whole job with MPI_Abort: otherwise the other
    processes would wait in their next collective forever, each polling a core (MPI collectives have no
    timeout). A timeout on the collectives would instead fire on a slow step as well as a dead one, and
    could not say which process failed, or why. `sys.exit(code)` on one process alone is not an
    exception: raise instead.

    >>> init(); rank(), world_size()
    (0, 1)
    """
    global _world
    if _world is None or (backend is not None and backend != _world.backend):
        _world = _worlds.make_world(backend)


def _current() -> _worlds.World:
    if _world is None:
        init()
    return _world


def rank() -> int:
    """This process's index, 0 .. world_size() - 1 (calls init() if it was not called).

    >>> rank()
    0
    """
    return _current().rank


def world_size() -> int:
    """How many processes train together (1 without mpiexec).

    >>> world_size()
    1
    """
    return _current().size


def barrier() -> None:
    """Wait until every process reaches this line (at once on one process).

    >>> barrier()
    """
    _current().host.barrier()


def all_reduce(t, op: str = "mean"):
    """`t` combined over all processes: "mean" (floating point only), "sum", "max" or "min".

    t is a Tensor, a NumPy or CuPy array, a number, or a list, tuple or dict of them (reduced in buckets);
    the result has the same form and is new (on one process it is `t` itself); None leaves (a frozen
    parameter's gradient) stay None. `t` is not changed.

    On several processes they first agree, in one small allgather, on what they reduce: different shapes
    or dtypes raise ValueError on every process naming both (not an MPI "Message truncated"); a None leaf
    where another process has an array counts as zeros for "sum" and "mean" (as data_parallel's gradients)
    and raises for "max" and "min"; an exception raised here on one process makes every process raise.

    >>> import numpy as np
    >>> all_reduce(np.array([1.0, 3.0]), op="sum")
    array([1., 3.])
    """
    if op not in OPS:
        raise ValueError(f"all_reduce: op must be one of {', '.join(OPS)}, got {op!r}")
    world = _current()
    try:
        leaves = [(path or "the top", value, None if value is None else _checked(value, path, "all_reduce", op))
                  for path, value in flatten(t)]
    except Exception as e:
        tell_failure(world, e, "all_reduce")
        raise
    if not world.reduces:
        return t
    out, _ = reduce_values(world, leaves, op, DEFAULT_BUCKET_BYTES, "all_reduce")
    return unflatten(t, iter(out))


def _checked(value, path: str, what: str, op: str):
    array = as_array(value, what)
    if array is None:
        raise TypeError(f"{what}: cannot reduce {type(value).__name__} at {path or 'the top'}; "
                        "expected Tensors, arrays or numbers")
    if array.dtype.kind == "b":  # MPI has no SUM of booleans: refused on one process as on many
        raise TypeError(f"{what}: cannot reduce bool values at {path or 'the top'} with shape "
                        f"{tuple(array.shape)}; convert them to int first")
    if op == "mean" and array.dtype.kind != "f":
        raise TypeError(f"{what}: op='mean' needs floating-point values, got {array.dtype} at "
                        f"{path or 'the top'} with shape {tuple(array.shape)}; use op='sum'")
    return array


def broadcast_parameters(params, root: int = 0):
    """Overwrite every process's values, in place, with those of process `root`; returns `params`.

    params: a Module (its parameters and buffers), an Optimizer (its state arrays, step count and learning rate), or
    a list, tuple or dict of Tensors or arrays. Call it once after building the model and optimizer (or
    loading a checkpoint on root) so that every process starts from the same weights.

    >>> import nn
    >>> model = nn.Linear(2, 1)
    >>> broadcast_parameters(model) is model
    True
    """
    world = _current()
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < world.size:
        raise ValueError(f"broadcast_parameters: root must be a rank in 0..{world.size - 1}, got {root!r}")
    if isinstance(params, Optimizer):
        _broadcast_optimizer(world, params, root)
        return params
    if isinstance(params, collections.abc.Iterator):  # model.parameters() is a generator, as torch's
        params = list(params)
    if isinstance(params, Module):
        named = [*params.named_parameters(), *params.named_buffers()]
    else:
        named = flatten(params)
    try:
        arrays = _overwritable(named, "broadcast_parameters", "expected Tensors or arrays")
    except Exception as e:
        tell_failure(world, e, "broadcast_parameters")
        raise
    if world.reduces:
        broadcast_values(world, arrays, root, DEFAULT_BUCKET_BYTES, "broadcast_parameters",
                         "; every process must hold the same model (build it the same way on each)")
    return params


def _overwritable(named, what: str, expected: str, numbers: bool = False) -> list[tuple[str, object]]:
    """(name, array) for each value of `named` that a broadcast overwrites in place; with numbers, Python
    and NumPy numbers are kept as they are (they cannot be overwritten: the processes check they agree)."""
    out = []
    for path, value in named:
        name = path or "the top"
        if isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_)):
            if not numbers:
                raise TypeError(f"{what}: cannot overwrite {type(value).__name__} at {name} in place; {expected}")
            out.append((name, value.item() if isinstance(value, np.number) else value))
            continue
        array = as_array(value, what)
        if array is None:
            raise TypeError(f"{what}: cannot overwrite {type(value).__name__} at {name} in place; {expected}")
        out.append((name, array))
    return out


def _broadcast_optimizer(world, opt: Optimizer, root: int) -> None:
    if not world.reduces:
        return
    # root's state has arrays other processes may not have yet (before their first step): shapes first
    layout = [{k: (v.shape, str(v.dtype)) for k, v in s.items()} for s in opt.state]
    layout, opt.lr, opt.step_count = world.host.bcast_object((layout, opt.lr, opt.step_count), root)
    for p, s, want in zip(opt.params, opt.state, layout, strict=True):
        for k, (shape, dtype) in want.items():
            if k not in s or s[k].shape != shape or str(s[k].dtype) != dtype:
                s[k] = array_module_of(p._data).zeros(shape, dtype)
        for k in [k for k in s if k not in want]:
            del s[k]
    broadcast_arrays(world, [s[k] for s in opt.state for k in sorted(s)], root, DEFAULT_BUCKET_BYTES)


@dataclass
class CommStats:
    """What a data_parallel step spent on collectives, summed over its calls: `collectives` and `bytes` of
    the all-reduces, `checks` the small allgathers before them (shapes, failures: one per call on several
    processes), `seconds` the time of both."""

    calls: int = 0
    collectives: int = 0
    bytes: int = 0
    seconds: float = 0.0
    checks: int = 0


class DataParallel:
    """`step` with its results averaged over the processes; see `data_parallel`."""

    def __init__(self, step, has_aux: bool, average_aux: bool, bucket_bytes: int):
        if not callable(step):
            raise TypeError(f"data_parallel: step must be callable, got {type(step).__name__}")
        if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, int) or bucket_bytes < 1:
            raise ValueError(f"data_parallel: bucket_bytes must be a positive integer, got {bucket_bytes!r}")
        self.step, self.has_aux, self.average_aux, self.bucket_bytes = step, has_aux, average_aux, bucket_bytes
        self.comm_stats = CommStats()
        argnums = getattr(step, "argnums", None)
        self._argnums = (argnums,) if isinstance(argnums, int) else tuple(argnums or ())
        world = _current()
        if world.size > 1:  # every process builds the wrapper at the same point, as DDP's constructor
            if isinstance(step, _GradFunction):
                root, wrt = step.fn, step.leaves
            else:
                root, wrt = step, ()
            self._broadcast(world, lambda: start_tensors(root, wrt), "data_parallel")

    def _broadcast(self, world, named, what: str) -> None:
        """Rank 0's values of `named()` on every process (after checking they hold the same shapes)."""
        try:
            values = _overwritable(named(), what, "differentiate Tensors or arrays", numbers=True)
        except Exception as e:  # the others are about to wait for this process: tell them
            tell_failure(world, e, what)
            raise
        broadcast_values(world, values, 0, DEFAULT_BUCKET_BYTES, what,
                         "; every process must build the same model (the same layers and shapes) before data_parallel")

    def __getattr__(self, name):  # step.module, step.stats, step.memory_profile() of a wrapped value_and_grad
        if name in ("step", "_argnums"):  # not set yet (a failed __init__, unpickling)
            raise AttributeError(name)
        return getattr(self.step, name)

    def __call__(self, *args, **kwargs):
        world = _current()
        if self._argnums and self.comm_stats.calls == 0 and world.size > 1:
            # the differentiated arguments are the parameters (JAX's form): rank 0's, from the first call on
            self._broadcast(world, lambda: [(f"argument {i}{path}", v) for i in self._argnums if i < len(args)
                                            for path, v in flatten(args[i]) if v is not None],
                            "data_parallel(argnums)")
        try:
            out = self.step(*args, **kwargs)
            averaged, aux, join = self._split(out)  # checked on one process too
            if world.reduces:
                # a frozen parameter's gradient is None: None everywhere stays None, and is in no bucket
                entries = [(p, v, None if v is None else _checked(v, p, "data_parallel", "mean"))
                           for p, v in flatten(averaged, "result")]
                aux_leaves = [(p, v, as_array(v, "data_parallel")) for p, v in flatten(aux, "aux")]
                picked = [i for i, (_, _, a) in enumerate(aux_leaves) if self.average_aux and _is_float(a)]
        except Exception as e:  # the other processes are about to wait for this one: tell them
            tell_failure(world, e, "data_parallel")
            raise
        self.comm_stats.calls += 1
        if not world.reduces:
            return out
        stats = self.comm_stats
        before, start = world.collectives, time.perf_counter()
        reduced, arrays = reduce_values(world, entries + [aux_leaves[i] for i in picked], "mean", self.bucket_bytes,
                                        "data_parallel", self._hint)
        stats.seconds += time.perf_counter() - start
        stats.collectives += world.collectives - before
        stats.checks += world.size > 1
        stats.bytes += sum(a.nbytes for a in arrays)
        averaged = unflatten(averaged, iter(reduced[:len(entries)]))
        if picked:
            new_aux = [v for _, v, _ in aux_leaves]
            for i, r in zip(picked, reduced[len(entries):], strict=True):
                new_aux[i] = r
            aux = unflatten(aux, iter(new_aux))
        return join(averaged, aux)

    def _hint(self, name: str) -> str:
        if name.startswith("aux"):
            return ("; average_aux=True averages arrays of the same shape on every process (an uneven last batch? "
                    "nn.data.batches(..., drop_last=True) gives every process full batches; or reduce that value "
                    "yourself)")
        return ("; every process must run the same model on batches of the same shapes (an uneven last batch? "
                "use nn.data.batches(..., drop_last=True))")

    def _split(self, out):
        """(the part to average, aux, a function putting both back in out's form)."""
        if not self.has_aux:
            return out, (), lambda averaged, aux: averaged
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError(f"data_parallel(has_aux=True): the step must return ((value, aux), grads) or "
                            f"(grads, aux), got {type(out).__name__}")
        first, second = out
        # autodiff's grad / value_and_grad say which form they return; other steps are told by the shape
        # (a guess that mistakes grad's ((0-d gradient, gradient), aux) for ((value, aux), grads))
        with_value = getattr(self.step, "return_value", None)
        if not isinstance(with_value, bool):
            with_value = isinstance(first, tuple) and len(first) == 2 and _is_scalar(first[0])
        if with_value:  # value_and_grad's form
            (value, aux), grads = out
            return (value, grads), aux, lambda avg, aux: ((avg[0], aux), avg[1])
        return first, second, lambda avg, aux: (avg, aux)  # grad's form: (grads, aux)


def _is_float(array) -> bool:
    return array is not None and array.dtype.kind == "f"


def _is_scalar(value) -> bool:
    array = as_array(value, "data_parallel")
    return _is_float(array) and array.ndim == 0


def data_parallel(step, *, has_aux: bool = False, average_aux: bool = False,
                  bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> DataParallel:
    """Wrap a gradient step so that each call averages its results over all processes.

    `step(*args)` is any callable returning gradients, or (value, gradients), as `autodiff.grad` and
    `autodiff.value_and_grad` do (gradients: a Tensor or array, or a list, tuple or dict of them). Every
    process calls it on its own shard of the batch; the wrapper averages the value and the gradients over
    the processes, packed into flat buffers of up to `bucket_bytes` (25 MiB, PyTorch DDP's default), one
    all-reduce per buffer. With has_aux the step returns ((value, aux), grads) or (grads, aux); aux stays
    this process's own unless average_aux, which averages its floating-point values too. On one process
    the step's results come back untouched. `.comm_stats` sums the collectives, bytes and seconds spent.

    On several processes (every process must build the wrapper at the same point, as DDP's constructor):

    - Same start. Building it overwrites, in place, every process's values with rank 0's (as DDP does) for
      the step's `wrt` tensors and the parameters and buffers of every nn.Module its function reaches
      (closure, globals, `self`); with `argnums` (JAX's form), the arguments at those positions on the
      first call. So a checkpoint loaded on rank 0 alone reaches every process; tensors reached only
      outside a Module (a data shard the function holds) are left alone. Buffers are sent once, not per
      step; optimizer state is not touched (`broadcast_parameters(opt)` sends it).
    - Agreement before each all-reduce. The processes exchange the shapes of what they reduce in one small
      allgather (counted in `.comm_stats.checks`). Different shapes (an uneven last batch with
      average_aux, a different model) raise ValueError on every process naming both ranks' shapes. A
      gradient that is None on some processes (a parameter their batch did not reach) counts as zeros
      there and every process gets the averaged array, as DDP with find_unused_parameters; None on every
      process stays None (a frozen parameter).
    - Failures end the job. An exception inside the step on one process makes every other process raise
      RuntimeError naming the failed rank and its error (the failed one raises its own), instead of waiting
      in the all-reduce forever. An exception elsewhere that nothing catches aborts all processes through
      MPI_Abort (see `init`).

    >>> import numpy as np, autodiff, nn
    >>> model = nn.Linear(3, 1)
    >>> step = data_parallel(autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters()))
    >>> loss, grads = step(np.ones((4, 3), "float32"))
    >>> [tuple(g.shape) for g in grads]
    [(1, 3), (1,)]
    """
    return DataParallel(step, has_aux, average_aux, bucket_bytes)
