from django.contrib import admin

from .models import JudgerConfig


@admin.register(JudgerConfig)
class JudgerConfigAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "owner", "ray_actors", "updated_at")
    list_filter = ("kind", "owner")
    search_fields = ("name", "description")
