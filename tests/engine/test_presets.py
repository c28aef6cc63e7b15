"""The shipped presets validate and say what they claim."""

from pathlib import Path

from workers.rl.config import BUILTIN_TINY_MODEL, list_presets, load_preset


def test_both_presets_are_listed_and_validate():
    assert {"tiny-arith-grpo", "gsm8k-qwen2.5-0.5b-grpo"} <= set(list_presets())


def test_the_cpu_preset_trains_the_builtin_model_on_ray():
    cfg = load_preset("tiny-arith-grpo")
    assert cfg.model.path == BUILTIN_TINY_MODEL and cfg.data.train == "builtin:arith"
    assert cfg.resources.device == "cpu" and cfg.resources.use_ray and cfg.rollout.engine == "hf"
    assert (cfg.rollout.prompts_per_step, cfg.rollout.n, cfg.rollout.temperature) == (16, 8, 1.0)
    assert cfg.optimizer.lr == 1e-4 and cfg.algorithm.kl_coef == 0.0


def test_the_gpu_preset_uses_a_local_qwen_with_the_numeric_judger():
    cfg = load_preset("gsm8k-qwen2.5-0.5b-grpo")
    assert Path(cfg.model.path).is_absolute() and "Qwen2.5-0.5B" in cfg.model.path
    assert cfg.model.dtype == "bfloat16" and cfg.resources.device == "cuda" and cfg.resources.num_gpus == 1
    assert cfg.rollout.engine == "vllm" and cfg.judger.kind == "numeric"
    assert cfg.data.use_chat_template and "{prompt}" in cfg.data.prompt_template
    # The HF engine is a drop-in alternative.
    assert cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={"engine": "hf"})}).rollout.engine == "hf"
