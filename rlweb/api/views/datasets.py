"""Datasets: list, detail, rows (paginated), import from an upload, generate the builtin task.
Imports go through rlweb.datasets.services, the functions behind the dataset pages."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from rlweb.datasets.importers import FORMATS
from rlweb.datasets.ingest import DUPLICATE_POLICIES
from rlweb.datasets.models import Dataset, DatasetRow

from ..errors import Conflict
from ..fields import StrictBooleanField, StrictCharField, StrictChoiceField, StrictFloatField, StrictIntegerField
from ..pagination import PagePagination
from ..schema import ErrorSerializer
from ..throttling import HeavyActionThrottle, UserThrottle
from ..params import parse_query
from ..serializers.datasets import DatasetRowSerializer, DatasetSerializer
from .base import ApiViewSet


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The upload is too large."
    default_code = "too_large"


class DatasetFilters(serializers.Serializer):
    status = serializers.ChoiceField(choices=Dataset.Status.values, required=False)
    q = serializers.CharField(required=False, max_length=200, help_text="Name contains this (case-insensitive).")


class RowFilters(serializers.Serializer):
    split = serializers.ChoiceField(choices=DatasetRow.Split.values, required=False)


def _form_data(form_class, request, body_serializer) -> dict:
    """The request's values over the form's initial values: a script sends only what it
    changes, as a person leaves the page's prefilled fields alone. The body is first checked
    against its documented schema (types and bounds), then by the page's form."""
    checked = body_serializer(data=request.data)
    if not checked.is_valid():
        raise exceptions.ValidationError(checked.errors)
    data = {name: field.initial for name, field in form_class.base_fields.items() if field.initial is not None}
    for key in request.data:
        value = request.data.getlist(key) if hasattr(request.data, "getlist") else [request.data[key]]
        data[key] = value[-1]
    return data


def _valid_form(form):
    """The page's own form validates; its errors become the API's 400 (`__all__` -> non-field)."""
    if not form.is_valid():
        errors = {("non_field_errors" if k == "__all__" else k): [e["message"] for e in v] for k, v in form.errors.get_json_data().items()}
        raise exceptions.ValidationError(errors)
    return form


def _import_options(strict: bool):
    """The options of the dataset pages' import forms (rlweb.datasets.forms), which validate
    them. Multipart values are text by nature; JSON bodies must have the schema's types."""
    char = StrictCharField if strict else serializers.CharField
    boolean = StrictBooleanField if strict else serializers.BooleanField
    floating = StrictFloatField if strict else serializers.FloatField
    integer = StrictIntegerField if strict else serializers.IntegerField
    choice = StrictChoiceField if strict else serializers.ChoiceField
    return {
        "name": char(max_length=200),
        "description": char(required=False, allow_blank=True),
        "skip_bad_rows": boolean(required=False, default=False, help_text="Leave bad rows out (listed) instead of refusing the file."),
        "duplicates": choice(choices=list(DUPLICATE_POLICIES), required=False, default="report"),
        "eval_fraction": floating(required=False, default=0.0, min_value=0.0, max_value=0.99, help_text="Share of rows in the eval split."),
        "seed": integer(required=False, default=0, min_value=0, max_value=2**31 - 1),
        "prompt_column": char(required=False, allow_blank=True, max_length=100),
        "messages_column": char(required=False, allow_blank=True, max_length=100),
        "answer_column": char(required=False, allow_blank=True, max_length=100),
        "data_source_column": char(required=False, allow_blank=True, max_length=100),
    }


UploadBody = type("UploadBody", (serializers.Serializer,), {
    **_import_options(strict=False),
    "file": serializers.FileField(help_text="JSONL, CSV/TSV or Parquet (at most UPLOAD_MAX_BYTES)."),
    "format": serializers.ChoiceField(
        choices=[k for k in FORMATS if k != "hf_dir"], required=False, help_text="Detected from the file name if omitted."
    ),
})

ServerDirBody = type("ServerDirBody", (serializers.Serializer,), {
    **_import_options(strict=True),
    "path": StrictCharField(max_length=1000, help_text="A `save_to_disk` directory under DATASET_ROOTS on the server."),
})


class ArithBody(serializers.Serializer):
    name = StrictCharField(max_length=200)
    n_train = StrictIntegerField(min_value=1, max_value=200_000, required=False, default=2000)
    n_eval = StrictIntegerField(min_value=0, max_value=100_000, required=False, default=200)
    seed = StrictIntegerField(min_value=0, max_value=2**31 - 1, required=False, default=0)


class ImportParams(serializers.Serializer):
    wait = serializers.BooleanField(
        required=False, default=False,
        help_text="Import within the request and answer 201 with the ready dataset (or 400 with the file's errors). "
        "Without it the import runs in the background: 202, then poll the dataset until its status is ready or failed.",
    )


IMPORTED = {
    201: OpenApiResponse(DatasetSerializer, description="Imported (wait=true)."),
    202: OpenApiResponse(DatasetSerializer, description="Queued: status 'importing'; poll the dataset."),
}


class DatasetViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ApiViewSet):
    serializer_class = DatasetSerializer
    pagination_class = PagePagination
    # Ids are integers: a literal action route (datasets/arith/) can never be read as an id.
    # Malformed ids fall through to UnknownEndpoint: still the JSON 404, never an HTML page.
    lookup_value_regex = r"[0-9]+"

    def get_throttles(self):
        if self.action in ("create", "import_dir", "arith"):
            return [UserThrottle(), HeavyActionThrottle()]
        return super().get_throttles()

    def initialize_request(self, request, *args, **kwargs):
        # The page's size check, installed before anything reads the body (see datasets.uploads).
        from rlweb.datasets.uploads import SizeLimitUploadHandler

        request.upload_handlers.insert(0, SizeLimitUploadHandler(request))
        # The action picks the parsers (get_parsers), and DRF sets it only after building the request.
        self.action = self.action_map.get(request.method.lower()) if hasattr(self, "action_map") else None
        return super().initialize_request(request, *args, **kwargs)

    def _start(self, request, form, path_or_file, fmt):
        from rlweb.datasets import services

        params = parse_query(request, ImportParams)
        start = services.import_dataset if params["wait"] else services.start_import
        dataset = start(request.user, form.cleaned_data["name"], path_or_file, fmt, **form.options())
        code = status.HTTP_201_CREATED if params["wait"] else status.HTTP_202_ACCEPTED
        return Response(DatasetSerializer(dataset).data, status=code)

    def get_parsers(self):
        if getattr(self, "action", None) == "create":
            return [MultiPartParser()]  # the one endpoint that takes a file
        return super().get_parsers()

    @extend_schema(
        tags=["datasets"], summary="Import an uploaded JSONL, CSV or Parquet file as a new dataset",
        parameters=[ImportParams], request={"multipart/form-data": UploadBody},
        responses={**IMPORTED, 413: OpenApiResponse(ErrorSerializer, description="The file is over UPLOAD_MAX_BYTES.")},
    )
    def create(self, request):
        from rlweb.datasets.forms import UploadForm


        request.data  # parse the body: the size handler marks an over-size file while it streams in
        too_large = getattr(request._request, "upload_too_large", None)
        if too_large:
            raise PayloadTooLarge(f"{too_large} is larger than the upload limit (UPLOAD_MAX_BYTES).")
        form = _valid_form(UploadForm(_form_data(UploadForm, request, UploadBody), request.FILES))
        return self._start(request, form, form.cleaned_data["file"], form.cleaned_data["format"] or None)

    @extend_schema(
        tags=["datasets"], summary="Import a Hugging Face `save_to_disk` directory on the server",
        parameters=[ImportParams], request=ServerDirBody, responses=IMPORTED,
    )
    @action(detail=False, methods=["post"], url_path="import-dir")
    def import_dir(self, request):
        from rlweb.datasets import services
        from rlweb.datasets.forms import HfDirForm

        form = _valid_form(HfDirForm(_form_data(HfDirForm, request, ServerDirBody)))
        path = services.check_server_path(form.cleaned_data["path"])
        return self._start(request, form, path, "hf_dir")

    @extend_schema(
        tags=["datasets"], summary="Generate the builtin two-digit addition task as a dataset", request=ArithBody,
        responses={201: DatasetSerializer},
    )
    @action(detail=False, methods=["post"])
    def arith(self, request):
        from rlweb.datasets import services
        from rlweb.datasets.forms import ArithForm

        data = _valid_form(ArithForm(_form_data(ArithForm, request, ArithBody))).cleaned_data
        dataset = services.generate_arith_dataset(request.user, data["name"], data["n_train"], data["n_eval"], data["seed"])
        return Response(DatasetSerializer(dataset).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        tags=["datasets"], summary="Delete a dataset and its rows",
        responses={204: None, 409: OpenApiResponse(ErrorSerializer, description="Still importing.")},
    )
    def destroy(self, request, pk=None):
        dataset = self.get_object()
        if dataset.status == Dataset.Status.IMPORTING:
            raise Conflict("The dataset is still importing; delete it when the import has ended.")
        dataset.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)

    def get_queryset(self):
        datasets = Dataset.objects.visible_to(self.request.user).select_related("owner")
        if self.action == "list":
            filters = parse_query(self.request, DatasetFilters)
            if filters.get("status"):
                datasets = datasets.filter(status=filters["status"])
            if filters.get("q"):
                datasets = datasets.filter(name__icontains=filters["q"])
        return datasets

    @extend_schema(tags=["datasets"], summary="List datasets", parameters=[DatasetFilters])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(tags=["datasets"], summary="A dataset, with its import report")
    def retrieve(self, request, *args, **kwargs):
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        tags=["datasets"], summary="The dataset's rows, in file order", parameters=[RowFilters],
        responses=DatasetRowSerializer(many=True),
    )
    @action(detail=True, methods=["get"], serializer_class=DatasetRowSerializer)
    def rows(self, request, pk=None):
        dataset = self.get_object()
        filters = parse_query(request, RowFilters)
        rows = DatasetRow.objects.filter(dataset=dataset).order_by("index")
        if filters.get("split"):
            rows = rows.filter(split=filters["split"])
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(DatasetRowSerializer(page, many=True).data)
