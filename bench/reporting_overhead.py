"""Reporting overhead: the CPU demo trained with the CLI's JSONL reporter and with the worker's DB
reporter (Postgres rows by COPY + channel notification, off the training thread), in one run.

Both sides run the same config (the CPU demo preset, shortened to --steps) with the same seed,
in this process, in rounds (--rounds) whose order rotates (null, JSONL, DB; JSONL, DB, null; DB,
null, JSONL; ...) so that a neighbour's load on a shared machine, or the order itself, falls on all
alike. "null" reports nothing at all: the floor, against which each reporter's own cost shows. The JSONL reporter is used as the CLI uses it (metrics,
samples and events as JSON lines, plus TensorBoard scalars), synchronously on the driver. Seconds per step are the wall-clock intervals between
consecutive log_step calls as the engine's driver sees them — everything a step costs,
reporting included — with the first step (warm-up) left out; the medians are compared.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rlweb_bench REDIS_URL=redis://127.0.0.1:6379/5 python bench/reporting_overhead.py [--steps 40] [--rounds 6] [--in-process]

--in-process runs the engine in this process instead of a Ray actor, so the reporter's writer
thread competes with training for the same interpreter: the harder case.
The last line is JSON: {"bench": "reporting_overhead", "jsonl_s_per_step", "db_s_per_step", "diff_pct", ...}.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _common import ensure_database, emit, setup

DEMO_PRESET = "tiny-arith-grpo"


class NullReporter:
    def log_step(self, step, metrics, samples): pass
    def log_eval(self, step, metrics, samples): pass
    def log_checkpoint(self, step, path, size_bytes, metrics): pass
    def log_checkpoint_deleted(self, step, path): pass
    def log_line(self, level, message): pass
    def should_stop(self): return False
    def close(self): pass


class StepClock:
    """Wraps a Reporter and notes when each step is reported."""

    def __init__(self, inner):
        self.inner = inner
        self.times: list[float] = []

    def log_step(self, step, metrics, samples):
        self.times.append(time.monotonic())
        self.inner.log_step(step, metrics, samples)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def intervals(self) -> list[float]:
        return [b - a for a, b in zip(self.times, self.times[1:])]


def demo_config(steps: int, in_process: bool, threads: int):
    from workers.rl.config import RunConfig, list_presets, load_preset

    if DEMO_PRESET in list_presets():
        config, source = load_preset(DEMO_PRESET), f"preset {DEMO_PRESET}"
    else:
        config, source = RunConfig(), "RunConfig defaults (the demo preset is not installed)"
    config.schedule.total_steps = steps
    config.schedule.checkpoint_every = max(1, steps // 2)
    if in_process:
        config.resources.use_ray = False
    # One torch thread: on a shared 2-core machine, spinning intra-op threads turn a neighbour's
    # burst into 10x slower steps for whichever side is running, which drowns what we measure.
    config.resources.torch_threads = threads
    return config, source


def run_once(kind: str, config, run_model, user) -> list[float]:
    from workers.reporting import DBReporter
    from workers.rl.jsonl_reporter import JsonlReporter
    from workers.rl.trainer import train

    out = Path(tempfile.mkdtemp(prefix=f"rlweb-bench-{kind}-"))
    try:
        if kind == "null":
            inner = NullReporter()
        elif kind == "jsonl":
            inner = JsonlReporter(out)
        else:
            from django.utils import timezone

            run = run_model.objects.create(owner=user, name="bench: reporting overhead", config=config.model_dump(mode="json"),
                                           status="running", attempts=1, total_steps=config.schedule.total_steps,
                                           started_at=timezone.now(), heartbeat_at=timezone.now())
            inner = DBReporter(run.pk, 1, out)
        clock = StepClock(inner)
        train(config, out, clock, resume=False)
        if kind == "db":
            stored = run.metric_points.count()
            assert stored > config.schedule.total_steps * 10, f"only {stored} points stored"
            run.delete()
        return clock.intervals()[1:]
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--in-process", action="store_true")
    args = parser.parse_args()
    threads = int(os.environ.get("BENCH_THREADS", "1"))
    setup(threads=threads)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlweb.settings")
    if not os.environ.get("DATABASE_URL"):
        raise SystemExit("bench/reporting_overhead.py needs DATABASE_URL (Postgres)")
    import django

    ensure_database()

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from rlweb.runs.models import Run

    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench")
    config, source = demo_config(args.steps, args.in_process, threads)
    where = "in-process" if not config.resources.use_ray else "Ray actor"
    print(f"CPU demo from {source}: {args.steps} steps, {config.rollout.prompts_per_step}x{config.rollout.n} samples/step, "
          f"{config.schedule.log_samples} samples reported/step, engine as a {where}")

    times: dict[str, list[float]] = {"null": [], "jsonl": [], "db": []}
    kinds = list(times)
    for r in range(args.rounds):
        # Rotate the order every round: whichever side runs first after a neighbour's burst,
        # or right after another process warmed the caches, is not always the same one.
        first = r % len(kinds)
        for kind in kinds[first:] + kinds[:first]:
            intervals = run_once(kind, config, Run, user)
            times[kind] += intervals
            print(f"round {r + 1} {kind:>5}: median {statistics.median(intervals):.3f} s/step over {len(intervals)} steps", flush=True)

    null, jsonl, db = (statistics.median(times[k]) for k in ("null", "jsonl", "db"))
    diff = 100 * (db - jsonl) / jsonl
    over_null = 100 * (db - null) / null
    print(f"\nseconds per step: no reporter {null:.3f}  JSONL (CLI) {jsonl:.3f}  DB reporter {db:.3f}")
    print(f"DB vs JSONL {diff:+.1f}% (target: within 10%); DB vs no reporting {over_null:+.1f}%; "
          f"JSONL vs no reporting {100 * (jsonl - null) / null:+.1f}%")
    emit({"bench": "reporting_overhead", "jsonl_s_per_step": round(jsonl, 4), "db_s_per_step": round(db, 4),
          "null_s_per_step": round(null, 4), "diff_pct": round(diff, 2), "db_over_null_pct": round(over_null, 2),
          "ratio": round(db / jsonl, 4), "steps": args.steps, "rounds": args.rounds, "engine": where, "config": source})


if __name__ == "__main__":
    main()
