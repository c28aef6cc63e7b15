"""A Reporter that keeps everything in memory: for tests, benchmarks and notebooks.

`stop_after_step=k` makes `should_stop()` true once step k was logged, which is how a test
interrupts a run at a step boundary (like a cancel from the web)."""

from __future__ import annotations


class RecordingReporter:
    def __init__(self, stop_after_step: int | None = None):
        self.steps: dict[int, dict[str, float]] = {}
        self.evals: dict[int, dict[str, float]] = {}
        self.samples: list[dict] = []
        self.eval_samples: list[dict] = []
        self.checkpoints: list[tuple[int, str, int]] = []
        self.deleted: list[tuple[int, str]] = []
        self.lines: list[tuple[str, str]] = []
        self.stop_after_step = stop_after_step
        self.closed = 0

    def log_step(self, step: int, metrics: dict[str, float], samples: list[dict]) -> None:
        self.steps[step] = dict(metrics)
        self.samples.extend(samples)

    def log_eval(self, step: int, metrics: dict[str, float], samples: list[dict]) -> None:
        self.evals[step] = dict(metrics)
        self.eval_samples.extend(samples)

    def log_checkpoint(self, step: int, path: str, size_bytes: int, metrics: dict[str, float]) -> None:
        self.checkpoints.append((step, path, size_bytes))

    def log_checkpoint_deleted(self, step: int, path: str) -> None:
        self.deleted.append((step, path))

    def log_line(self, level: str, message: str) -> None:
        self.lines.append((level, message))

    def should_stop(self) -> bool:
        return self.stop_after_step is not None and self.stop_after_step in self.steps

    def close(self) -> None:
        self.closed += 1
