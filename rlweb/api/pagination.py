"""Pagination: pages for lists of objects, keyset cursors for the big append-only tables.

Metric points and samples can be millions of rows and keep growing while a run trains. An
OFFSET page walks every skipped row and shifts when rows are added; a cursor ("rows after id N")
is an index seek and stable. The cursor is also how a client follows a live run: ask again with
the last cursor and get exactly the rows written since, like the dashboard's WebSocket does.
"""

from __future__ import annotations

import base64
import binascii

from django.core.paginator import InvalidPage
from django.core.paginator import Paginator as DjangoPaginator
from rest_framework import exceptions, serializers
from rest_framework.pagination import BasePagination
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from .params import openapi_query_parameters, parse_query


class PageParams(serializers.Serializer):
    page = serializers.IntegerField(required=False, min_value=1, max_value=10**9, help_text="Page number, from 1.")
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=500, help_text="Objects per page (at most 500).")


class PagePagination(BasePagination):
    """Numbered pages with a total count: for runs, datasets, judgers, dataset rows."""

    page_size = 50

    def paginate_queryset(self, queryset, request, view=None):
        params = parse_query(request, PageParams)
        self.request = request
        paginator = DjangoPaginator(queryset, params.get("page_size", self.page_size))
        try:
            self.page = paginator.page(params.get("page", 1))
        except InvalidPage:
            raise exceptions.NotFound("No such page.") from None
        return list(self.page)

    def get_paginated_response(self, data):
        url = self.request.build_absolute_uri()
        nxt = replace_query_param(url, "page", self.page.next_page_number()) if self.page.has_next() else None
        prev = replace_query_param(url, "page", self.page.previous_page_number()) if self.page.has_previous() else None
        return Response({"count": self.page.paginator.count, "next": nxt, "previous": prev, "results": data})

    def get_paginated_response_schema(self, schema):
        return {
            "type": "object",
            "required": ["count", "next", "previous", "results"],
            "properties": {
                "count": {"type": "integer", "example": 123},
                "next": {"type": "string", "format": "uri", "nullable": True},
                "previous": {"type": "string", "format": "uri", "nullable": True},
                "results": schema,
            },
        }

    def get_schema_operation_parameters(self, view):
        return openapi_query_parameters(PageParams, view)


def encode_cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, value = text.partition(":")
        last_id = int(value)
        if kind != "id" or last_id < 0:
            raise ValueError
        return last_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise exceptions.ValidationError({"cursor": ["Not a cursor this API gave out."]}) from None


class CursorParams(serializers.Serializer):
    cursor = serializers.CharField(
        required=False, max_length=64, help_text="The `cursor` of a previous page: rows after it. Omit for the first page."
    )
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=10_000, help_text="Rows per page.")


class KeysetCursorPagination(BasePagination):
    """Rows in id order after an opaque cursor; `next` is null once the end is reached, but
    `cursor` is always given so a client can poll for rows written later."""

    page_size = 1000

    def paginate_queryset(self, queryset, request, view=None):
        params = parse_query(request, CursorParams)
        self.request = request
        after = decode_cursor(params["cursor"]) if params.get("cursor") else 0
        size = params.get("page_size", self.page_size)
        rows = list(queryset.filter(id__gt=after).order_by("id")[: size + 1])
        self.has_more = len(rows) > size
        rows = rows[:size]
        self.cursor = encode_cursor(rows[-1].id if rows else after)
        return rows

    def get_paginated_response(self, data):
        url = self.request.build_absolute_uri()
        nxt = replace_query_param(url, "cursor", self.cursor) if self.has_more else None
        return Response({"next": nxt, "cursor": self.cursor, "results": data})

    def get_paginated_response_schema(self, schema):
        return {
            "type": "object",
            "required": ["next", "cursor", "results"],
            "properties": {
                "next": {"type": "string", "format": "uri", "nullable": True, "description": "The next page; null at the end."},
                "cursor": {"type": "string", "description": "Pass back as `cursor` to get the rows after this page (also later ones)."},
                "results": schema,
            },
        }

    def get_schema_operation_parameters(self, view):
        return openapi_query_parameters(CursorParams, view)



def cursor_page_serializer(item_serializer):
    """The documented body of a KeysetCursorPagination page of `item_serializer` items."""
    from rest_framework import serializers as s

    return type(
        f"{item_serializer.__name__.removesuffix('Serializer')}CursorPageSerializer",
        (s.Serializer,),
        {
            "next": s.URLField(allow_null=True, help_text="The next page; null at the end."),
            "cursor": s.CharField(help_text="Pass back as `cursor` for the rows after this page (also rows written later)."),
            "results": item_serializer(many=True),
        },
    )
