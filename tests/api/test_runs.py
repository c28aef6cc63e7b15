"""Runs over the API: launch with the form's validation, the same stored run as a form launch,
state changes, config as YAML, and what a run produced (series, points, samples, checkpoints)."""

import io
import json
import tarfile

import pytest
import yaml

from rlweb.runs.models import Checkpoint, MetricPoint, Run, RunLog

pytestmark = pytest.mark.django_db


def test_a_bad_config_is_a_400_naming_the_field(api):
    response = api.post("/api/runs/", {"rollout": {"n": 0}, "algorithm": {"kl_estimator": "k9"}}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_config"
    assert set(error["fields"]) == {"rollout.n", "algorithm.kl_estimator"}
    assert "greater than or equal to 1" in error["fields"]["rollout.n"][0]
    assert not Run.objects.exists()


def test_an_unknown_key_and_another_users_dataset_are_refused_like_in_the_form(api, bob):
    from rlweb.datasets.models import Dataset

    response = api.post("/api/runs/", {"rollout": {"temprature": 1.0}}, format="json")
    assert response.status_code == 400 and "rollout.temprature" in response.json()["error"]["fields"]
    bobs = Dataset.objects.create(owner=bob, name="bobs", status="ready", row_count=1, train_count=1)
    response = api.post("/api/runs/", {"data": {"train": f"dataset:{bobs.pk}"}}, format="json")
    assert response.status_code == 400 and "data.train" in response.json()["error"]["fields"]


def test_a_body_that_is_not_an_object_is_a_400(api):
    response = api.post("/api/runs/", [1, 2], format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"


COMPARED = ("owner_id", "name", "status", "config", "preset", "total_steps", "current_step", "attempts",
            "cancel_requested", "error", "started_at", "finished_at", "last_reward")


def test_a_run_launched_through_the_api_is_the_same_as_one_from_the_form(api, alice_client):
    from rlweb.runs.forms import default_config, flatten
    from rlweb.runs.views import _as_post

    config = default_config()
    config.update(name="twin", seed=7)
    config["rollout"]["n"] = 4
    config["schedule"]["total_steps"] = 12
    form_data = {**_as_post(flatten(config)), "action": "launch", "preset": "tiny-arith-grpo", "judger__source": "inline"}
    assert alice_client.post("/runs/new/", form_data).status_code == 302
    response = api.post("/api/runs/?preset=tiny-arith-grpo", config, format="json")
    assert response.status_code == 201

    from_form, from_api = Run.objects.order_by("id")
    assert from_api.pk == response.json()["id"]
    for field in COMPARED:
        assert getattr(from_form, field) == getattr(from_api, field), field
    logs = [list(RunLog.objects.filter(run=r).values_list("level", "message")) for r in (from_form, from_api)]
    assert logs[0] == logs[1]


def test_launch_returns_the_stored_run_and_the_list_filters_it(api):
    response = api.post("/api/runs/", {"name": "sweep-lr-3e-4", "optimizer": {"lr": 3e-4}}, format="json")
    body = response.json()
    assert body["status"] == "queued" and body["config"]["optimizer"]["lr"] == 3e-4 and body["total_steps"] == 60
    assert [r["name"] for r in api.get("/api/runs/?q=sweep").json()["results"]] == ["sweep-lr-3e-4"]
    assert api.get("/api/runs/?status=completed").json()["count"] == 0
    assert api.get("/api/runs/?status=bogus").status_code == 400
    assert api.get("/api/runs/", {"q": "²"}).json()["count"] == 0  # a digit character int() refuses


def test_cancel_resume_and_clone_follow_the_run_states(api):
    run_id = api.post("/api/runs/", {"name": "r"}, format="json").json()["id"]
    assert api.post(f"/api/runs/{run_id}/cancel/").json()["status"] == "cancelled"
    again = api.post(f"/api/runs/{run_id}/cancel/")
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
    resumed = api.post(f"/api/runs/{run_id}/resume/").json()
    assert resumed["status"] == "queued" and resumed["attempts"] == 2
    assert api.post(f"/api/runs/{run_id}/resume/").status_code == 409
    clone = api.post(f"/api/runs/{run_id}/clone/")
    assert clone.status_code == 201
    assert clone.json()["name"] == "r (copy)" and clone.json()["id"] != run_id
    assert clone.json()["config"] == {**Run.objects.get(pk=run_id).config, "name": "r (copy)"}


def test_the_config_comes_as_yaml_or_json(api, alices_run):
    response = api.get(f"/api/runs/{alices_run.pk}/config/")
    assert response["Content-Type"].startswith("application/yaml")
    assert yaml.safe_load(response.content) == alices_run.config
    assert api.get(f"/api/runs/{alices_run.pk}/config/", HTTP_ACCEPT="application/json").json() == alices_run.config


def test_metric_names_and_a_downsampled_series_in_a_step_window(api, alices_run):
    assert api.get(f"/api/runs/{alices_run.pk}/metrics/").json() == {"names": ["loss/policy", "reward/mean"]}
    body = api.get(f"/api/runs/{alices_run.pk}/series/?name=reward/mean&name=loss/policy&step_min=2&step_max=4").json()
    reward, loss = body["series"]
    assert reward["name"] == "reward/mean" and reward["steps"] == [2, 3, 4] and reward["values"] == [2.0, 3.0, 4.0]
    assert loss["values"] == [1.0, 1.5, 2.0] and reward["extent"] == [1, 5] and not reward["downsampled"]


def test_long_series_are_downsampled_keeping_extremes(api, alice):
    run = Run.objects.create(owner=alice, name="long", config={})
    MetricPoint.objects.bulk_create(
        MetricPoint(run=run, step=s, name="x", value=100.0 if s == 777 else 0.0, wall_time=0) for s in range(3000)
    )
    series = api.get(f"/api/runs/{run.pk}/series/?name=x&max_points=100").json()["series"][0]
    assert series["downsampled"] and len(series["steps"]) <= 100
    assert 777 in series["steps"] and series["steps"][0] == 0 and series["steps"][-1] == 2999


def test_points_page_with_a_cursor_and_the_cursor_follows_new_points(api, alices_run):
    url = f"/api/runs/{alices_run.pk}/metrics/points/?name=reward/mean&page_size=2"
    seen, page = [], api.get(url).json()
    while True:
        seen += [p["step"] for p in page["results"]]
        if not page["next"]:
            break
        page = api.get(page["next"]).json()
    assert seen == [1, 2, 3, 4, 5]
    MetricPoint.objects.create(run=alices_run, step=6, name="reward/mean", value=6.0, wall_time=0)
    later = api.get(f"{url}&cursor={page['cursor']}").json()
    assert [p["step"] for p in later["results"]] == [6]
    assert api.get(f"{url}&cursor=garbage!").status_code == 400


def test_samples_filter_like_the_browser_and_page_with_cursors(api, alices_run):
    base = f"/api/runs/{alices_run.pk}/samples/"
    body = api.get(f"{base}?finish_reason=stop&step_min=4&sort=step").json()
    assert {(s["step"], s["finish_reason"]) for s in body["results"]} == {(4, "stop"), (5, "stop")}
    assert len(body["results"]) == 4 and "response" not in body["results"][0]
    first = api.get(f"{base}?page_size=15&text=true").json()
    assert len(first["results"]) == 15 and first["results"][0]["response"]
    rest = api.get(first["next"]).json()
    assert len(rest["results"]) == 5 and rest["next"] is None
    ids = [s["id"] for s in first["results"] + rest["results"]]
    assert len(set(ids)) == 20
    assert api.get(f"{base}?status=exploded").status_code == 400
    detail = api.get(f"{base}{ids[0]}/").json()
    assert detail["tokens"] == [["1", -0.1, 1]]


def test_the_export_streams_the_filtered_samples_as_json_lines(api, alices_run):
    response = api.get(f"/api/runs/{alices_run.pk}/samples/export/?finish_reason=length")
    assert response["Content-Type"].startswith("application/x-ndjson")
    rows = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert len(rows) == 10 and all(r["finish_reason"] == "length" for r in rows) and rows[0]["prompt"]


def test_a_checkpoint_folder_downloads_as_a_tar(api, alices_checkpoint, checkpoint_dir):
    listing = api.get(f"/api/runs/{alices_checkpoint.run_id}/checkpoints/").json()
    assert [c["step"] for c in listing] == [5]
    response = api.get(listing[0]["download"])
    assert response.status_code == 200 and response["Content-Type"] == "application/x-tar"
    archive = tarfile.open(fileobj=io.BytesIO(b"".join(response.streaming_content)))
    names = sorted(archive.getnames())
    top = checkpoint_dir.name
    assert names == [f"{top}/model/weights.bin", f"{top}/state.json"]
    assert archive.extractfile(f"{top}/model/weights.bin").read() == (checkpoint_dir / "model" / "weights.bin").read_bytes()


def test_a_checkpoint_outside_the_data_dir_is_never_served(api, alices_run, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    Checkpoint.objects.create(run=alices_run, step=9, path=str(secret))
    Checkpoint.objects.create(run=alices_run, step=10, path="../../../../etc/passwd")
    for step in (9, 10):
        response = api.get(f"/api/runs/{alices_run.pk}/checkpoints/{step}/download/")
        assert response.status_code == 404, step


def test_a_deleted_checkpoint_is_gone(api, alices_checkpoint):
    alices_checkpoint.deleted = True
    alices_checkpoint.save()
    response = api.get(f"/api/runs/{alices_checkpoint.run_id}/checkpoints/5/download/")
    assert response.status_code == 410 and response.json()["error"]["code"] == "gone"


def test_errors_have_one_shape(api, anon):
    for response in (api.get("/api/runs/999999/"), anon.get("/api/runs/"), api.get("/api/runs/?status=x")):
        assert set(response.json()) == {"error"}
        assert set(response.json()["error"]) == {"code", "message", "fields"}


def test_json_types_are_strict_where_the_form_converts_text(api):
    response = api.post("/api/runs/", {"rollout": {"n": "8"}}, format="json")
    assert response.status_code == 400
    assert "rollout.n" in response.json()["error"]["fields"]


def test_launching_is_throttled_with_retry_after(api, settings):
    from django.core.cache import cache

    cache.clear()
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"user": "1000/min", "heavy": "2/min"}}
    codes = [api.post("/api/runs/", {"name": f"r{i}"}, format="json").status_code for i in range(3)]
    assert codes == [201, 201, 429]
    throttled = api.post("/api/runs/", {"name": "again"}, format="json")
    assert throttled.json()["error"]["code"] == "throttled" and int(throttled["Retry-After"]) > 0
    assert api.get("/api/runs/").status_code == 200  # reading is not a heavy action
    cache.clear()
