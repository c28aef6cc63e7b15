from django.contrib import admin

from .models import Dataset, DatasetRow


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "status", "source", "row_count", "train_count", "eval_count", "created_at")
    list_filter = ("status", "source", "owner")
    search_fields = ("name", "description", "source_name")
    readonly_fields = ("created_at", "updated_at", "progress_done", "progress_total")


@admin.register(DatasetRow)
class DatasetRowAdmin(admin.ModelAdmin):
    list_display = ("dataset", "index", "split", "data_source", "short_prompt", "answer")
    list_filter = ("split", "data_source")
    search_fields = ("prompt", "answer")
    list_select_related = ("dataset",)
    raw_id_fields = ("dataset",)
    show_full_result_count = False  # counting millions of rows on every page is slow

    @admin.display(description="prompt")
    def short_prompt(self, row):
        return (row.prompt or "")[:80]
