"""Forms of rollout review: the sample filters (from the list's query string), a flag, a re-judge."""

from __future__ import annotations

import re

from django import forms

from rlweb.judgers.models import JudgerConfig

from .models import SampleFlag
from .queries import SampleFilters

STATUSES = ["completed", "failed", "filtered", "expired", "aborted"]
FINISH_REASONS = ["stop", "length", "abort"]
COMPONENT_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")


def _choices(values):
    return [(v, v) for v in values]


class SampleFilterForm(forms.Form):
    """Every filter of the sample browser. Field names are the query-string names, so a filtered
    view is a plain link that can be shared, exported or re-judged as is."""

    split = forms.ChoiceField(required=False, choices=[("", "train + eval"), ("train", "train"), ("eval", "eval")])
    step_min = forms.IntegerField(required=False, label="step ≥")
    step_max = forms.IntegerField(required=False, label="step ≤")
    reward_min = forms.FloatField(required=False, label="reward ≥")
    reward_max = forms.FloatField(required=False, label="reward ≤")
    status = forms.MultipleChoiceField(required=False, choices=_choices(STATUSES), widget=forms.CheckboxSelectMultiple)
    finish_reason = forms.MultipleChoiceField(required=False, choices=_choices(FINISH_REASONS), widget=forms.CheckboxSelectMultiple)
    data_source = forms.MultipleChoiceField(required=False, choices=[], widget=forms.SelectMultiple(attrs={"size": 3}))
    staleness_min = forms.IntegerField(required=False, min_value=0, label="staleness ≥")
    staleness_max = forms.IntegerField(required=False, min_value=0, label="staleness ≤")
    zero_variance = forms.ChoiceField(
        required=False, label="zero-variance group", choices=[("", "any"), ("yes", "yes"), ("no", "no")]
    )
    len_min = forms.IntegerField(required=False, min_value=0, label="response length ≥")
    len_max = forms.IntegerField(required=False, min_value=0, label="response length ≤")
    q = forms.CharField(required=False, max_length=200, label="search prompt and response",
                        widget=forms.TextInput(attrs={"type": "search", "placeholder": 'words, "a phrase", -not'}))
    flagged = forms.ChoiceField(required=False, choices=[("", "any"), ("any", "flagged"), *SampleFlag.Kind.choices])

    def __init__(self, data=None, *, components=(), data_sources=(), **kwargs):
        super().__init__(data, **kwargs)
        # Data sources of this run, plus any asked for (a shared link may name one not yet seen).
        asked = data.getlist("data_source") if hasattr(data, "getlist") else []
        self.fields["data_source"].choices = _choices(sorted({*data_sources, *asked}))
        self.component_fields = []
        for name in components:
            if not COMPONENT_NAME.match(name):
                continue
            low, high = f"cmin.{name}", f"cmax.{name}"
            self.fields[low] = forms.FloatField(required=False, label=f"{name} ≥")
            self.fields[high] = forms.FloatField(required=False, label=f"{name} ≤")
            self.component_fields.append((name, self[low], self[high]))
        # Components asked for in the query string but not among the recent samples' ones.
        if hasattr(data, "keys"):
            for key in data.keys():
                prefix, _, name = key.partition(".")
                if prefix in ("cmin", "cmax") and COMPONENT_NAME.match(name) and key not in self.fields:
                    self.fields[key] = forms.FloatField(required=False, label=f"{name} {'≥' if prefix == 'cmin' else '≤'}")

    def to_filters(self) -> SampleFilters:
        """The cleaned filters (call after is_valid(); invalid fields are left out)."""
        data = getattr(self, "cleaned_data", {})
        components: dict[str, tuple] = {}
        for key, value in data.items():
            prefix, _, name = key.partition(".")
            if prefix in ("cmin", "cmax") and value is not None:
                low, high = components.get(name, (None, None))
                components[name] = (value, high) if prefix == "cmin" else (low, value)
        zero_variance = {"yes": True, "no": False}.get(data.get("zero_variance") or "")
        return SampleFilters(
            split=data.get("split") or "",
            step_min=data.get("step_min"),
            step_max=data.get("step_max"),
            reward_min=data.get("reward_min"),
            reward_max=data.get("reward_max"),
            components=components,
            statuses=list(data.get("status") or []),
            finish_reasons=list(data.get("finish_reason") or []),
            data_sources=list(data.get("data_source") or []),
            staleness_min=data.get("staleness_min"),
            staleness_max=data.get("staleness_max"),
            zero_variance=zero_variance,
            length_min=data.get("len_min"),
            length_max=data.get("len_max"),
            search=(data.get("q") or "").strip(),
            flagged=data.get("flagged") or "",
        )


def filters_from_query(querydict, **kwargs) -> tuple[SampleFilterForm, SampleFilters]:
    form = SampleFilterForm(querydict, **kwargs)
    form.is_valid()  # invalid fields drop out of cleaned_data; the form shows their errors
    return form, form.to_filters()


class FlagForm(forms.ModelForm):
    class Meta:
        model = SampleFlag
        fields = ["kind", "note"]
        widgets = {"note": forms.Textarea(attrs={"rows": 2, "placeholder": "what is wrong (or right) with this sample"})}


class RejudgeForm(forms.Form):
    judger = forms.ModelChoiceField(queryset=JudgerConfig.objects.none(), help_text="Score the run's samples with this judger.")

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        # Only judgers the user may see: another user's judger is not a valid choice.
        self.fields["judger"].queryset = JudgerConfig.objects.visible_to(user).order_by("name")
