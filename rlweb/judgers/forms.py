"""The judger form, built from the engine's pydantic spec of each kind (workers.rl.judgers.spec).

The spec is the single source of truth: fields, labels, help texts and defaults come from it,
and validation is the spec's own (the Django fields only turn text into Python values); its
errors are shown inline on the fields they name. A router picks sub-judgers among the owner's
other judgers by name; http headers are secrets and never rendered back into the page.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Literal

from django import forms
from pydantic import HttpUrl

from rlweb.core.params import parse_int
from workers.rl.judgers.spec import SPEC_BY_KIND

from . import services
from .models import JudgerConfig

KEEP_SECRET = "•••"  # a header line "Name: •••" keeps the stored value
COMMON = ("name", "description", "ray_actors")
ROUTER_ROWS_EXTRA = 3


def describe(info) -> str:
    """Help text: the spec's description plus its numeric bounds."""
    text = info.description or ""
    bounds = []
    for item in info.metadata:
        for attr, word in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            if getattr(item, attr, None) is not None:
                bounds.append(f"{word} {getattr(item, attr)}")
    return f"{text} ({', '.join(bounds)})" if bounds else text


def _label(name: str) -> str:
    return name.replace("_", " ").capitalize()


class HeadersField(forms.CharField):
    """'Name: value' per line -> dict. Values are secrets: see JudgerForm.params()."""

    widget = forms.Textarea(attrs={"rows": 3, "autocomplete": "off", "spellcheck": "false"})

    def to_python(self, value):
        headers = {}
        for number, line in enumerate((value or "").splitlines(), start=1):
            if not line.strip():
                continue
            if ":" not in line:
                raise forms.ValidationError(f"line {number}: write 'Name: value'")
            name, _, val = line.partition(":")
            if not name.strip():
                raise forms.ValidationError(f"line {number}: the header name is empty")
            headers[name.strip()] = val.strip()
        return headers


class GroupField(forms.CharField):
    """int | str | None: blank is None, digits are a group number, anything else a group name."""

    def to_python(self, value):
        value = (value or "").strip()
        if not value:
            return None
        number = parse_int(value)
        return value if number is None else number


def field_for(name: str, info) -> forms.Field:
    annotation = info.annotation
    origin = typing.get_origin(annotation)
    default = info.get_default(call_default_factory=True)
    common = {"label": _label(name), "help_text": describe(info), "required": False}
    if annotation is bool:
        return forms.BooleanField(initial=default, **common)
    # Never required at the Django level: a missing value is left out and the spec says
    # "Field required" (one source of truth, one wording).
    if annotation is int:
        return forms.IntegerField(initial=default, **common)
    if annotation is float:
        return forms.FloatField(initial=default, widget=forms.NumberInput(attrs={"step": "any"}), **common)
    if origin is Literal:
        return forms.ChoiceField(choices=[(v, v) for v in typing.get_args(annotation)], initial=default, **common)
    if annotation is str:
        return forms.CharField(initial=default, strip=False, **common)
    if annotation is HttpUrl:
        return forms.CharField(widget=forms.URLInput(), **common)
    if origin is dict and typing.get_args(annotation) == (str, str):
        return HeadersField(**common)
    if origin in (typing.Union, types.UnionType) and set(typing.get_args(annotation)) <= {int, str, type(None)}:
        return GroupField(**common)
    # Anything else the spec may grow: typed as JSON, validated by the spec all the same.
    return forms.JSONField(initial=default, **common)


def _judger_choices(owner, exclude_pk=None) -> list[tuple[str, str]]:
    others = JudgerConfig.objects.filter(owner=owner).exclude(pk=exclude_pk).order_by("name").values_list("name", "kind")
    return [("", "—")] + [(name, f"{name} ({kind})") for name, kind in others]


class JudgerForm(forms.Form):
    """name, description, ray actors, then the fields of the kind's spec."""

    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, kind: str, *args, owner, instance: JudgerConfig | None = None, **kwargs):
        self.kind, self.owner, self.instance = kind, owner, instance
        self.spec_class = SPEC_BY_KIND[kind]
        self.inline_router = False
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = self._initial_from(instance)
        super().__init__(*args, **kwargs)
        fields = self.spec_class.model_fields
        self.fields["ray_actors"] = field_for("ray_actors", fields["ray_actors"])
        self.fields["ray_actors"].label = "Ray CPU actors"
        self.spec_fields = []
        if kind == "router":
            self._add_router_fields(fields)
        else:
            for name, info in fields.items():
                if name in ("kind", "ray_actors"):
                    continue
                self.fields[name] = field_for(name, info)
                self.spec_fields.append(name)
        if "headers" in self.fields:
            stored = (instance.params or {}).get("headers") if instance else None
            self.fields["headers"].help_text += " One 'Name: value' per line." + (
                f" Stored values are not shown: '{KEEP_SECRET}' keeps one, a new value replaces it, a removed line deletes it." if stored else ""
            )

    # --- router ----------------------------------------------------------------------------
    def _add_router_fields(self, fields) -> None:
        params = (self.instance.params if self.instance else None) or {}
        subs = [sub for _, sub in services._sub_specs(params)]
        if any(not services.is_ref(sub) for sub in subs):
            # Inline sub-specs (written through the API) have no row form: edit them as JSON.
            self.inline_router = True
            self.fields["params_json"] = forms.JSONField(label="Router parameters (JSON)", help_text="The router spec without kind; sub-judgers inline or {\"ref\": name}.")
            return
        self.fields["mode"] = field_for("mode", fields["mode"])
        self.spec_fields.append("mode")
        choices = _judger_choices(self.owner, getattr(self.instance, "pk", None))
        routes = list((params.get("routes") or {}).items())
        for i in range(len(routes) + ROUTER_ROWS_EXTRA):
            self.fields[f"route_{i}_source"] = forms.CharField(required=False, label="data_source", max_length=100)
            self.fields[f"route_{i}_judger"] = forms.ChoiceField(required=False, choices=choices, label="judger")
        self.fields["default"] = forms.ChoiceField(required=False, choices=choices, label="Default judger", help_text=describe(fields["default"]))
        components = params.get("components") or []
        for i in range(len(components) + ROUTER_ROWS_EXTRA):
            self.fields[f"component_{i}_name"] = forms.CharField(required=False, label="name", max_length=100)
            self.fields[f"component_{i}_weight"] = forms.FloatField(required=False, label="weight", widget=forms.NumberInput(attrs={"step": "any"}))
            self.fields[f"component_{i}_judger"] = forms.ChoiceField(required=False, choices=choices, label="judger")
        self.route_rows = len(routes) + ROUTER_ROWS_EXTRA
        self.component_rows = len(components) + ROUTER_ROWS_EXTRA

    def route_fields(self):
        return [(self[f"route_{i}_source"], self[f"route_{i}_judger"]) for i in range(getattr(self, "route_rows", 0))]

    def component_fields(self):
        return [(self[f"component_{i}_name"], self[f"component_{i}_weight"], self[f"component_{i}_judger"]) for i in range(getattr(self, "component_rows", 0))]

    @staticmethod
    def _initial_from(instance: JudgerConfig) -> dict:
        initial = {"name": instance.name, "description": instance.description, "ray_actors": instance.ray_actors}
        params = instance.params or {}
        for key, value in params.items():
            if key == "headers" and isinstance(value, dict):
                initial["headers"] = "\n".join(f"{name}: {KEEP_SECRET}" for name in value)
            elif key == "group":
                initial["group"] = "" if value is None else str(value)
            elif key not in ("routes", "components", "default"):
                initial[key] = value
        if instance.kind == "router":
            initial["params_json"] = params
            for i, (source, sub) in enumerate((params.get("routes") or {}).items()):
                initial[f"route_{i}_source"] = source
                initial[f"route_{i}_judger"] = sub.get(services.REF, "") if isinstance(sub, dict) else ""
            default = params.get("default")
            initial["default"] = default.get(services.REF, "") if isinstance(default, dict) else ""
            for i, part in enumerate(params.get("components") or []):
                initial[f"component_{i}_name"] = part.get("name", "")
                initial[f"component_{i}_weight"] = part.get("weight", 1.0)
                judger = part.get("judger")
                initial[f"component_{i}_judger"] = judger.get(services.REF, "") if isinstance(judger, dict) else ""
        return initial

    # --- to params ------------------------------------------------------------------------
    def params(self) -> dict:
        data = self.cleaned_data
        if self.kind == "router":
            if self.inline_router:
                return data["params_json"] if isinstance(data.get("params_json"), dict) else {}
            return self._router_params(data)
        params = {}
        for name in self.spec_fields:
            value = data.get(name)
            if value is None or value == "":
                continue  # the spec's default, or its "Field required"
            params[name] = value
        if "headers" in params:
            params["headers"] = self._merge_secret_headers(params["headers"])
        return params

    def _merge_secret_headers(self, headers: dict) -> dict:
        stored = ((self.instance.params or {}).get("headers") or {}) if self.instance else {}
        merged = {}
        for name, value in headers.items():
            if value == KEEP_SECRET:
                if name not in stored:
                    self.add_error("headers", f"{name}: there is no stored value to keep; type the value")
                    continue
                merged[name] = stored[name]
            else:
                merged[name] = value
        return merged

    def _router_params(self, data) -> dict:
        routes = {}
        for i in range(self.route_rows):
            source, judger = (data.get(f"route_{i}_source") or "").strip(), data.get(f"route_{i}_judger")
            if not source and not judger:
                continue
            if not judger:
                self.add_error(f"route_{i}_judger", "pick the judger for this data source")
                continue
            if source in routes:
                self.add_error(f"route_{i}_source", f"data_source {source!r} is routed twice")
                continue
            routes[source] = {services.REF: judger}
        components = []
        for i in range(self.component_rows):
            name, weight, judger = (data.get(f"component_{i}_name") or "").strip(), data.get(f"component_{i}_weight"), data.get(f"component_{i}_judger")
            if not name and not judger:
                continue
            if not judger:
                self.add_error(f"component_{i}_judger", "pick the judger of this component")
                continue
            components.append({"name": name or judger, "weight": 1.0 if weight is None else weight, "judger": {services.REF: judger}})
        params = {"mode": data.get("mode") or "by_data_source", "routes": routes, "components": components}
        if data.get("default"):
            params["default"] = {services.REF: data["default"]}
        return params

    def add_spec_errors(self, error) -> None:
        """Put a services ValidationError on the fields it names (else at the top)."""
        if hasattr(error, "error_dict"):
            for field, messages in error.message_dict.items():
                target = field if field in self.fields else None
                if self.kind == "router" and field in ("routes", "components", "default", "mode"):
                    target = None if field != "default" or "default" not in self.fields else "default"
                for message in messages:
                    self.add_error(target, message if target else (f"{field}: {message}" if field not in ("params", "__all__") else message))
        else:
            for message in error.messages:
                self.add_error(None, message)


def display_params(judger: JudgerConfig) -> list[tuple[str, str]]:
    """(name, shown value) of a judger's params for pages: header values are never shown."""
    shown = []
    for key, value in (judger.params or {}).items():
        if key == "headers" and isinstance(value, dict):
            text = ", ".join(f"{name}: {KEEP_SECRET} set" for name in value) or "none"
        elif key == "url" and judger.kind == "http" and isinstance(value, str):
            text = _public_url(value)
        elif isinstance(value, (dict, list)):
            text = json.dumps(_mask_headers(value), ensure_ascii=False)
        else:
            text = "" if value is None else str(value)
        shown.append((key, text))
    return shown


def _public_url(url: str) -> str:
    """The URL without a password or query values (either may be a token)."""
    from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password:
        netloc = netloc.replace(f":{parts.password}@", f":{KEEP_SECRET}@")
    query = "&".join(f"{quote(k)}={KEEP_SECRET}" for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _mask_headers(value):
    if isinstance(value, dict):
        return {k: ({h: f"{KEEP_SECRET} set" for h in v} if k == "headers" and isinstance(v, dict) else _mask_headers(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_headers(v) for v in value]
    return value


class TryForm(forms.Form):
    response = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), strip=False, help_text="What the model answered.")
    label = forms.CharField(required=False, strip=False, help_text="The reference answer (blank: none).")
    prompt = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    data_source = forms.CharField(required=False, max_length=100)
    dataset = forms.ChoiceField(required=False, label="Or take label, prompt and data_source from a dataset row")
    row = forms.IntegerField(required=False, min_value=0, label="Row #")

    def __init__(self, *args, datasets=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["dataset"].choices = [("", "—")] + [(str(d.pk), d.name) for d in datasets]


class DryRunForm(forms.Form):
    dataset = forms.ChoiceField()
    split = forms.ChoiceField(required=False, choices=[("", "All"), ("train", "Train"), ("eval", "Eval")])
    limit = forms.IntegerField(min_value=1, max_value=20_000, initial=1000, help_text="Rows judged (from the start).")
    response_template = forms.CharField(
        initial="{answer}", max_length=1000, strip=False,
        help_text="How a correct response would look; {answer} is the row's reference answer, e.g. 'The answer is \\boxed{{answer}}'.",
    )
    threshold = forms.FloatField(required=False, help_text="A row passes at this score (blank: the best score the judger can give it).")

    def __init__(self, *args, datasets=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["dataset"].choices = [(str(d.pk), f"{d.name} ({d.row_count} rows)") for d in datasets]

    def clean_response_template(self):
        value = self.cleaned_data["response_template"]
        if "{answer}" not in value:
            raise forms.ValidationError("The template must contain {answer}.")
        return value
