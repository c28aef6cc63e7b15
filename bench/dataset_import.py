"""Rows per second of a dataset import, against a plain COPY of the same rows (the physical limit).

    DATABASE_URL=postgres://... python bench/dataset_import.py [--rows 1000000] [--repeat 1]

Both sides put the same rows into the same table (DatasetRow, with its indexes) in one
transaction, on the database DATABASE_URL names (Postgres; run migrations first):
- ours: `import_dataset()` on a JSONL file: read, parse, validate every row, find duplicates,
  summarize fields, assign splits, COPY. Timed from the call to the commit.
- copy: the same rows already converted to COPY text (conversion not timed), sent with
  `COPY datasetrow FROM STDIN` in 1 MiB chunks: no parsing or checking at all. Timed from the
  first byte to the commit.
With --repeat > 1 the sides alternate and the median of each is used (the machine may be shared).
The benchmark creates a throw-away user and deletes it (and its datasets) at the end.

The last line is JSON: {"bench": "dataset_import", "ours_rows_s", "copy_rows_s", "ratio", ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid

from _common import ensure_database, REPO_ROOT, emit

sys.path.insert(0, str(REPO_ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlweb.settings")


def write_rows(path: str, n: int, seed: int = 0) -> None:
    """GSM8K-like rows: a question, a numeric answer, a data source and two extra fields."""
    rng = random.Random(seed)
    sources = ("gsm8k", "arith", "math")
    with open(path, "w", encoding="utf-8") as out:
        for i in range(n):
            a, b = rng.randint(10, 99999), rng.randint(10, 99999)
            row = {
                "prompt": f"Question {i}: a shop sells {a} apples and {b} pears. How many fruits are there in total?",
                "answer": str(a + b),
                "data_source": sources[i % 3],
                "id": f"q-{i}",
                "level": rng.randint(1, 5),
            }
            out.write(json.dumps(row) + "\n")


def copy_text(jsonl_path: str, copy_path: str) -> None:
    """The rows as COPY text lines with a placeholder dataset id (not timed)."""
    from rlweb.datasets.sinks import _copy_escape

    with open(jsonl_path, "rb") as src, open(copy_path, "w", encoding="utf-8") as out:
        for index, line in enumerate(src):
            row = json.loads(line)
            prompt, answer, source = row.pop("prompt"), row.pop("answer"), row.pop("data_source")
            extra = json.dumps(row, ensure_ascii=False).replace("\\", "\\\\")
            out.write(f"@\t{index}\ttrain\t{_copy_escape(prompt)}\t\\N\t{_copy_escape(answer)}\t{_copy_escape(source)}\t{extra}\n")


def time_ours(owner, path: str) -> tuple[float, int]:
    from rlweb.datasets.services import import_dataset

    started = time.perf_counter()
    dataset = import_dataset(owner, f"ours-{uuid.uuid4().hex[:8]}", path)
    return time.perf_counter() - started, dataset.row_count


def time_copy(owner, copy_path: str) -> tuple[float, int]:
    from django.db import connection, transaction

    from rlweb.datasets.models import Dataset, DatasetRow
    from rlweb.datasets.sinks import COPY_COLUMNS

    dataset = Dataset.objects.create(owner=owner, name=f"copy-{uuid.uuid4().hex[:8]}", status=Dataset.Status.READY)
    prefix = str(dataset.pk).encode()
    table = connection.ops.quote_name(DatasetRow._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(c) for c in COPY_COLUMNS)
    with open(copy_path, "rb") as src:
        data = src.read().replace(b"@\t", prefix + b"\t")  # placeholders only start lines
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            view = memoryview(data)
            for start in range(0, len(data), 1 << 20):
                copy.write(view[start : start + (1 << 20)])
    elapsed = time.perf_counter() - started
    return elapsed, DatasetRow.objects.filter(dataset=dataset).count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    import django

    ensure_database()

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection

    if connection.vendor != "postgresql":
        sys.exit("bench/dataset_import.py needs Postgres: set DATABASE_URL")
    settings.UPLOAD_MAX_BYTES = max(settings.UPLOAD_MAX_BYTES, 1 << 40)
    from rlweb.datasets import jsoncodec
    from rlweb.datasets.models import Dataset

    owner = get_user_model().objects.create_user(f"bench-{uuid.uuid4().hex[:8]}")
    ours_s: list[float] = []
    copy_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="rlweb-bench-") as tmp:
        jsonl, copy_file = os.path.join(tmp, "rows.jsonl"), os.path.join(tmp, "rows.copy")
        write_rows(jsonl, args.rows)
        copy_text(jsonl, copy_file)
        size = os.path.getsize(jsonl)
        try:
            for _ in range(args.repeat):
                seconds, count = time_copy(owner, copy_file)
                assert count == args.rows, count
                copy_s.append(seconds)
                print(f"copy: {seconds:.2f} s", flush=True)
                seconds, count = time_ours(owner, jsonl)
                assert count == args.rows, count
                ours_s.append(seconds)
                print(f"ours: {seconds:.2f} s", flush=True)
        finally:
            Dataset.objects.filter(owner=owner).delete()  # rows go in one DELETE each
            owner.delete()
    ours, copy = statistics.median(ours_s), statistics.median(copy_s)
    ours_rate, copy_rate = args.rows / ours, args.rows / copy
    print(f"rows: {args.rows:,} ({size / 2**20:.1f} MiB of JSONL), repeats: {args.repeat}, json: {'orjson' if jsoncodec.FAST else 'stdlib'}")
    print(f"{'side':<8}{'seconds':>10}{'rows/s':>12}")
    print(f"{'ours':<8}{ours:>10.2f}{ours_rate:>12,.0f}")
    print(f"{'copy':<8}{copy:>10.2f}{copy_rate:>12,.0f}")
    print(f"ratio (ours / copy rows/s): {ours_rate / copy_rate:.2f}")
    emit(
        {
            "bench": "dataset_import",
            "rows": args.rows,
            "ours_rows_s": round(ours_rate),
            "copy_rows_s": round(copy_rate),
            "ratio": round(ours_rate / copy_rate, 3),
            "ours_s": [round(s, 3) for s in ours_s],
            "copy_s": [round(s, 3) for s in copy_s],
            "json": "orjson" if jsoncodec.FAST else "stdlib",
        }
    )


if __name__ == "__main__":
    main()
