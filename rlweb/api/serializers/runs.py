from rest_framework import serializers

from rlweb.runs.models import Checkpoint, MetricPoint, Run, RunLog, Trajectory
from workers.rl.config import RunConfig

from ..schema import PydanticModelField


class RunSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    progress = serializers.FloatField(read_only=True, help_text="current_step / total_steps, from 0 to 1.")
    is_active = serializers.BooleanField(read_only=True, help_text="queued or running.")
    can_resume = serializers.BooleanField(read_only=True, help_text="failed, lost or cancelled: resumable from its last checkpoint.")

    class Meta:
        model = Run
        fields = [
            "id", "name", "owner", "status", "preset", "created_at", "started_at", "finished_at", "heartbeat_at",
            "current_step", "total_steps", "progress", "last_reward", "last_eval_accuracy", "cancel_requested",
            "attempts", "is_active", "can_resume",
        ]
        read_only_fields = fields


class RunDetailSerializer(RunSerializer):
    config = PydanticModelField(RunConfig, read_only=True, help_text="The validated RunConfig the run trains with.")

    class Meta(RunSerializer.Meta):
        fields = RunSerializer.Meta.fields + ["config", "error", "worker"]
        read_only_fields = fields


class MetricPointSerializer(serializers.ModelSerializer):
    class Meta:
        model = MetricPoint
        fields = ["step", "name", "value", "wall_time"]


class SampleSerializer(serializers.ModelSerializer):
    """A sample as listed: without its big text columns unless asked for (text=true)."""

    class Meta:
        model = Trajectory
        fields = [
            "id", "step", "split", "uid", "group_id", "prompt_index", "data_source", "status", "finish_reason",
            "reward", "reward_components", "advantage", "prompt_len", "response_len", "staleness", "zero_variance",
            "created_at",
        ]


class SampleWithTextSerializer(SampleSerializer):
    class Meta(SampleSerializer.Meta):
        fields = SampleSerializer.Meta.fields + ["prompt", "response", "label", "explanation"]


class SampleDetailSerializer(SampleSerializer):
    tokens = serializers.JSONField(help_text="[[token text, logprob, mask], ...] of the response.")

    class Meta(SampleSerializer.Meta):
        fields = SampleWithTextSerializer.Meta.fields + ["tokens"]


class CheckpointSerializer(serializers.ModelSerializer):
    download = serializers.SerializerMethodField(help_text="URL that streams the checkpoint (null once deleted).")

    class Meta:
        model = Checkpoint
        fields = ["step", "size_bytes", "metrics", "created_at", "deleted", "download"]

    def get_download(self, checkpoint) -> str | None:
        if checkpoint.deleted:
            return None
        from django.urls import reverse

        url = reverse("api:run-checkpoint-download", kwargs={"run_id": checkpoint.run_id, "step": checkpoint.step})
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request else url


class RunLogSerializer(serializers.ModelSerializer):
    class Meta:
        model = RunLog
        fields = ["id", "time", "level", "message"]
