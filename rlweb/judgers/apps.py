from django.apps import AppConfig


class JudgersConfig(AppConfig):
    name = "rlweb.judgers"
    label = "judgers"
