"""torch.utils.tensorboard's SummaryWriter without TensorBoard: `add_scalar` / `add_scalars` append JSON lines
({"tag", "value", "step", "time"}) to `<log_dir>/scalars.jsonl`; the image, histogram, graph and text calls are
accepted and not written."""
from __future__ import annotations

import json
import os
import time


class SummaryWriter:
    def __init__(self, log_dir: str | None = None, comment: str = "", **kwargs):
        self.log_dir = log_dir or os.path.join("runs", time.strftime("%b%d_%H-%M-%S") + comment)
        os.makedirs(self.log_dir, exist_ok=True)
        self._file = open(os.path.join(self.log_dir, "scalars.jsonl"), "a", encoding="utf-8")  # noqa: SIM115

    def add_scalar(self, tag: str, scalar_value, global_step=None, walltime=None, **kwargs) -> None:
        record = {"tag": tag, "value": float(scalar_value), "step": None if global_step is None else int(global_step),
                  "time": walltime or time.time()}
        self._file.write(json.dumps(record) + "\n")

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict, global_step=None, walltime=None) -> None:
        for tag, value in tag_scalar_dict.items():
            self.add_scalar(f"{main_tag}/{tag}", value, global_step, walltime)

    def _accepted(self, *args, **kwargs) -> None:
        pass

    add_image = add_images = add_histogram = add_graph = add_text = add_figure = add_embedding = _accepted
    add_hparams = add_pr_curve = add_audio = add_video = add_mesh = add_custom_scalars = _accepted

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


__all__ = ["SummaryWriter"]
