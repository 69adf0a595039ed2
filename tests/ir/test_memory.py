"""The memory timeline: its peak is the executor's peak_bytes, and it lists what the executor holds there."""
import sys

import numpy as np
import pytest

import autodiff
import ir
import tracer
from ir.analysis import checkpoint_regions
from ir.runtime.memory import estimate_peak_bytes, format_bytes


def adjoint_of(fn, *specs):
    mod = tracer.trace(fn, *specs)
    return ir.transform.cleanup()(autodiff.Gradient("main")(mod))


def arrays_for(fn: ir.Function, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.type.shape).astype(p.type.dtype) for p in fn.params]


def chain(x, w):
    h = x
    for _ in range(3):
        h = tracer.checkpoint(lambda a: a + tracer.tanh(a @ w))(h)
    return (h * h).mean()


def views(x, w):
    parts = tracer.split(x @ w, 2, axis=1)  # a tuple-valued op
    y = (parts[0] * parts[1]).reshape((-1,))  # reshape: a view sharing its input's buffer
    return tracer.exp(y).sum() + (x.T @ x).sum()  # x.T: a view too


CASES = {
    "checkpointed chain": (chain, (tracer.spec((16, 8)), tracer.spec((8, 8)))),
    "tuples and views": (views, (tracer.spec((6, 4)), tracer.spec((4, 4)))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_timeline_peak_is_the_executors_peak_bytes(name):
    fn, specs = CASES[name]
    mod = adjoint_of(fn, *specs)
    arrays = arrays_for(mod["main_adjoint"])
    ex = ir.Executor(mod)
    ex["main_adjoint"](*arrays)
    prof = ir.memory_profile(mod, "main_adjoint", *arrays)
    assert len(prof.live_bytes) == len(mod["main_adjoint"].bindings) + 1
    assert max(prof.live_bytes) == prof.peak_bytes == ex.stats.peak_bytes
    assert prof.live_bytes[prof.peak_index] == prof.peak_bytes
    # every buffer alive at the peak is listed once with its bytes; views count where their buffer does
    assert sum(v.bytes for v in prof.at_peak) == prof.peak_bytes
    assert [v.bytes for v in prof.at_peak] == sorted((v.bytes for v in prof.at_peak), reverse=True)


def test_values_at_the_peak_are_the_ones_held_there():
    """x -> a = exp(x) -> b = a + a -> c = sum(b): x dies after a is made; b is written into a's buffer
    (a dies at the add that makes b), so a and b never both hold memory."""
    def f(x):
        a = tracer.exp(x)
        b = a + a
        return b.sum()

    mod = tracer.trace(f, tracer.spec((256,)))
    prof = ir.memory_profile(mod, "main", np.zeros(256, "float32"))
    assert prof.live_bytes == [1024, 2048, 1024, 1028]
    assert prof.peak_index == 1 and prof.labels[1] == "lv = R.exp"
    assert [(v.name, v.bytes, v.role) for v in prof.at_peak] == [("x", 1024, "argument"), ("lv", 1024, "forward")]
    assert prof.at_peak[1].source.startswith("test_memory.py:")


def test_roles_regions_and_backward_start():
    mod = adjoint_of(chain, tracer.spec((16, 8)), tracer.spec((8, 8)))
    fn = mod["main_adjoint"]
    prof = ir.memory_profile(mod, "main_adjoint", *arrays_for(fn))
    assert prof.roles[0] == "argument"
    assert set(prof.roles[1:]) == {"forward", "gradient", "recompute"}
    first_gradient = prof.roles.index("gradient")
    assert prof.backward_start == first_gradient
    assert all(r == "forward" for r in prof.roles[1:first_gradient])
    assert len(prof.regions) == 3 == len(checkpoint_regions(fn))
    for lo, hi in prof.regions:  # each region runs from its start markers to its end markers
        assert prof.labels[lo].endswith("R.grad.start_checkpoint")
        assert prof.labels[hi].endswith("R.grad.end_checkpoint")
        assert hi < first_gradient


def test_str_is_a_table():
    mod = adjoint_of(chain, tracer.spec((16, 8)), tracer.spec((8, 8)))
    prof = ir.memory_profile(mod, "main_adjoint", *arrays_for(mod["main_adjoint"]))
    text = str(prof)
    assert text.startswith(f"memory profile of main_adjoint: peak {format_bytes(prof.peak_bytes)}")
    assert text.count("<- peak") == 1
    assert "alive at the peak" in text and "recompute" in text and "test_memory.py:" in text
    assert format_bytes(1536) == "1.50 KiB" and format_bytes(3 * 2**20) == "3.00 MiB" and format_bytes(12) == "12 B"


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    mod = adjoint_of(chain, tracer.spec((16, 8)), tracer.spec((8, 8)))
    prof = ir.memory_profile(mod, "main_adjoint", *arrays_for(mod["main_adjoint"]))
    path = tmp_path / "timeline.png"
    prof.plot(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_how_to_get_it(monkeypatch, tmp_path):
    mod = tracer.trace(lambda x: tracer.exp(x).sum(), tracer.spec((4,)))
    prof = ir.memory_profile(mod, "main", np.zeros(4, "float32"))
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"tracegrad\[plot\]"):
        prof.plot(tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_bad_function_name_and_arguments():
    mod = tracer.trace(lambda x: tracer.exp(x).sum(), tracer.spec((4,)))
    with pytest.raises(KeyError, match="no function named 'nope'"):
        ir.memory_profile(mod, "nope")
    with pytest.raises(ValueError, match="argument x expects shape"):
        ir.memory_profile(mod, "main", np.zeros(5, "float32"))


def test_views_count_once_where_their_buffer_is():
    def f(x):
        a = tracer.concat([x, x])  # 2048 bytes; a dies at the reshape, its buffer lives on in b
        b = a.reshape((32, 16))  # a view of a's buffer
        c = b @ b.T  # b.T: a view of the same buffer; c: 4096 bytes
        return c.sum()

    mod = tracer.trace(f, tracer.spec((256,)))
    prof = ir.memory_profile(mod, "main", np.zeros(256, "float32"))
    assert prof.labels[prof.peak_index] == "lv3 = R.matmul"
    assert prof.peak_bytes == 2048 + 4096
    assert [(v.name, v.bytes, v.view_of) for v in prof.at_peak] == [
        ("lv3", 4096, None), ("lv1", 2048, None), ("lv2", 0, "lv1")]


@pytest.mark.parametrize("name", list(CASES))
def test_the_estimate_without_running_matches_the_executor(name):
    fn, specs = CASES[name]
    mod = adjoint_of(fn, *specs)
    ex = ir.Executor(mod)
    ex["main_adjoint"](*arrays_for(mod["main_adjoint"]))
    assert estimate_peak_bytes(mod["main_adjoint"]) == ex.stats.peak_bytes
    main = ir.Executor(mod)
    main["main"](*arrays_for(mod["main"]))
    assert estimate_peak_bytes(mod["main"]) == main.stats.peak_bytes
