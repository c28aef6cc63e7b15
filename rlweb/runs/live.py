"""What a live page has not seen yet: rows after its cursor.

The database is the source of truth. A cursor is the highest row id the client has of each kind
(metric points, samples, log lines). Each table's ids grow in commit order for one run (a run has
one writer at a time), so "id > cursor" gives exactly what was missed: nothing lost after a
reconnect, nothing twice.
"""

from dataclasses import dataclass, field

from .models import MetricPoint, Run, RunLog, Trajectory

BATCH = 5000
SAMPLE_BATCH = 200


@dataclass
class Cursor:
    metrics: int = 0
    samples: int = 0
    logs: int = 0

    @classmethod
    def from_client(cls, data) -> "Cursor":
        data = data if isinstance(data, dict) else {}

        def as_int(key):
            try:
                return max(0, int(data.get(key, 0)))
            except (TypeError, ValueError):
                return 0

        return cls(metrics=as_int("metrics"), samples=as_int("samples"), logs=as_int("logs"))

    def as_dict(self) -> dict:
        return {"metrics": self.metrics, "samples": self.samples, "logs": self.logs}


@dataclass
class Changes:
    run: dict
    metrics: list = field(default_factory=list)
    samples: list = field(default_factory=list)
    logs: list = field(default_factory=list)
    more: bool = False  # a batch limit was hit: ask again right away

    @property
    def empty(self) -> bool:
        return not (self.metrics or self.samples or self.logs)


def run_summary(run: Run) -> dict:
    return {
        "id": run.pk,
        "status": run.status,
        "current_step": run.current_step,
        "total_steps": run.total_steps,
        "last_reward": run.last_reward,
        "last_eval_accuracy": run.last_eval_accuracy,
        "heartbeat_at": run.heartbeat_at.isoformat() if run.heartbeat_at else None,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "attempts": run.attempts,
        "cancel_requested": run.cancel_requested,
        "can_resume": run.can_resume,
        "error": run.error[-2000:] if run.error else "",
        # What is on disk (keep-N bounds it); the ones pruned away are only counted.
        "checkpoints": [
            [step, path, size, False]
            for step, path, size in run.checkpoints.filter(deleted=False).order_by("-step").values_list("step", "path", "size_bytes")[:20]
        ],
        "checkpoints_removed": run.checkpoints.filter(deleted=True).count(),
    }


def changes_since(run_id: int, cursor: Cursor, with_samples: bool = True) -> Changes:
    """Rows of the run after `cursor`; advances `cursor` in place."""
    run = Run.objects.get(pk=run_id)
    out = Changes(run=run_summary(run))

    points = list(
        MetricPoint.objects.filter(run_id=run_id, id__gt=cursor.metrics)
        .order_by("id")
        .values_list("id", "step", "name", "value", "wall_time")[:BATCH]
    )
    if points:
        cursor.metrics = points[-1][0]
        out.metrics = [[step, name, value, wall] for _, step, name, value, wall in points]
        out.more |= len(points) == BATCH

    if with_samples:
        samples = list(
            Trajectory.objects.filter(run_id=run_id, id__gt=cursor.samples)
            .order_by("id")
            .values(
                "id", "step", "split", "group_id", "data_source", "status", "finish_reason",
                "reward", "advantage", "response_len", "staleness",
            )[:SAMPLE_BATCH]
        )
        if samples:
            cursor.samples = samples[-1]["id"]
            out.samples = samples
            out.more |= len(samples) == SAMPLE_BATCH

    logs = list(
        RunLog.objects.filter(run_id=run_id, id__gt=cursor.logs).order_by("id").values_list("id", "time", "level", "message")[:BATCH]
    )
    if logs:
        cursor.logs = logs[-1][0]
        out.logs = [[t.isoformat(), level, msg] for _, t, level, msg in logs]
        out.more |= len(logs) == BATCH
    return out


def group_name(run_id: int) -> str:
    return f"run-{run_id}"
