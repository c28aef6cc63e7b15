from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "rlweb.runs"
    label = "runs"
