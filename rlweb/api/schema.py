"""OpenAPI schema helpers: the error responses every operation can give, and the engine's
pydantic models (RunConfig, judger specs) as OpenAPI 3.0 components, so that the served schema
documents every config field with its range and description (one source of truth)."""

from __future__ import annotations

import copy
import functools

from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Machine-readable error code, e.g. 'invalid_config', 'not_found'.")
    message = serializers.CharField(help_text="A sentence for humans.")
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Messages per dotted field path of the request (e.g. 'rollout.n'); empty when not about a field.",
    )


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


ERRORS = {
    "400": _error("Invalid request: `fields` names each invalid value by its dotted path."),
    "401": _error("No or invalid credentials (send `Authorization: Token <key>`)."),
    "403": _error("Authenticated but not allowed (e.g. a missing CSRF token with session auth)."),
    "404": _error("No such object, or it belongs to another user."),
    "406": _error("The Accept header asks for a representation this endpoint does not produce."),
    "415": _error("Unsupported request content type."),
    "429": _error("Too many requests: retry after the number of seconds in Retry-After."),
}


class ApiAutoSchema(AutoSchema):
    """AutoSchema that documents the common error responses on every operation."""

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for code, response in ERRORS.items():
            if code not in responses:
                responses[code] = self._get_response_for_code(response, code, direction=direction)
        return responses


# --- pydantic models as OpenAPI 3.0 components --------------------------------------------


def _to_openapi_30(node):
    """Rewrite pydantic's JSON Schema (2020-12) into the OpenAPI 3.0 dialect, recursively:
    nullable instead of a null type, enum instead of const, boolean exclusive bounds, a fixed
    length array instead of prefixItems."""
    if isinstance(node, list):
        return [_to_openapi_30(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _to_openapi_30(value) for key, value in node.items()}

    for combiner in ("anyOf", "oneOf"):
        options = node.get(combiner)
        if isinstance(options, list) and any(opt == {"type": "null"} for opt in options):
            rest = [opt for opt in options if opt != {"type": "null"}]
            node.pop(combiner)
            if len(rest) == 1 and "$ref" not in rest[0]:
                node.update(rest[0])
            else:
                node[combiner] = rest
            node["nullable"] = True
    if "const" in node:
        node["enum"] = [node.pop("const")]
    for bound, base in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(node.get(bound), (int, float)) and not isinstance(node.get(bound), bool):
            node[base] = node.pop(bound)
            node[bound] = True
    if "prefixItems" in node:
        items = node.pop("prefixItems")
        node["items"] = items[0] if len({repr(i) for i in items}) == 1 else {"anyOf": items}
        node["minItems"] = node["maxItems"] = len(items)
    if "$ref" in node and len(node) > 1:
        # OpenAPI 3.0 ignores siblings of $ref: keep them by wrapping the reference.
        ref = node.pop("$ref")
        node["allOf"] = [{"$ref": ref}]
    return node


def pydantic_component_schema(model, registry, *, name: str | None = None) -> dict:
    """Register `model` (and the models it uses) as components; return a $ref to it."""
    from pydantic.json_schema import model_json_schema

    raw = model_json_schema(model, ref_template="#/components/schemas/{model}", mode="validation")
    for sub_name, sub_schema in raw.pop("$defs", {}).items():
        component = ResolvedComponent(
            name=sub_name, type=ResolvedComponent.SCHEMA, object=sub_name, schema=_to_openapi_30(copy.deepcopy(sub_schema))
        )
        registry.register_on_missing(component)
    name = name or model.__name__
    # The same identity as the request body serializer of this model, so both share one component.
    component = ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, object=pydantic_body(model), schema=_to_openapi_30(raw))
    registry.register_on_missing(component)
    return component.ref


class PydanticModelField(serializers.JSONField):
    """A JSON field documented in the schema by a pydantic model (validated by the service)."""

    def __init__(self, model, **kwargs):
        self.pydantic_model = model
        super().__init__(**kwargs)


class PydanticBody(serializers.Serializer):
    """Base of serializers that only document a request body by a pydantic model: the view
    passes the raw JSON to the service, which validates it with that model."""

    pydantic_model = None


@functools.cache
def pydantic_body(model) -> type[PydanticBody]:
    return type(f"{model.__name__}Body", (PydanticBody,), {"pydantic_model": model})


class PydanticModelFieldSchema(OpenApiSerializerFieldExtension):
    target_class = PydanticModelField

    def map_serializer_field(self, auto_schema, direction):
        schema = pydantic_component_schema(self.target.pydantic_model, auto_schema.registry)
        if self.target.help_text:
            return {"allOf": [schema], "description": str(self.target.help_text)}
        return schema


class PydanticBodySchema(OpenApiSerializerExtension):
    target_class = PydanticBody
    match_subclasses = True

    def get_name(self, auto_schema, direction):
        return self.target.pydantic_model.__name__

    def map_serializer(self, auto_schema, direction):
        from pydantic.json_schema import model_json_schema

        raw = model_json_schema(self.target.pydantic_model, ref_template="#/components/schemas/{model}", mode="validation")
        for sub_name, sub_schema in raw.pop("$defs", {}).items():
            auto_schema.registry.register_on_missing(
                ResolvedComponent(name=sub_name, type=ResolvedComponent.SCHEMA, object=sub_name, schema=_to_openapi_30(sub_schema))
            )
        return _to_openapi_30(raw)
