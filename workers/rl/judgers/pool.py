"""Run a judger as a pool of Ray CPU actors (spec.ray_actors > 0).

Each actor builds the judger from the same spec (without Ray: nothing nests) and answers
`verdict` calls; the pool sends each sample to the actor with the fewest calls in flight (ties
go round-robin), so a slow sample does not queue the others behind it. Ray is imported only
here, inside functions: importing this module stays Ray-free.

Actors ask Ray for `num_cpus` (default 0): the trainer's placement group may hold every CPU of
the cluster, and a judger that waits for a CPU nobody frees would stall the run. They are
spread over the cluster's nodes, and Ray restarts an actor that dies (its in-flight samples
fail with the reason; later ones go to the restarted actor).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging

from workers.rl.judgers.base import Judger, JudgeError, Verdict
from workers.rl.sample import Sample

logger = logging.getLogger(__name__)

READY_TIMEOUT_S = 120.0


class JudgerActor:
    """Runs inside a Ray worker process. A plain class here; `ray.remote` wraps it lazily."""

    def __init__(self, kind: str, params: dict):
        from workers.rl.judgers.build import build_judger_from_dict

        self.judger = build_judger_from_dict(kind, params, use_ray=False)

    def ready(self) -> bool:
        return True

    async def verdict(self, sample: Sample) -> dict:
        # Errors travel back as data: a JudgeError is an expected outcome, not an actor failure.
        try:
            verdict = await self.judger.verdict(sample)
        except JudgeError as exc:
            return {"error": str(exc)}
        return {"score": verdict.score, "explanation": verdict.explanation, "components": verdict.components}

    async def aclose(self) -> None:
        await self.judger.aclose()


def _ensure_ray():
    import ray

    if not ray.is_initialized():
        # The trainer normally starts Ray (and RAY_ADDRESS picks a cluster); this is for a
        # judger pool used on its own.
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
        self.in_flight = [0] * num_actors
        self.dispatched = [0] * num_actors  # per actor, for metrics and tests
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

    @property
    def max_concurrency(self) -> int:
        # Enough to keep every actor busy; an http actor bounds its own requests.
        return 64 * len(self.actors)

    def _pick(self) -> int:
        turn = next(self._turn)
        count = len(self.actors)
        order = [(turn + offset) % count for offset in range(count)]
        return min(order, key=lambda index: self.in_flight[index])

    async def verdict(self, sample: Sample) -> Verdict:
        import ray

        if not self.actors:
            raise JudgeError(f"{self.kind} judger: the actor pool is closed")
        index = self._pick()
        self.in_flight[index] += 1
        self.dispatched[index] += 1
        try:
            answer = await self.actors[index].verdict.remote(_light_copy(sample))
        except ray.exceptions.RayError as exc:
            raise JudgeError(f"{self.kind} judger: actor {index} failed: {type(exc).__name__}: {exc}") from None
        finally:
            self.in_flight[index] -= 1
        if "error" in answer:
            raise JudgeError(answer["error"])
        return Verdict(answer["score"], answer["explanation"], answer["components"])

    def close(self) -> None:
        actors, self.actors = self.actors, []
        if not actors:
            return
        import ray

        for actor in actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception as exc:  # Ray already shut down: the actors went with it
                logger.debug("could not kill judger actor: %s", exc)
