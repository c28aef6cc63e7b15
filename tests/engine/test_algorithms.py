"""RL math against hand-computed values (DESIGN.md §5). Every expected number below is worked
out by hand in the comment next to it; none comes from running the code under test."""

import math

import pytest
import torch

from workers.rl import algorithms
from workers.rl.config import AlgorithmConfig
from workers.rl.sample import Sample

# Two groups that compare something plus one zero-variance group:
#   a: rewards 1, 0, 1, 0     mean 0.5, unbiased std sqrt(4 * 0.25 / 3) = sqrt(1/3) = 0.577350
#   b: rewards 0, 0.5, 1      mean 0.5, unbiased std sqrt((0.25 + 0 + 0.25) / 2) = 0.5
#   c: rewards 1, 1           zero variance -> every estimator gives 0
REWARDS = {"a": [1.0, 0.0, 1.0, 0.0], "b": [0.0, 0.5, 1.0], "c": [1.0, 1.0]}


def make_samples():
    return [
        Sample(uid=f"{g}{i}", group_id=g, prompt="p", prompt_ids=[1], reward={"score": r})
        for g, rewards in REWARDS.items()
        for i, r in enumerate(rewards)
    ]


def advantages_for(estimator):
    samples = make_samples()
    stats = algorithms.compute_advantages(samples, AlgorithmConfig(advantage=estimator, adv_eps=1e-9))
    return [s.advantage for s in samples], stats


def test_grpo_divides_by_the_unbiased_group_std():
    advs, stats = advantages_for("grpo")
    # a: +-0.5 / 0.577350 = +-0.866025;  b: (-0.5, 0, 0.5) / 0.5 = (-1, 0, 1);  c: 0
    s = 0.5 / math.sqrt(1 / 3)
    assert advs == pytest.approx([s, -s, s, -s, -1.0, 0.0, 1.0, 0.0, 0.0], abs=1e-6)
    # mean 0; squares 4 * 0.75 + 1 + 1 = 5 over 9 - 1 -> std sqrt(5/8) = 0.790569
    assert stats["advantage/mean"] == pytest.approx(0.0, abs=1e-9)
    assert stats["advantage/std"] == pytest.approx(math.sqrt(5 / 8), abs=1e-6)
    assert stats["advantage/min"] == pytest.approx(-1.0, abs=1e-6)
    assert stats["advantage/max"] == pytest.approx(1.0, abs=1e-6)
    assert stats["zero_variance_frac"] == pytest.approx(1 / 3)


def test_dr_grpo_only_subtracts_the_group_mean():
    advs, _ = advantages_for("dr_grpo")
    assert advs == pytest.approx([0.5, -0.5, 0.5, -0.5, -0.5, 0.0, 0.5, 0.0, 0.0], abs=1e-9)


def test_rloo_subtracts_the_mean_of_the_other_samples():
    advs, _ = advantages_for("rloo")
    # a: 1 - mean(0,1,0) = 2/3;  0 - mean(1,0,1) = -2/3
    # b: 0 - mean(0.5,1) = -0.75;  0.5 - mean(0,1) = 0;  1 - mean(0,0.5) = 0.75
    assert advs == pytest.approx([2 / 3, -2 / 3, 2 / 3, -2 / 3, -0.75, 0.0, 0.75, 0.0, 0.0], abs=1e-9)


def test_reinforce_pp_normalizes_group_centered_rewards_over_the_batch():
    advs, stats = advantages_for("reinforce_pp")
    # centered: 0.5,-0.5,0.5,-0.5,-0.5,0,0.5,0,0 -> batch mean 0, squares 6 * 0.25 = 1.5,
    # unbiased var 1.5 / 8 = 0.1875, std 0.433013 -> +-0.5 / 0.433013 = +-1.154701
    k = 0.5 / math.sqrt(0.1875)
    assert advs == pytest.approx([k, -k, k, -k, -k, 0.0, k, 0.0, 0.0], abs=1e-6)
    assert stats["advantage/std"] == pytest.approx(1.0, abs=1e-6)


def test_a_group_of_one_sample_gets_no_advantage():
    samples = [Sample(uid="x", group_id="x", prompt="p", prompt_ids=[1], reward={"score": 1.0})]
    stats = algorithms.compute_advantages(samples, AlgorithmConfig(advantage="grpo"))
    assert samples[0].advantage == 0.0
    assert stats["zero_variance_frac"] == 1.0


# --- policy loss: eps_low 0.2, eps_high 0.28 (clip-higher), dual clip c = 3 ------------------

LOSS_CASES = [
    # ratio, A, expected loss, ppo-clipped, dual-clipped
    (1.5, 1.0, -1.28, True, False),  # -min(1.5, 1.28): clipped at 1 + eps_high
    (1.25, 1.0, -1.25, False, False),  # inside [0.8, 1.28] thanks to clip-higher (0.2 would clip at 1.2)
    (0.5, 1.0, -0.5, False, False),  # -min(0.5, 0.8): a positive advantage is never clipped below
    (0.5, -1.0, 0.8, True, False),  # -min(-0.5, -0.8) = 0.8: clipped at 1 - eps_low
    (1.5, -1.0, 1.5, False, False),  # -min(-1.5, -1.28) = 1.5, below the dual bound 3
    (4.0, -1.0, 3.0, False, True),  # -min(-4, -1.28) = 4 > -c*A = 3: dual clip
    (4.0, 2.0, -2.56, True, False),  # -min(8, 2.56): dual clip never applies to A > 0
]


def test_clipped_policy_loss_matches_hand_computed_cases():
    ratio = torch.tensor([c[0] for c in LOSS_CASES])
    adv = torch.tensor([c[1] for c in LOSS_CASES])
    logp_old = torch.tensor([-1.0] * len(LOSS_CASES))
    logp = logp_old + torch.log(ratio)
    loss, clipped, dual = algorithms.policy_loss(logp, logp_old, adv, 0.2, 0.28, 3.0)
    assert loss.tolist() == pytest.approx([c[2] for c in LOSS_CASES], abs=1e-5)
    assert clipped.tolist() == [c[3] for c in LOSS_CASES]
    assert dual.tolist() == [c[4] for c in LOSS_CASES]
    # clip fraction over all tokens: 3 of 7 are PPO-clipped
    mask = torch.ones(len(LOSS_CASES))
    assert algorithms.masked_token_mean([clipped.float()], [mask]) == pytest.approx(3 / 7)


def test_symmetric_clip_clips_where_clip_higher_does_not():
    logp = torch.log(torch.tensor([1.25]))
    loss, clipped, _ = algorithms.policy_loss(logp, torch.zeros(1), torch.ones(1), 0.2, 0.2, 3.0)
    assert loss.item() == pytest.approx(-1.2, abs=1e-6)
    assert clipped.item()


def test_without_dual_clip_a_negative_advantage_loss_is_unbounded():
    logp = torch.log(torch.tensor([4.0]))
    loss, _, dual = algorithms.policy_loss(logp, torch.zeros(1), -torch.ones(1), 0.2, 0.28, None)
    assert loss.item() == pytest.approx(4.0, abs=1e-5)
    assert not dual.item()


def test_policy_loss_gradient_vanishes_on_clipped_tokens():
    logp = torch.log(torch.tensor([1.5, 1.1, 4.0])).requires_grad_(True)
    adv = torch.tensor([1.0, 1.0, -1.0])
    loss, _, _ = algorithms.policy_loss(logp, torch.zeros(3), adv, 0.2, 0.28, 3.0)
    loss.sum().backward()
    # d(-A * ratio)/d logp = -A * ratio: 0 (clipped), -1.1 (active), 0 (dual clipped)
    assert logp.grad.tolist() == pytest.approx([0.0, -1.1, 0.0], abs=1e-6)


# --- KL estimators: x = logp - logp_ref ----------------------------------------------------


@pytest.mark.parametrize(
    "estimator, expected",
    [
        # x = ln 2 = 0.693147 and x = -ln 2
        ("k1", [0.693147, -0.693147]),
        ("k2", [0.240227, 0.240227]),  # x^2 / 2 = 0.480453 / 2
        ("k3", [0.193147, 0.306853]),  # exp(-x)+x-1: 0.5+0.693147-1 and 2-0.693147-1
    ],
)
def test_kl_estimators(estimator, expected):
    logp = torch.log(torch.tensor([0.5, 0.25]))
    logp_ref = torch.log(torch.tensor([0.25, 0.5]))
    assert algorithms.kl_penalty(logp, logp_ref, estimator).tolist() == pytest.approx(expected, abs=1e-6)


def test_kl_estimators_vanish_when_policy_equals_reference():
    logp = torch.log(torch.tensor([0.3, 0.7]))
    for estimator in algorithms.KL_ESTIMATORS:
        assert algorithms.kl_penalty(logp, logp.clone(), estimator).abs().max().item() == 0.0


# --- loss aggregation ------------------------------------------------------------------------
# seq 1: values 1, 2, 3 with mask 1, 1, 0;  seq 2: value 4;  seq 3: values 5, 6 fully masked
VALUES = [torch.tensor([1.0, 2.0, 3.0]), torch.tensor([4.0]), torch.tensor([5.0, 6.0])]
MASKS = [torch.tensor([1.0, 1.0, 0.0]), torch.tensor([1.0]), torch.tensor([0.0, 0.0])]


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("token-mean", 7 / 3),  # (1 + 2 + 4) / 3 trained tokens
        ("seq-mean-token-mean", 2.75),  # mean(1.5, 4) over the 2 sequences with trained tokens
        ("seq-mean-token-sum-norm", 0.875),  # mean(3 / 4, 4 / 4) with norm_len 4
    ],
)
def test_loss_aggregation_modes(mode, expected):
    assert algorithms.aggregate(VALUES, MASKS, mode, norm_len=4).item() == pytest.approx(expected, abs=1e-6)


def test_aggregation_weights_split_across_micro_batches_sum_to_the_batch_loss():
    weights = algorithms.aggregation_weights(MASKS, "seq-mean-token-mean")
    first = sum((v * w).sum() for v, w in zip(VALUES[:1], weights[:1]))
    rest = sum((v * w).sum() for v, w in zip(VALUES[1:], weights[1:]))
    assert (first + rest).item() == pytest.approx(2.75, abs=1e-6)


def test_dr_grpo_aggregation_requires_a_norm_length():
    with pytest.raises(ValueError):
        algorithms.aggregation_weights(MASKS, "seq-mean-token-sum-norm", None)


# --- entropy ---------------------------------------------------------------------------------


def test_entropy_from_logits():
    logits = torch.tensor([[0.0, 0.0], [0.0, math.log(3.0)]])
    # uniform over 2: ln 2 = 0.693147;  p = (0.25, 0.75): 0.25 ln 4 + 0.75 ln(4/3) = 0.562335
    assert algorithms.entropy_from_logits(logits).tolist() == pytest.approx([0.693147, 0.562335], abs=1e-6)
