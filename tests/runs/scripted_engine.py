"""A scripted stand-in for workers.rl.trainer.train: it keeps the engine's contract (Reporter
calls, checkpoints in out_dir/checkpoints, resume from the latest one, should_stop at step
boundaries) with deterministic metrics, so the task's bookkeeping can be tested in a second.
The real engine runs in the end-to-end tests (test_live.py)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path


def value_of(name: str, step: int) -> float:
    """The metric value the scripted engine reports: a pure function of (name, step)."""
    return round(0.01 * step + 0.001 * len(name), 6)


METRICS = ("reward/mean", "reward/std", "kl", "entropy", "time/step")


@dataclass
class ScriptedEngine:
    sleep_s: float = 0.0
    fail_at_step: int | None = None
    samples_per_step: int = 2
    calls: list[dict] = field(default_factory=list)

    def __call__(self, config, out_dir: Path, reporter, resume: bool = True) -> dict:
        ckpt_dir = Path(out_dir) / "checkpoints"
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        start = 0
        if resume:
            done = sorted(int(p.name.split("_")[1]) for p in ckpt_dir.glob("step_*"))
            start = done[-1] if done else 0
        self.calls.append({"start": start, "total": config.schedule.total_steps})
        if start == 0:
            reporter.log_eval(0, {"eval/accuracy": 0.1}, [])
        reporter.log_line("INFO", f"training from step {start}")
        total, every = config.schedule.total_steps, config.schedule.checkpoint_every
        for step in range(start + 1, total + 1):
            if reporter.should_stop():
                return {"status": "cancelled", "step": step - 1}
            if self.fail_at_step == step:
                raise RuntimeError(f"scripted failure at step {step}")
            if self.sleep_s:
                time.sleep(self.sleep_s)
            samples = [
                {"step": step, "split": "train", "uid": f"{step}-{i}", "group_id": f"g{step}", "reward": float(i % 2),
                 "prompt": f"{step}+{i}=", "response": str(step + i), "status": "completed", "finish_reason": "stop"}
                for i in range(self.samples_per_step)
            ]
            reporter.log_step(step, {name: value_of(name, step) for name in METRICS}, samples)
            if every and step % every == 0:
                path = ckpt_dir / f"step_{step}"
                path.write_text(json.dumps({"step": step}))
                reporter.log_checkpoint(step, str(path), path.stat().st_size, {})
        reporter.log_eval(total, {"eval/accuracy": 0.9}, [])
        return {"status": "completed", "step": total}
