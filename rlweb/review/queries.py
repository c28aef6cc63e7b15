"""The sample browser's query: filters, sort order and keyset pagination over one run's samples.

Three rules keep the first page fast on a run with millions of samples:
- the list never selects the big text columns (LIST_FIELDS);
- there is no COUNT: pages are keyset pages ("after this row"), so any page costs one index range
  scan of about one page of rows, not a scan of everything before it;
- every sort order is (column, ..., id) in one direction, and the indexes of migration 0002 end
  with exactly those columns, so the database reads rows already in order.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field

from django.db import connection, transaction
from django.db.models import BooleanField, F, FloatField, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast

from rlweb.runs.models import Run, Trajectory

PAGE_SIZE = 50

# What a list row shows. Deliberately none of Trajectory.BIG_FIELDS.
LIST_FIELDS = (
    "id", "run_id", "step", "split", "uid", "group_id", "prompt_index", "data_source", "status",
    "finish_reason", "reward", "reward_components", "advantage", "prompt_len", "response_len",
    "staleness", "zero_variance",
)

# The stored tsvector of prompt + response (Postgres only; migration 0003 adds it and its GIN
# index). Its text search configuration is 'simple': words as written, lower-cased.
SEARCH_COLUMN = "review_search"


@dataclass(frozen=True)
class SortOption:
    key: str
    label: str
    columns: tuple[str, ...]  # the last is always "id": a total order for keyset pages
    nullable: bool = False  # only the first column may be NULL


SORTS = {
    s.key: s
    for s in (
        SortOption("step", "step", ("step", "id")),
        SortOption("id", "id", ("id",)),
        SortOption("reward", "reward", ("reward", "id"), nullable=True),
        SortOption("advantage", "advantage", ("advantage", "id"), nullable=True),
        SortOption("response_len", "response length", ("response_len", "id")),
        SortOption("staleness", "staleness", ("staleness", "id")),
        SortOption("status", "status", ("status", "step", "id")),
        SortOption("finish_reason", "finish reason", ("finish_reason", "step", "id")),
        SortOption("data_source", "data source", ("data_source", "step", "id")),
        SortOption("prompt_index", "prompt", ("prompt_index", "step", "id"), nullable=True),
    )
}
DEFAULT_SORT = "-step"  # newest first


def parse_sort(value: str | None) -> tuple[SortOption, bool]:
    """(option, descending) from "reward" / "-reward"; unknown values give the default."""
    value = (value or DEFAULT_SORT).strip()
    descending = value.startswith("-")
    option = SORTS.get(value.lstrip("-"))
    if option is None:
        return parse_sort(DEFAULT_SORT)
    return option, descending


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


def search_condition(text: str, indexable: bool = True):
    """A boolean expression: the sample's prompt or response contains the words of `text`.

    On Postgres the `@@` operator can use the GIN index; `indexable=False` writes the same test
    as a function call, which the planner cannot serve from the index (see _search_rows)."""
    if connection.vendor == "postgresql":
        column = f"{connection.ops.quote_name(Trajectory._meta.db_table)}.{connection.ops.quote_name(SEARCH_COLUMN)}"
        # websearch syntax: words (all must occur), "a phrase", -excluded, or.
        query = "websearch_to_tsquery('simple'::regconfig, %s)"
        sql = f"{column} @@ {query}" if indexable else f"ts_match_vq({column}, {query})"
        return RawSQL(sql, [text], output_field=BooleanField())
    # SQLite (embedded mode) has no such index: substring matches, fine at its scale, for the
    # same syntax (words all required, "a phrase", -excluded; "or" is not understood here).
    condition = Q()
    for term in _TERM.findall(text):
        excluded = term.startswith("-")
        term = term.lstrip("-").strip('"')
        if not term or term.lower() == "or":
            continue
        found = Q(prompt__icontains=term) | Q(response__icontains=term)
        condition &= ~found if excluded else found
    return condition


_TERM = re.compile(r'-?"[^"]*"|\S+')


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


def encode_cursor(values: list) -> str:
    return base64.urlsafe_b64encode(json.dumps(values, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(token: str | None, option: SortOption) -> list | None:
    """The row values a cursor token names, or None if it is absent or malformed."""
    if not token:
        return None
    try:
        values = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, TypeError):
        return None
    if not isinstance(values, list) or len(values) != len(option.columns):
        return None
    for n, value in enumerate(values):
        ok_null = value is None and n == 0 and option.nullable
        if not (ok_null or isinstance(value, (int, float, str)) and not isinstance(value, bool)):
            return None
    return values


def _order_by(option: SortOption, descending: bool) -> list:
    # NULLs sort as the greatest value both ways (Postgres' own default), so the order matches a
    # plain b-tree index read forwards or backwards.
    order = []
    for n, column in enumerate(option.columns):
        expr = F(column)
        if n == 0 and option.nullable:
            order.append(expr.desc(nulls_first=True) if descending else expr.asc(nulls_last=True))
        else:
            order.append(expr.desc() if descending else expr.asc())
    return order


def _after(option: SortOption, descending: bool, values: list) -> Q:
    """Rows strictly after `values` in the order (columns, descending), NULL being greatest."""
    beyond = "lt" if descending else "gt"

    def lexicographic(columns, vals) -> Q:
        # (c1 beyond v1) or (c1 = v1 and (c2 beyond v2 or (c2 = v2 and ...)))
        head, *rest = columns
        strictly = Q(**{f"{head}__{beyond}": vals[0]})
        if not rest:
            return strictly
        return strictly | (Q(**{head: vals[0]}) & lexicographic(rest, vals[1:]))

    first, *others = option.columns
    v1 = values[0]
    if option.nullable and v1 is None:
        tail = lexicographic(others, values[1:])
        same_null = Q(**{f"{first}__isnull": True}) & tail
        return same_null | Q(**{f"{first}__isnull": False}) if descending else same_null
    condition = lexicographic(option.columns, values)
    # A redundant bound on the first column lets the index start the scan at the cursor.
    bound = Q(**{f"{first}__{'lte' if descending else 'gte'}": v1})
    if option.nullable and not descending:
        return (bound & condition) | Q(**{f"{first}__isnull": True})
    return bound & condition


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
        rows, bound = _rows(qs.filter(_after(option, not descending, before_values)), option, not descending, size + 1, search, unindexed)
        full = len(rows) > size
        rows = rows[:size][::-1]
        next_cursor = cursor(rows[-1]) if rows else None
        prev_cursor = encode_cursor(bound) if bound else (cursor(rows[0]) if full else None)
    else:
        if after_values is not None:
            qs = qs.filter(_after(option, descending, after_values))
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
    order = _order_by(option, descending)
    postgres = connection.vendor == "postgresql"
    if unindexed is not None:
        def narrow(q):
            q = unindexed(q)
            return q.filter(search_condition(search, indexable=False)) if search else q

        return _window_rows(qs, option, descending, limit, narrow, SCAN_WINDOW)
    if not search:
        return list(qs.order_by(*order)[:limit]), None
    if not postgres:
        return list(qs.filter(search_condition(search)).order_by(*order)[:limit]), None
    return _search_rows(qs, option, descending, limit, search), None


def _window_end(qs: QuerySet, option: SortOption, descending: bool, size: int) -> list | None:
    """Sort values of the size-th sample of `qs` in page order; None if there are fewer."""
    last = list(qs.order_by(*_order_by(option, descending)).values_list(*option.columns)[size - 1 : size])
    return list(last[0]) if last else None


def _up_to(option: SortOption, descending: bool, last: list) -> Q:
    """From the top of the order down to and including the sample with sort values `last`."""
    return _after(option, not descending, last) | Q(id=last[-1])


def _window_rows(qs: QuerySet, option: SortOption, descending: bool, limit: int, narrow, size: int) -> tuple[list, list | None]:
    order = _order_by(option, descending)
    last = _window_end(qs, option, descending, size)
    if last is None:  # fewer samples than the window: it holds them all
        return list(narrow(qs).order_by(*order)[:limit]), None
    rows = list(narrow(qs.filter(_up_to(option, descending, last))).order_by(*order)[:limit])
    return (rows, None) if len(rows) >= limit else (rows, last)


# Text search pages: how many samples (in page order) to test before asking the index, and how
# many matches among them make the words "common" (about 0.4%: below that, fetching and sorting
# every match costs less than walking past the samples that do not match, on a million samples).
SEARCH_WINDOW = 2000
COMMON_MATCHES = 8


def _search_rows(qs: QuerySet, option: SortOption, descending: bool, limit: int, search: str) -> list:
    """The first `limit` samples of `qs` in page order that match `search`, chosen so that
    neither common nor rare words make the first page slow.

    The GIN index finds matching samples but cannot give them in page order: the database must
    fetch and sort every match, fine for a rare word, slow for one in 3% of a million samples
    (30,000 rows). Walking the samples in page order and testing each is fast for common words
    and slow for rare ones. The planner picks between the two by its estimate of how many samples
    match, and its estimates of phrases ("let me check") are far off. So: walk the first
    SEARCH_WINDOW samples in page order, testing each in a form the index cannot serve; if that
    yields the page, done. Otherwise the matches seen there say how common the words are in this
    run: common, walk on in page order; rare, let the index find them."""
    order = _order_by(option, descending)
    walk = search_condition(search, indexable=False)
    rows, bound = _window_rows(qs, option, descending, limit, lambda q: q.filter(walk), SEARCH_WINDOW)
    if bound is None:
        return rows
    if len(rows) >= COMMON_MATCHES:
        return list(qs.filter(walk).order_by(*order)[:limit])
    # Rare here. The planner would still walk the run: it estimates a word it has no statistics
    # for at 0.5% of the samples. Index scans off for this one statement leave it the GIN
    # bitmap (then a sort of the few matches).
    probe = _rare_words_query(search)
    condition = search_condition(search) if probe is None else (_probe_condition(probe) & walk)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_indexscan = off")
        return list(qs.filter(condition).order_by(*order)[:limit])


# Words in more than this fraction of samples ("the", "answer") are left out of the index probe.
FREQUENT_WORD = 0.05
_frequent_cache: dict = {"at": -1e9, "words": frozenset()}
FREQUENT_CACHE_SECONDS = 600


def frequent_words() -> frozenset:
    """Words in more than FREQUENT_WORD of all samples, from the planner's statistics of the
    search column (read again every few minutes)."""
    import time

    now = time.monotonic()
    if now - _frequent_cache["at"] > FREQUENT_CACHE_SECONDS:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT e FROM pg_stats, unnest(most_common_elems::text::text[], most_common_elem_freqs) AS u(e, f) "
                "WHERE tablename = %s AND attname = %s AND f > %s",
                [Trajectory._meta.db_table, SEARCH_COLUMN, FREQUENT_WORD],
            )
            _frequent_cache.update(at=now, words=frozenset(row[0] for row in cursor.fetchall()))
    return _frequent_cache["words"]


_LEXEME = re.compile(r"'((?:[^']|'')*)'")


def _rare_words_query(search: str) -> str | None:
    """A tsquery of the query's rare words, all required, for the GIN probe; None when the
    whole query should probe the index (no frequent word in it, or OR / NOT in it).

    GIN answers 'problem <-> 1234' by intersecting the posting lists of both words; when
    'problem' is in every sample, that costs ~100 ms on a million samples, while '1234' alone
    costs 5 ms. The full query then checks the few rows the rare words find."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT websearch_to_tsquery('simple'::regconfig, %s)::text", [search])
        text = cursor.fetchone()[0]
    if not text or "|" in text or "!" in text:
        return None
    words = [word.replace("''", "'") for word in _LEXEME.findall(text)]
    frequent = frequent_words()
    rare = [word for word in words if word not in frequent]
    if not rare or len(rare) == len(words):
        return None
    return " & ".join("'" + word.replace("\\", "\\\\").replace("'", "''") + "'" for word in dict.fromkeys(rare))


def _probe_condition(probe: str):
    column = f"{connection.ops.quote_name(Trajectory._meta.db_table)}.{connection.ops.quote_name(SEARCH_COLUMN)}"
    return RawSQL(f"{column} @@ to_tsquery('simple'::regconfig, %s)", [probe], output_field=BooleanField())


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
