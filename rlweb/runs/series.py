"""Chart series, downsampled on the server (DESIGN §6).

A chart asks for one named series of a run in a step window. When the window holds more steps
than the chart can show, the window is cut into equal step buckets and each bucket contributes
its first, last, lowest and highest point (at most 4, fewer when they coincide): spikes and
dips survive at any zoom level, the line keeps its ends, and the result is deterministic — never
a random sample. Zooming asks again with the narrower window, which returns the raw points once
they fit.

On Postgres the buckets are aggregated in SQL over the (run, name, step) unique index; elsewhere
(SQLite, embedded mode) the same algorithm runs in Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection

from .models import MetricPoint

DEFAULT_MAX_POINTS = 2000
MIN_MAX_POINTS = 50
MAX_MAX_POINTS = 10_000
POINTS_PER_BUCKET = 4  # first, last, min, max


@dataclass
class Series:
    name: str
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    companions: dict[str, list[float | None]] = field(default_factory=dict)
    downsampled: bool = False
    extent: tuple[int, int] | None = None  # first and last step of the whole series

    def as_json(self) -> dict:
        return {
            "name": self.name,
            "steps": self.steps,
            "values": self.values,
            "walls": self.walls,
            "companions": self.companions,
            "downsampled": self.downsampled,
            "extent": list(self.extent) if self.extent else None,
        }


def _base(run_id: int, name: str, until_id: int | None):
    qs = MetricPoint.objects.filter(run_id=run_id, name=name)
    if until_id is not None:
        qs = qs.filter(id__lte=until_id)
    return qs


def extent(run_id: int, name: str, until_id: int | None = None) -> tuple[int, int] | None:
    qs = _base(run_id, name, until_id).order_by("step").values_list("step", flat=True)
    first = qs.first()
    if first is None:
        return None
    return first, qs.last()


def get_series(
    run_id: int,
    name: str,
    lo: int | None = None,
    hi: int | None = None,
    max_points: int = DEFAULT_MAX_POINTS,
    until_id: int | None = None,
    companions: tuple[str, ...] = (),
    downsample: bool = True,
) -> Series:
    """Points of `name` with lo <= step <= hi (None: open), at most `max_points` of them unless
    `downsample` is False. `until_id` limits to rows with id <= it (what a live page's cursor
    has covered, so that the stream adds exactly the rest). Companion series (e.g. reward/std
    for the band around reward/mean) are read at the chosen steps."""
    max_points = max(MIN_MAX_POINTS, min(MAX_MAX_POINTS, int(max_points)))
    out = Series(name=name, extent=extent(run_id, name, until_id))
    if out.extent is None:
        out.companions = {c: [] for c in companions}
        return out
    lo = out.extent[0] if lo is None else max(lo, out.extent[0])
    hi = out.extent[1] if hi is None else min(hi, out.extent[1])
    if hi < lo:
        out.companions = {c: [] for c in companions}
        return out
    width = hi - lo + 1
    if not downsample or width <= max_points:
        # One point per step at most (unique (run, name, step)): the raw window fits.
        rows = _base(run_id, name, until_id).filter(step__gte=lo, step__lte=hi).order_by("step").values_list("step", "value", "wall_time")
        rows = list(rows)
    else:
        buckets = max(1, max_points // POINTS_PER_BUCKET)
        if connection.vendor == "postgresql":
            rows = _bucketed_sql(run_id, name, lo, hi, buckets, until_id)
        else:
            raw = _base(run_id, name, until_id).filter(step__gte=lo, step__lte=hi).order_by("step").values_list("step", "value", "wall_time")
            rows = downsample_points(list(raw), lo, hi, buckets)
        out.downsampled = True
    out.steps = [int(r[0]) for r in rows]
    out.values = [r[1] for r in rows]
    out.walls = [r[2] for r in rows]
    for companion in companions:
        out.companions[companion] = _values_at(run_id, companion, out.steps, lo, hi, until_id)
    return out


def _bucket(step: int, lo: int, width: int, buckets: int) -> int:
    return (step - lo) * buckets // width


def downsample_points(rows: list[tuple[int, float, float]], lo: int, hi: int, buckets: int) -> list[tuple[int, float, float]]:
    """First, last, min and max (step, value, wall) of each bucket of rows sorted by step."""
    width = hi - lo + 1
    keep: dict[int, tuple[int, float, float]] = {}
    current, first, last, low, high = None, None, None, None, None

    def flush():
        for point in (first, last, low, high):
            keep[point[0]] = point

    for row in rows:
        b = _bucket(row[0], lo, width, buckets)
        if b != current:
            if current is not None:
                flush()
            current, first, last, low, high = b, row, row, row, row
            continue
        last = row
        if row[1] < low[1]:
            low = row
        if row[1] > high[1]:
            high = row
    if current is not None:
        flush()
    return [keep[s] for s in sorted(keep)]


# Per bucket: its first and last step, and the steps of its lowest and highest value. Plain
# min/max for the steps and 2-element arrays for "value with its step" keep the per-row work
# small; the chosen rows' values and wall times are then read by index (<= 4 per bucket).
_BUCKET_SQL = """
SELECT min(step), max(step), min(ARRAY[value, step::float8]), max(ARRAY[value, step::float8])
FROM runs_metricpoint
WHERE run_id = %(run)s AND name = %(name)s AND step BETWEEN %(lo)s AND %(hi)s {until}
GROUP BY ((step - %(lo)s)::bigint * %(buckets)s) / %(width)s
"""
_ROWS_SQL = """
SELECT step, value, wall_time FROM runs_metricpoint
WHERE run_id = %(run)s AND name = %(name)s AND step = ANY(%(steps)s) {until}
ORDER BY step
"""


def _bucketed_sql(run_id, name, lo, hi, buckets, until_id):
    params = {"run": run_id, "name": name, "lo": lo, "hi": hi, "buckets": buckets, "width": hi - lo + 1}
    until = ""
    if until_id is not None:
        until = "AND id <= %(until)s"
        params["until"] = until_id
    with connection.cursor() as cursor:
        cursor.execute(_BUCKET_SQL.format(until=until), params)
        steps: set[int] = set()
        for first, last, low, high in cursor.fetchall():
            steps.update((int(first), int(last), int(low[1]), int(high[1])))
        params["steps"] = sorted(steps)
        cursor.execute(_ROWS_SQL.format(until=until), params)
        return [(int(s), v, w) for s, v, w in cursor.fetchall()]


def _values_at(run_id, name, steps, lo, hi, until_id) -> list[float | None]:
    if not steps:
        return []
    if connection.vendor == "postgresql":
        # One array parameter (not thousands of IN-list parameters): index probes by step.
        sql = "SELECT step, value FROM runs_metricpoint WHERE run_id = %s AND name = %s AND step = ANY(%s)"
        params = [run_id, name, steps]
        if until_id is not None:
            sql += " AND id <= %s"
            params.append(until_id)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            by_step = dict(cursor.fetchall())
    else:
        qs = _base(run_id, name, until_id).filter(step__gte=lo, step__lte=hi)
        by_step = dict(qs.values_list("step", "value"))
    return [by_step.get(s) for s in steps]


def metric_names(run_id: int) -> list[str]:
    """Names of the run's series. On Postgres a loose index scan (one index probe per name),
    which stays fast with millions of points."""
    if connection.vendor == "postgresql":
        sql = """
        WITH RECURSIVE names(name) AS (
            (SELECT name FROM runs_metricpoint WHERE run_id = %(run)s ORDER BY name LIMIT 1)
            UNION ALL
            SELECT (SELECT m.name FROM runs_metricpoint m WHERE m.run_id = %(run)s AND m.name > names.name ORDER BY m.name LIMIT 1)
            FROM names WHERE names.name IS NOT NULL
        )
        SELECT name FROM names WHERE name IS NOT NULL
        """
        with connection.cursor() as cursor:
            cursor.execute(sql, {"run": run_id})
            return [r[0] for r in cursor.fetchall()]
    return list(MetricPoint.objects.filter(run_id=run_id).order_by("name").values_list("name", flat=True).distinct())
