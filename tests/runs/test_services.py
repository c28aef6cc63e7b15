"""Launch, cancel, resume and the lost-run reaper (rlweb.runs.services)."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from rlweb.datasets.models import Dataset
from rlweb.runs import services
from rlweb.runs.models import Checkpoint, MetricPoint, Run, RunLog, Trajectory
from workers.rl.config import ConfigError

from .conftest import small_config

pytestmark = pytest.mark.django_db


def errors_of(exc_info) -> dict:
    return dict(exc_info.value.errors)


# --- launch ------------------------------------------------------------------------------


def test_it_stores_the_validated_config_and_queues_the_run(alice, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        run = services.launch_run(alice, small_config(), name="first try", preset="tiny-arith-grpo")
    assert (run.status, run.attempts, run.total_steps, run.name, run.preset) == ("queued", 1, 6, "first try", "tiny-arith-grpo")
    # Every field is stored, defaults included: the run can be re-run exactly.
    assert run.config["optimizer"]["lr"] == 1e-4 and run.config["name"] == "first try"
    assert len(callbacks) == 1  # the task is sent once the run is committed


def test_it_rejects_a_bad_config_with_field_paths(alice):
    with pytest.raises(ConfigError) as exc:
        services.launch_run(alice, small_config(rollout={"n": 0}, optimizer={"lr": -1}))
    errors = errors_of(exc)
    assert "rollout.n" in errors and "optimizer.lr" in errors
    assert not Run.objects.exists()


def test_it_rejects_unknown_keys(alice):
    with pytest.raises(ConfigError) as exc:
        services.launch_run(alice, {**small_config(), "schedule": {"total_stpes": 3}})
    assert "schedule.total_stpes" in errors_of(exc)


def test_bob_cannot_train_on_alices_dataset(alice, bob):
    dataset = Dataset.objects.create(owner=alice, name="mine", status="ready", row_count=3, train_count=3)
    with pytest.raises(ConfigError) as exc:
        services.launch_run(bob, small_config(data={"train": f"dataset:{dataset.pk}", "eval": None}))
    assert "no dataset" in errors_of(exc)["data.train"]
    run = services.launch_run(alice, small_config(data={"train": f"dataset:{dataset.pk}", "eval": None}))
    assert run.config["data"]["train"] == f"dataset:{dataset.pk}"


def test_a_dataset_reference_in_non_ascii_digits_is_a_config_error(alice):
    with pytest.raises(ConfigError) as exc:
        services.launch_run(alice, small_config(data={"train": "dataset:²", "eval": None}))
    assert "numeric id" in str(exc.value.errors)


def test_a_dataset_must_be_ready_and_have_rows_in_the_split_it_is_used_for(alice):
    importing = Dataset.objects.create(owner=alice, name="a", status="importing")
    train_only = Dataset.objects.create(owner=alice, name="b", status="ready", row_count=5, train_count=5, eval_count=0)
    with pytest.raises(ConfigError) as exc:
        services.launch_run(alice, small_config(data={"train": f"dataset:{importing.pk}", "eval": f"dataset:{train_only.pk}"}))
    errors = errors_of(exc)
    assert "not ready" in errors["data.train"] and "no eval rows" in errors["data.eval"]


def test_only_staff_may_name_a_server_file(alice, staff, tmp_path):
    path = str(tmp_path / "train.jsonl")
    with pytest.raises(ConfigError) as exc:
        services.launch_run(alice, small_config(data={"train": path, "eval": None}))
    assert "server file paths are for staff" in errors_of(exc)["data.train"]
    assert services.launch_run(staff, small_config(data={"train": path, "eval": None})).pk


def test_models_load_only_from_under_model_roots(alice, settings, tmp_path):
    settings.MODEL_ROOTS = [tmp_path / "models"]
    with pytest.raises(ConfigError) as exc:
        services.launch_run(alice, small_config(model={"path": "/etc"}))
    assert "MODEL_ROOTS" in errors_of(exc)["model.path"]
    assert services.launch_run(alice, small_config(model={"path": str(tmp_path / "models" / "qwen")})).pk


# --- cancel ------------------------------------------------------------------------------


def test_cancelling_a_queued_run_cancels_it_at_once(alice, make_run):
    run = services.cancel_run(make_run(), alice)
    assert run.status == "cancelled" and run.finished_at


def test_cancelling_a_running_run_asks_the_worker_to_stop(alice, make_run):
    run = services.cancel_run(make_run(status="running"), alice)
    assert run.status == "running" and run.cancel_requested
    assert RunLog.objects.filter(run=run, message__contains="cancel requested").exists()


def test_a_finished_run_cannot_be_cancelled(alice, make_run):
    with pytest.raises(services.RunStateError):
        services.cancel_run(make_run(status="completed"), alice)


def test_bob_cannot_cancel_or_resume_alices_run(bob, make_run):
    with pytest.raises(PermissionDenied):
        services.cancel_run(make_run(status="running"), bob)
    with pytest.raises(PermissionDenied):
        services.resume_run(make_run(status="failed"), bob)
    assert not Run.objects.filter(cancel_requested=True).exists()
    assert not Run.objects.filter(attempts__gt=1).exists()


def test_staff_may_cancel_anyones_run(staff, make_run):
    assert services.cancel_run(make_run(status="running"), staff).cancel_requested


# --- resume ------------------------------------------------------------------------------


def _history(run, steps, checkpoints):
    for step in steps:
        MetricPoint.objects.create(run=run, step=step, name="reward/mean", value=step / 10, wall_time=step)
        Trajectory.objects.create(run=run, step=step, uid=f"u{step}", group_id="g")
    for step in checkpoints:
        Checkpoint.objects.create(run=run, step=step, path=f"/ckpt/{step}")


def test_resume_discards_what_came_after_the_last_checkpoint_and_queues_the_next_attempt(alice, make_run, django_capture_on_commit_callbacks):
    run = make_run(status="lost", error="heartbeat stopped", current_step=5)
    _history(run, range(0, 6), checkpoints=[2, 4])
    with django_capture_on_commit_callbacks() as callbacks:
        run = services.resume_run(run, alice)
    assert (run.status, run.attempts, run.error, run.current_step, run.last_reward) == ("queued", 2, "", 4, 0.4)
    assert sorted(MetricPoint.objects.filter(run=run).values_list("step", flat=True)) == [0, 1, 2, 3, 4]
    assert sorted(Trajectory.objects.filter(run=run).values_list("step", flat=True)) == [0, 1, 2, 3, 4]
    assert len(callbacks) == 1


def test_resume_without_a_checkpoint_starts_over(alice, make_run):
    run = make_run(status="failed")
    _history(run, range(0, 3), checkpoints=[])
    run = services.resume_run(run, alice)
    assert run.current_step == 0 and not MetricPoint.objects.filter(run=run).exists()


def test_a_checkpoint_removed_by_keep_n_is_not_resumed_from(alice, make_run):
    run = make_run(status="cancelled")
    _history(run, range(0, 7), checkpoints=[2, 4, 6])
    Checkpoint.objects.filter(run=run, step=6).update(deleted=True)
    services.resume_run(run, alice)
    assert max(MetricPoint.objects.filter(run=run).values_list("step", flat=True)) == 4


@pytest.mark.parametrize("status", ["queued", "running", "completed"])
def test_only_failed_lost_or_cancelled_runs_resume(alice, make_run, status):
    with pytest.raises(services.RunStateError):
        services.resume_run(make_run(status=status), alice)


# --- lost runs ---------------------------------------------------------------------------


def test_a_running_run_whose_heartbeat_stopped_is_marked_lost(make_run, settings):
    now = timezone.now()
    stale = make_run(status="running", heartbeat_at=now - timedelta(seconds=settings.RUN_LOST_AFTER_SECONDS + 1))
    fresh = make_run(status="running", heartbeat_at=now - timedelta(seconds=1))
    never = make_run(status="running", heartbeat_at=None, started_at=now - timedelta(hours=1))
    queued = make_run(status="queued", heartbeat_at=None)
    assert sorted(services.reap_lost_runs(now)) == sorted([stale.pk, never.pk])
    for run, status in ((stale, "lost"), (fresh, "running"), (never, "lost"), (queued, "queued")):
        run.refresh_from_db()
        assert run.status == status
    stale.refresh_from_db()
    assert "heartbeats" in stale.error and stale.can_resume


def test_the_runs_page_marks_lost_runs_itself(alice_client, make_run, settings):
    # A killed worker takes its embedded beat scheduler with it: the page cannot rely on it.
    run = make_run(status="running", heartbeat_at=timezone.now() - timedelta(seconds=settings.RUN_LOST_AFTER_SECONDS + 5))
    response = alice_client.get("/runs/")
    run.refresh_from_db()
    assert run.status == "lost"
    assert b"lost (worker stopped)" in response.content


# --- judgers -----------------------------------------------------------------------------


def test_a_saved_judger_is_stored_inline_with_the_run(alice):
    from rlweb.judgers.models import JudgerConfig

    judger = JudgerConfig.objects.create(owner=alice, name="strict", kind="exact", params={"case_sensitive": False})
    run = services.launch_run(alice, small_config(), judger=judger.pk)
    assert run.config["judger"]["kind"] == "exact" and run.config["judger"]["case_sensitive"] is False
    judger.delete()  # the run does not depend on the judger row any more
    run.refresh_from_db()
    assert run.config["judger"]["kind"] == "exact"


def test_bob_cannot_launch_with_alices_judger(alice, bob):
    from rlweb.judgers.models import JudgerConfig

    judger = JudgerConfig.objects.create(owner=alice, name="mine", kind="exact", params={})
    with pytest.raises(ConfigError) as exc:
        services.launch_run(bob, small_config(), judger=judger.pk)
    assert "judger" in errors_of(exc)
    with pytest.raises(ConfigError):
        services.launch_run(bob, small_config(), judger=judger)
