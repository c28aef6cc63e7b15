"""A Channels WebSocket round trip over the real Redis layer: the worker's notification reaches a
connected page, which receives exactly the rows after its cursor."""

import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from rlweb.asgi import application
from rlweb.runs.live import group_name
from rlweb.runs.models import MetricPoint, Run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def session_cookie_for(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


def communicator(run_id, cookie=b""):
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
    if cookie:
        headers.append((b"cookie", cookie))
    return WebsocketCommunicator(application, f"/ws/runs/{run_id}/", headers=headers)


async def _db(fn, *a, **kw):
    from channels.db import database_sync_to_async

    # database_sync_to_async closes the thread's connection afterwards, so the test database
    # can be dropped at the end of the session.
    return await database_sync_to_async(fn)(*a, **kw)


async def test_the_layer_is_redis():
    assert type(get_channel_layer()).__name__ == "RedisChannelLayer"


async def test_a_notification_pushes_the_new_points_after_the_cursor(alice):
    run = await _db(Run.objects.create, owner=alice, name="r", config={}, total_steps=3)
    await _db(MetricPoint.objects.create, run=run, step=1, name="reward/mean", value=0.1, wall_time=1.0)
    ws = communicator(run.pk, await _db(session_cookie_for, alice))
    connected, _ = await ws.connect()
    assert connected
    await ws.send_json_to({"type": "subscribe", "cursor": {"metrics": 0}})
    first = await ws.receive_json_from(timeout=5)
    assert first["metrics"] == [[1, "reward/mean", 0.1, 1.0]]

    await _db(MetricPoint.objects.create, run=run, step=2, name="reward/mean", value=0.2, wall_time=2.0)
    await get_channel_layer().group_send(group_name(run.pk), {"type": "run.updated", "step": 2})
    second = await ws.receive_json_from(timeout=5)
    assert second["metrics"] == [[2, "reward/mean", 0.2, 2.0]]  # only what the page had not seen
    assert second["cursor"]["metrics"] > first["cursor"]["metrics"]
    await ws.disconnect()


async def test_a_reconnecting_page_gets_exactly_what_it_missed(alice):
    run = await _db(Run.objects.create, owner=alice, name="r", config={})
    points = [await _db(MetricPoint.objects.create, run=run, step=s, name="kl", value=s, wall_time=s) for s in range(4)]
    ws = communicator(run.pk, await _db(session_cookie_for, alice))
    await ws.connect()
    await ws.send_json_to({"type": "subscribe", "cursor": {"metrics": points[1].pk}})
    got = await ws.receive_json_from(timeout=5)
    assert [p[0] for p in got["metrics"]] == [2, 3]
    await ws.disconnect()


async def test_an_anonymous_socket_is_refused(alice):
    run = await _db(Run.objects.create, owner=alice, name="r", config={})
    ws = communicator(run.pk)
    connected, code = await ws.connect()
    assert not connected and code == 4401


async def test_bob_cannot_stream_alices_run(alice, bob):
    run = await _db(Run.objects.create, owner=alice, name="r", config={})
    ws = communicator(run.pk, await _db(session_cookie_for, bob))
    connected, code = await ws.connect()
    assert not connected and code == 4404


# --- the worker's reporter through the stream (issue 5) -------------------------------------


async def _reporter(run, tmp_path):
    from workers.reporting import DBReporter

    return await _db(lambda: DBReporter(run.pk, 1, tmp_path))


async def _collect_steps(ws, want: int, timeout=10.0) -> tuple[list, dict]:
    """Receive 'changes' until `want` metric points arrived; returns (points, last cursor)."""
    import asyncio

    got, cursor = [], None
    deadline = asyncio.get_running_loop().time() + timeout
    while len(got) < want:
        msg = await ws.receive_json_from(timeout=max(0.1, deadline - asyncio.get_running_loop().time()))
        got.extend(msg["metrics"])
        cursor = msg["cursor"]
    return got, cursor


async def test_points_written_by_the_reporter_reach_the_page_by_notification(alice, settings, tmp_path):
    settings.LIVE_POLL_SECONDS = 3600  # no polling: only the worker's notification can push
    run = await _db(Run.objects.create, owner=alice, name="r", config={}, status="running", attempts=1)
    ws = communicator(run.pk, await _db(session_cookie_for, alice))
    assert (await ws.connect())[0]
    await ws.send_json_to({"type": "subscribe", "cursor": {}, "samples": False})
    await ws.receive_json_from(timeout=5)  # the initial state
    reporter = await _reporter(run, tmp_path)
    reporter.log_step(1, {"reward/mean": 0.25}, [])
    got, _ = await _collect_steps(ws, 1)
    assert [p[:3] for p in got] == [[1, "reward/mean", 0.25]]
    await _db(reporter.close)
    await ws.disconnect()


async def test_a_page_that_reconnects_mid_run_gets_every_point_once(alice, tmp_path):
    run = await _db(Run.objects.create, owner=alice, name="r", config={}, status="running", attempts=1)
    cookie = await _db(session_cookie_for, alice)
    reporter = await _reporter(run, tmp_path)
    ws = communicator(run.pk, cookie)
    await ws.connect()
    await ws.send_json_to({"type": "subscribe", "cursor": {}, "samples": False})
    for step in range(1, 11):
        reporter.log_step(step, {"kl": step / 10}, [])
    first, cursor = await _collect_steps(ws, 10)
    await ws.disconnect()  # the page loses its socket...
    for step in range(11, 21):  # ...while the run goes on
        reporter.log_step(step, {"kl": step / 10}, [])
    await _db(reporter.flush)
    ws = communicator(run.pk, cookie)
    await ws.connect()
    await ws.send_json_to({"type": "subscribe", "cursor": cursor, "samples": False})
    second, _ = await _collect_steps(ws, 10)
    await _db(reporter.close)
    await ws.disconnect()
    steps = [p[0] for p in first + second]
    assert steps == list(range(1, 21))  # all of them, each once, in order
