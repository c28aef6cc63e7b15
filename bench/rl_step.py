"""Seconds per GRPO step: our engine against TRL's GRPOTrainer, same everything, one process.

Both start from the same builtin tiny model (fresh copies), see the same prompts in the same
order (16 per step, 8 samples each, 4 new tokens, temperature 1), use the same reward (the
project's numeric judger on the arith labels), learning rate 1e-4 constant, AdamW betas
(0.9, 0.999), no weight decay, grad clip 1.0, clip eps 0.2, no KL, one optimizer step per batch,
token-mean loss (TRL's default 'dapo' loss is the same aggregation), group-std advantages, float32,
fused AdamW (TRL's default optimizer), and no gradient checkpointing (TRL's default is on: it is
turned off here so that TRL is not slowed down by memory savings ours does not make).

A step is: generate 128 responses, judge them, compute advantages, one optimizer update.

The two trainers run *interleaved*, step by step: TRL drives its own loop, and a callback runs
our step k right after TRL's step k. A neighbour process that slows the machine down then slows
both sides alike (on a shared 2-core machine this matters more than anything measured here).
TRL's step is timed from its `on_step_begin` to its `on_step_end` callback (generation, rewards,
advantages, forward/backward, optimizer step; not its logging, which favours TRL slightly); ours
around the same work. Our side never touches torch's global RNG (its sampler draws from per-row
generators), so TRL's run is the same as it would be alone.

Seconds per step: the median over steps after the first (which pays one-off warm-up costs); the
mean is printed too. Reward reached: the mean training reward of the last `--window` steps; the
whole curve is summarised by the mean reward over all steps, and the held-out greedy accuracy of
both trained models on the same eval problems is printed as well.

    python bench/rl_step.py [--steps 40] [--threads 2]

The last line is JSON: {"bench": "rl_step", "ours_s", "trl_s", "ratio", "ours_reward", "trl_reward", ...}.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from _common import emit, setup, steady

PROMPTS_PER_STEP = 16
N = 8
MAX_NEW_TOKENS = 4
LR = 1e-4
TEMPERATURE = 1.0
EVAL_PROBLEMS = 200


def load_tiny():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workers.rl.tiny import ensure_tiny_model

    path = ensure_tiny_model()
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def make_judger():
    from workers.rl.judgers.build import build_judger
    from workers.rl.judgers.spec import NumericMatchSpec

    return build_judger(NumericMatchSpec(), use_ray=False)


def eval_accuracy(model, tokenizer) -> float:
    from workers.rl import arith
    from workers.rl.tiny import greedy_accuracy

    return greedy_accuracy(model, tokenizer, arith.pool("eval")[:EVAL_PROBLEMS])


# --- ours ------------------------------------------------------------------------------------


class Ours:
    """Our engine's pieces, one GRPO step per `step(k)`: HFEngine (KV cache, colocated weights),
    the numeric judger, compute_advantages, TrainController (packed, prompt forwarded once per
    group, old logprobs from the training forward since there is one update per batch)."""

    def __init__(self, rows, steps: int, seed: int = 0):
        from workers.rl.config import RunConfig
        from workers.rl.rollout.base import SamplingParams
        from workers.rl.rollout.hf_engine import HFEngine
        from workers.rl.train import TrainController

        self.rows = rows
        self.seed = seed
        self.model, self.tokenizer = load_tiny()
        self.cfg = RunConfig.model_validate(
            {
                "rollout": {"prompts_per_step": PROMPTS_PER_STEP, "n": N, "max_new_tokens": MAX_NEW_TOKENS, "temperature": TEMPERATURE},
                "optimizer": {"lr": LR, "grad_clip": 1.0, "weight_decay": 0.0},
                "algorithm": {"advantage": "grpo", "clip_eps_low": 0.2, "clip_eps_high": 0.2, "kl_coef": 0.0},
                "schedule": {"total_steps": steps},
                "resources": {"use_ray": False, "device": "cpu"},
            }
        )
        self.engine = HFEngine(self.model, self.tokenizer)
        self.controller = TrainController(self.model, None, self.cfg, "cpu")
        self.judger = make_judger()
        self.params = SamplingParams(temperature=TEMPERATURE, top_p=1.0, max_new_tokens=MAX_NEW_TOKENS)
        self.prompt_ids: dict[str, list[int]] = {}
        self.times: list[float] = []
        self.parts: list[tuple[float, float, float]] = []
        self.rewards: list[float] = []

    def step(self, step: int) -> None:
        from workers.rl.algorithms import compute_advantages
        from workers.rl.rollout.base import GenerationRequest
        from workers.rl.sample import Sample, SampleStatus

        batch = self.rows[step * PROMPTS_PER_STEP : (step + 1) * PROMPTS_PER_STEP]
        started = time.perf_counter()
        requests, meta = [], []
        for p, row in enumerate(batch):
            ids = self.prompt_ids.get(row["prompt"])
            if ids is None:
                ids = self.prompt_ids[row["prompt"]] = self.tokenizer(row["prompt"]).input_ids
            for k in range(N):
                # torch's CPU generator keeps only the low 32 bits of a seed: stay within them.
                seed = (self.seed * 2_654_435_761 + step * 1_000_003 + p * N + k) % 2**32
                requests.append(GenerationRequest(ids, max_new_tokens=MAX_NEW_TOKENS, seed=seed))
                meta.append((p, row))
        outputs = self.engine.generate(requests, self.params)
        generated = time.perf_counter()
        samples = [
            Sample(
                uid=f"{step}-{i}",
                group_id=f"{step}-{p}",
                prompt=row["prompt"],
                prompt_ids=req.input_ids,
                label=row["answer"],
                data_source=row["data_source"],
                response_ids=out.token_ids,
                response=self.tokenizer.decode(out.token_ids, skip_special_tokens=True),
                logprobs=out.logprobs,
                response_mask=[1] * len(out.token_ids),
                finish_reason=out.finish_reason,
                status=SampleStatus.COMPLETED,
                policy_version=step,
            )
            for i, ((p, row), req, out) in enumerate(zip(meta, requests, outputs))
        ]
        asyncio.run(self.judger.judge_many(samples))
        compute_advantages(samples, self.cfg.algorithm)
        judged = time.perf_counter()
        self.controller.train_step(samples, policy_version=step)
        done = time.perf_counter()
        self.times.append(done - started)
        self.parts.append((generated - started, judged - generated, done - judged))
        self.rewards.append(statistics.fmean(s.score for s in samples))

    def result(self) -> dict:
        self.judger.close()
        return {"times": self.times, "rewards": self.rewards, "parts": self.parts, "accuracy": eval_accuracy(self.model, self.tokenizer)}


# --- TRL, driving both -----------------------------------------------------------------------


def run_interleaved(rows, steps: int, seed: int, ours: Ours | None) -> dict:
    """Train with TRL's GRPOTrainer; after each of its steps run ours (when given)."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from workers.rl.sample import Sample

    model, tokenizer = load_tiny()
    judger = make_judger()

    def numeric_reward(prompts, completions, answer, **kwargs):
        samples = [
            Sample(uid=str(i), group_id="", prompt=p, prompt_ids=[], label=a, response=c)
            for i, (p, c, a) in enumerate(zip(prompts, completions, answer))
        ]
        asyncio.run(judger.judge_many(samples))
        return [s.score for s in samples]

    class StepClock(TrainerCallback):
        def __init__(self):
            self.times, self.rewards, self._t0 = [], [], None

        def on_step_begin(self, args, state, control, **kwargs):
            self._t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.times.append(time.perf_counter() - self._t0)
            if ours is not None:
                ours.step(len(self.times) - 1)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                self.rewards.append(float(logs["reward"]))

    clock = StepClock()
    with tempfile.TemporaryDirectory() as out_dir:
        args = GRPOConfig(
            output_dir=out_dir,
            use_cpu=True,
            seed=seed,
            max_steps=steps,
            per_device_train_batch_size=PROMPTS_PER_STEP * N,  # completions per step
            gradient_accumulation_steps=1,
            num_generations=N,
            max_completion_length=MAX_NEW_TOKENS,
            temperature=TEMPERATURE,
            top_p=1.0,
            top_k=0,
            learning_rate=LR,
            lr_scheduler_type="constant",
            warmup_steps=0,
            weight_decay=0.0,
            adam_beta1=0.9,
            adam_beta2=0.999,
            max_grad_norm=1.0,
            beta=0.0,
            epsilon=0.2,
            num_iterations=1,
            loss_type="dapo",  # token-mean over the batch, like ours
            scale_rewards="group",
            shuffle_dataset=False,  # the same prompts in the same order as ours
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            bf16=False,  # float32 like ours (TRL's config would default to bf16)
            gradient_checkpointing=False,  # TRL defaults to True (~20% slower training); ours does not checkpoint
            dataloader_num_workers=0,
        )
        dataset = Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]} for r in rows])
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=numeric_reward,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[clock],
        )
        trainer.remove_callback(PrinterCallback)  # it prints every step's log dict
        checkpointing = getattr(trainer.model, "is_gradient_checkpointing", False)
        assert not checkpointing and next(trainer.model.parameters()).dtype == torch.float32, "TRL must train like ours"
        trainer.train()
    judger.close()
    return {"times": clock.times, "rewards": clock.rewards, "accuracy": eval_accuracy(model, tokenizer)}


# --- main ------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument(
        "--threads", type=int, default=1,
        help="torch threads of both sides (1: robust on a shared machine; 2 threads on 2 busy cores mostly wait on each other)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--window", type=int, default=20, help="last steps averaged for the reward reached")
    parser.add_argument("--only", choices=["ours", "trl"], help="run one side alone (profiling); no ratio then")
    args = parser.parse_args()
    setup(args.threads)
    import torch
    from transformers import set_seed

    from workers.rl import arith

    rows = arith.make_rows("train", args.steps * PROMPTS_PER_STEP, seed=args.seed)
    load_tiny()  # build it (once) outside the timed runs

    results = {}
    set_seed(args.seed)
    if args.only == "ours":
        ours = Ours(rows, args.steps, args.seed)
        for k in range(args.steps):
            ours.step(k)
        results["ours"] = ours.result()
    else:
        ours = Ours(rows, args.steps, args.seed) if args.only is None else None
        trl = run_interleaved(rows, args.steps, args.seed, ours)
        if ours is not None:
            results["ours"] = ours.result()
        results["trl"] = trl

    def reached(result):
        return statistics.fmean(result["rewards"][-args.window :])

    print(f"threads={torch.get_num_threads()} steps={args.steps} batch={PROMPTS_PER_STEP}x{N} new_tokens={MAX_NEW_TOKENS} lr={LR}")
    print(f"{'':6} {'median s':>9} {'mean s':>8} {'first s':>8} {'reward@0':>9} {'reward@end':>11} {'curve':>7} {'eval acc':>9}")
    for name, r in results.items():
        median, mean = steady(r["times"])
        print(
            f"{name:6} {median:9.4f} {mean:8.4f} {r['times'][0]:8.3f} {r['rewards'][0]:9.3f} {reached(r):11.3f}"
            f" {statistics.fmean(r['rewards']):7.3f} {r['accuracy']:9.3f}"
        )
    if "ours" in results:
        gen, judge, train = (steady([p[i] for p in results["ours"]["parts"]])[0] for i in range(3))
        print(f"ours per step (medians): generate {gen:.4f} s, judge+advantages {judge:.4f} s, train {train:.4f} s")
    if len(results) < 2:
        return
    ours_r, trl_r = results["ours"], results["trl"]
    ours_s, trl_s = steady(ours_r["times"])[0], steady(trl_r["times"])[0]
    paired = statistics.median(o / t for o, t in zip(ours_r["times"][1:], trl_r["times"][1:]))
    print(f"ratio ours/trl = {ours_s / trl_s:.3f} (median of per-step paired ratios {paired:.3f})")
    emit(
        {
            "bench": "rl_step",
            "ours_s": round(ours_s, 4),
            "trl_s": round(trl_s, 4),
            "ratio": round(ours_s / trl_s, 4),
            "ours_reward": round(reached(ours_r), 4),
            "trl_reward": round(reached(trl_r), 4),
            "paired_ratio": round(paired, 4),
            "ours_reward_curve": round(statistics.fmean(ours_r["rewards"]), 4),
            "trl_reward_curve": round(statistics.fmean(trl_r["rewards"]), 4),
            "ours_mean_s": round(steady(ours_r["times"])[1], 4),
            "trl_mean_s": round(steady(trl_r["times"])[1], 4),
            "ours_eval_accuracy": ours_r["accuracy"],
            "trl_eval_accuracy": trl_r["accuracy"],
            "steps": args.steps,
            "threads": torch.get_num_threads(),
        }
    )


if __name__ == "__main__":
    main()
