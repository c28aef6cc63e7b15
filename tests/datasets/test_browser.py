"""Chromium against daphne + a Celery worker: upload a good file and see the preview; upload a bad
one and see each error with its line, and that it left no rows."""

import json

import pytest

from rlweb.datasets.models import Dataset, DatasetRow
from tests.support.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def upload(page, base_url, path, name, skip_bad_rows=False):
    page.goto(f"{base_url}/datasets/new/")
    page.set_input_files("#upload input[type=file]", str(path))
    page.fill("#upload input[name=name]", name)
    if skip_bad_rows:
        page.click("#upload details.options summary")
        page.check("#upload input[name=skip_bad_rows]")
    page.click("#upload button[type=submit]")
    page.wait_for_url(f"{base_url}/datasets/*/")


def test_a_good_upload_imports_in_the_worker_and_shows_the_preview(live_stack, page, alice, tmp_path):
    path = tmp_path / "good.jsonl"
    path.write_text("\n".join(json.dumps({"prompt": f"What is {i} + {i}?", "answer": str(2 * i), "data_source": "double"}) for i in range(60)) + "\n")
    log_in(page, live_stack.url, "alice", "alice-password-1")
    upload(page, live_stack.url, path, "doubles")
    # The page polls the import's progress, then reloads itself with the rows.
    page.wait_for_selector("#rows table.rows", timeout=60_000)
    assert page.inner_text("[data-status]") == "ready"
    assert "60 rows" in page.inner_text("[data-match-count]")
    assert page.locator("table.rows tbody tr").count() == 25  # first page of the preview
    assert "What is 0 + 0?" in page.inner_text("table.rows tbody tr:first-child")
    page.fill("input[name=q]", "What is 37 + 37?")
    page.wait_for_function("document.querySelector('[data-match-count]').innerText.startsWith('1 row')")
    assert page.locator("table.rows tbody tr").count() == 1
    assert DatasetRow.objects.filter(dataset__name="doubles").count() == 60


def test_a_bad_upload_lists_each_error_with_its_line_and_leaves_no_rows(live_stack, page, alice, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(
        b'{"prompt": "fine", "answer": "1"}\n'
        b'{"prompt": "broken json", \n'
        b'{"prompt": "fine again", "answer": "2"}\n'
        b'{"answer": "3"}\n'
        b'{"prompt": "x", "answer": [1, 2]}\n'
    )
    log_in(page, live_stack.url, "alice", "alice-password-1")
    upload(page, live_stack.url, path, "broken")
    page.wait_for_selector("#import-errors", timeout=60_000)
    assert page.inner_text("[data-status]") == "failed"
    errors = {
        row.get_attribute("data-line"): row.inner_text()
        for row in page.locator("#import-errors tbody tr").all()
    }
    assert sorted(errors) == ["2", "4", "5"]
    assert "line 2" in errors["2"] and "not valid JSON" in errors["2"]
    assert "line 4" in errors["4"] and "missing prompt" in errors["4"]
    assert "line 5" in errors["5"] and "answer" in errors["5"] and "not a list" in errors["5"]
    # The bad upload left nothing behind but its report.
    dataset = Dataset.objects.get(name="broken")
    assert DatasetRow.objects.filter(dataset=dataset).count() == 0
    assert page.inner_text("[data-row-count]").startswith("0")

    # The same file with "skip bad rows" imports the two good rows and says what it skipped.
    upload(page, live_stack.url, path, "broken-skipped", skip_bad_rows=True)
    page.wait_for_selector("#rows table.rows", timeout=60_000)
    assert page.inner_text("[data-skipped]").startswith("3")
    assert DatasetRow.objects.filter(dataset__name="broken-skipped").count() == 2


def test_an_over_size_file_is_refused_in_the_page_before_it_is_sent(live_stack, page, alice, tmp_path):
    from django.conf import settings

    path = tmp_path / "big.jsonl"
    path.write_bytes(b'{"prompt": "x"}\n' * 10)
    log_in(page, live_stack.url, "alice", "alice-password-1")
    page.goto(f"{live_stack.url}/datasets/new/")
    # The limit the server announced, lowered in the page: the check is the page's own.
    page.evaluate("document.querySelector('#upload input[type=file]').dataset.maxBytes = '100'")
    page.set_input_files("#upload input[type=file]", str(path))
    page.wait_for_selector("[data-size-error]:not([hidden])")
    assert "larger than the upload limit of 100 bytes" in page.inner_text("[data-size-error]")
    assert settings.UPLOAD_MAX_BYTES > 100 and not Dataset.objects.exists()
