"""One attempt of a run in the worker (workers.execution), with a scripted engine: claiming,
states, failure with traceback, cancel at a step boundary, resume with no step missing or
doubled, and data references exported for the engine."""

import json
import threading
import time

import pytest

from rlweb.datasets.models import Dataset, DatasetRow
from rlweb.runs import services
from rlweb.runs.models import Checkpoint, MetricPoint, Run, RunLog, Trajectory
from workers import execution

from .conftest import small_config
from .scripted_engine import METRICS, ScriptedEngine, value_of

pytestmark = pytest.mark.django_db(transaction=True)


def stored(run):
    return sorted(MetricPoint.objects.filter(run=run).values_list("step", "name", "value"))


def expected(steps):
    rows = [(s, name, value_of(name, s)) for s in steps for name in METRICS]
    return sorted(rows + [(0, "eval/accuracy", 0.1), (max(steps), "eval/accuracy", 0.9)])


def test_a_run_goes_from_queued_to_completed_with_every_step_stored(alice, make_run):
    run = make_run()
    engine = ScriptedEngine()
    assert execution.execute(run.pk, 1, train=engine) == "completed"
    run.refresh_from_db()
    assert (run.status, run.current_step, run.finished_at is not None, run.worker != "") == ("completed", 6, True, True)
    assert stored(run) == expected(range(1, 7))
    assert Trajectory.objects.filter(run=run).count() == 12
    assert list(Checkpoint.objects.filter(run=run).values_list("step", flat=True)) == [2, 4, 6]
    messages = list(RunLog.objects.filter(run=run).values_list("message", flat=True))
    assert any("attempt 1 started" in m for m in messages) and "training from step 0" in messages and "completed 6 steps" in messages


def test_an_exception_fails_the_run_with_its_traceback(make_run):
    run = make_run()
    assert execution.execute(run.pk, 1, train=ScriptedEngine(fail_at_step=4)) == "failed"
    run.refresh_from_db()
    assert run.status == "failed" and run.can_resume
    assert "Traceback" in run.error and "RuntimeError: scripted failure at step 4" in run.error
    assert run.current_step == 3


def test_a_config_that_no_longer_validates_fails_the_run_with_the_reason(make_run):
    run = make_run(config={**small_config(), "rollout": {"n": "many"}})
    assert execution.execute(run.pk, 1, train=ScriptedEngine()) == "failed"
    run.refresh_from_db()
    assert "rollout.n" in run.error


def test_cancel_stops_the_run_at_the_next_step_boundary(alice, make_run):
    run = make_run(config=small_config(schedule={"total_steps": 200}))
    engine = ScriptedEngine(sleep_s=0.05)
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("status", execution.execute(run.pk, 1, train=engine)))
    worker.start()
    while not MetricPoint.objects.filter(run=run, step__gte=3).exists():
        time.sleep(0.05)
    services.cancel_run(Run.objects.get(pk=run.pk), alice)
    worker.join(30)
    run.refresh_from_db()
    assert result["status"] == "cancelled" and run.status == "cancelled"
    assert 3 <= run.current_step < 200
    # Every step up to where it stopped is stored, none after.
    steps = sorted(set(MetricPoint.objects.filter(run=run, name="reward/mean").values_list("step", flat=True)))
    assert steps == list(range(1, run.current_step + 1))


def test_resume_after_a_failure_continues_from_the_checkpoint_with_no_step_missing_or_doubled(alice, make_run):
    run = make_run(config=small_config(schedule={"total_steps": 10, "checkpoint_every": 4}))
    assert execution.execute(run.pk, 1, train=ScriptedEngine(fail_at_step=7)) == "failed"
    assert MetricPoint.objects.filter(run=run, step=6).exists()  # written after the checkpoint of step 4

    services.resume_run(Run.objects.get(pk=run.pk), alice)
    engine = ScriptedEngine()
    assert execution.execute(run.pk, 2, train=engine) == "completed"
    assert engine.calls == [{"start": 4, "total": 10}]
    run.refresh_from_db()
    assert (run.status, run.attempts, run.current_step, run.error) == ("completed", 2, 10, "")
    assert stored(run) == expected(range(1, 11))  # each (step, metric) exactly once, with the values of the run


def test_a_message_of_an_older_attempt_is_ignored(alice, make_run):
    run = make_run(status="failed")
    services.resume_run(run, alice)
    assert execution.execute(run.pk, 1, train=ScriptedEngine()) is None  # the redelivered first message
    assert Run.objects.get(pk=run.pk).status == "queued"
    assert execution.execute(run.pk, 2, train=ScriptedEngine()) == "completed"


def test_a_run_cancelled_while_queued_never_starts(alice, make_run):
    run = make_run()
    services.cancel_run(run, alice)
    engine = ScriptedEngine()
    assert execution.execute(run.pk, 1, train=engine) is None
    assert engine.calls == [] and Run.objects.get(pk=run.pk).status == "cancelled"


def _dataset(owner):
    dataset = Dataset.objects.create(owner=owner, name="sums", status="ready", row_count=3, train_count=2, eval_count=1)
    for i, split in enumerate(["train", "train", "eval"]):
        DatasetRow.objects.create(dataset=dataset, index=i, split=split, prompt=f"{i}+1=", answer=str(i + 1), data_source="arith")
    return dataset


def test_a_stored_dataset_is_exported_for_the_engine(alice, make_run):
    dataset = _dataset(alice)
    run = make_run(config=small_config(data={"train": f"dataset:{dataset.pk}", "eval": f"dataset:{dataset.pk}"}))
    seen = {}

    def engine(config, out_dir, reporter, resume=True):
        for key in ("train", "eval"):
            path = getattr(config.data, key)
            seen[key] = [json.loads(line)["prompt"] for line in open(path)]
        return ScriptedEngine()(config, out_dir, reporter, resume)

    assert execution.execute(run.pk, 1, train=engine) == "completed"
    assert seen == {"train": ["0+1=", "1+1="], "eval": ["2+1="]}
    # The stored config still names the dataset: clones train on the same rows.
    assert Run.objects.get(pk=run.pk).config["data"]["train"] == f"dataset:{dataset.pk}"


def test_the_worker_will_not_read_a_dataset_the_owner_cannot_use(alice, bob, make_run):
    dataset = _dataset(alice)
    run = make_run(owner=bob, config=small_config(data={"train": f"dataset:{dataset.pk}", "eval": None}))
    engine = ScriptedEngine()
    assert execution.execute(run.pk, 1, train=engine) == "failed"
    assert engine.calls == [] and "cannot use it" in Run.objects.get(pk=run.pk).error
