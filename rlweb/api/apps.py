from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "rlweb.api"
    label = "api"
    verbose_name = "Admin API"
