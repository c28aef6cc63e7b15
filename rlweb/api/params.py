"""Query parameters validated like bodies: a wrong type or range is a 400 naming the parameter,
never silently ignored (a typo in a filter must not return everything)."""

from __future__ import annotations

from rest_framework import exceptions, serializers


def parse_query(request, serializer_class) -> dict:
    # getlist keeps repeated parameters (?name=a&name=b) for list fields; scalars take the last.
    data = {}
    for name, field in serializer_class().fields.items():
        if name not in request.query_params:
            continue
        values = request.query_params.getlist(name)
        data[name] = values if isinstance(field, serializers.ListField) else values[-1]
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        raise exceptions.ValidationError(serializer.errors)
    return serializer.validated_data


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
