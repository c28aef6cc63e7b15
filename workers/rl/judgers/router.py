"""Judgers made of judgers: pick one by the sample's data_source, or add several with weights."""

from __future__ import annotations

import asyncio

from workers.rl.judgers.base import Judger, JudgeError, Verdict
from workers.rl.judgers.extract import format_number
from workers.rl.judgers.spec import RouterSpec
from workers.rl.sample import Sample


class DataSourceRouter(Judger):
    """The verdict of the judger routed to by `sample.data_source` (else the default)."""

    kind = "router"
    spec: RouterSpec

    def __init__(self, spec: RouterSpec, routes: dict[str, Judger], default: Judger | None):
        super().__init__(spec)
        self.routes = routes
        self.default = default

    async def verdict(self, sample: Sample) -> Verdict:
        source = sample.data_source
        judger = self.routes.get(source)
        via = f"data_source {source!r}"
        if judger is None:
            if self.default is None:
                known = ", ".join(repr(name) for name in sorted(self.routes)) or "none"
                raise JudgeError(f"no judger for data_source {source!r} (routes: {known}; no default)")
            judger, via = self.default, f"data_source {source!r} (default)"
        try:
            inner = await judger.verdict(sample)
        except JudgeError as exc:
            raise JudgeError(f"{via} → {judger.kind}: {exc}") from None
        return Verdict(inner.score, f"{via} → {judger.kind}: {inner.explanation}", dict(inner.components))

    def close(self) -> None:
        for judger in [*self.routes.values(), self.default]:
            if judger is not None:
                judger.close()

    async def aclose(self) -> None:
        for judger in [*self.routes.values(), self.default]:
            if judger is not None:
                await judger.aclose()


class WeightedSum(Judger):
    """score = Σ weight_i × score_i. Components: each sub-judger's score under its name, and its
    own components as '<name>.<component>'. Any failing component fails the whole sample (a
    partial sum would be a silently wrong reward)."""

    kind = "router"
    spec: RouterSpec

    def __init__(self, spec: RouterSpec, parts: list[tuple[str, float, Judger]]):
        super().__init__(spec)
        self.parts = parts

    async def verdict(self, sample: Sample) -> Verdict:
        results = await asyncio.gather(*(judger.verdict(sample) for _, _, judger in self.parts), return_exceptions=True)
        for (name, _, judger), result in zip(self.parts, results):
            if isinstance(result, JudgeError):
                raise JudgeError(f"component {name!r} ({judger.kind}): {result}")
            if isinstance(result, BaseException):
                raise result
        score = 0.0
        components: dict[str, float] = {}
        terms, details = [], []
        for (name, weight, _), verdict in zip(self.parts, results):
            score += weight * verdict.score
            components[name] = verdict.score
            for sub, value in verdict.components.items():
                components[f"{name}.{sub}"] = value
            terms.append(f"{format_number(weight)}×{name}({format_number(verdict.score)})")
            details.append(f"{name}: {verdict.explanation}")
        explanation = f"score = {' + '.join(terms)} = {format_number(round(score, 9))}\n" + "\n".join(details)
        return Verdict(score, explanation, components)

    def close(self) -> None:
        for _, _, judger in self.parts:
            judger.close()

    async def aclose(self) -> None:
        for _, _, judger in self.parts:
            await judger.aclose()
