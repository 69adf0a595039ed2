"""Review of issue 19 item 9: a traced value that forward stores where a compiled step cannot write it back
must raise TraceError naming the place, and never be left there.

The first implementation searched only what locate searches (lists, tuples, dicts under str/int keys,
objects' __dict__): a traced value in a dict under a tuple or float key, in a set, a deque or a __slots__
object was left behind silently (the step ran, the model then held a value of a finished trace), and one
inside a tuple (`self.history.append((h, k))`, a global tuple) raised but stayed there, since a tuple
cannot lose an item. Each scenario checks the error and that no traced value remains.
"""
import collections

import numpy as np
import pytest

import autodiff
import nn
import tracer
from tracer import TraceError

X = np.random.default_rng(0).normal(size=(4, 3)).astype("float32")


def traced_values_in(obj, depth=0):
    """Every traced Tensor reachable from obj through containers, attributes and slots."""
    if depth > 6:
        return []
    if isinstance(obj, tracer.Tensor):
        return [obj] if obj._var is not None else []
    if isinstance(obj, dict):
        items = list(obj.values()) + list(obj)
    elif isinstance(obj, (list, tuple, set, frozenset, collections.deque)):
        items = list(obj)
    else:
        items = list(getattr(obj, "__dict__", {}).values())
        for klass in type(obj).__mro__:
            for name in getattr(klass, "__slots__", ()):
                if hasattr(obj, name) and name not in ("__dict__", "__weakref__"):
                    items.append(getattr(obj, name))
    return [t for item in items for t in traced_values_in(item, depth + 1)]


class Slotted:
    __slots__ = ("value",)


def model_storing(store, init):
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)
            self.box = init()

        def forward(self, x):
            h = self.fc(x)
            store(self.box, h)
            return h

    return Model()


CASES = {
    "tuple in a list": (list, lambda box, h: box.append((h, 1)), r"box\[0\]\[0\]"),
    "namedtuple in a dict": (dict, lambda box, h: box.__setitem__("k", collections.namedtuple("P", "a b")(h, h)),
                             r"box\['k'\]"),
    "dict under a tuple key": (dict, lambda box, h: box.__setitem__((1, 2), h), r"box\[\(1, 2\)\]"),
    "dict under a float key": (dict, lambda box, h: box.__setitem__(0.5, h), r"box\[0\.5\]"),
    "dict under a tensor key": (dict, lambda box, h: box.__setitem__(h, 1), "a key of .*box"),
    "set": (set, lambda box, h: box.add(h), "box"),
    "deque": (collections.deque, lambda box, h: box.append(h), r"box\[0\]"),
    "__slots__ object": (Slotted, lambda box, h: setattr(box, "value", h), r"box\.value"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_traced_value_stored_in_forward_raises_and_is_removed(case):
    init, store, where = CASES[case]
    model = model_storing(store, init)
    step = autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters())
    with pytest.raises(TraceError, match=where):
        step(X)
    assert traced_values_in(model) == [], f"{case}: a traced value was left on the model"
    model.state_dict()
    model(X)  # eager still works, and stores a concrete value
    assert traced_values_in(model) == []


def test_tuple_left_in_a_global_is_removed():
    def fn(x):
        global LAST
        h = x * 2.0
        LAST = (h, "note")
        return h.sum()

    with pytest.raises(TraceError, match="LAST"):
        autodiff.value_and_grad(fn, argnums=0)(X)
    assert traced_values_in(globals().get("LAST", ())) == []


def test_two_traced_values_in_one_tuple_remove_only_that_item():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)
            self.log = ["kept", "kept too"]

        def forward(self, x):
            h = self.fc(x)
            self.log.insert(1, (h, h * 2.0))
            return h

    model = Model()
    with pytest.raises(TraceError, match=r"log\[1\]\[0\], .*log\[1\]\[1\]"):
        autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters())(X)
    assert model.log == ["kept", "kept too"]


@pytest.mark.xfail(strict=True, reason="not fixed: a plain (non-Module) object held by a module, such as a config, "
                   "is guarded by identity only; its attributes read in forward are baked (check=True sees it). "
                   "Recording them needs a design decision: guarding every plain object's __dict__ would retrace "
                   "every call for objects with counters (loggers)")
def test_config_object_on_a_module_is_read_now():
    class Config:
        scale = 0.5

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 1)
            self.cfg = Config()

        def forward(self, x):
            return self.fc(x) * self.cfg.scale

    model = Model()
    step = autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters())
    step(X)
    model.cfg.scale = 2.0
    value, _ = step(X)
    np.testing.assert_allclose(float(value), float(model(X).sum()), rtol=1e-6)
