"""The colocated trainer: one worker holds the policy, the rollout engine (sharing the policy's
parameters), the reference model (if KL is on), the judger and the TrainController; a driver
loop tells it what to do and reports through a Reporter.

    produce batch -> judge -> advantages -> train -> sync weights -> (evaluate) -> report -> (checkpoint)

With `resources.use_ray` the worker is a Ray actor placed in a one-bundle placement group
{CPU: num_cpus, GPU: num_gpus} (local Ray, or `ray_address` / RAY_ADDRESS); otherwise it runs
in-process. The driver stays where the Reporter is (the web worker's DB connection, the CLI's
files) and polls `reporter.should_stop()` at every step boundary.

Public entry point: `train(config, out_dir, reporter, resume=True) -> dict`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import statistics
import time
from pathlib import Path

from workers.rl.checkpoint import latest_checkpoint, prune_checkpoints, write_checkpoint
from workers.rl.config import RunConfig, parse_config
from workers.rl.reporter import Reporter

log = logging.getLogger(__name__)

STATE_FILE = "trainer_state.pt"


# --- the worker ---------------------------------------------------------------------------------


class ColocatedWorker:
    """Everything that touches the model. Plain synchronous methods (also as a Ray actor), each
    returning plain data; it owns one event loop for the async agent loops and judgers."""

    def __init__(self, config: dict, out_dir: str, resume_from: str | None = None):
        import torch

        from workers.rl import data as data_mod
        from workers.rl import modeling
        from workers.rl.agent_loop import build_agent
        from workers.rl.evaluator import Evaluator
        from workers.rl.judgers.build import build_judger
        from workers.rl.produce import build_producer
        from workers.rl.rollout.base import SamplingParams
        from workers.rl.rollout.controller import RolloutController
        from workers.rl.seeding import seed_everything
        from workers.rl.train import TrainController

        self.cfg = cfg = parse_config(config)
        self.out_dir = Path(out_dir)
        self._notes: list[tuple[str, str]] = []
        res = cfg.resources
        if res.torch_threads:
            torch.set_num_threads(res.torch_threads)
        if res.device == "auto":
            self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        else:
            self.device = torch.device(res.device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("resources.device is 'cuda' but no CUDA device is available")
        seed_everything(cfg.seed)

        model_dir = modeling.resolve_model_path(cfg.model.path)
        self.model_dir = model_dir
        self.tokenizer = modeling.load_tokenizer(model_dir)
        policy_dir = Path(resume_from) / "model" if resume_from else model_dir
        self.policy = modeling.load_causal_lm(policy_dir, cfg.model.dtype, self.device)
        self.ref = None
        if cfg.algorithm.kl_coef > 0:
            self.ref = modeling.load_causal_lm(model_dir, cfg.model.dtype, self.device)
        self.engine = self._build_engine()
        self.controller = RolloutController(self.engine)
        self.judger = build_judger(cfg.judger, use_ray=res.use_ray)

        renderer = data_mod.PromptRenderer(self.tokenizer, cfg.data)
        rows = data_mod.load_rows(cfg.data.train, cfg.data, "train", cfg.seed)
        sampler = data_mod.PromptSampler(len(rows), cfg.seed, cfg.data.shuffle)
        params = SamplingParams(cfg.rollout.temperature, cfg.rollout.top_p, cfg.rollout.max_new_tokens)
        agent = build_agent(cfg.rollout.agent, self.controller, self.tokenizer, params, cfg.rollout.max_turns)
        self.producer = build_producer(cfg, rows, renderer, sampler, agent, self.judger)
        self.evaluator = None
        if cfg.data.eval:
            eval_rows = data_mod.load_rows(cfg.data.eval, cfg.data, "eval", cfg.seed)
            self.evaluator = Evaluator(cfg, eval_rows, renderer, self.controller, self.tokenizer, self.judger)
        self.trainer = TrainController(self.policy, self.ref, cfg, self.device)
        self.version = 0  # training steps applied to the policy
        self.loop = asyncio.new_event_loop()
        if resume_from:
            self._load_state(Path(resume_from))
            self.controller.sync_weights()  # an engine with its own weights (vLLM) started from the base model
        self._note("info", f"model {cfg.model.path} from {model_dir} on {self.device}: "
                   f"{sum(p.numel() for p in self.policy.parameters()):,} parameters, {len(rows)} training prompts")

    def _build_engine(self):
        if self.cfg.rollout.engine == "vllm":
            from workers.rl.rollout.vllm_engine import VLLMEngine

            return VLLMEngine(self.policy, self.tokenizer, self.model_dir, self.cfg, self.device)
        from workers.rl.rollout.hf_engine import HFEngine

        return HFEngine(self.policy, self.tokenizer, self.device)

    def _note(self, level: str, message: str) -> None:
        getattr(log, level if level in ("debug", "info", "warning", "error") else "info")(message)
        self._notes.append((level, message))

    def _take_notes(self) -> list[tuple[str, str]]:
        notes, self._notes = self._notes, []
        return notes

    # --- one training step --------------------------------------------------------------------

    def train_step(self, step: int) -> dict:
        from workers.rl import algorithms

        cfg = self.cfg
        started = time.perf_counter()
        self.controller.wake_up()
        batch = self.loop.run_until_complete(self.producer.produce(step, self.version))
        samples = batch.samples
        metrics: dict[str, float] = dict(batch.stats)
        metrics.update(self._reward_metrics(samples))
        metrics["num_groups"] = float(len(batch.groups))
        metrics["num_samples"] = float(len(samples))
        train_seconds = sync_seconds = 0.0
        if samples:
            for s in samples:
                s.staleness = self.version - s.policy_version
            metrics.update(algorithms.compute_advantages(samples, cfg.algorithm))
            self.controller.sleep()
            t0 = time.perf_counter()
            metrics.update(self.trainer.train_step(samples, policy_version=self.version))
            train_seconds = time.perf_counter() - t0
            t0 = time.perf_counter()
            self.controller.wake_up()
            self.controller.sync_weights()
            sync_seconds = time.perf_counter() - t0
            self.version += 1
        else:
            self._note("warning", f"step {step}: no trainable sample (every group failed or was filtered); the policy is unchanged")
        step_seconds = time.perf_counter() - started
        metrics.update(
            {
                "time/generate": batch.generate_seconds,
                "time/judge": batch.judge_seconds,
                "time/train": train_seconds,
                "time/sync": sync_seconds,
                "time/step": step_seconds,
                # Policy tokens generated per second of the whole step (generation + judging + training).
                "throughput/tokens_per_s": batch.generated_tokens / step_seconds if step_seconds > 0 else 0.0,
                "policy_version": float(self.version),
            }
        )
        records = self._records(step, "train", samples + batch.finished, batch.groups)
        return {"metrics": metrics, "samples": records, "notes": self._take_notes()}

    @staticmethod
    def _reward_metrics(samples) -> dict[str, float]:
        from workers.rl.produce import is_correct

        if not samples:
            return {}
        scores = [s.score for s in samples]
        lengths = [len(s.response_ids) for s in samples]
        metrics = {
            "reward/mean": statistics.fmean(scores),
            "reward/std": statistics.pstdev(scores) if len(scores) > 1 else 0.0,
            "reward/min": min(scores),
            "reward/max": max(scores),
            "accuracy": sum(is_correct(s) for s in samples) / len(samples),
            "response_len/mean": statistics.fmean(lengths),
            "response_len/max": float(max(lengths)),
            "truncated_frac": sum(s.finish_reason == "length" for s in samples) / len(samples),
        }
        components = sorted({k for s in samples for k in s.reward if k != "score"})
        for name in components:
            values = [float(s.reward[name]) for s in samples if name in s.reward]
            metrics[f"reward/{name}"] = statistics.fmean(values)
        return metrics

    def _records(self, step: int, split: str, samples, groups=()) -> list[dict]:
        from workers.rl.produce import zero_variance

        limit = self.cfg.schedule.log_samples
        if limit <= 0:
            return []
        flat = {id(s): zero_variance(g) for g in groups for s in g}
        records = []
        for s in samples[:limit]:
            tokens = [
                [self.tokenizer.decode([t], skip_special_tokens=False), float(lp), int(m)]
                for t, lp, m in zip(s.response_ids, s.logprobs, s.response_mask)
            ]
            records.append(s.to_record(step, split, tokens=tokens, zero_variance=flat.get(id(s), False)))
        return records

    # --- evaluation ---------------------------------------------------------------------------

    def has_evaluator(self) -> bool:
        return self.evaluator is not None

    def evaluate(self, step: int) -> dict:
        self.controller.wake_up()
        metrics, samples = self.loop.run_until_complete(self.evaluator.evaluate(step, self.version))
        return {"metrics": metrics, "samples": self._records(step, "eval", samples), "notes": self._take_notes()}

    # --- checkpoints --------------------------------------------------------------------------

    def save_checkpoint(self, step: int) -> dict:
        import torch

        from workers.rl.seeding import rng_state

        def write(tmp: Path) -> None:
            self.policy.save_pretrained(tmp / "model")
            self.tokenizer.save_pretrained(tmp / "model")
            state = {
                "step": step,
                "version": self.version,
                "trainer": self.trainer.state_dict(),
                "producer": self.producer.state_dict(),
                "rng": rng_state(),
                "config": self.cfg.model_dump(mode="json"),
            }
            torch.save(state, tmp / STATE_FILE)

        path, size = write_checkpoint(self.out_dir / "checkpoints", step, write, {"version": self.version})
        return {"path": str(path), "size_bytes": size}

    def _load_state(self, path: Path) -> None:
        import torch

        from workers.rl.seeding import set_rng_state

        # Our own file (not user input): it holds RNG states, which need full unpickling.
        state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)
        self.version = int(state["version"])
        self.trainer.load_state_dict(state["trainer"])
        self.producer.load_state_dict(state["producer"])
        set_rng_state(state["rng"])
        self._note("info", f"resumed from {path} (step {state['step']}, policy version {self.version})")

    def close(self) -> None:
        try:
            close = getattr(self.judger, "aclose", None)
            if close is not None:
                self.loop.run_until_complete(close())
            else:
                self.judger.close()
        finally:
            self.engine.sleep()
            self.loop.close()


# --- where the worker runs ----------------------------------------------------------------------


class LocalHandle:
    def __init__(self, config: RunConfig, out_dir: Path, resume_from: Path | None):
        self.worker = ColocatedWorker(config.model_dump(mode="json"), str(out_dir), str(resume_from) if resume_from else None)

    def call(self, method: str, *args):
        return getattr(self.worker, method)(*args)

    def close(self) -> None:
        self.worker.close()


class RayHandle:
    """The worker as a Ray actor in a one-bundle placement group."""

    def __init__(self, config: RunConfig, out_dir: Path, resume_from: Path | None):
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self._ray = ray
        self._remove_pg = remove_placement_group
        res = config.resources
        self.started_ray = False
        if not ray.is_initialized():
            address = res.ray_address or os.environ.get("RAY_ADDRESS")
            if address:
                ray.init(address=address, log_to_driver=True)
            else:
                # Local Ray sized to the run: few CPUs means few idle worker processes.
                ray.init(
                    num_cpus=max(1, math.ceil(res.num_cpus)),
                    num_gpus=math.ceil(res.num_gpus),
                    include_dashboard=False,
                    log_to_driver=True,
                    configure_logging=False,
                )
            self.started_ray = True
        bundle = {"CPU": res.num_cpus}
        if res.num_gpus:
            bundle["GPU"] = res.num_gpus
        self.pg = placement_group([bundle], strategy="STRICT_PACK")
        ray.get(self.pg.ready(), timeout=300)
        repo = str(Path(__file__).resolve().parents[2])
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
        for name in ("DATA_DIR", "RLWEB_DATA_DIR", "MODEL_ROOTS"):
            if os.environ.get(name):
                env[name] = os.environ[name]
        actor_cls = ray.remote(ColocatedWorker)
        self.actor = actor_cls.options(
            num_cpus=res.num_cpus,
            num_gpus=res.num_gpus,
            scheduling_strategy=PlacementGroupSchedulingStrategy(self.pg, placement_group_bundle_index=0),
            runtime_env={"env_vars": env},
        ).remote(config.model_dump(mode="json"), str(out_dir), str(resume_from) if resume_from else None)

    def call(self, method: str, *args):
        return self._ray.get(getattr(self.actor, method).remote(*args))

    def close(self) -> None:
        ray = self._ray
        try:
            ray.get(self.actor.close.remote(), timeout=60)
        except Exception:  # the actor may be the reason we are closing
            log.warning("the trainer actor did not close cleanly", exc_info=True)
        ray.kill(self.actor)
        self._remove_pg(self.pg)
        if self.started_ray:
            ray.shutdown()


# --- the driver loop ----------------------------------------------------------------------------


def _due(step: int, every: int, total: int) -> bool:
    return step == total or (every > 0 and step % every == 0)


def _forward_notes(reporter: Reporter, result: dict) -> None:
    for level, message in result.get("notes", []):
        reporter.log_line(level, message)


def _prebuild_tiny_model(config: RunConfig, reporter: Reporter) -> None:
    """Build builtin:tiny-arith here, where the reporter can say so, rather than silently in the
    worker (which would find it built). Skipped for a remote Ray cluster: its disk is not ours."""
    from workers.rl.config import BUILTIN_TINY_MODEL

    remote = config.resources.use_ray and (config.resources.ray_address or os.environ.get("RAY_ADDRESS"))
    if config.model.path != BUILTIN_TINY_MODEL or remote:
        return
    from workers.rl.tiny import ensure_tiny_model, is_built, tiny_info, tiny_model_dir

    if is_built(tiny_model_dir()):
        return
    reporter.log_line("info", "building the builtin tiny-arith model (first use only, about half a minute)")
    ensure_tiny_model()
    info = tiny_info() or {}
    reporter.log_line("info", f"built tiny-arith: held-out greedy accuracy {100 * info.get('accuracy', 0):.0f}% "
                              f"after {info.get('steps')} warm-up steps in {info.get('build_seconds')} s")


def train(config: RunConfig, out_dir: Path, reporter: Reporter, resume: bool = True) -> dict:
    """Run (or continue) a training run; returns a summary dict with its final status."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sched = config.schedule
    ckpt_root = out_dir / "checkpoints"
    latest = latest_checkpoint(ckpt_root) if resume else None
    start = latest.step if latest else 0
    summary: dict = {"status": "running", "step": start, "out_dir": str(out_dir), "resumed_from": start or None}
    started = time.monotonic()
    handle = None
    try:
        if reporter.should_stop():
            summary["status"] = "cancelled"
            return summary
        reporter.log_line("info", f"starting {'(resuming at step ' + str(start) + ') ' if start else ''}"
                          f"{'on Ray' if config.resources.use_ray else 'in-process'}: {sched.total_steps} steps")
        _prebuild_tiny_model(config, reporter)
        handle = (RayHandle if config.resources.use_ray else LocalHandle)(config, out_dir, latest.path if latest else None)
        has_eval = handle.call("has_evaluator")
        if start == 0 and has_eval:
            result = handle.call("evaluate", 0)
            _forward_notes(reporter, result)
            reporter.log_eval(0, result["metrics"], result["samples"])
            summary["first_eval"] = result["metrics"]
        summary["status"] = "completed"
        for step in range(start + 1, sched.total_steps + 1):
            if reporter.should_stop():
                summary["status"] = "cancelled"
                reporter.log_line("info", f"stopped before step {step}")
                break
            result = handle.call("train_step", step)
            _forward_notes(reporter, result)
            metrics = result["metrics"]
            evaluation = None
            if has_eval and _due(step, sched.eval_every, sched.total_steps):
                evaluation = handle.call("evaluate", step)
                _forward_notes(reporter, evaluation)
                metrics["time/eval"] = evaluation["metrics"]["time/eval"]
                metrics["time/step"] += metrics["time/eval"]
            reporter.log_step(step, metrics, result["samples"])
            if evaluation is not None:
                reporter.log_eval(step, evaluation["metrics"], evaluation["samples"])
                summary["last_eval"] = evaluation["metrics"]
            summary["step"] = step
            summary["last_metrics"] = metrics
            if _due(step, sched.checkpoint_every, sched.total_steps):
                saved = handle.call("save_checkpoint", step)
                reporter.log_checkpoint(step, saved["path"], saved["size_bytes"], metrics)
                summary["checkpoint"] = saved["path"]
                for gone in prune_checkpoints(ckpt_root, sched.keep_checkpoints):
                    reporter.log_checkpoint_deleted(gone.step, str(gone.path))
        return summary
    except BaseException as exc:
        summary["status"] = "failed"
        summary["error"] = f"{type(exc).__name__}: {exc}"
        reporter.log_line("error", f"training failed at step {summary['step'] + 1}: {summary['error']}")
        raise
    finally:
        summary["wall_seconds"] = time.monotonic() - started
        try:
            if handle is not None:
                handle.close()
        finally:
            reporter.close()
