from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "rlweb.datasets"
    label = "datasets"
