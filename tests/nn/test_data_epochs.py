"""nn.data.batches is re-iterable as torch's DataLoader: a fresh (reshuffled) pass per `for`, len(), orders fixed
by (seed, epoch), shards per epoch, and batches of what it was given (Tensors in, Tensors out)."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F

X = np.arange(22, dtype="float32").reshape(11, 2)
Y = np.arange(11)


def _orders(loader, epochs):
    return [np.concatenate([b[1] for b in loader]).tolist() for _ in range(epochs)]


def test_a_stored_loader_gives_every_epoch_all_its_batches():
    loader = nn.data.batches((X, Y), 4, seed=3)
    epochs = _orders(loader, 3)
    assert all(sorted(e) == list(range(11)) for e in epochs)  # was: epochs 2 and 3 empty
    assert len({tuple(e) for e in epochs}) == 3  # reshuffled per epoch
    assert [len(list(loader)) for _ in range(2)] == [len(loader)] * 2 == [3, 3]


def test_epoch_orders_are_a_function_of_seed_and_epoch():
    a, b = nn.data.batches((X, Y), 4, seed=7), nn.data.batches((X, Y), 4, seed=7)
    assert _orders(a, 3) == _orders(b, 3)
    assert _orders(nn.data.batches((X, Y), 4, seed=8), 1) != _orders(nn.data.batches((X, Y), 4, seed=7), 1)
    first = np.random.default_rng(7).permutation(11).tolist()  # pass 0: the order of a single pass before
    assert _orders(nn.data.batches((X, Y), 4, seed=7), 1) == [first]
    c = nn.data.batches((X, Y), 4, seed=7)
    c.set_epoch(2)
    assert _orders(c, 1) == [_orders(nn.data.batches((X, Y), 4, seed=7), 3)[2]]
    unseeded = nn.data.batches((X, Y), 11)
    assert len({tuple(o) for o in _orders(unseeded, 4)}) > 1  # seed=None: a fresh order per pass


def test_without_shuffle_every_epoch_is_the_same_order():
    loader = nn.data.batches((X, Y), 4, shuffle=False, drop_last=True)
    assert _orders(loader, 2) == [list(range(8))] * 2 and len(loader) == 2


@pytest.mark.parametrize("n,batch,drop_last", [(11, 4, False), (11, 4, True), (12, 4, False), (3, 5, False),
                                               (3, 5, True)])
def test_len_matches_torch_dataloader(n, batch, drop_last):
    torch = pytest.importorskip("torch")
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(n)), batch, drop_last=drop_last)
    ours = nn.data.batches(np.arange(n), batch, drop_last=drop_last)
    assert len(ours) == len(loader) == len(list(ours))


@pytest.mark.parametrize("world,drop_last", [(2, False), (3, False), (3, True)])
def test_shards_reshuffle_per_epoch_and_stay_disjoint(world, drop_last):
    loaders = [nn.data.batches(np.arange(11), 2, seed=4, shard=(r, world), drop_last=drop_last)
               for r in range(world)]
    orders = []
    for _ in range(2):
        parts = [np.concatenate([b[0] for b in lo]).tolist() if len(lo) else [] for lo in loaders]
        assert len({len(p) for p in parts}) == 1 and all(len(p) == len(lo) * 2 or not drop_last
                                                         for p, lo in zip(parts, loaders, strict=True))
        flat = sum(parts, [])
        if drop_last:
            assert len(set(flat)) == len(flat)  # disjoint
        else:
            assert set(flat) == set(range(11))  # complete (padded from the start)
        orders.append(parts)
    assert orders[0] != orders[1]
    assert [len(lo) for lo in loaders] == [len(list(lo)) for lo in loaders]


def test_tensors_in_tensors_out():
    xt, yt = tracer.tensor(X.astype("float64")), tracer.tensor(Y)
    bx, by, bz = next(iter(nn.data.batches((xt, yt, Y), 4, shuffle=False)))
    assert type(bx) is tracer.Tensor and bx.dtype == "float64" and bx.shape == (4, 2)
    assert type(by) is tracer.Tensor and by.dtype == "int64" and by.numpy().tolist() == [0, 1, 2, 3]
    assert isinstance(bz, np.ndarray)
    bx.numpy()[0, 0] = -1.0  # a batch is its own memory
    assert xt.numpy()[0, 0] == 0.0
    (single,) = next(iter(nn.data.batches(xt, 3)))
    assert isinstance(single, tracer.Tensor)


def test_traced_tensors_are_refused():
    with pytest.raises(tracer.TraceError, match="batches"):
        tracer.trace(lambda x: nn.data.batches(x, 2), tracer.spec((4, 2)))


def test_a_training_loop_over_epochs_steps_every_epoch():
    model = nn.Linear(2, 3)
    opt = nn.optim.SGD(model.parameters(), lr=0.01)
    step = autodiff.value_and_grad(lambda x, y: F.cross_entropy(model(x), y), wrt=model.parameters())
    loader = nn.data.batches((X / 20, Y % 3), 4, seed=0)
    steps = 0
    for _ in range(3):
        for x, y in loader:
            _, grads = step(x, y)
            opt.step(grads)
            steps += 1
    assert steps == 3 * len(loader) == 9
