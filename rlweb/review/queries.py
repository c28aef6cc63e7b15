"""The sample browser's query: filters, sort order and keyset pagination over one run's samples.

What keeps the first page fast on a run with millions of samples:
- the list never selects the big text columns (LIST_FIELDS);
- there is no COUNT: pages are keyset pages (keyset.py), so any page costs about one index range
  scan of one page of rows, not a scan of everything before it;
- every sort order has an index that gives rows already in order (migration 0002);
- text search and reward-component filters, which no index can give in page order, find their
  page by bounded walks in page order first (search.py, SCAN_WINDOW).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection
from django.db.models import FloatField, Q, QuerySet
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast

from rlweb.runs.models import Run, Trajectory

from .keyset import DEFAULT_SORT, SORTS, SortOption, after_row, decode_cursor, encode_cursor, order_by, parse_sort, window_rows  # noqa: F401  (SORTS, DEFAULT_SORT: part of this module's interface)
from .search import search_condition, search_rows

PAGE_SIZE = 50

# What a list row shows. Deliberately none of Trajectory.BIG_FIELDS.
LIST_FIELDS = (
    "id", "run_id", "step", "split", "uid", "group_id", "prompt_index", "data_source", "status",
    "finish_reason", "reward", "reward_components", "advantage", "prompt_len", "response_len",
    "staleness", "zero_variance",
)


@dataclass
class SampleFilters:
    """Cleaned filter values (see forms.SampleFilterForm); empty fields are None / empty."""

    split: str = ""
    step_min: int | None = None
    step_max: int | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    components: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    statuses: list[str] = field(default_factory=list)
    finish_reasons: list[str] = field(default_factory=list)
    data_sources: list[str] = field(default_factory=list)
    staleness_min: int | None = None
    staleness_max: int | None = None
    zero_variance: bool | None = None
    length_min: int | None = None
    length_max: int | None = None
    search: str = ""
    flagged: str = ""  # "" = any sample, "any" = flagged at all, or one flag kind

    @property
    def active(self) -> bool:
        return self != SampleFilters()


def _range(q: Q, expr, low, high) -> Q:
    if low is not None:
        q &= Q(**{f"{expr}__gte": low})
    if high is not None:
        q &= Q(**{f"{expr}__lte": high})
    return q


def filter_samples(qs: QuerySet, filters: SampleFilters, with_search: bool = True, with_components: bool = True) -> QuerySet:
    """`qs` narrowed by `filters`. sample_page leaves the text search and the reward components
    out (`with_search=False`, `with_components=False`): it pages through them its own way."""
    q = Q()
    if filters.split:
        q &= Q(split=filters.split)
    q = _range(q, "step", filters.step_min, filters.step_max)
    q = _range(q, "reward", filters.reward_min, filters.reward_max)
    q = _range(q, "staleness", filters.staleness_min, filters.staleness_max)
    q = _range(q, "response_len", filters.length_min, filters.length_max)
    if filters.statuses:
        q &= Q(status__in=filters.statuses)
    if filters.finish_reasons:
        q &= Q(finish_reason__in=filters.finish_reasons)
    if filters.data_sources:
        q &= Q(data_source__in=filters.data_sources)
    if filters.zero_variance is not None:
        q &= Q(zero_variance=filters.zero_variance)
    qs = qs.filter(q)
    if with_components:
        qs = filter_components(qs, filters.components)
    if filters.search and with_search:
        qs = qs.filter(search_condition(filters.search))
    if filters.flagged:
        from .models import SampleFlag

        flags = SampleFlag.objects.all()
        if filters.flagged != "any":
            flags = flags.filter(kind=filters.flagged)
        qs = qs.filter(id__in=flags.values("trajectory_id"))
    return qs


def filter_components(qs: QuerySet, components: dict[str, tuple]) -> QuerySet:
    """Reward component ranges: {name: (low, high)}, either bound None. No index serves them
    (components are free-form JSON keys)."""
    for n, (name, (low, high)) in enumerate(sorted(components.items())):
        if low is None and high is None:
            continue
        alias = f"_component_{n}"
        qs = qs.alias(**{alias: Cast(KeyTextTransform(name, "reward_components"), FloatField())})
        qs = qs.filter(_range(Q(), alias, low, high))
    return qs


def run_samples(run: Run) -> QuerySet:
    return Trajectory.objects.filter(run=run)


# --- keyset pagination --------------------------------------------------------------------


@dataclass
class Page:
    rows: list
    next_cursor: str | None
    prev_cursor: str | None
    sort: str
    option: SortOption = None
    descending: bool = True
    # Set when the page stopped at its scan bound before it was full (see SCAN_WINDOW): how many
    # samples it looked at. The next cursor then continues after the last one looked at.
    scanned: int | None = None


def sample_page(run: Run, filters: SampleFilters, sort=None, after=None, before=None, size: int = PAGE_SIZE) -> Page:
    """The sample browser's page: `filters` over the run's samples, the fast way for each kind."""
    qs = filter_samples(run_samples(run), filters, with_search=False, with_components=False)
    unindexed = None
    if any(low is not None or high is not None for low, high in filters.components.values()):
        unindexed = lambda q: filter_components(q, filters.components)  # noqa: E731
    return page_of(qs, sort, after, before, size, search=filters.search, unindexed=unindexed)


def page_of(
    qs: QuerySet, sort: str | None = None, after: str | None = None, before: str | None = None, size: int = PAGE_SIZE,
    search: str = "", unindexed=None,
) -> Page:
    """One keyset page of `qs` (already filtered): the first page, the page after cursor
    `after`, or the page before cursor `before`. With `search`, only samples whose text matches
    it; `unindexed(qs) -> qs` applies filters no index serves, over at most SCAN_WINDOW samples
    (pass `qs` without either: filter_samples(..., with_search=False, with_components=False))."""
    option, descending = parse_sort(sort)
    sort_key = ("-" if descending else "") + option.key
    after_values = decode_cursor(after, option)
    before_values = None if after_values is not None else decode_cursor(before, option)
    qs = qs.only(*LIST_FIELDS)

    def cursor(row):
        return encode_cursor([getattr(row, column) for column in option.columns])

    if before_values is not None:
        # Walk backwards: the reverse order from the cursor, then put the rows back in order.
        rows, bound = _rows(qs.filter(after_row(option, not descending, before_values)), option, not descending, size + 1, search, unindexed)
        full = len(rows) > size
        rows = rows[:size][::-1]
        next_cursor = cursor(rows[-1]) if rows else None
        prev_cursor = encode_cursor(bound) if bound else (cursor(rows[0]) if full else None)
    else:
        if after_values is not None:
            qs = qs.filter(after_row(option, descending, after_values))
        rows, bound = _rows(qs, option, descending, size + 1, search, unindexed)
        full = len(rows) > size
        rows = rows[:size]
        next_cursor = encode_cursor(bound) if bound else (cursor(rows[-1]) if full else None)
        # (A page with no rows has no "previous" of its own: the cursor it came from may be a
        # row of the page before, which "before" it would leave out.)
        prev_cursor = cursor(rows[0]) if rows and after_values is not None else None

    return Page(
        rows=rows,
        next_cursor=next_cursor,
        prev_cursor=prev_cursor,
        sort=sort_key,
        option=option,
        descending=descending,
        scanned=SCAN_WINDOW if bound else None,
    )


# Filters that no index serves (reward components) are tested on at most this many samples per
# page: a filter that matches little or nothing would otherwise read the whole run (3.5 s on a
# million samples, measured) before answering. ~50 ms of reading a page.
SCAN_WINDOW = 20_000


def _rows(qs: QuerySet, option: SortOption, descending: bool, limit: int, search: str, unindexed) -> tuple[list, list | None]:
    """(rows, bound): up to `limit` rows in order, and the sort values of the last sample looked
    at when a scan window ran out before `limit` rows were found (else None)."""
    order = order_by(option, descending)
    postgres = connection.vendor == "postgresql"
    if unindexed is not None:
        def narrow(q):
            q = unindexed(q)
            return q.filter(search_condition(search, indexable=False)) if search else q

        return window_rows(qs, option, descending, limit, narrow, SCAN_WINDOW)
    if not search:
        return list(qs.order_by(*order)[:limit]), None
    if not postgres:
        return list(qs.filter(search_condition(search)).order_by(*order)[:limit]), None
    return search_rows(qs, option, descending, limit, search), None


def component_names(run: Run, recent: int = 500) -> list[str]:
    """Reward component names of the run, read from its most recent samples (a judger's
    components do not change within a run; reading all of a run's samples would be slow)."""
    names: set[str] = set()
    for components in Trajectory.objects.filter(run=run).order_by("-id").values_list("reward_components", flat=True)[:recent]:
        if isinstance(components, dict):
            names.update(str(k) for k in components)
    return sorted(names)


def distinct_values(run: Run, column: str, limit: int = 200) -> list[str]:
    """The distinct values of a small-vocabulary column (data source, status, finish reason) in
    the run. A loose index scan: one index probe per distinct value (the indexes of migration
    0002 lead with (run_id, column)), instead of reading all of the run's samples."""
    if column not in ("data_source", "status", "finish_reason", "split"):
        raise ValueError(f"not a small-vocabulary column: {column}")
    table = connection.ops.quote_name(Trajectory._meta.db_table)
    col = connection.ops.quote_name(column)
    sql = f"""
        WITH RECURSIVE vals(v) AS (
            SELECT MIN({col}) FROM {table} WHERE run_id = %s
            UNION ALL
            SELECT (SELECT MIN({col}) FROM {table} WHERE run_id = %s AND {col} > vals.v)
            FROM vals WHERE vals.v IS NOT NULL
        )
        SELECT v FROM vals WHERE v IS NOT NULL LIMIT %s
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [run.pk, run.pk, limit])
        return [row[0] for row in cursor.fetchall() if row[0]]
