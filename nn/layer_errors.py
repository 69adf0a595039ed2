"""Errors that name the user's layer: which module (its repr), where it sits in the model (the dotted name that
`named_modules()` gives), the input's shape, what the layer expected, and the likely fix.

A layer's forward runs its op inside `try`; only when the op raises does the layer call one of the `check_*`
functions here, which look at static shapes (and, eagerly, at index values) and, when they recognise the
mistake, raise a new exception of the op's own type (so `pytest.raises(ValueError)` and friends still hold)
from the op's, which stays available as `__cause__`. Checks a layer makes itself (LayerNorm's
normalized_shape, BatchNorm's channels) raise `error(...)` directly. The success path costs nothing: a `try`
is free in Python 3.11, and the shapes are only looked at after a failure, so a compiled step, which runs the
forward only while it traces, raises the same message at trace time as an eager call.

The path is added as the exception leaves the module calls: `Module.__call__` hands every exception that
escapes a forward to `escaped`, which, for one made here, finds the layer in that module's `named_modules()`
and rewrites the message; the outermost call rewrites it last, so the path is the one from the model the
user called. Value errors that a compiled step finds only when it runs (an embedding index out of range, a
class index beyond the classes) keep the op's message, eager and compiled alike: it names the layer
(Embedding) or the op (nll_loss), the index and the range, but not the path, as the step raises it after
every module call has returned.

>>> import numpy as np, nn
>>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(64, 2))
>>> model(np.zeros((3, 4), "float32"))  # doctest: +ELLIPSIS
Traceback (most recent call last):
ir.types.IRError: Linear(in_features=64, out_features=2, bias=True) at model.2 (model: Sequential): ...
"""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np


class _Origin:
    """What a layer error knows: the layer, the text after its name, and (once found) its path from a root."""

    __slots__ = ("detail", "layer", "path", "root")

    def __init__(self, layer, detail: str):
        self.layer, self.detail, self.path, self.root = layer, detail, "", None

    def message(self) -> str:
        where = f" at model.{self.path} (model: {type(self.root).__name__})" if self.path else ""
        return f"{self.layer!r}{where}: {self.detail}"


def error(layer, kind: type[Exception], detail: str, said: str = "") -> Exception:
    """An exception of type `kind` whose message starts with the layer's repr, ending with what the op `said`
    (its own message) on a line of its own; Module.__call__ adds the layer's path as the error leaves the model."""
    origin = _Origin(layer, detail + (f"\n  op-level message: {said}" if said else ""))
    exc = kind(origin.message())
    exc._tracegrad_layer = origin
    return exc


def _raise_from(layer, cause: Exception, detail: str) -> None:
    """Raise the op's exception type, with the layer's message, from the op's exception."""
    try:
        exc = error(layer, type(cause), detail, str(cause))
    except Exception:  # an exception type that does not take one message: keep the op's error as it is
        return
    raise exc from cause


def escaped(exc: BaseException, module) -> None:
    """Module.__call__'s hook for an exception leaving `module`'s forward: a layer error raised inside it gains
    the layer's dotted name in `module`, the outermost module called so far."""
    origin = getattr(exc, "_tracegrad_layer", None)
    if origin is None or origin.layer is module:
        return
    try:  # a layer used at several places (one Linear assigned twice) has every one of its names
        paths = [name for name, m in module.named_modules(remove_duplicate=False) if m is origin.layer]
    except Exception:  # a module whose traversal itself fails: the error keeps the path found so far
        return
    if paths:
        origin.path, origin.root = " or model.".join(dict.fromkeys(paths)), module  # "a or model.c"
        exc.args = (origin.message(),)


# ---------------------------------------------------------------- Linear
def check_linear(layer, shape: tuple, cause: Exception) -> None:
    """Linear's op failed: when the input's last dimension is not in_features, say so and suggest the fix."""
    n_in, n_out = layer.in_features, layer.out_features
    if shape[-1:] == (n_in,):
        return
    if not shape:
        _raise_from(layer, cause, f"got a 0-d input, expected (*, {n_in}): the last dimension must be "
                                  f"in_features={n_in}")
    detail = f"input of shape {shape} has last dimension {shape[-1]}, expected in_features={n_in}: (*, {n_in})"
    flat = [k for k in range(2, len(shape)) if math.prod(shape[-k:]) == n_in]
    if flat:
        k = flat[0]
        start = len(shape) - k
        detail += (f"; the last {k} dimensions {shape[start:]} hold {n_in} values: is an nn.Flatten() missing "
                   f"before this layer? (x.flatten({start}) gives {shape[:start] + (n_in,)})")
    elif shape[-1] == n_out and n_in != n_out:
        detail += (f"; the input's last dimension is this layer's out_features: are in_features and out_features "
                   f"swapped? (nn.Linear({n_out}, {n_in}) takes it)")
    else:
        detail += (f"; the layer before gives {shape[-1]} features: make this nn.Linear({shape[-1]}, {n_out}), or "
                   f"change the previous layer to give {n_in}")
    _raise_from(layer, cause, detail)


# ---------------------------------------------------------------- convolutions
def check_conv(layer, shape: tuple, cause: Exception) -> None:
    """A convolution's op failed: a wrong number of dimensions, a wrong channel count (channels-last input,
    say), or a spatial size smaller than the kernel."""
    nd, c_in, name = layer._nd, layer.in_channels, type(layer).__name__
    spatial = ("L",) if nd == 1 else ("H", "W") if nd == 2 else ("D", "H", "W")
    layout = ", ".join(("N", "C") + spatial)
    if len(shape) not in (nd + 1, nd + 2):
        detail = (f"input of shape {shape} has {len(shape)} dimensions, expected {nd + 2} ({layout}) or {nd + 1} "
                  "unbatched")
        if len(shape) == nd:
            detail += f"; the channel axis is missing: x.unsqueeze({0 if nd == 1 else -nd - 1}) adds it"
        elif len(shape) > nd + 2 and math.prod(shape[:len(shape) - nd - 1]) > 0:
            detail += (f"; merge the leading axes into the batch: x.reshape(-1, *x.shape[{len(shape) - nd - 1}:]) "
                       f"has {nd + 2} dimensions")
        _raise_from(layer, cause, detail)
    axis = len(shape) - nd - 1
    if shape[axis] != c_in:
        detail = (f"input of shape {shape} has {shape[axis]} channels on axis {axis}, expected in_channels={c_in} "
                  f"({layout})")
        if shape[-1] == c_in:
            order = tuple(range(axis)) + (len(shape) - 1,) + tuple(range(axis, len(shape) - 1))
            detail += f"; the input looks channels-last: x.permute{order} puts the channels on axis {axis}"
        else:
            detail += (f"; the layer before gives {shape[axis]} channels: make this {name}({shape[axis]}, "
                       f"{layer.out_channels}, ...), or change the previous layer's out_channels to {c_in}")
        _raise_from(layer, cause, detail)
    if not layer.transposed:
        pads = layer._pairs
        sizes = tuple(s + b + a for s, (b, a) in zip(shape[axis + 1:], pads, strict=True))
        window = tuple(d * (k - 1) + 1 for k, d in zip(layer.kernel_size, layer.dilation, strict=True))
        if any(s < w for s, w in zip(sizes, window, strict=True)):
            _raise_from(layer, cause, f"input of shape {shape} has spatial size {shape[axis + 1:]} (padded: {sizes}), "
                                      f"smaller than the (dilated) kernel {window}: the input is too small for this "
                                      "layer (too many poolings or strides before it?), or pad it (padding=...)")


# ---------------------------------------------------------------- embeddings
def check_embedding(layer, indices, cause: Exception) -> None:
    """Embedding's lookup failed on float indices. (An index outside [0, num_embeddings) keeps the op's message,
    which names the layer, the index and the range: a compiled step finds it only when it runs, and both ways
    raise the same text.)"""
    dtype = getattr(indices, "dtype", None)
    dtype = str(dtype) if dtype is not None else None
    if isinstance(cause, TypeError) and dtype is not None and not dtype.startswith(("int", "uint")):
        _raise_from(layer, cause, f"indices of dtype {dtype} (shape {tuple(indices.shape)}): an embedding looks up "
                                  "integer indices (int64 or int32), as torch's; convert them with x.long() (or "
                                  "x.astype('int64')), and pass float features to a Linear layer instead")


# ---------------------------------------------------------------- normalization
def layer_norm_error(layer, shape: tuple) -> Exception:
    """LayerNorm's ValueError for an input whose last axes are not normalized_shape."""
    ns, k = layer.normalized_shape, len(layer.normalized_shape)
    detail = f"input of shape {shape} does not end in normalized_shape={ns}: (*, {', '.join(map(str, ns))})"
    if len(shape) > k + 1 and tuple(shape[1:1 + k]) == ns:
        last = len(shape) - 1
        detail += (f"; the input holds {ns} on axis 1: LayerNorm normalizes the last axes, so put the channels last "
                   f"(x.permute(0, {', '.join(str(a) for a in range(2, last + 1))}, 1)) or use nn.GroupNorm(1, "
                   f"{ns[0]}) for channels-first input")
    elif len(shape) >= k:
        last = "axis" if k == 1 else f"{k} axes"
        detail += f"; to normalize the last {last} of this input, make it nn.LayerNorm({tuple(shape[len(shape) - k:])})"
    said = f"{layer!r}: expected the last axes of x to be {ns}, got x of shape {shape}"
    return error(layer, ValueError, detail, said)


def batch_norm_error(layer, shape: tuple) -> Exception:
    """BatchNorm's ValueError for an input with the wrong number of dimensions or channels."""
    ndims, c = layer._ndims, layer.num_features
    wanted = " or ".join(f"{n}-d" for n in ndims)
    said = f"{type(layer).__name__}: expected {wanted} input with {c} channels on axis 1, got shape {shape}"
    if len(shape) not in ndims:
        detail = f"input of shape {shape} is {len(shape)}-d, expected {wanted} (N, C, ...)"
        fits = {2: "BatchNorm1d", 3: "BatchNorm1d", 4: "BatchNorm2d", 5: "BatchNorm3d"}.get(len(shape))
        if fits:
            detail += f"; a {len(shape)}-d input takes nn.{fits}({c})"
        return error(layer, ValueError, detail, said)
    detail = f"input of shape {shape} has {shape[1]} channels on axis 1, expected num_features={c}"
    if len(shape) > 2 and shape[-1] == c:
        order = (0, len(shape) - 1) + tuple(range(1, len(shape) - 1))
        detail += f"; the input looks channels-last: x.permute{order} puts the channels on axis 1"
    else:
        detail += (f"; the layer before gives {shape[1]} channels: make this {type(layer).__name__}({shape[1]}), or "
                   f"change the previous layer to give {c}")
    return error(layer, ValueError, detail, said)


# ---------------------------------------------------------------- losses
def check_class_loss(layer, input, target, cause: Exception) -> None:  # noqa: A002
    """CrossEntropyLoss / NLLLoss failed on float or mis-shaped class targets. (A class index out of range keeps
    the op's message, which names the index and the number of classes, the same eager and compiled.)"""
    shape, tshape, tdtype = tuple(input.shape), tuple(target.shape), str(target.dtype)
    if not shape:
        return
    axis = 1 if len(shape) >= 2 else 0
    classes = shape[axis]
    want = () if len(shape) == 1 else shape[:1] + shape[2:]
    probabilities = hasattr(layer, "label_smoothing")  # CrossEntropyLoss takes them, NLLLoss does not
    if not tdtype.startswith(("int", "uint")):
        if probabilities and tshape == shape:
            return
        detail = (f"target of dtype {tdtype} and shape {tshape}: class targets must be integer indices of shape "
                  f"{want} (int64: target.long())")
        if probabilities:
            detail += f"; float targets are class probabilities, shaped like the input {shape}"
        _raise_from(layer, cause, detail)
    if tshape != want:
        detail = (f"input of shape {shape} ({classes} classes on axis {axis}) takes class-index targets of shape "
                  f"{want}, got target of shape {tshape}")
        if tshape == want + (1,):
            detail += f"; the target has an extra axis of size 1: target.squeeze({len(tshape) - 1}) or target.view(-1)"
        elif tshape == shape:
            detail += ("; the target looks one-hot: pass target.argmax(dim=1) (class indices)"
                       + (", or target.float() as class probabilities" if probabilities else ""))
        elif len(tshape) == len(want) and tshape[:1] != want[:1]:
            detail += f"; the batch sizes differ ({shape[0]} and {tshape[0]})"
        _raise_from(layer, cause, detail)


def check_pair_loss(layer, input, target, cause: Exception) -> None:  # noqa: A002
    """A loss of input and a target of the same shape (MSELoss, L1Loss, BCELoss, ...) failed: shapes that differ."""
    shape, tshape = tuple(getattr(input, "shape", ())), tuple(getattr(target, "shape", ()))
    if shape == tshape:
        return
    detail = f"input of shape {shape} and target of shape {tshape} must have the same shape"
    if shape == tshape + (1,):
        detail += f"; the input has an extra axis of size 1 (a final Linear(..., 1)?): input.squeeze({len(shape) - 1})"
    elif tshape == shape + (1,):
        detail += f"; the target has an extra axis of size 1: target.squeeze({len(tshape) - 1})"
    elif shape[:1] != tshape[:1] and shape and tshape:
        detail += f"; the batch sizes differ ({shape[0]} and {tshape[0]})"
    _raise_from(layer, cause, detail)


def warn_broadcast(op: str, input, target) -> None:  # noqa: A002
    """A UserWarning, as torch's mse_loss / l1_loss / smooth_l1_loss / huber_loss give, when input and target
    differ in shape but broadcast (input (N, 1) against target (N,) makes an (N, N) loss: a silent wrong result)."""
    shape, tshape = getattr(input, "shape", None), getattr(target, "shape", None)
    if shape is None or tshape is None or tuple(shape) == tuple(tshape):
        return
    shape, tshape = tuple(shape), tuple(tshape)
    try:
        both = np.broadcast_shapes(shape, tshape)
    except ValueError:
        return  # no broadcast: the op's own shape error (named by the layer) follows
    hint = ""
    if shape == tshape + (1,):
        hint = f" (input.squeeze({len(shape) - 1}), or a target of shape {shape})"
    elif tshape == shape + (1,):
        hint = f" (target.squeeze({len(tshape) - 1}))"
    warnings.warn(f"{op}: using a target of shape {tshape} that is different to the input shape {shape}: they "
                  f"broadcast to {both}, which is likely not what you want; give them "
                  f"the same shape{hint}", UserWarning, stacklevel=3)


def explained(check):
    """Decorate a loss's forward(input, target): when it raises, check(loss, input, target, error) may raise the
    error again in the loss's words (a frame more on the success path, for a call made once a step)."""
    def decorate(forward):
        @functools.wraps(forward)
        def forward_explained(self, input, target):  # noqa: A002
            try:
                return forward(self, input, target)
            except (ValueError, RuntimeError) as e:
                check(self, _as_array_like(input), _as_array_like(target), e)
                raise
        return forward_explained
    return decorate


def _as_array_like(x):
    """x itself when it has a shape and dtype (a Tensor, an array), else as a NumPy array (a list, a number)."""
    return x if hasattr(x, "shape") and hasattr(x, "dtype") else np.asarray(x)
