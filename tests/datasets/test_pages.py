"""The dataset pages: import forms, the failed/ready views, preview search and rendering, access."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from rlweb import celery_app
from rlweb.datasets.models import Dataset, DatasetRow
from rlweb.datasets.services import generate_arith_dataset, import_dataset

from .conftest import write_jsonl

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager_celery():
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = before


def upload(client, name, content: bytes, filename="rows.jsonl", **options):
    data = {"name": name, "file": SimpleUploadedFile(filename, content), "duplicates": "report", "eval_fraction": "0", "seed": "0", **options}
    return client.post("/datasets/new/upload/", data)


def test_the_new_dataset_page_offers_upload_hf_directory_and_arith(alice_client):
    html = alice_client.get("/datasets/new/").content.decode()
    for action in ("/datasets/new/upload/", "/datasets/new/hf/", "/datasets/new/arith/"):
        assert f'action="{action}"' in html
    assert "data-max-bytes" in html
    assert alice_client.get("/datasets/new/upload/").status_code == 302  # a GET goes back to the form


def test_an_upload_imports_in_the_background_and_the_page_shows_the_rows(alice_client, eager_celery, django_capture_on_commit_callbacks):
    content = "\n".join(json.dumps({"prompt": f"What is {i}+1?", "answer": str(i + 1)}) for i in range(30)).encode()
    with django_capture_on_commit_callbacks(execute=True):
        response = upload(alice_client, "uploaded", content)
    dataset = Dataset.objects.get(name="uploaded")
    assert response.status_code == 302 and response["Location"] == f"/datasets/{dataset.pk}/"
    html = alice_client.get(response["Location"]).content.decode()
    assert "What is 0+1?" in html and "30 rows" in html and "status-ready" in html
    assert "Page 1 of 2" in html


def test_a_bad_upload_shows_every_error_with_its_line_and_leaves_no_rows(alice_client, eager_celery, django_capture_on_commit_callbacks):
    content = b'{"prompt": "ok"}\n{"prompt": \n{"answer": "1"}\n'
    with django_capture_on_commit_callbacks(execute=True):
        response = upload(alice_client, "bad", content)
    html = alice_client.get(response["Location"]).content.decode()
    assert "The import failed: nothing was written" in html
    assert 'data-line="2"' in html and "not valid JSON" in html
    assert 'data-line="3"' in html and "missing prompt" in html
    assert DatasetRow.objects.count() == 0


def test_an_over_size_upload_is_refused_with_the_limit(alice_client, settings):
    settings.UPLOAD_MAX_BYTES = 1000
    response = upload(alice_client, "huge", b'{"prompt": "x"}\n' * 200)
    assert response.status_code == 413
    html = response.content.decode()
    assert "rows.jsonl is larger than the upload limit of 1000 bytes" in html
    assert not Dataset.objects.exists()


def test_a_taken_name_is_an_error_on_the_name_field(alice_client, alice, tmp_path):
    import_dataset(alice, "taken", write_jsonl(tmp_path / "a.jsonl", [{"prompt": "x"}]))
    response = upload(alice_client, "taken", b'{"prompt": "y"}\n')
    assert response.status_code == 400 and "you already have a dataset named" in response.content.decode()


def test_the_arith_form_generates_the_builtin_task(alice_client):
    response = alice_client.post("/datasets/new/arith/", {"name": "arith", "n_train": "40", "n_eval": "10", "seed": "0"})
    dataset = Dataset.objects.get(name="arith")
    assert response.status_code == 302 and dataset.row_count == 50


def test_the_hf_form_refuses_a_path_outside_the_dataset_roots(alice_client, tmp_path, settings):
    settings.DATASET_ROOTS = [tmp_path / "allowed"]
    response = alice_client.post("/datasets/new/hf/", {"name": "x", "path": "/etc", "duplicates": "report", "eval_fraction": "0", "seed": "0"})
    assert response.status_code == 400 and "not under an allowed dataset directory" in response.content.decode()


def test_the_preview_is_paginated_searchable_and_filtered_by_split(alice_client, alice):
    dataset = generate_arith_dataset(alice, "arith", n_train=60, n_eval=20, seed=0)
    url = f"/datasets/{dataset.pk}/"
    page2 = alice_client.get(url, {"page": 2}).content.decode()
    assert "Page 2 of 4" in page2
    target = DatasetRow.objects.filter(dataset=dataset, split="eval").order_by("index").first()
    found = alice_client.get(url, {"q": target.prompt}).content.decode()
    assert f'data-index="{target.index}"' in found and "1 row matching" in found
    unicode_digit = alice_client.get(url, {"q": "²"})
    assert unicode_digit.status_code == 200 and "data-index=" not in unicode_digit.content.decode()
    evals = alice_client.get(url, {"split": "eval"}, headers={"HX-Request": "true", "HX-Target": "rows"})
    assert evals.content.decode().startswith('<div id="rows">')  # htmx gets only the rows
    assert "20 rows" in evals.content.decode()


def test_the_preview_renders_prompts_with_the_template_and_a_models_chat_template(alice_client, alice, tmp_path, settings):
    dataset = import_dataset(
        alice, "chat", write_jsonl(tmp_path / "c.jsonl", [{"prompt": "2+2?"}, {"messages": [{"role": "user", "content": "hi"}]}])
    )
    url = f"/datasets/{dataset.pk}/"
    html = alice_client.get(url, {"template": "Q: {prompt}\nA:"}).content.decode()
    assert "Q: 2+2?\nA:" in html and "Q: hi\nA:" in html
    model = tmp_path / "models" / "chatty"
    model.mkdir(parents=True)
    template = "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": template, "bos_token": "<s>"}))
    settings.MODEL_ROOTS = [tmp_path / "models"]
    html = alice_client.get(url, {"template": "{prompt}", "model": str(model)}).content.decode()
    assert "&lt;s&gt;&lt;|user|&gt;2+2?\n&lt;|assistant|&gt;" in html
    assert "chat template from tokenizer_config.json" in html
    refused = alice_client.get(url, {"model": "/etc"}).content.decode()
    assert "not under a model directory" in refused


def test_export_downloads_the_rows_as_jsonl(alice_client, alice):
    dataset = generate_arith_dataset(alice, "arith", n_train=20, n_eval=5, seed=0)
    response = alice_client.get(f"/datasets/{dataset.pk}/export.jsonl", {"split": "eval"})
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert len(lines) == 5 and json.loads(lines[0])["data_source"] == "arith"


def test_bob_cannot_see_export_or_delete_alices_dataset(client, alice, bob):
    dataset = generate_arith_dataset(alice, "alices-sums", n_train=20, n_eval=5, seed=0)
    client.force_login(bob)
    for url in (f"/datasets/{dataset.pk}/", f"/datasets/{dataset.pk}/progress/", f"/datasets/{dataset.pk}/export.jsonl", f"/datasets/{dataset.pk}/delete/"):
        assert client.get(url).status_code == 404, url
    assert client.post(f"/datasets/{dataset.pk}/delete/").status_code == 404
    assert "alices-sums" not in client.get("/datasets/").content.decode()
    assert DatasetRow.objects.filter(dataset=dataset).count() == 25


def test_alice_deletes_her_dataset_after_confirming(alice_client, alice):
    dataset = generate_arith_dataset(alice, "arith", n_train=20, n_eval=5, seed=0)
    assert "Delete dataset" in alice_client.get(f"/datasets/{dataset.pk}/delete/").content.decode()
    assert alice_client.post(f"/datasets/{dataset.pk}/delete/").status_code == 302
    assert not Dataset.objects.exists() and not DatasetRow.objects.exists()


def test_the_progress_fragment_polls_while_importing_and_reloads_the_page_when_done(alice_client, alice):
    dataset = Dataset.objects.create(owner=alice, name="running", progress_done=50, progress_total=200)
    response = alice_client.get(f"/datasets/{dataset.pk}/progress/")
    html = response.content.decode()
    assert 'hx-trigger="every 1s"' in html and 'aria-valuenow="25"' in html
    assert "HX-Refresh" not in response
    Dataset.objects.filter(pk=dataset.pk).update(status="ready")
    assert alice_client.get(f"/datasets/{dataset.pk}/progress/")["HX-Refresh"] == "true"


def test_an_import_without_progress_for_ten_minutes_is_shown_stalled_and_may_be_deleted(alice_client, alice):
    from datetime import timedelta

    from django.utils import timezone

    dataset = Dataset.objects.create(owner=alice, name="stuck")
    assert alice_client.post(f"/datasets/{dataset.pk}/delete/").status_code == 302
    assert Dataset.objects.filter(pk=dataset.pk).exists()  # a live import is not deleted
    Dataset.objects.filter(pk=dataset.pk).update(updated_at=timezone.now() - timedelta(minutes=11))
    assert "worker has probably stopped" in alice_client.get(f"/datasets/{dataset.pk}/").content.decode()
    alice_client.post(f"/datasets/{dataset.pk}/delete/")
    assert not Dataset.objects.filter(pk=dataset.pk).exists()
