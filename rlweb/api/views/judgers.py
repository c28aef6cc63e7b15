"""Judgers (reward functions): CRUD, try on one response, dry run over a dataset.
Every write and run goes through rlweb.judgers.services, the functions behind the judger pages."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins

from rlweb.judgers.models import JudgerConfig

from ..pagination import PagePagination
from ..serializers.judgers import JudgerSerializer
from .base import ApiViewSet


class JudgerViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ApiViewSet):
    serializer_class = JudgerSerializer
    pagination_class = PagePagination
    lookup_value_regex = r"[^/]+"  # malformed ids: the JSON 404 of get_object, not an HTML page

    def get_queryset(self):
        return JudgerConfig.objects.visible_to(self.request.user).select_related("owner")

    @extend_schema(tags=["judgers"], summary="List judgers")
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(tags=["judgers"], summary="A judger")
    def retrieve(self, request, *args, **kwargs):
        return super().retrieve(request, *args, **kwargs)
