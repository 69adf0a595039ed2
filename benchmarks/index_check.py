"""What nn.Embedding's bounds check costs in a compiled step (docs/design.md, "Where tracegrad departs
from Relax": the check_index op).

The check is one pass over the index array (an unsigned comparison and an any()). This times, side by
side in one process with interleaved rounds, the median of a whole training step of an Embedding-heavy
model with nn.Embedding (checked) and with the same lookup as a bare take (unchecked), and the check's
kernel alone on the same indices.

    python benchmarks/index_check.py            # 50 rounds
    python benchmarks/index_check.py --quick    # 5 rounds
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # make the repository importable

import numpy as np  # noqa: E402

import autodiff  # noqa: E402
import nn  # noqa: E402
import tracer  # noqa: E402
from ir.ops import get_op  # noqa: E402
from nn import functional as F  # noqa: E402

CONFIGS = [  # (vocabulary, embedding width, batch, sequence length, classes)
    (1000, 32, 8, 32, 10),
    (50000, 64, 64, 256, 10),
]


class Bag(nn.Module):
    """Embedding-heavy: look up every token, average over the sequence, one linear layer."""

    def __init__(self, vocab, dim, classes, checked):
        super().__init__()
        self.emb, self.head, self.checked = nn.Embedding(vocab, dim), nn.Linear(dim, classes), checked

    def forward(self, tokens):
        rows = self.emb(tokens) if self.checked else tracer.take(self.emb.weight, tokens, axis=0)
        return self.head(rows.mean(axis=1))


def timed(times, fn, *args):
    start = time.perf_counter()
    fn(*args)
    times.append((time.perf_counter() - start) * 1e6)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    rounds = 5 if parser.parse_args().quick else 50
    check = get_op("check_index").kernel
    print("| vocab, dim, batch x seq | step checked us | step unchecked us | check alone us | overhead |")
    print("|---|---:|---:|---:|---:|")
    for vocab, dim, batch, seq, classes in CONFIGS:
        rng = np.random.default_rng(0)
        tokens = rng.integers(0, vocab, (batch, seq))
        labels = rng.integers(0, classes, batch)
        steps = {}
        for checked in (True, False):
            model = Bag(vocab, dim, classes, checked)
            steps[checked] = autodiff.value_and_grad(lambda x, y, m=model: F.cross_entropy(m(x), y),
                                                     wrt=model.parameters())
            steps[checked](tokens, labels)  # trace and compile
        times = {True: [], False: [], "check": []}
        for _ in range(rounds):
            for key in (True, False):
                timed(times[key], steps[key], tokens, labels)
            timed(times["check"], check, np, tokens, 0, vocab, "Embedding")
        on, off, alone = (float(np.median(times[k])) for k in (True, False, "check"))
        print(f"| {vocab}, {dim}, {batch} x {seq} | {on:.0f} | {off:.0f} | {alone:.1f} | "
              f"{100 * (on - off) / off:+.1f}% (check alone {100 * alone / off:.2f}%) |")


if __name__ == "__main__":
    main()
