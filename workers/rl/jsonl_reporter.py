"""The CLI's Reporter: JSON lines on disk, plus TensorBoard scalars when tensorboard is installed.

    DIR/metrics.jsonl   {"type": "train"|"eval", "step": 3, "wall_time": ..., "<metric>": value, ...}
    DIR/samples.jsonl   one Sample.to_record() per line (train and eval samples)
    DIR/events.jsonl    log lines and checkpoint events
    DIR/tensorboard/    scalars, if `torch.utils.tensorboard` imports

`should_stop()` is true once `request_stop()` was called (the CLI's Ctrl-C handler) or a file
named STOP appears in DIR, so a run can be stopped cleanly from another shell too.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

log = logging.getLogger(__name__)


class JsonlReporter:
    def __init__(self, out_dir: Path, tensorboard: bool = True, on_step=None, on_eval=None, on_line=None):
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._metrics = (self.out_dir / "metrics.jsonl").open("a", encoding="utf-8")
        self._samples = (self.out_dir / "samples.jsonl").open("a", encoding="utf-8")
        self._events = (self.out_dir / "events.jsonl").open("a", encoding="utf-8")
        self._stop = False
        self._on_step, self._on_eval, self._on_line = on_step, on_eval, on_line
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.out_dir / "tensorboard"))
            except Exception:  # tensorboard missing or broken: JSONL is the record anyway
                log.debug("TensorBoard not available", exc_info=True)

    def _write(self, fh, record: dict) -> None:
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        fh.flush()

    def _scalars(self, step: int, metrics: dict[str, float]) -> None:
        if self._tb is not None:
            for name, value in metrics.items():
                self._tb.add_scalar(name, value, step)

    def log_step(self, step: int, metrics: dict[str, float], samples: list[dict]) -> None:
        self._write(self._metrics, {"type": "train", "step": step, "wall_time": time.time(), **metrics})
        for record in samples:
            self._write(self._samples, record)
        self._scalars(step, metrics)
        if self._on_step:
            self._on_step(step, metrics)

    def log_eval(self, step: int, metrics: dict[str, float], samples: list[dict]) -> None:
        self._write(self._metrics, {"type": "eval", "step": step, "wall_time": time.time(), **metrics})
        for record in samples:
            self._write(self._samples, record)
        self._scalars(step, metrics)
        if self._on_eval:
            self._on_eval(step, metrics)

    def log_checkpoint(self, step: int, path: str, size_bytes: int, metrics: dict[str, float]) -> None:
        self._write(self._events, {"type": "checkpoint", "step": step, "path": path, "size_bytes": size_bytes, "wall_time": time.time()})

    def log_checkpoint_deleted(self, step: int, path: str) -> None:
        self._write(self._events, {"type": "checkpoint_deleted", "step": step, "path": path, "wall_time": time.time()})

    def log_line(self, level: str, message: str) -> None:
        self._write(self._events, {"type": "log", "level": level, "message": message, "wall_time": time.time()})
        if self._on_line:
            self._on_line(level, message)
        else:
            getattr(log, level if level in ("debug", "info", "warning", "error") else "info")(message)

    def request_stop(self) -> None:
        self._stop = True

    def should_stop(self) -> bool:
        return self._stop or (self.out_dir / "STOP").exists()

    def close(self) -> None:
        for fh in (self._metrics, self._samples, self._events):
            if not fh.closed:
                fh.close()
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def read_metrics(out_dir: Path, kind: str | None = None) -> list[dict]:
    """The metric lines of a run directory (optionally only 'train' or 'eval' ones)."""
    path = Path(out_dir) / "metrics.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [m for m in lines if kind is None or m["type"] == kind]
