from django.urls import path

from . import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("new/", views.run_new, name="new"),
    path("new/estimate/", views.run_estimate, name="estimate"),
    path("summaries/", views.run_summaries, name="summaries"),
    path("<int:pk>/", views.run_detail, name="detail"),
    path("<int:pk>/series/", views.run_series, name="series"),
    path("<int:pk>/metrics/", views.run_metric_names, name="metric_names"),
    path("<int:pk>/config.yaml", views.run_config_yaml, name="config_yaml"),
    path("<int:pk>/cancel/", views.run_cancel, name="cancel"),
    path("<int:pk>/resume/", views.run_resume, name="resume"),
    path("<int:pk>/clone/", views.run_clone, name="clone"),
]
