"""Mini-batches of arrays, and the small digits dataset that ships with tracegrad."""
from __future__ import annotations

import os

import numpy as np

from tracer import Tensor


def batches(arrays, batch_size: int, shuffle: bool = True, seed: int | None = None, drop_last: bool = False):
    """An iterator over tuples of aligned batches from `arrays` (a tuple/list of arrays sharing their first
    dimension, or one array); seed=None shuffles differently every call, a seed fixes the order. The last
    batch is smaller unless drop_last; the arguments are checked at once, not at the first batch.

    >>> x, y = np.arange(10).reshape(5, 2), np.arange(5)
    >>> [b[1].tolist() for b in batches((x, y), 2, shuffle=False)]
    [[0, 1], [2, 3], [4]]
    """
    if isinstance(arrays, (np.ndarray, Tensor)):
        arrays = (arrays,)
    arrays = [a.numpy() if isinstance(a, Tensor) else np.asarray(a) for a in arrays]
    if not arrays:
        raise ValueError("batches: got no arrays")
    lengths = [len(a) if a.ndim else None for a in arrays]
    if None in lengths or len(set(lengths)) != 1:
        shapes = ", ".join(str(a.shape) for a in arrays)
        raise ValueError(f"batches: the arrays must share their first dimension, got shapes {shapes}")
    whole = isinstance(batch_size, (int, np.integer)) and not isinstance(batch_size, bool) or \
        isinstance(batch_size, (float, np.floating)) and float(batch_size).is_integer()
    if not whole or batch_size < 1:
        raise ValueError(f"batches: batch_size must be a positive integer, got {batch_size!r}")
    # checked above, when called; the batches themselves come lazily
    return _batches(arrays, int(batch_size), shuffle, seed, drop_last)


def _batches(arrays, batch_size: int, shuffle: bool, seed, drop_last: bool):
    n = len(arrays[0])
    order = np.random.default_rng(seed).permutation(n) if shuffle else np.arange(n)
    stop = n - n % batch_size if drop_last else n
    for start in range(0, stop, batch_size):
        idx = order[start:start + batch_size]
        yield tuple(a[idx] for a in arrays)


def load_digits(test_fraction: float = 0.2):
    """The UCI ML hand-written digits (1,797 images of 8x8 pixels, 10 classes), split deterministically.

    Returns ((x_train, y_train), (x_test, y_test)): images float32 (N, 8, 8) scaled to [0, 1], labels
    int64. The split is a fixed shuffle, the last `test_fraction` of it the test set.

    Data: "Optical Recognition of Handwritten Digits", E. Alpaydin and C. Kaynak (1998), UCI Machine
    Learning Repository, https://doi.org/10.24432/C50P49, licensed CC BY 4.0; the copy here is
    scikit-learn's `load_digits` (images 0..16) stored as uint8.

    >>> (xtr, ytr), (xte, yte) = load_digits()
    >>> xtr.shape, xte.shape, xtr.dtype, ytr.dtype, float(xtr.max())
    ((1438, 8, 8), (359, 8, 8), dtype('float32'), dtype('int64'), 1.0)
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"load_digits: test_fraction must be in (0, 1), got {test_fraction}")
    with np.load(os.path.join(os.path.dirname(__file__), "digits.npz"), allow_pickle=False) as f:
        images, labels = f["images"], f["labels"]
    x = images.astype("float32") / 16.0
    y = labels.astype("int64")
    order = np.random.default_rng(0).permutation(len(y))
    n_test = int(round(len(y) * test_fraction))
    train, test = order[:-n_test], order[-n_test:]
    return (x[train], y[train]), (x[test], y[test])


__all__ = ["batches", "load_digits"]
