"""Chart series requests on a long run: 100,000 steps x 30 metrics (3,000,000 points).

Builds (once; reused while it is there) a run with 30 series of 100,000 steps each: noisy
learning curves with rare one-step spikes and dips, written with COPY. Then it asks the real
endpoint (/runs/<id>/series/ through Django's test client: routing, middleware, session, the
query and the JSON) for one series the way the run page does — the whole run, zoomed windows of
several widths, the reward with its std band — `--repeat` times each after a warm-up, and checks
that every answer has at most 2,000 points and keeps the window's first, last, lowest and highest
point. The peer figure is the same request without downsampling (?raw=1: every point).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rlweb_bench python bench/series.py [--steps 100000] [--metrics 30] [--repeat 40]

The last line is JSON: {"bench": "series", "p95_ms", "p50_ms", "points", "raw_p95_ms", "raw_points", ...}.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import time

from _common import ensure_database, emit  # noqa: F401  (also puts the repository on sys.path)

RUN_NAME = "bench: series"
MAX_POINTS = 2000


def metric_names(n: int) -> list[str]:
    base = ["reward/mean", "reward/std", "eval/accuracy", "kl", "entropy", "response_len/mean", "clip_frac",
            "loss/policy", "grad_norm", "lr", "time/step", "time/generate", "time/train", "throughput/tokens_per_s"]
    return (base + [f"extra/m{i:02d}" for i in range(n)])[:n]


def value(name_index: int, step: int, rng: random.Random) -> float:
    trend = 1 - math.exp(-step / 20_000)
    v = 0.2 + 0.6 * trend + 0.05 * math.sin(step / 300 + name_index) + rng.gauss(0, 0.03)
    r = rng.random()
    if r < 0.0002:
        v += 5.0  # a rare spike: downsampling must keep it
    elif r < 0.0004:
        v -= 5.0
    return v


def build(run, steps: int, names: list[str]) -> None:
    from django.db import connection, transaction

    from rlweb.runs.models import MetricPoint

    MetricPoint.objects.filter(run=run).delete()
    rng = random.Random(0)
    started = time.perf_counter()
    for i, name in enumerate(names):
        with transaction.atomic(), connection.cursor() as cursor:
            with cursor.cursor.copy("COPY runs_metricpoint (run_id, step, name, value, wall_time) FROM STDIN") as copy:
                for step in range(1, steps + 1):
                    copy.write_row((run.pk, step, name, value(i, step, rng), 1.7e9 + step * 1.5))
        print(f"  {name}: {steps} points", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_metricpoint")
    print(f"built {steps * len(names):,} points in {time.perf_counter() - started:.0f}s", flush=True)


def timed_get(client, url: str, params: dict) -> tuple[float, dict]:
    started = time.perf_counter()
    response = client.get(url, params)
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, response.content[:300]
    return elapsed, response.json()


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def check_extremes(run_id: int, name: str, lo: int, hi: int, data: dict) -> None:
    from django.db.models import Max, Min

    from rlweb.runs.models import MetricPoint

    window = MetricPoint.objects.filter(run_id=run_id, name=name, step__gte=lo, step__lte=hi)
    agg = window.aggregate(lo_v=Min("value"), hi_v=Max("value"), first=Min("step"), last=Max("step"))
    steps, values = data["steps"], data["values"]
    assert len(steps) <= MAX_POINTS, len(steps)
    assert steps[0] == agg["first"] and steps[-1] == agg["last"], (steps[0], steps[-1], agg)
    assert min(values) == agg["lo_v"] and max(values) == agg["hi_v"], "an extreme was lost"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--metrics", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlweb.settings")
    import django

    ensure_database()

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from rlweb.runs.models import MetricPoint, Run

    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        raise SystemExit("bench/series.py needs Postgres: set DATABASE_URL")
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench")
    run, _ = Run.objects.get_or_create(owner=user, name=RUN_NAME, defaults={"config": {}, "status": "completed"})
    names = metric_names(args.metrics)
    expected = args.steps * len(names)
    if args.rebuild or MetricPoint.objects.filter(run=run).count() != expected:
        build(run, args.steps, names)
    else:
        print(f"reusing run #{run.pk} with {expected:,} points")
    run.total_steps = run.current_step = args.steps
    run.save(update_fields=["total_steps", "current_step"])

    client = Client()
    client.force_login(user)
    url = f"/runs/{run.pk}/series/"
    rng = random.Random(1)
    # What the run page asks: the whole run, zooms of several widths, the band companion.
    cases = [("whole run", "reward/mean", None, None, ())]
    for width in (50_000, 10_000, 3_000):
        lo = rng.randint(1, args.steps - width)
        cases.append((f"zoom {width:,} steps", names[rng.randrange(len(names))], lo, lo + width - 1, ()))
    cases.append(("with std band", "reward/mean", None, None, ("reward/std",)))

    print(f"\n{'request':<22}{'p50 ms':>10}{'p95 ms':>10}{'points':>10}")
    all_times, max_points = [], 0
    for label, name, lo, hi, companions in cases:
        params = {"name": name, "points": MAX_POINTS, "with": list(companions)}
        if lo is not None:
            params.update(lo=lo, hi=hi)
        timed_get(client, url, params)  # warm-up
        times = []
        for _ in range(args.repeat):
            elapsed, data = timed_get(client, url, params)
            times.append(elapsed)
        check_extremes(run.pk, name, lo or 1, hi or args.steps, data)
        max_points = max(max_points, len(data["steps"]))
        all_times += times
        print(f"{label:<22}{statistics.median(times):>10.1f}{p95(times):>10.1f}{len(data['steps']):>10}")

    raw_times = []
    timed_get(client, url, {"name": "reward/mean", "raw": 1})
    for _ in range(max(5, args.repeat // 4)):
        elapsed, raw = timed_get(client, url, {"name": "reward/mean", "raw": 1})
        raw_times.append(elapsed)
    print(f"{'peer: raw whole run':<22}{statistics.median(raw_times):>10.1f}{p95(raw_times):>10.1f}{len(raw['steps']):>10}")
    result = {
        "bench": "series",
        "p95_ms": round(p95(all_times), 1),
        "p50_ms": round(statistics.median(all_times), 1),
        "points": max_points,
        "raw_p95_ms": round(p95(raw_times), 1),
        "raw_points": len(raw["steps"]),
        "steps": args.steps,
        "metrics": len(names),
        "rows": expected,
    }
    print(f"\ndownsampled p95 {result['p95_ms']} ms (target < 150) with <= {max_points} points; "
          f"without downsampling {result['raw_p95_ms']} ms for {result['raw_points']:,} points")
    emit(result)


if __name__ == "__main__":
    main()
