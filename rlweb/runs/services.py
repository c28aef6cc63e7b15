"""What can happen to a run: launch, cancel, resume, clone, and being declared lost.

Views, the API and management commands call these; each checks who may do it and keeps the run's
state transitions (DESIGN §6) in one place:

    queued → running → completed | failed | cancelled
    running → lost (heartbeat stopped)           failed | lost | cancelled → queued (resume)
"""

from __future__ import annotations

import copy
import logging
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from rlweb.core.params import parse_int
from workers.rl.config import BUILTIN_TINY_MODEL, ConfigError, RunConfig, parse_config

from .live import group_name
from .models import Checkpoint, MetricPoint, Run, RunLog, Trajectory

log = logging.getLogger(__name__)

DEMO_PRESET = "tiny-arith-grpo"  # the CPU demo: first in the launch form, launched by scripts/demo.sh
DATASET_PREFIX = "dataset:"
BUILTIN_PREFIX = "builtin:"


class RunStateError(ValueError):
    """The action does not apply to the run's current state (e.g. resuming a completed run)."""


def run_dir(run_id: int) -> Path:
    """Where a run's checkpoints, exported data and journal live."""
    return Path(settings.DATA_DIR) / "runs" / str(run_id)


# --- launch ------------------------------------------------------------------------------


def _dataset_id(ref: str | None) -> int | None:
    if not ref or not ref.startswith(DATASET_PREFIX):
        return None
    dataset_id = parse_int(ref[len(DATASET_PREFIX):].strip())
    if dataset_id is None:
        raise ConfigError([("", f"'{ref}': a dataset reference is 'dataset:<id>' with a numeric id")])
    return dataset_id


def check_data_refs(owner, config: RunConfig) -> list[tuple[str, str]]:
    """Errors for data references the owner may not use: others' or missing datasets, datasets
    without rows in the split they are used for, and server paths (staff only)."""
    from rlweb.datasets.models import Dataset

    errors = []
    for path, ref, split in (("data.train", config.data.train, "train"), ("data.eval", config.data.eval, "eval")):
        if not ref:
            continue
        try:
            dataset_id = _dataset_id(ref)
        except ConfigError as exc:
            errors.append((path, exc.errors[0][1]))
            continue
        if dataset_id is not None:
            dataset = Dataset.objects.visible_to(owner).filter(pk=dataset_id).first()
            if dataset is None:
                errors.append((path, f"no dataset #{dataset_id} that you can use"))
            elif dataset.status != Dataset.Status.READY:
                errors.append((path, f"dataset '{dataset.name}' is {dataset.status}, not ready"))
            elif (dataset.train_count if split == "train" else dataset.eval_count) == 0 and dataset.row_count:
                errors.append((path, f"dataset '{dataset.name}' has no {split} rows"))
        elif not ref.startswith(BUILTIN_PREFIX) and not owner.is_staff:
            # A path is read by the worker: letting anyone name one would let them read server files.
            errors.append((path, "use a stored dataset ('dataset:<id>') or 'builtin:arith'; server file paths are for staff"))
    model_path = config.model.path
    if model_path != BUILTIN_TINY_MODEL:
        if model_path.startswith(BUILTIN_PREFIX):
            errors.append(("model.path", f"unknown builtin model {model_path!r}"))
        else:
            resolved = Path(model_path).expanduser().resolve()
            if not any(resolved == root or root in resolved.parents for root in settings.MODEL_ROOTS):
                roots = ", ".join(str(r) for r in settings.MODEL_ROOTS)
                errors.append(("model.path", f"models load only from under MODEL_ROOTS ({roots})"))
    return errors


def resolve_judger(owner, judger) -> dict:
    """The judger spec (a plain dict) of one of the owner's JudgerConfigs, references resolved,
    so that the stored run config is self-contained."""
    from rlweb.judgers.models import JudgerConfig

    if not isinstance(judger, JudgerConfig):
        judger = JudgerConfig.objects.visible_to(owner).filter(pk=judger).first()
        if judger is None:
            raise ConfigError([("judger", "no such judger that you can use")])
    elif not judger.is_visible_to(owner):
        raise ConfigError([("judger", "no such judger that you can use")])
    from django.core.exceptions import ValidationError

    from rlweb.judgers.services import resolve_spec

    try:
        return resolve_spec(judger)
    except ValidationError as exc:
        raise ConfigError([("judger", f"judger '{judger.name}' no longer validates: {'; '.join(exc.messages)}")]) from None


def validate_launch(owner, config_dict: dict, judger=None) -> RunConfig:
    """The RunConfig a launch would store, or ConfigError with (field path, message) entries."""
    data = copy.deepcopy(config_dict)
    if judger not in (None, ""):
        data["judger"] = resolve_judger(owner, judger)
    config = parse_config(data)
    errors = check_data_refs(owner, config)
    if errors:
        raise ConfigError(errors)
    return config


def launch_run(owner, config_dict: dict, name: str | None = None, preset: str = "", judger=None) -> Run:
    """Validate, store and enqueue a run. Raises ConfigError (with field paths) on a bad config."""
    config = validate_launch(owner, config_dict, judger)
    if name:
        config.name = name[:200]
    with transaction.atomic():
        run = Run.objects.create(
            owner=owner,
            name=config.name,
            config=config.model_dump(mode="json"),
            preset=preset[:100],
            total_steps=config.schedule.total_steps,
            attempts=1,
        )
        RunLog.objects.create(run=run, message=f"queued by {owner.username}" + (f" from preset {preset}" if preset else ""))
        _enqueue_on_commit(run.pk, 1)
    log.info("run %s launched by %s", run.pk, owner.username)
    return run


def _enqueue_on_commit(run_id: int, attempt: int):
    def send():
        from workers.tasks import train_run

        result = train_run.apply_async(args=(run_id, attempt))
        Run.objects.filter(pk=run_id, attempts=attempt).update(celery_task_id=result.id or "")

    transaction.on_commit(send)


def clone_config(run: Run, user) -> dict:
    """The run's config as a dict for the launch form (name marked as a copy)."""
    _check_access(run, user)
    data = copy.deepcopy(run.config)
    data["name"] = f"{run.name} (copy)"[:200]
    return data


# --- cancel and resume -------------------------------------------------------------------


def _check_access(run: Run, user):
    if not run.is_visible_to(user):
        raise PermissionDenied("not your run")


def cancel_run(run: Run, user) -> Run:
    """A queued run is cancelled at once; a running one is asked to stop at its next step
    boundary (the worker reads the flag and records the cancellation)."""
    _check_access(run, user)
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status == Run.Status.QUEUED:
            run.status = Run.Status.CANCELLED
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "finished_at"])
            RunLog.objects.create(run=run, level="WARNING", message=f"cancelled by {user.username} before it started")
        elif run.status == Run.Status.RUNNING:
            run.cancel_requested = True
            run.save(update_fields=["cancel_requested"])
            RunLog.objects.create(run=run, level="WARNING", message=f"cancel requested by {user.username}; stopping at the next step")
        else:
            raise RunStateError(f"a {run.status} run cannot be cancelled")
    notify(run.pk)
    return run


def resume_point(run: Run, check_disk: bool = False) -> int:
    """The step the next attempt continues after: its latest recorded checkpoint (-1: none, the
    run starts over). The worker, which sees the run's files, also checks it is on disk; the web
    process may not share that disk and trusts the records."""
    steps = run.checkpoints.filter(deleted=False).order_by("-step").values_list("step", "path")
    for step, path in steps:
        if not check_disk or Path(path).exists():
            return step
    return -1


def discard_after(run_id: int, step: int) -> None:
    """Remove what an earlier attempt wrote after `step`: the next attempt recomputes those steps,
    and the curve must be exactly the resumed run's."""
    MetricPoint.objects.filter(run_id=run_id, step__gt=step).delete()
    Trajectory.objects.filter(run_id=run_id, step__gt=step).delete()
    Checkpoint.objects.filter(run_id=run_id, step__gt=step).delete()


def resume_run(run: Run, user) -> Run:
    """Queue the same run again (attempt + 1) to continue from its last checkpoint."""
    _check_access(run, user)
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if not run.can_resume:
            raise RunStateError(f"a {run.status} run cannot be resumed")
        keep = resume_point(run)
        discard_after(run.pk, keep)
        last_reward = (
            MetricPoint.objects.filter(run_id=run.pk, name="reward/mean", step__lte=keep).order_by("-step").values_list("value", flat=True).first()
        )
        run.status = Run.Status.QUEUED
        run.attempts += 1
        run.cancel_requested = False
        run.error = ""
        run.heartbeat_at = None
        run.finished_at = None
        run.current_step = max(keep, 0)
        run.last_reward = last_reward
        run.save()
        where = f"from the checkpoint of step {keep}" if keep >= 0 else "from the start (no checkpoint)"
        RunLog.objects.create(run=run, message=f"resumed by {user.username} {where}; attempt {run.attempts}")
        _enqueue_on_commit(run.pk, run.attempts)
    notify(run.pk)
    return run


# --- lost runs ---------------------------------------------------------------------------


def reap_lost_runs(now=None) -> list[int]:
    """Mark running runs whose heartbeat stopped as lost. Cheap (an indexed status filter), so
    pages call it too: a killed worker takes its embedded beat scheduler with it."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.RUN_LOST_AFTER_SECONDS)
    stale = Run.objects.filter(status=Run.Status.RUNNING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    )
    lost = []
    for run_id, beat in stale.values_list("pk", "heartbeat_at"):
        # Conditional on the heartbeat we saw: a worker that just beat keeps its run.
        changed = Run.objects.filter(pk=run_id, status=Run.Status.RUNNING, heartbeat_at=beat).update(
            status=Run.Status.LOST,
            finished_at=now,
            error=f"The worker stopped sending heartbeats (last at {beat:%Y-%m-%d %H:%M:%S} UTC). Resume continues from the last checkpoint."
            if beat else "The worker never sent a heartbeat.",
        )
        if changed:
            RunLog.objects.create(run_id=run_id, level="ERROR", message="lost: the worker stopped sending heartbeats")
            lost.append(run_id)
            notify(run_id)
    if lost:
        log.warning("marked runs lost: %s", lost)
    return lost


def notify(run_id: int) -> None:
    """Tell live pages of the run to re-read it (status changes made outside the worker)."""
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group_name(run_id), {"type": "run.updated"})
    except Exception:  # noqa: BLE001 — pages poll as well
        log.warning("notifying run %s failed", run_id, exc_info=True)
