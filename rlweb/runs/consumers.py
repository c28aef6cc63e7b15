"""The live stream of one run: new metric points, samples, log lines and status.

Protocol (JSON): the client sends {"type": "subscribe", "cursor": {"metrics": id, "samples": id,
"logs": id}} (all 0 on a fresh page); the server answers with {"type": "changes", ...} messages,
each carrying the new cursor. It pushes whenever the worker notifies the run's group
("run.updated") and also polls every LIVE_POLL_SECONDS (embedded mode has no cross-process layer).
Only the run's owner or staff may connect; everyone else is refused before accept.
"""

import asyncio
import json
import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder

from .live import Changes, Cursor, changes_since, group_name
from .models import Run

log = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


# Single flight: a notification reaches every open page of a run at the same moment, and pages
# that are up to date ask for the same rows. Consumers in this process that ask for the same
# (run, cursor) while a read is in flight share that read instead of each querying the database.
_inflight: dict[tuple, asyncio.Task] = {}


def _read(run_id: int, cursor: Cursor, with_samples: bool) -> tuple[Changes, Cursor, str]:
    after = Cursor(**cursor.as_dict())
    changes = changes_since(run_id, after, with_samples)
    message = {
        "type": "changes",
        "run": changes.run,
        "metrics": changes.metrics,
        "samples": changes.samples,
        "logs": changes.logs,
        "cursor": after.as_dict(),
    }
    # Encoded here, once for every page sharing the read, and off the event loop.
    return changes, after, json.dumps(message, cls=DjangoJSONEncoder)


async def shared_changes(run_id: int, cursor: Cursor, with_samples: bool) -> tuple[Changes, Cursor, str]:
    """(changes after `cursor`, the cursor after them, the message as text); `cursor` itself is
    left alone."""
    key = (run_id, cursor.metrics, cursor.samples, cursor.logs, with_samples)
    task = _inflight.get(key)
    if task is None:

        async def read():
            # Not thread-sensitive: reads of different runs (and pages) may run side by side.
            return await database_sync_to_async(_read, thread_sensitive=False)(run_id, cursor, with_samples)

        # A task of its own: a page that disconnects mid-read does not cancel it for the others.
        task = asyncio.ensure_future(read())
        _inflight[key] = task
        task.add_done_callback(lambda _t: _inflight.pop(key, None))
    return await asyncio.shield(task)


@database_sync_to_async
def _visible_run_id(user, run_id: int) -> int | None:
    return Run.objects.visible_to(user).filter(pk=run_id).values_list("pk", flat=True).first()


class RunStreamConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.run_id = await _visible_run_id(user, int(self.scope["url_route"]["kwargs"]["run_id"]))
        if self.run_id is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.cursor: Cursor | None = None  # set by "subscribe"
        self.with_samples = True
        self._lock = asyncio.Lock()
        self.group = group_name(self.run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        self._poller = asyncio.ensure_future(self._poll())

    async def disconnect(self, code):
        poller = getattr(self, "_poller", None)
        if poller:
            poller.cancel()
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content, **kwargs):
        if not isinstance(content, dict) or content.get("type") != "subscribe":
            await self.send_json({"type": "error", "message": "expected {'type': 'subscribe', 'cursor': {...}}"})
            return
        self.with_samples = bool(content.get("samples", True))
        self.cursor = Cursor.from_client(content.get("cursor"))
        await self._push()

    async def run_updated(self, event):
        """Group message from the worker: new rows were committed."""
        await self._push()

    async def _poll(self):
        try:
            while True:
                await asyncio.sleep(settings.LIVE_POLL_SECONDS)
                await self._push()
        except asyncio.CancelledError:
            pass

    async def _push(self):
        if self.cursor is None:
            return
        # One push at a time: a notification and a poll tick must not send the same rows twice.
        async with self._lock:
            while True:
                changes, after, text = await shared_changes(self.run_id, self.cursor, self.with_samples)
                if changes.empty and getattr(self, "_last_run", None) == changes.run:
                    return
                self.cursor = after
                self._last_run = changes.run
                await self.send(text_data=text)
                if not changes.more:
                    return
