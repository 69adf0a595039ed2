"""nn.data: mini-batches and the bundled digits dataset."""
import numpy as np
import pytest

import nn
import tracer


def test_batches_in_order_with_remainder():
    x, y = np.arange(20).reshape(10, 2), np.arange(10)
    got = list(nn.data.batches((x, y), 4, shuffle=False))
    assert [len(b[1]) for b in got] == [4, 4, 2]
    np.testing.assert_array_equal(np.concatenate([b[1] for b in got]), y)
    np.testing.assert_array_equal(got[1][0], x[4:8])
    assert [len(b[1]) for b in nn.data.batches((x, y), 4, shuffle=False, drop_last=True)] == [4, 4]


def test_batches_shuffle_keeps_rows_aligned_and_seed_fixes_order():
    x, y = np.arange(30).reshape(15, 2), np.arange(15)
    a = list(nn.data.batches([x, y], 5, seed=1))
    b = list(nn.data.batches([x, y], 5, seed=1))
    order = np.concatenate([bx[:, 0] // 2 for bx, _ in a])
    assert sorted(order.tolist()) == list(range(15)) and order.tolist() != list(range(15))
    for (ax, ay), (bx, by) in zip(a, b, strict=True):
        np.testing.assert_array_equal(ax[:, 0] // 2, ay)
        np.testing.assert_array_equal(ax, bx)
        np.testing.assert_array_equal(ay, by)
    c = np.concatenate([by for _, by in nn.data.batches([x, y], 5, seed=2)])
    assert c.tolist() != order.tolist()


def test_batches_single_array_and_tensors():
    assert [b[0].tolist() for b in nn.data.batches(np.arange(3), 2, shuffle=False)] == [[0, 1], [2]]
    (bx,) = next(iter(nn.data.batches((tracer.tensor(np.ones((4, 2))),), 3)))  # re-iterable, as a DataLoader
    assert isinstance(bx, tracer.Tensor) and bx.shape == (3, 2)  # what it was given (tests/nn/test_data_epochs.py)


def test_batches_errors():
    with pytest.raises(ValueError, match=r"first dimension.*\(3,\), \(4,\)"):
        list(nn.data.batches((np.zeros(3), np.zeros(4)), 2))
    with pytest.raises(ValueError, match="batch_size"):
        list(nn.data.batches((np.zeros(3),), 0))
    with pytest.raises(ValueError, match="first dimension"):
        list(nn.data.batches((np.zeros(()),), 1))


def test_load_digits():
    (xtr, ytr), (xte, yte) = nn.data.load_digits()
    assert xtr.shape == (1438, 8, 8) and xte.shape == (359, 8, 8)
    assert xtr.dtype == np.float32 and ytr.dtype == np.int64
    assert 0.0 <= xtr.min() and xtr.max() == 1.0 and set(ytr.tolist()) == set(range(10))
    (xtr2, ytr2), _ = nn.data.load_digits()
    np.testing.assert_array_equal(xtr, xtr2)  # deterministic split
    np.testing.assert_array_equal(ytr, ytr2)
    (a, _), (b, _) = nn.data.load_digits(test_fraction=0.5)
    assert len(a) + len(b) == 1797
    with pytest.raises(ValueError):
        nn.data.load_digits(test_fraction=1.0)
