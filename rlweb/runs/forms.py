"""The launch form, built from RunConfig's own fields (workers.rl.config): one source of truth.

Every section of RunConfig becomes a group of fields named `section__key`, with the field's
description as help text; a Literal becomes a choice, a bool a checkbox, a number an input with
the schema's bounds. The form only converts the posted strings into a config dict; validation is
RunConfig's, and its errors come back with dotted field paths that map onto these fields, so
they show next to the input they concern.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import dataclass

import annotated_types
from django import forms

from workers.rl.config import ConfigError, RunConfig, load_yaml_text

# Groups of the form, in order (the grouping; produce goes with the rollout).
GROUPS: list[tuple[str, str, tuple[str, ...]]] = [
    ("run", "Run", ()),
    ("model", "Model", ("model",)),
    ("data", "Data", ("data",)),
    ("judger", "Judger", ()),
    ("algorithm", "Algorithm", ("algorithm",)),
    ("rollout", "Rollout", ("rollout", "produce")),
    ("optimizer", "Optimizer", ("optimizer",)),
    ("schedule", "Schedule", ("schedule",)),
    ("resources", "Resources", ("resources",)),
]
TOP_LEVEL = ("name", "seed")
SEP = "__"
JUDGER_INLINE = "inline"


def field_name(path: str) -> str:
    return path.replace(".", SEP)


def field_path(name: str) -> str:
    return name.replace(SEP, ".")


@dataclass
class FieldSpec:
    path: str  # dotted, e.g. "rollout.n"
    info: typing.Any  # pydantic FieldInfo
    annotation: typing.Any


def _bounds(info) -> dict:
    out = {}
    for meta in info.metadata:
        if isinstance(meta, annotated_types.Ge):
            out["min"] = meta.ge
        elif isinstance(meta, annotated_types.Gt):
            out["gt"] = meta.gt
        elif isinstance(meta, annotated_types.Le):
            out["max"] = meta.le
        elif isinstance(meta, annotated_types.Lt):
            out["lt"] = meta.lt
        elif isinstance(meta, annotated_types.MaxLen):
            out["max_length"] = meta.max_length
    return out


def _unwrap_optional(annotation):
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(annotation)) == 2:
            return args[0], True
    return annotation, False


def config_fields() -> list[FieldSpec]:
    """Every plain field of RunConfig (sections flattened), in schema order. The judger (a
    tagged union) is handled apart."""
    out = [FieldSpec(name, RunConfig.model_fields[name], RunConfig.model_fields[name].annotation) for name in TOP_LEVEL]
    for section, info in RunConfig.model_fields.items():
        if section in TOP_LEVEL or section == "judger":
            continue
        model = info.annotation
        for key, sub in model.model_fields.items():
            out.append(FieldSpec(f"{section}.{key}", sub, sub.annotation))
    return out


def _help(spec: FieldSpec) -> str:
    text = spec.info.description or ""
    b = _bounds(spec.info)
    rng = []
    if "min" in b:
        rng.append(f"≥ {b['min']}")
    if "gt" in b:
        rng.append(f"> {b['gt']}")
    if "max" in b:
        rng.append(f"≤ {b['max']}")
    if "lt" in b:
        rng.append(f"< {b['lt']}")
    return f"{text} ({', '.join(rng)})" if rng else text


class TupleOfFloatsField(forms.CharField):
    def __init__(self, length: int, **kwargs):
        self.length = length
        super().__init__(**kwargs)

    def prepare_value(self, value):
        if isinstance(value, (list, tuple)):
            return ", ".join(str(v) for v in value)
        return value

    def to_python(self, value):
        value = super().to_python(value)
        if value in ("", None):
            return None
        parts = [p.strip() for p in str(value).replace(";", ",").split(",") if p.strip()]
        try:
            numbers = [float(p) for p in parts]
        except ValueError:
            raise forms.ValidationError(f"enter {self.length} numbers separated by commas") from None
        if len(numbers) != self.length:
            raise forms.ValidationError(f"enter {self.length} numbers separated by commas")
        return numbers


def form_field(spec: FieldSpec) -> forms.Field:
    annotation, optional = _unwrap_optional(spec.annotation)
    b = _bounds(spec.info)
    common = {"label": spec.path.split(".")[-1].replace("_", " "), "help_text": _help(spec), "required": False}
    attrs = {"data-path": spec.path}
    origin = typing.get_origin(annotation)
    if annotation is bool:
        return forms.BooleanField(widget=forms.CheckboxInput(attrs=attrs), **common)
    if origin is typing.Literal:
        choices = [(c, c) for c in typing.get_args(annotation)]
        if optional:
            choices = [("", "—"), *choices]
        return forms.ChoiceField(choices=choices, widget=forms.Select(attrs=attrs), **common)
    if annotation is int:
        num_attrs = {**attrs, **{k: v for k, v in (("min", b.get("min")), ("max", b.get("max"))) if v is not None}, "step": 1}
        return forms.IntegerField(widget=forms.NumberInput(attrs=num_attrs), **common)
    if annotation is float:
        num_attrs = {**attrs, "step": "any"}
        return forms.FloatField(widget=forms.NumberInput(attrs=num_attrs), **common)
    if origin is tuple:
        return TupleOfFloatsField(len(typing.get_args(annotation)), widget=forms.TextInput(attrs=attrs), **common)
    if "max_length" in b:
        attrs["maxlength"] = b["max_length"]
    return forms.CharField(widget=forms.TextInput(attrs=attrs), strip=True, **common)


def flatten(config: dict) -> dict:
    """{"rollout": {"n": 8}} -> {"rollout__n": 8} for the form's initial values."""
    out = {}
    for spec in config_fields():
        node = config
        for part in spec.path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                break
        if node is not None:
            out[field_name(spec.path)] = node
    judger = config.get("judger")
    if judger is not None:
        out["judger__spec"] = json.dumps(judger, indent=2)
    return out


def default_config() -> dict:
    return RunConfig().model_dump(mode="json")


class LaunchForm(forms.Form):
    """Fields: one per RunConfig field, plus the judger choice (a saved judger of the user's, or
    the spec inline as JSON) and the preset the values came from."""

    preset = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, judgers=(), datasets=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.paths: dict[str, str] = {}
        for spec in config_fields():
            name = field_name(spec.path)
            self.fields[name] = form_field(spec)
            self.paths[name] = spec.path
            if spec.path in ("data.train", "data.eval"):
                self.fields[name].widget.attrs["list"] = "dataset-refs"  # suggests the user's datasets
        judger_choices = [(JUDGER_INLINE, "The spec below (from the preset, YAML or cloned run)")]
        judger_choices += [(str(j.pk), f"{j.name} — {j.kind}") for j in judgers]
        self.fields["judger__source"] = forms.ChoiceField(
            choices=judger_choices, required=False, label="reward function",
            help_text="Use one of your saved judgers, or the judger spec below. The chosen spec is stored with the run, so it can be cloned exactly.",
        )
        self.fields["judger__spec"] = forms.CharField(
            required=False, label="judger spec (JSON)", widget=forms.Textarea(attrs={"rows": 6, "data-path": "judger"}),
            help_text="A judger spec: {\"kind\": \"numeric\", ...}; see the Judgers page for the kinds and their parameters.",
        )
        self.paths["judger__spec"] = "judger"
        self.paths["judger__source"] = "judger"
        self.dataset_choices = [("builtin:arith", "built-in 2-digit addition")] + [(f"dataset:{d.pk}", d.name) for d in datasets]

    # --- grouping for the template -----------------------------------------------------------

    def groups(self):
        out = []
        for key, title, sections in GROUPS:
            if key == "run":
                names = [field_name(p) for p in TOP_LEVEL]
            elif key == "judger":
                names = ["judger__source", "judger__spec"]
            else:
                names = [n for n, p in self.paths.items() if p.split(".")[0] in sections and n not in ("judger__spec", "judger__source")]
            out.append({"key": key, "title": title, "fields": [self[n] for n in names]})
        return out

    # --- to a config ---------------------------------------------------------------------

    def config_dict(self) -> tuple[dict, str | None]:
        """(config dict, saved judger id or None). Call after is_valid()."""
        data: dict = {}
        for name, path in self.paths.items():
            if name.startswith("judger__"):
                continue
            value = self.cleaned_data.get(name)
            spec_field = self.fields[name]
            if value in ("", None) and not isinstance(spec_field, forms.BooleanField):
                if self._optional(path):
                    value = None
                else:
                    continue  # left empty: the schema default applies
            node = data
            parts = path.split(".")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = value
        source = self.cleaned_data.get("judger__source") or JUDGER_INLINE
        judger_id = None
        if source != JUDGER_INLINE:
            judger_id = source
        else:
            raw = (self.cleaned_data.get("judger__spec") or "").strip()
            if raw:
                try:
                    data["judger"] = json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise ConfigError([("judger", f"the judger spec is not valid JSON: {exc.msg} (line {exc.lineno})")]) from None
        return data, judger_id

    @staticmethod
    def _optional(path: str) -> bool:
        spec = next(s for s in config_fields() if s.path == path)
        return _unwrap_optional(spec.annotation)[1]

    def add_config_errors(self, exc: ConfigError):
        """Put each (dotted path, message) next to its field; the rest on top of the form."""
        for path, message in exc.errors:
            name = self._field_for(path)
            shown = f"{path}: {message}" if path else message
            if name:
                self.add_error(name, shown)
            else:
                self.add_error(None, shown)

    def _field_for(self, path: str) -> str | None:
        if not path:
            return None
        if path.startswith("judger"):
            return "judger__spec"
        parts = path.split(".")
        # The longest prefix that is a field ("optimizer.betas.0" -> optimizer__betas).
        for i in range(len(parts), 0, -1):
            name = field_name(".".join(parts[:i]))
            if name in self.fields:
                return name
        return None


class YamlUploadForm(forms.Form):
    file = forms.FileField(label="Run config (YAML)", help_text="A config saved from a run page or written for the CLI.")

    MAX_BYTES = 1024 * 1024

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > self.MAX_BYTES:
            raise forms.ValidationError("a run config is at most 1 MiB")
        try:
            text = upload.read().decode("utf-8")
        except UnicodeDecodeError:
            raise forms.ValidationError("the file is not UTF-8 text") from None
        try:
            self.config = load_yaml_text(text)
        except ConfigError as exc:
            raise forms.ValidationError(str(exc)) from None
        return upload
