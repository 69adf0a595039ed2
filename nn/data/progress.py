"""nn.data.progress: a progress bar for long loops, tqdm's when it is installed, a plain line otherwise."""
from __future__ import annotations

import sys
import time


def progress(iterable, total: int | None = None, desc: str | None = None, *, file=None, mininterval: float = 1.0):
    """Iterate over `iterable`, showing progress. With tqdm installed (the `progress` extra) this is
    `tqdm.tqdm(iterable, total=total, desc=desc, file=file, mininterval=mininterval)`. Without it, one plain
    line per report is written and flushed to `file` (sys.stderr by default): at most one every `mininterval`
    seconds, and always one after the last item, e.g. ``train: 37/100 (37%) 2.1s 17.6it/s``. `total`
    defaults to len(iterable) where it has one.
    """
    try:
        from tqdm import tqdm
    except ImportError:
        return _plain(iterable, total, desc, file, mininterval)
    return tqdm(iterable, total=total, desc=desc, file=file, mininterval=mininterval)


def _plain(iterable, total, desc, file, mininterval):
    if total is None:
        try:
            total = len(iterable)
        except TypeError:
            total = None
    start = last = time.perf_counter()
    count = 0

    def report():
        elapsed = time.perf_counter() - start
        done = f"{count}/{total} ({100 * count // total}%)" if total else f"{count}"
        rate = f" {count / elapsed:.1f}it/s" if elapsed > 0 else ""
        out = file if file is not None else sys.stderr
        print(f"{desc + ': ' if desc else ''}{done} {elapsed:.1f}s{rate}", file=out, flush=True)

    for item in iterable:
        yield item
        count += 1
        now = time.perf_counter()
        if now - last >= mininterval and (total is None or count < total):
            report()
            last = now
    report()


__all__ = ["progress"]
