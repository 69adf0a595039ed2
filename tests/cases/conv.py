"""Op cases of the conv family: conv2d, max/avg pooling and their backward helpers.

References loop over output pixels in float64; each backward reference accumulates, pixel by
pixel, what its forward reference read.
"""
import numpy as np

import tracer as T
from tests.cases import OpCase, rand
from tracer.tensor import apply

# ---------------------------------------------------------------- references


def _geometry(in_hw, k, stride, pad, dil):
    pad = (pad,) * 4 if isinstance(pad, int) else tuple(pad) * (2 if len(pad) == 2 else 1)
    stride = (stride,) * 2 if isinstance(stride, int) else tuple(stride)
    dil = (dil,) * 2 if isinstance(dil, int) else tuple(dil)
    out = tuple((in_hw[i] + pad[i] + pad[i + 2] - dil[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(2))
    return stride, pad, dil, out


def _taps(i, j, k, stride, pad, dil):
    """The input rows and columns (unpadded coordinates, may be out of range) of output pixel (i, j)."""
    rows = [i * stride[0] + a * dil[0] - pad[0] for a in range(k[0])]
    cols = [j * stride[1] + b * dil[1] - pad[1] for b in range(k[1])]
    return rows, cols


def _conv_terms(x_shape, w_shape, stride, pad, dil, groups):
    """Every product of conv2d as (output index, input index, weight index): the forward and both
    backward references below walk the same terms, each accumulating into a different one."""
    n, c, h, wd = x_shape
    o, cg, kh, kw = w_shape
    stride, pad, dil, (ho, wo) = _geometry((h, wd), (kh, kw), stride, pad, dil)
    og = o // groups
    for b, oc, i, j in np.ndindex(n, o, ho, wo):
        rows, cols = _taps(i, j, (kh, kw), stride, pad, dil)
        for ci in range(cg):
            for a, r in enumerate(rows):
                for e, q in enumerate(cols):
                    if 0 <= r < h and 0 <= q < wd:
                        yield (b, oc, i, j), (b, oc // og * cg + ci, r, q), (oc, ci, a, e)


def _out_shape(x_shape, w_shape, stride, pad, dil):
    return (x_shape[0], w_shape[0]) + _geometry(x_shape[2:], w_shape[2:], stride, pad, dil)[3]


def conv2d_ref(x, w, bias=None, stride=1, pad=0, dil=1, groups=1):
    out = np.zeros(_out_shape(x.shape, w.shape, stride, pad, dil))
    for oi, xi, wi in _conv_terms(x.shape, w.shape, stride, pad, dil, groups):
        out[oi] += float(x[xi]) * float(w[wi])
    if bias is not None:
        out += bias.astype(np.float64)[None, :, None, None]
    return out.astype(x.dtype)


def conv2d_input_backward_ref(g, w, in_shape, stride=1, pad=0, dil=1, groups=1):
    dx = np.zeros(in_shape)
    for oi, xi, wi in _conv_terms(in_shape, w.shape, stride, pad, dil, groups):
        dx[xi] += float(g[oi]) * float(w[wi])
    return dx.astype(g.dtype)


def conv2d_weight_backward_ref(g, x, w_shape, stride=1, pad=0, dil=1, groups=1):
    dw = np.zeros(w_shape)
    for oi, xi, wi in _conv_terms(x.shape, w_shape, stride, pad, dil, groups):
        dw[wi] += float(g[oi]) * float(x[xi])
    return dw.astype(g.dtype)


def _pool_windows(x, k, stride, pad, dil, fill):
    """Yield (index, taps, values) for every output pixel; padded taps read `fill`."""
    n, c, h, wd = x.shape
    stride, pad, dil, (ho, wo) = _geometry((h, wd), k, stride, pad, dil)
    for b, ch, i, j in np.ndindex(n, c, ho, wo):
        rows, cols = _taps(i, j, k, stride, pad, dil)
        taps = [(r, q) for r in rows for q in cols]
        vals = [float(x[b, ch, r, q]) if 0 <= r < h and 0 <= q < wd else fill for r, q in taps]
        yield (b, ch, i, j), taps, vals


def _pool_out(x, k, stride, pad, dil):
    return np.zeros(x.shape[:2] + _geometry(x.shape[2:], k, stride, pad, dil)[3])


def max_pool_ref(x, k, stride, pad=0, dil=1):
    out = _pool_out(x, k, stride, pad, dil)
    for idx, _, vals in _pool_windows(x, k, stride, pad, dil, -np.inf):
        out[idx] = max(vals)
    return out.astype(x.dtype)


def avg_pool_ref(x, k, stride, pad=0):
    out = _pool_out(x, k, stride, pad, 1)
    for idx, _, vals in _pool_windows(x, k, stride, pad, 1, 0.0):
        out[idx] = sum(vals) / len(vals)
    return out.astype(x.dtype)


def max_pool_backward_ref(g, x, k, stride, pad=0, dil=1):
    dx = np.zeros(x.shape)
    for idx, taps, vals in _pool_windows(x, k, stride, pad, dil, -np.inf):
        r, q = taps[vals.index(max(vals))]  # list.index: the first maximum, as PyTorch
        dx[idx[0], idx[1], r, q] += float(g[idx])
    return dx.astype(g.dtype)


def max_pool_gather_ref(h, x, k, stride, pad=0, dil=1):
    out = _pool_out(x, k, stride, pad, dil)
    for idx, taps, vals in _pool_windows(x, k, stride, pad, dil, -np.inf):
        r, q = taps[vals.index(max(vals))]
        out[idx] = h[idx[0], idx[1], r, q]
    return out.astype(h.dtype)


def avg_pool_backward_ref(g, in_shape, k, stride, pad=0):
    dx = np.zeros(in_shape)
    x = np.zeros(in_shape)
    for idx, taps, _ in _pool_windows(x, k, stride, pad, 1, 0.0):
        for r, q in taps:
            if 0 <= r < in_shape[2] and 0 <= q < in_shape[3]:
                dx[idx[0], idx[1], r, q] += float(g[idx]) / len(taps)
    return dx.astype(g.dtype)


# ---------------------------------------------------------------- cases

_TOL = dict(rtol=1e-4, atol=1e-5)


def _conv(name, x, w, bias=None, stride=1, pad=0, dil=1, groups=1):
    inputs = [x, w] + ([bias] if bias is not None else [])
    return OpCase(name, lambda *a: T.conv2d(*a, stride=stride, padding=pad, dilation=dil, groups=groups),
                  lambda *a: conv2d_ref(*a, stride=stride, pad=pad, dil=dil, groups=groups),
                  inputs, ("nn.conv2d",) + (("reshape", "add") if bias is not None else ()), **_TOL)


def _conv_attrs(in_shape, stride, pad, dil, groups):
    stride, pad, dil, _ = _geometry(in_shape[2:], (1, 1), stride, pad, dil)
    return dict(strides=stride, padding=pad, dilation=dil, groups=groups)


def _conv_input_backward(name, g, w, in_shape, stride=1, pad=0, dil=1, groups=1):
    attrs = dict(_conv_attrs(in_shape, stride, pad, dil, groups), input_shape=in_shape)
    return OpCase(name, lambda g, w: apply("grad.conv2d_input_backward", [g, w], **attrs),
                  lambda g, w: conv2d_input_backward_ref(g, w, in_shape, stride, pad, dil, groups),
                  [g, w], ("grad.conv2d_input_backward",), **_TOL)


def _relu_conv_input_backward(name, g, w, r, stride=1, pad=0):
    attrs = dict(_conv_attrs(r.shape, stride, pad, 1, 1), input_shape=r.shape)
    return OpCase(name, lambda g, w, r: apply("grad.relu_conv2d_input_backward", [g, w, r], **attrs),
                  lambda g, w, r: np.where(r <= 0, 0, conv2d_input_backward_ref(g, w, r.shape, stride, pad, 1, 1)),
                  [g, w, r], ("grad.relu_conv2d_input_backward",), grad=False, **_TOL)  # made after differentiation


def _conv_weight_backward(name, g, x, w_shape, stride=1, pad=0, dil=1, groups=1):
    attrs = dict(_conv_attrs(x.shape, stride, pad, dil, groups), weight_shape=w_shape)
    return OpCase(name, lambda g, x: apply("grad.conv2d_weight_backward", [g, x], **attrs),
                  lambda g, x: conv2d_weight_backward_ref(g, x, w_shape, stride, pad, dil, groups),
                  [g, x], ("grad.conv2d_weight_backward",), **_TOL)


def _pool_attrs(k, stride, pad, dil=1):
    stride, pad, dil, _ = _geometry((100, 100), k, stride, pad, dil)
    return dict(pool_size=k, strides=stride, padding=pad, dilation=dil)


CASES = [
    _conv("conv2d_basic", rand(2, 3, 5, 5), rand(4, 3, 3, 3, seed=1)),
    _conv("conv2d_stride2_pad1", rand(2, 3, 7, 6), rand(4, 3, 3, 3, seed=1), stride=2, pad=1),
    _conv("conv2d_dilation2", rand(1, 2, 7, 7), rand(3, 2, 3, 3, seed=1), dil=2, pad=(1, 2)),
    _conv("conv2d_groups2_bias", rand(2, 4, 5, 5), rand(6, 2, 3, 3, seed=1), rand(6, seed=2), groups=2, pad=1),
    _conv("conv2d_depthwise", rand(1, 3, 4, 4), rand(3, 1, 2, 2, seed=1), groups=3),
    _conv("conv2d_1x1_bias", rand(2, 3, 4, 4), rand(5, 3, 1, 1, seed=1), rand(5, seed=2)),
    _conv("conv2d_batch1_asym_pad_rect", rand(1, 2, 5, 6), rand(2, 2, 2, 3, seed=1), stride=(2, 1),
          pad=(0, 1, 2, 0)),
    _conv("conv2d_stride_skips_tail", rand(1, 1, 6, 6), rand(1, 1, 2, 2, seed=1), stride=3),
    _conv_input_backward("conv2d_input_backward_stride_pad", rand(2, 4, 4, 3, seed=3), rand(4, 3, 3, 3, seed=1),
                         (2, 3, 7, 6), stride=2, pad=1),
    _conv_input_backward("conv2d_input_backward_groups_dil", rand(1, 4, 5, 5, seed=3), rand(4, 1, 3, 3, seed=1),
                         (1, 2, 7, 7), dil=2, pad=1, groups=2),
    OpCase("conv2d_bias_relu",  # made by ir.runtime.pool_relu after differentiation: not differentiable
           lambda x, w, b: apply("nn.conv2d_bias_relu", [x, w, b], **_conv_attrs((2, 3, 7, 6), 2, 1, 1, 1)),
           lambda x, w, b: np.maximum(conv2d_ref(x, w, None, 2, 1, 1, 1) + b, 0),
           [rand(2, 3, 7, 6), rand(4, 3, 3, 3, seed=1), rand(1, 4, 1, 1, seed=2)], ("nn.conv2d_bias_relu",),
           grad=False, **_TOL),
    _relu_conv_input_backward("relu_conv2d_input_backward_stride_pad", rand(2, 4, 4, 3, seed=3),
                              rand(4, 3, 3, 3, seed=1), np.maximum(rand(2, 3, 7, 6, seed=2), 0), stride=2, pad=1),
    _conv_weight_backward("conv2d_weight_backward_stride_pad", rand(2, 4, 4, 3, seed=3), rand(2, 3, 7, 6),
                          (4, 3, 3, 3), stride=2, pad=1),
    _conv_weight_backward("conv2d_weight_backward_groups_dil", rand(1, 4, 5, 5, seed=3), rand(1, 2, 7, 7),
                          (4, 1, 3, 3), dil=2, pad=1, groups=2),
    OpCase("max_pool2d_2x2", lambda x: T.max_pool2d(x, 2), lambda x: max_pool_ref(x, (2, 2), 2),
           [rand(2, 3, 4, 6)], ("nn.max_pool2d",)),
    OpCase("max_pool2d_k3_s2_p1", lambda x: T.max_pool2d(x, 3, 2, 1), lambda x: max_pool_ref(x, (3, 3), 2, 1),
           [rand(1, 2, 7, 6)], ("nn.max_pool2d",)),
    OpCase("max_pool2d_overlap", lambda x: T.max_pool2d(x, (2, 3), stride=1), lambda x: max_pool_ref(x, (2, 3), 1),
           [rand(2, 1, 4, 5)], ("nn.max_pool2d",)),
    OpCase("max_pool2d_dilation2", lambda x: T.max_pool2d(x, 2, 1, 1, dilation=2),
           lambda x: max_pool_ref(x, (2, 2), 1, 1, 2), [rand(1, 2, 5, 5)], ("nn.max_pool2d",)),
    OpCase("max_pool2d_all_negative_padded", lambda x: T.max_pool2d(x, 3, 2, 1),
           lambda x: max_pool_ref(x, (3, 3), 2, 1), [rand(1, 1, 5, 5, low=-9, high=-1)], ("nn.max_pool2d",)),
    OpCase("avg_pool2d_2x2", lambda x: T.avg_pool2d(x, 2), lambda x: avg_pool_ref(x, (2, 2), 2),
           [rand(2, 3, 4, 6)], ("nn.avg_pool2d",)),
    OpCase("avg_pool2d_k3_s2_p1", lambda x: T.avg_pool2d(x, 3, 2, 1), lambda x: avg_pool_ref(x, (3, 3), 2, 1),
           [rand(1, 2, 7, 6)], ("nn.avg_pool2d",)),
    OpCase("avg_pool2d_rect_overlap", lambda x: T.avg_pool2d(x, (3, 2), (1, 2), (1, 0)),
           lambda x: avg_pool_ref(x, (3, 2), (1, 2), (1, 0, 1, 0)), [rand(2, 1, 4, 5)], ("nn.avg_pool2d",)),
    OpCase("max_pool2d_backward", lambda g, x: apply("grad.max_pool2d_backward", [g, x], **_pool_attrs((3, 3), 2, 1)),
           lambda g, x: max_pool_backward_ref(g, x, (3, 3), 2, 1), [rand(1, 2, 4, 3, seed=3), rand(1, 2, 7, 6)],
           ("grad.max_pool2d_backward",)),
    OpCase("max_pool2d_backward_overlap_ties",
           lambda g, x: apply("grad.max_pool2d_backward", [g, x], **_pool_attrs((2, 2), 1, 0)),
           lambda g, x: max_pool_backward_ref(g, x, (2, 2), 1),
           [rand(1, 1, 3, 3, seed=3), np.ones((1, 1, 4, 4), "float32")],
           ("grad.max_pool2d_backward",), grad=False),  # ties: finite differences would move the argmax
    OpCase("relu_max_pool2d_backward",  # made by ir.runtime.pool_relu after differentiation: not differentiable
           lambda g, x: apply("grad.relu_max_pool2d_backward", [g, x], **_pool_attrs((2, 2), 2, 0)),
           lambda g, x: np.where(x <= 0, 0, max_pool_backward_ref(g, x, (2, 2), 2)),
           [rand(1, 2, 3, 3, seed=3), np.maximum(rand(1, 2, 6, 7), 0)], ("grad.relu_max_pool2d_backward",),
           grad=False),
    OpCase("max_pool2d_gather", lambda h, x: apply("grad.max_pool2d_gather", [h, x], **_pool_attrs((2, 3), 1, 1, 2)),
           lambda h, x: max_pool_gather_ref(h, x, (2, 3), 1, 1, 2), [rand(2, 1, 5, 6, seed=3), rand(2, 1, 5, 6)],
           ("grad.max_pool2d_gather",)),
    OpCase("avg_pool2d_backward",
           lambda g: apply("grad.avg_pool2d_backward", [g], input_shape=(1, 2, 7, 6), **_pool_attrs((3, 3), 2, 1)),
           lambda g: avg_pool_backward_ref(g, (1, 2, 7, 6), (3, 3), 2, 1), [rand(1, 2, 4, 3, seed=3)],
           ("grad.avg_pool2d_backward",)),
]


def relax_pool_ref(x, k, stride, pad, kind, ceil_mode=False, count_include_pad=True):
    """Relax's pooling written out: ceil_mode adds the windows a rounded-up count needs, reading past the
    padded input; an average divides by the taps inside the input (and its padding when counted)."""
    n, c, h, w = x.shape
    top, left, bottom, right = pad
    out = [(size + lo + hi - kk + (s - 1 if ceil_mode else 0)) // s + 1
           for size, lo, hi, kk, s in ((h, top, bottom, k[0], stride[0]), (w, left, right, k[1], stride[1]))]
    y = np.zeros((n, c, *out))
    for i, j in np.ndindex(*out):
        rows = [i * stride[0] + a - top for a in range(k[0])]
        cols = [j * stride[1] + b - left for b in range(k[1])]
        real = [(r, q) for r in rows for q in cols if 0 <= r < h and 0 <= q < w]
        vals = x[:, :, [r for r, _ in real], [q for _, q in real]].astype("float64")
        if kind == "max":
            y[:, :, i, j] = vals.max(-1)
            continue
        counted = (sum(-top <= r < h + bottom for r in rows) * sum(-left <= q < w + right for q in cols)
                   if count_include_pad else len(real))
        y[:, :, i, j] = vals.sum(-1) / counted
    return y.astype(x.dtype)


def _relax_pool(name, x, k, stride, pad, kind, ceil_mode=False, count_include_pad=True):
    attrs = dict(pool_size=k, strides=stride, padding=pad, ceil_mode=ceil_mode)
    if kind == "avg":
        attrs["count_include_pad"] = count_include_pad
    return OpCase(name, lambda t: apply(f"nn.{kind}_pool2d", [t], **attrs),
                  lambda a: relax_pool_ref(a, k, stride, pad, kind, ceil_mode, count_include_pad), [x],
                  (f"nn.{kind}_pool2d",))


CASES += [  # Relax's pooling forms: ceil_mode, padding up to the window, count_include_pad=False
    _relax_pool("avg_pool2d_ceil_exclude_pad", rand(2, 3, 5, 5), (2, 2), (2, 2), (0, 0, 0, 0), "avg", True, False),
    _relax_pool("avg_pool2d_ceil_include_pad", rand(1, 2, 5, 6), (3, 3), (2, 2), (1, 1, 1, 1), "avg", True, True),
    _relax_pool("avg_pool2d_pad2_k3_exclude", rand(1, 2, 4, 5), (3, 3), (1, 2), (2, 2, 2, 1), "avg", False, False),
    _relax_pool("avg_pool2d_pad2_k3_include", rand(1, 1, 4, 4), (3, 3), (2, 2), (2, 0, 2, 2), "avg", False, True),
    _relax_pool("max_pool2d_ceil_pad", rand(1, 2, 5, 5), (2, 2), (2, 2), (1, 1, 0, 0), "max", True),
    _relax_pool("max_pool2d_pad2_k3", rand(2, 1, 4, 5), (3, 3), (2, 1), (2, 2, 2, 2), "max", False),
]


# ---------------------------------------------------------------- conv3d, pad, max_pool2d_indices


def conv3d_ref(x, w, stride, pad, dil, groups=1):
    """A sum over kernel offsets of strided slices of the zero-padded input (no im2col), in float64."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + tuple((p, p) for p in pad))
    o, cg = w.shape[:2]
    out_sp = [(xp.shape[2 + i] - dil[i] * (w.shape[2 + i] - 1) - 1) // stride[i] + 1 for i in range(3)]
    out = np.zeros((x.shape[0], o, *out_sp))
    og = o // groups
    for a, b, c in np.ndindex(*w.shape[2:]):
        win = xp[:, :, a * dil[0]::stride[0], b * dil[1]::stride[1], c * dil[2]::stride[2]]
        win = win[:, :, :out_sp[0], :out_sp[1], :out_sp[2]]
        for g in range(groups):
            out[:, g * og:(g + 1) * og] += np.einsum("ncdhw,oc->nodhw", win[:, g * cg:(g + 1) * cg],
                                                     w[g * og:(g + 1) * og, :, a, b, c].astype(np.float64))
    return out.astype(x.dtype)


def _adjoint(linear, in_shape, g):
    """J^T g for the linear map `linear` on arrays of in_shape, its Jacobian built column by column."""
    basis = np.eye(int(np.prod(in_shape)))
    jac = np.stack([linear(e.reshape(in_shape)).reshape(-1) for e in basis], axis=1)
    return (jac.T @ g.astype(np.float64).reshape(-1)).reshape(in_shape).astype(g.dtype)


def _pad_ref(x, pairs, mode, value=0.0):
    if mode == "constant":
        return np.pad(x, pairs, constant_values=value)
    return np.pad(x, pairs, mode={"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode])


def max_pool_indices_ref(x, k, stride, pad, dil=1):
    out = _pool_out(x, k, stride, pad, dil).astype(np.int64)
    for idx, taps, vals in _pool_windows(x, k, stride, pad, dil, -np.inf):
        r, q = taps[vals.index(max(vals))]
        out[idx] = r * x.shape[3] + q
    return out


_C3 = dict(strides=(1, 2, 1), padding=(1, 0, 1, 1, 0, 1), dilation=(1, 1, 2), groups=2)
_C3_REF = dict(stride=(1, 2, 1), pad=(1, 0, 1), dil=(1, 1, 2), groups=2)
_X3, _W3 = (1, 4, 3, 4, 4), (2, 2, 2, 2, 2)
_G3 = conv3d_ref(np.zeros(_X3), np.zeros(_W3), **_C3_REF).shape


def _pad_case(name, shape, pad_width, mode, value=0.0):
    pairs = [(pad_width[2 * i], pad_width[2 * i + 1]) for i in range(len(shape))]
    return OpCase(name, lambda x: apply("nn.pad", [x], pad_width=pad_width, pad_mode=mode, pad_value=value),
                  lambda x: _pad_ref(x, pairs, mode, value), [rand(*shape)], ("nn.pad",))


def _pad_backward_case(name, shape, pad_width, mode):
    pairs = [(pad_width[2 * i], pad_width[2 * i + 1]) for i in range(len(shape))]
    out = tuple(n + b + a for n, (b, a) in zip(shape, pairs, strict=True))
    return OpCase(name, lambda g: apply("grad.pad_backward", [g], pad_width=pad_width, pad_mode=mode, input_shape=shape),
                  lambda g: _adjoint(lambda x: _pad_ref(x, pairs, mode), shape, g), [rand(*out, seed=3)],
                  ("grad.pad_backward",))


CASES += [
    OpCase("conv3d_groups_stride_dil", lambda x, w: apply("nn.conv3d", [x, w], **_C3),
           lambda x, w: conv3d_ref(x, w, **_C3_REF), [rand(*_X3), rand(*_W3, seed=1)], ("nn.conv3d",), **_TOL),
    OpCase("conv3d_input_backward", lambda g, w: apply("grad.conv3d_input_backward", [g, w], input_shape=_X3, **_C3),
           lambda g, w: _adjoint(lambda x: conv3d_ref(x, w, **_C3_REF), _X3, g), [rand(*_G3, seed=3), rand(*_W3, seed=1)],
           ("grad.conv3d_input_backward",), **_TOL),
    OpCase("conv3d_weight_backward", lambda g, x: apply("grad.conv3d_weight_backward", [g, x], weight_shape=_W3, **_C3),
           lambda g, x: _adjoint(lambda w: conv3d_ref(x, w, **_C3_REF), _W3, g), [rand(*_G3, seed=3), rand(*_X3)],
           ("grad.conv3d_weight_backward",), **_TOL),
    _pad_case("pad_constant_value", (2, 3, 4), (0, 1, 2, 0, 1, 3), "constant", 1.5),
    _pad_case("pad_reflect_2d", (1, 2, 4, 5), (0, 0, 0, 0, 3, 1, 2, 4), "reflect"),
    _pad_case("pad_replicate", (1, 2, 3, 3), (0, 0, 0, 0, 4, 0, 1, 2), "replicate"),
    _pad_case("pad_circular", (2, 3, 4), (0, 0, 3, 1, 2, 4), "circular"),
    _pad_backward_case("pad_backward_reflect", (1, 2, 4, 3), (0, 0, 0, 0, 3, 1, 2, 2), "reflect"),
    _pad_backward_case("pad_backward_circular", (2, 3, 4), (0, 0, 3, 1, 2, 4), "circular"),
    _pad_backward_case("pad_backward_constant", (2, 3), (1, 0, 2, 1), "constant"),
    OpCase("max_pool2d_indices", lambda x: apply("nn.max_pool2d_indices", [x], **_pool_attrs((3, 2), (2, 1), (1, 1), 2)),
           lambda x: max_pool_indices_ref(x, (3, 2), (2, 1), (1, 1), 2), [rand(2, 2, 7, 6)], ("nn.max_pool2d_indices",),
           grad=False),
]
