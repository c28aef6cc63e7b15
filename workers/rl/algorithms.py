"""RL algorithm math: advantage estimators, the PPO-clip policy loss, KL estimators, loss
aggregation and entropy. Pure functions over small tensors so that every formula is unit-tested
against hand-computed numbers (tests/engine/test_algorithms.py); DESIGN.md §5 is the spec.

Conventions pinned by the tests:
- Group statistics use the *unbiased* standard deviation (divide by n - 1), as GRPO
  implementations we learn from do (verl `torch.std`, TRL `.std(dim=1)`).
- A group whose rewards are all equal ("zero variance") gets advantage 0 for every estimator,
  and so does a group of one sample (nothing to compare it with).
- Per-token losses are aggregated through per-token *weights* computed once over the whole
  (mini-)batch, so a loss accumulated over micro-batches equals the un-micro-batched loss
  exactly (see `aggregation_weights`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # only for annotations: keeps `workers.rl.config` importable without torch anyway
    from workers.rl.config import AlgorithmConfig
    from workers.rl.sample import Sample

ADVANTAGE_ESTIMATORS = ("grpo", "dr_grpo", "rloo", "reinforce_pp")
LOSS_AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")
KL_ESTIMATORS = ("k1", "k2", "k3")

# Bound of the k3 estimator (as verl does): exp(-x) explodes for a policy far below its reference
# on a token, and one such token must not dominate the loss.
K3_CLAMP = 10.0


# --- advantages ------------------------------------------------------------------------------


def _unbiased_std(values: Sequence[float]) -> float:
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def _group_advantages(rewards: list[float], estimator: str, eps: float) -> list[float]:
    """Advantages of one group (before any batch-level normalization)."""
    n = len(rewards)
    if n < 2 or max(rewards) == min(rewards):
        return [0.0] * n
    mean = sum(rewards) / n
    if estimator == "grpo":
        std = _unbiased_std(rewards)
        return [(r - mean) / (std + eps) for r in rewards]
    if estimator in ("dr_grpo", "reinforce_pp"):
        return [r - mean for r in rewards]
    if estimator == "rloo":
        total = sum(rewards)
        # r_i - mean of the others = r_i - (total - r_i) / (n - 1) = n/(n-1) * (r_i - mean)
        return [r - (total - r) / (n - 1) for r in rewards]
    raise ValueError(f"unknown advantage estimator {estimator!r}")


def compute_advantages(samples: list[Sample], cfg: AlgorithmConfig) -> dict[str, float]:
    """Set `sample.advantage` for every sample (a scalar that the loss broadcasts over the response
    tokens) and return the advantage statistics of the batch.

    Estimators, with r the reward score and groups formed by `group_id`:
    - grpo:      A_i = (r_i - mean(r_g)) / (std(r_g) + eps), std unbiased.
    - dr_grpo:   A_i = r_i - mean(r_g)  (Dr.GRPO: no std division).
    - rloo:      A_i = r_i - mean(r_{g without i}).
    - reinforce_pp: REINFORCE++ with a group baseline (REINFORCE++-baseline): subtract the group
      mean, then normalize over the whole batch, A_i = (a_i - mean(a)) / (std(a) + eps) where a is
      the group-centered reward of every sample in the batch (unbiased std over samples, each
      sample counted once since its advantage is one scalar for all its tokens).
    """
    groups: dict[str, list[int]] = defaultdict(list)
    for i, sample in enumerate(samples):
        groups[sample.group_id].append(i)
    advantages = [0.0] * len(samples)
    zero_variance = 0
    for members in groups.values():
        rewards = [samples[i].score for i in members]
        if len(members) < 2 or max(rewards) == min(rewards):
            zero_variance += 1
        for i, adv in zip(members, _group_advantages(rewards, cfg.advantage, cfg.adv_eps)):
            advantages[i] = adv
    if cfg.advantage == "reinforce_pp" and len(advantages) >= 2:
        mean = sum(advantages) / len(advantages)
        std = _unbiased_std(advantages)
        advantages = [(a - mean) / (std + cfg.adv_eps) for a in advantages]
    for sample, adv in zip(samples, advantages):
        sample.advantage = float(adv)
    if not advantages:
        return {"advantage/mean": 0.0, "advantage/std": 0.0, "advantage/min": 0.0, "advantage/max": 0.0, "zero_variance_frac": 0.0}
    return {
        "advantage/mean": sum(advantages) / len(advantages),
        "advantage/std": _unbiased_std(advantages),
        "advantage/min": min(advantages),
        "advantage/max": max(advantages),
        "zero_variance_frac": zero_variance / len(groups),
    }


# --- policy loss ------------------------------------------------------------------------------


def policy_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    clip_eps_low: float,
    clip_eps_high: float,
    dual_clip_c: float | None = 3.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO-clip loss per token, with clip-higher (separate eps_high) and dual clip.

    ratio = exp(logp - logp_old);  loss = -min(ratio*A, clip(ratio, 1-eps_low, 1+eps_high)*A);
    for A < 0 the loss is further bounded above by -c*A (dual clip), so one token whose ratio
    exploded cannot push the policy arbitrarily hard.

    Returns (loss, clipped, dual_clipped): per-token losses and two boolean tensors that mark the
    tokens where the PPO clip (respectively the dual clip) is the active term (its gradient is 0).
    """
    ratio = torch.exp(logp - logp_old)
    unclipped = -advantages * ratio
    clipped_loss = -advantages * torch.clamp(ratio, 1.0 - clip_eps_low, 1.0 + clip_eps_high)
    loss = torch.maximum(unclipped, clipped_loss)
    clipped = clipped_loss > unclipped
    if dual_clip_c is None:
        return loss, clipped, torch.zeros_like(clipped)
    bound = -advantages * dual_clip_c
    dual_clipped = (advantages < 0) & (loss > bound)
    loss = torch.where(dual_clipped, bound, loss)
    return loss, clipped & ~dual_clipped, dual_clipped


# --- KL to the reference ----------------------------------------------------------------------


def kl_penalty(logp: torch.Tensor, logp_ref: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token KL(policy || reference) estimate with x = logp - logp_ref (Schulman's k1/k2/k3):
    k1 = x, k2 = x^2 / 2, k3 = exp(-x) + x - 1 (non-negative, unbiased; clamped to ±K3_CLAMP)."""
    x = logp - logp_ref
    if estimator == "k1":
        return x
    if estimator == "k2":
        return 0.5 * x * x
    if estimator == "k3":
        return torch.clamp(torch.exp(-x) + x - 1.0, min=-K3_CLAMP, max=K3_CLAMP)
    raise ValueError(f"unknown KL estimator {estimator!r}")


# --- loss aggregation -------------------------------------------------------------------------


def aggregation_weights(masks: Sequence[torch.Tensor], mode: str, norm_len: int | None = None) -> list[torch.Tensor]:
    """Per-token weights w such that the batch loss is sum over all tokens of w * loss_token.

    `masks` holds one 0/1 float tensor per sequence (1 = a trained response token). Modes:
    - token-mean: every trained token of the batch counts the same: w = m / sum of all m.
    - seq-mean-token-mean: mean over tokens within a sequence, then over sequences:
      w = m / (S * tokens of that sequence), S = sequences with at least one trained token.
    - seq-mean-token-sum-norm (Dr.GRPO): sum over a sequence's tokens divided by a constant
      `norm_len` (the longest possible response), then mean over sequences: w = m / (S * norm_len).
    Computing weights over the whole batch up front is what lets micro-batches accumulate
    gradients that sum to exactly the full-batch gradient.
    """
    counts = [float(m.sum()) for m in masks]
    live = sum(1 for c in counts if c > 0)
    if live == 0:
        return [torch.zeros_like(m) for m in masks]
    if mode == "token-mean":
        total = sum(counts)
        return [m / total for m in masks]
    if mode == "seq-mean-token-mean":
        return [m / (live * c) if c > 0 else torch.zeros_like(m) for m, c in zip(masks, counts)]
    if mode == "seq-mean-token-sum-norm":
        if not norm_len or norm_len <= 0:
            raise ValueError("seq-mean-token-sum-norm needs a positive norm_len (the max response length)")
        return [m / (live * norm_len) for m in masks]
    raise ValueError(f"unknown loss aggregation {mode!r}")


def aggregate(
    values: Sequence[torch.Tensor], masks: Sequence[torch.Tensor], mode: str, norm_len: int | None = None
) -> torch.Tensor:
    """Aggregate per-token values (one tensor per sequence) into one scalar by `mode`."""
    weights = aggregation_weights(masks, mode, norm_len)
    if not values:
        return torch.zeros(())
    return sum((v * w).sum() for v, w in zip(values, weights))


def masked_token_mean(values: Sequence[torch.Tensor], masks: Sequence[torch.Tensor]) -> float:
    """Plain mean over trained tokens: how metrics (clip fraction, entropy) are reported."""
    total = sum(float(m.sum()) for m in masks)
    if total == 0:
        return 0.0
    return float(sum((v.float() * m).sum() for v, m in zip(values, masks))) / total


# --- entropy ----------------------------------------------------------------------------------


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of softmax(logits) over the last dimension, in nats: logsumexp(z) - sum p*z."""
    logits = logits.float()
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)
