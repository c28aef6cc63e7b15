"""Seconds per GRPO step: our engine against TRL's GRPOTrainer, same everything, one process.

Both start from the same builtin tiny model (fresh copies), see the same prompts in the same
order (16 per step, 8 samples each, 4 new tokens, temperature 1), use the same reward (the
project's numeric judger on the arith labels), learning rate 1e-4 constant, AdamW betas
(0.9, 0.999), no weight decay, grad clip 1.0, clip eps 0.2, no KL, one optimizer step per batch,
token-mean loss (TRL's default 'dapo' loss is the same aggregation) and group-std advantages.

A step is: generate 128 responses, judge them, compute advantages, one optimizer update.
Seconds per step: the median over steps after the first (which pays one-off warm-up costs; the
mean is printed too). TRL's step is timed from its `on_step_begin` to its `on_step_end` callback,
which holds generation, rewards, advantages, forward/backward and the optimizer step but not its
logging (this favours TRL slightly); ours is timed around the same work.
Reward: the mean training reward of the last `--window` steps, and the held-out greedy accuracy
of each trained model on the same 200 eval problems.

    python bench/rl_step.py [--steps 30] [--threads 2]

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


def run_ours(rows, steps: int) -> dict:
    from workers.rl.algorithms import compute_advantages
    from workers.rl.config import RunConfig
    from workers.rl.rollout.base import GenerationRequest, SamplingParams
    from workers.rl.rollout.hf_engine import HFEngine
    from workers.rl.sample import Sample, SampleStatus
    from workers.rl.train import TrainController

    model, tokenizer = load_tiny()
    cfg = RunConfig.model_validate(
        {
            "rollout": {"prompts_per_step": PROMPTS_PER_STEP, "n": N, "max_new_tokens": MAX_NEW_TOKENS, "temperature": TEMPERATURE},
            "optimizer": {"lr": LR, "grad_clip": 1.0, "weight_decay": 0.0},
            "algorithm": {"advantage": "grpo", "clip_eps_low": 0.2, "clip_eps_high": 0.2, "kl_coef": 0.0},
            "schedule": {"total_steps": steps},
            "resources": {"use_ray": False, "device": "cpu"},
        }
    )
    engine = HFEngine(model, tokenizer)
    controller = TrainController(model, None, cfg, "cpu")
    judger = make_judger()
    params = SamplingParams(temperature=TEMPERATURE, top_p=1.0, max_new_tokens=MAX_NEW_TOKENS)
    prompt_ids = {}
    times, rewards, parts = [], [], []
    for step in range(steps):
        batch = rows[step * PROMPTS_PER_STEP : (step + 1) * PROMPTS_PER_STEP]
        started = time.perf_counter()
        requests, meta = [], []
        for p, row in enumerate(batch):
            ids = prompt_ids.get(row["prompt"])
            if ids is None:
                ids = prompt_ids[row["prompt"]] = tokenizer(row["prompt"]).input_ids
            for k in range(N):
                requests.append(GenerationRequest(ids, max_new_tokens=MAX_NEW_TOKENS, seed=(step * 1_000_003 + p * N + k)))
                meta.append((p, row))
        outputs = engine.generate(requests, params)
        t_gen = time.perf_counter()
        samples = [
            Sample(
                uid=f"{step}-{i}",
                group_id=f"{step}-{p}",
                prompt=row["prompt"],
                prompt_ids=req.input_ids,
                label=row["answer"],
                data_source=row["data_source"],
                response_ids=out.token_ids,
                response=tokenizer.decode(out.token_ids, skip_special_tokens=True),
                logprobs=out.logprobs,
                response_mask=[1] * len(out.token_ids),
                finish_reason=out.finish_reason,
                status=SampleStatus.COMPLETED,
                policy_version=step,
            )
            for i, ((p, row), req, out) in enumerate(zip(meta, requests, outputs))
        ]
        asyncio.run(judger.judge_many(samples))
        compute_advantages(samples, cfg.algorithm)
        t_judge = time.perf_counter()
        controller.train_step(samples, policy_version=step)
        done = time.perf_counter()
        times.append(done - started)
        parts.append((t_gen - started, t_judge - t_gen, done - t_judge))
        rewards.append(statistics.fmean(s.score for s in samples))
    judger.close()
    return {"times": times, "rewards": rewards, "parts": parts, "accuracy": eval_accuracy(model, tokenizer)}


# --- TRL -------------------------------------------------------------------------------------


def run_trl(rows, steps: int, seed: int) -> dict:
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
            bf16=False,
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
        trainer.train()
    judger.close()
    return {"times": clock.times, "rewards": clock.rewards, "accuracy": eval_accuracy(model, tokenizer)}


# --- main ------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--window", type=int, default=5, help="steps averaged for the reward reached")
    parser.add_argument("--only", choices=["ours", "trl"], help="run one side (for profiling); no ratio then")
    args = parser.parse_args()
    setup(args.threads)
    import torch
    from transformers import set_seed

    from workers.rl import arith

    rows = arith.make_rows("train", args.steps * PROMPTS_PER_STEP, seed=args.seed)
    load_tiny()  # build it (once) outside the timed runs

    results = {}
    if args.only != "trl":
        set_seed(args.seed)
        results["ours"] = run_ours(rows, args.steps)
    if args.only != "ours":
        set_seed(args.seed)
        results["trl"] = run_trl(rows, args.steps, args.seed)

    def reached(result):
        return statistics.fmean(result["rewards"][-args.window :])

    print(f"threads={torch.get_num_threads()} steps={args.steps} batch={PROMPTS_PER_STEP}x{N} new_tokens={MAX_NEW_TOKENS} lr={LR}")
    print(f"{'':6} {'median s':>9} {'mean s':>8} {'first s':>8} {'reward@0':>9} {'reward@end':>11} {'eval acc':>9}")
    for name, r in results.items():
        median, mean = steady(r["times"])
        print(f"{name:6} {median:9.3f} {mean:8.3f} {r['times'][0]:8.3f} {r['rewards'][0]:9.3f} {reached(r):11.3f} {r['accuracy']:9.3f}")
    if "ours" in results:
        gen, judge, train = (steady([p[i] for p in results["ours"]["parts"]])[0] for i in range(3))
        print(f"ours per step (medians): generate {gen:.3f} s, judge+advantages {judge:.3f} s, train {train:.3f} s")
    if len(results) < 2:
        return
    ours, trl = results["ours"], results["trl"]
    ours_s, trl_s = steady(ours["times"])[0], steady(trl["times"])[0]
    print(f"ratio ours/trl = {ours_s / trl_s:.3f}")
    emit(
        {
            "bench": "rl_step",
            "ours_s": round(ours_s, 4),
            "trl_s": round(trl_s, 4),
            "ratio": round(ours_s / trl_s, 4),
            "ours_reward": round(reached(ours), 4),
            "trl_reward": round(reached(trl), 4),
            "ours_mean_s": round(steady(ours["times"])[1], 4),
            "trl_mean_s": round(steady(trl["times"])[1], 4),
            "ours_eval_accuracy": ours["accuracy"],
            "trl_eval_accuracy": trl["accuracy"],
            "steps": args.steps,
            "threads": torch.get_num_threads(),
        }
    )


if __name__ == "__main__":
    main()
