"""Shared bits of the benchmarks in bench/: each prints a human table, then ends with exactly one
line of JSON (the machine-readable result) so scripts can `tail -n 1` it."""

from __future__ import annotations

import json
import logging
import os
import statistics
import sys
from pathlib import Path

# Benchmarks run as scripts (`python bench/x.py`): make the repository importable.
REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def setup(threads: int) -> None:
    """Quiet logs and a fixed thread count, set before torch does any work."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import torch

    torch.set_num_threads(threads)


def steady(values: list[float], skip_first: int = 1) -> tuple[float, float]:
    """(median, mean) of per-step times after the first step(s), which pay one-off warm-up
    costs. The median is what ratios use: on a shared machine a neighbour's burst inflates a few
    steps of whichever side happens to run then, and the median is robust to that."""
    kept = values[skip_first:] if len(values) > skip_first else values
    if not kept:
        return float("nan"), float("nan")
    return statistics.median(kept), statistics.fmean(kept)


def emit(result: dict) -> None:
    """The last line of a benchmark's output: one JSON object."""
    sys.stdout.flush()
    print(json.dumps(result, sort_keys=False), flush=True)


def ensure_database() -> None:
    """Create the Postgres database DATABASE_URL names if it does not exist yet, so that a
    benchmark runs on a fresh server with a scratch database name (it migrates it itself)."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        return
    from urllib.parse import urlsplit, urlunsplit

    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            print(f"created database {name}", flush=True)
