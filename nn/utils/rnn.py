"""torch.nn.utils.rnn: pad_sequence, PackedSequence, pack_padded_sequence, pad_packed_sequence, pack_sequence.

A PackedSequence holds torch's layout: `data` (sum of lengths, *) with the step-0 elements of every sequence
first (longest sequence first), then step 1's, ...; `batch_sizes` (int64, how many sequences reach each step);
`sorted_indices` / `unsorted_indices` (None when the batch was given sorted). Packing and unpacking are one
`take` each (the lengths are concrete, as torch requires them on the CPU), so gradients flow through both.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

import tracer
from tracer import Tensor


class PackedSequence(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None


def _concrete(x, what: str) -> np.ndarray:
    try:
        return np.asarray(x.numpy() if isinstance(x, Tensor) else x)
    except tracer.TraceError:
        raise tracer.TraceError(f"{what} must be concrete (torch requires it on the CPU), not a traced value") \
            from None


def _as_tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else tracer.tensor(np.asarray(x))


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Sequences (L_i, *) stacked into (L_max, B, *) ((B, L_max, *) with batch_first), padded with padding_value
    on the right (or the left).

    >>> pad_sequence([tracer.ones(3), tracer.ones(1)], batch_first=True).numpy().tolist()
    [[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]]
    """
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
    seqs = [_as_tensor(s) for s in sequences]
    if not seqs:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    rest = seqs[0].shape[1:]
    if any(s.ndim == 0 or s.shape[1:] != rest for s in seqs):
        raise RuntimeError(f"pad_sequence: every sequence must be (L_i, *{rest}), got shapes {[s.shape for s in seqs]}")
    longest = max(s.shape[0] for s in seqs)
    padded = []
    for s in seqs:
        if s.shape[0] < longest:
            pad = tracer.full((longest - s.shape[0], *rest), padding_value, dtype=s.dtype)
            s = tracer.concat([s, pad] if padding_side == "right" else [pad, s], axis=0)
        padded.append(s)
    return tracer.stack(padded, axis=0 if batch_first else 1)


def pack_padded_sequence(input, lengths, batch_first: bool = False, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (T, B, *) ((B, T, *) with batch_first) of sequences with the given lengths."""
    x = _as_tensor(input)
    lengths = _concrete(lengths, "pack_padded_sequence: lengths").astype(np.int64).reshape(-1)
    if batch_first:
        x = tracer.permute_dims(x, [1, 0, *range(2, x.ndim)])
    T, B = x.shape[0], x.shape[1]
    if lengths.shape != (B,):
        raise ValueError(f"pack_padded_sequence: expected {B} lengths (one per sequence), got {lengths.shape[0]}")
    if lengths.min() <= 0 or lengths.max() > T:
        raise RuntimeError(f"pack_padded_sequence: lengths must be in [1, {T}] (the padded length), got "
                           f"{lengths.tolist()}")
    if enforce_sorted:
        if np.any(np.diff(lengths) > 0):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                               "to sidestep this requirement if you do not need ONNX exportability.")
        order, sorted_t, unsorted_t = np.arange(B), None, None
    else:
        order = np.argsort(-lengths, kind="stable")
        sorted_t = tracer.tensor(order.astype(np.int64))
        unsorted_t = tracer.tensor(np.argsort(order).astype(np.int64))
    sizes = np.array([(lengths > t).sum() for t in range(int(lengths.max()))], np.int64)
    rows = np.concatenate([t * B + order[:n] for t, n in enumerate(sizes)])
    flat = tracer.reshape(x, (T * B, *x.shape[2:]))
    data = tracer.take(flat, tracer.tensor(rows), axis=0)
    return PackedSequence(data, tracer.tensor(sizes), sorted_t, unsorted_t)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """The padded batch (T, B, *) ((B, T, *) with batch_first) in the original order, and the lengths (int64)."""
    data = sequence.data
    sizes = _concrete(sequence.batch_sizes, "pad_packed_sequence: batch_sizes").astype(np.int64)
    T, B = len(sizes), int(sizes[0])
    if total_length is not None:
        if total_length < T:
            raise ValueError(f"Expected total_length to be at least the length of the longest sequence ({T}), "
                             f"got {total_length}")
        T = total_length
    sorted_lengths = np.array([(sizes > j).sum() for j in range(B)], np.int64)
    position = (np.arange(B) if sequence.unsorted_indices is None else
                _concrete(sequence.unsorted_indices, "pad_packed_sequence: unsorted_indices").astype(np.int64))
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    pad_row = int(offsets[-1])  # the index of the padding row appended to data
    rows = np.full((T, B), pad_row, np.int64)
    for b in range(B):
        j = position[b]
        steps = np.arange(sorted_lengths[j])
        rows[steps, b] = offsets[steps] + j
    pad = tracer.full((1, *data.shape[1:]), padding_value, dtype=data.dtype)
    padded = tracer.take(tracer.concat([data, pad], axis=0), tracer.tensor(rows.reshape(-1)), axis=0)
    padded = tracer.reshape(padded, (T, B, *data.shape[1:]))
    if batch_first:
        padded = tracer.permute_dims(padded, [1, 0, *range(2, padded.ndim)])
    return padded, tracer.tensor(sorted_lengths[position])


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """pack_padded_sequence(pad_sequence(sequences), their lengths)."""
    lengths = [_as_tensor(s).shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


__all__ = ["PackedSequence", "pack_padded_sequence", "pack_sequence", "pad_packed_sequence", "pad_sequence"]
