"""Spec → judger, and `judge_one`, the synchronous "try it" for the web process.

    judger = build_judger(spec)            # or build_judger_from_dict(kind, params)
    await judger.judge_many(samples)       # sets reward/explanation, or status FAILED + error
    judger.close()

Importing this module imports neither torch nor Ray; Ray is imported only when a spec asks for
actors (`ray_actors > 0`) and `use_ray` is on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from dataclasses import dataclass, field

from workers.rl.judgers.base import Judger
from workers.rl.judgers.http import HttpJudger
from workers.rl.judgers.router import DataSourceRouter, WeightedSum
from workers.rl.judgers.rules import (
    ExactJudger,
    FormatJudger,
    LengthPenaltyJudger,
    MathVerifyJudger,
    NumericJudger,
    RegexJudger,
)
from workers.rl.judgers.spec import RouterSpec, parse_judger_spec
from workers.rl.sample import Sample, SampleStatus

_SIMPLE = {
    "numeric": NumericJudger,
    "math_verify": MathVerifyJudger,
    "exact": ExactJudger,
    "regex": RegexJudger,
    "format": FormatJudger,
    "length_penalty": LengthPenaltyJudger,
    "http": HttpJudger,
}


def build_judger(spec, *, use_ray: bool = True) -> Judger:
    """The judger for a validated spec (any kind in spec.py). With `use_ray` and
    `spec.ray_actors > 0` it is a pool of Ray actors, each running the judger built from the
    same spec; sub-judgers of a router get their own pools likewise. Inside an actor (and in
    judge_one) `use_ray` is False, so nothing nests."""
    if use_ray and spec.ray_actors > 0:
        from workers.rl.judgers.pool import RayJudgerPool

        return RayJudgerPool(spec, spec.ray_actors)
    if spec.kind == "router":
        return _build_router(spec, use_ray)
    return _SIMPLE[spec.kind](spec)


def _build_router(spec: RouterSpec, use_ray: bool) -> Judger:
    if spec.mode == "weighted_sum":
        return WeightedSum(spec, [(part.name, part.weight, build_judger(part.judger, use_ray=use_ray)) for part in spec.components])
    routes = {source: build_judger(sub, use_ray=use_ray) for source, sub in spec.routes.items()}
    default = build_judger(spec.default, use_ray=use_ray) if spec.default is not None else None
    return DataSourceRouter(spec, routes, default)


def build_judger_from_dict(kind: str, params: dict, *, use_ray: bool = True) -> Judger:
    """Validate stored (kind, params) and build; raises pydantic.ValidationError on bad params."""
    return build_judger(parse_judger_spec(kind, params), use_ray=use_ray)


@dataclass
class JudgeOutcome:
    score: float
    components: dict[str, float] = field(default_factory=dict)  # named sub-scores, without "score"
    explanation: str = ""
    status: SampleStatus = SampleStatus.COMPLETED  # COMPLETED or FAILED (a str enum: "completed"/"failed")
    error: str | None = None


def judge_one(spec, response: str, label: str | None, prompt: str = "", data_source: str = "") -> JudgeOutcome:
    """Judge one response synchronously (the web's "try it" and dry runs). Never raises.

    Always judges in this process: `ray_actors` is ignored (the web process must not start Ray),
    so this is torch-free and Ray-free. Length penalties count characters here (there are no
    token ids). Works with or without an event loop running in the calling thread (with one, the
    judging happens on a helper thread).
    """
    sample = Sample(uid="judge-one", group_id="judge-one", prompt=prompt, prompt_ids=[], label=label, data_source=data_source, response=response)
    try:
        judger = build_judger(spec, use_ray=False)
    except Exception as exc:  # e.g. a regex group the pattern does not have
        return JudgeOutcome(0.0, {}, "", SampleStatus.FAILED, f"could not build the judger: {exc}")

    async def run() -> Sample:
        try:
            return await judger.judge(sample)
        finally:
            await judger.aclose()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        judged = asyncio.run(run())
    else:  # called from async code: asyncio.run cannot nest, so use a thread with its own loop
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:
            judged = executor.submit(asyncio.run, run()).result()
    components = {name: value for name, value in judged.reward.items() if name != "score"}
    failed = judged.status == SampleStatus.FAILED
    return JudgeOutcome(
        score=judged.score,
        components=components,
        explanation=judged.explanation,
        status=SampleStatus.FAILED if failed else SampleStatus.COMPLETED,
        error=judged.error if failed else None,
    )
