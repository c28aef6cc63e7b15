"""Server-side downsampling of chart series (DESIGN §6): buckets keep first, last, min and max."""

import math

import pytest

from rlweb.runs.bulk import insert_ignore
from rlweb.runs.models import MetricPoint
from rlweb.runs.series import downsample_points, get_series, metric_names

pytestmark = pytest.mark.django_db


def wave(step: int) -> float:
    return math.sin(step / 37.0) + 0.001 * step


def store(run, name, steps, value=wave):
    insert_ignore(MetricPoint, [{"run_id": run.pk, "step": s, "name": name, "value": value(s), "wall_time": 1000.0 + s} for s in steps])


@pytest.fixture
def run(make_run):
    return make_run(status="running")


def test_a_window_that_fits_comes_back_raw(run):
    store(run, "kl", range(0, 500))
    series = get_series(run.pk, "kl", max_points=2000)
    assert not series.downsampled
    assert series.steps == list(range(0, 500))
    assert series.values == [wave(s) for s in range(500)] and series.walls[0] == 1000.0
    assert series.extent == (0, 499)


def test_a_long_series_is_cut_to_the_limit_keeping_ends_and_extremes(run):
    steps = range(0, 20_000)
    spike, dip = 12_345, 7_777
    store(run, "kl", steps, lambda s: 50.0 if s == spike else -50.0 if s == dip else wave(s))
    series = get_series(run.pk, "kl", max_points=1000)
    assert series.downsampled and len(series.steps) <= 1000
    assert series.steps[0] == 0 and series.steps[-1] == 19_999
    assert spike in series.steps and dip in series.steps  # a single-step spike survives
    assert max(series.values) == 50.0 and min(series.values) == -50.0
    assert series.steps == sorted(series.steps)
    # Deterministic: the same request gives the same points.
    assert get_series(run.pk, "kl", max_points=1000).steps == series.steps


def test_sql_and_python_downsampling_agree(run):
    steps = range(3, 10_003)
    store(run, "kl", steps)
    series = get_series(run.pk, "kl", max_points=400)
    rows = [(s, wave(s), 1000.0 + s) for s in steps]
    assert [r[0] for r in downsample_points(rows, 3, 10_002, 100)] == series.steps


def test_each_bucket_contributes_its_first_last_min_and_max(run):
    rows = [(s, v, 0.0) for s, v in enumerate([5, 1, 9, 3, 4, 8, 0, 6])]
    kept = downsample_points(rows, 0, 7, 2)  # buckets [0..3] and [4..7]
    assert [r[0] for r in kept] == list(range(8))  # 4 distinct points in each bucket
    rows = [(s, v, 0.0) for s, v in enumerate([5, 1, 9, 3, 2, 7, 4, 8, 0, 6])]
    kept = downsample_points(rows, 0, 9, 1)
    assert [r[0] for r in kept] == [0, 2, 8, 9]  # first, max (9 at step 2), min (0 at step 8), last


def test_zooming_in_returns_the_raw_points_of_the_window(run):
    store(run, "kl", range(0, 50_000))
    series = get_series(run.pk, "kl", lo=20_000, hi=20_999, max_points=2000)
    assert not series.downsampled and series.steps == list(range(20_000, 21_000))


def test_until_limits_to_rows_the_page_cursor_covers(run):
    store(run, "kl", range(0, 10))
    cursor = MetricPoint.objects.filter(run=run, step=4).values_list("id", flat=True).get()
    store(run, "kl", range(10, 20))
    assert get_series(run.pk, "kl", until_id=cursor).steps == [0, 1, 2, 3, 4]


def test_companions_are_read_at_the_chosen_steps(run):
    store(run, "reward/mean", range(0, 10_000))
    store(run, "reward/std", range(0, 10_000, 2), lambda s: s / 10)
    series = get_series(run.pk, "reward/mean", max_points=200, companions=("reward/std",))
    std = series.companions["reward/std"]
    assert len(std) == len(series.steps)
    assert all((v == s / 10) if s % 2 == 0 else v is None for s, v in zip(series.steps, std))


def test_an_unknown_series_is_empty(run):
    series = get_series(run.pk, "nope", companions=("x",))
    assert series.steps == [] and series.extent is None and series.companions == {"x": []}


def test_metric_names_lists_each_series_once(run):
    for name in ("kl", "reward/mean", "entropy"):
        store(run, name, range(0, 30))
    assert metric_names(run.pk) == ["entropy", "kl", "reward/mean"]


def test_the_series_endpoint_answers_the_owner_only(run, client, alice, bob):
    store(run, "kl", range(0, 5000))
    client.force_login(alice)
    data = client.get(f"/runs/{run.pk}/series/", {"name": "kl", "points": 500}).json()
    assert data["downsampled"] and len(data["steps"]) <= 500 and data["extent"] == [0, 4999]
    raw = client.get(f"/runs/{run.pk}/series/", {"name": "kl", "raw": 1}).json()
    assert len(raw["steps"]) == 5000
    assert client.get(f"/runs/{run.pk}/metrics/").json() == {"names": ["kl"]}
    client.force_login(bob)
    assert client.get(f"/runs/{run.pk}/series/", {"name": "kl"}).status_code == 404
    assert client.get(f"/runs/{run.pk}/metrics/").status_code == 404
