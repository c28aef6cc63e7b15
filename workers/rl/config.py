"""RunConfig: the one schema behind the launch form, the API and the CLI.

Every field has a description and a validated range; unknown keys are errors (extra="forbid"),
so a typo in a YAML file fails loudly instead of being ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from workers.rl.judgers.spec import JudgerSpec, NumericMatchSpec

BUILTIN_TINY_MODEL = "builtin:tiny-arith"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelConfig(Strict):
    path: str = Field(
        BUILTIN_TINY_MODEL,
        description="A local Hugging Face model directory (under MODEL_ROOTS), or 'builtin:tiny-arith'.",
        min_length=1,
    )
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="Parameter dtype of the policy (float32 on CPU)."
    )
    gradient_checkpointing: bool = Field(False, description="Trade compute for memory in the training forward.")


class DataConfig(Strict):
    train: str = Field(
        "builtin:arith",
        description="Training prompts: 'builtin:arith', a local JSONL file, or 'dataset:<id>' (a stored dataset).",
        min_length=1,
    )
    eval: str | None = Field(
        "builtin:arith",
        description="Held-out prompts for evaluation (same forms as train); empty to skip evaluation.",
    )
    builtin_train_size: int = Field(2000, ge=16, le=1_000_000, description="Problems generated for builtin:arith train.")
    builtin_eval_size: int = Field(200, ge=8, le=100_000, description="Problems generated for builtin:arith eval.")
    prompt_template: str = Field(
        "{prompt}",
        description="Text around each prompt; '{prompt}' is replaced by the row's prompt. No other expansion.",
    )
    use_chat_template: bool = Field(
        True, description="Render 'messages' (or the prompt as one user turn) with the tokenizer's chat template when it has one."
    )
    max_prompt_len: int = Field(512, ge=4, le=32768, description="Prompts longer than this (in tokens) are left-truncated.")
    shuffle: bool = Field(True, description="Shuffle the training prompts each epoch (seeded).")

    @model_validator(mode="after")
    def _template_has_placeholder(self):
        if "{prompt}" not in self.prompt_template:
            raise ValueError("prompt_template must contain '{prompt}'")
        return self


class RolloutConfig(Strict):
    engine: Literal["hf", "vllm"] = Field("hf", description="'hf': transformers (CPU or GPU); 'vllm': vLLM (GPU only).")
    prompts_per_step: int = Field(16, ge=1, le=4096, description="Prompt groups trained on per step (B).")
    n: int = Field(8, ge=1, le=256, description="Samples per prompt: the group size of GRPO.")
    temperature: float = Field(1.0, ge=0.0, le=2.0, description="Sampling temperature (0 = greedy).")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    max_new_tokens: int = Field(4, ge=1, le=32768, description="Longest response, in tokens; longer ones are truncated.")
    agent: Literal["single_turn", "calculator"] = Field(
        "single_turn", description="Agent loop: one response, or multi-turn with a calculator tool (tool tokens masked)."
    )
    max_turns: int = Field(4, ge=1, le=32, description="Most model turns per trajectory in multi-turn loops.")
    gpu_memory_utilization: float = Field(0.5, gt=0.05, le=0.95, description="vLLM: fraction of GPU memory for its KV cache.")


class AlgorithmConfig(Strict):
    advantage: Literal["grpo", "dr_grpo", "rloo", "reinforce_pp"] = Field(
        "grpo", description="Advantage estimator: GRPO, Dr.GRPO (no std), RLOO (leave-one-out), REINFORCE++ (batch-normalized)."
    )
    adv_eps: float = Field(1e-6, gt=0, le=1, description="Added to the group std before dividing.")
    clip_eps_low: float = Field(0.2, ge=0.0, le=1.0, description="PPO clip: ratio lower bound 1 - eps_low.")
    clip_eps_high: float = Field(0.2, ge=0.0, le=10.0, description="PPO clip: ratio upper bound 1 + eps_high (0.28 = DAPO clip-higher).")
    dual_clip_c: float | None = Field(3.0, gt=1.0, le=100.0, description="Dual clip for negative advantages: loss bounded by -c*A. Empty disables.")
    kl_coef: float = Field(0.0, ge=0.0, le=10.0, description="Weight of the KL-to-reference loss term (0 = no reference model).")
    kl_estimator: Literal["k1", "k2", "k3"] = Field("k3", description="KL estimator with x = logp - logp_ref: k1 = x, k2 = x^2/2, k3 = exp(-x)+x-1.")
    loss_agg: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = Field(
        "token-mean", description="How per-token losses are averaged into the batch loss."
    )
    filter_zero_variance: bool = Field(False, description="Dynamic sampling: drop groups whose rewards are all equal.")
    ppo_epochs: int = Field(1, ge=1, le=16, description="Passes over each batch.")
    mini_batches: int = Field(1, ge=1, le=256, description="Optimizer steps per pass (the batch is split into this many).")
    old_logprobs: Literal["auto", "recompute", "rollout"] = Field(
        "auto",
        description=(
            "Where the PPO ratio's old logprobs come from. 'auto': recompute them with the current policy, "
            "except with one optimizer step per batch, where the training forward itself gives them exactly; "
            "'recompute': always an extra forward; 'rollout': the sampling logprobs (behaviour policy, for off-policy correction)."
        ),
    )


class ProduceConfig(Strict):
    strategy: Literal["sync", "async"] = Field("sync", description="'sync': generate then train; 'async': keep leftovers, bounded staleness.")
    max_staleness: int = Field(1, ge=0, le=64, description="Async: groups generated more than this many policy versions ago are expired.")
    oversample: float = Field(1.5, ge=1.0, le=8.0, description="Async: launch this many times B groups per step.")
    partial_rollout: bool = Field(False, description="Async: resume aborted responses with the new policy instead of restarting them.")
    max_refill_rounds: int = Field(8, ge=1, le=100, description="Sync with filtering: most extra generation rounds to fill a batch.")


class OptimizerConfig(Strict):
    lr: float = Field(1e-4, gt=0.0, le=1.0, description="Peak learning rate (AdamW).")
    schedule: Literal["constant", "linear", "cosine"] = Field("constant", description="Learning-rate decay after warmup.")
    warmup_steps: int = Field(0, ge=0, le=100_000, description="Linear warmup steps.")
    weight_decay: float = Field(0.0, ge=0.0, le=1.0, description="AdamW weight decay.")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas.")
    grad_clip: float = Field(1.0, ge=0.0, le=1000.0, description="Clip the global grad norm to this (0 = off).")
    micro_batch_tokens: int = Field(8192, ge=16, le=1_000_000, description="Token budget of one packed micro-batch.")


class ScheduleConfig(Strict):
    total_steps: int = Field(60, ge=1, le=1_000_000, description="Training steps.")
    eval_every: int = Field(5, ge=0, le=1_000_000, description="Evaluate every this many steps (0 = only at start and end).")
    eval_samples: int = Field(1, ge=1, le=64, description="Samples per eval prompt: 1 = greedy; k > 1 gives pass@k.")
    checkpoint_every: int = Field(10, ge=0, le=1_000_000, description="Checkpoint every this many steps (0 = only at the end).")
    keep_checkpoints: int = Field(2, ge=1, le=1000, description="Keep this many most recent checkpoints.")
    log_samples: int = Field(64, ge=0, le=100_000, description="Samples per step sent to the reporter (0 = none).")


class ResourcesConfig(Strict):
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="Where the policy lives ('auto': CUDA if present).")
    num_gpus: float = Field(0, ge=0, le=1024, description="GPUs of the colocated placement group bundle.")
    num_cpus: float = Field(1, gt=0, le=1024, description="CPUs of the colocated placement group bundle.")
    use_ray: bool = Field(True, description="Run the colocated worker as a Ray actor in a placement group (off: in-process).")
    ray_address: str | None = Field(None, description="Ray cluster address; empty = local Ray (or RAY_ADDRESS).")
    torch_threads: int = Field(0, ge=0, le=1024, description="torch intra-op threads (0 = torch default).")


class RunConfig(Strict):
    name: str = Field("run", max_length=200, description="A human name for the run.")
    seed: int = Field(0, ge=0, le=2**31 - 1, description="Seed of everything random: data order, sampling, init.")
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    judger: JudgerSpec = Field(default_factory=NumericMatchSpec, description="The reward function.")
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    produce: ProduceConfig = Field(default_factory=ProduceConfig)
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)

    @model_validator(mode="after")
    def _check_cross_field(self):
        if self.rollout.engine == "vllm" and self.resources.device == "cpu":
            raise ValueError("rollout.engine 'vllm' needs a GPU: set resources.device to 'cuda' or 'auto'")
        if self.algorithm.advantage in ("grpo", "dr_grpo", "rloo") and self.rollout.n < 2:
            raise ValueError(f"advantage '{self.algorithm.advantage}' compares samples of a group: rollout.n must be >= 2")
        if self.algorithm.mini_batches > self.rollout.prompts_per_step:
            raise ValueError("algorithm.mini_batches cannot exceed rollout.prompts_per_step")
        return self

    # --- estimates shown before launch -------------------------------------------------
    def estimate(self) -> dict[str, int]:
        samples_per_step = self.rollout.prompts_per_step * self.rollout.n
        return {
            "steps": self.schedule.total_steps,
            "samples_per_step": samples_per_step,
            "samples": samples_per_step * self.schedule.total_steps,
            "max_new_tokens_total": samples_per_step * self.schedule.total_steps * self.rollout.max_new_tokens,
            "evaluations": (self.schedule.total_steps // self.schedule.eval_every + 1) if self.schedule.eval_every else 2,
        }

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


# --- loading and overriding --------------------------------------------------------------


class ConfigError(ValueError):
    """A config that does not validate; `errors` has one entry per field: (dotted path, message)."""

    def __init__(self, errors: list[tuple[str, str]]):
        self.errors = errors
        super().__init__("; ".join(f"{path or '(config)'}: {msg}" for path, msg in errors))


def field_errors(exc: ValidationError) -> list[tuple[str, str]]:
    out = []
    for err in exc.errors():
        # Tagged unions keep their tag in the path (judger.numeric.tolerance): it says which
        # judger kind the value was validated as.
        loc = [str(p) for p in err["loc"]]
        out.append((".".join(loc), err["msg"]))
    return out


def parse_config(data: Any) -> RunConfig:
    """Validate a plain dict into a RunConfig, or raise ConfigError with field paths."""
    if not isinstance(data, dict):
        raise ConfigError([("", "a run config must be a mapping of sections")])
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(field_errors(exc)) from None


def load_yaml_text(text: str) -> dict:
    try:
        data = yaml.safe_load(text)  # safe_load: YAML tags can never construct Python objects
    except yaml.YAMLError as exc:
        raise ConfigError([("", f"not valid YAML: {exc}")]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError([("", "the YAML document must be a mapping")])
    return data


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply CLI-style `a.b.c=value` overrides (value parsed as YAML) to a nested dict copy."""
    import copy

    data = copy.deepcopy(data)
    for item in overrides:
        if "=" not in item:
            raise ConfigError([(item, "an override must look like section.key=value")])
        key, raw = item.split("=", 1)
        path = [p for p in key.strip().split(".") if p]
        if not path:
            raise ConfigError([(item, "empty key")])
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError([(key, f"'{part}' is not a section")])
        node[path[-1]] = value
    return data


def load_config(path: str | Path, overrides: list[str] | None = None) -> RunConfig:
    data = load_yaml_text(Path(path).read_text())
    return parse_config(apply_overrides(data, overrides or []))


PRESETS_DIR = Path(__file__).resolve().parents[2] / "configs"


def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def load_preset(name: str) -> RunConfig:
    if name not in list_presets():
        raise ConfigError([("preset", f"unknown preset {name!r}")])
    return load_config(PRESETS_DIR / f"{name}.yaml")
