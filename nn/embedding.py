"""Embedding and EmbeddingBag, with torch's constructor signatures, weight (num_embeddings, embedding_dim) ~ N(0, 1),
state-dict key `weight`, and torch's padding_idx, max_norm and scale_grad_by_freq rules; F.embedding and
F.embedding_bag.

max_norm renormalises, in place and outside the gradient (as torch's embedding_renorm_), each looked-up row whose
norm_type-norm exceeds max_norm, to max_norm / (norm + 1e-7) times itself, before the lookup. Eagerly this is
done on the weight's buffer itself; inside a trace the renormalised weight is written back with copy_ (so a
compiled step updates the weight as an eager call does) and the lookup reads it with the weight's own gradient
(torch's: the renormalisation is invisible to autograd). sparse=True is accepted and gives a dense gradient
(tracegrad has no sparse tensors).

>>> import numpy as np
>>> Embedding(4, 2, padding_idx=0).weight.numpy()[0].tolist()
[0.0, 0.0]
>>> bag = EmbeddingBag.from_pretrained(tracer.tensor(np.arange(6.0).reshape(3, 2)), mode="sum")
>>> bag(np.array([0, 1, 2]), np.array([0, 1])).numpy().tolist()
[[0.0, 1.0], [6.0, 8.0]]
"""
from __future__ import annotations

import numpy as np

import tracer
from tracer import Tensor
from tracer.tensor import apply

from . import init, layer_errors
from .module import Module, Parameter
from .parameter import factory_dtype, place


def _indices(indices, num: int, what: str) -> Tensor:
    t = indices if isinstance(indices, Tensor) else tracer.tensor(np.asarray(indices))
    if not t.dtype.startswith(("int", "uint")):
        raise TypeError(f"{what}: expected integer indices (int64 or int32), got {t.dtype}")
    # take() counts negative indices from the end (numpy's rule); an embedding refuses them, as torch, with an op
    # (one pass over the indices) so that a compiled step raises the eager error too
    return apply("check_index", [t], lower=0, upper=num, what=what)


def _norms(w, norm_type: float, xp=None):
    if xp is not None:
        a = xp.abs(w)
        return (a ** norm_type).sum(-1) ** (1.0 / norm_type)
    a = tracer.abs(w)
    return tracer.power(tracer.sum(tracer.power(a, norm_type), axis=-1), 1.0 / norm_type)


def _renormed(weight: Tensor, flat: Tensor, max_norm: float, norm_type: float) -> Tensor:
    """The weight with every row that `flat` looks up and whose norm exceeds max_norm scaled down (in place when
    eager; written back with copy_ inside a trace), as a tensor whose gradient is the weight's own."""
    if weight._var is None and flat._var is None:
        data = weight._data
        rows = np.unique(np.asarray(flat.numpy()))
        norms = _norms(data[rows], norm_type, np)
        big = norms > max_norm
        data[rows[big]] *= (max_norm / (norms[big] + 1e-7))[:, None].astype(data.dtype)
        return weight
    used = tracer.sum(tracer.astype(tracer.expand_dims(flat, 1) == tracer.arange(weight.shape[0], dtype=flat.dtype),
                                    "int64"), axis=0) > 0
    norms = tracer.stop_gradient(_norms(weight, norm_type))
    scale = tracer.where(used & (norms > max_norm), max_norm / (norms + 1e-7), 1.0)
    new = tracer.stop_gradient(weight * tracer.expand_dims(scale, 1))
    result = weight + (new - tracer.stop_gradient(weight))  # the new values, the weight's gradient
    with tracer.no_grad():
        weight.copy_(new)
    return result


def embedding(input, weight, padding_idx: int | None = None, max_norm: float | None = None,  # noqa: A002
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False, *,
              _what: str = "embedding") -> Tensor:
    """Rows of weight (num_embeddings, dim) at the integer indices `input`, as torch's F.embedding: the padding_idx
    row gets no gradient; max_norm renormalises the looked-up rows in place first; scale_grad_by_freq divides each
    row's gradient by how often it occurs in the batch."""
    weight = weight if isinstance(weight, Tensor) else tracer.tensor(weight)
    num = weight.shape[0]
    idx = _indices(input, num, _what)
    if padding_idx is not None:
        padding_idx = padding_idx % num
    if max_norm is not None:
        weight = _renormed(weight, tracer.reshape(idx, (-1,)), max_norm, norm_type)
    if padding_idx is not None:  # the padding row's gradient is cut: the same values, no gradient
        row = np.arange(num)[:, None] == padding_idx
        weight = tracer.where(tracer.tensor(row), tracer.stop_gradient(weight), weight)
    out = tracer.take(weight, idx, axis=0)
    if scale_grad_by_freq:
        flat = tracer.reshape(idx, (-1,))
        counts = tracer.sum(tracer.astype(tracer.expand_dims(flat, 1) == tracer.arange(num, dtype=flat.dtype),
                                          weight.dtype), axis=0)
        scale = tracer.expand_dims(1.0 / tracer.take(tracer.maximum(counts, 1.0), idx, axis=0), -1)
        fixed = tracer.stop_gradient(out)
        out = fixed + (out - fixed) * scale  # the same values; each row's gradient divided by its count
    return out


class Embedding(Module):
    """A lookup table of num_embeddings rows of embedding_dim, as torch.nn.Embedding (see the module docstring)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight=None, _freeze: bool = False, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if padding_idx is not None:
            if isinstance(padding_idx, bool) or not isinstance(padding_idx, (int, np.integer)) or \
                    not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"{name}: padding_idx must be an int in [-{num_embeddings}, {num_embeddings}), "
                                 f"got {padding_idx!r}")
            padding_idx = int(padding_idx) % num_embeddings
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = max_norm, norm_type, \
            scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = init.normal_(Parameter(np.empty((num_embeddings, embedding_dim), factory_dtype(dtype))))
            if padding_idx is not None:
                self.weight._data[padding_idx] = 0
        else:
            w = _weight.numpy() if isinstance(_weight, Tensor) else np.asarray(_weight)
            if w.shape != (num_embeddings, embedding_dim):
                raise ValueError(f"{name}: _weight of shape {w.shape} must be ({num_embeddings}, {embedding_dim})")
            self.weight = Parameter(w)
        self.weight.requires_grad = not _freeze
        place(self, device)

    @property
    def dim(self) -> int:
        """embedding_dim (tracegrad's earlier name)."""
        return self.embedding_dim

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx: int | None = None,
                        max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> Embedding:
        """An Embedding whose weight is a copy of `embeddings` (2-d), frozen unless freeze=False, as torch's."""
        shape = tuple(embeddings.shape)
        if len(shape) != 2:
            raise ValueError(f"Embedding.from_pretrained: embeddings must be 2-dimensional, got shape {shape}")
        return cls(shape[0], shape[1], padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)

    def forward(self, input):  # noqa: A002
        try:
            return embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                             self.scale_grad_by_freq, self.sparse, _what=repr(self))
        except TypeError as e:
            layer_errors.check_embedding(self, input, e)  # raises the error in the layer's words when it sees why
            raise

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        for k in ("padding_idx", "max_norm"):
            if getattr(self, k) is not None:
                s += f", {k}={getattr(self, k)}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        if self.sparse:
            s += ", sparse=True"
        return s


def embedding_bag(input, weight, offsets=None, max_norm: float | None = None, norm_type: float = 2,  # noqa: A002
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights=None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """The sum, mean or max of each bag's embedding rows, as torch's F.embedding_bag: 2-d input (B, K) is B bags
    of K, 1-d input is cut into bags at `offsets` (B,) (B + 1 with include_last_offset); per_sample_weights
    (mode "sum" only) scale each row; padding_idx entries are left out (and not counted by "mean"); an empty bag
    gives zeros."""
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    weight = weight if isinstance(weight, Tensor) else tracer.tensor(weight)
    idx = _indices(input, weight.shape[0], "embedding_bag")
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: if input is 2D, then offsets has to be None, as input is treated as a "
                             "mini-batch of fixed length sequences")
        bags, length = idx.shape
        bag_of = tracer.reshape(tracer.broadcast_to(tracer.expand_dims(tracer.arange(bags, dtype="int64"), 1),
                                                    idx.shape), (-1,))
        member = tracer.expand_dims(tracer.arange(bags, dtype="int64"), 1) == tracer.expand_dims(bag_of, 0)
        idx = tracer.reshape(idx, (-1,))
    elif idx.ndim == 1:
        if offsets is None:
            raise ValueError("embedding_bag: offsets has to be a 1D Tensor but got None")
        offsets = tracer.astype(offsets if isinstance(offsets, Tensor) else tracer.tensor(np.asarray(offsets)),
                                "int64")
        bags = offsets.shape[0] - (1 if include_last_offset else 0)
        pos = tracer.arange(idx.shape[0], dtype="int64")
        starts = tracer.expand_dims(offsets[:bags], 1)  # (B, 1)
        ends = tracer.concat([offsets[1:bags], tracer.full((1,), idx.shape[0], "int64")], axis=0) \
            if not include_last_offset else offsets[1:bags + 1]
        member = (tracer.expand_dims(pos, 0) >= starts) & (tracer.expand_dims(pos, 0) < tracer.expand_dims(ends, 1))
    else:
        raise ValueError(f"embedding_bag: input has to be 1D or 2D Tensor, but got Tensor of dimension {idx.ndim}")
    if padding_idx is not None:
        padding_idx = padding_idx % weight.shape[0]
        member = member & tracer.expand_dims(idx != padding_idx, 0)
    rows = embedding(idx, weight, None, max_norm, norm_type, scale_grad_by_freq)  # (L, D)
    mask = tracer.astype(member, weight.dtype)  # (B, L)
    counts = tracer.sum(mask, axis=1, keepdims=True)
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                      f"supported for mode='sum' (got mode='{mode}')")
        psw = per_sample_weights if isinstance(per_sample_weights, Tensor) else tracer.tensor(per_sample_weights)
        mask = mask * tracer.expand_dims(tracer.reshape(psw, (-1,)), 0)
    if mode == "max":
        picked = tracer.where(tracer.expand_dims(member, -1), tracer.expand_dims(rows, 0), -np.inf)
        return tracer.where(counts > 0, tracer.max(picked, axis=1), 0.0)
    out = tracer.matmul(mask, rows)
    return out / tracer.maximum(counts, 1.0) if mode == "mean" else out


class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embedding rows, as torch.nn.EmbeddingBag (F.embedding_bag)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                 _weight=None, include_last_offset: bool = False, padding_idx: int | None = None, device=None,
                 dtype=None):
        super().__init__()
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        table = Embedding(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq,
                          sparse, _weight, device=device, dtype=dtype)
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, table.padding_idx
        self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = max_norm, norm_type, \
            scale_grad_by_freq, sparse
        self.mode, self.include_last_offset = mode, include_last_offset
        self.weight = table.weight

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                        sparse: bool = False, include_last_offset: bool = False,
                        padding_idx: int | None = None) -> EmbeddingBag:
        """An EmbeddingBag whose weight is a copy of `embeddings` (2-d), frozen unless freeze=False."""
        shape = tuple(embeddings.shape)
        if len(shape) != 2:
            raise ValueError(f"EmbeddingBag.from_pretrained: embeddings must be 2-dimensional, got shape {shape}")
        bag = cls(shape[0], shape[1], max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings,
                  include_last_offset, padding_idx)
        bag.weight.requires_grad = not freeze
        return bag

    def forward(self, input, offsets=None, per_sample_weights=None):  # noqa: A002
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                             self.mode, self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s


__all__ = ["Embedding", "EmbeddingBag", "embedding", "embedding_bag"]
