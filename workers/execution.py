"""Executing one attempt of a run inside a Celery worker: claim it, prepare its data, run the
engine with a DB reporter, record how it ended.

The engine (workers.rl) is imported only here, inside the function, so that the web process,
which imports workers.tasks to enqueue, never loads torch or Ray.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import shutil
import sys
import traceback
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from rlweb.runs.models import Run, RunLog
from rlweb.runs.services import DATASET_PREFIX, _dataset_id, notify, run_dir
from workers.reporting import DBReporter, worker_name

log = logging.getLogger(__name__)

ENGINE_LOGGER = "workers.rl"


def claim(run_id: int, attempt: int | None) -> Run | None:
    """queued → running, for this attempt only. None if the run is not ours to run (cancelled
    while queued, a redelivered message of an old attempt, already running elsewhere)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            log.warning("run %s does not exist", run_id)
            return None
        if attempt is not None and run.attempts != attempt:
            log.warning("run %s: message of attempt %s, but the run is at attempt %s; skipped", run_id, attempt, run.attempts)
            return None
        if run.status != Run.Status.QUEUED:
            log.warning("run %s is %s, not queued; skipped", run_id, run.status)
            return None
        now = timezone.now()
        run.status = Run.Status.RUNNING
        run.started_at = run.started_at or now
        run.heartbeat_at = now
        run.worker = worker_name()
        run.save(update_fields=["status", "started_at", "heartbeat_at", "worker"])
        RunLog.objects.create(run=run, message=f"attempt {run.attempts} started on {run.worker}")
    notify(run_id)
    return run


def finish(run: Run, status: str, error: str = "", message: str = "", level: str = "INFO") -> bool:
    """running → status, only if the run is still this attempt's."""
    with transaction.atomic():
        changed = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING, attempts=run.attempts).update(
            status=status, finished_at=timezone.now(), error=error, cancel_requested=False,
        )
        if changed and message:
            RunLog.objects.create(run_id=run.pk, level=level, message=message)
    notify(run.pk)
    return bool(changed)


def engine_config(run: Run, out_dir: Path) -> dict:
    """The stored config with 'dataset:<id>' references replaced by JSONL exports of the rows
    (checked again here: the owner may have lost access since launch)."""
    from rlweb.datasets.models import Dataset

    data = copy.deepcopy(run.config)
    section = data.setdefault("data", {})
    for key, split in (("train", "train"), ("eval", "eval")):
        ref = section.get(key)
        if not isinstance(ref, str) or not ref.startswith(DATASET_PREFIX):
            continue
        dataset = Dataset.objects.visible_to(run.owner).filter(pk=_dataset_id(ref), status=Dataset.Status.READY).first()
        if dataset is None:
            raise PermissionError(f"data.{key}: dataset {ref} does not exist or its owner cannot use it")
        from rlweb.datasets.services import export_rows_jsonl

        path = out_dir / "data" / f"{key}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        export_rows_jsonl(dataset, split, path)
        section[key] = str(path)
    return data


@contextlib.contextmanager
def _real_std_streams():
    """Celery replaces sys.stdout/stderr with logging proxies that have no file descriptor;
    Ray (faulthandler) and some libraries need real ones while the engine runs."""
    saved = sys.stdout, sys.stderr
    if getattr(sys, "__stdout__", None) is not None and _no_fileno(sys.stdout):
        sys.stdout = sys.__stdout__
    if getattr(sys, "__stderr__", None) is not None and _no_fileno(sys.stderr):
        sys.stderr = sys.__stderr__
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def _no_fileno(stream) -> bool:
    try:
        stream.fileno()
    except Exception:  # noqa: BLE001 — AttributeError, io.UnsupportedOperation, ...
        return True
    return False


class _EngineLogToReporter(logging.Handler):
    """The engine's own log records (INFO and up) go to the run's log tail as well."""

    def __init__(self, reporter: DBReporter):
        super().__init__(logging.INFO)
        self.reporter = reporter

    def emit(self, record):
        try:
            self.reporter.log_line(record.levelname, self.format(record))
        except Exception:  # noqa: BLE001
            self.handleError(record)


def execute(run_id: int, attempt: int | None = None, train=None) -> str | None:
    """Run one attempt; returns the final status (None when the run was not ours to run).
    `train` defaults to the engine's workers.rl.trainer.train (tests pass a scripted engine)."""
    run = claim(run_id, attempt)
    if run is None:
        return None
    out_dir = run_dir(run.pk)
    if run.attempts == 1 and out_dir.exists():
        # A first attempt has nothing to resume: files here belong to an earlier database (run
        # ids start over when a database is recreated) and must not be resumed from.
        log.warning("run %s: removing the stale directory %s before its first attempt", run.pk, out_dir)
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    reporter = DBReporter(run.pk, run.attempts, out_dir)
    handler = _EngineLogToReporter(reporter)
    engine_log = logging.getLogger(ENGINE_LOGGER)
    engine_log.addHandler(handler)
    if engine_log.getEffectiveLevel() > logging.INFO:
        engine_log.setLevel(logging.INFO)
    result, failure = None, None
    try:
        from workers.rl.config import parse_config

        if train is None:
            from workers.rl.trainer import train
        config = parse_config(engine_config(run, out_dir))
        with _real_std_streams():
            result = train(config, out_dir, reporter, resume=True)
    except BaseException as exc:  # noqa: BLE001 — stored with its traceback, shown on the page
        failure = "".join(traceback.format_exception(exc))
        log.exception("run %s failed", run.pk)
        if not isinstance(exc, Exception):
            raise
    finally:
        engine_log.removeHandler(handler)
        try:
            reporter.close()
        except Exception:  # noqa: BLE001
            failure = failure or traceback.format_exc()
    if reporter.fenced:
        log.warning("run %s: attempt %s is no longer the run's; leaving its state alone", run.pk, run.attempts)
        return None
    if failure:
        last = failure.strip().splitlines()[-1] if failure.strip() else "error"
        finish(run, Run.Status.FAILED, error=failure, message=f"failed: {last}", level="ERROR")
        return Run.Status.FAILED
    run.refresh_from_db(fields=["current_step", "total_steps"])
    # The engine's summary says whether it stopped early ({"status": "cancelled"}); without one,
    # judge by where the run got to.
    summary = result if isinstance(result, dict) else {}
    if "status" in summary:
        stopped = summary["status"] == "cancelled"
    elif "stopped" in summary:
        stopped = bool(summary["stopped"])
    else:
        stopped = reporter.cancel_requested and run.current_step < run.total_steps
    if reporter.cancel_requested and stopped:
        finish(run, Run.Status.CANCELLED, message=f"cancelled at step {run.current_step}", level="WARNING")
        return Run.Status.CANCELLED
    finish(run, Run.Status.COMPLETED, message=f"completed {run.current_step} steps")
    return Run.Status.COMPLETED
