from django.contrib import admin

from .models import Checkpoint, MetricPoint, Run, RunLog, Trajectory


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "owner", "status", "current_step", "total_steps", "last_reward", "created_at", "heartbeat_at")
    list_filter = ("status", "owner", "preset")
    search_fields = ("name",)
    readonly_fields = ("created_at", "started_at", "finished_at", "heartbeat_at", "celery_task_id", "worker")


@admin.register(MetricPoint)
class MetricPointAdmin(admin.ModelAdmin):
    list_display = ("run", "name", "step", "value")
    list_filter = ("name",)
    raw_id_fields = ("run",)
    show_full_result_count = False  # the table is large; an exact count would scan it


@admin.register(Trajectory)
class TrajectoryAdmin(admin.ModelAdmin):
    list_display = ("run", "step", "split", "group_id", "status", "finish_reason", "reward", "response_len")
    list_filter = ("split", "status", "finish_reason")
    raw_id_fields = ("run",)
    show_full_result_count = False

    def get_queryset(self, request):
        return super().get_queryset(request).defer(*Trajectory.BIG_FIELDS)


@admin.register(Checkpoint)
class CheckpointAdmin(admin.ModelAdmin):
    list_display = ("run", "step", "path", "size_bytes", "deleted", "created_at")
    list_filter = ("deleted",)
    raw_id_fields = ("run",)


@admin.register(RunLog)
class RunLogAdmin(admin.ModelAdmin):
    list_display = ("run", "time", "level", "message")
    list_filter = ("level",)
    raw_id_fields = ("run",)
