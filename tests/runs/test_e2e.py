"""The product's main path, end to end, with the real engine: Chromium → launch form → Celery
worker → engine on Ray → DB reporter → Redis → WebSocket → plotly charts.

1. Launch the CPU demo preset from the form; the reward chart gains points while the run is
   running (and keeps them all, once, across a dropped WebSocket); the run completes; the stored
   metric points equal what the engine reported (the reporter's journal), count and values.
2. kill -9 the worker mid-run: the run page shows "lost" within a minute; Resume finishes it on a
   new worker; no step is missing or doubled, and the curve is the resumed run's.

The demo preset is shortened in the form (fewer steps) so that each test takes well under two
minutes on two CPU cores."""

import signal
import time

import pytest

from rlweb.runs.models import MetricPoint, Run
from rlweb.runs.services import DEMO_PRESET, launch_run, run_dir
from tests.support.browser import log_in
from tests.support.waiting import wait_until
from workers.reporting import journal_points, read_journal
from workers.rl.config import list_presets, load_preset

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

STEPS = 60  # the demo's steps take ~0.1 s here: enough of them to watch the chart fill while running


@pytest.fixture(autouse=True)
def demo_preset():
    if DEMO_PRESET not in list_presets():
        pytest.skip(f"configs/{DEMO_PRESET}.yaml (the engine's CPU demo preset) is not there yet")


def reward_steps(page):
    return page.evaluate("window.rlwebRun ? window.rlwebRun.chartSteps('chart-reward', 'reward/mean') : []")


def stored_equals_reported(run):
    """Every (step, metric) the engine reported is stored once with the same value, and nothing else."""
    reported = {key: value for key, (value, _) in journal_points(read_journal(run_dir(run.pk))).items()}
    stored = {(s, n): v for s, n, v in MetricPoint.objects.filter(run=run).values_list("step", "name", "value")}
    assert MetricPoint.objects.filter(run=run).count() == len(stored)
    assert set(stored) == set(reported) and len(stored) > STEPS * 10
    differ = {k: (stored[k], reported[k]) for k in reported if stored[k] != reported[k]}
    if differ:
        history = {k: [(r["attempt"], r["kind"], r["metrics"].get(k[1])) for r in read_journal(run_dir(run.pk))
                       if r.get("step") == k[0] and k[1] in r.get("metrics", {})] for k in list(differ)[:5]}
        from rlweb.runs.models import RunLog

        logs = list(RunLog.objects.filter(run=run).values_list("message", flat=True))
        ckpts = list(run.checkpoints.values_list("step", "deleted"))
        journal = [(r["attempt"], r["kind"], r["step"]) for r in read_journal(run_dir(run.pk)) if r["kind"] != "step" or r["step"] % 5 == 0]
        logs.append(f"journal (checkpoints, evals, every 5th step): {journal}")
        raise AssertionError(f"stored != reported: {sorted(differ.items())[:10]}; journal: {history}; logs: {logs}; checkpoints: {ckpts}")
    return stored


def test_the_cpu_demo_launched_from_the_form_draws_its_reward_live_and_stores_what_the_engine_reported(live_stack, page, alice):
    log_in(page, live_stack.url, "alice", "alice-password-1")
    page.goto(f"{live_stack.url}/runs/new/")
    page.click(f"a[data-preset='{DEMO_PRESET}']")
    assert page.locator("[name=model__path]").input_value() == load_preset(DEMO_PRESET).model.path
    page.fill("[name=name]", "demo from the browser")
    page.fill("[name=schedule__total_steps]", str(STEPS))
    page.fill("[name=schedule__eval_every]", "20")
    page.fill("[name=schedule__checkpoint_every]", "20")
    page.fill("[name=data__builtin_eval_size]", "64")
    page.click("#launch")
    page.wait_for_url("**/runs/*/")
    run = Run.objects.get(name="demo from the browser")
    assert run.preset == DEMO_PRESET and run.total_steps == STEPS

    # While it runs, the chart gains points, one by one or a few at a time.
    page.wait_for_selector("#run-status[data-status=running]", timeout=120_000)
    first = wait_until(lambda: len(reward_steps(page)), 120, "the first reward point")
    assert page.locator("#run-status").get_attribute("data-status") == "running"
    assert first < STEPS
    page.evaluate("window.rlwebRun.dropSocket()")  # the page loses its socket mid-run...
    page.wait_for_function("window.rlwebRun.state.connections >= 2", timeout=20_000)
    wait_until(lambda: len(reward_steps(page)) > first, 60, "more reward points after reconnecting")

    page.wait_for_selector("#run-status[data-status=completed]", timeout=180_000)
    run.refresh_from_db()
    assert (run.status, run.current_step, run.error) == ("completed", STEPS, "")
    # ...and ends with every point, once.
    wait_until(lambda: reward_steps(page) == list(range(1, STEPS + 1)), 20, "every reward point on the chart")
    assert page.evaluate("window.rlwebRun.state.duplicates") == 0
    assert page.evaluate("window.rlwebRun.chartSteps('chart-eval', 'eval/accuracy')") == [0, 20, 40, STEPS]
    stored = stored_equals_reported(run)
    chart_values = page.evaluate("window.rlwebRun.chartValues('chart-reward', 'reward/mean')")
    assert chart_values == [stored[(s, "reward/mean")] for s in range(1, STEPS + 1)]
    assert page.locator("#run-steps").inner_text() == f"{STEPS} / {STEPS}"


def test_a_killed_worker_shows_lost_within_a_minute_and_resume_finishes_with_no_step_missing_or_doubled(live_stack, page, alice):
    config = load_preset(DEMO_PRESET).model_dump(mode="json")
    total = 80
    config["schedule"].update(total_steps=total, checkpoint_every=10, eval_every=20, keep_checkpoints=2)
    config["data"]["builtin_eval_size"] = 64
    run = launch_run(alice, config, name="to be killed", preset=DEMO_PRESET)
    wait_until(lambda: Run.objects.filter(pk=run.pk, current_step__gte=15).exists(), 180, "step 15", interval=0.05)

    for worker in list(live_stack.workers):
        worker.stop(sig=signal.SIGKILL)  # the whole process group: pool child, beat, Ray
    killed_at = time.monotonic()
    live_stack.workers.clear()
    at_kill = {
        "run": Run.objects.filter(pk=run.pk).values("status", "current_step", "attempts").get(),
        "checkpoints": list(run.checkpoints.values_list("step", "deleted")),
        "max_point_step": max(MetricPoint.objects.filter(run=run).values_list("step", flat=True), default=None),
        "journal": [(r["attempt"], r["kind"], r["step"]) for r in read_journal(run_dir(run.pk)) if r["kind"] != "step" or r["step"] % 5 == 0][-8:],
    }
    print("at the kill:", at_kill)  # shown if the test fails
    assert at_kill["run"]["current_step"] >= 15 and at_kill["max_point_step"] >= 15
    assert any(not deleted for _, deleted in at_kill["checkpoints"])  # a checkpoint to resume from

    log_in(page, live_stack.url, "alice", "alice-password-1")

    def page_says_lost():
        page.goto(f"{live_stack.url}/runs/{run.pk}/")
        return page.locator("#run-status").get_attribute("data-status") == "lost"

    wait_until(page_says_lost, 60, "the run page to show the run as lost", interval=2)
    assert time.monotonic() - killed_at < 60
    assert "heartbeats" in page.locator("#run-error").inner_text()

    live_stack.add_worker("worker-after-kill", beat=True)
    page.click("#resume-run")
    page.wait_for_selector("#run-status[data-status=completed]", timeout=300_000)
    run.refresh_from_db()
    assert (run.status, run.attempts, run.current_step) == ("completed", 2, total), live_stack.logs()

    for name in ("reward/mean", "entropy", "loss/policy", "time/step"):
        steps = list(MetricPoint.objects.filter(run=run, name=name).order_by("step").values_list("step", flat=True))
        assert steps == list(range(1, total + 1)), name
    assert list(MetricPoint.objects.filter(run=run, name="eval/accuracy").order_by("step").values_list("step", flat=True)) == [0, 20, 40, 60, total]
    try:
        stored_equals_reported(run)  # the journal's later attempt wins for steps it recomputed
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nat the kill: {at_kill}") from None
    # Attempt 2 continued after the last checkpoint attempt 1 wrote (by when the kill landed)
    # and recomputed every step after it; where attempt 1 had gone further, the stored values
    # are attempt 2's (stored_equals_reported: the later attempt wins).
    by_attempt = {}
    for rec in read_journal(run_dir(run.pk)):
        if rec.get("kind") == "step":
            by_attempt.setdefault(rec["attempt"], []).append(rec["step"])
    resumed_from = min(by_attempt[2]) - 1
    assert resumed_from % 10 == 0 and 10 <= resumed_from <= max(by_attempt[1]) < total
    assert sorted(by_attempt[2]) == list(range(resumed_from + 1, total + 1))
    assert f"resuming at step {resumed_from}" in page.locator("#run-log").inner_text()
    assert reward_steps(page) == list(range(1, total + 1)) and page.evaluate("window.rlwebRun.state.duplicates") == 0
