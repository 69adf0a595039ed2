"""The Tensor: concrete outside a trace, symbolic (shape and dtype only) inside one.

Every op goes through `apply`, which checks arguments with the op's inference, then either runs the
op's kernel at once or appends a binding to the active trace.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

import ir
from ir import Constant, Expr, TensorType, Var, make_call
from ir.ops import get_op
from ir.runtime import anomaly as _anomaly
from ir.structural import attrs_key

from .device import check_same_device, device_of
from .source import user_source

_DTYPE_NAMES = {np.dtype(d): d for d in ir.DTYPES}


def dtype_name(dtype) -> str:
    """The name of an array's dtype ("float32"); NumPy's own str(dtype) is slow on hot paths."""
    name = _DTYPE_NAMES.get(dtype)
    return name if name is not None else str(dtype)


class TraceError(RuntimeError):
    """A traced value was used where a concrete one is needed (Python control flow, item(), numpy())."""


_state = threading.local()


def active_trace():
    stack = getattr(_state, "stack", None)
    return stack[-1] if stack else None


def push_trace(ctx) -> None:
    if not hasattr(_state, "stack"):
        _state.stack = []
    _state.stack.append(ctx)


def pop_trace() -> None:
    _state.stack.pop()


def is_active(ctx) -> bool:
    """True while ctx is on the stack of traces being recorded (it may enclose the current one)."""
    return ctx in getattr(_state, "stack", ())


def array_module_of(a):
    return np if isinstance(a, np.ndarray) else _cupy_module(a)


def _cupy_module(a):
    import cupy  # only reached for arrays that are not NumPy's

    return cupy


def _as_array(value, dtype=None):
    """A new array of value's data: a tensor owns its memory, as torch.tensor copies (from_numpy shares)."""
    if type(value).__module__.startswith("cupy"):
        return value.copy() if dtype is None else value.astype(dtype)
    if dtype is None and not isinstance(value, (np.ndarray, np.generic)):  # NumPy scalars keep their dtype
        probe = np.asarray(value)
        if probe.dtype == np.float64:  # Python floats default to float32, as in PyTorch
            dtype = "float32"
        elif probe.dtype.kind in "iu" and probe.dtype != np.int32:
            dtype = "int64"
        value = probe
    arr = np.array(value, dtype=dtype, copy=True)
    ir.types.check_dtype(str(arr.dtype), "tensor")
    return arr


class Tensor:
    """A tensor with a PyTorch-like API.

    >>> import tracer
    >>> x = tracer.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> (x * 2 + 1).sum().item()
    24.0
    >>> x.shape, x.dtype
    ((2, 2), 'float32')
    """

    # _weak: a Python number passed to a compiled step, traced as a 0-d input that promotes like the number
    # _ag: autograd's record (None; tracer.autograd.LEAF for a leaf that requires grad; the Node of a recorded
    # result), _grad: what backward() accumulated (tracer/autograd.py)
    __slots__ = ("_data", "_var", "_trace", "_name", "_in_trace", "_fresh_seed", "_weak", "_ag", "_grad",
                 "__weakref__")
    _is_parameter = False  # nn.Parameter: requires_grad False means frozen, for value_and_grad and optimizers
    # __array_ufunc__ / __array_function__ (np.exp(t), ndarray * t, np.sum(t) -> Tensor) and __setitem__ are
    # installed from tracer/numpy_interop.py and tracer/setitem.py

    def __init__(self, data=None, dtype=None, *, _var: Var | None = None, _trace=None, name: str = ""):
        if isinstance(data, Tensor) and data._var is not None:
            # a traced value: the new tensor is the same SSA value (cast when another dtype is asked for);
            # from a Python number passed to a compiled step, the dtype tensor(number) has eagerly
            if dtype is None and data._weak and data.dtype == "float64":
                dtype = "float32"
            if dtype is not None and ir.types.check_dtype(dtype, "tensor") != data.dtype:
                data = apply("astype", [data], dtype=dtype)
            _var, _trace = data._var, data._trace
        if _var is not None:
            self._data, self._var, self._trace = None, _var, _trace
        else:
            self._data = _as_array(data._data if isinstance(data, Tensor) else data, dtype)
            self._var, self._trace = None, None
        self._name = name
        ctx = active_trace()
        # the trace it was made in (weakly: a kept constant must not keep the trace alive), where it is a
        # constant; any other trace captures it as a parameter
        self._in_trace = weakref.ref(ctx) if ctx is not None and _var is None else None
        self._fresh_seed = self._weak = False
        self._ag = self._grad = None

    @classmethod
    def wrap(cls, array) -> Tensor:
        """A concrete Tensor around an array the library made itself (no copy, no checks)."""
        t = object.__new__(cls)
        t._data, t._var, t._trace, t._name, t._in_trace = array, None, None, "", None
        t._fresh_seed = t._weak = False
        t._ag = t._grad = None
        return t

    @classmethod
    def traced(cls, var: Var, ctx, weak: bool = False) -> Tensor:
        """A symbolic Tensor: the value of `var` in trace `ctx`."""
        t = cls.wrap(None)
        t._var, t._trace, t._weak = var, ctx, weak
        return t

    # ------------------------------------------------------------ basic properties
    @property
    def is_traced(self) -> bool:
        return self._var is not None

    @property
    def type(self) -> TensorType:
        """The IR type (a TensorType); called, torch's `x.type()` / `x.type(dtype)` (see TypeOf)."""
        return TypeOf(self.shape, self.dtype, self)

    @property
    def ir_type(self) -> TensorType:
        """The IR type as a plain TensorType (what IR nodes hold: no reference back to the tensor)."""
        if self._var is not None:
            return self._var.type
        return TensorType(self._data.shape, dtype_name(self._data.dtype))

    @property
    def shape(self) -> tuple[int, ...]:
        return self._var.type.shape if self._var is not None else tuple(self._data.shape)

    @property
    def dtype(self) -> str:
        return self._var.type.dtype if self._var is not None else dtype_name(self._data.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def size(self, dim: int | None = None):
        """The shape as a tuple (torch's ``x.size()``), or the length of axis `dim`; ``numel()`` counts elements.

        >>> import tracer
        >>> x = tracer.zeros((2, 3))
        >>> x.size(), x.size(-1), x.numel()
        ((2, 3), 3, 6)
        """
        if dim is None:
            return self.shape
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"size: dim must be an int, got {dim!r}")
        if not -self.ndim <= dim < max(self.ndim, 1) or not self.ndim:
            raise IndexError(f"size: dim {dim} out of range for a tensor of shape {self.shape}")
        return self.shape[dim]

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ------------------------------------------------------------ leaving the tensor world
    def _concrete(self, what: str):
        if self._var is not None:
            raise TraceError(
                f"{what} of a traced value ({self._var.type}) inside a trace: its value is unknown while "
                "tracing. Compute it outside the traced function, or use tracer.where(cond, a, b) instead "
                "of Python control flow.")
        return self._data

    def numpy(self) -> np.ndarray:
        """The values as a NumPy array: a CPU tensor's own memory (shared, as torch's), a GPU tensor's values
        copied to the host (torch raises there and asks for `.cpu().numpy()`; both spellings work here)."""
        data = self._concrete("numpy()")
        return data if isinstance(data, np.ndarray) else data.get()

    def __array__(self, dtype=None, copy=None):
        # NumPy 2's protocol: copy=True (np.array) must not hand out the tensor's own buffer
        a = self.numpy()
        if dtype is not None and a.dtype != dtype:
            if copy is False:
                raise ValueError(f"a {a.dtype} tensor cannot be viewed as {dtype} without a copy")
            return a.astype(dtype)
        return a.copy() if copy else a

    def item(self):
        data = self._concrete("item()")
        if data.size != 1:
            raise ValueError(f"item() needs a tensor of one element, got shape {self.shape}")
        return data.reshape(()).item()

    def __bool__(self):
        data = self._concrete("bool()")
        if data.size != 1:
            raise ValueError(f"the truth value of a tensor of shape {self.shape} is ambiguous")
        return bool(data.reshape(()))

    def __float__(self):
        self._concrete("float()")
        return float(self.item())

    def __int__(self):
        self._concrete("int()")
        return int(self.item())

    def __index__(self):
        if self.dtype not in ir.types.INT_DTYPES or self.numel() != 1:
            raise TypeError(f"only integer tensors of a single element can be converted to an index, got a "
                            f"{self.dtype} tensor of shape {self.shape}")
        return int(self._concrete("use as a Python index").reshape(()))

    def __iter__(self):
        # along the first axis, eagerly and inside a trace alike: the shape is static, so `for row in x`,
        # `a, b = x` and zip(states, actions) unroll into one index op per row
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __hash__(self):
        if self._weak:  # a Python number passed to a compiled step: as a dict key its value would matter
            raise TraceError("a number passed to the compiled step was used as a dict key or set member; "
                             "its value is unknown while tracing")
        return id(self)

    def __repr__(self) -> str:
        if self._var is not None:
            return f"Tensor(traced {self._var.type})"
        body = np.array2string(self.numpy(), separator=", ", prefix="Tensor(")
        where = "" if isinstance(self._data, np.ndarray) else f', device="{device_of(self._data)}"'  # as torch's
        return f'Tensor({body}, dtype="{self.dtype}"{where})'


_TORCH_TYPES = {"float16": "HalfTensor", "float32": "FloatTensor", "float64": "DoubleTensor", "int8": "CharTensor",
                "uint8": "ByteTensor", "int16": "ShortTensor", "int32": "IntTensor", "int64": "LongTensor",
                "bool": "BoolTensor"}


class TypeOf(TensorType):
    """`x.type`: x's TensorType (equal to and hashing as the plain one), and callable as torch's Tensor.type:
    `x.type()` is torch's type string ('torch.FloatTensor'), `x.type(dtype)` converts (a dtype name, a NumPy or
    torch dtype, or a string such as 'torch.DoubleTensor'), as x.to(dtype)."""

    def __init__(self, shape, dtype, tensor):
        super().__init__(shape, dtype)
        object.__setattr__(self, "_tensor", weakref.ref(tensor))

    def __call__(self, dtype=None, non_blocking: bool = False):
        t = self._tensor()
        if dtype is None:
            return "torch." + _TORCH_TYPES[self.dtype]
        if isinstance(dtype, str) and dtype.startswith("torch.") and dtype.endswith("Tensor"):
            names = {v: k for k, v in _TORCH_TYPES.items()}
            if dtype[6:] not in names:
                raise ValueError(f"type: invalid type {dtype!r}")
            dtype = names[dtype[6:]]
        return t.to(dtype)

    def __eq__(self, other):
        return isinstance(other, TensorType) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype))

    def __repr__(self):
        return f"TensorType(shape={self.shape!r}, dtype={self.dtype!r})"


# ---------------------------------------------------------------- dispatch

def to_expr(value, ctx) -> Expr:
    """The IR expression of a Tensor inside trace `ctx` (capturing outside tensors as parameters)."""
    if value._var is not None:
        if value._trace is ctx:
            if value._var in ctx.views:
                _check_view(value._var, ctx)
            return value._var
        if is_active(value._trace):  # a value of an enclosing trace: a parameter of this nested one
            return ctx.capture(value)
        if value._trace is not ctx:
            raise TraceError(f"a traced value ({value._var.type}) escaped the trace that made it; "
                             "return it from the traced function instead of storing it")
        return value._var
    if value._in_trace and value._in_trace() is ctx and not value._fresh_seed:
        return Constant(value._data if isinstance(value._data, np.ndarray) else value._data.get())
    written = ctx.writes.get(id(value))  # an outside tensor the trace wrote to in place reads its new value
    return written[1] if written is not None else ctx.capture(value)


# ops whose eager NumPy kernels return views of their first input (stop_gradient, detach's op, returns the
# input's own buffer, as torch's detach shares it): an in-place write to the base after the view was taken
# would show through the view eagerly, which a trace (values, not buffers) cannot mimic
VIEW_OPS = frozenset({"reshape", "permute_dims", "expand_dims", "squeeze", "strided_slice", "split", "broadcast_to",
                      "grad.stop_gradient"})


def _version(t: Tensor, ctx):
    """What `t` holds now in trace ctx: its traced value, or for an outside tensor the value last written to
    it in place (None while unwritten); a view whose base's version changed would differ from eager."""
    if t._var is not None:
        return t._var
    written = ctx.writes.get(id(t))
    return written[1] if written is not None else None


def _view_base(t: Tensor, ctx):
    """(base, its version) for a view of t taken now in ctx: a view of a view is a view of the first one's
    base; an outside tensor (a captured weight or buffer) is a base too, its writes recorded in ctx.writes."""
    if t._var is not None:
        return (ctx.views.get(t._var) or (t, t._var)) if t._trace is ctx else None
    return t, _version(t, ctx)


def _check_view(var, ctx) -> None:
    base, base_version = ctx.views[var]
    if _version(base, ctx) is not base_version:
        raise TraceError(f"a view ({var.type}) of a tensor that was then updated in place is used inside a trace: "
                         "eagerly the view would show the update, a traced value cannot; take the view after the "
                         "update, or update out of place (y = x + 1)")


def apply(op_name: str, inputs, **attrs):
    """Run or record one op on Tensors; the result is a Tensor, or a tuple for tuple-valued ops."""
    ctx = active_trace()
    if ctx is None:
        return _run_eager(op_name, inputs, attrs)
    op = get_op(op_name)
    if op.tuple_input:
        args = [ir.Tuple([to_expr(t, ctx) for t in inputs[0]])]
    else:
        args = [to_expr(t, ctx) for t in inputs]
    var = ctx.builder.emit(make_call(op_name, args, attrs))
    base = _view_base(inputs[0], ctx) if op_name in VIEW_OPS else None
    if isinstance(var.type, ir.TupleType):
        fields = tuple(Tensor(_var=ctx.builder.get_item(var, i), _trace=ctx) for i in range(len(var.type.fields)))
        for f in fields if base is not None else ():
            ctx.views[f._var] = base
        return fields
    if base is not None:
        ctx.views[var] = base
    # an op on Python numbers passed to the step alone still promotes like a Python number
    weak = bool(inputs) and not op.tuple_input and all(t._weak for t in inputs)
    return Tensor.traced(var, ctx, weak)


# (op, input shapes and dtypes, attrs key) -> (op, tuple input, normalized attrs, result type): an eager op
# checks its arguments with the op's inference once per signature, as Builder.call does for emitted IR
_EAGER: dict[tuple, tuple] = {}
_EAGER_MAX = 8192


def _run_eager(op_name, inputs, attrs):
    op = get_op(op_name)
    tuple_input = op.tuple_input
    flat = list(inputs[0]) if tuple_input else list(inputs)
    tracked = gpu = False
    sig, arrays = [], []
    for t in flat:
        if t._var is not None:
            raise TraceError(f"{op_name}: a traced value ({t._var.type}) escaped the trace that made it")
        if t._ag is not None:  # requires grad: recorded below, unless in no_grad()
            tracked = True
        d = t._data
        if type(d) is not np.ndarray:
            gpu = True
        arrays.append(d)
        sig.append((d.shape, d.dtype))
    key = (op_name, tuple(sig), attrs_key(attrs) if attrs else ())
    known = _EAGER.get(key)
    if known is None:
        fake = [Var("x", t.ir_type) for t in flat]
        call = make_call(op_name, [ir.Tuple(fake)] if tuple_input else fake, attrs)
        if len(_EAGER) >= _EAGER_MAX:
            _EAGER.clear()
        known = _EAGER[key] = (call.attrs, call.type)
    attrs = known[0]
    xp = np
    if gpu:  # a CuPy array among them: run there
        check_same_device(op_name, arrays)  # host scalars (0-d) may join, as CPU scalars in torch
        xp = _cupy_module(None)
        arrays = [xp.asarray(a) for a in arrays]
    out = op.kernel(xp, tuple(arrays), **attrs) if tuple_input else op.kernel(xp, *arrays, **attrs)
    if _anomaly.enabled:  # autodiff.detect_anomaly: a NaN or inf born here raises
        _anomaly.check_eager(op_name, arrays, attrs, out, user_source)
    if isinstance(out, tuple):
        result = tuple(Tensor.wrap(o) for o in out)
    else:
        result = Tensor.wrap(out if type(out) is xp.ndarray else xp.asarray(out))
    if tracked and _autograd.grad_mode.enabled and op.differentiable:
        _autograd.record(op_name, attrs, known[1], key[2], flat, result, tuple_input)
    return result


from . import autograd as _autograd  # noqa: E402  (it reads Tensor from this module)
