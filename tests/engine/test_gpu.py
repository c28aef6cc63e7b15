"""GPU checks (issue 3, acceptance 7). They skip cleanly without CUDA, vLLM or the local model.

Set RLWEB_QWEN_DIR to a local Qwen2.5-0.5B-Instruct directory (default: the preset's path)."""

import json
import os
from pathlib import Path

import pytest
import torch

from workers.rl.config import load_preset
from workers.rl.recording_reporter import RecordingReporter
from workers.rl.rollout.vllm_engine import vllm_available
from workers.rl.trainer import train

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

GSM8K_LIKE = [
    {"prompt": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "Tom has 3 + 4 = 7 apples.\n#### 7"},
    {"prompt": "A box holds 12 eggs. How many eggs are in 5 boxes?", "answer": "12 * 5 = 60\n#### 60"},
    {"prompt": "Sara had 20 dollars and spent 8. How much is left?", "answer": "20 - 8 = 12\n#### 12"},
    {"prompt": "There are 6 rows of 7 chairs. How many chairs?", "answer": "6 * 7 = 42\n#### 42"},
]


def qwen_dir() -> Path:
    path = Path(os.environ.get("RLWEB_QWEN_DIR", load_preset("gsm8k-qwen2.5-0.5b-grpo").model.path))
    if not (path / "config.json").is_file():
        pytest.skip(f"no local model at {path} (set RLWEB_QWEN_DIR)")
    return path


def short_gpu_run(tmp_path, engine: str):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in GSM8K_LIKE))
    cfg = load_preset("gsm8k-qwen2.5-0.5b-grpo")
    data = cfg.model_dump(mode="json")
    data["model"]["path"] = str(qwen_dir())
    data["data"].update(train=str(rows), eval=str(rows))
    data["rollout"].update(engine=engine, prompts_per_step=4, n=4, max_new_tokens=128)
    data["algorithm"]["mini_batches"] = 1
    data["schedule"].update(total_steps=2, eval_every=0, checkpoint_every=0, log_samples=4)
    data["resources"]["use_ray"] = False
    reporter = RecordingReporter()
    summary = train(type(cfg).model_validate(data), tmp_path / "out", reporter)
    return summary, reporter


def test_the_gpu_preset_trains_with_the_hf_engine_on_cuda(tmp_path):
    summary, reporter = short_gpu_run(tmp_path, "hf")
    assert summary["status"] == "completed" and sorted(reporter.steps) == [1, 2]
    assert reporter.steps[2]["grad_norm"] >= 0 and "eval/accuracy" in reporter.evals[2]


@pytest.mark.skipif(not vllm_available(), reason="needs vllm")
def test_the_gpu_preset_trains_with_the_vllm_engine(tmp_path):
    summary, reporter = short_gpu_run(tmp_path, "vllm")
    assert summary["status"] == "completed" and sorted(reporter.steps) == [1, 2]
    # Weight sync: rollout logprobs of step 2 come from the updated policy, so they stay close
    # to the trainer's recomputation (bf16 tolerance).
    assert reporter.steps[2].get("logprob_diff/mean", 0.0) < 0.05
