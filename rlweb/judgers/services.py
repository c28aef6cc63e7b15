"""Judger configs: validation by the engine's own schemas, references between them, trying one
on a sample, and dry runs over a dataset's reference answers.

A router's sub-judgers are either inline specs or references to other named judgers of the same
owner, written {"ref": "<name>"}. References are resolved (recursively, refusing cycles) only
among the owner's judgers: nobody can route to somebody else's judger. `resolve_spec` returns
the fully inline spec a RunConfig's `judger` field takes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import math
import time
import uuid
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction
from pydantic import ValidationError as SpecError

from workers.rl.judgers.build import JudgeOutcome, build_judger, judge_one
from workers.rl.judgers.spec import SPEC_BY_KIND
from workers.rl.sample import SampleStatus

from .models import JudgerConfig

REF = "ref"
MAX_DEPTH = 8  # routers of routers: deeper than this is surely a mistake


# --- references --------------------------------------------------------------------------


def is_ref(value) -> bool:
    return isinstance(value, dict) and set(value) == {REF}


def _sub_specs(params: dict):
    """(path, value) of every sub-judger slot of router params: routes, default, components."""
    routes = params.get("routes")
    if isinstance(routes, dict):
        for source, sub in routes.items():
            yield ("routes", source), sub
    if params.get("default") is not None:
        yield ("default",), params["default"]
    components = params.get("components")
    if isinstance(components, list):
        for i, part in enumerate(components):
            if isinstance(part, dict) and "judger" in part:
                yield ("components", i, "judger"), part["judger"]


def referenced_names(kind: str, params: dict) -> set[str]:
    """Names this config refers to directly (inline routers included)."""
    names: set[str] = set()
    if kind != "router":
        return names
    for _, sub in _sub_specs(params):
        if is_ref(sub):
            names.add(str(sub[REF]))
        elif isinstance(sub, dict) and sub.get("kind") == "router":
            names |= referenced_names("router", sub)
    return names


def _resolve(owner, kind: str, params: dict, stack: tuple[str, ...]) -> dict:
    """Params with every reference replaced by the referenced judger's resolved spec; raises
    ValidationError (field "params") for unknown names and cycles."""
    if kind != "router" or not isinstance(params, dict):
        return params
    if len(stack) > MAX_DEPTH:
        raise ValidationError({"params": f"routers nest deeper than {MAX_DEPTH} levels: {' → '.join(stack)}"})
    resolved = copy.deepcopy(params)

    def put(path, value):
        target = resolved
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    for path, sub in list(_sub_specs(params)):
        if is_ref(sub):
            name = str(sub[REF])
            if name in stack:
                raise ValidationError({"params": f"judger {name!r} refers back to itself: {' → '.join((*stack, name))}"})
            target = JudgerConfig.objects.filter(owner=owner, name=name).first()
            if target is None:
                raise ValidationError({"params": f"{_where(path)} refers to judger {name!r}, which you do not have"})
            inner = _resolve(owner, target.kind, target.params, (*stack, name))
            put(path, {**inner, "kind": target.kind, "ray_actors": target.ray_actors})
        elif isinstance(sub, dict) and sub.get("kind") == "router":
            put(path, {**_resolve(owner, "router", sub, stack), "kind": "router"})
    return resolved


def _where(path) -> str:
    if path[0] == "routes":
        return f"the route for data_source {path[1]!r}"
    if path[0] == "default":
        return "the default route"
    return f"component {path[1] + 1}"


# --- validation --------------------------------------------------------------------------


def spec_errors(exc: SpecError) -> dict[str, list[str]]:
    """Pydantic errors as {form field: [messages]}: the first location item is the field;
    deeper items are named in the message."""
    errors: dict[str, list[str]] = {}
    for err in exc.errors():
        loc = [str(part) for part in err["loc"]]
        fld = loc[0] if loc else "params"
        message = err["msg"].removeprefix("Value error, ")
        if len(loc) > 1:
            message = f"{'.'.join(loc[1:])}: {message}"
        errors.setdefault(fld, []).append(message)
    return errors


def validate_spec(owner, kind: str, params: dict, ray_actors: int = 0, *, name: str | None = None):
    """The engine's spec for (kind, params, ray_actors) with references resolved, or
    ValidationError keyed by spec field names (plus "kind", "params", "ray_actors")."""
    spec_class = SPEC_BY_KIND.get(kind)
    if spec_class is None:
        raise ValidationError({"kind": f"unknown judger kind {kind!r} (use one of {', '.join(SPEC_BY_KIND)})"})
    if not isinstance(params, dict):
        raise ValidationError({"params": "params must be a JSON object"})
    params = {k: v for k, v in params.items() if k not in ("kind", "ray_actors")}
    resolved = _resolve(owner, kind, params, (name,) if name else ())
    try:
        return spec_class.model_validate({**resolved, "kind": kind, "ray_actors": ray_actors})
    except SpecError as exc:
        raise ValidationError(spec_errors(exc)) from None


def save_judger(owner, name: str, kind: str, params: dict, ray_actors: int = 0, instance: JudgerConfig | None = None, description: str | None = None) -> JudgerConfig:
    """Create (or update `instance`) after validating with the engine's schema. Raises
    django ValidationError with field errors. Renaming updates the owner's routers that refer
    to the old name, so references never dangle."""
    name = (name or "").strip()
    errors: dict[str, list[str]] = {}
    if not name:
        errors["name"] = ["give the judger a name"]
    elif len(name) > 200:
        errors["name"] = ["the name is too long (200 characters at most)"]
    elif JudgerConfig.objects.filter(owner=owner, name=name).exclude(pk=getattr(instance, "pk", None)).exists():
        errors["name"] = [f"you already have a judger named {name!r}"]
    try:
        ray_actors = int(ray_actors or 0)
    except (TypeError, ValueError):
        errors["ray_actors"] = ["must be a whole number"]
        ray_actors = 0
    if errors:
        raise ValidationError(errors)
    self_names = {name} | ({instance.name} if instance else set())
    if kind == "router" and self_names & referenced_names(kind, params or {}):
        raise ValidationError({"params": "a router cannot refer to itself"})
    spec = validate_spec(owner, kind, params, ray_actors, name=name)
    if kind == "router":
        clean_params = {k: v for k, v in params.items() if k not in ("kind", "ray_actors")}  # keeps references
    else:  # stored as the spec reads it: every parameter, defaults included, normalized
        clean_params = spec.model_dump(mode="json", exclude={"kind", "ray_actors"})
    with transaction.atomic():
        if instance is None:
            instance = JudgerConfig(owner=owner)
            old_name = None
        else:
            old_name = instance.name
        instance.name, instance.kind, instance.params, instance.ray_actors = name, kind, clean_params, ray_actors
        if description is not None:
            instance.description = description
        instance.save()
        if old_name and old_name != name:
            _rename_references(owner, old_name, name)
        # A router that refers to this judger must still validate with its new params.
        for router in routers_using(instance, old_name):
            try:
                validate_spec(owner, router.kind, router.params, router.ray_actors, name=router.name)
            except ValidationError as exc:
                raise ValidationError({"params": [f"router {router.name!r} uses this judger and would no longer validate: {m}" for m in exc.messages]}) from None
    return instance


def _rename_in(params, old: str, new: str):
    if isinstance(params, dict):
        if is_ref(params) and params[REF] == old:
            return {REF: new}
        return {k: _rename_in(v, old, new) for k, v in params.items()}
    if isinstance(params, list):
        return [_rename_in(v, old, new) for v in params]
    return params


def _rename_references(owner, old: str, new: str) -> None:
    for router in JudgerConfig.objects.filter(owner=owner, kind="router"):
        updated = _rename_in(router.params, old, new)
        if updated != router.params:
            router.params = updated
            router.save(update_fields=["params", "updated_at"])


def routers_using(judger: JudgerConfig, also_name: str | None = None) -> list[JudgerConfig]:
    names = {judger.name} | ({also_name} if also_name else set())
    return [
        router
        for router in JudgerConfig.objects.filter(owner_id=judger.owner_id, kind="router").exclude(pk=judger.pk)
        if referenced_names("router", router.params) & names
    ]


def delete_judger(judger: JudgerConfig) -> None:
    """Delete, unless a router refers to it (ValidationError naming them)."""
    users = routers_using(judger)
    if users:
        names = ", ".join(repr(r.name) for r in users)
        raise ValidationError(f"{judger.name!r} is used by router{'s' if len(users) > 1 else ''} {names}; change those first")
    judger.delete()


def spec_of(judger: JudgerConfig):
    """The engine spec of a stored judger, references resolved (ValidationError if it no
    longer validates, e.g. a referenced judger was changed by hand)."""
    return validate_spec(judger.owner, judger.kind, judger.params, judger.ray_actors, name=judger.name)


def resolve_spec(judger: JudgerConfig) -> dict:
    """The judger as a plain dict, every reference inline: what a RunConfig's `judger` takes."""
    return spec_of(judger).model_dump(mode="json")


# --- try it ------------------------------------------------------------------------------


def try_judger(judger: JudgerConfig, response: str, label: str | None, prompt: str = "", data_source: str = "") -> JudgeOutcome:
    """Judge one response in this process (no Ray, no torch). Never raises for judging
    problems: they come back as a failed outcome with the reason."""
    try:
        spec = spec_of(judger)
    except ValidationError as exc:
        return JudgeOutcome(0.0, {}, "", SampleStatus.FAILED, "the judger's configuration does not validate: " + "; ".join(exc.messages))
    return judge_one(spec, response, label if label not in ("",) else None, prompt=prompt, data_source=data_source)


# --- dry run -----------------------------------------------------------------------------


def score_range(spec, data_source: str) -> tuple[float, float] | None:
    """(lowest, highest) score this spec can give a sample of `data_source`, or None when it
    cannot judge it. An http service is assumed to score in [0, 1]."""
    kind = spec.kind
    if kind in ("numeric", "math_verify", "exact", "regex", "http"):
        return 0.0, 1.0
    if kind == "format":
        return min(0.0, spec.reward), max(0.0, spec.reward)
    if kind == "length_penalty":
        return -1.0, 0.0
    if kind == "router":
        if spec.mode == "by_data_source":
            chosen = spec.routes.get(data_source, spec.default)
            return score_range(chosen, data_source) if chosen is not None else None
        low = high = 0.0
        for part in spec.components:
            sub = score_range(part.judger, data_source)
            if sub is None:
                return None
            ends = (part.weight * sub[0], part.weight * sub[1])
            low, high = low + min(ends), high + max(ends)
        return low, high
    return None


@dataclass
class DryRunReport:
    total: int = 0
    passed: int = 0
    errors: int = 0  # samples the judger failed on (status failed)
    mean_score: float = 0.0
    threshold: float | None = None  # None: the best score each row can get
    response_template: str = "{answer}"
    seconds: float = 0.0
    failing_rows: list[dict] = field(default_factory=list)
    failing_count: int = 0

    @property
    def pass_rate(self) -> float:
        return self.passed / self.total if self.total else 0.0


FAILING_LISTED = 100
CHUNK = 256


def _prompt_text(prompt: str, messages) -> str:
    if messages:
        return "\n".join(str(m.get("content", "")) for m in messages)
    return prompt


def dry_run(judger: JudgerConfig, dataset, limit: int | None = None, *, split: str | None = None, response_template: str = "{answer}", threshold: float | None = None) -> DryRunReport:
    """Judge the dataset's reference answers as if they were responses (`response_template`
    wraps each, e.g. "The answer is \\boxed{{answer}}."): a correct reward gives every row the
    best score it can give. Rows pass when their score reaches `threshold` (default: that best
    score, see score_range). Reports the pass rate and the failing rows (first 100)."""
    if "{answer}" not in response_template:
        raise ValueError("the response template must contain {answer}")
    spec = spec_of(judger)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _dry_run(spec, dataset, limit, split, response_template, threshold)
    # Called from async code: judge on a thread of our own (Django's ORM stays synchronous).
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_dry_run, spec, dataset, limit, split, response_template, threshold).result()


def _dry_run(spec, dataset, limit, split, response_template, threshold) -> DryRunReport:
    from rlweb.datasets.services import rows_of
    from workers.rl.sample import Sample

    started = time.monotonic()
    report = DryRunReport(threshold=threshold, response_template=response_template)
    rows = rows_of(dataset, split).values_list("index", "split", "prompt", "messages", "answer", "data_source")
    if limit:
        rows = rows[:limit]
    judger = build_judger(spec, use_ray=False)
    loop = asyncio.new_event_loop()
    score_sum = 0.0
    best_cache: dict[str, tuple[float, float] | None] = {}
    try:
        chunk: list = []

        def judge(chunk):
            nonlocal score_sum
            samples = [
                Sample(
                    uid=uuid.uuid4().hex,
                    group_id=f"dry-run-{row[0]}",
                    prompt=_prompt_text(row[2], row[3]),
                    prompt_ids=[],
                    label=row[4] if row[4] != "" else None,
                    data_source=row[5],
                    index=row[0],
                    response=response_template.replace("{answer}", row[4]),
                )
                for row in chunk
            ]
            judged = loop.run_until_complete(judger.judge_many(samples))
            for row, sample in zip(chunk, judged):
                report.total += 1
                failed = sample.status == SampleStatus.FAILED
                score = sample.score
                score_sum += score
                if threshold is not None:
                    want = threshold
                else:
                    if row[5] not in best_cache:
                        best_cache[row[5]] = score_range(spec, row[5])
                    best = best_cache[row[5]]
                    want = best[1] if best is not None else math.inf
                ok = not failed and math.isfinite(score) and score >= want - 1e-9
                if failed:
                    report.errors += 1
                if ok:
                    report.passed += 1
                    continue
                report.failing_count += 1
                if len(report.failing_rows) < FAILING_LISTED:
                    report.failing_rows.append(
                        {
                            "index": row[0],
                            "split": row[1],
                            "prompt": sample.prompt[:500],
                            "answer": row[4],
                            "response": sample.response[:500],
                            "data_source": row[5],
                            "score": score,
                            "wanted": want if math.isfinite(want) else None,
                            "explanation": sample.explanation,
                            "error": sample.error,
                        }
                    )

        for row in rows.iterator(chunk_size=2000):
            chunk.append(row)
            if len(chunk) >= CHUNK:
                judge(chunk)
                chunk = []
        if chunk:
            judge(chunk)
    finally:
        try:
            loop.run_until_complete(judger.aclose())
        finally:
            loop.close()
    report.mean_score = score_sum / report.total if report.total else 0.0
    report.seconds = time.monotonic() - started
    return report
