"""List rows shaped for the sample table: every value formatted and every link built once here,
so that the template only prints strings. Rendering 50 rows through template filters and
{% url %} tags cost more than the database query of the page (measured on bench/samples.py)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from django.urls import reverse


def fixed(value, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


@dataclass
class Row:
    id: int
    step: int
    split: str
    status: str
    finish: str
    reward: str
    components: list[str]
    advantage: str
    length: int
    staleness: int
    source: str
    sample_url: str
    prompt_url: str
    prompt_label: str
    group_url: str
    zero_variance: bool
    flags: list


def list_rows(run, samples, component_columns: list[str], flags_by_sample: dict) -> list[Row]:
    samples_url = reverse("review:samples", kwargs={"run_id": run.pk})
    group_prefix = reverse("review:group", kwargs={"run_id": run.pk, "group_id": "-"})[:-2]
    prompt_prefix = reverse("review:prompt", kwargs={"run_id": run.pk, "prompt_index": 0})[:-2]
    rows = []
    for s in samples:
        components = s.reward_components if isinstance(s.reward_components, dict) else {}
        has_prompt = s.prompt_index is not None and s.prompt_index >= 0
        rows.append(
            Row(
                id=s.id,
                step=s.step,
                split=s.split,
                status=s.status,
                finish=s.finish_reason or "—",
                reward=fixed(s.reward),
                components=[fixed(components.get(name)) if components.get(name) is not None else "" for name in component_columns],
                advantage=fixed(s.advantage),
                length=s.response_len,
                staleness=s.staleness,
                source=s.data_source,
                sample_url=f"{samples_url}{s.id}/",
                prompt_url=f"{prompt_prefix}{s.prompt_index}/?split={s.split}" if has_prompt else "",
                prompt_label=f"#{s.prompt_index}" if has_prompt else "",
                group_url=f"{group_prefix}{quote(s.group_id, safe='')}/?step={s.step}&sample={s.id}",
                zero_variance=s.zero_variance,
                flags=flags_by_sample.get(s.id, []),
            )
        )
    return rows
