"""nn.distributed for real: `mpiexec -n 2` runs this file as a script, and the tests read what rank 0 reports.

Skipped cleanly when mpi4py or mpiexec is missing (`pip install tracegrad[mpi]` brings both). Every launch
has a timeout, so a process stuck in a collective fails the test instead of hanging it.

Exactness: two processes with B samples each take the same parameters, after 20 SGD (momentum) and 20
Adam steps, as one process with 2B samples per step on the same samples; only the order of the float32
additions differs.
"""
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BATCH = 16  # in total per step: 8 per process on 2 processes
STEPS = 20


def _mpiexec():
    beside = Path(sys.executable).with_name("mpiexec")  # the mpich wheel's, in the same environment
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def run_mpiexec(*args, n=2, timeout=120):
    """(exit status, stdout, stderr) of `mpiexec -n N python ARGS`; the test fails if it runs past timeout."""
    if importlib.util.find_spec("mpi4py") is None or _mpiexec() is None:
        pytest.skip("needs mpi4py and mpiexec: pip install tracegrad[mpi]")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MPIEXEC_TIMEOUT": str(timeout)}
    # a session of its own, so that a timeout ends mpiexec and every process it started (a process left
    # waiting in a collective would poll forever)
    proc = subprocess.Popen([_mpiexec(), "-n", str(n), sys.executable, *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout + 10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"mpiexec -n {n} {' '.join(args)} ran past {timeout} s:\n{out}\n{err}")
    return proc.returncode, out, err


def launch(*args, n=2, timeout=120):
    code, out, err = run_mpiexec(*args, n=n, timeout=timeout)
    assert code == 0, f"mpiexec -n {n} {' '.join(args)} exited {code}:\n{out}\n{err}"
    return out


@pytest.fixture(scope="module")
def report():
    """What rank 0 of one `mpiexec -n 2` run of this file found (one launch for all the tests below)."""
    out = launch(__file__)
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, f"rank 0 alone reports, once:\n{out}"
    return json.loads(lines[0][len("RESULT "):])


def test_two_processes(report):
    assert report["size"] == 2 and report["ranks_seen"] == [1, 1]  # each rank once
    assert report["mpi_imported"] is True


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_exactness_two_processes_of_b_equal_one_of_2b(report, optimizer):
    r = report[optimizer]
    assert r["steps"] == STEPS == r["reference_steps"]
    assert r["spread"] == 0.0  # both processes hold bit-identical parameters
    assert r["moved"] > 1e-2  # the parameters did change: the comparison below is not vacuous
    assert r["difference"] < 1e-6, r  # float32 rounding of the reduction order (5e-8 measured), no more
    assert abs(r["loss"] - r["reference_loss"]) < 1e-6, r


def test_buckets_one_collective_each(report):
    b = report["buckets"]
    assert b["small"] == 2 and b["default"] == 1  # 404 B + 800 B in 800-byte buckets; all in one of 25 MiB
    assert b["value"] == 0.5 and b["gradient"] == 1.5  # mean of ranks 0 and 1, of 1 and 2


def test_collectives(report):
    c = report["collectives"]
    assert c["sum"] == 3.0 and c["mean"] == 1.5 and c["max"] == 2.0 and c["min"] == 1.0
    assert c["broadcast"] == [1.0, 1.0, 1.0]  # root 1's values on both
    assert c["weights_equal"] is True  # broadcast_parameters(model) from rank 0


def test_shards_are_disjoint_and_make_each_batch(report):
    assert report["shards"] == {"covered_once": True, "batches_match": True}


def test_train_digits_distributed_prints_once():
    out = launch("examples/train_digits.py", "--fast", "--distributed")
    assert out.count("final test accuracy") == 1 and "distributed: 2 processes, 16 of each batch's 32" in out, out
    assert len(re.findall(r"^epoch ", out, re.M)) == 2
    assert re.search(r"all-reduce: 1 per step of [\d,]+ bytes", out), out


def test_train_gpt_distributed_prints_once():
    out = launch("examples/train_gpt.py", "--fast", "--distributed", "--steps", "4")
    assert out.count("final held-out token accuracy") == 1 and "distributed: 2 processes" in out, out


# ---------------------------------------------------------------- the script that mpiexec runs
def _train(model, opt, batches, dp):
    import autodiff
    from nn import functional as F

    step = autodiff.value_and_grad(lambda x, y: F.cross_entropy(model(x), y), wrt=model.parameters())
    if dp is not None:
        step = dp(step)
    steps, loss = 0, None
    for x, y in batches:
        loss, grads = step(x, y)
        opt.step(grads)
        steps += 1
    return steps, loss.item()


def _exactness(dist, make_opt):
    import nn

    rank, world = dist.rank(), dist.world_size()
    rng = np.random.default_rng(0)
    n = BATCH * STEPS + 5  # a ragged tail, dropped the same way by both
    x, y = rng.standard_normal((n, 12)).astype("float32"), rng.integers(0, 5, n)

    def make(seed):
        nn.init.manual_seed(seed)
        return nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 5))

    reference = make(0)
    start = [p.numpy().copy() for p in reference.parameters()]
    ref_steps, ref_loss = _train(reference, make_opt(reference), nn.data.batches((x, y), BATCH, seed=1,
                                                                                  drop_last=True), None)
    model = make(rank)  # different weights on each process until the broadcast
    dist.broadcast_parameters(model)
    opt = make_opt(model)
    dist.broadcast_parameters(opt)
    batches = nn.data.batches((x, y), BATCH // world, seed=1, drop_last=True, shard=(rank, world))
    steps, loss = _train(model, opt, batches, dist.data_parallel)
    params = [p.numpy() for p in model.parameters()]
    spread = max(float((dist.all_reduce(p, "max") - dist.all_reduce(p, "min")).max()) for p in params)
    return {"steps": steps, "reference_steps": ref_steps, "loss": loss, "reference_loss": ref_loss,
            "spread": spread,
            "moved": max(float(np.abs(p - s).max()) for p, s in zip(params, start, strict=True)),
            "difference": max(float(np.abs(p - q.numpy()).max())
                              for p, q in zip(params, reference.parameters(), strict=True))}


def _buckets(dist):
    r = dist.rank()
    grads = [np.full(100, r + 1.0, "float32") for _ in range(3)]
    small = dist.data_parallel(lambda: (np.float32(r), grads), bucket_bytes=800)
    value, got = small()
    default = dist.data_parallel(lambda: (np.float32(r), grads))
    default()
    return {"small": small.comm_stats.collectives, "default": default.comm_stats.collectives,
            "value": float(value), "gradient": float(got[2][0])}


def _collectives(dist):
    import nn

    r = dist.rank()
    x = np.array([r + 1.0])
    shared = np.full(3, float(r))
    dist.broadcast_parameters([shared], root=1)
    nn.init.manual_seed(r)
    model = nn.Linear(4, 3)
    dist.broadcast_parameters(model)
    w = model.weight.numpy()
    return {"sum": float(dist.all_reduce(x, "sum")[0]), "mean": float(dist.all_reduce(x)[0]),
            "max": float(dist.all_reduce(x, "max")[0]), "min": float(dist.all_reduce(x, "min")[0]),
            "broadcast": shared.tolist(), "weights_equal": bool((dist.all_reduce(w, "max") == w).all()
                                                                 and (dist.all_reduce(w, "min") == w).all())}


def _shards(dist):
    import nn

    rank, world, n, batch = dist.rank(), dist.world_size(), 40, 4
    mine = [b[0] for b in nn.data.batches(np.arange(n), batch, seed=3, shard=(rank, world))]
    counts = dist.all_reduce(np.bincount(np.concatenate(mine), minlength=n), "sum")
    single = [b[0] for b in nn.data.batches(np.arange(n), batch * world, seed=3)]
    match = all((dist.all_reduce(np.bincount(m, minlength=n), "sum") == np.bincount(s, minlength=n)).all()
                for m, s in zip(mine, single, strict=True))
    return {"covered_once": bool((counts == 1).all()), "batches_match": bool(match)}


def main():
    import nn
    from nn import optim

    dist = nn.distributed
    dist.init()
    report = {"size": dist.world_size(), "mpi_imported": "mpi4py.MPI" in sys.modules,
              "ranks_seen": dist.all_reduce(np.eye(dist.world_size(), dtype="int64")[dist.rank()], "sum").tolist(),
              "sgd": _exactness(dist, lambda m: optim.SGD(m.parameters(), lr=0.1, momentum=0.9)),
              "adam": _exactness(dist, lambda m: optim.Adam(m.parameters(), lr=1e-2)),
              "buckets": _buckets(dist), "collectives": _collectives(dist), "shards": _shards(dist)}
    dist.barrier()
    if dist.rank() == 0:
        print("RESULT " + json.dumps(report), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
