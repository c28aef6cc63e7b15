from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "rlweb.review"
    label = "review"
    verbose_name = "Rollout review"
