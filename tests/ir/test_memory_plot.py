"""MemoryProfile.plot: a title naming the function and its peak, an x axis in words, a y axis in the peak's unit."""
import numpy as np
import pytest

import autodiff
import ir
import tracer
from ir.runtime.memory import byte_unit, format_bytes


def checkpointed_adjoint_profile(n: int) -> ir.MemoryProfile:
    def f(x, w):
        with tracer.checkpoint():
            h = tracer.tanh(x @ w)
        return tracer.sum(h * h)

    mod = ir.transform.cleanup()(autodiff.Gradient("main")(tracer.trace(f, tracer.spec((n, 8)), tracer.spec((8, 8)))))
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((n, 8)).astype("float32"), rng.standard_normal((8, 8)).astype("float32")]
    return ir.memory_profile(mod, "main_adjoint", *arrays)


def test_title_axes_and_units_of_a_training_step(tmp_path):
    pytest.importorskip("matplotlib")
    prof = checkpointed_adjoint_profile(16384)  # 512 KiB per (16384, 8) float32 value: a peak in MiB
    path = tmp_path / "timeline.png"
    ax = prof.plot(path).axes[0]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    peak = format_bytes(prof.peak_bytes)
    assert peak.endswith(" MiB")
    assert ax.get_title() == (f"Memory over one call of main_adjoint, forward and backward: peak {peak} "
                              f"at operation {prof.peak_index}")
    assert ax.get_xlabel() == "operations of main_adjoint in the order they ran (0: only the inputs are held)"
    assert ax.get_ylabel() == "memory held (MiB)"
    line = next(ln for ln in ax.get_lines() if ln.get_label() == "live memory")
    np.testing.assert_allclose(line.get_ydata(), np.array(prof.live_bytes) / 2**20)  # drawn in the label's unit
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"peak {peak}" in labels and "backward starts" in labels and "checkpoint region" in labels


def test_a_small_forward_in_bytes_and_a_title_of_ones_own(tmp_path):
    pytest.importorskip("matplotlib")
    mod = tracer.trace(lambda x: tracer.exp(x).sum(), tracer.spec((16,)))
    prof = ir.memory_profile(mod, "main", np.zeros(16, "float32"))
    assert byte_unit(prof.peak_bytes) == ("B", 1)
    ax = prof.plot(tmp_path / "forward.png").axes[0]
    assert ax.get_title() == f"Memory over one call of main, forward only: peak {prof.peak_bytes} B at operation 1"
    assert ax.get_ylabel() == "memory held (B)"
    ax = prof.plot(tmp_path / "named.png", title="my_loss: one step").axes[0]
    assert ax.get_title() == "my_loss: one step"


def test_byte_unit_agrees_with_format_bytes():
    for n, unit in ((0, "B"), (1023, "B"), (1024, "KiB"), (3 * 2**20, "MiB"), (5 * 2**30, "GiB")):
        assert byte_unit(n)[0] == unit
        assert format_bytes(n).endswith(f" {unit}")


def test_a_compiled_steps_profile_is_titled_with_the_users_function(tmp_path):
    pytest.importorskip("matplotlib")
    w = tracer.tensor(np.ones((8, 4), "float32"))

    def my_loss(x):
        return tracer.sum(tracer.tanh(x @ w))

    step = autodiff.value_and_grad(my_loss, wrt=[w])
    step(np.ones((16, 8), "float32"))
    prof = step.memory_profile()
    assert prof.step_name.endswith("my_loss")
    title = prof.plot(tmp_path / "step.png").axes[0].get_title()
    assert title.startswith(f"Memory over one call of the step of {prof.step_name} (main_adjoint), forward and backward")
