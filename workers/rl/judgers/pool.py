"""Run a judger as a pool of Ray CPU actors (spec.ray_actors > 0).

Each actor builds the judger from the same spec (without Ray: nothing nests) and judges batches
of samples. The actors are synchronous on purpose: Ray runs a synchronous actor's calls in the
worker's main thread, where math-verify's signal-based deadline works inline (an async actor
runs its loop in another thread and would need a helper process per actor). Each actor keeps
one event loop of its own, so an http judger inside reuses its connections, and a batch is
judged concurrently within it.

Dispatch: `judge_many` cuts the samples into small batches (about four per actor) and sends
each to the actor with the fewest samples in flight (ties round-robin), so one slow batch does
not hold back the rest; `judge`/`verdict` send a batch of one the same way.

Actors ask Ray for `num_cpus` (default 0): the trainer's placement group may hold every CPU of
the cluster, and a judger waiting for a CPU nobody frees would stall the run. They are spread
over the nodes. Ray is imported only inside functions here: importing this module is Ray-free.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import math
from typing import Iterable

from workers.rl.judgers.base import Judger, JudgeError, Verdict, apply_verdict, mark_failed
from workers.rl.sample import Sample

logger = logging.getLogger(__name__)

READY_TIMEOUT_S = 120.0
CLOSE_TIMEOUT_S = 10.0
BATCHES_PER_ACTOR = 4


async def _answers(judger: Judger, samples: list[Sample]) -> list[dict]:
    limit = asyncio.Semaphore(judger.max_concurrency)

    async def one(sample: Sample) -> dict:
        async with limit:
            try:
                verdict = await judger.verdict(sample)
            except JudgeError as exc:
                return {"error": str(exc)}
            except Exception as exc:
                logger.exception("%s judger raised on sample %s", judger.kind, sample.uid)
                return {"error": f"{judger.kind} judger raised {type(exc).__name__}: {exc}"}
            return {"score": verdict.score, "explanation": verdict.explanation, "components": verdict.components}

    return list(await asyncio.gather(*(one(sample) for sample in samples)))


class JudgerActor:
    """Runs inside a Ray worker process. A plain class here; `ray.remote` wraps it lazily.
    No `async def` methods: one would make Ray treat it as an async actor (calls off the main
    thread, inside Ray's own running loop)."""

    def __init__(self, kind: str, params: dict):
        from workers.rl.judgers.build import build_judger_from_dict

        self.loop = asyncio.new_event_loop()
        self.judger = build_judger_from_dict(kind, params, use_ray=False)

    def ready(self) -> bool:
        return True

    def verdicts(self, samples: list[Sample]) -> list[dict]:
        """One answer per sample: {"score", "explanation", "components"} or {"error"} (a
        JudgeError is an expected outcome and travels back as data, not as an actor failure)."""
        return self.loop.run_until_complete(_answers(self.judger, samples))

    def close(self) -> None:
        self.loop.run_until_complete(self.judger.aclose())
        self.loop.close()


def _ensure_ray():
    import ray

    if not ray.is_initialized():
        # The trainer normally starts Ray (RAY_ADDRESS picks a cluster); this is for a judger
        # pool used on its own.
        ray.init(include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    return ray


def _light_copy(sample: Sample) -> Sample:
    """What an actor needs to judge: no logprobs or prompt ids to pickle across processes."""
    return dataclasses.replace(sample, prompt_ids=[], logprobs=[], response_mask=[])


class RayJudgerPool(Judger):
    def __init__(self, spec, num_actors: int, *, num_cpus: float = 0.0, ready_timeout_s: float = READY_TIMEOUT_S):
        super().__init__(spec)
        self.kind = spec.kind
        ray = _ensure_ray()
        params = spec.model_dump(mode="json", exclude={"kind"})
        actor_class = ray.remote(JudgerActor).options(
            num_cpus=num_cpus, max_restarts=3, max_task_retries=0, scheduling_strategy="SPREAD"
        )
        self.actors = [actor_class.remote(spec.kind, params) for _ in range(num_actors)]
        self.in_flight = [0] * num_actors  # samples sent and not yet answered, per actor
        self.dispatched = [0] * num_actors  # samples sent in all, per actor (metrics, tests)
        self._turn = itertools.count()
        try:
            ray.get([actor.ready.remote() for actor in self.actors], timeout=ready_timeout_s)
        except Exception as exc:
            self.close()
            if isinstance(exc, ray.exceptions.GetTimeoutError):
                raise RuntimeError(
                    f"{spec.kind} judger: {num_actors} Ray actor(s) did not start within {ready_timeout_s:g} s "
                    "(does the cluster have room for them?)"
                ) from None
            raise RuntimeError(f"{spec.kind} judger: its Ray actors failed to start: {exc}") from exc
        logger.info("%s judger running on %d Ray actor(s)", spec.kind, num_actors)

    def _pick(self) -> int:
        turn = next(self._turn)
        count = len(self.actors)
        order = [(turn + offset) % count for offset in range(count)]
        return min(order, key=lambda index: self.in_flight[index])

    async def _ask(self, samples: list[Sample]) -> list[dict]:
        """Answers for a batch from the least-loaded actor; JudgeError if the actor failed."""
        import ray

        if not self.actors:
            raise JudgeError(f"{self.kind} judger: the actor pool is closed")
        index = self._pick()
        self.in_flight[index] += len(samples)
        self.dispatched[index] += len(samples)
        try:
            return await self.actors[index].verdicts.remote([_light_copy(sample) for sample in samples])
        except ray.exceptions.RayError as exc:
            raise JudgeError(f"{self.kind} judger: actor {index} failed: {type(exc).__name__}: {exc}") from None
        finally:
            self.in_flight[index] -= len(samples)

    async def verdict(self, sample: Sample) -> Verdict:
        [answer] = await self._ask([sample])
        if "error" in answer:
            raise JudgeError(answer["error"])
        return Verdict(answer["score"], answer["explanation"], answer["components"])

    async def judge_many(self, samples: Iterable[Sample], max_concurrency: int | None = None) -> list[Sample]:
        """Judge in batches across the actors (`max_concurrency` is not used: each actor bounds
        its own concurrency). Results land on the given samples, in input order."""
        samples = list(samples)
        size = max(1, math.ceil(len(samples) / (BATCHES_PER_ACTOR * max(1, len(self.actors)))))
        batches = [samples[start : start + size] for start in range(0, len(samples), size)]
        await asyncio.gather(*(self._judge_batch(batch) for batch in batches))
        return samples

    async def _judge_batch(self, batch: list[Sample]) -> None:
        try:
            answers = await self._ask(batch)
        except JudgeError as exc:
            for sample in batch:
                mark_failed(sample, str(exc))
            return
        for sample, answer in zip(batch, answers):
            if "error" in answer:
                mark_failed(sample, answer["error"])
            else:
                apply_verdict(sample, Verdict(answer["score"], answer["explanation"], answer["components"]), self.kind)

    def close(self) -> None:
        actors, self.actors = self.actors, []
        if not actors:
            return
        import ray

        try:  # let each actor close its judger (http client) before it is killed
            ray.get([actor.close.remote() for actor in actors], timeout=CLOSE_TIMEOUT_S)
        except Exception as exc:
            logger.debug("judger actors did not close cleanly: %s", exc)
        for actor in actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception as exc:  # Ray already shut down: the actors went with it
                logger.debug("could not kill judger actor: %s", exc)
