"""Run pages: the launch form built from RunConfig, YAML in and out, clone, the list (filter,
search, pagination, live rows), the run page, and what another user gets (404s)."""

import io
import re

import pytest
import yaml
from django.utils import timezone

from rlweb.runs.forms import LaunchForm, config_fields, field_name
from rlweb.runs.models import MetricPoint, Run
from workers.rl import config as engine_config
from workers.rl.config import RunConfig

from .conftest import small_config

pytestmark = pytest.mark.django_db


def post_data(config: dict, **extra) -> dict:
    """The launch form's POST for a config dict, as a browser would send it."""
    form = LaunchForm(initial={})
    data = {}
    for spec in config_fields():
        node = config
        for part in spec.path.split("."):
            node = node[part]
        name = field_name(spec.path)
        if isinstance(node, bool):
            if node:
                data[name] = "on"
        elif isinstance(node, (list, tuple)):
            data[name] = ", ".join(map(str, node))
        elif node is not None:
            data[name] = str(node)
    import json

    data["judger__source"] = "inline"
    data["judger__spec"] = json.dumps(config["judger"])
    assert set(data) - {"judger__source", "judger__spec"} <= set(form.fields)
    data.update(extra)
    return data


# --- the form ------------------------------------------------------------------------------


def test_the_form_has_a_field_for_every_runconfig_field_with_its_description():
    form = LaunchForm()
    for section, info in RunConfig.model_fields.items():
        if section in ("name", "seed"):
            assert section in form.fields
            continue
        if section == "judger":
            continue
        for key, sub in info.annotation.model_fields.items():
            field = form.fields[f"{section}__{key}"]
            assert sub.description in field.help_text
    groups = [g["key"] for g in form.groups()]
    assert groups == ["run", "model", "data", "judger", "algorithm", "rollout", "optimizer", "schedule", "resources"]
    assert form.fields["rollout__engine"].choices == [("hf", "hf"), ("vllm", "vllm")]
    assert form.fields["rollout__n"].widget.attrs["min"] == 1


def test_the_form_opens_on_the_cpu_demo_preset(alice_client, presets_dir):
    page = alice_client.get("/runs/new/").content.decode()
    assert re.search(r'data-preset="tiny-arith-grpo"[^>]*>tiny-arith-grpo', page)
    assert page.index('data-preset="tiny-arith-grpo"') < page.index('data-preset="a-gpu-preset"')  # the demo first
    assert 'name="rollout__n" value="8"' in page and 'value="tiny demo"' in page
    assert 'data-est="samples"' in page and ">7680<" in page  # 60 steps x 16 prompts x 8 samples
    other = alice_client.get("/runs/new/?preset=a-gpu-preset").content.decode()
    assert 'name="optimizer__lr" value="3e-05"' in other


def test_the_real_cpu_demo_preset_is_valid_and_first():
    if "tiny-arith-grpo" not in engine_config.list_presets():
        pytest.skip("configs/tiny-arith-grpo.yaml is not there yet")
    from rlweb.runs.views import presets

    assert presets()[0] == "tiny-arith-grpo"
    assert engine_config.load_preset("tiny-arith-grpo").resources.device in ("cpu", "auto")


def test_launching_from_the_form_stores_the_config_and_opens_the_run(alice_client, alice):
    response = alice_client.post("/runs/new/", post_data(small_config(name="from the form"), action="launch", preset="p"))
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert (run.owner, run.name, run.preset, run.total_steps) == (alice, "from the form", "p", 6)
    assert RunConfig.model_validate(run.config) == RunConfig.model_validate(small_config(name="from the form"))


def test_a_bad_value_is_shown_next_to_its_field_with_its_path(alice_client):
    response = alice_client.post("/runs/new/", post_data(small_config(), **{"rollout__n": "0", "optimizer__lr": "2"}))
    assert response.status_code == 400 and not Run.objects.exists()
    page = response.content.decode()
    n_field = page[page.index('name="rollout__n"'):]
    assert "rollout.n: Input should be greater than or equal to 1" in n_field[:1500]
    assert "optimizer.lr: Input should be less than or equal to 1" in page


def test_a_cross_field_error_is_shown_on_top_of_the_form(alice_client):
    response = alice_client.post("/runs/new/", post_data(small_config(), **{"rollout__n": "1"}))
    assert response.status_code == 400
    assert "rollout.n must be &gt;= 2" in response.content.decode()


def test_a_bad_judger_spec_is_shown_under_the_judger(alice_client):
    response = alice_client.post("/runs/new/", post_data(small_config(), judger__spec='{"kind": "regex"}'))
    page = response.content.decode()
    assert response.status_code == 400 and "judger.regex.pattern" in page


def test_download_yaml_gives_a_config_that_launches_the_same_run(alice_client, alice):
    config = small_config(name="to save", seed=7)
    response = alice_client.post("/runs/new/", post_data(config, action="download"))
    assert response["Content-Disposition"] == 'attachment; filename="to-save.yaml"'
    assert not Run.objects.exists()
    upload = io.BytesIO(response.content)
    upload.name = "to-save.yaml"
    response = alice_client.post("/runs/new/", {"action": "yaml-launch", "file": upload})
    run = Run.objects.get()
    assert response.status_code == 302 and run.config["seed"] == 7
    assert RunConfig.model_validate(run.config) == RunConfig.model_validate(config)


def test_a_yaml_upload_with_a_typo_lists_the_field(alice_client):
    upload = io.BytesIO(b"rollout:\n  nn: 3\n")
    upload.name = "bad.yaml"
    response = alice_client.post("/runs/new/", {"action": "yaml-launch", "file": upload})
    assert response.status_code == 400 and "rollout.nn: Extra inputs are not permitted" in response.content.decode()
    assert not Run.objects.exists()


def test_a_yaml_upload_can_be_loaded_into_the_form_first(alice_client):
    upload = io.BytesIO(yaml.safe_dump(small_config(name="loaded", rollout={"n": 5})).encode())
    upload.name = "x.yaml"
    page = alice_client.post("/runs/new/", {"action": "yaml-load", "file": upload}).content.decode()
    assert 'name="rollout__n" value="5"' in page and 'value="loaded"' in page and not Run.objects.exists()


def test_a_run_is_cloned_into_the_form(alice_client, make_run):
    run = make_run(config=small_config(name="orig", optimizer={"lr": 5e-5}), name="orig")
    response = alice_client.get(f"/runs/{run.pk}/clone/")
    assert response["Location"] == f"/runs/new/?clone={run.pk}"
    page = alice_client.get(response["Location"]).content.decode()
    assert 'value="orig (copy)"' in page and 'name="optimizer__lr" value="5e-05"' in page


def test_the_estimate_follows_the_form(alice_client):
    page = alice_client.post("/runs/new/estimate/", post_data(small_config(), **{"rollout__n": "4", "schedule__total_steps": "10"})).content.decode()
    assert 'data-est="samples">80<' in page  # 10 steps x 2 prompts x 4
    bad = alice_client.post("/runs/new/estimate/", post_data(small_config(), **{"rollout__n": "0"})).content.decode()
    assert "rollout.n" in bad


def test_a_runs_config_downloads_as_yaml(alice_client, make_run):
    run = make_run(name="r1")
    response = alice_client.get(f"/runs/{run.pk}/config.yaml")
    assert RunConfig.model_validate(yaml.safe_load(response.content)) == RunConfig.model_validate(run.config)


# --- the list ----------------------------------------------------------------------------


def test_the_list_filters_searches_and_paginates(alice_client, make_run):
    for i in range(30):
        make_run(name=f"sweep-{i}", status="completed" if i % 3 else "failed")
    make_run(name="the odd one", status="running", heartbeat_at=timezone.now())
    page = alice_client.get("/runs/").content.decode()
    assert page.count('<tr data-run=') == 25 and "Page 1 of 2" in page
    assert 'hx-trigger="every 3s"' in page  # a run is active: rows refresh themselves
    failed = alice_client.get("/runs/?status=failed").content.decode()
    assert failed.count("<tr data-run=") == 10 and "status-completed" not in failed
    found = alice_client.get("/runs/?q=odd").content.decode()
    assert found.count("<tr data-run=") == 1 and "the odd one" in found
    assert "?q=sweep&page=2" in alice_client.get("/runs/?q=sweep").content.decode()  # pages keep the filter


def test_the_live_rows_partial_has_status_progress_and_reward(alice_client, make_run):
    make_run(name="going", status="running", heartbeat_at=timezone.now(), current_step=3, last_reward=0.4567)
    response = alice_client.get("/runs/?partial=rows", HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.startswith("<tbody") and "status-running" in html and "3/6" in html and "0.457" in html


def test_bob_sees_none_of_alices_runs(alice, bob, client, make_run):
    run = make_run(name="alices secret")
    client.force_login(bob)
    assert "alices secret" not in client.get("/runs/").content.decode()
    assert "alices secret" not in client.get("/runs/?q=secret").content.decode()
    for url in (f"/runs/{run.pk}/", f"/runs/{run.pk}/config.yaml", f"/runs/{run.pk}/clone/", f"/runs/new/?clone={run.pk}",
                f"/runs/{run.pk}/series/?name=kl", f"/runs/{run.pk}/metrics/"):
        assert client.get(url).status_code == 404, url
    assert client.get(f"/runs/summaries/?id={run.pk}").json() == {"runs": []}


def test_bob_cannot_cancel_or_resume_alices_run_from_the_page(alice, bob, client, make_run):
    running = make_run(status="running", heartbeat_at=timezone.now())
    failed = make_run(status="failed")
    client.force_login(bob)
    assert client.post(f"/runs/{running.pk}/cancel/").status_code == 404
    assert client.post(f"/runs/{failed.pk}/resume/").status_code == 404
    running.refresh_from_db()
    failed.refresh_from_db()
    assert not running.cancel_requested and (failed.status, failed.attempts) == ("failed", 1)


# --- the run page --------------------------------------------------------------------------


def test_the_run_page_has_charts_controls_and_the_live_cursor(alice_client, make_run):
    run = make_run(status="running", heartbeat_at=timezone.now())
    point = MetricPoint.objects.create(run=run, step=1, name="reward/mean", value=0.5, wall_time=1.0)
    page = alice_client.get(f"/runs/{run.pk}/").content.decode()
    for chart in ("chart-reward", "chart-eval", "chart-kl", "chart-entropy", "chart-length", "chart-clip", "chart-timings", "chart-throughput"):
        assert f'id="{chart}"' in page
    for control in ('id="smoothing"', 'name="xaxis"', 'id="logscale"', 'id="compare-form"', 'id="run-log"', 'id="run-checkpoints"', 'id="run-eta"'):
        assert control in page
    assert f'"metrics": {point.pk}' in page  # the stream starts after what the charts load
    assert "plotly/plotly.min.js" in page and f'href="/review/runs/{run.pk}/samples/"' in page
    assert 'id="cancel-run"' in page


def test_the_kl_chart_says_why_it_is_empty_when_the_run_has_no_kl_term(alice_client, make_run):
    without = make_run(config=small_config(algorithm={"kl_coef": 0.0}))
    with_kl = make_run(config=small_config(algorithm={"kl_coef": 0.05}))
    assert 'id="kl-off"' in alice_client.get(f"/runs/{without.pk}/").content.decode()
    assert 'id="kl-off"' not in alice_client.get(f"/runs/{with_kl.pk}/").content.decode()


def test_a_search_or_id_in_non_ascii_digits_matches_nothing_instead_of_failing(alice_client, make_run):
    make_run(name="r")
    for q in ("²", "#²", "①"):
        response = alice_client.get("/runs/", {"q": q})
        assert response.status_code == 200 and "No runs" in response.content.decode(), q
    assert alice_client.get("/runs/summaries/", {"id": "²"}).json() == {"runs": []}


def test_a_failed_run_shows_its_traceback_and_a_resume_button(alice_client, make_run):
    run = make_run(status="failed", error="Traceback (most recent call last):\n  ...\nValueError: boom")
    page = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert "ValueError: boom" in page
    resume_form = re.search(r'<form[^>]*data-show-when="resumable"[^>]*>', page).group(0)
    cancel_form = re.search(r'<form[^>]*data-show-when="active"[^>]*>', page).group(0)
    assert "hidden" not in resume_form and "hidden" in cancel_form


def test_cancel_and_resume_buttons_work_for_the_owner(alice_client, make_run):
    run = make_run(status="running", heartbeat_at=timezone.now())
    assert alice_client.post(f"/runs/{run.pk}/cancel/").status_code == 302
    run.refresh_from_db()
    assert run.cancel_requested
    Run.objects.filter(pk=run.pk).update(status="cancelled")
    alice_client.post(f"/runs/{run.pk}/resume/")
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("queued", 2)


def test_the_form_offers_the_users_own_judgers_and_stores_the_chosen_spec(alice_client, alice, bob):
    from rlweb.judgers.models import JudgerConfig

    mine = JudgerConfig.objects.create(owner=alice, name="my exact", kind="exact", params={})
    JudgerConfig.objects.create(owner=bob, name="bobs regex", kind="regex", params={"pattern": "x"})
    page = alice_client.get("/runs/new/").content.decode()
    assert "my exact" in page and "bobs regex" not in page
    alice_client.post("/runs/new/", post_data(small_config(), judger__source=str(mine.pk)))
    assert Run.objects.get().config["judger"]["kind"] == "exact"
