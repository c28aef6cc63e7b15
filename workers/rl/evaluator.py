"""Evaluator: the current policy on the held-out prompts.

`schedule.eval_samples == 1`: one greedy response per prompt; eval/accuracy is the fraction
correct. `k > 1`: k samples per prompt at the rollout temperature, eval/accuracy is the mean over
all samples (pass@1) and eval/pass@k the fraction of prompts with at least one correct sample.
eval/mean_score is the mean reward. Sampled evals draw from streams seeded by (seed, step,
prompt, k), so an evaluation is reproducible.
"""

from __future__ import annotations

import asyncio
import time

from workers.rl.agent_loop import build_agent
from workers.rl.config import RunConfig
from workers.rl.data import PromptRenderer
from workers.rl.produce import is_correct
from workers.rl.rollout.base import SamplingParams
from workers.rl.rollout.controller import RolloutController
from workers.rl.sample import Sample, SampleStatus
from workers.rl.seeding import derive_seed


class Evaluator:
    def __init__(self, cfg: RunConfig, rows: list[dict], renderer: PromptRenderer, controller: RolloutController, tokenizer, judger):
        self.cfg = cfg
        self.rows = rows
        self.judger = judger
        self.k = cfg.schedule.eval_samples
        params = SamplingParams(
            temperature=0.0 if self.k == 1 else cfg.rollout.temperature,
            top_p=1.0 if self.k == 1 else cfg.rollout.top_p,
            max_new_tokens=cfg.rollout.max_new_tokens,
        )
        self.agent = build_agent(cfg.rollout.agent, controller, tokenizer, params, cfg.rollout.max_turns)
        self.prompts = [renderer.render(row) for row in rows]

    def _samples(self, step: int) -> list[Sample]:
        out = []
        for i, (row, (text, ids)) in enumerate(zip(self.rows, self.prompts)):
            group = f"eval{step}-p{i}"
            for j in range(self.k):
                out.append(
                    Sample(
                        uid=f"{group}-{j}",
                        group_id=group,
                        prompt=text,
                        prompt_ids=list(ids),
                        label=row["label"],
                        data_source=row["data_source"],
                        index=row["index"],
                        metadata={"seed": derive_seed(self.cfg.seed, "eval", step, i, j)},
                    )
                )
        return out

    async def evaluate(self, step: int, version: int) -> tuple[dict[str, float], list[Sample]]:
        started = time.perf_counter()
        samples = self._samples(step)
        await asyncio.gather(*(self.agent.run(s, version) for s in samples))
        judge_many = getattr(self.judger, "judge_many", None)
        if judge_many is not None:
            await judge_many(samples)
        else:
            await asyncio.gather(*(self.judger.judge(s) for s in samples))
        return self.metrics(samples, time.perf_counter() - started), samples

    def metrics(self, samples: list[Sample], seconds: float) -> dict[str, float]:
        n = len(samples)
        correct = [is_correct(s) for s in samples]
        metrics = {
            "eval/accuracy": sum(correct) / n,
            "eval/mean_score": sum(s.score for s in samples) / n,
            "eval/response_len/mean": sum(len(s.response_ids) for s in samples) / n,
            "eval/truncated_frac": sum(s.finish_reason == "length" for s in samples) / n,
            "eval/failed_frac": sum(s.status == SampleStatus.FAILED for s in samples) / n,
            "eval/prompts": float(len(self.rows)),
            "time/eval": seconds,
        }
        if self.k > 1:
            solved = [any(correct[i * self.k : (i + 1) * self.k]) for i in range(len(self.rows))]
            metrics[f"eval/pass@{self.k}"] = sum(solved) / len(solved)
        return metrics
