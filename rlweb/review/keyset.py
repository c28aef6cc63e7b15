"""Keyset pages over samples: sort orders, cursors, "rows after this one" and scan windows.

Every sort order is (column, ..., id) in one direction, with NULL the greatest value both ways
(Postgres' own default): the order of a plain b-tree index on (run_id, column, ..., id) read
forwards or backwards, so that a page is an index range scan (migration 0002 has the indexes).
A cursor is the sort values of a row, so "the page after" costs the same wherever it is.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from django.db.models import F, Q, QuerySet


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


def order_by(option: SortOption, descending: bool) -> list:
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


def after_row(option: SortOption, descending: bool, values: list) -> Q:
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


def window_end(qs: QuerySet, option: SortOption, descending: bool, size: int) -> list | None:
    """Sort values of the size-th sample of `qs` in page order; None if there are fewer."""
    last = list(qs.order_by(*order_by(option, descending)).values_list(*option.columns)[size - 1 : size])
    return list(last[0]) if last else None


def up_to(option: SortOption, descending: bool, last: list) -> Q:
    """From the top of the order down to and including the sample with sort values `last`."""
    return after_row(option, not descending, last) | Q(id=last[-1])


def window_rows(qs: QuerySet, option: SortOption, descending: bool, limit: int, narrow, size: int) -> tuple[list, list | None]:
    order = order_by(option, descending)
    last = window_end(qs, option, descending, size)
    if last is None:  # fewer samples than the window: it holds them all
        return list(narrow(qs).order_by(*order)[:limit]), None
    rows = list(narrow(qs.filter(up_to(option, descending, last))).order_by(*order)[:limit])
    return (rows, None) if len(rows) >= limit else (rows, last)
