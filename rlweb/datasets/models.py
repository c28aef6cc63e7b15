from datetime import timedelta

from django.db import models
from django.utils import timezone

from rlweb.core.ownership import Owned


class Dataset(Owned):
    class Status(models.TextChoices):
        IMPORTING = "importing"
        READY = "ready"
        FAILED = "failed"

    class Source(models.TextChoices):
        UPLOAD = "upload", "Uploaded file"
        HF_DIR = "hf_dir", "Local Hugging Face dataset"
        BUILTIN = "builtin", "Built-in task"

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.UPLOAD)
    source_name = models.CharField(max_length=500, blank=True, help_text="file name, directory or task")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.IMPORTING, db_index=True)
    row_count = models.PositiveIntegerField(default=0)
    train_count = models.PositiveIntegerField(default=0)
    eval_count = models.PositiveIntegerField(default=0)
    # Progress of a running import (bytes read of bytes total; rows for Parquet): the progress bar.
    progress_done = models.BigIntegerField(default=0)
    progress_total = models.BigIntegerField(default=0)
    field_summary = models.JSONField(default=dict, blank=True)
    import_report = models.JSONField(default=dict, blank=True, help_text="errors, skipped rows, duplicates")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="dataset_unique_name_per_owner")]

    def __str__(self):
        return self.name

    # An import writes progress (and updated_at) at least every few seconds on Postgres; one
    # silent this long lost its worker. It may then be deleted (and uploaded again).
    STALLED_AFTER = timedelta(minutes=10)

    @property
    def import_stalled(self) -> bool:
        return self.status == self.Status.IMPORTING and timezone.now() - self.updated_at > self.STALLED_AFTER


class DatasetRow(models.Model):
    class Split(models.TextChoices):
        TRAIN = "train"
        EVAL = "eval"

    # No index of its own: the unique (dataset, index) constraint serves lookups by dataset, and
    # one index fewer makes bulk imports faster.
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="rows", db_index=False)
    index = models.PositiveIntegerField(help_text="position in the imported file, from 0")
    split = models.CharField(max_length=5, choices=Split.choices, default=Split.TRAIN)
    prompt = models.TextField(blank=True)
    messages = models.JSONField(null=True, blank=True, help_text="chat messages, when the row is a conversation")
    answer = models.TextField(blank=True)
    data_source = models.CharField(max_length=100, blank=True)
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["dataset", "index"]
        constraints = [models.UniqueConstraint(fields=["dataset", "index"], name="datasetrow_unique_index")]
        indexes = [models.Index(fields=["dataset", "split", "index"], name="datasetrow_split_idx")]

    def __str__(self):
        return f"{self.dataset_id}#{self.index}"
