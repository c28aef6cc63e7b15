"""The CPU preset really learns (issue 3, acceptance 1): run exactly as a user would, from the
command line, then check the curves. No timing assertion: CI machines vary; the wall time is
printed (see it with -s)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def moving_average(values, window):
    return [sum(values[i : i + window]) / window for i in range(len(values) - window + 1)]


@pytest.mark.slow
def test_the_tiny_arith_preset_lifts_eval_accuracy_by_20_points(tmp_path):
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "workers.rl", "train", "configs/tiny-arith-grpo.yaml", "--out", str(tmp_path), "--no-progress"],
        cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    evals = [m["eval/accuracy"] for m in lines if m["type"] == "eval"]
    rewards = [m["reward/mean"] for m in lines if m["type"] == "train"]
    print(f"\ntiny-arith preset: {time.monotonic() - started:.0f} s, eval accuracy {evals}")

    assert evals[-1] - evals[0] >= 0.20, f"eval accuracy {evals[0]:.3f} -> {evals[-1]:.3f}"
    smooth = moving_average(rewards, 25)
    assert smooth[-1] - smooth[0] >= 0.05, f"reward moving average {smooth[0]:.3f} -> {smooth[-1]:.3f}"
