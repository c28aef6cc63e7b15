"""Datasets: list, detail, rows (paginated), import from an upload, generate the builtin task.
Imports go through rlweb.datasets.services, the functions behind the dataset pages."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers
from rest_framework.decorators import action

from rlweb.datasets.models import Dataset, DatasetRow

from ..pagination import PagePagination
from ..params import parse_query
from ..serializers.datasets import DatasetRowSerializer, DatasetSerializer
from .base import ApiViewSet


class DatasetFilters(serializers.Serializer):
    status = serializers.ChoiceField(choices=Dataset.Status.values, required=False)
    q = serializers.CharField(required=False, max_length=200, help_text="Name contains this (case-insensitive).")


class RowFilters(serializers.Serializer):
    split = serializers.ChoiceField(choices=DatasetRow.Split.values, required=False)


class DatasetViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ApiViewSet):
    serializer_class = DatasetSerializer
    pagination_class = PagePagination
    lookup_value_regex = r"[^/]+"  # malformed ids: the JSON 404 of get_object, not an HTML page

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
