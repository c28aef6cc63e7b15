"""What every judger is: `verdict(sample)` computes a score; `judge(sample)` writes it onto the
sample and turns every failure into a failed sample instead of an exception.

Judgers compose (a router asks several), so the core method `verdict` does not touch the sample:
it returns a `Verdict` or raises `JudgeError` with a message meant for people.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable

from workers.rl.sample import Sample, SampleStatus

logger = logging.getLogger(__name__)

# How many samples judge_many judges at once unless a judger knows better (http: max_concurrency).
DEFAULT_CONCURRENCY = 64


class JudgeError(Exception):
    """An expected failure (no label, timeout, bad answer from a service): the message is shown
    to people as is, so say what went wrong and where."""


@dataclass
class Verdict:
    score: float
    explanation: str
    components: dict[str, float] = field(default_factory=dict)

    def reward(self) -> dict[str, float]:
        return {"score": float(self.score), **{name: float(value) for name, value in self.components.items()}}


def mark_failed(sample: Sample, message: str) -> Sample:
    sample.status = SampleStatus.FAILED
    sample.error = message
    sample.reward = {"score": 0.0}
    sample.explanation = ""
    return sample


def apply_verdict(sample: Sample, verdict: Verdict, kind: str) -> Sample:
    if not math.isfinite(verdict.score):
        return mark_failed(sample, f"{kind} judger produced a non-finite score ({verdict.score})")
    sample.reward = verdict.reward()
    sample.explanation = verdict.explanation
    return sample


class Judger(abc.ABC):
    """A reward function built from its spec. Subclasses implement `verdict`."""

    kind: ClassVar[str] = "judger"

    def __init__(self, spec: Any):
        self.spec = spec

    @abc.abstractmethod
    async def verdict(self, sample: Sample) -> Verdict:
        """Score `sample` without modifying it; raise JudgeError when it cannot be judged."""

    async def judge(self, sample: Sample) -> Sample:
        """Set sample.reward and sample.explanation; on any error mark the sample failed with
        the message. Never raises (cancellation of the caller still propagates)."""
        try:
            verdict = await self.verdict(sample)
        except JudgeError as exc:
            logger.debug("sample %s failed judging: %s", sample.uid, exc)
            return mark_failed(sample, str(exc))
        except Exception as exc:  # a bug or an unexpected library error must not kill the run
            logger.exception("%s judger raised on sample %s", self.kind, sample.uid)
            return mark_failed(sample, f"{self.kind} judger raised {type(exc).__name__}: {exc}")
        return apply_verdict(sample, verdict, self.kind)

    @property
    def max_concurrency(self) -> int:
        return DEFAULT_CONCURRENCY

    async def judge_many(self, samples: Iterable[Sample], max_concurrency: int | None = None) -> list[Sample]:
        """Judge samples concurrently, at most `max_concurrency` at once; results in input order."""
        limit = asyncio.Semaphore(max_concurrency or self.max_concurrency)

        async def one(sample: Sample) -> Sample:
            async with limit:
                return await self.judge(sample)

        return list(await asyncio.gather(*(one(sample) for sample in samples)))

    def close(self) -> None:
        """Release resources (clients, actors). Safe to call twice."""

    async def aclose(self) -> None:
        """Release resources from async code (preferred there: http clients close in their loop)."""
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind}>"


def require_label(sample: Sample, kind: str) -> str:
    if sample.label is None:
        raise JudgeError(f"{kind} judger needs a label, and this sample has none")
    return sample.label
