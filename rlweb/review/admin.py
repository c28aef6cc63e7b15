from django.contrib import admin

from .models import RejudgeJob, SampleFlag


@admin.register(SampleFlag)
class SampleFlagAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "trajectory_id", "kind", "user", "created")
    list_filter = ("kind",)
    raw_id_fields = ("run", "trajectory", "user")
    search_fields = ("note",)


@admin.register(RejudgeJob)
class RejudgeJobAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "judger_name", "status", "done", "total", "disagree", "failed", "created_at")
    list_filter = ("status",)
    raw_id_fields = ("run", "created_by", "judger")
    readonly_fields = ("spec", "filters", "total", "done", "agree", "disagree", "failed", "celery_task_id", "started_at", "finished_at")
