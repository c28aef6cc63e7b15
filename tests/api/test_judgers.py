"""Judgers over the API: the engine's spec validates, secrets stay secret, try and dry run."""

import pytest

from rlweb.datasets.models import Dataset, DatasetRow
from rlweb.judgers.models import JudgerConfig

pytestmark = pytest.mark.django_db


def test_create_read_update_and_delete_a_judger(api):
    response = api.post("/api/judgers/", {"name": "boxed", "kind": "numeric", "params": {"extract": "boxed"}}, format="json")
    assert response.status_code == 201, response.json()
    judger = response.json()
    assert judger["params"]["extract"] == "boxed" and judger["params"]["tolerance"] == 1e-6  # stored normalized
    patched = api.patch(f"/api/judgers/{judger['id']}/", {"params": {"extract": "gsm8k"}}, format="json").json()
    assert patched["params"]["extract"] == "gsm8k" and patched["name"] == "boxed"
    assert api.get("/api/judgers/").json()["count"] == 1
    assert api.delete(f"/api/judgers/{judger['id']}/").status_code == 204
    assert not JudgerConfig.objects.exists()


def test_bad_params_are_a_400_naming_the_field(api):
    response = api.post("/api/judgers/", {"name": "r", "kind": "regex", "params": {"pattern": "("}}, format="json")
    assert response.status_code == 400
    assert "pattern" in response.json()["error"]["fields"]
    unknown = api.post("/api/judgers/", {"name": "x", "kind": "numeric", "params": {"nope": 1}}, format="json")
    assert unknown.status_code == 400 and "nope" in unknown.json()["error"]["fields"]


def test_http_header_values_are_never_returned_and_can_be_kept(api, alice):
    body = {"name": "remote", "kind": "http", "params": {"url": "http://127.0.0.1:9/score", "headers": {"Authorization": "Bearer s3cret"}}}
    created = api.post("/api/judgers/", body, format="json").json()
    assert "s3cret" not in str(created) and created["params"]["headers"] == {"Authorization": "••• set"}
    kept = api.patch(f"/api/judgers/{created['id']}/", {"params": {**body["params"], "timeout_s": 3, "headers": {"Authorization": "•••"}}}, format="json")
    assert kept.status_code == 200
    assert JudgerConfig.objects.get(pk=created["id"]).params["headers"] == {"Authorization": "Bearer s3cret"}
    assert "s3cret" not in api.get(f"/api/judgers/{created['id']}/").content.decode()


def test_a_judger_used_by_a_router_cannot_be_deleted(api):
    leaf = api.post("/api/judgers/", {"name": "leaf", "kind": "exact"}, format="json").json()
    router = {"name": "route", "kind": "router", "params": {"mode": "by_data_source", "routes": {"a": {"ref": "leaf"}}}}
    assert api.post("/api/judgers/", router, format="json").status_code == 201
    assert api.delete(f"/api/judgers/{leaf['id']}/").status_code == 409


def test_try_judges_one_response(api):
    judger = api.post("/api/judgers/", {"name": "n", "kind": "numeric"}, format="json").json()
    right = api.post(f"/api/judgers/{judger['id']}/try/", {"response": "so #### 42", "label": "42"}, format="json").json()
    wrong = api.post(f"/api/judgers/{judger['id']}/try/", {"response": "41", "label": "42"}, format="json").json()
    assert (right["score"], wrong["score"]) == (1.0, 0.0) and right["status"] == "completed"
    assert api.post(f"/api/judgers/{judger['id']}/try/", {}, format="json").status_code == 400


def test_a_dry_run_reports_the_pass_rate_on_a_dataset(api, alice):
    dataset = Dataset.objects.create(owner=alice, name="d", status="ready", row_count=3, train_count=3)
    for i, answer in enumerate(["1", "2", "x"]):
        DatasetRow.objects.create(dataset=dataset, index=i, prompt=f"q{i}", answer=answer)
    judger = api.post("/api/judgers/", {"name": "n", "kind": "numeric"}, format="json").json()
    report = api.post(f"/api/judgers/{judger['id']}/dry-run/", {"dataset": dataset.pk}, format="json").json()
    assert (report["total"], report["passed"], report["failing_count"]) == (3, 2, 1)
    assert report["failing_rows"][0]["answer"] == "x"


def test_a_dry_run_on_another_users_dataset_is_refused(api, bob):
    theirs = Dataset.objects.create(owner=bob, name="b", status="ready")
    judger = api.post("/api/judgers/", {"name": "n", "kind": "numeric"}, format="json").json()
    response = api.post(f"/api/judgers/{judger['id']}/dry-run/", {"dataset": theirs.pk}, format="json")
    assert response.status_code == 400 and "dataset" in response.json()["error"]["fields"]


def test_the_kinds_list_their_params_schema(api):
    kinds = {k["kind"]: k for k in api.get("/api/judgers/kinds/").json()}
    assert {"numeric", "regex", "router", "http"} <= set(kinds)
    assert "pattern" in kinds["regex"]["params_schema"]["properties"]


def test_a_urls_secrets_are_masked_and_a_read_modify_write_keeps_them(api):
    body = {"name": "svc", "kind": "http", "params": {"url": "http://user:pw@127.0.0.1:9/score?key=abc"}}
    created = api.post("/api/judgers/", body, format="json").json()
    assert "pw" not in created["params"]["url"] and "abc" not in created["params"]["url"]
    params = {**created["params"], "timeout_s": 5.0}
    params.pop("headers", None)
    assert api.put(f"/api/judgers/{created['id']}/", {"name": "svc", "kind": "http", "params": params}, format="json").status_code == 200
    assert JudgerConfig.objects.get(pk=created["id"]).params["url"] == "http://user:pw@127.0.0.1:9/score?key=abc"
