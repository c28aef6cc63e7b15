"""Datasets over the API: the pages' import and generate forms and services, rows paginated."""

import io

import pytest

from rlweb.datasets.models import Dataset

pytestmark = pytest.mark.django_db


def jsonl(*rows) -> io.BytesIO:
    import json

    f = io.BytesIO("".join(json.dumps(r) + "\n" for r in rows).encode())
    f.name = "data.jsonl"
    return f


def test_an_upload_imports_synchronously_with_wait_and_lists_its_rows(api):
    upload = jsonl({"prompt": "1+1=", "answer": "2"}, {"prompt": "2+2=", "answer": "4"}, {"prompt": "3+3=", "answer": "6"})
    response = api.post("/api/datasets/?wait=true", {"name": "tiny", "file": upload, "eval_fraction": "0"}, format="multipart")
    assert response.status_code == 201, response.json()
    dataset = response.json()
    assert dataset["status"] == "ready" and dataset["row_count"] == 3
    rows = api.get(f"/api/datasets/{dataset['id']}/rows/?page_size=2").json()
    assert rows["count"] == 3 and [r["answer"] for r in rows["results"]] == ["2", "4"]
    assert api.get(rows["next"]).json()["results"][0]["prompt"] == "3+3="


def test_an_upload_without_wait_is_queued_like_the_page_does(api):
    response = api.post("/api/datasets/", {"name": "later", "file": jsonl({"prompt": "p", "answer": "a"})}, format="multipart")
    assert response.status_code == 202
    assert response.json()["status"] == "importing"


def test_a_bad_file_is_a_400_naming_the_line_and_field_and_stores_nothing(api):
    upload = jsonl({"prompt": "ok", "answer": "1"}, {"answer": "no prompt"})
    response = api.post("/api/datasets/?wait=true", {"name": "bad", "file": upload}, format="multipart")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "import_failed"
    assert any(key.startswith("line 2") for key in error["fields"]), error
    assert not Dataset.objects.filter(name="bad").exists()


def test_the_form_validation_applies(api, alice):
    Dataset.objects.create(owner=alice, name="taken", status="ready")
    no_file = api.post("/api/datasets/", {"name": "x"}, format="multipart")
    assert no_file.status_code == 400 and "file" in no_file.json()["error"]["fields"]
    dup = api.post("/api/datasets/?wait=true", {"name": "taken", "file": jsonl({"prompt": "p", "answer": "a"})}, format="multipart")
    assert dup.status_code == 400 and "name" in dup.json()["error"]["fields"]
    bad = api.post("/api/datasets/arith/", {"name": "a", "n_train": 0}, format="json")
    assert bad.status_code == 400 and "n_train" in bad.json()["error"]["fields"]


def test_the_builtin_task_is_generated_and_can_train_a_run(api):
    response = api.post("/api/datasets/arith/", {"name": "arith-small", "n_train": 20, "n_eval": 8}, format="json")
    assert response.status_code == 201
    dataset = response.json()
    assert (dataset["train_count"], dataset["eval_count"]) == (20, 8)
    run = api.post("/api/runs/", {"data": {"train": f"dataset:{dataset['id']}", "eval": f"dataset:{dataset['id']}"}}, format="json")
    assert run.status_code == 201, run.json()


def test_a_server_directory_outside_the_dataset_roots_is_refused(api):
    response = api.post("/api/datasets/import-dir/", {"name": "etc", "path": "/etc"}, format="json")
    assert response.status_code == 400 and "path" in response.json()["error"]["fields"]


def test_delete_removes_the_dataset_but_not_while_importing(api, alice):
    ready = Dataset.objects.create(owner=alice, name="old", status="ready")
    busy = Dataset.objects.create(owner=alice, name="busy", status="importing")
    assert api.delete(f"/api/datasets/{ready.pk}/").status_code == 204
    assert not Dataset.objects.filter(pk=ready.pk).exists()
    assert api.delete(f"/api/datasets/{busy.pk}/").status_code == 409


def test_an_upload_over_the_limit_is_refused_while_it_streams(api, settings):
    settings.UPLOAD_MAX_BYTES = 100
    upload = jsonl(*({"prompt": "x" * 20, "answer": "1"} for _ in range(10)))
    response = api.post("/api/datasets/", {"name": "big", "file": upload}, format="multipart")
    assert response.status_code == 413 and response.json()["error"]["code"] == "too_large"
    assert not Dataset.objects.filter(name="big").exists()
