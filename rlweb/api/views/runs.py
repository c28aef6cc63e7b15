"""Runs: list/filter, detail, launch from a RunConfig JSON, cancel, resume, clone, config as YAML.

Every state change goes through rlweb.runs.services, the same functions the launch form and
the run page call: a run launched here is the same row a form launch makes."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from rlweb.runs import services
from rlweb.runs.models import Run
from workers.rl.config import RunConfig

from ..errors import NON_FIELD, Conflict
from ..pagination import PagePagination
from ..params import parse_query
from ..renderers import YAMLRenderer
from ..schema import ErrorSerializer, pydantic_body
from ..serializers.runs import RunDetailSerializer, RunSerializer
from ..throttling import HeavyActionThrottle, UserThrottle
from .base import ApiViewSet


class RunFilters(serializers.Serializer):
    """The run list page's filters (rlweb.runs.views), same names and meaning."""

    status = serializers.ChoiceField(choices=Run.Status.values, required=False, help_text="Only runs in this state.")
    q = serializers.CharField(
        required=False, max_length=200,
        help_text="Name or preset contains this, or #id; staff also match the owner's name.",
    )


class LaunchParams(serializers.Serializer):
    preset = serializers.CharField(
        required=False, max_length=100, allow_blank=True, help_text="Name of the preset the config came from (a label)."
    )
    judger = serializers.IntegerField(
        required=False, min_value=1, max_value=2**63 - 1,
        help_text="Use this saved judger (its id) instead of the body's `judger` spec, as the form's judger choice does.",
    )


RunConfigBody = pydantic_body(RunConfig)
CONFLICT = OpenApiResponse(ErrorSerializer, description="The run's state does not allow it (e.g. resuming a completed run).")


def _check_json_types(data: dict) -> None:
    """JSON has types: "8" is not a number here, though the form (whose inputs are all text)
    lets RunConfig convert it. Strict JSON validation first, then the launch's own (the form's)."""
    import json

    from pydantic import ValidationError as PydanticError

    from workers.rl.config import ConfigError

    try:
        RunConfig.model_validate_json(json.dumps(data), strict=True)
    except PydanticError as exc:
        errors = list(_with_types(exc))
        if any(kind.endswith("_type") for _, _, kind in errors):  # else the launch reports the same errors
            raise ConfigError([(path, msg) for path, msg, _ in errors]) from None


def _with_types(exc):
    for err in exc.errors():
        yield ".".join(str(p) for p in err["loc"]), err["msg"], err["type"]


def _service_state_error(exc: Exception) -> Conflict:
    return Conflict(str(exc) or "The run cannot do that in its current state.")


class RunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ApiViewSet):
    pagination_class = PagePagination
    # Ids are integers: a literal action route (datasets/arith/) can never be read as an id.
    # Malformed ids fall through to UnknownEndpoint: still the JSON 404, never an HTML page.
    lookup_value_regex = r"[0-9]+"

    def get_queryset(self):
        if self.action == "list":
            from rlweb.runs.views import _filtered_runs

            parse_query(self.request, RunFilters)  # a wrong value is a 400, not ignored
            runs, _, _ = _filtered_runs(self.request)
            return runs
        return Run.objects.visible_to(self.request.user).select_related("owner")

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if self.action in ("list", "retrieve"):
            services.reap_lost_runs()  # as the pages do: a killed worker cannot mark its runs lost

    def get_serializer_class(self):
        return RunSerializer if self.action == "list" else RunDetailSerializer

    def get_throttles(self):
        if self.action in ("create", "clone", "resume"):
            return [UserThrottle(), HeavyActionThrottle()]
        return super().get_throttles()

    @extend_schema(tags=["runs"], summary="List runs (newest first), filtered like the runs page", parameters=[RunFilters])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(tags=["runs"], summary="A run, with its config")
    def retrieve(self, request, *args, **kwargs):
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        tags=["runs"],
        summary="Launch a run from a RunConfig",
        description=(
            "The body is a RunConfig (the same document as a YAML config file, as JSON); omitted fields take "
            "their defaults. It is validated exactly as the launch form validates it: a bad value answers 400 "
            "with `fields` keyed by the field's dotted path, e.g. `rollout.n`."
        ),
        parameters=[LaunchParams],
        request=RunConfigBody,
        responses={201: RunDetailSerializer},
    )
    def create(self, request, *args, **kwargs):
        params = parse_query(request, LaunchParams)
        if not isinstance(request.data, dict):
            raise ValidationError({NON_FIELD: ["The body must be a RunConfig object."]})
        _check_json_types(request.data)
        run = services.launch_run(request.user, request.data, preset=params.get("preset", ""), judger=params.get("judger"))
        return Response(RunDetailSerializer(run, context=self.get_serializer_context()).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        tags=["runs"], summary="Cancel a queued run, or ask a running one to stop at its next step", request=None,
        responses={200: RunDetailSerializer, 409: CONFLICT},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        run = self.get_object()
        try:
            services.cancel_run(run, request.user)
        except services.RunStateError as exc:
            raise _service_state_error(exc) from None
        run.refresh_from_db()
        return Response(RunDetailSerializer(run, context=self.get_serializer_context()).data)

    @extend_schema(
        tags=["runs"], summary="Resume a failed, lost or cancelled run from its last checkpoint", request=None,
        responses={200: RunDetailSerializer, 409: CONFLICT},
    )
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        run = self.get_object()
        try:
            run = services.resume_run(run, request.user)
        except services.RunStateError as exc:
            raise _service_state_error(exc) from None
        run.refresh_from_db()
        return Response(RunDetailSerializer(run, context=self.get_serializer_context()).data)

    @extend_schema(
        tags=["runs"], summary="Launch a new run with this run's config",
        description="What the run page's Clone button followed by Launch does: the same config (name marked as a copy) and preset.",
        request=None, responses={201: RunDetailSerializer},
    )
    @action(detail=True, methods=["post"])
    def clone(self, request, pk=None):
        source = self.get_object()
        new_run = services.launch_run(request.user, services.clone_config(source, request.user), preset=source.preset)
        return Response(RunDetailSerializer(new_run, context=self.get_serializer_context()).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        tags=["runs"],
        summary="The run's config as YAML (or JSON)",
        description=(
            "YAML by default (Accept: application/yaml); JSON with Accept: application/json or ?format=json. "
            "Feed the YAML to `python -m workers.rl train config.yaml`, or edit it and launch a new run."
        ),
        responses={
            (200, "application/yaml"): OpenApiResponse(RunConfigBody, description="The RunConfig as YAML."),
            (200, "application/json"): OpenApiResponse(RunConfigBody, description="The RunConfig as JSON."),
        },
    )
    @action(detail=True, methods=["get"], renderer_classes=[YAMLRenderer, JSONRenderer])
    def config(self, request, pk=None):
        import yaml

        from workers.rl.config import ConfigError, parse_config

        run = self.get_object()
        if request.query_params.get("format", "yaml") not in ("yaml", "json"):
            raise ValidationError({"format": ["must be 'yaml' or 'json'"]})
        try:
            config = parse_config(run.config).model_dump(mode="json")
        except ConfigError:
            # A config stored by an older version of the schema: show it as it was stored.
            config = run.config
        if not isinstance(request.accepted_renderer, YAMLRenderer):
            return Response(config)
        response = Response(yaml.safe_dump(config, sort_keys=False), content_type="application/yaml; charset=utf-8")
        response["Content-Disposition"] = f'inline; filename="run-{run.pk}.yaml"'
        return response
