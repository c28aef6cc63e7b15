"""Who may call what: every operation of the served schema refuses anonymous callers (401) and
answers another user's objects with 404, exactly like the pages."""

import re

import pytest

from rlweb.datasets.models import Dataset, DatasetRow
from rlweb.judgers.models import JudgerConfig
from rlweb.runs.models import Trajectory

pytestmark = pytest.mark.django_db

NO_OBJECT = {"/api/me/", "/api/token/"}
REQUIRED_QUERY = {"/api/runs/{run_id}/series/": "?name=reward/mean"}


def served_operations(client):
    schema = client.get("/api/schema/?format=json").json()
    for path, item in schema["paths"].items():
        for method in ("get", "post", "put", "patch", "delete"):
            if method in item:
                yield method, path


@pytest.fixture
def alices_objects(alice, alices_run, alices_checkpoint):
    dataset = Dataset.objects.create(owner=alice, name="alices data", status="ready")
    DatasetRow.objects.create(dataset=dataset, index=0, prompt="1+1", answer="2")
    judger = JudgerConfig.objects.create(owner=alice, name="alices judger", kind="numeric")
    sample = Trajectory.objects.filter(run=alices_run).first()
    return {"run": alices_run, "dataset": dataset, "judger": judger, "sample": sample, "checkpoint": alices_checkpoint}


def fill(path: str, objects) -> str:
    kind = {"runs": "run", "datasets": "dataset", "judgers": "judger"}[path.split("/")[2]] if path.count("/") > 3 else None
    values = {
        "run_id": objects["run"].pk,
        "id": objects[kind].pk if kind else 0,
        "sample_id": objects["sample"].pk,
        "step": objects["checkpoint"].step,
    }
    return re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]), path)


def test_the_schema_lists_the_endpoints_of_the_issue(api):
    paths = {path for _, path in served_operations(api)}
    for expected in (
        "/api/runs/", "/api/runs/{id}/", "/api/runs/{id}/cancel/", "/api/runs/{id}/resume/", "/api/runs/{id}/clone/",
        "/api/runs/{id}/config/", "/api/runs/{run_id}/metrics/", "/api/runs/{run_id}/metrics/points/",
        "/api/runs/{run_id}/samples/", "/api/runs/{run_id}/samples/export/", "/api/runs/{run_id}/checkpoints/",
        "/api/runs/{run_id}/checkpoints/{step}/download/", "/api/datasets/", "/api/datasets/{id}/rows/",
        "/api/judgers/", "/api/judgers/{id}/", "/api/token/",
    ):
        assert expected in paths, expected


def test_every_operation_refuses_an_anonymous_caller_with_401(api, anon, alices_objects):
    operations = list(served_operations(api))
    assert len(operations) > 15
    for method, path in operations:
        response = getattr(anon, method)(fill(path, alices_objects), format="json")
        assert response.status_code == 401, f"{method.upper()} {path} -> {response.status_code}"
        assert response.json()["error"]["code"] == "not_authenticated"
        assert response["WWW-Authenticate"] == "Token"


def test_a_wrong_token_is_refused_with_401(anon, alices_run):
    anon.credentials(HTTP_AUTHORIZATION="Token not-a-real-key")
    response = anon.get(f"/api/runs/{alices_run.pk}/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


def test_every_operation_on_another_users_object_is_404(api, bob_api, alices_objects):
    checked = 0
    for method, path in served_operations(api):
        if path in NO_OBJECT or "{" not in path:
            continue
        response = getattr(bob_api, method)(fill(path, alices_objects), format="json")
        assert response.status_code == 404, f"bob {method.upper()} {path} -> {response.status_code}"
        assert response.json()["error"]["code"] == "not_found"
        checked += 1
    assert checked > 10


def test_the_owner_and_staff_can_read_what_bob_cannot(api, staff_api, alices_objects):
    for method, path in served_operations(api):
        if method != "get" or "{" not in path:
            continue
        for client in (api, staff_api):
            response = client.get(fill(path, alices_objects) + REQUIRED_QUERY.get(path, ""))
            assert response.status_code == 200, f"GET {path} -> {response.status_code}"


def test_lists_show_only_the_callers_objects_and_everything_to_staff(api, bob_api, staff_api, alices_objects):
    for url in ("/api/runs/", "/api/datasets/", "/api/judgers/"):
        assert bob_api.get(url).json()["count"] == 0, url
        assert api.get(url).json()["count"] == 1, url
        assert staff_api.get(url).json()["count"] == 1, url


def test_session_auth_works_for_the_browser_and_needs_csrf_for_writes(client, alice, alices_run):
    from django.test import Client

    client.force_login(alice)
    assert client.get(f"/api/runs/{alices_run.pk}/").status_code == 200
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    response = strict.post(f"/api/runs/{alices_run.pk}/cancel/")
    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]["message"]


def test_the_docs_page_lists_the_operations_for_a_signed_in_user(alice_client):
    from django.test import Client

    html = alice_client.get("/api/docs/").content.decode()
    assert "/api/runs/{id}/cancel/" in html and "RunConfig" in html and "Authorization: Token" in html
    assert Client().get("/api/docs/").status_code == 401


def test_the_schema_is_served_to_signed_in_users_only(api, anon):
    schema = api.get("/api/schema/?format=json").json()
    assert schema["openapi"].startswith("3.") and "RunConfig" in schema["components"]["schemas"]
    assert anon.get("/api/schema/").status_code == 401


def test_the_schema_builds_without_a_warning(tmp_path):
    """drf-spectacular's warnings (unnamed enum collisions, unresolvable fields) are schema
    defects that clients generated from it would inherit."""
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    schema = (tmp_path / "schema.yaml").read_text()
    assert "RunStatusEnum" in schema and "JudgerKindEnum" in schema and "SplitEnum" in schema
