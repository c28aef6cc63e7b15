"""The trainer loop end to end on the tiny model: metrics, samples, evaluation, checkpoints,
cancellation, Ray placement and the reporters."""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from tests.engine.helpers import small_config
from workers.rl.checkpoint import list_checkpoints
from workers.rl.jsonl_reporter import JsonlReporter, read_metrics
from workers.rl.modeling import resolve_model_path
from workers.rl.recording_reporter import RecordingReporter
from workers.rl.rollout import vllm_engine
from workers.rl.trainer import train

torch.set_num_threads(1)

STEP_METRICS = [
    "reward/mean", "reward/std", "reward/min", "reward/max", "accuracy",
    "advantage/mean", "advantage/std", "advantage/max", "advantage/min", "zero_variance_frac",
    "response_len/mean", "response_len/max", "truncated_frac",
    "entropy", "clip_frac", "loss/policy", "grad_norm", "lr", "staleness/mean", "staleness/max",
    "time/generate", "time/judge", "time/train", "time/sync", "time/step", "throughput/tokens_per_s",
]


def test_a_run_reports_every_step_metric_samples_evals_and_checkpoints(tmp_path):
    cfg = small_config(schedule={"total_steps": 5, "eval_every": 2, "checkpoint_every": 2, "keep_checkpoints": 2, "log_samples": 6})
    reporter = RecordingReporter()
    summary = train(cfg, tmp_path, reporter)

    assert summary["status"] == "completed" and summary["step"] == 5
    assert sorted(reporter.steps) == [1, 2, 3, 4, 5]
    for step, metrics in reporter.steps.items():
        missing = [name for name in STEP_METRICS if name not in metrics]
        assert not missing, f"step {step} lacks {missing}"
        assert 0.0 <= metrics["reward/mean"] <= 1.0 and metrics["lr"] == pytest.approx(1e-4)
    assert "time/eval" in reporter.steps[2] and "time/eval" not in reporter.steps[3]
    assert sorted(reporter.evals) == [0, 2, 4, 5]
    assert {"eval/accuracy", "eval/mean_score"} <= reporter.evals[0].keys()
    assert reporter.evals[0]["eval/prompts"] == 16

    per_step = {}
    for record in reporter.samples:
        per_step[record["step"]] = per_step.get(record["step"], 0) + 1
        assert record["split"] == "train" and record["response_len"] == len(record["tokens"])
        for text, logprob, mask in record["tokens"]:
            assert isinstance(text, str) and logprob <= 0.0 and mask == 1
    assert max(per_step.values()) <= 6
    assert all(r["split"] == "eval" for r in reporter.eval_samples)

    assert [c[0] for c in reporter.checkpoints] == [2, 4, 5]
    assert [d[0] for d in reporter.deleted] == [2]
    kept = list_checkpoints(tmp_path / "checkpoints")
    assert [c.step for c in kept] == [4, 5]
    AutoModelForCausalLM.from_pretrained(kept[-1].path / "model")  # a checkpoint is a loadable model
    assert reporter.closed == 1


def test_same_seed_same_run_and_the_policy_really_changes(tmp_path):
    cfg = small_config(optimizer={"lr": 1e-3}, schedule={"total_steps": 3, "eval_every": 0, "checkpoint_every": 0})
    first, second = RecordingReporter(), RecordingReporter()
    train(cfg, tmp_path / "a", first)
    train(cfg, tmp_path / "b", second)
    untimed = lambda rep: {s: {k: v for k, v in m.items() if not k.startswith(("time/", "throughput/"))} for s, m in rep.steps.items()}  # noqa: E731
    assert untimed(first) == untimed(second)
    assert [r["response"] for r in first.samples] == [r["response"] for r in second.samples]

    base = AutoModelForCausalLM.from_pretrained(resolve_model_path("builtin:tiny-arith")).state_dict()
    trained = AutoModelForCausalLM.from_pretrained(tmp_path / "a" / "checkpoints" / "step-00000003" / "model").state_dict()
    assert any(not torch.equal(base[name], trained[name]) for name in base)


def test_a_stop_request_before_a_step_ends_the_run_cleanly(tmp_path):
    reporter = RecordingReporter(stop_after_step=1)
    summary = train(small_config(), tmp_path, reporter)
    assert summary["status"] == "cancelled" and summary["step"] == 1
    assert sorted(reporter.steps) == [1] and reporter.closed == 1


def test_kl_to_the_reference_and_sampled_evaluation_add_their_metrics(tmp_path):
    cfg = small_config(
        algorithm={"kl_coef": 0.1, "kl_estimator": "k3"},
        optimizer={"lr": 1e-3},
        schedule={"total_steps": 3, "eval_every": 0, "eval_samples": 3, "checkpoint_every": 0},
    )
    reporter = RecordingReporter()
    train(cfg, tmp_path, reporter)
    assert reporter.steps[1]["kl"] == pytest.approx(0.0, abs=1e-6), "policy == reference before the first update"
    assert max(reporter.steps[s]["kl"] for s in (2, 3)) > 0
    assert "eval/pass@3" in reporter.evals[3] and reporter.evals[3]["eval/pass@3"] >= reporter.evals[3]["eval/accuracy"]


def test_the_calculator_agent_runs_end_to_end(tmp_path):
    cfg = small_config(rollout={"agent": "calculator", "max_turns": 2, "max_new_tokens": 8}, schedule={"total_steps": 1, "eval_every": 0, "checkpoint_every": 0})
    reporter = RecordingReporter()
    assert train(cfg, tmp_path, reporter)["status"] == "completed"


def test_a_failing_model_path_fails_the_run_with_the_reason(tmp_path):
    reporter = RecordingReporter()
    with pytest.raises(ValueError, match="Hub name"):
        train(small_config(model={"path": "Qwen/Qwen2.5-0.5B"}), tmp_path, reporter)
    assert reporter.lines[-1][0] == "error" and "Hub name" in reporter.lines[-1][1]
    assert reporter.closed == 1


def test_the_jsonl_reporter_writes_metrics_samples_and_honours_a_stop_file(tmp_path):
    cfg = small_config(schedule={"total_steps": 2, "eval_every": 1, "checkpoint_every": 0})
    train(cfg, tmp_path, JsonlReporter(tmp_path))
    assert [m["step"] for m in read_metrics(tmp_path, "train")] == [1, 2]
    assert [m["step"] for m in read_metrics(tmp_path, "eval")] == [0, 1, 2]
    samples = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert {s["split"] for s in samples} == {"train", "eval"}
    reporter = JsonlReporter(tmp_path / "other", tensorboard=False)
    assert not reporter.should_stop()
    (tmp_path / "other" / "STOP").touch()
    assert reporter.should_stop()
    reporter.close()


def test_without_vllm_or_cuda_the_vllm_engine_fails_with_a_clear_error():
    if vllm_engine.vllm_available() and torch.cuda.is_available():
        pytest.skip("vLLM and CUDA are here: the GPU tests cover this engine")
    with pytest.raises(vllm_engine.VLLMUnavailable, match="vllm|CUDA"):
        vllm_engine.VLLMEngine(None, None, "/nowhere", small_config(), "cpu")


def test_the_worker_runs_as_a_ray_actor_in_a_placement_group(tmp_path):
    ray = pytest.importorskip("ray")
    cfg = small_config(
        resources={"use_ray": True, "num_cpus": 1, "torch_threads": 1},
        schedule={"total_steps": 2, "eval_every": 0, "checkpoint_every": 0},
    )
    reporter = RecordingReporter()
    summary = train(cfg, tmp_path, reporter)
    assert summary["status"] == "completed" and sorted(reporter.steps) == [1, 2]
    assert not ray.is_initialized(), "the trainer shuts down the Ray it started"
    local = RecordingReporter()
    train(cfg.model_copy(update={"resources": cfg.resources.model_copy(update={"use_ray": False})}), tmp_path / "local", local)
    assert local.steps[2]["reward/mean"] == pytest.approx(reporter.steps[2]["reward/mean"], abs=1e-6)
