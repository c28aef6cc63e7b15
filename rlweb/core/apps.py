from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "rlweb.core"
    label = "core"
    verbose_name = "Core"
