"""Query parameters validated like bodies: a wrong type or range is a 400 naming the parameter,
never silently ignored (a typo in a filter must not return everything)."""

from __future__ import annotations

import re

from rest_framework import exceptions, serializers


def parse_query(request, serializer_class) -> dict:
    # getlist keeps repeated parameters (?name=a&name=b) for list fields; scalars take the last.
    data, errors = {}, {}
    for name, field in serializer_class().fields.items():
        if name not in request.query_params:
            continue
        values = request.query_params.getlist(name)
        if isinstance(field, serializers.ListField):
            data[name] = values
            continue
        if len(values) > 1:
            errors[name] = ["give this parameter once"]
        elif not _looks_like(field, values[0]):
            errors[name] = [f"not a valid {_kind(field)}"]
        else:
            data[name] = values[0]
    if errors:
        raise exceptions.ValidationError(errors)
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        raise exceptions.ValidationError(serializer.errors)
    return serializer.validated_data


_INTEGER = re.compile(r"[+-]?\d+")


def _kind(field) -> str:
    if isinstance(field, serializers.BooleanField):
        return "boolean (true or false)"
    if isinstance(field, serializers.IntegerField):
        return "whole number"
    return "value"


def _looks_like(field, raw: str) -> bool:
    """Query strings are text: accept exactly the spellings the schema's type has on the wire
    (DRF alone would also take "3.0" for an integer or "yes" for a boolean)."""
    if isinstance(field, serializers.BooleanField):
        return raw in ("true", "false")
    if isinstance(field, serializers.IntegerField):
        return bool(_INTEGER.fullmatch(raw))
    return True


def openapi_query_parameters(serializer_class, view=None) -> list[dict]:
    """OpenAPI parameter objects for a query serializer (for paginators, which document
    themselves with plain dicts)."""
    from drf_spectacular.openapi import AutoSchema

    inspector = getattr(view, "schema", None) if view is not None else None
    if not isinstance(inspector, AutoSchema):
        inspector = AutoSchema()
    out = []
    for name, field in serializer_class().fields.items():
        schema = inspector._map_serializer_field(field, "request")
        param = {"name": name, "in": "query", "required": False, "schema": schema}
        if field.help_text:
            param["description"] = str(field.help_text)
        if isinstance(field, serializers.ListField):
            param["style"], param["explode"] = "form", True
        out.append(param)
    return out
