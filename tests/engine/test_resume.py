"""Exact resume (issue 3, acceptance 3): a run stopped after its checkpoint at step k and resumed
gives, for steps k+1..N, the same metrics as an uninterrupted run with the same seed."""

import pytest
import torch

from tests.engine.helpers import small_config
from workers.rl.checkpoint import latest_checkpoint
from workers.rl.recording_reporter import RecordingReporter
from workers.rl.trainer import train

torch.set_num_threads(1)

TOTAL, STOP_AT = 6, 3


def comparable(metrics: dict) -> dict:
    """Everything but wall-clock timings (and rates derived from them)."""
    return {k: v for k, v in metrics.items() if not k.startswith(("time/", "throughput/"))}


@pytest.mark.parametrize(
    "produce",
    [
        {"strategy": "sync"},
        # Async keeps groups in the replay buffer across steps: the buffer must be checkpointed too.
        {"strategy": "async", "oversample": 2.0, "max_staleness": 2, "partial_rollout": True},
    ],
    ids=["sync", "async"],
)
def test_it_resumes_exactly_where_the_checkpoint_left_off(tmp_path, produce):
    cfg = small_config(
        produce=produce,
        schedule={"total_steps": TOTAL, "eval_every": 3, "checkpoint_every": STOP_AT, "keep_checkpoints": 2, "log_samples": 4},
    )
    whole = RecordingReporter()
    train(cfg, tmp_path / "whole", whole)
    if produce["strategy"] == "async":
        assert whole.steps[STOP_AT]["buffer/ready_groups"] > 0, "the checkpoint should hold buffered groups"

    first = RecordingReporter(stop_after_step=STOP_AT)
    summary = train(cfg, tmp_path / "split", first)
    assert summary["status"] == "cancelled" and sorted(first.steps) == list(range(1, STOP_AT + 1))
    assert latest_checkpoint(tmp_path / "split" / "checkpoints").step == STOP_AT

    second = RecordingReporter()
    summary = train(cfg, tmp_path / "split", second, resume=True)
    assert summary["status"] == "completed"
    assert sorted(second.steps) == list(range(STOP_AT + 1, TOTAL + 1))
    assert 0 not in second.evals, "a resumed run does not re-evaluate step 0"

    for step in range(STOP_AT + 1, TOTAL + 1):
        expected, got = comparable(whole.steps[step]), comparable(second.steps[step])
        assert expected.keys() == got.keys()
        for name in expected:
            assert got[name] == pytest.approx(expected[name], abs=1e-6), f"step {step} {name}"
    assert second.evals[TOTAL]["eval/accuracy"] == pytest.approx(whole.evals[TOTAL]["eval/accuracy"], abs=1e-6)
    # The same responses were sampled, not merely the same averages.
    after = lambda rep: [(s["uid"], s["response"]) for s in rep.samples if s["step"] > STOP_AT]  # noqa: E731
    assert after(second) == after(whole)


def test_it_starts_over_when_resume_is_off(tmp_path):
    cfg = small_config(schedule={"total_steps": 2, "eval_every": 0, "checkpoint_every": 1})
    train(cfg, tmp_path, RecordingReporter())
    again = RecordingReporter()
    train(cfg, tmp_path, again, resume=False)
    assert sorted(again.steps) == [1, 2] and 0 in again.evals
