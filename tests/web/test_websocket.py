"""A Channels WebSocket round trip over the real Redis layer: the worker's notification reaches a
connected page, which receives exactly the rows after its cursor."""

import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import SESSION_KEY
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
