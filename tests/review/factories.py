"""Runs and samples for review tests, written straight to the database (no training needed)."""

from __future__ import annotations

import itertools
import math

from rlweb.review.copy import copy_rows
from rlweb.runs.models import Run, Trajectory

_uids = itertools.count(1)


def make_run(owner, name="review run", **fields) -> Run:
    return Run.objects.create(owner=owner, name=name, config={}, status=fields.pop("status", "completed"), **fields)


def make_sample(run: Run, **fields) -> Trajectory:
    n = next(_uids)
    values = {
        "step": 1,
        "split": "train",
        "uid": f"s{n}",
        "group_id": f"g{fields.get('step', 1)}-{fields.get('prompt_index', 0)}",
        "prompt_index": 0,
        "data_source": "arith",
        "status": "completed",
        "finish_reason": "stop",
        "reward": 1.0,
        "reward_components": {"correct": 1.0},
        "advantage": 0.0,
        "prompt_len": 10,
        "response_len": 5,
        "prompt": "What is 2 + 2?",
        "response": "The answer is 4.",
        "label": "4",
        "explanation": "response answer: 4; label: 4 -> match",
        "tokens": [["The", -0.1, 1], [" answer", -2.5, 1], [" is", -0.01, 1], [" 4", -0.2, 1], [".", -0.05, 1]],
    }
    values.update(fields)
    return Trajectory.objects.create(run=run, **values)


def make_group(run: Run, step: int, prompt_index: int, rewards: list[float], responses: list[str] | None = None, **fields) -> list[Trajectory]:
    """The n samples of one prompt at one step, with GRPO advantages computed from `rewards`."""
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    group = f"g-{step}-{prompt_index}"
    out = []
    for n, reward in enumerate(rewards):
        out.append(
            make_sample(
                run,
                step=step,
                prompt_index=prompt_index,
                group_id=group,
                reward=reward,
                reward_components={"correct": reward},
                advantage=(reward - mean) / (std + 1e-6),
                zero_variance=len(set(rewards)) == 1,
                response=(responses[n] if responses else f"answer {reward} at step {step}"),
                **fields,
            )
        )
    return out


SAMPLE_COLUMNS = (
    "run_id", "step", "split", "uid", "group_id", "prompt_index", "data_source", "status", "finish_reason",
    "reward", "reward_components", "advantage", "prompt_len", "response_len", "staleness", "zero_variance",
    "prompt", "response", "label", "explanation", "tokens", "created_at",
)


def copy_samples(run: Run, rows) -> int:
    """COPY many samples: `rows` yields dicts of SAMPLE_COLUMNS (run_id and created_at filled in)."""
    from django.utils import timezone

    now = timezone.now()
    defaults = {"split": "train", "data_source": "", "status": "completed", "finish_reason": "stop", "reward_components": {},
                "advantage": None, "prompt_len": 0, "response_len": 0, "staleness": 0, "zero_variance": False,
                "prompt": "", "response": "", "label": "", "explanation": "", "tokens": [], "prompt_index": None}

    def tuples():
        for row in rows:
            merged = {**defaults, **row, "run_id": run.pk, "created_at": now}
            yield tuple(merged[c] for c in SAMPLE_COLUMNS)

    return copy_rows(Trajectory, SAMPLE_COLUMNS, tuples())
