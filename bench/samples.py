"""First-page latency of the sample browser on a run with 1,000,000 stored samples.

Builds (once; reused while it is there) a run whose samples look like a GRPO run on math data:
~1,000 steps of 128 prompts x 8 samples plus an eval batch every 25 steps; rewards rise with
the step; components correct/format/length_penalty; ~6% filtered, 1% failed, 1% expired;
finish reason "length" 2-8%; staleness 0-2; three data sources; responses of 20-250 words drawn
from a Zipf-like vocabulary with a few rare words ("sorry", "hmm") planted at known rates. The
`tokens` column is left empty: list pages never read it.

Then it asks the real page (the sample list view, through Django's test client: URL routing,
middleware, session, queries and template rendering) for the first page of each filter, sort and
text search, `--repeat` times after one warm-up request, and reports p50/p95 per case.

Run it on a scratch Postgres database (it migrates DATABASE_URL and adds a user "bench"):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rlweb_bench python bench/samples.py [--rows 1000000] [--repeat 20]

The last line is JSON: {"bench": "samples", "p95_ms": <worst case>, "<case>_ms": <its p95>, ...}.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time

from _common import ensure_database, emit  # noqa: F401  (also puts the repository on sys.path)

PROMPTS_PER_STEP = 128
N_PER_PROMPT = 8
EVAL_EVERY = 25
EVAL_BATCH = 256
DATASET_ROWS = 7473
RUN_NAME = "bench: samples"

# Each case is the query string of a first page, and what it exercises.
CASES = {
    "no_filter": "",
    "step_range": "step_min=400&step_max=420",
    "reward_range": "reward_min=1",
    "reward_rare_range": "reward_min=0.3&reward_max=0.7",
    "component": "cmin.correct=1",
    "component_rare": "cmax.length_penalty=-0.5",
    "component_none": "cmin.correct=5",  # matches nothing: answered after one bounded scan
    "status": "status=failed",
    "finish_reason": "finish_reason=length",
    "data_source": "data_source=arith",
    "staleness": "staleness_min=2",
    "zero_variance": "zero_variance=yes",
    "response_length": "len_min=900",
    "split_eval": "split=eval",
    "combined": "status=completed&finish_reason=stop&reward_max=0.5&step_min=800",
    "search_common": "q=therefore",  # in 35% of the samples
    "search_2pct": "q=hmm",
    "search_rare": "q=sorry",  # 0.5%
    "search_number": "q=777",  # an answer: ~0.1%
    "search_very_rare": 'q="problem 1234"',  # one prompt of 7,473: ~0.013%
    "search_phrase": 'q="let me check"',  # 3%
    "sort_reward": "sort=-reward",
    "sort_length": "sort=-response_len",
    "sort_advantage_asc": "sort=advantage",
}


def django_setup():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlweb.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    ensure_database()

    django.setup()
    from django.db import connection

    if connection.vendor != "postgresql":
        sys.exit("bench/samples.py needs Postgres: set DATABASE_URL (a scratch database)")


# --- data --------------------------------------------------------------------------------

COMMON = (
    "the of to and a is we so that this it in for with be as then our number each total find "
    "first next step now which are from equals answer value compute left right sum product times "
    "minus plus divide over by remaining per more less than half twice".split()
)
RARE = {"sorry": 0.005, "hmm": 0.02, "therefore": 0.35}


def vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = set(COMMON)
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    return sorted(words)


def response_pool(rng: random.Random, size: int = 40_000) -> list[str]:
    """Distinct response bodies (rows reuse them; each row appends its own answer)."""
    vocab = vocabulary(rng)
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]  # Zipf-like
    pool = []
    for _ in range(size):
        words = rng.choices(vocab, weights, k=rng.randint(20, 250))
        for word, rate in RARE.items():
            if rng.random() < rate:
                words.insert(rng.randrange(len(words)), word)
        if rng.random() < 0.03:
            words.insert(rng.randrange(len(words)), "let me check")
        pool.append(" ".join(words))
    return pool


def prompts(rng: random.Random) -> list[str]:
    names = ["Natalia", "Weng", "Betty", "Julie", "James", "Mark", "Albert", "Ken", "Alexis", "Tina"]
    things = ["clips", "apples", "pages", "dollars", "eggs", "marbles", "cupcakes", "miles"]
    out = []
    for i in range(DATASET_ROWS):
        a, b, c = rng.randint(2, 90), rng.randint(2, 90), rng.randint(2, 12)
        out.append(
            f"Question: {rng.choice(names)} had {a} {rng.choice(things)} and got {b} more each day for {c} days, "
            f"then gave away half. How many are left? Problem {i}.\nLet's think step by step and put the answer after ####.\nAnswer:"
        )
    return out


def rows(total: int, seed: int = 0):
    """Yield exactly `total` sample tuples in bench column order, step by step."""
    rng = random.Random(seed)
    pool = response_pool(rng)
    prompt_texts = prompts(rng)
    sources = ["gsm8k"] * 6 + ["math"] * 3 + ["arith"]
    steps = max(1, total // (PROMPTS_PER_STEP * N_PER_PROMPT))
    produced = 0
    step = 0
    while produced < total:
        step += 1
        progress = min(1.0, step / steps)
        batches = [("train", PROMPTS_PER_STEP, N_PER_PROMPT)]
        if step % EVAL_EVERY == 0:
            batches.append(("eval", EVAL_BATCH, 1))
        for split, n_prompts, n in batches:
            for p in range(n_prompts):
                if produced >= total:
                    return
                index = rng.randrange(DATASET_ROWS)
                difficulty = (index % 7) / 3 - 1
                p_correct = 1 / (1 + math.exp(-(4 * progress - 2 - difficulty)))
                stale = rng.choices([0, 1, 2], [70, 25, 5])[0] if split == "train" else 0
                group = []
                for k in range(n):
                    correct = 1.0 if rng.random() < p_correct else 0.0
                    if sources[index % 10] == "math" and rng.random() < 0.2:  # partial credit
                        correct = round(rng.random(), 2)
                    formatted = 0.0 if rng.random() < 0.04 - 0.03 * progress else 1.0
                    truncated = rng.random() < 0.08 - 0.06 * progress
                    length = 1024 if truncated else min(1023, int(rng.lognormvariate(5.0, 0.6)))
                    penalty = -1.0 if truncated else 0.0
                    reward = round(correct + 0.1 * formatted + penalty, 4)
                    group.append([correct, formatted, penalty, reward, length, truncated])
                rewards = [g[3] for g in group]
                mean = sum(rewards) / n
                std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / n)
                zero_variance = n > 1 and len(set(rewards)) == 1
                for k, (correct, formatted, penalty, reward, length, truncated) in enumerate(group):
                    roll = rng.random()
                    status = "failed" if roll < 0.01 else "expired" if roll < 0.02 else "filtered" if zero_variance else "completed"
                    answer = rng.randint(1, 999)
                    yield (
                        step, split, f"{step}-{split}-{p}-{k}", f"{step}-{split}-{p}", index, sources[index % 10], status,
                        "length" if truncated else "stop", None if status == "failed" else reward,
                        {"correct": correct, "format": formatted, "length_penalty": penalty},
                        (reward - mean) / (std + 1e-6) if n > 1 else 0.0,
                        60 + index % 40, length, stale, zero_variance,
                        prompt_texts[index], f"{rng.choice(pool)} #### {answer}", f"#### {answer}",
                        f"response answer: {answer}; label: {answer} -> {'match' if correct == 1 else 'no match'}", [],
                    )
                    produced += 1


COLUMNS = (
    "step", "split", "uid", "group_id", "prompt_index", "data_source", "status", "finish_reason", "reward",
    "reward_components", "advantage", "prompt_len", "response_len", "staleness", "zero_variance",
    "prompt", "response", "label", "explanation", "tokens",
)


def build_run(total: int, rebuild: bool):
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.utils import timezone

    from rlweb.review.copy import copy_rows
    from rlweb.runs.models import Run, Trajectory

    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench")
    run = Run.objects.filter(owner=user, name=RUN_NAME).first()
    if run and not rebuild and Trajectory.objects.filter(run=run).count() == total:
        print(f"reusing run #{run.pk} with {total:,} samples")
        return user, run
    if run:
        print(f"deleting run #{run.pk} ...", flush=True)
        run.delete()
    run = Run.objects.create(owner=user, name=RUN_NAME, config={}, status="completed")
    started = time.perf_counter()
    now = timezone.now()
    with transaction.atomic():
        written = copy_rows(
            Trajectory, ("run_id", "created_at", *COLUMNS), ((run.pk, now, *row) for row in rows(total))
        )
    copied = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE runs_trajectory")
    print(f"wrote {written:,} samples in {copied:.0f} s (COPY, with every index in place), analyzed in {time.perf_counter() - started - copied:.0f} s")
    Run.objects.filter(pk=run.pk).update(current_step=Trajectory.objects.filter(run=run).order_by("-step").values_list("step", flat=True).first())
    return user, run


# --- measuring ---------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def measure(user, run, repeat: int, only: list[str] | None = None) -> dict:
    from django.test import Client

    client = Client(SERVER_NAME="localhost")  # an allowed host of the default settings
    client.force_login(user)
    base = f"/review/runs/{run.pk}/samples/"
    result = {}
    print(f"\n{'case':22} {'rows':>5} {'p50 ms':>8} {'p95 ms':>8}  query")
    for name, query in CASES.items():
        if only and name not in only:
            continue
        url = base + ("?" + query if query else "")
        response = client.get(url)  # warm-up
        assert response.status_code == 200, (url, response.status_code)
        html = response.content.decode()
        shown = html.count("<tr data-id=")
        partial = 'id="scan-note"' in html  # stopped at the scan bound of unindexed filters
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200
        p50, p95 = statistics.median(times), percentile(times, 0.95)
        result[name] = (shown, p50, p95)
        note = "  (bounded scan: no more rows within it)" if partial else ""
        print(f"{name:22} {shown:5d} {p50:8.1f} {p95:8.1f}  {query}{note}", flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rebuild", action="store_true", help="write the run again even if it is there")
    parser.add_argument("--cases", nargs="*", choices=list(CASES), help="measure only these cases")
    args = parser.parse_args()
    django_setup()
    user, run = build_run(args.rows, args.rebuild)
    result = measure(user, run, args.repeat, args.cases)
    worst = max(p95 for _, _, p95 in result.values())
    out = {"bench": "samples", "rows": args.rows, "repeat": args.repeat, "p95_ms": round(worst, 1)}
    out.update({f"{name}_ms": round(p95, 1) for name, (_, _, p95) in result.items()})
    emit(out)


if __name__ == "__main__":
    main()
