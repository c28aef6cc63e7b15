"""TrainController: packed forwards, micro-batch gradient accumulation, masks, lr schedule and
exact resume, on a small random Llama (no download, a few milliseconds per forward)."""

import copy
import math

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from workers.rl.config import RunConfig
from workers.rl.sample import Sample
from workers.rl.packing import plan_micro_batches
from workers.rl.train import TrainController, lr_factor

torch.set_num_threads(1)

VOCAB = 40


def small_llama(seed=0, attn="sdpa"):
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    config._attn_implementation = attn
    return LlamaForCausalLM(config)


def make_samples(groups=3, n=2, seed=0):
    """Groups of n samples with ragged prompt/response lengths and rewards that differ in a group."""
    g = torch.Generator().manual_seed(seed)
    samples = []
    for gi in range(groups):
        prompt = torch.randint(3, VOCAB, (int(torch.randint(2, 9, (1,), generator=g)),), generator=g).tolist()
        for k in range(n):
            response = torch.randint(3, VOCAB, (int(torch.randint(1, 7, (1,), generator=g)),), generator=g).tolist()
            samples.append(
                Sample(
                    uid=f"{gi}-{k}",
                    group_id=f"g{gi}",
                    prompt="",
                    prompt_ids=prompt,
                    response_ids=response,
                    response_mask=[1] * len(response),
                    reward={"score": float(k % 2)},
                    advantage=1.0 if k % 2 else -1.0,
                )
            )
    return samples


def run_config(**sections):
    base = {
        "rollout": {"n": 2, "prompts_per_step": 3, "temperature": 0.7, "max_new_tokens": 8},
        "optimizer": {"lr": 1e-2, "grad_clip": 0.0},
    }
    for key, value in sections.items():
        base[key] = {**base.get(key, {}), **value}
    return RunConfig.model_validate(base)


def unpacked_logprobs(model, samples, temperature):
    out = []
    with torch.no_grad():
        for s in samples:
            ids = torch.tensor([s.prompt_ids + s.response_ids])
            logits = model(input_ids=ids).logits[0].float() / temperature
            logp = torch.log_softmax(logits, -1)
            p = len(s.prompt_ids)
            positions = torch.arange(p - 1, p - 1 + len(s.response_ids))
            out.append(logp[positions, torch.tensor(s.response_ids)])
    return out


@pytest.mark.parametrize("share_prompt", [True, False])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_packed_logprobs_equal_per_sequence_forward(attn, share_prompt):
    model = small_llama(attn=attn).eval()
    samples = make_samples(groups=4, n=3)
    # Small rows and budget: several sequences share a row, and there are several micro-batches.
    controller = TrainController(
        model, None, run_config(optimizer={"micro_batch_tokens": 40}), "cpu", row_tokens=20, share_prompt=share_prompt
    )
    plans = controller.plan(model, samples, list(range(len(samples))))
    assert len(plans) > 1
    assert any(len(mb.order) > mb.input_ids.shape[0] for mb in plans), "no row holds two sequences"
    # A response's last token is a target only, never an input; shared prompts are fed once.
    fed = sum(mb.tokens - mb.pad_tokens for mb in plans)
    separate = sum(len(s.prompt_ids) + len(s.response_ids) - 1 for s in samples)
    assert (fed < separate) if share_prompt else (fed == separate)
    packed = controller.compute_logprobs(model, samples)
    expected = unpacked_logprobs(model, samples, temperature=0.7)
    for got, want in zip(packed, expected):
        assert got.shape == want.shape
        assert torch.allclose(got, want, atol=1e-5, rtol=0)


def test_a_kernel_without_custom_masks_packs_by_position_ids():
    # flash/flex kernels take no 4D mask: one response per prompt, boundaries from position ids.
    model = small_llama(attn="sdpa").eval()
    samples = make_samples(groups=3, n=2)
    controller = TrainController(model, None, run_config(), "cpu", row_tokens=24)
    model.config._attn_implementation = "flash_attention_2"  # only read by the planner here
    plans = controller.plan(model, samples, list(range(len(samples))))
    model.config._attn_implementation = "sdpa"
    assert all(mb.attention_mask is None for mb in plans)
    assert sum(mb.tokens - mb.pad_tokens for mb in plans) == sum(len(s.prompt_ids) + len(s.response_ids) - 1 for s in samples)
    got = []
    with torch.no_grad():
        for mb in plans:
            logp, _ = controller._forward(model, mb, with_entropy=False)
            got.extend(zip(mb.order, torch.split(logp, mb.lengths)))
    expected = unpacked_logprobs(model, samples, temperature=0.7)
    for i, lp in got:
        assert torch.allclose(lp, expected[i], atol=1e-5, rtol=0)


def test_packing_pads_only_row_tails_and_respects_the_budget():
    lengths = [9, 7, 5, 5, 4, 3, 3, 2]
    batches = plan_micro_batches(lengths, budget=20, row_tokens=10)
    seen = sorted(i for rows in batches for row in rows for i in row)
    assert seen == list(range(len(lengths)))
    for rows in batches:
        width = max(sum(lengths[i] for i in row) for row in rows)
        assert width <= 10 and width * len(rows) <= 20


def test_entropy_of_the_packed_forward_is_returned_per_token():
    model = small_llama().eval()
    samples = make_samples()
    controller = TrainController(model, None, run_config(), "cpu")
    logprobs, entropies = controller.compute_logprobs(model, samples, with_entropy=True)
    for lp, ent, s in zip(logprobs, entropies, samples):
        assert lp.shape == ent.shape == (len(s.response_ids),)
        assert (ent > 0).all() and (ent <= math.log(VOCAB) + 1e-5).all()


def grads_after_step(cfg, samples, micro_batch_tokens, old_logprobs="auto", ref=True):
    model = small_llama(seed=1)
    ref_model = small_llama(seed=2) if ref else None
    cfg = cfg.model_copy(deep=True)
    cfg.optimizer.micro_batch_tokens = micro_batch_tokens
    cfg.algorithm.old_logprobs = old_logprobs
    controller = TrainController(model, ref_model, cfg, "cpu", row_tokens=16)
    metrics = controller.train_step(copy.deepcopy(samples), policy_version=0)
    # grad_clip is 0, so the gradients left after the step are the raw accumulated ones.
    return {n: p.grad.clone() for n, p in model.named_parameters()}, metrics, controller


@pytest.mark.parametrize("loss_agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_micro_batched_gradient_equals_the_full_batch_gradient(loss_agg):
    cfg = run_config(algorithm={"loss_agg": loss_agg, "kl_coef": 0.1, "kl_estimator": "k3"})
    samples = make_samples(groups=3, n=2)
    full, full_metrics, c1 = grads_after_step(cfg, samples, micro_batch_tokens=10_000)
    split, split_metrics, c2 = grads_after_step(cfg, samples, micro_batch_tokens=16)
    assert len(c1.plan(c1.policy, samples, list(range(6)))) == 1
    assert len(c2.plan(c2.policy, samples, list(range(6)))) > 2
    for name in full:
        assert torch.allclose(full[name], split[name], atol=1e-6, rtol=1e-5), name
    assert full_metrics["loss/policy"] == pytest.approx(split_metrics["loss/policy"], abs=1e-6)
    assert full_metrics["kl"] == pytest.approx(split_metrics["kl"], abs=1e-6)


def with_exact_rollout_logprobs(samples):
    """Samples whose rollout logprobs are what the (seed-1) policy gives before any update."""
    model = small_llama(seed=1)
    controller = TrainController(model, None, run_config(), "cpu")
    for s, lp in zip(samples, controller.compute_logprobs(model, samples)):
        s.logprobs = lp.tolist()
    return samples


@pytest.mark.parametrize("old_logprobs", ["recompute", "rollout"])
def test_old_logprobs_sources_agree_for_one_on_policy_update(old_logprobs):
    # 'auto' skips the extra forward (the training forward gives the old logprobs exactly); an
    # extra forward, or exact rollout logprobs, must give the same step.
    cfg = run_config(algorithm={"kl_coef": 0.0})
    samples = with_exact_rollout_logprobs(make_samples())
    fast, fast_metrics, _ = grads_after_step(cfg, samples, 10_000, "auto", ref=False)
    other, other_metrics, _ = grads_after_step(cfg, samples, 10_000, old_logprobs, ref=False)
    for name in fast:
        assert torch.allclose(fast[name], other[name], atol=1e-6, rtol=1e-5), name
    assert fast_metrics["loss/policy"] == pytest.approx(other_metrics["loss/policy"], abs=1e-6)
    assert fast_metrics["clip_frac"] == other_metrics["clip_frac"] == 0.0
    assert fast_metrics["logprob_diff/max"] <= 1e-5


def test_stale_rollout_logprobs_make_the_ratio_leave_one():
    # Behaviour logprobs far from the current policy: the clipped ratio must show it.
    samples = with_exact_rollout_logprobs(make_samples())
    for s in samples:
        s.logprobs = [lp - 0.5 for lp in s.logprobs]  # the sampler liked these tokens less: ratio e^0.5
    _, metrics, _ = grads_after_step(run_config(), samples, 10_000, "rollout", ref=False)
    assert metrics["clip_frac"] > 0.2
    assert metrics["logprob_diff/mean"] == pytest.approx(0.5, abs=1e-5)


def test_tool_tokens_masked_out_contribute_no_gradient():
    cfg = run_config()
    base = make_samples(groups=1, n=2)
    with_tool = copy.deepcopy(base)
    for s in with_tool:  # append two "tool output" tokens with mask 0 after the model's tokens
        s.response_ids = s.response_ids + [5, 6]
        s.response_mask = s.response_mask + [0, 0]
    plain_cfg = cfg.model_copy(deep=True)
    g_plain, m_plain, _ = grads_after_step(plain_cfg, base, 10_000, ref=False)
    g_tool, m_tool, _ = grads_after_step(plain_cfg, with_tool, 10_000, ref=False)
    for name in g_plain:
        assert torch.allclose(g_plain[name], g_tool[name], atol=1e-6, rtol=1e-5), name
    assert m_tool["train/tokens"] == m_plain["train/tokens"] == sum(len(s.response_ids) for s in base)


def test_train_step_reports_the_metrics_the_dashboard_charts():
    cfg = run_config(algorithm={"kl_coef": 0.05, "ppo_epochs": 2, "mini_batches": 3})
    _, metrics, controller = grads_after_step(cfg, make_samples(), 10_000)
    for key in ("loss/policy", "kl", "entropy", "clip_frac", "grad_norm", "lr", "train/tokens"):
        assert key in metrics and math.isfinite(metrics[key]), key
    assert metrics["train/optimizer_steps"] == 6.0
    assert metrics["lr"] == pytest.approx(1e-2)
    assert metrics["entropy"] > 0


def test_several_updates_per_batch_move_the_ratio_off_one():
    cfg = run_config(algorithm={"ppo_epochs": 4, "clip_eps_low": 0.01, "clip_eps_high": 0.01}, optimizer={"lr": 5e-2})
    _, metrics, _ = grads_after_step(cfg, make_samples(), 10_000, ref=False)
    assert metrics["clip_frac"] > 0


@pytest.mark.parametrize(
    "step, schedule, expected",
    [
        (0, "linear", 0.5),  # warmup 2: (0 + 1) / 2
        (1, "linear", 1.0),
        (2, "linear", 1.0),  # decay starts: progress 0 / 8
        (6, "linear", 0.5),  # progress 4 / 8
        (4, "cosine", 0.5 * (1 + math.cos(math.pi / 4))),  # progress 2 / 8 -> 0.853553
        (6, "cosine", 0.5),
        (9, "constant", 1.0),
    ],
)
def test_lr_schedule_with_warmup(step, schedule, expected):
    assert lr_factor(step, schedule, warmup_steps=2, total_steps=10) == pytest.approx(expected, abs=1e-6)


def test_the_controller_steps_the_schedule_once_per_train_step():
    cfg = run_config(optimizer={"lr": 1e-3, "schedule": "linear", "warmup_steps": 2}, schedule={"total_steps": 10})
    controller = TrainController(small_llama(), None, cfg, "cpu")
    lrs = [controller.train_step(make_samples(seed=k), k)["lr"] for k in range(4)]
    assert lrs == pytest.approx([5e-4, 1e-3, 1e-3, 1e-3 * 7 / 8], abs=1e-12)


def test_resuming_from_state_dict_reproduces_the_uninterrupted_run_exactly():
    cfg = run_config(optimizer={"lr": 1e-2, "schedule": "cosine", "warmup_steps": 1, "weight_decay": 0.1}, schedule={"total_steps": 4})
    batches = [make_samples(seed=k) for k in range(3)]

    model = small_llama()
    straight = TrainController(model, None, cfg, "cpu")
    for k, batch in enumerate(batches):
        straight.train_step(copy.deepcopy(batch), k)

    first = small_llama()
    interrupted = TrainController(first, None, cfg, "cpu")
    interrupted.train_step(copy.deepcopy(batches[0]), 0)
    saved_model = copy.deepcopy(first.state_dict())
    saved = copy.deepcopy(interrupted.state_dict())

    resumed_model = small_llama(seed=99)  # different init: everything must come from the checkpoint
    resumed_model.load_state_dict(saved_model)
    resumed = TrainController(resumed_model, None, cfg, "cpu")
    resumed.load_state_dict(saved)
    for k, batch in enumerate(batches[1:], start=1):
        resumed.train_step(copy.deepcopy(batch), k)

    for (name, a), b in zip(model.state_dict().items(), resumed_model.state_dict().values()):
        assert torch.equal(a, b), name
    assert resumed.optimizer.param_groups[0]["lr"] == straight.optimizer.param_groups[0]["lr"]


def test_kl_needs_a_reference_model():
    with pytest.raises(ValueError):
        TrainController(small_llama(), None, run_config(algorithm={"kl_coef": 0.1}), "cpu")
