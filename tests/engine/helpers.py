"""Small run configs for the engine tests: the builtin tiny model, a handful of prompts, a few
steps, in-process and single-threaded, so a whole training run takes seconds on a CPU."""

from __future__ import annotations

import copy

from workers.rl.config import RunConfig, parse_config

SMALL = {
    "name": "test",
    "seed": 7,
    "data": {"builtin_train_size": 64, "builtin_eval_size": 16, "use_chat_template": False, "max_prompt_len": 32},
    "rollout": {"prompts_per_step": 4, "n": 4, "max_new_tokens": 4},
    "optimizer": {"lr": 1e-4},
    "schedule": {"total_steps": 4, "eval_every": 2, "checkpoint_every": 2, "keep_checkpoints": 2, "log_samples": 8},
    "resources": {"use_ray": False, "device": "cpu", "torch_threads": 1},
}


def merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def small_config(**sections) -> RunConfig:
    """SMALL with sections overridden, e.g. small_config(produce={"strategy": "async"})."""
    return parse_config(merge(SMALL, sections))
