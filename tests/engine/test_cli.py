"""`python -m workers.rl ...` as a user runs it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.engine.helpers import SMALL, merge

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args, cwd=REPO):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "workers.rl", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_train_writes_metrics_and_samples_and_resumes_in_the_same_directory(tmp_path):
    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump(merge(SMALL, {"schedule": {"total_steps": 2, "eval_every": 1, "checkpoint_every": 1}})))
    out = tmp_path / "out"
    done = run_cli("train", str(config), "--out", str(out), "--set", "optimizer.lr=2e-4", "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "completed at step 2" in done.stdout and "eval accuracy" in done.stdout
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(m["type"], m["step"]) for m in lines] == [("eval", 0), ("train", 1), ("eval", 1), ("train", 2), ("eval", 2)]
    assert lines[1]["lr"] == 2e-4
    assert (out / "samples.jsonl").read_text().strip()
    assert yaml.safe_load((out / "config.yaml").read_text())["optimizer"]["lr"] == 2e-4

    # Same directory, more steps: it continues from the step-2 checkpoint.
    more = run_cli("train", str(config), "--out", str(out), "--set", "schedule.total_steps=3", "--no-progress")
    assert more.returncode == 0, more.stderr
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines if m["type"] == "train"] == [1, 2, 3]


def test_a_bad_override_is_a_clear_error(tmp_path):
    done = run_cli("validate", "configs/tiny-arith-grpo.yaml", "--set", "optimizer.lr=-1")
    assert done.returncode == 2 and "optimizer.lr" in done.stderr
    done = run_cli("validate", "configs/tiny-arith-grpo.yaml", "--set", "optimizer.lrr=1")
    assert done.returncode == 2 and "lrr" in done.stderr


def test_validate_prints_the_full_config():
    done = run_cli("validate", "configs/tiny-arith-grpo.yaml", "--set", "seed=5")
    assert done.returncode == 0
    assert yaml.safe_load(done.stdout)["seed"] == 5


def test_tiny_build_reports_the_cached_model():
    done = run_cli("tiny", "build")
    assert done.returncode == 0, done.stderr
    assert "tiny-arith-seed0" in done.stdout and "held-out greedy accuracy" in done.stdout
