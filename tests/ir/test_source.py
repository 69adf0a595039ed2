"""Source locations: every traced binding records the user's line, forward and adjoint."""
import inspect

import numpy as np

import autodiff
import ir
import tracer

HERE = __file__


def lines_of(fn, *needles):
    """The absolute line numbers in this file of fn's source lines containing each needle."""
    src, first = inspect.getsourcelines(fn)
    return [first + next(i for i, line in enumerate(src) if needle in line) for needle in needles]


def model(x, w):
    h = tracer.tanh(x @ w)
    y = h * h
    return y.sum()


def binding_lines(fn: ir.Function, role="forward"):
    return {b.var.name: b.loc.line for b in fn.bindings if b.loc is not None and b.loc.role == role}


def test_forward_bindings_point_at_the_users_lines():
    mod = tracer.trace(model, tracer.spec((2, 3)), tracer.spec((3, 3)))
    tanh_line, mul_line, sum_line = lines_of(model, "tanh", "h * h", "sum()")
    got = [(b.value.op, b.loc.file, b.loc.line) for b in mod["main"].bindings]
    assert got == [("matmul", HERE, tanh_line), ("tanh", HERE, tanh_line), ("multiply", HERE, mul_line),
                   ("sum", HERE, sum_line)]


def test_library_frames_are_skipped():
    """Ops emitted several calls deep inside tracer/ (the function, Tensor methods, apply) point at
    the user's call, not at tracegrad's own files."""
    def f(x):
        return tracer.layer_norm(x) + tracer.var(x, axis=-1, keepdims=True)

    mod = tracer.trace(f, tracer.spec((2, 3)))
    (line,) = lines_of(f, "layer_norm")
    assert {(b.loc.file, b.loc.line) for b in mod["main"].bindings} == {(HERE, line)}


def test_script_shows_sources_and_parses_back():
    mod = tracer.trace(model, tracer.spec((2, 3)), tracer.spec((3, 3)))
    text = mod.script(show_source=True)
    tanh_line, = lines_of(model, "tanh")
    assert f"= R.tanh(lv)  # test_source.py:{tanh_line}" in text
    assert "#" not in str(mod).split("class Module:")[1]  # the plain text is unchanged
    assert mod.script() == str(mod) == ir.print_module(mod)
    assert ir.print_module(mod, show_source=True) == text
    assert ir.structural_equal(ir.parse(text), mod)  # comments are ignored, locations are not compared


def test_adjoint_bindings_point_at_the_line_they_differentiate():
    mod = tracer.trace(model, tracer.spec((2, 3)), tracer.spec((3, 3)))
    mod = ir.transform.cleanup()(autodiff.Gradient("main")(mod))
    adjoint = mod["main_adjoint"]
    tanh_line, mul_line, sum_line = lines_of(model, "tanh", "h * h", "sum()")
    grads = [b for b in adjoint.bindings if b.loc is not None and b.loc.role == "gradient"]
    assert grads and all(b.loc.file == HERE for b in grads)
    by_op = {}
    for b in grads:
        by_op.setdefault(b.value.op, set()).add(b.loc.line)
    assert {tanh_line} == by_op["subtract"]  # 1 - tanh^2 belongs to the tanh
    assert by_op["matmul"] == {tanh_line}  # both matmuls of x @ w's gradient
    assert sum_line in by_op["broadcast_to"]
    forward = binding_lines(adjoint)
    assert sorted(forward.values()) == [tanh_line, tanh_line, mul_line, sum_line]
    text = mod.script(show_source=True)
    assert f"# test_source.py:{tanh_line} (gradient)" in text


def test_recomputed_bindings_are_marked_with_their_forward_line():
    def f(x, w):
        h = tracer.checkpoint(lambda a: tracer.exp(a @ w) * a)(x)
        return (h @ w).sum()

    mod = tracer.trace(f, tracer.spec((2, 3)), tracer.spec((3, 3)))
    mod = ir.transform.cleanup()(autodiff.Gradient("main")(mod))
    (line,) = lines_of(f, "checkpoint")
    recomputed = [b for b in mod["main_adjoint"].bindings if b.loc is not None and b.loc.role == "recompute"]
    assert [b.value.op for b in recomputed] == ["matmul", "exp"]
    assert all((b.loc.file, b.loc.line) == (HERE, line) for b in recomputed)
    assert f"test_source.py:{line} (recompute)" in mod.script(show_source=True)


def test_locations_survive_the_cleanup_passes_and_do_not_change_equality():
    mod = tracer.trace(model, np.ones((2, 3), "float32"), np.ones((3, 3), "float32"))
    cleaned = ir.transform.cleanup()(mod)
    assert [b.loc for b in cleaned["main"].bindings] == [b.loc for b in mod["main"].bindings]
    bare = ir.parse(str(mod))
    assert all(b.loc is None for b in bare["main"].bindings)
    assert ir.structural_equal(bare, mod) and ir.structural_equal(mod, bare)
