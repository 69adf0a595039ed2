"""Issue 24, reviewed as a newcomer would use it: each test is a finding (a false alarm, a miss, a wrong path)
on the landed items 3 (CUDA without CuPy), 4 (layer errors), 5 (detect_anomaly) and 7 (package clashes)."""
import subprocess
import sys
import threading
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

import autodiff
import ir
import nn
import tracer
from ir.cuda_hint import CudaUnavailableError

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- item 3: a GPU ordinal is a CUDA request
@pytest.mark.parametrize("call", [lambda: tracer.ones(2).to(0), lambda: nn.Linear(2, 2).to(0),
                                  lambda: nn.Linear(2, 2).to(1)], ids=["x.to(0)", "model.to(0)", "model.to(rank)"])
def test_to_an_ordinal_means_cuda_and_gets_the_hint(call, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` fails, as on a machine without it
    with pytest.raises(CudaUnavailableError, match="needs CuPy"):
        call()


def test_to_an_ordinal_does_not_take_bools_or_change_dtypes():
    with pytest.raises(TypeError):
        tracer.ones(2).to(True)
    assert nn.Linear(2, 2).to("float64").weight.dtype == "float64"


def test_executor_takes_the_device_strings_tensors_take(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    mod = tracer.trace(lambda a: a.sum(), tracer.spec((2,)))
    with pytest.raises(CudaUnavailableError):
        ir.Executor(mod, device="cuda:0")


# ---------------------------------------------------------------- item 4: layer errors
class _Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 3)
        self.c = self.a  # one layer at two places

    def forward(self, x):
        return self.c(self.b(self.a(x)))


def test_a_layer_used_twice_names_both_places():
    with pytest.raises(ValueError, match=r"at model\.a or model\.c \(model: _Shared\)"):
        _Shared()(np.zeros((2, 4), "float32"))


@pytest.mark.parametrize("loss", [nn.MSELoss(), nn.L1Loss(), nn.SmoothL1Loss(), nn.HuberLoss()],
                         ids=lambda m: type(m).__name__)
def test_losses_warn_when_input_and_target_only_broadcast(loss):
    pred, target = np.zeros((4, 1), "float32"), np.ones(4, "float32")
    with pytest.warns(UserWarning, match=r"target of shape \(4,\) that is different to the input shape \(4, 1\).*"
                                         r"broadcast to \(4, 4\).*input\.squeeze\(1\)"):
        loss(pred, target)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same shapes: silent
        loss(pred, np.ones((4, 1), "float32"))


# ---------------------------------------------------------------- item 5: detect_anomaly
_w = tracer.tensor(np.ones(3, "float32"))
_NAN_DATA = np.array([1.0, np.nan, 2.0], "float32")


@pytest.mark.parametrize("clean", [tracer.nan_to_num, lambda x: tracer.where(tracer.isnan(x), 0.0, x)],
                         ids=["nan_to_num", "where_isnan"])
def test_a_step_that_cleans_nan_data_is_no_anomaly(clean):
    step = autodiff.value_and_grad(lambda x: (clean(x) * _w).sum(), wrt=[_w])
    with autodiff.detect_anomaly():
        value, (g,) = step(_NAN_DATA)
    assert float(value) == 3.0 and np.array_equal(np.asarray(g), [1.0, 0.0, 2.0])


def test_a_step_that_cleans_nan_data_passes_eagerly():
    with autodiff.detect_anomaly():
        for clean in (tracer.nan_to_num, lambda x: tracer.where(tracer.isnan(x), 0.0, x)):
            assert float((clean(tracer.tensor(_NAN_DATA)) * _w).sum()) == 3.0


def test_two_threads_in_one_step_leave_it_as_it_was():
    from ir.runtime.executor import CompiledFunction

    w = tracer.tensor(np.ones(3, "float32"))
    step = autodiff.value_and_grad(lambda x: (x * w).sum(), wrt=[w])
    step(np.ones(3, "float32"))
    import gc
    compiled = [o for o in gc.get_objects() if type(o) is CompiledFunction and o.fn is not None]
    before = {id(c): (c.observer, c.reuse) for c in compiled}
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def wrap(c):
        inner = c._interpret

        def interpret(args, **kw):  # A enters, B enters, A leaves, B leaves: not last in, first out
            if threading.current_thread().name == "A":
                a_in.set()
                b_in.wait(5)
            else:
                b_in.set()
                a_out.wait(5)
            return inner(args, **kw)
        c._interpret = interpret

    for c in compiled:
        wrap(c)

    def run_a():
        step(np.ones(3, "float32"))
        a_out.set()

    def run_b():
        a_in.wait(5)
        step(np.ones(3, "float32"))

    try:
        with autodiff.detect_anomaly():
            threads = [threading.Thread(target=run_a, name="A"), threading.Thread(target=run_b, name="B")]
            for t in threads:
                t.start()
            for t in threads:
                t.join(10)
    finally:
        for c in compiled:
            del c._interpret
    assert {id(c): (c.observer, c.reuse) for c in compiled} == before


# ---------------------------------------------------------------- item 7: a zipapp or a sourceless install
def _import_tracer_from(path: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    code = "import tracer, nn, autodiff; print(tracer.__file__)"
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(path), "PATH": "", "PYTHONNOUSERSITE": "1"})


def test_tracegrad_in_a_zip_is_not_a_package_clash(tmp_path):
    archive = tmp_path / "app.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for package in ("ir", "tracer", "autodiff", "nn"):
            for f in (ROOT / package).rglob("*.py"):
                z.write(f, f.relative_to(ROOT).as_posix())
    done = _import_tracer_from(archive, tmp_path)
    assert done.returncode == 0 and "app.zip" in done.stdout, done.stderr[-600:]


def test_a_sourceless_install_is_not_a_package_clash_but_a_foreign_one_is(tmp_path):
    import compileall
    import shutil

    site = tmp_path / "site"
    for package in ("ir", "tracer", "autodiff", "nn"):
        shutil.copytree(ROOT / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    assert compileall.compile_dir(str(site), quiet=1, legacy=True)
    for f in site.rglob("*.py"):
        f.unlink()  # only __init__.pyc and friends, as a stripped deployment ships
    done = _import_tracer_from(site, tmp_path)
    assert done.returncode == 0 and "__init__.pyc" in done.stdout, done.stderr[-600:]
    (site / "nn" / "__init__.pyc").unlink()
    (site / "nn" / "__init__.py").write_text("x = 1\n")  # another project's nn written over tracegrad's
    done = _import_tracer_from(site, tmp_path)
    assert done.returncode != 0 and "PackageClashError" in done.stderr and "`nn`" in done.stderr
