from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from .views import account, datasets, docs, judgers, run_data, runs
from .views.base import UnknownEndpoint

router = SimpleRouter()
router.register("runs", runs.RunViewSet, basename="run")
router.register("datasets", datasets.DatasetViewSet, basename="dataset")
router.register("judgers", judgers.JudgerViewSet, basename="judger")

# Ids in paths are integers, so no literal route (samples/export/) can be read as an id; a
# malformed id matches nothing here and gets UnknownEndpoint's JSON 404, not an HTML page.
RUN = "runs/<int:run_id>/"

app_name = "api"
urlpatterns = [
    path("schema/", docs.SchemaView.as_view(), name="schema"),
    path("docs/", docs.DocsView.as_view(), name="docs"),
    path("me/", account.MeView.as_view(), name="me"),
    path("token/", account.TokenView.as_view(), name="token"),
    path(RUN + "metrics/", run_data.MetricNamesView.as_view(), name="run-metric-names"),
    path(RUN + "series/", run_data.SeriesView.as_view(), name="run-series"),
    path(RUN + "metrics/points/", run_data.MetricPointsView.as_view(), name="run-metric-points"),
    path(RUN + "samples/", run_data.SampleListView.as_view(), name="run-samples"),
    path(RUN + "samples/export/", run_data.SampleExportView.as_view(), name="run-samples-export"),
    path(RUN + "samples/<int:sample_id>/", run_data.SampleDetailView.as_view(), name="run-sample-detail"),
    path(RUN + "logs/", run_data.RunLogView.as_view(), name="run-logs"),
    path(RUN + "checkpoints/", run_data.CheckpointListView.as_view(), name="run-checkpoints"),
    path(RUN + "checkpoints/<int:step>/download/", run_data.CheckpointDownloadView.as_view(), name="run-checkpoint-download"),
    *router.urls,
    re_path(r"^[\s\S]*\Z", UnknownEndpoint.as_view(), name="unknown"),  # any character, newlines too
]
