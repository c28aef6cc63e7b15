"""The served OpenAPI schema, and a browsable docs page rendered from it on the server: no
JavaScript bundle from a CDN, so the docs work on an offline machine like the rest of rlweb."""

from __future__ import annotations

import json

from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework.renderers import TemplateHTMLRenderer
from rest_framework.response import Response

from ..errors import exception_handler
from .base import ApiView

METHODS = ("get", "post", "put", "patch", "delete")


class SchemaView(SpectacularAPIView):
    def get_exception_handler(self):
        return exception_handler


def _operations(schema: dict) -> list[dict]:
    """Operations grouped by their first tag, in path order."""
    groups: dict[str, list] = {}
    for path, item in schema.get("paths", {}).items():
        for method in METHODS:
            op = item.get(method)
            if not op:
                continue
            body = (op.get("requestBody") or {}).get("content", {})
            groups.setdefault((op.get("tags") or ["other"])[0], []).append(
                {
                    "method": method.upper(),
                    "path": path,
                    "summary": op.get("summary", ""),
                    "description": op.get("description", ""),
                    "parameters": [
                        {
                            "name": p["name"],
                            "in": p["in"],
                            "required": p.get("required", False),
                            "type": _type_text(p.get("schema", {})),
                            "description": p.get("description", ""),
                        }
                        for p in op.get("parameters", [])
                    ],
                    "body": [
                        {"media_type": media, "schema": json.dumps(spec.get("schema", {}), indent=2)}
                        for media, spec in body.items()
                    ],
                    "responses": [
                        {"code": code, "description": resp.get("description", ""), "media": ", ".join(resp.get("content", {}))}
                        for code, resp in op.get("responses", {}).items()
                    ],
                }
            )
    return [{"tag": tag, "operations": ops} for tag, ops in groups.items()]


def _type_text(schema: dict) -> str:
    if "enum" in schema:
        return " | ".join(map(str, schema["enum"]))
    if schema.get("type") == "array":
        return f"list of {_type_text(schema.get('items', {}))}"
    return schema.get("type", "object")


class DocsView(ApiView):
    renderer_classes = [TemplateHTMLRenderer]
    template_name = "api/docs.html"

    @extend_schema(exclude=True)
    def get(self, request):
        schema = SchemaGenerator().get_schema(request=request, public=True)
        return Response(
            {
                "info": schema.get("info", {}),
                "groups": _operations(schema),
                "components": json.dumps(schema.get("components", {}).get("schemas", {}), indent=2),
            }
        )
