"""Import progress that the page can see while the import's own transaction is still open.

The rows go in inside one long transaction, so progress written through that connection would
be invisible until the end. This writer updates Dataset.progress_* from a helper thread, which
has its own connection (Django connections are per thread) in autocommit mode: the UPDATE
touches only non-key columns of the dataset row, so it never waits on the rows being copied.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from django.db import connection

logger = logging.getLogger(__name__)


class DatabaseProgress:
    """A progress(done, total) callable that writes at most every `interval` seconds."""

    def __init__(self, dataset_id: int, interval: float = 0.5):
        self.dataset_id = dataset_id
        self.interval = interval
        self._last = 0.0
        self._future: Future | None = None
        self._lock = threading.Lock()
        # SQLite has one writer at a time and the import holds it: a second writer would only
        # wait. Embedded mode shows the bar jump at the end instead.
        self._enabled = connection.vendor == "postgresql"
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="import-progress") if self._enabled else None

    def __call__(self, done: int, total: int) -> None:
        if not self._enabled:
            return
        now = time.monotonic()
        if now - self._last < self.interval and done < total:
            return
        with self._lock:
            if self._future is not None and not self._future.done():
                return  # the previous write is still going: skip, do not queue up
            self._last = now
            self._future = self._executor.submit(self._write, done, total)

    def _write(self, done: int, total: int) -> None:
        from django.utils import timezone

        from .models import Dataset

        try:
            # updated_at too: it is the import's heartbeat (see Dataset.import_stalled).
            Dataset.objects.filter(pk=self.dataset_id).update(progress_done=done, progress_total=total, updated_at=timezone.now())
        except Exception:  # progress is cosmetic: never fail an import over it
            logger.warning("could not write import progress of dataset %s", self.dataset_id, exc_info=True)

    def close(self) -> None:
        """Wait for the last write and close the helper thread's connection. Idempotent."""
        if self._executor is None:
            return
        executor, self._executor = self._executor, None
        self._enabled = False
        # A lambda, so that `connection` is looked up in the helper thread (its own connection).
        executor.submit(lambda: connection.close()).result()
        executor.shutdown(wait=True)
