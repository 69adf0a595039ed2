"""End to end: a small model trains, a checkpoint resumes the same trajectory, checkpoint_sequential."""
import numpy as np
import pytest

import autodiff
import nn
import tracer
from nn import functional as F
from nn import optim
from nn.checkpoint import segment_sizes


def _toy_data(n=120, seed=0):
    """Three well-separated blobs in the plane."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    centers = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    x = (centers[y] + 0.3 * rng.standard_normal((n, 2))).astype("float32")
    return x, y.astype("int64")


def _mlp():
    return nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 3))


def test_small_mlp_converges():
    nn.init.manual_seed(0)
    model = _mlp()
    opt = optim.Adam(model.parameters(), lr=0.05)
    step = autodiff.value_and_grad(lambda x, y: F.cross_entropy(model(x), y), wrt=model.parameters())
    x, y = _toy_data()
    losses = []
    for _ in range(60):
        loss, grads = step(x, y)
        opt.step(grads)
        losses.append(float(np.asarray(loss)))
    assert losses[-1] < losses[0] / 10, losses[::10]
    assert sum(map(len, step.cache.values())) == 1  # in-place updates are seen without retracing
    accuracy = (np.asarray(model(x)).argmax(-1) == y).mean()
    assert accuracy > 0.95


def _train(model, opt, sched, steps, start=0):
    step = autodiff.value_and_grad(lambda x, y: F.cross_entropy(model(x), y), wrt=model.parameters())
    x, y = _toy_data()
    for k in range(start, steps):
        for bx, by in nn.data.batches((x, y), 32, seed=k):  # the data order depends only on the step
            _, grads = step(bx, by)
            grads, _ = optim.clip_grad_norm(grads, 1.0)
            opt.step(grads)
        sched.step()


def _setup():
    model = _mlp()
    opt = optim.AdamW(model.parameters(), lr=0.02)
    return model, opt, optim.WarmupCosine(opt, warmup_steps=2, total_steps=6)


def test_training_checkpoint_resumes_the_same_trajectory(tmp_path):
    nn.init.manual_seed(1)
    model, opt, sched = _setup()
    _train(model, opt, sched, 6)

    nn.init.manual_seed(1)
    model, opt, sched = _setup()
    _train(model, opt, sched, 3)
    nn.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "schedule": sched.state_dict(),
             "step": 3}, tmp_path / "ckpt.npz")

    nn.init.manual_seed(99)  # a different init: everything must come from the checkpoint
    fresh, fresh_opt, fresh_sched = _setup()
    ckpt = nn.load(tmp_path / "ckpt.npz")
    fresh.load_state_dict(ckpt["model"])
    fresh_opt.load_state_dict(ckpt["optimizer"])
    fresh_sched.load_state_dict(ckpt["schedule"])
    _train(fresh, fresh_opt, fresh_sched, 6, start=int(ckpt["step"]))

    nn.init.manual_seed(1)
    reference, ref_opt, ref_sched = _setup()
    _train(reference, ref_opt, ref_sched, 6)
    for (name, a), b in zip(reference.state_dict().items(), fresh.state_dict().values(), strict=True):
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert fresh_opt.lr == ref_opt.lr and fresh_opt.step_count == ref_opt.step_count


def test_dropout_draws_fresh_masks_in_compiled_steps():
    model = nn.Sequential(nn.Linear(4, 64), nn.Dropout(0.5), nn.Linear(64, 1))
    x = np.ones((8, 4), "float32")
    step = autodiff.value_and_grad(lambda a: model(a).sum(), wrt=model.parameters())
    first, second = (np.asarray(step(x)[1][0]) for _ in range(2))
    assert not np.array_equal(first, second)


# ---------------------------------------------------------------- checkpoint_sequential

@pytest.mark.parametrize("n, segments, expected", [
    (10, 4, [3, 3, 2, 2]), (8, 2, [4, 4]), (3, 5, [1, 1, 1]), (5, 1, [5]), (0, 3, []), (7, 7, [1] * 7),
])
def test_segment_sizes(n, segments, expected):
    sizes = segment_sizes(n, segments)
    assert sizes == expected and sum(sizes) == n and len(sizes) <= segments


def test_segment_sizes_rejects_zero_segments():
    with pytest.raises(ValueError, match="segments"):
        segment_sizes(3, 0)


def _regions(mod):
    """Numbers of tanh ops in each checkpoint region, then the number after the last region."""
    sizes, count, inside = [], 0, False
    for b in mod["main"].bindings:
        op = getattr(b.value, "op", None)
        if op == "grad.start_checkpoint" and not inside:
            inside, count = True, 0
        elif op == "grad.end_checkpoint" and inside:
            inside = False
            sizes.append(count)
            count = 0
        elif op == "tanh":
            count += 1
    return sizes + [count]


@pytest.mark.parametrize("n, segments", [(10, 4), (6, 3), (3, 5), (4, 1)])
def test_checkpoint_sequential_regions_follow_segment_sizes(n, segments):
    layers = nn.Sequential(*[nn.Tanh() for _ in range(n)])
    mod = tracer.trace(lambda x: nn.checkpoint_sequential(layers, segments, x), tracer.spec((2, 3)))
    sizes = segment_sizes(n, segments)
    assert _regions(mod) == sizes  # all but the last segment are checkpointed, the last runs plainly


def test_checkpoint_sequential_same_values_and_gradients():
    nn.init.manual_seed(2)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(6, 6), nn.Tanh())])
    x = np.random.default_rng(0).standard_normal((3, 6)).astype("float32")
    np.testing.assert_array_equal(np.asarray(nn.checkpoint_sequential(model, 3, x)), np.asarray(model(x)))
    plain = autodiff.grad(lambda a: model(a).sum(), wrt=model.parameters())(x)
    ckpt = autodiff.grad(lambda a: nn.checkpoint_sequential(list(model), 3, a).sum(), wrt=model.parameters())(x)
    for a, b in zip(plain, ckpt, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)


def test_eval_after_compiling_in_train_mode_is_seen():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    x = np.ones((8, 4), "float32")
    step = autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters())
    model.train()
    step(x)
    model.eval()
    v1, _ = step(x)
    v2, _ = step(x)
    eager = model(tracer.tensor(x)).sum().item()
    assert v1.item() == v2.item() and abs(v1.item() - eager) < 1e-4  # no dropout after eval()
    assert sum(map(len, step.cache.values())) == 2
