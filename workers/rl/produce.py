"""Produce strategies: how a training step gets its batch of B judged groups.

- `SyncProducer`: launch B groups with the current policy, generate, judge; groups that cannot
  be trained on (every sample failed judging, or zero reward variance when the dynamic-sampling
  filter is on) are replaced by fresh prompts, for at most `produce.max_refill_rounds` rounds.
- `AsyncProducer`: over-samples (launches `oversample x B` groups less those already waiting),
  aborts generation as soon as B groups are complete, keeps the leftovers in the ReplayBuffer:
  complete groups are trained on by a later step, interrupted ones are resumed (partial rollout:
  their tokens are kept and generation continues with the newer policy) or restarted. Groups
  whose oldest token is more than `max_staleness` policy versions old are expired, so no trained
  sample is ever staler than that bound.

A sample's `policy_version` is the version that produced its first token; staleness at training
time is `current version - policy_version`. Versions count training steps (weight updates).
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field

from workers.rl.buffer import Group, ReplayBuffer
from workers.rl.config import RunConfig
from workers.rl.data import PromptRenderer, PromptSampler
from workers.rl.rollout.base import GenerationOutput, GenerationRequest
from workers.rl.sample import Sample, SampleStatus
from workers.rl.seeding import derive_seed


@dataclass
class ProducedBatch:
    groups: list[Group]  # the groups to train on
    finished: list[Sample] = field(default_factory=list)  # samples that ended this step but are not trained
    stats: dict[str, float] = field(default_factory=dict)
    generate_seconds: float = 0.0
    judge_seconds: float = 0.0
    generated_tokens: int = 0

    @property
    def samples(self) -> list[Sample]:
        """Trainable samples (judging failures are left out: they carry no reward)."""
        return [s for g in self.groups for s in g if s.status == SampleStatus.COMPLETED]


def is_correct(sample: Sample) -> bool:
    """A response counts as correct when its correctness component (or, for plain rule judgers,
    its score) reaches 1."""
    value = sample.reward.get("accuracy", sample.reward.get("correct", sample.score))
    return sample.status == SampleStatus.COMPLETED and float(value) >= 1.0 - 1e-9


def zero_variance(group: Group) -> bool:
    scores = [s.score for s in group if s.status == SampleStatus.COMPLETED]
    return len(scores) > 0 and max(scores) == min(scores)


class Producer:
    def __init__(self, cfg: RunConfig, rows: list[dict], renderer: PromptRenderer, sampler: PromptSampler, agent, judger):
        self.cfg = cfg
        self.rows = rows
        self.renderer = renderer
        self.sampler = sampler
        self.agent = agent
        self.judger = judger
        self._rendered: dict[int, tuple[str, list[int]]] = {}

    # --- building blocks ----------------------------------------------------------------------

    def new_group(self, row_index: int, group_id: str) -> Group:
        row = self.rows[row_index]
        if row_index not in self._rendered:
            self._rendered[row_index] = self.renderer.render(row)
        text, ids = self._rendered[row_index]
        return [
            Sample(
                uid=f"{group_id}-{j}",
                group_id=group_id,
                prompt=text,
                prompt_ids=list(ids),
                label=row["label"],
                data_source=row["data_source"],
                index=row["index"],
                metadata={"seed": derive_seed(self.cfg.seed, "sample", group_id, j)},
            )
            for j in range(self.cfg.rollout.n)
        ]

    def new_groups(self, step: int, round_: int, count: int) -> list[Group]:
        return [self.new_group(i, f"s{step}r{round_}g{k}") for k, i in enumerate(self.sampler.next_indices(count))]

    async def generate(self, samples: list[Sample], version: int) -> int:
        """Run the agent loop of every sample concurrently; returns the policy tokens generated."""
        before = sum(sum(s.response_mask) for s in samples)
        await asyncio.gather(*(self.agent.run(s, version) for s in samples))
        return sum(sum(s.response_mask) for s in samples) - before

    async def judge(self, samples: list[Sample]) -> None:
        todo = [s for s in samples if s.status == SampleStatus.COMPLETED]
        if not todo:
            return
        judge_many = getattr(self.judger, "judge_many", None)
        if judge_many is not None:
            await judge_many(todo)
        else:
            await asyncio.gather(*(self.judger.judge(s) for s in todo))

    def trainable(self, group: Group) -> str:
        """'ok', 'failed' (no sample has a reward) or 'filtered' (dynamic sampling)."""
        if not any(s.status == SampleStatus.COMPLETED for s in group):
            return "failed"
        if self.cfg.algorithm.filter_zero_variance and zero_variance(group):
            for s in group:
                if s.status == SampleStatus.COMPLETED:
                    s.status = SampleStatus.FILTERED
            return "filtered"
        return "ok"

    # --- state --------------------------------------------------------------------------------

    def state_dict(self) -> dict:
        return {"sampler": self.sampler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.sampler.load_state_dict(state["sampler"])


class SyncProducer(Producer):
    async def produce(self, step: int, version: int) -> ProducedBatch:
        batch_size = self.cfg.rollout.prompts_per_step
        batch = ProducedBatch(groups=[])
        counts = {"filtered": 0, "failed": 0}
        rounds = 0
        while len(batch.groups) < batch_size and rounds <= self.cfg.produce.max_refill_rounds:
            groups = self.new_groups(step, rounds, batch_size - len(batch.groups))
            samples = [s for g in groups for s in g]
            started = time.perf_counter()
            batch.generated_tokens += await self.generate(samples, version)
            judging = time.perf_counter()
            await self.judge(samples)
            batch.generate_seconds += judging - started
            batch.judge_seconds += time.perf_counter() - judging
            for group in groups:
                verdict = self.trainable(group)
                if verdict == "ok":
                    batch.groups.append(group)
                else:
                    counts[verdict] += 1
                    batch.finished.extend(group)
            rounds += 1
        batch.stats = {
            "produce/rounds": float(rounds),
            "produce/filtered_groups": float(counts["filtered"]),
            "produce/failed_groups": float(counts["failed"]),
        }
        return batch


class AsyncProducer(Producer):
    def __init__(self, *args, buffer: ReplayBuffer | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.buffer = buffer if buffer is not None else ReplayBuffer()

    def _restart(self, sample: Sample) -> None:
        """Without partial rollout an interrupted response is thrown away and generated anew."""
        sample.response_ids, sample.logprobs, sample.response_mask = [], [], []
        sample.response, sample.finish_reason = "", None
        sample.status = SampleStatus.INIT

    async def produce(self, step: int, version: int) -> ProducedBatch:
        cfg = self.cfg.produce
        batch_size = self.cfg.rollout.prompts_per_step
        batch = ProducedBatch(groups=[])
        counts = {"filtered": 0, "failed": 0, "expired": 0, "aborted": 0, "resumed": 0, "launched": 0}
        for group in self.buffer.expire(version, cfg.max_staleness):
            counts["expired"] += 1
            batch.finished.extend(group)
        rounds = 0
        while len(self.buffer.ready) < batch_size and rounds <= cfg.max_refill_rounds:
            waiting = self.buffer.take_aborted()
            for group in waiting:
                for s in group:
                    if s.status == SampleStatus.ABORTED:
                        if cfg.partial_rollout and s.response_ids:
                            counts["resumed"] += 1
                        else:
                            self._restart(s)
            # Over-sample on the first round; a refill round only asks for what is missing.
            target = math.ceil(cfg.oversample * batch_size) if rounds == 0 else batch_size
            launch = max(0, target - len(self.buffer.ready) - len(waiting))
            groups = waiting + self.new_groups(step, rounds, launch)
            counts["launched"] += launch
            await self._round(groups, version, batch, counts)
            rounds += 1
        batch.groups = self.buffer.take_ready(batch_size)
        batch.stats = {
            "produce/rounds": float(rounds),
            "produce/launched_groups": float(counts["launched"]),
            "produce/filtered_groups": float(counts["filtered"]),
            "produce/failed_groups": float(counts["failed"]),
            "produce/expired_groups": float(counts["expired"]),
            "produce/aborted_samples": float(counts["aborted"]),
            "produce/resumed_samples": float(counts["resumed"]),
            **self.buffer.stats(),
        }
        return batch

    async def _round(self, groups: list[Group], version: int, batch: ProducedBatch, counts: dict) -> None:
        """Generate until enough groups are complete, then judge the complete ones."""
        batch_size = self.cfg.rollout.prompts_per_step
        to_run = [s for g in groups for s in g if s.status != SampleStatus.COMPLETED]
        remaining: dict[str, int] = {}
        for s in to_run:
            remaining[s.group_id] = remaining.get(s.group_id, 0) + 1
        complete = [sum(1 for g in groups if g[0].group_id not in remaining)]

        def on_finish(request: GenerationRequest, output: GenerationOutput) -> None:
            sample: Sample = request.tag
            if self.agent.is_final(request, output):
                remaining[sample.group_id] -= 1
                if remaining[sample.group_id] == 0:
                    complete[0] += 1

        controller = self.agent.controller
        controller.set_on_finish(on_finish)
        controller.set_abort(lambda: len(self.buffer.ready) + complete[0] >= batch_size)
        started = time.perf_counter()
        try:
            batch.generated_tokens += await self.generate(to_run, version)
        finally:
            controller.set_on_finish(None)
            controller.set_abort(None)
        judging = time.perf_counter()
        batch.generate_seconds += judging - started

        done = [g for g in groups if all(s.status == SampleStatus.COMPLETED for s in g)]
        done_ids = {id(g) for g in done}
        await self.judge([s for g in done for s in g])
        batch.judge_seconds += time.perf_counter() - judging
        for group in groups:
            if id(group) in done_ids:
                verdict = self.trainable(group)
                if verdict == "ok":
                    self.buffer.put_ready(group)
                else:
                    counts[verdict] += 1
                    batch.finished.extend(group)
            else:
                counts["aborted"] += sum(1 for s in group if s.status == SampleStatus.ABORTED)
                self.buffer.put_aborted(group)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "buffer": self.buffer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.buffer.load_state_dict(state["buffer"])


def build_producer(cfg: RunConfig, rows, renderer, sampler, agent, judger) -> Producer:
    if cfg.produce.strategy == "sync":
        return SyncProducer(cfg, rows, renderer, sampler, agent, judger)
    return AsyncProducer(cfg, rows, renderer, sampler, agent, judger, buffer=ReplayBuffer())
