from django.contrib import admin
from django.utils.html import format_html

from .forms import display_params
from .models import JudgerConfig


@admin.register(JudgerConfig)
class JudgerConfigAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "owner", "ray_actors", "updated_at")
    list_filter = ("kind", "owner")
    search_fields = ("name", "description")
    # Params hold http headers (tokens): never render them, not even for staff. They are edited
    # on the judger's own page, which keeps secrets without showing them.
    exclude = ("params",)
    readonly_fields = ("parameters",)

    @admin.display(description="parameters")
    def parameters(self, judger):
        return format_html("<br>".join("{}: {}" for _ in display_params(judger)), *[v for pair in display_params(judger) for v in pair]) if judger.params else "—"
