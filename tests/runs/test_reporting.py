"""The worker's DB reporter: bulk, idempotent, off the training thread, fenced, and exact on resume."""

import threading
import time

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.utils import timezone

from rlweb.runs.live import group_name
from rlweb.runs.models import Checkpoint, MetricPoint, Run, RunLog, Trajectory
from workers.reporting import DBReporter, journal_points, read_journal

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(make_run):
    return make_run(status=Run.Status.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now())


def sample(step, i, **extra):
    return {"step": step, "split": "train", "uid": f"u{i}", "group_id": "g", "reward": 1.0, "prompt": "1+1=", "response": "2",
            "reward_components": {"format": 1.0}, "tokens": [["2", -0.1, 1]], **extra}


def points(run):
    return sorted(MetricPoint.objects.filter(run=run).values_list("step", "name", "value"))


def test_it_writes_the_points_and_samples_of_each_step(running, tmp_path):
    reporter = DBReporter(running.pk, 1, tmp_path)
    reporter.log_step(1, {"reward/mean": 0.5, "kl": 0.01}, [sample(1, 0), sample(1, 1)])
    reporter.log_step(2, {"reward/mean": 0.75, "kl": 0.02}, [sample(2, 0)])
    reporter.log_eval(2, {"eval/accuracy": 0.4}, [sample(2, 0, split="eval")])
    reporter.close()

    assert points(running) == [(1, "kl", 0.01), (1, "reward/mean", 0.5), (2, "eval/accuracy", 0.4), (2, "kl", 0.02), (2, "reward/mean", 0.75)]
    rows = list(Trajectory.objects.filter(run=running).order_by("id").values("step", "split", "uid", "reward_components", "tokens"))
    assert [(r["step"], r["split"], r["uid"]) for r in rows] == [(1, "train", "u0"), (1, "train", "u1"), (2, "train", "u0"), (2, "eval", "u0")]
    assert rows[0]["reward_components"] == {"format": 1.0} and rows[0]["tokens"] == [["2", -0.1, 1]]
    running.refresh_from_db()
    assert (running.current_step, running.last_reward, running.last_eval_accuracy) == (2, 0.75, 0.4)


def test_a_point_or_sample_sent_twice_is_stored_once(running, tmp_path):
    reporter = DBReporter(running.pk, 1, tmp_path)
    reporter.log_step(1, {"reward/mean": 0.5}, [sample(1, 0)])
    reporter.flush()
    reporter.log_step(1, {"reward/mean": 0.9}, [sample(1, 0)])  # a re-sent step: the first value stays
    reporter.close()
    assert points(running) == [(1, "reward/mean", 0.5)]
    assert Trajectory.objects.filter(run=running).count() == 1


def test_non_finite_values_are_left_out_not_stored_as_numbers(running, tmp_path):
    reporter = DBReporter(running.pk, 1, tmp_path)
    reporter.log_step(1, {"reward/mean": float("nan"), "kl": float("inf"), "entropy": 1.5}, [])
    reporter.close()
    assert points(running) == [(1, "entropy", 1.5)]


def test_it_records_checkpoints_their_removal_and_log_lines(running, tmp_path):
    reporter = DBReporter(running.pk, 1, tmp_path)
    reporter.log_step(2, {"reward/mean": 0.1}, [])
    reporter.log_checkpoint(2, "/ckpt/2", 1234, {"reward/mean": 0.1})
    reporter.log_checkpoint(4, "/ckpt/4", 1300, {})
    reporter.log_checkpoint_deleted(2, "/ckpt/2")
    reporter.log_line("warning", "something odd")
    reporter.close()
    assert list(Checkpoint.objects.filter(run=running).values_list("step", "size_bytes", "deleted")) == [(2, 1234, True), (4, 1300, False)]
    assert RunLog.objects.filter(run=running, level="WARNING", message="something odd").exists()


def test_a_checkpoint_is_committed_with_the_steps_it_covers_before_training_goes_on(running, tmp_path):
    reporter = DBReporter(running.pk, 1, tmp_path)
    reporter.log_step(1, {"reward/mean": 0.1}, [])
    reporter.log_step(2, {"reward/mean": 0.2}, [])
    reporter.log_checkpoint(2, "/ckpt/2", 1, {})
    # No close(): log_checkpoint itself waited for the commit.
    assert [s for s, _, _ in points(running)] == [1, 2]
    assert Checkpoint.objects.filter(run=running, step=2).exists()
    reporter.close()


def test_log_step_returns_at_once_while_the_database_is_busy(running, tmp_path):
    reporter = DBReporter(running.pk, 1, tmp_path)
    locked, release = threading.Event(), threading.Event()

    def hold_the_run_row():
        with transaction.atomic():
            Run.objects.select_for_update().get(pk=running.pk)
            locked.set()
            release.wait(10)
        connection.close()

    holder = threading.Thread(target=hold_the_run_row)
    holder.start()
    locked.wait(5)
    started = time.perf_counter()
    for step in range(1, 51):
        reporter.log_step(step, {"reward/mean": step / 50}, [sample(step, 0)])
    elapsed = time.perf_counter() - started
    assert MetricPoint.objects.filter(run=running).count() == 0  # the writer is waiting on the lock...
    release.set()
    holder.join()
    reporter.close()
    assert elapsed < 0.5  # ...while the training thread went on
    assert MetricPoint.objects.filter(run=running).count() == 50


def test_it_notifies_the_runs_group_after_writing(running, tmp_path):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group_name(running.pk), channel)
    reporter = DBReporter(running.pk, 1, tmp_path)
    reporter.log_step(3, {"reward/mean": 0.3}, [])
    reporter.flush()
    message = async_to_sync(layer.receive)(channel)
    reporter.close()
    assert message == {"type": "run.updated", "step": 3}
    assert MetricPoint.objects.filter(run=running, step=3).exists()  # written before the notification


def test_it_beats_the_heartbeat_and_reads_the_cancel_flag(running, tmp_path):
    Run.objects.filter(pk=running.pk).update(heartbeat_at=timezone.now() - timezone.timedelta(minutes=5))
    reporter = DBReporter(running.pk, 1, tmp_path, heartbeat_s=0.2, poll_s=0.1)
    time.sleep(0.5)
    running.refresh_from_db()
    assert timezone.now() - running.heartbeat_at < timezone.timedelta(seconds=2)
    assert not reporter.should_stop()
    Run.objects.filter(pk=running.pk).update(cancel_requested=True)
    deadline = time.monotonic() + 3
    while not reporter.should_stop() and time.monotonic() < deadline:
        time.sleep(0.05)
    reporter.close()
    assert reporter.should_stop() and reporter.cancel_requested


def test_an_attempt_that_lost_its_run_writes_nothing_more(running, tmp_path):
    reporter = DBReporter(running.pk, 1, tmp_path, heartbeat_s=0.2, poll_s=0.1)
    reporter.log_step(1, {"reward/mean": 0.1}, [])
    reporter.flush()
    # Declared lost and resumed elsewhere: the run is at attempt 2 now.
    Run.objects.filter(pk=running.pk).update(attempts=2, status=Run.Status.RUNNING)
    reporter.log_step(2, {"reward/mean": 0.2}, [])
    reporter.close()  # no exception: being fenced is not a failure of this process
    assert points(running) == [(1, "reward/mean", 0.1)]
    assert reporter.fenced and reporter.should_stop()


def test_the_first_report_of_a_resumed_attempt_makes_the_curve_exactly_the_resumed_runs(running, tmp_path):
    first = DBReporter(running.pk, 1, tmp_path)
    for step in range(1, 6):
        first.log_step(step, {"reward/mean": step * 0.1}, [sample(step, 0)])
    first.close()
    # A kill between report and commit: step 3's point never reached the database.
    MetricPoint.objects.filter(run=running, step=3).delete()
    Run.objects.filter(pk=running.pk).update(attempts=2)

    # The engine resumes from its checkpoint of step 3: it reports 4 first.
    second = DBReporter(running.pk, 2, tmp_path)
    for step in range(4, 7):
        second.log_step(step, {"reward/mean": step * 0.1 + 1}, [sample(step, 0)])
    second.close()

    assert points(running) == [
        (1, "reward/mean", 0.1), (2, "reward/mean", 0.2), (3, "reward/mean", pytest.approx(0.3)),  # 3 put back from the journal
        (4, "reward/mean", 1.4), (5, "reward/mean", 1.5), (6, "reward/mean", 1.6),  # recomputed, not the dead attempt's
    ]
    assert sorted(Trajectory.objects.filter(run=running).values_list("step", flat=True)) == [1, 2, 3, 4, 5, 6]
    # The journal, the reporter's own record, says the same (a later attempt wins).
    reported = journal_points(read_journal(tmp_path))
    assert {(s, n): v for (s, n), (v, _) in reported.items()} == {(s, n): pytest.approx(v) for s, n, v in points(running)}


def test_closing_raises_what_the_writer_could_not_write(running, tmp_path):
    reporter = DBReporter(running.pk, 1, tmp_path)
    reporter.log_step(1, {"x" * 150: 1.0}, [sample(1, 0, uid="u" * 100, status="s" * 50)])
    reporter.log_step(2, {"reward/mean": 1.0}, [{"step": 2, "split": "train", "uid": "a", "group_id": "g", "prompt_len": "not a number"}])
    with pytest.raises(RuntimeError, match="could not write"):
        reporter.close()
    assert reporter.should_stop()


def test_an_evaluation_repeated_after_resuming_does_not_cut_the_curve(running, tmp_path):
    first = DBReporter(running.pk, 1, tmp_path)
    for step in range(1, 6):
        first.log_step(step, {"reward/mean": step * 0.1}, [])
    first.log_eval(5, {"eval/accuracy": 0.5}, [])
    first.close()
    Run.objects.filter(pk=running.pk).update(attempts=2)
    # Resumed from the checkpoint of step 5 = the last step: the engine only re-evaluates.
    second = DBReporter(running.pk, 2, tmp_path)
    second.log_eval(5, {"eval/accuracy": 0.5}, [])
    second.close()
    assert [s for s, n, _ in points(running) if n == "reward/mean"] == [1, 2, 3, 4, 5]
    assert (5, "eval/accuracy", 0.5) in points(running)


def test_steps_reported_faster_than_the_commit_interval_share_transactions(running, tmp_path):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group_name(running.pk), channel)
    reporter = DBReporter(running.pk, 1, tmp_path, min_commit_interval=0.5)
    for step in range(1, 11):
        reporter.log_step(step, {"reward/mean": step / 10}, [])
        time.sleep(0.02)
    reporter.close()
    async def drain():
        import asyncio

        got = []
        while True:
            try:
                got.append(await asyncio.wait_for(layer.receive(channel), timeout=2))
            except asyncio.TimeoutError:
                return got

    notifications = async_to_sync(drain)()
    assert [n["step"] for n in notifications][-1:] == [10]
    assert len(notifications) <= 3  # one commit + notification per batch, not per step
    assert [s for s, _, _ in points(running)] == list(range(1, 11))


def test_a_journal_line_cut_by_a_kill_does_not_swallow_the_next_attempts_first_record(running, tmp_path):
    first = DBReporter(running.pk, 1, tmp_path)
    first.log_step(1, {"reward/mean": 0.1}, [])
    first.close()
    with open(tmp_path / "journal.jsonl", "a") as fh:
        fh.write('{"kind": "step", "step": 2, "metrics": {"reward/me')  # killed mid-write
    Run.objects.filter(pk=running.pk).update(attempts=2)
    second = DBReporter(running.pk, 2, tmp_path)
    second.log_step(2, {"reward/mean": 0.2}, [])
    second.close()
    reported = journal_points(read_journal(tmp_path))
    assert {k: v for k, (v, _) in reported.items()} == {(1, "reward/mean"): 0.1, (2, "reward/mean"): 0.2}


def test_a_restarted_attempts_own_evaluation_wins_over_the_journals(running, tmp_path):
    first = DBReporter(running.pk, 1, tmp_path)
    first.log_eval(0, {"eval/accuracy": 0.25, "time/eval": 1.0}, [])
    first.log_step(1, {"reward/mean": 0.1}, [])
    first.close()
    # Resumed without a checkpoint: the page's resume removed everything; attempt 2 starts over
    # and reports its evaluation at step 0 and step 1 close together (one batch).
    MetricPoint.objects.filter(run=running).delete()
    Run.objects.filter(pk=running.pk).update(attempts=2)
    second = DBReporter(running.pk, 2, tmp_path, min_commit_interval=0.5)
    second.log_eval(0, {"eval/accuracy": 0.25, "time/eval": 2.0}, [])
    second.log_step(1, {"reward/mean": 0.3}, [])
    second.close()
    assert points(running) == [(0, "eval/accuracy", 0.25), (0, "time/eval", 2.0), (1, "reward/mean", 0.3)]
