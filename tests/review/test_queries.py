"""The sample browser's filters, sorts and keyset pages, against real Postgres."""

import re

import pytest
from django.db import connection
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext

from rlweb.review.forms import filters_from_query
from rlweb.review.queries import SORTS, distinct_values, filter_samples, page_of, run_samples
from rlweb.runs.models import Trajectory

from .factories import make_run, make_sample

pytestmark = pytest.mark.django_db

# The stored tsvector, its GIN index and the planner's statistics exist on Postgres only (SQLite,
# the embedded mode, searches with substring matches).
postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="Postgres full-text search")


def ids(qs_or_rows):
    return sorted(row.id if hasattr(row, "id") else row for row in qs_or_rows)


def matching(run, query: str, **form_kwargs):
    _, filters = filters_from_query(QueryDict(query), **form_kwargs)
    return ids(filter_samples(run_samples(run), filters))


@pytest.fixture
def run(alice):
    return make_run(alice)


def test_it_filters_by_step_range(run):
    samples = [make_sample(run, step=s) for s in range(1, 6)]
    assert matching(run, "step_min=2&step_max=4") == ids(samples[1:4])


def test_it_filters_by_reward_range_and_status(run):
    low = make_sample(run, reward=0.0)
    high = make_sample(run, reward=1.0)
    failed = make_sample(run, reward=1.0, status="failed")
    assert matching(run, "reward_min=0.5") == ids([high, failed])
    assert matching(run, "reward_min=0.5&status=completed") == ids([high])
    assert matching(run, "status=completed&status=failed&reward_max=0.5") == ids([low])


def test_it_filters_by_each_reward_component(run):
    both = make_sample(run, reward_components={"correct": 1.0, "format": 1.0})
    only_format = make_sample(run, reward_components={"correct": 0.0, "format": 1.0})
    make_sample(run, reward_components={"correct": 0.0, "format": 0.0})
    components = ["correct", "format"]
    assert matching(run, "cmin.correct=1", components=components) == ids([both])
    assert matching(run, "cmin.format=0.5&cmax.correct=0.5", components=components) == ids([only_format])


def test_it_filters_by_finish_reason_data_source_staleness_zero_variance_and_length(run):
    truncated = make_sample(run, finish_reason="length", response_len=512)
    gsm = make_sample(run, data_source="gsm8k", staleness=2)
    flat = make_sample(run, zero_variance=True, response_len=40)
    assert matching(run, "finish_reason=length") == ids([truncated])
    assert matching(run, "data_source=gsm8k") == ids([gsm])
    assert matching(run, "staleness_min=1") == ids([gsm])
    assert matching(run, "zero_variance=yes") == ids([flat])
    assert flat.id not in matching(run, "zero_variance=no")
    assert matching(run, "len_min=30&len_max=100") == ids([flat])


def test_full_text_search_finds_a_word_in_the_prompt_or_the_response(run):
    in_response = make_sample(run, response="I cannot solve this, sorry.")
    in_prompt = make_sample(run, prompt="Sorry to ask: what is 3 + 4?", response="7")
    make_sample(run, response="The answer is 7.")
    assert matching(run, "q=sorry") == ids([in_response, in_prompt])
    assert matching(run, 'q="cannot solve"') == ids([in_response])
    assert matching(run, "q=sorry -cannot") == ids([in_prompt])


@postgres_only
def test_the_search_matches_the_stored_words_that_the_gin_index_covers(run):
    make_sample(run, response="hello world")
    _, filters = filters_from_query(QueryDict("q=hello"))
    sql = str(filter_samples(run_samples(run), filters).query)
    assert '"runs_trajectory"."review_search" @@ websearch_to_tsquery' in sql
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'review_traj_fts_idx'")
        assert "USING gin (review_search)" in cursor.fetchone()[0]
        cursor.execute("SELECT review_search::text FROM runs_trajectory")
        assert cursor.fetchone()[0] == "'2':3,4 'hello':5 'is':2 'what':1 'world':6"  # prompt "What is 2 + 2?" then response


def test_it_filters_flagged_samples(run, alice):
    from rlweb.review.services import add_flag

    flagged = make_sample(run)
    hacked = make_sample(run)
    make_sample(run)
    add_flag(flagged, alice, "judger_wrong", "41 is not 42")
    add_flag(hacked, alice, "reward_hacking")
    assert matching(run, "flagged=any") == ids([flagged, hacked])
    assert matching(run, "flagged=reward_hacking") == ids([hacked])


def test_an_invalid_filter_value_is_ignored_and_reported(run):
    sample = make_sample(run)
    form, filters = filters_from_query(QueryDict("reward_min=lots"))
    assert "reward_min" in form.errors
    assert ids(filter_samples(run_samples(run), filters)) == [sample.id]


def test_it_never_shows_another_runs_samples(run, alice):
    other = make_run(alice, name="other")
    make_sample(other)
    mine = make_sample(run)
    assert matching(run, "") == [mine.id]


def walk_pages(qs, sort, size):
    seen, after = [], None
    for _ in range(100):
        page = page_of(qs, sort, after=after, size=size)
        seen.extend(row.id for row in page.rows)
        if not page.next_cursor:
            return seen
        after = page.next_cursor
    raise AssertionError("pagination did not end")


@pytest.mark.parametrize("sort", [*SORTS, *(f"-{key}" for key in SORTS)])
def test_keyset_pages_visit_every_sample_once_in_order_for_every_sort(run, sort):
    rewards = [None, 0.0, 0.5, 1.0, None, 1.0, 0.0, 0.5, 1.0, 0.25, None]
    for n, reward in enumerate(rewards):
        make_sample(run, step=n % 4, reward=reward, advantage=None if reward is None else reward - 0.5,
                    response_len=(n * 7) % 5, staleness=n % 3, status=["completed", "failed"][n % 2],
                    finish_reason=["stop", "length"][n % 2], data_source=["a", "b", "c"][n % 3], prompt_index=n % 3)
    qs = run_samples(run)
    option = SORTS[sort.lstrip("-")]
    descending = sort.startswith("-")

    def key(row):
        # NULL is the greatest value in both directions.
        return tuple((value is None, value if value is not None else 0) for value in (getattr(row, c) for c in option.columns))

    expected = [row.id for row in sorted(Trajectory.objects.filter(run=run), key=key, reverse=descending)]
    assert walk_pages(qs, sort, size=3) == expected


def test_previous_page_returns_the_page_before(run):
    for step in range(10):
        make_sample(run, step=step)
    qs = run_samples(run)
    first = page_of(qs, "-step", size=4)
    second = page_of(qs, "-step", after=first.next_cursor, size=4)
    back = page_of(qs, "-step", before=second.prev_cursor, size=4)
    assert [r.id for r in back.rows] == [r.id for r in first.rows]
    assert back.prev_cursor is None and back.next_cursor


def test_a_malformed_cursor_gives_the_first_page(run):
    make_sample(run)
    assert len(page_of(run_samples(run), "-reward", after="not-a-cursor!").rows) == 1


@pytest.mark.parametrize("query", ["", "q=word&reward_min=0&status=completed&sort=-reward", "cmin.correct=0&q=word&sort=step"])
def test_the_list_page_never_selects_the_big_text_columns(alice_client, run, query):
    make_sample(run, response="word " * 1000)
    with CaptureQueriesContext(connection) as captured:
        response = alice_client.get(f"/review/runs/{run.pk}/samples/?{query}")
    assert response.status_code == 200 and response.content.decode().count("<tr data-id=") == 1
    selects = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("SELECT") and 'FROM "runs_trajectory"' in q["sql"]]
    assert any('"runs_trajectory"."reward"' in sql for sql in selects)  # the page's own query is among them
    for sql in selects:
        select_list = re.match(r"SELECT (.*?) FROM ", sql, re.S).group(1)
        for big in (*Trajectory.BIG_FIELDS, "review_search"):
            assert f'"runs_trajectory"."{big}"' not in select_list, (big, sql)


def test_distinct_values_reads_each_value_once(run):
    for source in ["gsm8k", "math", "gsm8k", "arith", ""]:
        make_sample(run, data_source=source)
    assert distinct_values(run, "data_source") == ["arith", "gsm8k", "math"]
    with pytest.raises(ValueError):
        distinct_values(run, "prompt")


@pytest.mark.parametrize("word", ["common", "rare", "everywhere", "nowhere"])
@pytest.mark.parametrize("sort", ["-step", "reward", "-response_len"])
def test_search_pages_match_the_plain_filter_whichever_way_they_are_found(run, monkeypatch, word, sort):
    from rlweb.review import search

    monkeypatch.setattr(search, "SEARCH_WINDOW", 4)  # small, so that every path is taken
    monkeypatch.setattr(search, "COMMON_MATCHES", 2)
    for n in range(30):
        words = ["everywhere"]
        if n % 3 == 0:
            words.append("common")
        if n in (1, 2):
            words.append("rare")  # only in the oldest samples: not in the first window
        make_sample(run, step=n, reward=(n * 7) % 10 / 10, response_len=(n * 11) % 13, response=" ".join(words))
    _, filters = filters_from_query(QueryDict(f"q={word}"))
    expected = [row.id for row in page_of(filter_samples(run_samples(run), filters), sort, size=1000).rows]
    seen, after = [], None
    while True:
        page = page_of(filter_samples(run_samples(run), filters, with_search=False), sort, after=after, size=3, search=word)
        seen.extend(row.id for row in page.rows)
        if not page.next_cursor:
            break
        after = page.next_cursor
    assert seen == expected
    assert len(expected) == {"common": 10, "rare": 2, "everywhere": 30, "nowhere": 0}[word]


@postgres_only
def test_a_search_for_common_words_walks_in_page_order_and_for_rare_ones_uses_the_index(run, monkeypatch):
    from rlweb.review import search

    monkeypatch.setattr(search, "SEARCH_WINDOW", 10)
    monkeypatch.setattr(search, "COMMON_MATCHES", 2)
    for n in range(40):
        make_sample(run, step=n, response="common" if n % 4 == 0 else ("rare" if n == 1 else "other"))

    def last_query(word):
        with CaptureQueriesContext(connection) as captured:
            page_of(run_samples(run), "-step", size=5, search=word)
        sql = [q["sql"] for q in captured.captured_queries]
        return "\n".join(sql[-3:]) if "SET LOCAL" in "".join(sql) else sql[-1]

    # 10 newest samples: 2 or 3 "common" (not a page of 6, so the window does not suffice).
    assert "ts_match_vq" in last_query("common") and "SET LOCAL" not in last_query("common")
    rare = last_query("rare")
    assert "SET LOCAL enable_indexscan = off" in rare and "@@ websearch_to_tsquery" in rare


@postgres_only
def test_the_index_probe_leaves_out_words_found_in_most_samples(run, monkeypatch):
    from rlweb.review import search

    monkeypatch.setattr(search, "SEARCH_WINDOW", 5)
    monkeypatch.setitem(search._frequent_cache, "at", -1e9)  # read the statistics again
    target = make_sample(run, step=0, response="problem 1234 is solved")
    make_sample(run, step=1, response="problem 12345")
    for n in range(2, 40):
        make_sample(run, step=n, response=f"problem {n}")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_trajectory")
    assert "problem" in search.frequent_words()
    assert search._rare_words_query('"problem 1234"') == "'1234'"
    assert search._rare_words_query("problem or 1234") is None  # OR: every word may be the one
    assert search._rare_words_query("1234") is None  # nothing to leave out
    assert [row.id for row in page_of(run_samples(run), "-step", search='"problem 1234"').rows] == [target.id]


@pytest.mark.parametrize("sort", ["-step", "reward", "-advantage", "status"])
def test_component_filters_page_through_bounded_scans_and_miss_nothing(run, monkeypatch, sort):
    from rlweb.review import queries
    from rlweb.review.queries import sample_page

    monkeypatch.setattr(queries, "SCAN_WINDOW", 5)
    for n in range(23):
        correct = 1.0 if n in (0, 1, 7, 8, 9, 10, 11, 12, 13, 22) else 0.0
        make_sample(run, step=n, reward=[None, 0.5, 1.0][n % 3], advantage=n % 4 or None, status=["completed", "failed"][n % 2],
                    reward_components={"correct": correct}, response="needle" if n % 2 else "hay")
    for query in ("cmin.correct=1", "cmin.correct=1&q=needle", "cmin.correct=5"):
        _, filters = filters_from_query(QueryDict(query), components=["correct"])
        expected = [row.id for row in page_of(filter_samples(run_samples(run), filters), sort, size=1000).rows]
        seen, after, pages = [], None, []
        for _ in range(50):
            page = sample_page(run, filters, sort, after=after, size=3)
            pages.append(page)
            seen.extend(row.id for row in page.rows)
            if not page.next_cursor:
                break
            after = page.next_cursor
        assert seen == expected, query
        assert any(page.scanned == 5 for page in pages)  # pages that ran out of window say so
        # Walking back from the last page with rows, by the previous-page links, finds the same.
        with_rows = [page for page in pages if page.rows]
        if not with_rows:
            continue
        back, page = [], with_rows[-1]
        back[:0] = [row.id for row in page.rows]
        for _ in range(50):
            if not page.prev_cursor:
                break
            page = sample_page(run, filters, sort, before=page.prev_cursor, size=3)
            back[:0] = [row.id for row in page.rows]
        assert back == expected, query


def test_a_component_filter_that_matches_nothing_answers_after_one_bounded_scan(run, monkeypatch):
    from rlweb.review import queries
    from rlweb.review.queries import sample_page

    monkeypatch.setattr(queries, "SCAN_WINDOW", 4)
    for n in range(10):
        make_sample(run, step=n, reward_components={"correct": 0.0})
    _, filters = filters_from_query(QueryDict("cmin.correct=1"), components=["correct"])
    with CaptureQueriesContext(connection) as captured:
        page = sample_page(run, filters)
    assert page.rows == [] and page.scanned == 4 and page.next_cursor
    assert len(captured.captured_queries) == 2  # where the window ends, then the window itself
