"""What a run produced: metric series, samples, log lines and checkpoints, under /runs/{run_id}/."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from rest_framework.utils.urls import remove_query_param, replace_query_param

from rlweb.review import queries
from rlweb.review.forms import FINISH_REASONS, STATUSES
from rlweb.review.models import SampleFlag
from rlweb.runs import series
from rlweb.runs.models import Checkpoint, MetricPoint, RunLog, Trajectory

from .. import files
from ..errors import Gone
from ..pagination import CursorParams, KeysetCursorPagination, cursor_page_serializer
from ..params import parse_query
from ..schema import ErrorSerializer
from ..renderers import NDJSONRenderer, OctetStreamRenderer, TarRenderer
from ..serializers.runs import (
    CheckpointSerializer,
    MetricPointSerializer,
    RunLogSerializer,
    SampleDetailSerializer,
    SampleSerializer,
    SampleWithTextSerializer,
)

FLAG_CHOICES = ["any", *SampleFlag.Kind.values]
from .base import GenericApiView, RunChildMixin

RUN_ID = OpenApiParameter("run_id", int, OpenApiParameter.PATH, description="The run's id.")


# --- metrics ----------------------------------------------------------------------------


class MetricNamesSerializer(serializers.Serializer):
    names = serializers.ListField(child=serializers.CharField(), help_text="Names of the run's metric series, sorted.")


class MetricNamesView(RunChildMixin, GenericApiView):
    serializer_class = MetricNamesSerializer

    @extend_schema(tags=["metrics"], summary="Names of the run's metric series", parameters=[RUN_ID])
    def get(self, request, run_id):
        return Response({"names": series.metric_names(self.get_run().pk)})


class StepWindow(serializers.Serializer):
    step_min = serializers.IntegerField(required=False, min_value=-(2**31), max_value=2**31 - 1, help_text="First step (inclusive).")
    step_max = serializers.IntegerField(required=False, min_value=-(2**31), max_value=2**31 - 1, help_text="Last step (inclusive).")


class SeriesParams(StepWindow):
    name = serializers.ListField(
        child=serializers.CharField(max_length=100), min_length=1, max_length=20,
        help_text="Series names (repeat for several series, at most 20).",
    )
    max_points = serializers.IntegerField(
        required=False, default=series.DEFAULT_MAX_POINTS, min_value=series.MIN_MAX_POINTS, max_value=series.MAX_MAX_POINTS,
        help_text="Most points per series: a wider window is cut into buckets that each keep their first, last, min and max point.",
    )


class SeriesSerializer(serializers.Serializer):
    name = serializers.CharField()
    steps = serializers.ListField(child=serializers.IntegerField())
    values = serializers.ListField(child=serializers.FloatField())
    walls = serializers.ListField(child=serializers.FloatField(), help_text="Wall time (seconds since the epoch) of each point.")
    downsampled = serializers.BooleanField(help_text="True when the window held more than max_points steps.")
    extent = serializers.ListField(
        child=serializers.IntegerField(), allow_null=True, min_length=2, max_length=2,
        help_text="First and last step of the whole series (null when it has no points).",
    )


class SeriesListSerializer(serializers.Serializer):
    series = SeriesSerializer(many=True)


class SeriesView(RunChildMixin, GenericApiView):
    """The chart query of the run page: each series in a step window, downsampled on the server
    (never randomly). For every point at full resolution use metrics/points/."""

    serializer_class = SeriesListSerializer

    @extend_schema(tags=["metrics"], summary="One or several series in a step window, downsampled", parameters=[RUN_ID, SeriesParams])
    def get(self, request, run_id):
        run = self.get_run()
        params = parse_query(request, SeriesParams)
        out = []
        for name in dict.fromkeys(params["name"]):
            result = series.get_series(
                run.pk, name, lo=params.get("step_min"), hi=params.get("step_max"), max_points=params["max_points"]
            ).as_json()
            result.pop("companions", None)
            out.append(result)
        return Response({"series": out})


class PointFilters(StepWindow):
    name = serializers.ListField(
        child=serializers.CharField(max_length=100), required=False, max_length=50,
        help_text="Series names (repeatable); all series when omitted.",
    )


class MetricPointsView(RunChildMixin, GenericApiView):
    """Every stored point, in write order, with a cursor: for pulling whole curves into pandas,
    or following a live run (ask again with the last `cursor`)."""

    serializer_class = MetricPointSerializer
    pagination_class = KeysetCursorPagination

    def get_queryset(self):
        run = self.get_run()
        filters = parse_query(self.request, PointFilters)
        points = MetricPoint.objects.filter(run=run)
        if filters.get("name"):
            points = points.filter(name__in=filters["name"])
        if "step_min" in filters:
            points = points.filter(step__gte=filters["step_min"])
        if "step_max" in filters:
            points = points.filter(step__lte=filters["step_max"])
        return points.only("id", "step", "name", "value", "wall_time")

    @extend_schema(
        tags=["metrics"], summary="Metric points, full resolution, cursor-paginated", parameters=[RUN_ID, PointFilters, CursorParams],
        responses=cursor_page_serializer(MetricPointSerializer),
    )
    def get(self, request, run_id):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


# --- samples ----------------------------------------------------------------------------


def _sample_filters(request):
    """The sample browser's own filter form and query (rlweb.review), with its errors as a 400
    instead of silently dropped fields."""
    from rlweb.review.forms import SampleFilterForm

    form = SampleFilterForm(request.query_params)
    if not form.is_valid():
        raise exceptions.ValidationError(form.errors)
    return form.to_filters()


class SampleFilterParams(serializers.Serializer):
    """Documents the filters of the sample browser (rlweb.review.forms.SampleFilterForm), which
    parses them; reward components filter as cmin.<name>=x and cmax.<name>=y. Unlike the
    browser's form, an empty value is an error: leave the parameter out instead."""

    split = serializers.ChoiceField(choices=["train", "eval"], required=False)
    step_min = serializers.IntegerField(required=False, min_value=-(2**31), max_value=2**31 - 1)
    step_max = serializers.IntegerField(required=False, min_value=-(2**31), max_value=2**31 - 1)
    reward_min = serializers.FloatField(required=False, min_value=-1e300, max_value=1e300)
    reward_max = serializers.FloatField(required=False, min_value=-1e300, max_value=1e300)
    status = serializers.ListField(child=serializers.ChoiceField(choices=STATUSES), required=False, help_text="Repeatable.")
    finish_reason = serializers.ListField(child=serializers.ChoiceField(choices=FINISH_REASONS), required=False, help_text="Repeatable.")
    data_source = serializers.ListField(child=serializers.CharField(max_length=100), required=False, help_text="Repeatable.")
    staleness_min = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1)
    staleness_max = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1)
    zero_variance = serializers.ChoiceField(choices=["yes", "no"], required=False, help_text="Samples of zero-variance groups.")
    len_min = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1, help_text="Response length (tokens) at least.")
    len_max = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1)
    q = serializers.CharField(required=False, max_length=200, help_text='Search prompt and response: words, "a phrase", -not.')
    flagged = serializers.ChoiceField(choices=FLAG_CHOICES, required=False, help_text="'any' = flagged at all, or one flag kind.")


class SampleListParams(SampleFilterParams):
    sort = serializers.ChoiceField(
        choices=[f"{sign}{key}" for key in queries.SORTS for sign in ("", "-")], required=False,
        default=queries.DEFAULT_SORT, help_text="Column, '-' for descending (default -step).",
    )
    cursor = serializers.CharField(required=False, max_length=500, help_text="`next_cursor` of the previous page.")
    before = serializers.CharField(required=False, max_length=500, help_text="`prev_cursor` of the current page (go back).")
    page_size = serializers.IntegerField(required=False, default=queries.PAGE_SIZE, min_value=1, max_value=1000)
    text = serializers.BooleanField(required=False, default=False, help_text="Include prompt, response, label and explanation.")


class SamplePageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True, help_text="The next page; null at the end.")
    previous = serializers.URLField(allow_null=True)
    next_cursor = serializers.CharField(allow_null=True)
    prev_cursor = serializers.CharField(allow_null=True)
    sort = serializers.CharField()
    results = SampleWithTextSerializer(many=True, help_text="Without the text columns unless text=true.")


class SampleListView(RunChildMixin, GenericApiView):
    """The sample browser's list: the same filters, sort orders and keyset pages."""

    serializer_class = SamplePageSerializer

    @extend_schema(tags=["samples"], summary="Samples (rollouts) of the run, cursor-paginated", parameters=[RUN_ID, SampleListParams])
    def get(self, request, run_id):
        run = self.get_run()
        params = parse_query(request, SampleListParams)
        filters = _sample_filters(request)
        qs = queries.filter_samples(queries.run_samples(run), filters)
        page = queries.page_of(qs, params["sort"], after=params.get("cursor"), before=params.get("before"), size=params["page_size"])
        if params["text"]:
            # One query for the page's texts (the page itself never reads the big columns).
            texts = {
                row["id"]: row
                for row in Trajectory.objects.filter(id__in=[r.id for r in page.rows]).values("id", "prompt", "response", "label", "explanation")
            }
            results = [{**SampleSerializer(r).data, **{k: v for k, v in texts[r.id].items() if k != "id"}} for r in page.rows]
        else:
            results = SampleSerializer(page.rows, many=True).data
        url = request.build_absolute_uri()
        link = lambda key, value: replace_query_param(remove_query_param(remove_query_param(url, "cursor"), "before"), key, value)  # noqa: E731
        return Response({
            "next": link("cursor", page.next_cursor) if page.next_cursor else None,
            "previous": link("before", page.prev_cursor) if page.prev_cursor else None,
            "next_cursor": page.next_cursor,
            "prev_cursor": page.prev_cursor,
            "sort": page.sort,
            "results": results,
        })


class SampleDetailView(RunChildMixin, GenericApiView):
    serializer_class = SampleDetailSerializer

    @extend_schema(tags=["samples"], summary="One sample with its text and tokens", parameters=[RUN_ID], operation_id="runs_sample_detail")
    def get(self, request, run_id, sample_id):
        try:
            sample = Trajectory.objects.get(run=self.get_run(), pk=int(sample_id))
        except (Trajectory.DoesNotExist, ValueError):
            raise exceptions.NotFound() from None
        return Response(self.get_serializer(sample).data)


class ExportParams(SampleFilterParams):
    tokens = serializers.BooleanField(required=False, default=False, help_text="Include each sample's tokens.")


class SampleExportView(RunChildMixin, GenericApiView):
    renderer_classes = [JSONRenderer, NDJSONRenderer]

    @extend_schema(
        tags=["samples"],
        summary="Export the filtered samples (with text and flags) as JSON Lines",
        description="The sample browser's export: one JSON object per line, in id order, streamed.",
        parameters=[RUN_ID, ExportParams],
        responses={(200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR, description="One JSON object per line.")},
    )
    def get(self, request, run_id):
        from rlweb.review.services import export_lines

        run = self.get_run()
        params = parse_query(request, ExportParams)
        _sample_filters(request)  # a bad filter is a 400 before the stream starts
        lines = export_lines(run, request.query_params, with_tokens=params["tokens"])
        response = StreamingHttpResponse(files.streamed(request, lines), content_type="application/x-ndjson")
        response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-samples.jsonl"'
        return response


# --- logs -------------------------------------------------------------------------------


class RunLogView(RunChildMixin, GenericApiView):
    serializer_class = RunLogSerializer
    pagination_class = KeysetCursorPagination

    @extend_schema(
        tags=["runs"], summary="The run's log lines, cursor-paginated", parameters=[RUN_ID, CursorParams],
        responses=cursor_page_serializer(RunLogSerializer),
    )
    def get(self, request, run_id):
        page = self.paginate_queryset(RunLog.objects.filter(run=self.get_run()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


# --- checkpoints ------------------------------------------------------------------------


class CheckpointListView(RunChildMixin, GenericApiView):
    serializer_class = CheckpointSerializer

    @extend_schema(tags=["checkpoints"], summary="The run's checkpoints, oldest first", parameters=[RUN_ID],
                   responses=CheckpointSerializer(many=True))
    def get(self, request, run_id):
        checkpoints = Checkpoint.objects.filter(run=self.get_run()).order_by("step")
        return Response(self.get_serializer(checkpoints, many=True).data)


class CheckpointDownloadView(RunChildMixin, GenericApiView):
    renderer_classes = [JSONRenderer, TarRenderer, OctetStreamRenderer]

    @extend_schema(
        tags=["checkpoints"],
        summary="Download a checkpoint",
        description="A checkpoint directory streams as a tar archive; a single file as is.",
        parameters=[RUN_ID, OpenApiParameter("step", int, OpenApiParameter.PATH)],
        responses={
            (200, "application/x-tar"): OpenApiResponse(OpenApiTypes.BINARY, description="The checkpoint folder."),
            (200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY, description="A one-file checkpoint."),
            410: OpenApiResponse(ErrorSerializer, description="The checkpoint was removed from disk (keep-N policy)."),
        },
    )
    def get(self, request, run_id, step):
        run = self.get_run()
        try:
            checkpoint = Checkpoint.objects.get(run=run, step=int(step))
        except (Checkpoint.DoesNotExist, ValueError, OverflowError):
            raise exceptions.NotFound() from None
        if checkpoint.deleted:
            raise Gone("This checkpoint was removed from disk by the keep-N policy.")
        try:
            path = files.resolve_under_data_dir(checkpoint.path)
        except files.OutsideDataDir:
            raise exceptions.NotFound("The checkpoint is not under the data directory.") from None
        name = f"run-{run.pk}-step-{checkpoint.step}"
        if path.is_dir():
            response = StreamingHttpResponse(files.streamed(request, files.tar_stream(path)), content_type="application/x-tar")
            response["Content-Disposition"] = f'attachment; filename="{name}.tar"'
            return response
        if path.is_file():
            response = StreamingHttpResponse(files.streamed(request, files.file_chunks(path)), content_type="application/octet-stream")
            response["Content-Disposition"] = f'attachment; filename="{name}{path.suffix}"'
            response["Content-Length"] = str(path.stat().st_size)
            return response
        raise Gone("The checkpoint's files are missing on disk.")
