"""A million-row JSONL import on Postgres, within the suite's budget; the rate is recorded."""

import logging
import time

import pytest
from django.db import connection

from rlweb.datasets.models import DatasetRow
from rlweb.datasets.services import import_dataset

logger = logging.getLogger(__name__)
ROWS = 1_000_000


def write_rows(path, n: int) -> None:
    # f-strings rather than json.dumps: writing the file should not dominate the test's time.
    with open(path, "w", encoding="utf-8") as out:
        for start in range(0, n, 10_000):
            out.write("".join(
                f'{{"prompt": "Question {i}: what is {i % 977} + {i % 313}?", "answer": "{i % 977 + i % 313}", "data_source": "gen{i % 4}", "id": {i}}}\n'
                for i in range(start, min(n, start + 10_000))
            ))


@pytest.mark.slow
@pytest.mark.django_db
def test_a_million_rows_import_in_one_transaction_and_the_rate_is_recorded(alice, tmp_path, record_property, settings):
    if connection.vendor != "postgresql":
        pytest.skip("the million-row import is measured on Postgres (COPY)")
    settings.UPLOAD_MAX_BYTES = 1 << 30
    path = tmp_path / "million.jsonl"
    write_rows(path, ROWS)
    progress = []
    started = time.perf_counter()
    dataset = import_dataset(alice, "million", str(path), eval_fraction=0.01, progress=lambda done, total: progress.append(done))
    seconds = time.perf_counter() - started
    rate = ROWS / seconds
    record_property("rows_per_second", round(rate))
    logger.warning("imported %d rows in %.1f s: %.0f rows/s", ROWS, seconds, rate)
    print(f"\nmillion-row import: {seconds:.1f} s, {rate:,.0f} rows/s")
    assert dataset.row_count == ROWS == DatasetRow.objects.filter(dataset=dataset).count()
    assert 5_000 < dataset.eval_count < 15_000
    assert dataset.field_summary["data_sources"] == {"gen0": 250_000, "gen1": 250_000, "gen2": 250_000, "gen3": 250_000}
    assert len(progress) > 100 and progress == sorted(progress)
    # Generous floor (the suite runs on 2 shared cores): a regression to per-row INSERTs or
    # per-row Python work that is 10x slower would fail it.
    assert rate > 15_000, f"{rate:.0f} rows/s"
