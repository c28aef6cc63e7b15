from django.db import models
from django.utils import timezone

from rlweb.core.ownership import Owned


class Run(Owned):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"
        LOST = "lost", "lost (worker stopped)"

    ACTIVE = (Status.QUEUED, Status.RUNNING)
    RESUMABLE = (Status.FAILED, Status.LOST, Status.CANCELLED)

    name = models.CharField(max_length=200)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED, db_index=True)
    config = models.JSONField(help_text="the validated RunConfig, as JSON: enough to clone or re-run exactly")
    preset = models.CharField(max_length=100, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    current_step = models.PositiveIntegerField(default=0)
    total_steps = models.PositiveIntegerField(default=0)
    last_reward = models.FloatField(null=True, blank=True)
    last_eval_accuracy = models.FloatField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    error = models.TextField(blank=True, help_text="the exception and its traceback, when the run failed")
    celery_task_id = models.CharField(max_length=64, blank=True)
    worker = models.CharField(max_length=200, blank=True, help_text="host:pid of the worker running it")
    attempts = models.PositiveSmallIntegerField(default=0, help_text="1 + number of resumes")

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "-created_at"], name="run_owner_recent_idx")]

    def __str__(self):
        return f"{self.name} (#{self.pk})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def can_resume(self) -> bool:
        return self.status in self.RESUMABLE

    @property
    def progress(self) -> float:
        return min(1.0, self.current_step / self.total_steps) if self.total_steps else 0.0

    @property
    def duration(self):
        if not self.started_at:
            return None
        return (self.finished_at or timezone.now()) - self.started_at


class MetricPoint(models.Model):
    """One value of one named series at one step. Written idempotently: (run, name, step) is
    unique, so a resumed step never duplicates a point."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="metric_points")
    step = models.IntegerField()
    name = models.CharField(max_length=100)
    value = models.FloatField()
    wall_time = models.FloatField(help_text="seconds since the epoch when the value was measured")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "name", "step"], name="metricpoint_unique_run_name_step")]
        # The unique constraint's index serves series reads (run, name, step range).
        indexes = [models.Index(fields=["run", "id"], name="metricpoint_run_cursor_idx")]

    def __str__(self):
        return f"{self.name}@{self.step}={self.value}"


class Trajectory(models.Model):
    """One sample: a prompt, what the model wrote, and how it was judged. The text columns are
    big: list queries must .defer()/.only() them away."""

    class Split(models.TextChoices):
        TRAIN = "train"
        EVAL = "eval"

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="trajectories")
    step = models.IntegerField()
    split = models.CharField(max_length=5, choices=Split.choices, default=Split.TRAIN)
    uid = models.CharField(max_length=64)
    group_id = models.CharField(max_length=64, help_text="all n samples of one prompt at one step share it")
    prompt_index = models.IntegerField(null=True, blank=True, help_text="dataset row index of the prompt")
    data_source = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=20, default="completed")
    finish_reason = models.CharField(max_length=20, blank=True)
    reward = models.FloatField(null=True, blank=True)
    reward_components = models.JSONField(default=dict, blank=True)
    advantage = models.FloatField(null=True, blank=True)
    prompt_len = models.IntegerField(default=0)
    response_len = models.IntegerField(default=0)
    staleness = models.IntegerField(default=0)
    zero_variance = models.BooleanField(default=False, help_text="every sample of its group had the same reward")
    # Big columns.
    prompt = models.TextField(blank=True)
    response = models.TextField(blank=True)
    label = models.TextField(blank=True)
    explanation = models.TextField(blank=True)
    tokens = models.JSONField(default=list, blank=True, help_text="[[token text, logprob, mask], ...]")
    created_at = models.DateTimeField(auto_now_add=True)

    BIG_FIELDS = ("prompt", "response", "label", "explanation", "tokens")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "split", "step", "uid"], name="trajectory_unique_sample")]
        indexes = [
            models.Index(fields=["run", "split", "step"], name="traj_run_step_idx"),
            models.Index(fields=["run", "group_id"], name="traj_run_group_idx"),
            models.Index(fields=["run", "id"], name="traj_run_cursor_idx"),
        ]

    def __str__(self):
        return f"run {self.run_id} step {self.step} {self.uid}"


class Checkpoint(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="checkpoints")
    step = models.IntegerField()
    path = models.CharField(max_length=1000)
    size_bytes = models.BigIntegerField(default=0)
    metrics = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    deleted = models.BooleanField(default=False, help_text="removed from disk by the keep-N policy")

    class Meta:
        ordering = ["run", "step"]
        constraints = [models.UniqueConstraint(fields=["run", "step"], name="checkpoint_unique_run_step")]

    def __str__(self):
        return f"run {self.run_id} step {self.step}"


class RunLog(models.Model):
    """Log lines of a run, for the live log tail on its page."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="logs")
    time = models.DateTimeField(default=timezone.now)
    level = models.CharField(max_length=10, default="INFO")
    message = models.TextField()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["run", "id"], name="runlog_run_cursor_idx")]
