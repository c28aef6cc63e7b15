"""Typed parameters of every judger kind: the single source of truth for the engine, the
judger form (built from these models) and the API. A spec is data only; building it never
executes user code (regexes run under a timeout, URLs are only POSTed to)."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, field_validator, model_validator


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ray_actors: int = Field(0, ge=0, le=64, description="Judge in a pool of this many Ray CPU actors (0 = in the trainer process).")


class NumericMatchSpec(_Spec):
    """The final number of the response equals the label's (GSM8K '####', \\boxed{}, last number)."""

    kind: Literal["numeric"] = "numeric"
    extract: Literal["auto", "gsm8k", "boxed", "last_number", "whole"] = Field(
        "auto", description="Where the answer is: 'auto' tries '####', then \\boxed{}, then the last number."
    )
    tolerance: float = Field(1e-6, ge=0, le=1e6, description="Absolute tolerance of the comparison.")


class MathVerifySpec(_Spec):
    """Mathematical equivalence of the response's answer and the label (math-verify)."""

    kind: Literal["math_verify"] = "math_verify"
    timeout_s: float = Field(5.0, gt=0, le=60, description="Give up on one comparison after this long.")


class ExactMatchSpec(_Spec):
    """The (stripped) response equals the label."""

    kind: Literal["exact"] = "exact"
    case_sensitive: bool = Field(True, description="Compare letter case.")
    strip: bool = Field(True, description="Ignore leading and trailing whitespace.")


class RegexMatchSpec(_Spec):
    """A regular expression searched in the response; optionally its group compared with the label."""

    kind: Literal["regex"] = "regex"
    pattern: str = Field(..., min_length=1, max_length=500, description="Regular expression searched in the response.")
    group: int | str | None = Field(None, description="If set, this capture group must equal the label.")
    ignore_case: bool = Field(False, description="Case-insensitive matching.")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        import regex

        try:
            regex.compile(value)
        except regex.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from None
        return value


class FormatSpec(_Spec):
    """Reward for following a format: the whole response matches a regular expression."""

    kind: Literal["format"] = "format"
    pattern: str = Field(r"(?s).*\\boxed\{.+\}.*", min_length=1, max_length=500, description="Regular expression the whole response must match.")
    reward: float = Field(1.0, ge=-100, le=100, description="Score when it matches (0 otherwise).")

    _compiles = field_validator("pattern")(RegexMatchSpec._compiles.__func__)


class LengthPenaltySpec(_Spec):
    """Soft penalty for overlong responses (DAPO): 0 up to `max_len - buffer`, then linear to -1."""

    kind: Literal["length_penalty"] = "length_penalty"
    max_len: int = Field(..., ge=1, le=1_000_000, description="Length (tokens, or characters if no token count) at which the penalty is -1.")
    buffer: int = Field(0, ge=0, le=1_000_000, description="Penalty ramps over the last `buffer` tokens before max_len.")


class WeightedJudger(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$", description="Component name in the reward.")
    weight: float = Field(1.0, ge=-1000, le=1000, description="Weight of this component in the score.")
    judger: JudgerSpec


class RouterSpec(_Spec):
    """Pick a judger by the sample's data_source, or score a weighted sum of several judgers."""

    kind: Literal["router"] = "router"
    mode: Literal["by_data_source", "weighted_sum"] = Field("by_data_source", description="How sub-judgers combine.")
    routes: dict[str, JudgerSpec] = Field(default_factory=dict, description="by_data_source: data_source -> judger.")
    default: JudgerSpec | None = Field(None, description="by_data_source: judger for unlisted data sources (else the sample fails).")
    components: list[WeightedJudger] = Field(default_factory=list, description="weighted_sum: the judgers and weights.")

    @field_validator("components")
    @classmethod
    def _unique_names(cls, value):
        names = [c.name for c in value]
        if len(names) != len(set(names)):
            raise ValueError("component names must be unique")
        return value

    @model_validator(mode="after")
    def _mode_has_judgers(self):
        if self.mode == "by_data_source" and not (self.routes or self.default):
            raise ValueError("a by_data_source router needs at least one route or a default")
        if self.mode == "weighted_sum" and not self.components:
            raise ValueError("a weighted_sum router needs at least one component")
        return self


class HttpSpec(_Spec):
    """POST the sample to a remote reward service; it answers {"score": float, ...components}."""

    kind: Literal["http"] = "http"
    url: HttpUrl = Field(..., description="Endpoint that receives {prompt, response, label, data_source, metadata}.")
    timeout_s: float = Field(10.0, gt=0, le=600, description="Per-request timeout.")
    retries: int = Field(2, ge=0, le=10, description="Retries after a timeout or a 5xx answer.")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra request headers (e.g. Authorization); kept secret in pages.")
    max_concurrency: int = Field(16, ge=1, le=1024, description="Requests in flight at once.")


JudgerSpec = Annotated[
    Union[NumericMatchSpec, MathVerifySpec, ExactMatchSpec, RegexMatchSpec, FormatSpec, LengthPenaltySpec, RouterSpec, HttpSpec],
    Field(discriminator="kind"),
]

WeightedJudger.model_rebuild()
RouterSpec.model_rebuild()

SPEC_BY_KIND: dict[str, type[_Spec]] = {
    cls.model_fields["kind"].default: cls
    for cls in (NumericMatchSpec, MathVerifySpec, ExactMatchSpec, RegexMatchSpec, FormatSpec, LengthPenaltySpec, RouterSpec, HttpSpec)
}


def parse_judger_spec(kind: str, params: dict) -> _Spec:
    """Validate stored (kind, params) into a spec; raises pydantic.ValidationError or KeyError."""
    from pydantic import TypeAdapter

    return TypeAdapter(JudgerSpec).validate_python({**params, "kind": kind})
