"""Full-text search over samples' prompt and response, and how a page of matches is found fast.

On Postgres the words of each sample are stored in a tsvector column with a GIN index
(migration 0003); on SQLite (embedded mode) the search is a substring match.
"""

from __future__ import annotations

import re
import time

from django.db import connection, transaction
from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL

from rlweb.runs.models import Trajectory

from .keyset import SortOption, order_by, window_rows

# The stored tsvector of prompt + response (Postgres only; migration 0003 adds it and its GIN
# index). Its text search configuration is 'simple': words as written, lower-cased.
SEARCH_COLUMN = "review_search"


def search_condition(text: str, indexable: bool = True):
    """A boolean expression: the sample's prompt or response contains the words of `text`.

    On Postgres the `@@` operator can use the GIN index; `indexable=False` writes the same test
    as a function call, which the planner cannot serve from the index (see search_rows)."""
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


# Text search pages: how many samples (in page order) to test before asking the index, and how
# many matches among them make the words "common" (about 0.4%: below that, fetching and sorting
# every match costs less than walking past the samples that do not match, on a million samples).
SEARCH_WINDOW = 2000
COMMON_MATCHES = 8


def search_rows(qs: QuerySet, option: SortOption, descending: bool, limit: int, search: str) -> list:
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
    order = order_by(option, descending)
    walk = search_condition(search, indexable=False)
    rows, bound = window_rows(qs, option, descending, limit, lambda q: q.filter(walk), SEARCH_WINDOW)
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
