"""The run page in Chromium against daphne, with a scripted engine writing through the real DB
reporter from this process (as a worker would): charts gain points live, a dropped WebSocket
reconnects with its cursor and the chart ends with every point once; zoom re-queries the server;
Bob's browser gets nothing."""

import threading

import pytest

from rlweb.runs.models import MetricPoint
from tests.support.browser import log_in
from tests.support.waiting import wait_until
from workers import execution

from .conftest import small_config
from .scripted_engine import ScriptedEngine

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def chart_steps(page, chart, metric):
    return page.evaluate(f"window.rlwebRun ? window.rlwebRun.chartSteps({chart!r}, {metric!r}) : []")


def run_in_background(run, engine):
    thread = threading.Thread(target=execution.execute, args=(run.pk, run.attempts), kwargs={"train": engine}, daemon=True)
    thread.start()
    return thread


def test_the_chart_fills_live_and_a_dropped_socket_loses_and_doubles_nothing(live_stack, page, alice, make_run):
    run = make_run(config=small_config(schedule={"total_steps": 40, "checkpoint_every": 10}))
    log_in(page, live_stack.url, "alice", "alice-password-1")
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.wait_for_function("window.rlwebRun && window.rlwebRun.state.connections === 1")

    worker = run_in_background(run, ScriptedEngine(sleep_s=0.15))
    wait_until(lambda: len(chart_steps(page, "chart-reward", "reward/mean")) >= 5, message="live points")
    page.wait_for_selector("#run-status[data-status=running]")
    seen = len(chart_steps(page, "chart-reward", "reward/mean"))

    page.evaluate("window.rlwebRun.dropSocket()")
    page.wait_for_function("window.rlwebRun.state.connections === 2", timeout=15_000)
    wait_until(lambda: len(chart_steps(page, "chart-reward", "reward/mean")) > seen + 3, message="points after reconnecting")

    worker.join(60)
    page.wait_for_selector("#run-status[data-status=completed]", timeout=20_000)
    stored = sorted(MetricPoint.objects.filter(run=run, name="reward/mean").values_list("step", flat=True))
    wait_until(lambda: chart_steps(page, "chart-reward", "reward/mean") == stored, message="every point on the chart")
    assert stored == list(range(1, 41))
    assert page.evaluate("window.rlwebRun.state.duplicates") == 0
    # The drawn plotly trace has them too (smoothed line over the faint raw one).
    drawn = page.evaluate("document.getElementById('chart-reward').data.filter(t => t.meta && t.meta.raw).map(t => t.x.length)")
    assert drawn == [40]
    assert page.locator("#run-steps").inner_text() == "40 / 40"
    assert "completed 40 steps" in page.locator("#run-log").inner_text()
    assert page.locator("#run-checkpoints tr").count() == 4


def test_zooming_asks_the_server_for_the_window(live_stack, page, alice, make_run):
    run = make_run(status="completed")
    MetricPoint.objects.bulk_create(MetricPoint(run=run, step=s, name="kl", value=(s % 97) / 97, wall_time=1e9 + s) for s in range(0, 6000))
    log_in(page, live_stack.url, "alice", "alice-password-1")
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.wait_for_function("window.rlwebRun && (document.getElementById('chart-kl').data || []).length > 0")
    assert len(chart_steps(page, "chart-kl", "kl")) <= 1500  # downsampled on the server
    page.evaluate("Plotly.relayout('chart-kl', {'xaxis.range[0]': 1000, 'xaxis.range[1]': 1999})")
    page.wait_for_function("window.rlwebRun.charts['chart-kl'].zoomRequests === 1")
    wait_until(lambda: chart_steps(page, "chart-kl", "kl") == list(range(1000, 2000)), message="the raw window")


def test_the_page_overlays_another_run(live_stack, page, alice, make_run):
    first, second = make_run(name="first", status="completed"), make_run(name="second", status="completed")
    for run, scale in ((first, 1.0), (second, 2.0)):
        MetricPoint.objects.bulk_create(MetricPoint(run=run, step=s, name="reward/mean", value=scale * s, wall_time=s) for s in range(10))
    log_in(page, live_stack.url, "alice", "alice-password-1")
    page.goto(f"{live_stack.url}/runs/{first.pk}/?compare={second.pk}")
    page.wait_for_selector(".overlay-chip")
    # The chip can appear before Plotly has drawn the chart (no .data yet): wait, do not throw.
    page.wait_for_function(f"(document.getElementById('chart-reward').data || []).some(t => t.name === '#{second.pk} second')")
    names = page.evaluate("document.getElementById('chart-reward').data.map(t => t.name)")
    assert f"#{first.pk} reward/mean" in names  # the page's own run, labelled by id beside the overlay


def test_bob_gets_no_page_and_no_stream_for_alices_run(live_stack, page, alice, bob, make_run):
    run = make_run()
    log_in(page, live_stack.url, "bob", "bob-password-1")
    response = page.goto(f"{live_stack.url}/runs/{run.pk}/")
    assert response.status == 404
    closed = page.evaluate(
        """(path) => new Promise((resolve) => {
            const ws = new WebSocket(`ws://${location.host}${path}`);
            ws.onclose = (ev) => resolve(ev.code);
            ws.onopen = () => ws.send(JSON.stringify({type: 'subscribe', cursor: {}}));
            ws.onmessage = () => resolve('got data');
        })""",
        f"/ws/runs/{run.pk}/",
    )
    assert closed in (4404, 1006)  # refused before accept (browsers may report the abnormal close)


def test_the_chart_controls_switch_the_axis_smoothing_and_scale(live_stack, page, alice, make_run):
    run = make_run(status="completed")
    MetricPoint.objects.bulk_create(MetricPoint(run=run, step=s, name="reward/mean", value=1 + (s % 2), wall_time=1.7e9 + 2 * s) for s in range(1, 51))
    log_in(page, live_stack.url, "alice", "alice-password-1")
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.wait_for_function("(document.getElementById('chart-reward').data || []).length > 0")
    traces = "document.getElementById('chart-reward').data"
    # Default: a smoothed line over the faint raw one; the smoothed line is the debiased EMA.
    smooth = page.evaluate(f"{traces}.find(t => t.meta && !t.meta.raw).y")
    assert smooth[0] == pytest.approx(1 + 1 % 2) and 1.0 < smooth[-1] < 2.0  # starts at the first value (debiased), then averages
    page.fill("#smoothing", "0")
    page.dispatch_event("#smoothing", "input")
    page.wait_for_function(f"{traces}.length === 1 && {traces}[0].y[1] === 1")  # raw values only
    page.check("input[name=xaxis][value=time]")
    page.wait_for_function("document.getElementById('chart-reward').layout.xaxis.type === 'date'")
    page.check("#logscale")
    page.wait_for_function("document.getElementById('chart-reward').layout.yaxis.type === 'log'")
