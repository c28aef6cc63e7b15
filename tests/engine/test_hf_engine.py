"""HFEngine: batched KV-cache sampling on the tiny model."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from workers.rl.rollout.base import GenerationRequest, SamplingParams
from workers.rl.rollout.hf_engine import HFEngine, top_p_filter
from workers.rl.tiny import ensure_tiny_model

torch.set_num_threads(1)

PROMPTS = ["37+45=", "7+5=", "12+88=", "99+1=", "50+50="]  # different lengths: left padding matters


@pytest.fixture(scope="module")
def tiny():
    path = ensure_tiny_model()
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def requests_for(tokenizer, prompts, max_new_tokens=4, seed=0):
    return [GenerationRequest(tokenizer(p).input_ids, max_new_tokens=max_new_tokens, seed=seed + i) for i, p in enumerate(prompts)]


def test_greedy_batched_generation_equals_one_prompt_at_a_time_without_padding(tiny):
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=4)
    batched = engine.generate(requests_for(tokenizer, PROMPTS), greedy)
    for prompt, out in zip(PROMPTS, batched):
        ids = torch.tensor([tokenizer(prompt).input_ids])
        expected = []
        for _ in range(4):  # plain full forwards, no cache, no padding
            nxt = int(model(input_ids=ids).logits[0, -1].argmax())
            expected.append(nxt)
            if nxt == tokenizer.eos_token_id:
                break
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
        assert out.token_ids == expected


def test_a_rows_sample_depends_on_its_seed_not_on_its_batch(tiny):
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer, max_batch_rows=2)  # chunking must not matter either
    params = SamplingParams(temperature=1.0, max_new_tokens=4)
    together = engine.generate(requests_for(tokenizer, PROMPTS, seed=100), params)
    for i, prompt in enumerate(PROMPTS):
        alone = engine.generate([GenerationRequest(tokenizer(prompt).input_ids, max_new_tokens=4, seed=100 + i)], params)[0]
        assert alone.token_ids == together[i].token_ids
        assert alone.logprobs == pytest.approx(together[i].logprobs, abs=1e-5)


def test_different_seeds_give_different_samples(tiny):
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer)
    params = SamplingParams(temperature=1.0, max_new_tokens=4)
    outs = engine.generate([GenerationRequest(tokenizer("37+45=").input_ids, 4, seed=s) for s in range(16)], params)
    assert len({tuple(o.token_ids) for o in outs}) > 1


def test_rows_stop_at_eos_or_run_out_of_tokens(tiny):
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer)
    outs = engine.generate(requests_for(tokenizer, PROMPTS, max_new_tokens=6), SamplingParams(temperature=0.0, max_new_tokens=6))
    stopped = [o for o in outs if o.finish_reason == "stop"]
    assert stopped, "the warmed-up model ends its answers with eos"
    for out in stopped:
        assert out.token_ids[-1] == tokenizer.eos_token_id and out.stop == tokenizer.eos_token_id
    short = engine.generate(requests_for(tokenizer, PROMPTS, max_new_tokens=1), SamplingParams(temperature=0.0, max_new_tokens=1))
    assert all(o.finish_reason == "length" and len(o.token_ids) == 1 for o in short)


def test_stop_strings_end_a_row(tiny):
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer)
    digits = tuple("0123456789")
    reqs = [GenerationRequest(tokenizer(p).input_ids, 4, seed=1, stop_strings=digits) for p in PROMPTS]
    for out in engine.generate(reqs, SamplingParams(temperature=0.0, max_new_tokens=4)):
        assert out.finish_reason == "stop" and len(out.token_ids) == 1 and out.stop in digits


def test_an_abort_returns_the_tokens_generated_so_far(tiny):
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer)
    finished = []
    outs = engine.generate(
        requests_for(tokenizer, PROMPTS),
        SamplingParams(temperature=0.0, max_new_tokens=4),
        should_abort=lambda: True,
        on_finish=lambda req, out: finished.append(out),
    )
    assert all(o.finish_reason == "abort" and len(o.token_ids) == 1 for o in outs)
    assert finished == []


def test_top_p_keeps_the_smallest_head_with_enough_mass():
    probs = torch.tensor([[0.1, 0.5, 0.25, 0.15]])
    assert top_p_filter(probs, 0.6).tolist() == [[0.0, 0.5, 0.25, 0.0]]  # 0.5 alone is not enough
    assert top_p_filter(probs, 0.5).tolist() == [[0.0, 0.5, 0.0, 0.0]]
    assert top_p_filter(probs, 1.0) is probs
