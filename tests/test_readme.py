"""Every ```python block of the README and of docs/*.md runs as written (the blocks of one file in order,
sharing one namespace, as a reader pasting them would)."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), re.S | re.M)


@pytest.mark.parametrize("path", [p for p in FILES if python_blocks(p)], ids=lambda p: p.name)
def test_every_python_block_runs(path, capsys):
    scope: dict = {"__name__": f"{path.stem}_blocks"}
    for i, block in enumerate(python_blocks(path)):
        try:
            exec(compile(block, f"{path.name} block {i + 1}", "exec"), scope)
        except Exception as e:
            raise AssertionError(f"{path.name}: python block {i + 1} failed: {type(e).__name__}: {e}") from e
    capsys.readouterr()


def test_the_readme_blocks_do_what_they_say(capsys):
    blocks = python_blocks(ROOT / "README.md")
    first, second = {}, {}
    exec(blocks[0], first)
    assert "R.dataflow()" in capsys.readouterr().out
    assert first["gw"].shape == (3, 2) and first["value"].shape == ()
    exec(blocks[1], second)  # loads the digits itself: nothing is passed in
    out = capsys.readouterr().out
    assert "def main_adjoint" in out
    assert sum(map(len, second["step"].cache.values())) == 1  # one trace for the whole epoch
    assert float(second["loss"]) < 2.2  # below log(10): it learned during the one epoch


def test_the_readme_test_commands_stay_light_and_name_the_torch_extra():
    text = (ROOT / "README.md").read_text()
    assert 'pip install -e ".[test]" && python -m pytest' in text
    assert 'pip install -e ".[test,torch,mpi]" && python -m pytest' in text
    ci = (ROOT / ".ci" / "run").read_text()
    assert '".[test,torch,mpi]"' in ci  # CI runs the comparisons and the mpiexec tests every time
    # skips are summarized with their reasons, failures and errors still listed
    assert re.search(r'addopts = ".*-rfEs\b', (ROOT / "pyproject.toml").read_text())


def test_python_blocks_are_found():
    assert python_blocks(ROOT / "README.md")[0].startswith("import numpy as np")
    assert len(python_blocks(ROOT / "README.md")) == 2  # the prose claims are tested below


# ---------------------------------------------------------------- the README's prose claims, each run as written

README = (ROOT / "README.md").read_text()


@pytest.fixture(scope="module")
def readme_step():
    """The second README block's model and step, on a few batches (the claims below read them)."""
    import numpy as np

    import autodiff
    import nn
    from nn import functional as F

    (images, labels), _ = nn.data.load_digits()
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    step = autodiff.value_and_grad(lambda x, y: F.cross_entropy(model(x), y), wrt=model.parameters())
    step(np.asarray(images[:64]), np.asarray(labels[:64]))
    return step


def test_plan_checkpoints_takes_a_steps_module():
    import numpy as np

    import autodiff
    import ir
    import nn
    from nn import functional as F

    assert "`autodiff.plan_checkpoints(mod, budget)` on any module: a traced one, or a step's `step.module`" in README
    model = nn.Sequential(nn.Flatten(), *[m for _ in range(6) for m in (nn.Linear(64, 64), nn.Tanh())],
                          nn.Linear(64, 10))
    step = autodiff.value_and_grad(lambda x, y: F.cross_entropy(model(x), y), wrt=model.parameters())
    step(np.zeros((256, 8, 8), "float32"), np.zeros(256, "int64"))
    budget = int(step.stats.peak_bytes * 0.8)
    planned = autodiff.plan_checkpoints(step.module, budget)
    assert sorted(planned) == ["main", "main_adjoint"] and "R.grad.start_checkpoint" in str(planned)
    ex = ir.Executor(planned)
    _, grads = ex["main_adjoint"](*[np.zeros(p.type.shape, p.type.dtype) for p in planned["main_adjoint"].params])
    assert ex.stats.peak_bytes <= budget < step.stats.peak_bytes
    assert [g.shape for g in grads] == [tuple(p.shape) for p in model.parameters()]  # the wrt, not the images


def test_to_dot_is_text_and_render_draws_it_or_says_what_is_missing(readme_step, tmp_path, monkeypatch):
    import shutil

    import ir

    assert "`ir.to_dot(mod)` returns the graph as Graphviz DOT text, and `ir.render(mod, \"step.svg\")` draws it" \
        in README
    dot = ir.to_dot(readme_step.module)
    assert isinstance(dot, str) and dot.startswith("digraph")
    if shutil.which("dot"):
        ir.render(readme_step.module, tmp_path / "step.svg")
        assert "<svg" in (tmp_path / "step.svg").read_text()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="needs Graphviz's `dot` program"):
        ir.render(readme_step.module, tmp_path / "again.svg")


def test_memory_profile_and_source_lines(readme_step):
    import ir

    profile = readme_step.memory_profile()
    assert isinstance(profile, ir.MemoryProfile) and "test_readme.py" in str(profile)
    assert "# test_readme.py:" in readme_step.module.script(show_source=True)


def test_grad_composes_into_a_hessian_vector_product():
    import numpy as np

    import autodiff
    import tracer

    assert "autodiff.grad(lambda t: (autodiff.grad(f, wrt=t)(t) * v).sum(), wrt=x)(x)" in README
    x = tracer.tensor(np.array([0.5, -1.0, 2.0]))
    v = tracer.tensor(np.array([1.0, 2.0, -1.0]))

    def f(t):
        return (t ** 3).sum() + (t[0] * t[1])
    hvp = autodiff.grad(lambda t: (autodiff.grad(f, wrt=t)(t) * v).sum(), wrt=x)(x)
    hessian = np.diag(6 * x.numpy()) + np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]])
    np.testing.assert_allclose(hvp.numpy(), hessian @ v.numpy(), rtol=1e-12)


def test_parse_gradient_and_the_cuda_executor_claims(monkeypatch):
    import sys

    import autodiff
    import ir
    import tracer

    mod = tracer.trace(lambda x: tracer.tanh(x).sum(), tracer.spec((3,)))
    assert ir.structural_equal(ir.parse(str(mod)), mod)
    assert sorted(autodiff.Gradient("main")(mod)) == ["main", "main_adjoint"]
    monkeypatch.setitem(sys.modules, "cupy", None)  # "runs it on CuPy": without CuPy, the install hint
    with pytest.raises(RuntimeError, match=r'needs CuPy: pip install "tracegrad\[cuda\]"'):
        ir.Executor(mod, device="cuda")
    assert tracer.cuda.is_available() is False
    assert '`CudaUnavailableError`, an ImportError, with the install hint' in README


def test_checkpoint_spellings_and_the_benchmark_figures():
    import numpy as np

    import nn
    import tracer

    blocks = [nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(4)]
    x = tracer.tensor(np.ones((2, 4), "float32"))
    with tracer.checkpoint():
        y = blocks[0](x)
    assert nn.checkpoint_sequential(blocks, 2, x).shape == y.shape == (2, 4)
    bench = (ROOT / "docs" / "benchmarks.md").read_text()
    assert "peak memory\n  falling to 0.54x (every block) and 0.28x (segments of 4)" in README
    assert "| every | 37.00 | **0.545** |" in bench and "| segments | 19.00 | **0.280** |" in bench


def test_the_stated_requirements_and_extras_match_pyproject():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "Python >= 3.10" in README and meta["requires-python"] == ">=3.10"
    assert [re.match(r"[a-z-]+", d).group() for d in meta["dependencies"]] == ["numpy", "typing-extensions"]
    assert "the only run-time dependencies are NumPy and typing-extensions" in README
    extras = README[README.index("Optional extras:"):README.index("tracegrad installs four top-level packages")]
    named = set(re.findall(r"`([a-z]+)`\s+\(", extras))
    assert named == set(meta["optional-dependencies"]), named ^ set(meta["optional-dependencies"])
    assert any(d.startswith("mpich") for d in meta["optional-dependencies"]["mpi"])  # "mpiexec comes with" it
    assert any(d.startswith("cupy") for d in meta["optional-dependencies"]["cuda"])


def test_the_stated_commands_and_paths_exist():
    import subprocess
    import sys

    for path in ["examples/train_digits.py", "examples/inspect_ir.py", "examples/train_gpt.py", "docs/gen_api.py",
                 "docs/api.md", "docs/from-pytorch.md", "docs/benchmarks.md", "docs/design.md", "ir/transform",
                 "ir/runtime", "autodiff/rules", "LICENSE"]:
        assert (ROOT / path).exists(), path
    for path in re.findall(r"`((?:ir|tracer|autodiff|nn|docs|examples)/[\w./<>-]*)`", README):
        if "<family>" not in path:
            assert (ROOT / path).exists(), path
    assert (ROOT / "docs" / "from-pytorch.md").read_text().split("\n## ", 1)[1].split("\n\n", 1)[1].startswith("|")
    train = (ROOT / "examples" / "train_digits.py").read_text()
    assert 'add_argument("--distributed"' in train
    assert 'add_argument("--checkpoint"' in (ROOT / "examples" / "train_gpt.py").read_text()
    assert "What a compiled step sees" in (ROOT / "docs" / "design.md").read_text()
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "examples/inspect_ir.py"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "def main(" in done.stdout and "def main_adjoint(" in done.stdout
