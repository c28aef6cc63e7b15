"""Every API error has one shape: {"error": {"code", "message", "fields"}}.

`fields` maps a dotted path into the request ("rollout.n", "params.pattern", "items.2.name")
to its messages, so a client (or a notebook user) sees which value to fix. The domain errors of
the services (a RunConfig that does not validate, a file that does not import, a judger whose
params are wrong) become 400s here, so views can simply call the service and let them raise.
"""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

logger = logging.getLogger(__name__)

NON_FIELD = "non_field_errors"


class Gone(exceptions.APIException):
    status_code = status.HTTP_410_GONE
    default_detail = "The resource no longer exists."
    default_code = "gone"


class Conflict(exceptions.APIException):
    """The object is in a state that does not allow the action (e.g. resuming a running run)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The action is not possible in the object's current state."
    default_code = "conflict"


def error_body(code: str, message: str, fields: dict[str, list[str]] | None = None) -> dict:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def flatten(detail, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error detail ({"a": {"b": ["msg"]}}, lists per item) as dotted paths."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            key = str(key)
            path = prefix if key in (NON_FIELD, "detail") and prefix else f"{prefix}.{key}" if prefix else key
            for p, msgs in flatten(value, path).items():
                out.setdefault(p, []).extend(msgs)
    elif isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            out.setdefault(prefix or NON_FIELD, []).extend(str(item) for item in detail)
        else:
            for i, item in enumerate(detail):
                if item:
                    for p, msgs in flatten(item, f"{prefix}.{i}" if prefix else str(i)).items():
                        out.setdefault(p, []).extend(msgs)
    else:
        out.setdefault(prefix or NON_FIELD, []).append(str(detail))
    return out


def _first_message(fields: dict[str, list[str]]) -> str:
    for path, msgs in fields.items():
        if msgs:
            return msgs[0] if path == NON_FIELD else f"{path}: {msgs[0]}"
    return "Invalid input."


def _config_error_fields(errors, prefix: str = "") -> dict[str, list[str]]:
    fields: dict[str, list[str]] = {}
    for path, message in errors:
        key = ".".join(p for p in (prefix, path) if p) or NON_FIELD
        fields.setdefault(key, []).append(message)
    return fields


def _import_error_fields(errors) -> dict[str, list[str]]:
    # ImportFailed.errors: [{line, field, message}]: "line 7.answer" points at the file row.
    fields: dict[str, list[str]] = {}
    # Line 0 is the file as a whole (or a request value such as "name"): keyed by the field.
    for err in errors:
        line, field = err.get("line") or 0, err.get("field") or ""
        key = f"line {line}" + (f".{field}" if field else "") if line else (field or "file")
        fields.setdefault(key, []).append(str(err.get("message", "")))
    return fields


def domain_error_response(exc) -> Response | None:
    """A 400 for the services' own validation errors, or None if `exc` is not one of them."""
    name = type(exc).__name__
    if name == "ConfigError" and hasattr(exc, "errors"):
        fields = _config_error_fields(exc.errors)
        return Response(error_body("invalid_config", _first_message(fields), fields), status=400)
    if name == "ImportFailed" and hasattr(exc, "errors"):
        fields = _import_error_fields(exc.errors or [])
        message = str(exc) or _first_message(fields)
        return Response(error_body("import_failed", message, fields), status=400)
    if isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            fields = {key: [m for e in errs for m in e.messages] for key, errs in exc.error_dict.items()}
            fields = {(NON_FIELD if k == "__all__" else k): v for k, v in fields.items()}
        else:
            fields = {NON_FIELD: list(exc.messages)}
        return Response(error_body("invalid", _first_message(fields), fields), status=400)
    return None


def exception_handler(exc, context):
    """REST_FRAMEWORK["EXCEPTION_HANDLER"]-compatible handler producing the one error shape."""
    request = context.get("request")
    if request is not None:
        # Errors are JSON whatever the endpoint renders on success (YAML, CSV, a file).
        request.accepted_renderer = JSONRenderer()
        request.accepted_media_type = "application/json"

    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()

    response = domain_error_response(exc)
    if response is not None:
        return response

    if isinstance(exc, exceptions.APIException):
        headers = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))
        if isinstance(exc, exceptions.ValidationError):
            fields = flatten(exc.detail)
            body = error_body("invalid", _first_message(fields), fields)
        else:
            codes = exc.get_codes()
            code = codes if isinstance(codes, str) else exc.default_code
            detail = exc.detail if isinstance(exc.detail, str) else str(exc.default_detail)
            body = error_body(str(code), str(detail))
        return Response(body, status=exc.status_code, headers=headers)

    # An unexpected exception: log it with its traceback, answer in the same shape.
    logger.exception("API error in %s", context.get("view").__class__.__name__ if context.get("view") else "?")
    return Response(error_body("server_error", "Internal server error."), status=500)
