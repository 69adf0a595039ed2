"""docs/from-pytorch.md: every tracegrad name it mentions exists, and it says what differs on purpose."""
import re
from pathlib import Path

import autodiff
import nn
import tracer

TEXT = (Path(__file__).resolve().parents[1] / "docs" / "from-pytorch.md").read_text()


def _resolve(root, dotted: str):
    obj = root
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def test_every_tracegrad_name_it_mentions_exists():
    roots = {"tracer": tracer, "nn": nn, "autodiff": autodiff}
    names = set(re.findall(r"\b(tracer|nn|autodiff)\.([A-Za-z_][\w.]*[A-Za-z_\d])", TEXT))
    assert len(names) > 20
    missing = [f"{r}.{n}" for r, n in sorted(names) if not _has(roots[r], n)]
    assert not missing, missing


def _has(root, dotted: str) -> bool:
    try:
        _resolve(root, dotted)
        return True
    except AttributeError:
        return False


def test_the_table_pairs_pytorch_with_tracegrad_and_names_the_deliberate_differences():
    rows = [line for line in TEXT.splitlines() if line.startswith("| `")]
    assert len(rows) >= 25
    assert all(line.count("|") >= 4 for line in rows)
    for topic in ("Two ways to get gradients", "An in-place update of a parameter", "Tracing rules", "In-place updates inside a trace",
                  "Dtypes are checked", "batch_first"):
        assert topic in TEXT, topic
