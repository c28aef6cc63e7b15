"""Judgers (reward functions): CRUD, try on one response, dry run over a dataset.
Every write and run goes through rlweb.judgers.services, the functions behind the judger pages,
and the pages' forms validate the try and dry-run inputs. Like the pages, the API never shows
the values of an http judger's headers (they are secrets): they read "••• set"; sending "•••"
as a value on update keeps the stored one."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from rlweb.datasets.models import Dataset, DatasetRow
from rlweb.judgers.models import JudgerConfig
from workers.rl.judgers.spec import SPEC_BY_KIND

from ..errors import Conflict
from ..fields import StrictCharField, StrictChoiceField, StrictDictField, StrictFloatField, StrictIntegerField
from ..pagination import PagePagination
from ..schema import ErrorSerializer
from ..serializers.judgers import JudgerSerializer
from ..throttling import HeavyActionThrottle, UserThrottle
from .base import ApiViewSet

KEEP_SECRET = "•••"


class JudgerBody(serializers.Serializer):
    name = StrictCharField(max_length=200)
    description = StrictCharField(required=False, allow_blank=True)
    kind = StrictChoiceField(choices=list(SPEC_BY_KIND), help_text="See GET /api/judgers/kinds/ for each kind's params.")
    params = StrictDictField(required=False, default=dict, help_text="The kind's parameters; routers may refer to your judgers as {\"ref\": \"<name>\"}.")
    ray_actors = StrictIntegerField(required=False, default=0, min_value=0, max_value=64)


class JudgerPatchBody(JudgerBody):
    name = StrictCharField(max_length=200, required=False)
    kind = StrictChoiceField(choices=list(SPEC_BY_KIND), required=False)


class TryBody(serializers.Serializer):
    response = StrictCharField(trim_whitespace=False, help_text="What the model answered.")
    label = StrictCharField(required=False, allow_blank=True, trim_whitespace=False, help_text="The reference answer.")
    prompt = StrictCharField(required=False, allow_blank=True)
    data_source = StrictCharField(required=False, allow_blank=True, max_length=100)
    dataset = StrictIntegerField(required=False, min_value=1, max_value=2**63 - 1, help_text="Take label, prompt and data_source from this dataset's row.")
    row = StrictIntegerField(required=False, min_value=0, max_value=2**31 - 1)


class OutcomeSerializer(serializers.Serializer):
    score = serializers.FloatField()
    components = serializers.DictField(child=serializers.FloatField())
    explanation = serializers.CharField(allow_blank=True)
    status = serializers.ChoiceField(choices=["completed", "failed"])
    error = serializers.CharField(allow_null=True)


class DryRunBody(serializers.Serializer):
    dataset = StrictIntegerField(min_value=1, max_value=2**63 - 1)
    split = StrictChoiceField(choices=["train", "eval"], required=False)
    limit = StrictIntegerField(min_value=1, max_value=20_000, required=False, default=1000)
    response_template = StrictCharField(required=False, default="{answer}", max_length=1000, trim_whitespace=False)
    threshold = StrictFloatField(required=False, allow_null=True, min_value=-1e300, max_value=1e300)


class DryRunReportSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    passed = serializers.IntegerField()
    errors = serializers.IntegerField()
    pass_rate = serializers.FloatField()
    mean_score = serializers.FloatField()
    threshold = serializers.FloatField(allow_null=True)
    response_template = serializers.CharField()
    seconds = serializers.FloatField()
    failing_count = serializers.IntegerField()
    failing_rows = serializers.ListField(child=serializers.DictField(), help_text="The first 100 failing rows.")


class KindSerializer(serializers.Serializer):
    kind = serializers.CharField()
    doc = serializers.CharField(allow_blank=True)
    params_schema = serializers.DictField(help_text="JSON Schema of the kind's params.")


def _checked(serializer_class, data, **kwargs):
    serializer = serializer_class(data=data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _form_errors(form):
    return {("non_field_errors" if k == "__all__" else k): [e["message"] for e in v] for k, v in form.errors.get_json_data().items()}


def _ready_datasets(user):
    return Dataset.objects.visible_to(user).filter(status=Dataset.Status.READY)


def _keep_secret_headers(params: dict, instance) -> dict:
    """'•••' as a header value keeps the stored value (as on the judger form); the URL as this
    API shows it (secrets masked) keeps the stored URL, so a read-modify-write loses nothing."""
    from rlweb.judgers.forms import _public_url

    stored_url = (instance.params or {}).get("url") if instance else None
    if isinstance(stored_url, str) and params.get("url") == _public_url(stored_url):
        params = {**params, "url": stored_url}
    headers = params.get("headers")
    if not isinstance(headers, dict):
        return params
    stored = ((instance.params or {}).get("headers") or {}) if instance else {}
    merged = {}
    for name, value in headers.items():
        if value == KEEP_SECRET:
            if name not in stored:
                raise exceptions.ValidationError({f"params.headers.{name}": ["there is no stored value to keep; send the value"]})
            value = stored[name]
        merged[name] = value
    return {**params, "headers": merged}


class JudgerViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ApiViewSet):
    serializer_class = JudgerSerializer
    pagination_class = PagePagination
    # Ids are integers: a literal action route (datasets/arith/) can never be read as an id.
    # Malformed ids fall through to UnknownEndpoint: still the JSON 404, never an HTML page.
    lookup_value_regex = r"[0-9]+"

    def get_queryset(self):
        return JudgerConfig.objects.visible_to(self.request.user).select_related("owner")

    def get_throttles(self):
        if self.action in ("try_it", "dry_run"):
            return [UserThrottle(), HeavyActionThrottle()]
        return super().get_throttles()

    @extend_schema(tags=["judgers"], summary="List judgers")
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(tags=["judgers"], summary="A judger (header values never shown)")
    def retrieve(self, request, *args, **kwargs):
        return super().retrieve(request, *args, **kwargs)

    def _save(self, owner, data: dict, instance=None):
        from rlweb.judgers import services

        params = _keep_secret_headers(data.get("params") or {}, instance)
        return services.save_judger(
            owner, data["name"], data["kind"], params, data.get("ray_actors", 0),
            instance=instance, description=data.get("description", "" if instance is None else None),
        )

    @extend_schema(tags=["judgers"], summary="Create a judger (validated by the engine's spec of its kind)", request=JudgerBody,
                   responses={201: JudgerSerializer})
    def create(self, request):
        judger = self._save(request.user, _checked(JudgerBody, request.data))
        return Response(JudgerSerializer(judger).data, status=status.HTTP_201_CREATED)

    @extend_schema(tags=["judgers"], summary="Replace a judger's settings", request=JudgerBody, responses=JudgerSerializer)
    def update(self, request, pk=None):
        judger = self.get_object()
        judger = self._save(judger.owner, _checked(JudgerBody, request.data), judger)
        return Response(JudgerSerializer(judger).data)

    @extend_schema(tags=["judgers"], summary="Change some of a judger's settings", request=JudgerPatchBody, responses=JudgerSerializer)
    def partial_update(self, request, pk=None):
        judger = self.get_object()
        given = _checked(JudgerPatchBody, request.data, partial=True)
        current = {"name": judger.name, "kind": judger.kind, "params": judger.params, "ray_actors": judger.ray_actors}
        judger = self._save(judger.owner, {**current, **given}, judger)
        return Response(JudgerSerializer(judger).data)

    @extend_schema(tags=["judgers"], summary="Delete a judger",
                   responses={204: None, 409: OpenApiResponse(ErrorSerializer, description="A router uses it.")})
    def destroy(self, request, pk=None):
        from rlweb.judgers import services

        try:
            services.delete_judger(self.get_object())
        except DjangoValidationError as exc:
            raise Conflict(" ".join(exc.messages)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(tags=["judgers"], summary="The judger kinds and the JSON Schema of their params", responses=KindSerializer(many=True))
    @action(detail=False, methods=["get"], pagination_class=None)
    def kinds(self, request):
        return Response([
            {"kind": kind, "doc": (cls.__doc__ or "").strip(), "params_schema": cls.model_json_schema()}
            for kind, cls in SPEC_BY_KIND.items()
        ])

    @extend_schema(tags=["judgers"], summary="Judge one response (as the judger page's Try it)", request=TryBody,
                   responses=OutcomeSerializer)
    @action(detail=True, methods=["post"], url_path="try")
    def try_it(self, request, pk=None):
        from rlweb.judgers import services
        from rlweb.judgers.forms import TryForm

        judger = self.get_object()
        _checked(TryBody, request.data)
        form = TryForm(request.data, datasets=_ready_datasets(request.user))
        if not form.is_valid():
            raise exceptions.ValidationError(_form_errors(form))
        data = form.cleaned_data
        label, prompt, data_source = data["label"], data["prompt"], data["data_source"]
        if data.get("dataset"):
            row = DatasetRow.objects.filter(dataset_id=data["dataset"], index=data.get("row") or 0).first()
            if row is None:
                raise exceptions.ValidationError({"row": [f"the dataset has no row {data.get('row') or 0}"]})
            label = row.answer
            prompt = row.prompt or "\n".join(str(m.get("content", "")) for m in row.messages or [])
            data_source = row.data_source
        outcome = services.try_judger(judger, data["response"], label, prompt=prompt, data_source=data_source)
        return Response({
            "score": outcome.score, "components": outcome.components, "explanation": outcome.explanation or "",
            "status": str(getattr(outcome.status, "value", outcome.status)), "error": outcome.error,
        })

    @extend_schema(tags=["judgers"], summary="Judge a dataset's reference answers: pass rate and failing rows", request=DryRunBody,
                   responses=DryRunReportSerializer)
    @action(detail=True, methods=["post"], url_path="dry-run")
    def dry_run(self, request, pk=None):
        from rlweb.judgers import services
        from rlweb.judgers.forms import DryRunForm

        judger = self.get_object()
        given = _checked(DryRunBody, request.data)
        form_data = {"limit": 1000, "response_template": "{answer}", **{k: v for k, v in request.data.items() if v is not None}}
        form = DryRunForm(form_data, datasets=_ready_datasets(request.user))
        if not form.is_valid():
            raise exceptions.ValidationError(_form_errors(form))
        data = form.cleaned_data
        dataset = _ready_datasets(request.user).get(pk=data["dataset"])
        try:
            report = services.dry_run(judger, dataset, data["limit"], split=data["split"] or None,
                                      response_template=data["response_template"], threshold=given.get("threshold"))
        except DjangoValidationError as exc:
            raise Conflict("The judger's configuration no longer validates: " + "; ".join(exc.messages)) from None
        return Response({
            "total": report.total, "passed": report.passed, "errors": report.errors, "pass_rate": report.pass_rate,
            "mean_score": report.mean_score, "threshold": report.threshold, "response_template": report.response_template,
            "seconds": report.seconds, "failing_count": report.failing_count, "failing_rows": report.failing_rows,
        })
