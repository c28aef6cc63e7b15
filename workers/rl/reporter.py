"""How the engine tells the world what it did. The engine calls a Reporter; it never knows
whether that writes JSONL files (CLI), or Postgres rows and WebSocket notifications (worker)."""

from __future__ import annotations

from typing import Protocol


class Reporter(Protocol):
    def log_step(self, step: int, metrics: dict[str, float], samples: list[dict]) -> None:
        """After each training step: its metrics and (some of) its samples as Sample.to_record() dicts."""

    def log_eval(self, step: int, metrics: dict[str, float], samples: list[dict]) -> None:
        """After an evaluation at `step` (step 0 = before training): eval/* metrics and eval samples."""

    def log_checkpoint(self, step: int, path: str, size_bytes: int, metrics: dict[str, float]) -> None:
        """A checkpoint was written (and older ones beyond keep-N may have been deleted)."""

    def log_checkpoint_deleted(self, step: int, path: str) -> None:
        """The keep-N policy removed the checkpoint of `step` from disk."""

    def log_line(self, level: str, message: str) -> None:
        """A human-readable log line for the run's log tail."""

    def should_stop(self) -> bool:
        """Polled at every step boundary: True makes the trainer stop cleanly (cancel)."""

    def close(self) -> None:
        """Flush everything; called once when training ends, normally or not."""
