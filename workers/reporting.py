"""The worker's Reporter: what the engine reports becomes rows in the database, then a
notification to the run's channel group ("run.updated"), so that live pages push it.

Why it looks like this:
- The engine calls the reporter from its training thread, perhaps from inside an event loop:
  nothing here touches the database on the caller's thread. `log_*` put an item on a queue and
  return; a writer thread drains the queue, writes each batch in one transaction (COPY on
  Postgres, bulk_create elsewhere, both "insert or ignore": a re-sent point never duplicates),
  then notifies. A watchdog thread beats the heartbeat and reads the cancel flag that
  `should_stop()` returns.
- Fencing: every write transaction first locks the run row and checks that the run is still
  this attempt's (status running, same `attempts`). A worker that was declared lost and then
  resumed elsewhere can therefore never write into the resumed run's curve.
- A journal (`out_dir/journal.jsonl`) records, on the caller's thread and before queueing,
  every metric dict and checkpoint the engine reported. It is the reporter's own record of what
  the engine said (tests compare the stored points with it).
- Resume is exact: the engine continues after its latest checkpoint, so the first training
  step this attempt reports, s, says where (an evaluation may repeat an earlier step; it is
  insert-or-ignore like everything else). In the transaction of the first batch the reporter deletes
  what earlier attempts stored for steps >= s (the engine recomputes them) and puts back, from
  the journal, the points of steps < s that a killed worker had reported but not yet committed
  (insert-or-ignore, so nothing doubles). The curve is then exactly the resumed run's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import queue
import socket
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from rlweb.runs.bulk import insert_ignore
from rlweb.runs.live import group_name
from rlweb.runs.models import Checkpoint, MetricPoint, Run, RunLog, Trajectory

log = logging.getLogger(__name__)

JOURNAL_NAME = "journal.jsonl"
_STOP = object()


class RunFenced(RuntimeError):
    """The run is no longer this attempt's (cancelled while queued, marked lost, resumed)."""


@dataclass
class _Batch:
    points: list[dict] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)
    logs: list[dict] = field(default_factory=list)
    checkpoints: list[dict] = field(default_factory=list)
    deleted_checkpoints: list[int] = field(default_factory=list)
    first_step: int | None = None
    last_step: int | None = None
    last_reward: float | None = None
    last_eval_accuracy: float | None = None
    flush_events: list[threading.Event] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.points or self.samples or self.logs or self.checkpoints or self.deleted_checkpoints) and self.last_step is None


def _finite(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


class DBReporter:
    """Reporter (workers.rl.reporter.Reporter) that writes to the database of the web app."""

    def __init__(self, run_id: int, attempt: int, out_dir: Path, *, heartbeat_s: float | None = None, poll_s: float = 1.0,
                 notify: bool = True, min_commit_interval: float | None = None):
        self.run_id = run_id
        self.min_commit_interval = (
            float(os.environ.get("RLWEB_REPORT_MIN_INTERVAL", "0.15")) if min_commit_interval is None else min_commit_interval
        )
        self.attempt = attempt
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.heartbeat_s = heartbeat_s if heartbeat_s is not None else settings.RUN_HEARTBEAT_SECONDS
        self.poll_s = min(poll_s, self.heartbeat_s)
        self.notify = notify
        self.cancel_requested = False
        self.fenced = False
        self.error: BaseException | None = None
        self.error_traceback = ""
        self.reported_steps = 0
        self._queue: queue.Queue = queue.Queue()
        self._closed = False
        self._stop_watch = threading.Event()
        # What earlier attempts reported, read before this one appends to the journal.
        self._earlier_points = journal_points([r for r in read_journal(self.out_dir) if r.get("attempt") != attempt])
        self._first_batch = True
        self._journal = open(self.out_dir / JOURNAL_NAME, "a", encoding="utf-8")
        if self._journal.tell() and not _ends_with_newline(self.out_dir / JOURNAL_NAME):
            # An earlier attempt was killed mid-line: start ours on a line of its own.
            self._journal.write("\n")
        self._writer = threading.Thread(target=self._write_loop, name=f"run-{run_id}-writer", daemon=True)
        self._watchdog = threading.Thread(target=self._watch_loop, name=f"run-{run_id}-watchdog", daemon=True)
        self._writer.start()
        self._watchdog.start()

    # --- the Reporter protocol (called on the training thread: no database here) -------

    def log_step(self, step: int, metrics: dict[str, float], samples: list[dict]) -> None:
        wall = time.time()
        clean = self._clean(metrics)
        self._journal_write({"kind": "step", "step": step, "wall_time": wall, "metrics": clean})
        self.reported_steps += 1
        self._queue.put(("step", step, wall, clean, samples or []))

    def log_eval(self, step: int, metrics: dict[str, float], samples: list[dict]) -> None:
        wall = time.time()
        clean = self._clean(metrics)
        self._journal_write({"kind": "eval", "step": step, "wall_time": wall, "metrics": clean})
        self._queue.put(("eval", step, wall, clean, samples or []))

    def log_checkpoint(self, step: int, path: str, size_bytes: int, metrics: dict[str, float]) -> None:
        self._journal_write({"kind": "checkpoint", "step": step, "path": str(path)})
        self._queue.put(("checkpoint", step, str(path), int(size_bytes or 0), self._clean(metrics or {})))
        # Checkpoints are rare: wait until the points they cover are committed, so that a worker
        # killed right after never leaves a checkpoint whose steps are missing in the database.
        self.flush(timeout=30)

    def log_checkpoint_deleted(self, step: int, path: str) -> None:
        self._journal_write({"kind": "checkpoint_deleted", "step": step, "path": str(path)})
        self._queue.put(("checkpoint_deleted", step))

    def log_line(self, level: str, message: str) -> None:
        self._queue.put(("line", str(level or "INFO").upper()[:10], str(message), timezone.now()))

    def should_stop(self) -> bool:
        return self.cancel_requested or self.fenced or self.error is not None

    def close(self) -> None:
        """Flush, stop the threads; raises what the writer hit, if anything."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._writer.join()
        self._stop_watch.set()
        self._watchdog.join()
        self._journal.close()
        if self.error is not None and not isinstance(self.error, RunFenced):
            raise RuntimeError(f"the run's reporter could not write to the database: {self.error!r}") from self.error

    # --- helpers -------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Block until everything queued so far is committed (or the writer died)."""
        if self._closed or not self._writer.is_alive():
            return False
        done = threading.Event()
        self._queue.put(("flush", done))
        return done.wait(timeout)

    @staticmethod
    def _clean(metrics: dict) -> dict[str, float]:
        out = {}
        for name, value in (metrics or {}).items():
            value = _finite(value)
            if value is not None:  # NaN/inf cannot be charted; they are left out, not stored as 0
                out[str(name)[:100]] = value
        return out

    def _journal_write(self, record: dict) -> None:
        record["attempt"] = self.attempt
        self._journal.write(json.dumps(record) + "\n")
        # Flushed to the OS at once: it survives a kill -9 of this process.
        self._journal.flush()

    # --- the writer thread ---------------------------------------------------------------

    def _write_loop(self):
        loop = asyncio.new_event_loop()  # one loop for the thread: the Redis layer keeps its pool
        try:
            stopping = False
            last_commit = time.monotonic()  # the first batch gathers for an interval as well
            while not stopping:
                item = self._queue.get()
                # Steps faster than this share a transaction: the fixed cost of a commit (and of
                # the notification) is paid once for them, for at most this much more latency.
                wait = last_commit + self.min_commit_interval - time.monotonic()
                if wait > 0 and item is not _STOP and item[0] != "flush":
                    time.sleep(wait)
                last_commit = time.monotonic()
                items = [item]
                # Drain what else is waiting: one transaction for many steps when the engine is
                # faster than the database.
                while True:
                    try:
                        items.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                batch = _Batch()
                for it in items:
                    if it is _STOP:
                        stopping = True
                    else:
                        self._add(batch, it)
                if self.error is None and not batch.empty():
                    try:
                        self._commit(batch)
                    except RunFenced as exc:
                        self.fenced = True
                        self.error = exc
                        log.warning("run %s: %s; dropping its further reports", self.run_id, exc)
                    except Exception as exc:  # noqa: BLE001 — recorded, raised by close()
                        self.error = exc
                        self.error_traceback = traceback.format_exc()
                        log.exception("run %s: writing reports failed", self.run_id)
                    else:
                        if self.notify:
                            self._notify(loop, batch.last_step)
                for event in batch.flush_events:
                    event.set()
        finally:
            connection.close()
            loop.close()

    @staticmethod
    def _add(batch: _Batch, item):
        kind = item[0]
        if kind in ("step", "eval"):
            _, step, wall, metrics, samples = item
            batch.points.extend({"step": step, "name": name, "value": value, "wall_time": wall} for name, value in metrics.items())
            batch.samples.extend(samples)
            batch.last_step = step if batch.last_step is None else max(batch.last_step, step)
            if kind == "step":  # only a trained step says where the engine resumed (evals may repeat)
                batch.first_step = step if batch.first_step is None else min(batch.first_step, step)
            if kind == "step" and "reward/mean" in metrics:
                batch.last_reward = metrics["reward/mean"]
            if kind == "eval" and "eval/accuracy" in metrics:
                batch.last_eval_accuracy = metrics["eval/accuracy"]
        elif kind == "checkpoint":
            _, step, path, size, metrics = item
            batch.checkpoints.append({"step": step, "path": path, "size_bytes": size, "metrics": metrics})
        elif kind == "checkpoint_deleted":
            batch.deleted_checkpoints.append(item[1])
        elif kind == "line":
            _, level, message, when = item
            batch.logs.append({"level": level, "message": message, "time": when})
        elif kind == "flush":
            batch.flush_events.append(item[1])

    def _commit(self, batch: _Batch):
        with transaction.atomic():
            # First statement: the run's progress, only if the run is still this attempt's. The
            # UPDATE also locks the row, so a resume (which updates it too) and this write
            # happen one after the other, never interleaved.
            self._fence_and_progress(batch)
            replay = []
            if self._first_batch and batch.first_step is not None:
                replay = self._start_curve_at(batch.first_step)
            # A journal point put back for a (step, name) this batch also has (e.g. the
            # evaluation at step 0 that both attempts made) must not win over this attempt's.
            points = [{"run_id": self.run_id, **p} for p in batch.points]
            if replay:
                own = {(p["step"], p["name"]) for p in points}
                points += [r for r in replay if (r["step"], r["name"]) not in own]
            if points:
                insert_ignore(MetricPoint, points)
            if batch.samples:
                insert_ignore(Trajectory, [trajectory_row(self.run_id, s) for s in batch.samples])
            if batch.logs:
                RunLog.objects.bulk_create([RunLog(run_id=self.run_id, **line) for line in batch.logs])
            for ckpt in batch.checkpoints:
                Checkpoint.objects.update_or_create(
                    run_id=self.run_id, step=ckpt["step"],
                    defaults={"path": ckpt["path"], "size_bytes": ckpt["size_bytes"], "metrics": ckpt["metrics"], "deleted": False},
                )
            if batch.deleted_checkpoints:
                Checkpoint.objects.filter(run_id=self.run_id, step__in=batch.deleted_checkpoints).update(deleted=True)

    def _fence_and_progress(self, batch: _Batch):
        updates = {"heartbeat_at": timezone.now()}
        if batch.last_step is not None:
            updates["current_step"] = Greatest(F("current_step"), batch.last_step)
        if batch.last_reward is not None:
            updates["last_reward"] = batch.last_reward
        if batch.last_eval_accuracy is not None:
            updates["last_eval_accuracy"] = batch.last_eval_accuracy
        if Run.objects.filter(pk=self.run_id, status=Run.Status.RUNNING, attempts=self.attempt).update(**updates):
            return
        row = Run.objects.filter(pk=self.run_id).values_list("status", "attempts").first()
        if row is None:
            raise RunFenced("the run was deleted")
        raise RunFenced(f"the run is now {row[0]} (attempt {row[1]}), not attempt {self.attempt}'s")

    def _start_curve_at(self, step: int) -> list[dict]:
        """First trained step of this attempt: see the module docstring (exact resume). Deletes
        what earlier attempts stored from `step` on; returns the journal's points before it, to
        be inserted (or ignored) after this attempt's own."""
        from rlweb.runs.services import discard_after

        discard_after(self.run_id, step - 1)
        rows = [
            {"run_id": self.run_id, "step": s, "name": n, "value": v, "wall_time": w}
            for (s, n), (v, w) in sorted(self._earlier_points.items()) if s < step
        ]
        if rows:
            log.info("run %s: attempt %s starts at step %s; %s earlier points checked from the journal", self.run_id, self.attempt, step, len(rows))
        self._first_batch = False
        self._earlier_points = {}
        return rows

    def _notify(self, loop, step):
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is None:
            return
        try:
            loop.run_until_complete(layer.group_send(group_name(self.run_id), {"type": "run.updated", "step": step}))
        except Exception:  # noqa: BLE001 — pages also poll; a lost notification only delays them
            log.warning("run %s: notifying the live pages failed", self.run_id, exc_info=True)

    # --- the watchdog thread ---------------------------------------------------------------

    def _watch_loop(self):
        last_beat = 0.0
        try:
            while not self._stop_watch.wait(self.poll_s if last_beat else 0):
                try:
                    now = time.monotonic()
                    if now - last_beat >= self.heartbeat_s:
                        last_beat = now
                        Run.objects.filter(pk=self.run_id, status=Run.Status.RUNNING, attempts=self.attempt).update(heartbeat_at=timezone.now())
                    row = Run.objects.filter(pk=self.run_id).values_list("status", "attempts", "cancel_requested").first()
                    if row is None:
                        self.fenced = True
                    else:
                        status, attempts, cancel = row
                        self.cancel_requested = bool(cancel)
                        if attempts != self.attempt or status != Run.Status.RUNNING:
                            self.fenced = True
                except Exception:  # noqa: BLE001 — a blip must not kill the heartbeat for good
                    log.warning("run %s: heartbeat failed", self.run_id, exc_info=True)
                    close_old_connections()
        finally:
            connection.close()


# --- rows --------------------------------------------------------------------------------

_TRAJECTORY_FIELDS = (
    "step", "split", "uid", "group_id", "prompt_index", "data_source", "status", "finish_reason", "reward",
    "reward_components", "advantage", "prompt_len", "response_len", "staleness", "zero_variance",
    "prompt", "response", "label", "explanation", "tokens",
)


def trajectory_row(run_id: int, record: dict) -> dict:
    """A Trajectory row from a Sample.to_record() dict (unknown keys are ignored)."""
    row = {"run_id": run_id}
    for name in _TRAJECTORY_FIELDS:
        if name in record:
            row[name] = record[name]
    row["reward"] = _finite(row.get("reward"))
    row["advantage"] = _finite(row.get("advantage"))
    row["uid"] = str(row.get("uid", ""))[:64]
    row["group_id"] = str(row.get("group_id", ""))[:64]
    row["data_source"] = str(row.get("data_source") or "")[:100]
    row["finish_reason"] = str(row.get("finish_reason") or "")[:20]
    row["status"] = str(row.get("status") or "completed")[:20]
    if row.get("split") not in ("train", "eval"):
        row["split"] = "train"
    return row


# --- journal -----------------------------------------------------------------------------


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def read_journal(out_dir: Path) -> list[dict]:
    path = Path(out_dir) / JOURNAL_NAME
    if not path.exists():
        return []
    records = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut short by a kill
    return records


def journal_points(records: list[dict], up_to_step: int | None = None) -> dict[tuple[int, str], tuple[float, float]]:
    """{(step, name): (value, wall_time)} as last reported (a later attempt wins), optionally
    only for steps <= up_to_step."""
    out = {}
    for rec in records:
        if rec.get("kind") not in ("step", "eval"):
            continue
        step = rec["step"]
        if up_to_step is not None and step > up_to_step:
            continue
        for name, value in rec.get("metrics", {}).items():
            out[(step, name)] = (value, rec.get("wall_time", 0.0))
    return out


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"[:200]
