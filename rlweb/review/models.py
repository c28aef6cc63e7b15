"""Rollout review: people's flags on samples, and re-judge jobs that score a run's stored samples
with another judger so the two scores can be compared sample by sample."""

from django.conf import settings
from django.db import models

from rlweb.runs.models import Run, Trajectory


class SampleFlag(models.Model):
    """A reviewer's mark on one sample, with a note ("the judger accepted 41 for 42")."""

    class Kind(models.TextChoices):
        JUDGER_WRONG = "judger_wrong", "judger wrong"
        REWARD_HACKING = "reward_hacking", "reward hacking"
        GOOD_EXAMPLE = "good_example", "good example"

    id = models.BigAutoField(primary_key=True)
    # The run is the trajectory's run, stored again so that a run's flags list without a join
    # through a table of millions of samples.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="flags")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    note = models.TextField(blank=True, max_length=5000)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["run", "-id"], name="flag_run_recent_idx")]

    def __str__(self):
        return f"{self.get_kind_display()} on sample {self.trajectory_id}"

    def as_export(self) -> dict:
        return {"kind": self.kind, "note": self.note, "user": self.user.username, "created": self.created.isoformat()}


class RejudgeJob(models.Model):
    """Scoring a run's stored samples again with a judger (a snapshot of its spec, so editing the
    judger later does not change what this job meant)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="rejudge_jobs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    judger = models.ForeignKey("judgers.JudgerConfig", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    judger_name = models.CharField(max_length=200)
    spec = models.JSONField(help_text="the judger spec as it was when the job was created")
    filters = models.JSONField(default=dict, blank=True, help_text="the sample filters (query parameters) the job applies to")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    agree = models.PositiveIntegerField(default=0)
    disagree = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0, help_text="samples the new judger could not judge")
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    celery_task_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"re-judge of run {self.run_id} with {self.judger_name} (#{self.pk})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def progress(self) -> float:
        return min(1.0, self.done / self.total) if self.total else (1.0 if self.status == self.Status.COMPLETED else 0.0)


class RejudgeScore(models.Model):
    """The new judger's verdict on one sample, next to the score the run gave it."""

    class Status(models.TextChoices):
        COMPLETED = "completed"
        FAILED = "failed"

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(RejudgeJob, on_delete=models.CASCADE, related_name="scores")
    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="rejudge_scores")
    score = models.FloatField(null=True, blank=True)
    old_score = models.FloatField(null=True, blank=True, help_text="the run's reward when the job scored it")
    components = models.JSONField(default=dict, blank=True)
    explanation = models.TextField(blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.COMPLETED)
    disagrees = models.BooleanField(default=False, help_text="the new score differs from the run's (or only one judger failed)")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "trajectory"], name="rejudgescore_unique_job_sample")]
        indexes = [models.Index(fields=["job", "disagrees", "trajectory"], name="rejudgescore_disagree_idx")]

    def __str__(self):
        return f"job {self.job_id} sample {self.trajectory_id}: {self.old_score} -> {self.score}"
