"""The rollout engine's sampling logprobs equal the trainer's recomputed logprobs before any
update (DESIGN §4, issue 3 acceptance 2): otherwise the PPO ratio would not start at 1 and the
"on-policy" step would silently be off-policy."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from workers.rl import arith
from workers.rl.config import RunConfig
from workers.rl.rollout.base import GenerationRequest, SamplingParams
from workers.rl.rollout.hf_engine import HFEngine
from workers.rl.sample import Sample
from workers.rl.tiny import ensure_tiny_model
from workers.rl.train import TrainController

torch.set_num_threads(2)


@pytest.fixture(scope="module")
def tiny():
    path = ensure_tiny_model()
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def rollout(model, tokenizer, temperature, top_p=1.0, prompts=12, n=4, max_new_tokens=4):
    engine = HFEngine(model, tokenizer)
    problems = arith.pool("eval")[:prompts]
    requests, groups = [], []
    for p, (a, b) in enumerate(problems):
        ids = tokenizer(arith.prompt_of(a, b)).input_ids
        for k in range(n):
            requests.append(GenerationRequest(ids, max_new_tokens=max_new_tokens, seed=1000 * p + k))
            groups.append(f"g{p}")
    outputs = engine.generate(requests, SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens))
    return [
        Sample(
            uid=f"{g}-{i}",
            group_id=g,
            prompt="",
            prompt_ids=list(req.input_ids),
            response_ids=out.token_ids,
            logprobs=out.logprobs,
            response_mask=[1] * len(out.token_ids),
        )
        for i, (g, req, out) in enumerate(zip(groups, requests, outputs))
    ]


@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_rollout_logprobs_equal_trainer_logprobs_before_any_update(tiny, temperature, top_p):
    model, tokenizer = tiny
    samples = rollout(model, tokenizer, temperature, top_p)
    lengths = {len(s.response_ids) for s in samples}
    assert len(lengths) > 1 or temperature == 0.0, "want ragged responses (some stop at eos) to exercise packing"
    cfg = RunConfig.model_validate({"rollout": {"temperature": temperature, "top_p": top_p, "n": 4, "prompts_per_step": 12}})
    controller = TrainController(model, None, cfg, "cpu")
    recomputed = controller.compute_logprobs(model, samples)
    worst = max((r - torch.tensor(s.logprobs)).abs().max().item() for s, r in zip(samples, recomputed))
    assert worst <= 1e-5
