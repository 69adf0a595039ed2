"""autodiff.detect_anomaly() and TRACEGRAD_DEBUG_NANS=1: the first binding that makes a NaN or an inf raises
FloatingPointError naming the op, the binding, its inputs' ranges and the line of this file that made it."""
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import autodiff
import ir
import nn
import tracer
from nn import optim
from tests.torch_optional import torch

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's own divide-by-zero notes
_LINES = pathlib.Path(__file__).read_text().splitlines()


def line_of(marker: str) -> str:
    """'test_detect_anomaly.py:N' of the one line of this file that ends with `# <marker>`."""
    found = [i + 1 for i, text in enumerate(_LINES) if text.rstrip().endswith(f"# {marker}")]
    assert len(found) == 1, (marker, found)
    return f"{__file__}:{found[0]}"


@pytest.fixture(autouse=True)
def _off_after():
    yield
    assert not autodiff.is_anomaly_enabled(), "a test left the finder on"


def f32(*values):
    return np.array(values, dtype="float32")


# ---------------------------------------------------------------- a compiled step: each kind of birth


def test_log_of_zero_names_the_op_binding_inputs_and_line():
    w = tracer.tensor(f32(1, 1, 1))

    def loss(x):
        y = tracer.log(x * w)  # LOG
        return y.sum()
    step = autodiff.value_and_grad(loss, wrt=[w])
    with autodiff.detect_anomaly(), pytest.raises(FloatingPointError) as err:
        step(f32(1, 0, 2))
    msg = str(err.value)
    assert "log produced -inf (1 of 3 values) from finite inputs" in msg
    assert "= R.log(lv)" in msg and "(in main_adjoint)" in msg  # the printed binding, as print(step.module)
    assert f"made by: {line_of('LOG')}: y = tracer.log(x * w)" in msg
    assert "input lv: float32 (3,), min 0, max 2, no NaN" in msg
    assert "lv1: R.Tensor((3,), dtype=\"float32\") = R.log(lv)" in step.module.script()  # the same binding


@pytest.mark.parametrize("make, x, op, what", [
    (lambda x: (x - x) / (x - x), f32(1, 2), "divide", "NaN (2 of 2 values) from inputs without NaN"),  # 0/0
    (lambda x: tracer.sqrt(x - 2), f32(1, 3), "sqrt", "NaN (1 of 2 values)"),  # sqrt(-1)
    (lambda x: tracer.exp(x * 100), f32(1, -1), "exp", "+inf (1 of 2 values) from finite inputs"),  # overflow
])
def test_nan_and_inf_born_in_the_forward(make, x, op, what):
    step = autodiff.value_and_grad(lambda x: make(x).sum(), argnums=0)
    with autodiff.detect_anomaly(), pytest.raises(FloatingPointError, match=re.escape(f"{op} produced {what}")):
        step(x)
    value, grad = step(x)  # off again: the plain path, non-finite values pass silently as before
    assert not np.isfinite(np.asarray(value))


def test_a_nan_born_in_the_adjoint_only_names_the_forward_line():
    step = autodiff.grad(lambda x: (tracer.sqrt(x) * 0.0).sum(), argnums=0)  # SQRT
    with autodiff.detect_anomaly(), pytest.raises(FloatingPointError) as err:
        step(np.array([0.0, 4.0]))
    msg = str(err.value)
    # forward values are all finite (sqrt(0) = 0); d sqrt = g / (2 sqrt(x)) is 0 / 0 at 0
    assert "from inputs without NaN" in msg and "(in main_adjoint)" in msg and "_adjoint" in msg.split("binding:")[1]
    assert f"made by: {line_of('SQRT')} (in the backward of the op on this line)" in msg
    assert "min 0, max 0" in msg  # the divide's two zero inputs at index 0


def test_the_gradient_at_a_kink_gives_inf_from_finite_inputs():
    step = autodiff.grad(lambda x: tracer.sqrt(x).sum(), argnums=0)
    with autodiff.detect_anomaly(), pytest.raises(FloatingPointError, match=r"divide produced \+inf"):
        step(np.zeros(2))


def test_nan_in_the_inputs_names_the_argument():
    w = tracer.tensor(f32(1, 2))
    step = autodiff.value_and_grad(lambda x: (x * w).sum(), wrt=[w])
    with autodiff.detect_anomaly():
        with pytest.raises(FloatingPointError, match=r"result of main_adjoint holds NaN that came in with its "
                                                     r"arguments: argument x .*1 NaN"):
            step(f32(np.nan, 1))
        w.numpy()[1] = np.nan  # a weight an earlier update broke: its own parameter of the step
        with pytest.raises(FloatingPointError, match=r"argument w\b.*min 1, max 1, 1 NaN"):
            step(f32(1, 1))


def test_inf_inputs_and_asked_for_infs_pass():
    """An attention mask of -inf, full(-inf), where() choosing around a log(0): no birth, no error."""
    def masked(scores, mask):
        filled = tracer.where(mask, scores, tracer.full((2, 2), float("-inf")))
        return tracer.softmax(filled + tracer.zeros((2, 2)), axis=-1).sum()
    mask = np.array([[True, False], [True, True]])
    with autodiff.detect_anomaly():
        value, _ = autodiff.value_and_grad(masked, argnums=0)(np.ones((2, 2), "float32"), mask)
        assert float(value) == pytest.approx(2.0)
        ex = ir.Executor(tracer.trace(lambda x: x + 1, tracer.spec((2,))))
        assert np.array_equal(ex["main"](f32(-np.inf, 1)), f32(-np.inf, 2))  # an inf argument is data
        assert tracer.isnan(tracer.tensor(f32(np.nan, 1))).numpy().tolist() == [True, False]  # NaN was there


def test_off_means_no_error_and_the_same_numbers():
    w = tracer.tensor(np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3))
    step = autodiff.value_and_grad(lambda x: tracer.log(tracer.abs(x @ w)).sum(), wrt=[w])
    x = np.arange(4, dtype="float32").reshape(2, 2)
    before = step(x)
    counts = dict(step.stats.op_counts)
    with autodiff.detect_anomaly(False):  # off: as ever
        after = step(x)
    with autodiff.detect_anomaly():
        checked = step(x)
    assert step.stats.op_counts == counts  # the checked run counts the same ops
    for run in (after, checked, step(x)):
        assert np.array_equal(np.asarray(run[0]), np.asarray(before[0]))
        assert np.array_equal(np.asarray(run[1][0]), np.asarray(before[1][0]))
    zero = np.zeros((2, 2), "float32")
    value, _ = step(zero)  # log(0) off: -inf, silently, as before
    assert float(value) == -np.inf


# ---------------------------------------------------------------- the setting: nested, decorator, env var


def test_nested_blocks_restore_what_they_found():
    bad = tracer.tensor(f32(0))
    with autodiff.detect_anomaly():
        assert autodiff.is_anomaly_enabled()
        with autodiff.detect_anomaly(False):
            tracer.log(bad)  # off inside: no error
            with autodiff.detect_anomaly():
                with pytest.raises(FloatingPointError):
                    tracer.log(bad)
            assert not autodiff.is_anomaly_enabled()
        assert autodiff.is_anomaly_enabled()
        with pytest.raises(FloatingPointError):
            with autodiff.detect_anomaly():
                tracer.log(bad)
        assert autodiff.is_anomaly_enabled()  # the error left the outer setting as it was
    assert not autodiff.is_anomaly_enabled()
    with pytest.raises(TypeError, match="True or False"):
        autodiff.detect_anomaly("yes")


def test_decorator_and_set_detect_anomaly():
    @autodiff.detect_anomaly()
    def run():
        return tracer.log(tracer.tensor(f32(0)))
    with pytest.raises(FloatingPointError):
        run()
    with autodiff.set_detect_anomaly(True):
        assert autodiff.is_anomaly_enabled()
    assert not autodiff.is_anomaly_enabled()
    autodiff.set_detect_anomaly(True)
    try:
        assert autodiff.is_anomaly_enabled()
    finally:
        autodiff.set_detect_anomaly(False)
    import nn.torch as torch_facade
    with torch_facade.autograd.detect_anomaly(), pytest.raises(FloatingPointError):
        torch_facade.log(torch_facade.zeros(1))


def test_environment_variable_turns_it_on_for_the_process():
    code = ("import numpy as np, tracer, autodiff\n"
            "print(autodiff.is_anomaly_enabled())\n"
            "step = autodiff.grad(lambda x: tracer.log(x).sum(), argnums=0)\n"
            "try:\n    step(np.zeros(2))\nexcept FloatingPointError as e:\n    print(str(e).splitlines()[0])\n")
    root = pathlib.Path(__file__).resolve().parents[2]
    for value, expected in (("1", ["True", "detect_anomaly: log produced -inf (2 of 2 values) from finite inputs"]),
                            ("0", ["False"])):
        env = {**os.environ, "TRACEGRAD_DEBUG_NANS": value, "PYTHONPATH": str(root)}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root,
                              env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == expected


# ---------------------------------------------------------------- eager ops, loss.backward(), optimizers


def test_eager_op_names_the_line():
    x = tracer.tensor(f32(0, 1))
    with autodiff.detect_anomaly(), pytest.raises(FloatingPointError) as err:
        tracer.log(x)  # EAGER
    msg = str(err.value)
    assert msg.startswith("detect_anomaly: log (eager) produced -inf (1 of 2 values) from finite inputs")
    assert f"made by: {line_of('EAGER')}: tracer.log(x)" in msg
    assert "input 0: float32 (2,), min 0, max 1, no NaN" in msg


def test_loss_backward_tape_names_the_forward_line():
    x = tracer.tensor(np.array([0.0, 9.0, 4.0]), requires_grad=True)
    with autodiff.detect_anomaly():
        y = (tracer.sqrt(x) * tracer.tensor(np.zeros(3))).sum()  # TAPE
        with pytest.raises(FloatingPointError) as err:
            y.backward()
    msg = str(err.value)
    assert "(in backward)" in msg and "from inputs without NaN" in msg
    assert f"made by: {line_of('TAPE')} (in the backward of the op on this line)" in msg
    x2 = tracer.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with autodiff.detect_anomaly(), pytest.raises(FloatingPointError, match=r"log \(eager\) produced -inf"):
        tracer.log(x2 - 1.0)  # the eager forward of a recorded op is checked as it runs


def test_a_nan_gradient_reaching_an_optimizer_names_the_parameter():
    model = nn.Linear(2, 1)
    opt = optim.SGD(model.named_parameters(), lr=0.1)
    grads = {"weight": np.zeros((1, 2), "float32"), "bias": f32(np.nan)}
    with autodiff.detect_anomaly(), pytest.raises(FloatingPointError,
                                                  match=r"SGD.step: the gradient of parameter 1 \(bias\) holds NaN"):
        opt.step(grads)
    assert not np.isnan(model.bias.numpy()).any()  # raised before any update
    opt.step(grads)  # off: the NaN goes in silently, as before
    assert np.isnan(model.bias.numpy()).all()
    w = tracer.tensor(f32(-3e38), requires_grad=True)
    adam = optim.Adam([w], lr=1e38)  # the first step moves w by -lr: past float32's range
    w.grad = tracer.tensor(f32(1))
    with autodiff.detect_anomaly(), pytest.raises(FloatingPointError,
                                                  match=r"Adam.step: after the update, parameter 0 holds -inf"):
        adam.step()


def test_training_loop_stops_at_the_first_bad_step():
    model = nn.Linear(3, 1)
    opt = optim.Adam(model.parameters(), lr=1e-2)
    step = autodiff.value_and_grad(lambda x: tracer.log(model(x)).sum(), wrt=model.parameters())  # LOOP
    x = np.ones((4, 3), "float32")
    model.weight.numpy()[...] = 1.0
    model.bias.numpy()[...] = 0.0
    with autodiff.detect_anomaly():
        for _ in range(2):
            loss, grads = step(x)
            opt.step(grads)
        model.bias.numpy()[...] = -5.0  # the model's output is now below 0: log of it is NaN
        with pytest.raises(FloatingPointError) as err:
            step(x)
    assert "log produced NaN (4 of 4 values)" in str(err.value) and line_of("LOOP") in str(err.value)


def test_ir_executor_runs_are_checked():
    mod = tracer.trace(lambda x: tracer.exp(x).sum(), tracer.spec((2,)))
    ex = ir.Executor(mod)
    with autodiff.detect_anomaly(), pytest.raises(FloatingPointError, match=r"(?s)exp produced \+inf .*R\.exp\(x\)"):
        ex["main"](f32(1, 1000))
    assert float(ex["main"](f32(0, 0))) == 2.0


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's anomaly-mode notes
def test_like_torch_a_nan_in_the_backward_is_found_at_the_op_that_made_it():
    """torch's detect_anomaly raises RuntimeError naming SqrtBackward0 (NaN only, backward only); here the same
    backward NaN raises FloatingPointError at the sqrt's line."""
    tx = torch.tensor([0.0, 4.0], requires_grad=True)
    with torch.autograd.detect_anomaly(), pytest.raises(RuntimeError, match="SqrtBackward0"):
        (torch.sqrt(tx) * 0.0).sum().backward()
    x = tracer.tensor(np.array([0.0, 4.0]), requires_grad=True)
    with autodiff.detect_anomaly():
        y = (tracer.sqrt(x) * 0.0).sum()  # LIKE-TORCH
        with pytest.raises(FloatingPointError, match=line_of("LIKE-TORCH")):
            y.backward()
