"""Issue 19 items 15-17 under `mpiexec -n 2`: ranks that start apart, a gradient None on one rank only, an
uneven last batch with average_aux, and one rank raising (caught, then uncaught). Two launches of a few
seconds; each has a timeout, so a process left waiting in a collective fails the test instead of hanging.
Skipped cleanly without mpi4py or mpiexec.

The script prints one `RESULT <name> <json>` line per scenario from rank 0, as soon as it has it, so a
scenario that hangs leaves the earlier ones' results readable.
"""
import json
import sys
import time

import numpy as np
import pytest

from tests.nn.test_distributed_mpi import run_mpiexec

TIMEOUT = 60  # a hang ends here (mpiexec's own timeout, then a kill); a run takes 2-4 s


@pytest.fixture(scope="module")
def report():
    code, out, err = run_mpiexec(__file__, "agree", timeout=TIMEOUT)
    results = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            _, name, value = line.split(" ", 2)
            results[name] = json.loads(value)
    return code, results, out + err


def _get(report, name):
    code, results, output = report
    assert name in results, f"no result for {name} (exit {code}):\n{output}"
    return results[name]


def test_ranks_that_start_apart_train_together(report):
    r = _get(report, "start")
    assert r["apart_before"] is True  # rank 1 really started from other weights (seed 1, no broadcast_parameters)
    assert r["from_rank_0"] is True  # once built, both hold rank 0's parameters and BatchNorm statistics
    assert r["spread"] == 0.0  # and after 3 steps both hold the same parameters
    assert r["moved"] is True


def test_a_gradient_none_on_one_rank_is_averaged_with_zeros_on_both(report):
    r = _get(report, "none")
    assert r["locally_none"] == [[False, True], [True, False]]  # each rank's batch reaches one head only
    assert r["same_on_both"] is True
    assert r["halves"] is True  # each head's gradient: its own rank's, halved (a zero from the other rank)


def test_average_aux_with_an_uneven_last_batch_raises_naming_both_shapes(report):
    messages = _get(report, "aux")
    assert len(messages) == 2 and messages[0] == messages[1]  # both ranks raise the same error
    assert messages[0].startswith("ValueError: data_parallel: aux has shape (8, 3) float32 on rank 0 but shape "
                                  "(5, 3) float32 on rank 1"), messages
    assert "Message truncated" not in messages[0]


def test_a_rank_raising_in_its_step_makes_the_other_raise_naming_it(report):
    messages = _get(report, "step_raises")
    assert messages[1] == "ValueError: bad batch on rank 1"  # its own exception, unchanged
    assert messages[0].startswith("RuntimeError: data_parallel: rank 1 raised ValueError: bad batch on rank 1."), \
        messages
    assert _get(report, "after")["sum"] == 3.0  # both went on, and the next collective pairs up as before


def test_an_uncaught_exception_on_one_rank_ends_the_job():
    start = time.perf_counter()
    code, out, err = run_mpiexec(__file__, "uncaught", timeout=TIMEOUT)
    seconds = time.perf_counter() - start
    # rank 0 waits in data_parallel's first collective while rank 1 raises outside any: without the abort
    # rank 0 polls until the timeout
    assert seconds < TIMEOUT / 2, (seconds, out, err)
    assert code != 0
    assert "nn.distributed: rank 1 of 2 stopped with an uncaught ValueError: only rank 1 fails; aborting all 2 " \
           "processes (MPI_Abort)" in err, out + err
    assert "rank 0 finished" not in out


# ---------------------------------------------------------------- the script that mpiexec runs
def _result(name, value):
    import nn

    if nn.distributed.rank() == 0:
        print(f"RESULT {name} {json.dumps(value)}", flush=True)


def _caught(fn) -> str:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - what each rank raised is the result
        return f"{type(e).__name__}: {e}"
    return "no error"


def _gathered(text: str) -> list:
    from mpi4py import MPI

    return MPI.COMM_WORLD.allgather(text)


def _start(dist):
    import autodiff
    import nn
    import tracer
    from nn import functional as F

    rank = dist.rank()
    nn.init.manual_seed(rank)  # rank 0 "loaded a checkpoint"; rank 1 did not, and nobody broadcasts
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 3))
    if rank == 0:
        model[1].running_mean.copy_(tracer.tensor(np.arange(6.0, dtype="float32")))
    flat = lambda: np.concatenate([t.numpy().ravel() for t in [*model.parameters(), *model.buffers()]])  # noqa: E731
    before = flat()
    apart = bool((dist.all_reduce(before, "max") != dist.all_reduce(before, "min")).any())
    rank0 = dist.all_reduce(before if rank == 0 else np.zeros_like(before), "sum")
    opt = nn.optim.SGD(model.parameters(), lr=0.1)
    step = dist.data_parallel(autodiff.value_and_grad(lambda x, y: F.cross_entropy(model(x), y),
                                                      wrt=model.parameters()))
    built = flat()
    rng = np.random.default_rng(rank)
    for _ in range(3):
        _, grads = step(rng.standard_normal((8, 4)).astype("float32"), rng.integers(0, 3, 8))
        opt.step(grads)
    # (the BatchNorm statistics then follow each rank's own batches: buffers are not averaged per step)
    after = np.concatenate([p.numpy().ravel() for p in model.parameters()])
    _result("start", {"apart_before": apart, "from_rank_0": all(_gathered(bool(np.array_equal(built, rank0)))),
                      "spread": float((dist.all_reduce(after, "max") - dist.all_reduce(after, "min")).max()),
                      "moved": all(_gathered(not np.array_equal(after, built[:after.size])))})


def _none(dist):
    import autodiff
    import nn

    rank = dist.rank()
    nn.init.manual_seed(0)
    heads = [nn.Linear(3, 2), nn.Linear(3, 2)]
    params = [*heads[0].parameters(), *heads[1].parameters()]
    grad = autodiff.grad(lambda x: heads[rank](x).sum(), wrt=params)  # this rank's batch reaches one head

    def step(x):  # the head this rank did not use has no gradient (autodiff's zeros made None if need be)
        return [None if g is None or not g.numpy().any() else g for g in grad(x)]

    x = np.full((4, 3), rank + 1.0, "float32")
    local = step(x)
    got = dist.data_parallel(step)(x)
    mine = [g.numpy() for g in got]
    flat = np.concatenate([m.ravel() for m in mine])
    own = [i for i, g in enumerate(local) if g is not None]
    _result("none", {"locally_none": _gathered([local[0] is None, local[2] is None]),
                     "same_on_both": bool((dist.all_reduce(flat, "max") == dist.all_reduce(flat, "min")).all()),
                     "halves": len(own) == 2 and all(np.allclose(mine[i], local[i].numpy() / 2) for i in own)})


def _aux(dist):
    import autodiff
    import nn

    model = nn.Linear(4, 3)
    step = dist.data_parallel(autodiff.value_and_grad(lambda x: (model(x).sum(), model(x)), wrt=model.parameters(),
                                                      has_aux=True), has_aux=True, average_aux=True)
    n = 8 if dist.rank() == 0 else 5  # an uneven last batch
    _result("aux", _gathered(_caught(lambda: step(np.ones((n, 4), "float32")))))


def _step_raises(dist):
    rank = dist.rank()

    def step():
        if rank == 1:
            raise ValueError("bad batch on rank 1")
        return np.float32(1.0), [np.ones(3, "float32")]

    wrapped = dist.data_parallel(step)
    _result("step_raises", _gathered(_caught(wrapped)))
    _result("after", {"sum": float(dist.all_reduce(np.array([rank + 1.0]), "sum")[0])})


def _uncaught(dist):
    import autodiff
    import nn

    model = nn.Linear(3, 1)
    step = dist.data_parallel(autodiff.grad(lambda x: model(x).sum(), wrt=model.parameters()))
    if dist.rank() == 1:
        raise ValueError("only rank 1 fails")  # outside any collective: rank 0 is waiting in one below
    step(np.ones((2, 3), "float32"))
    print("rank 0 finished", flush=True)


def main():
    import nn

    dist = nn.distributed
    dist.init()
    if sys.argv[1] == "uncaught":
        _uncaught(dist)
        return
    for scenario in (_start, _none, _aux, _step_raises):  # the ones that could hang come last
        scenario(dist)


if __name__ == "__main__":
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    main()
