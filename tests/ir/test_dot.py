"""The graph as a picture: DOT text with roles, checkpoint clusters and shapes; rendering through `dot`."""
import re
import shutil

import pytest

import autodiff
import ir
import tracer
from ir.dot import COLOURS


def checkpointed(x, w):
    h = tracer.checkpoint(lambda a: tracer.exp(a @ w) * a)(x)
    return (h @ w).sum()


@pytest.fixture
def step():
    mod = tracer.trace(checkpointed, tracer.spec((2, 3)), tracer.spec((3, 3)))
    return ir.transform.cleanup()(autodiff.Gradient("main")(mod))


def nodes(text):
    """node name -> its attribute text"""
    return dict(re.findall(r'^\s*"([^"]+)" \[(.*)\];$', text, flags=re.M))


def test_default_function_is_the_adjoint(step):
    assert ir.to_dot(step).startswith("digraph main_adjoint {")
    assert ir.to_dot(step, "main").startswith("digraph main {")
    with pytest.raises(KeyError, match="no function named 'nope'"):
        ir.to_dot(step, "nope")


def test_roles_have_their_colours_and_recomputations_say_so(step):
    text = ir.to_dot(step)
    attrs = nodes(text)
    fn = step["main_adjoint"]
    names = ir.printer.assign_names(fn)
    for b in fn.bindings:
        role = b.loc.role if b.loc is not None else "forward"
        node = attrs[names[b.var]]
        assert f'fillcolor="{COLOURS[role]}"' in node
        assert ("(recomputed)" in node) == (role == "recompute")
    assert sum("(recomputed)" in a for a in attrs.values()) == 2  # the matmul and the exp
    assert len({COLOURS["forward"], COLOURS["gradient"], COLOURS["recompute"]}) == 3


def test_checkpoint_regions_are_clusters(step):
    text = ir.to_dot(step)
    clusters = re.findall(r"subgraph cluster_checkpoint(\d+) \{(.*?)\n  \}", text, flags=re.S)
    assert [k for k, _ in clusters] == ["0"]
    inside = re.findall(r'"([^"]+)" \[', clusters[0][1])
    ops = [b.value.op for b in step["main_adjoint"].bindings if ir.printer.assign_names(step["main_adjoint"])[b.var] in inside]
    assert ops == ["grad.start_checkpoint", "grad.start_checkpoint", "matmul", "exp", "multiply", "grad.end_checkpoint"]
    assert "subgraph" not in ir.to_dot(tracer.trace(lambda x: tracer.exp(x).sum(), tracer.spec((3,))))


def test_edges_carry_shapes(step):
    text = ir.to_dot(tracer.trace(lambda x, w: (x @ w).sum(), tracer.spec((2, 3)), tracer.spec((3, 4))))
    assert '"x" -> "lv" [label="(2, 3)"];' in text
    assert '"w" -> "lv" [label="(3, 4)"];' in text
    assert '"lv" -> "lv1" [label="(2, 4)"];' in text
    assert '"lv1" -> "return" [label="()"];' in text


def test_dot_parses_with_graphviz(step, tmp_path):
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot program is not installed")
    path = tmp_path / "step.svg"
    ir.render(step, path)
    svg = path.read_text()
    assert "<svg" in svg and "checkpoint region 1" in svg and "recomputed" in svg
    ir.render(step, tmp_path / "step.png", fn_name="main")
    assert (tmp_path / "step.png").read_bytes()[:4] == b"\x89PNG"


def test_render_without_dot_names_the_package(step, tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="apt-get install graphviz.*conda install -c conda-forge graphviz"):
        ir.render(step, tmp_path / "step.svg")


def test_a_module_without_an_adjoint_draws_its_forward_function():
    mod = tracer.trace(checkpointed, tracer.spec((2, 3)), tracer.spec((3, 3)))
    text = ir.to_dot(mod)
    assert text.startswith("digraph main {") and "subgraph cluster" in text  # the user's region
    colours = {re.search(r'fillcolor="([^"]+)"', attrs).group(1) for attrs in nodes(text).values()
               if "fillcolor" in attrs}
    assert COLOURS["gradient"] not in colours and "recomputed" not in text
    with pytest.raises(KeyError, match="no function named 'main_adjoint'"):
        ir.to_dot(mod, "main_adjoint")
    parsed = ir.parse(str(mod))  # no source locations: the labels simply leave them out
    assert ir.to_dot(parsed).count("->") == text.count("->")
