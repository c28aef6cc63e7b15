"""The import as a background task: queued from an upload, ready or failed, progress on the way."""

import threading
import time

import pytest
from django.db import connection

from rlweb import celery_app
from rlweb.datasets import services
from rlweb.datasets.models import Dataset, DatasetRow

from .conftest import write_jsonl


@pytest.fixture
def eager_celery():
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = before


@pytest.mark.django_db
def test_an_upload_is_queued_and_the_task_makes_it_ready(alice, tmp_path, eager_celery, django_capture_on_commit_callbacks, settings):
    settings.DATA_DIR = tmp_path
    path = write_jsonl(tmp_path / "in.jsonl", [{"prompt": f"p{i}", "answer": str(i)} for i in range(50)])
    with django_capture_on_commit_callbacks(execute=True):
        dataset = services.start_import(alice, "queued", path, eval_fraction=0.2, seed=1)
        assert dataset.status == Dataset.Status.IMPORTING and dataset.row_count == 0
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.READY and dataset.row_count == 50
    assert dataset.train_count + dataset.eval_count == 50 and dataset.eval_count > 0
    assert dataset.progress_done == dataset.progress_total > 0
    assert not any((tmp_path / "uploads").iterdir()), "the stored upload is deleted after the import"


@pytest.mark.django_db
def test_a_failed_background_import_keeps_its_errors_and_no_rows(alice, tmp_path, eager_celery, django_capture_on_commit_callbacks, settings):
    settings.DATA_DIR = tmp_path
    path = write_jsonl(tmp_path / "bad.jsonl", [{"prompt": "ok"}, "oops", {"prompt": "ok"}, {"answer": 1}])
    with django_capture_on_commit_callbacks(execute=True):
        dataset = services.start_import(alice, "bad", path)
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.FAILED
    assert [(e["line"], e["field"]) for e in dataset.import_report["errors"]] == [(2, ""), (4, "prompt")]
    assert DatasetRow.objects.filter(dataset=dataset).count() == 0 and dataset.row_count == 0


@pytest.mark.django_db
def test_problems_found_before_queueing_are_raised_at_once(alice, tmp_path, settings):
    settings.UPLOAD_MAX_BYTES = 10
    path = write_jsonl(tmp_path / "in.jsonl", [{"prompt": "longer than ten bytes"}])
    with pytest.raises(services.ImportFailed, match="over the upload limit"):
        services.start_import(alice, "big", path)
    with pytest.raises(services.ImportFailed, match="cannot tell the format"):
        settings.UPLOAD_MAX_BYTES = 10**6
        services.start_import(alice, "odd", write_jsonl(tmp_path / "in.txt", [{"prompt": "x"}]))
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_a_redelivered_task_does_not_import_twice(alice, tmp_path):
    path = write_jsonl(tmp_path / "in.jsonl", [{"prompt": "x"}])
    dataset = services.import_dataset(alice, "done", path)
    services.run_import(dataset.pk, {"path": path, "fmt": "jsonl", "name": "in.jsonl", "options": {}, "delete_after": False})
    assert DatasetRow.objects.filter(dataset=dataset).count() == 1


@pytest.mark.django_db(transaction=True)
def test_progress_is_visible_to_the_page_while_the_rows_are_still_uncommitted(alice, tmp_path):
    rows = [{"prompt": f"question number {i}", "answer": str(i), "data_source": "s"} for i in range(200_000)]
    path = write_jsonl(tmp_path / "big.jsonl", rows)
    dataset = Dataset.objects.create(owner=alice, name="big", status=Dataset.Status.IMPORTING)
    job = {"path": path, "fmt": "jsonl", "name": "big.jsonl", "options": services._options(False, 0.0, 0, "report", None), "delete_after": False}

    def work():
        try:
            services.run_import(dataset.pk, job)
        finally:
            connection.close()

    worker = threading.Thread(target=work)
    worker.start()
    seen = []
    while worker.is_alive():
        current = Dataset.objects.values("status", "progress_done", "progress_total").get(pk=dataset.pk)
        if current["status"] == "importing":
            seen.append((current["progress_done"], current["progress_total"], DatasetRow.objects.filter(dataset_id=dataset.pk).count()))
        time.sleep(0.05)
    worker.join()
    midway = [(done, total, rows) for done, total, rows in seen if 0 < done < total]
    assert midway, f"no progress seen mid-import: {seen[:5]}...{seen[-5:]}"
    assert all(rows == 0 for _, _, rows in midway), "rows stay invisible until the import commits"
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.READY and dataset.row_count == 200_000
