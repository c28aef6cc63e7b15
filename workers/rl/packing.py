"""Packing samples into padding-free training rows, with the prompt of a group forwarded once.

A *unit* is one prompt followed by the responses of one or more samples that share it (the n
samples of a GRPO group do). In a row, a unit is laid out as

    [prompt p0..pP-1][response 1][response 2]...   positions: 0..P-1, then P.. for every response

and the attention mask lets every response see the whole prompt and its own earlier tokens, but
never another response or another unit. The prompt's hidden states are thus computed once for the
whole group instead of n times, and gradients through them are exactly the sum over the n
responses, as in n separate sequences. A response's last token is scored but not fed: no kept
logit depends on its hidden state (nothing attends to it), so feeding it would be wasted work.
Units are packed first-fit-decreasing into rows, rows into micro-batches bounded by a token
budget. The only padding is the tail of each row.

Attention implementations: `sdpa` takes a boolean 4D mask and `eager` an additive float one
(both built here). Kernels that take no custom mask (flash attention, flex) get one response per
unit and no mask at all: transformers then derives a block-diagonal mask, or varlen boundaries,
from position ids that restart at 0 for each sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from workers.rl.sample import Sample


@dataclass
class Unit:
    prompt: list[int]
    members: list[int]  # indices (into the caller's sample list) of the responses that follow the prompt
    length: int  # tokens fed: the prompt + every member response but its last token


@dataclass
class MicroBatch:
    """Rows ready for one forward. The forward keeps the logits at `keep` positions (row-major);
    response token t of the flat target vector is scored by kept logit row `gather[t]`."""

    input_ids: torch.Tensor  # [rows, width]
    position_ids: torch.Tensor  # [rows, width]
    attention_mask: torch.Tensor | None  # [rows, 1, width, width] (bool or additive float), or None
    keep: torch.Tensor  # bool [rows, width]
    gather: torch.Tensor  # [n_response_tokens] -> index into the kept logits
    targets: torch.Tensor  # [n_response_tokens]
    order: list[int]  # sample index of each response, in flat order
    lengths: list[int]  # response length of each, same order
    pad_tokens: int = 0

    @property
    def tokens(self) -> int:
        return int(self.input_ids.numel())


def mask_kind(model) -> str:
    """'bool' (sdpa), 'additive' (eager) or 'none' (kernels that only follow position ids)."""
    impl = getattr(getattr(model, "config", None), "_attn_implementation", None) or "eager"
    if impl == "sdpa":
        return "bool"
    if impl == "eager":
        return "additive"
    return "none"


def make_units(samples: list[Sample], indices: list[int], share_prompt: bool, row_tokens: int) -> list[Unit]:
    """Group samples[indices] by identical prompt ids (in first-seen order) into units of at most
    `row_tokens` tokens (a single response longer than that still forms a unit)."""
    if not share_prompt:
        return [
            Unit(list(samples[i].prompt_ids), [i], len(samples[i].prompt_ids) + len(samples[i].response_ids) - 1)
            for i in indices
        ]
    by_prompt: dict[tuple[int, ...], list[int]] = {}
    for i in indices:
        by_prompt.setdefault(tuple(samples[i].prompt_ids), []).append(i)
    units: list[Unit] = []
    for prompt, members in by_prompt.items():
        current: list[int] = []
        length = len(prompt)
        for i in members:
            n = len(samples[i].response_ids) - 1  # fed tokens (see the module docstring)
            if current and length + n > row_tokens:
                units.append(Unit(list(prompt), current, length))
                current, length = [], len(prompt)
            current.append(i)
            length += n
        units.append(Unit(list(prompt), current, length))
    return units


def pack_rows(lengths: list[int], row_tokens: int) -> list[list[int]]:
    """First-fit decreasing: item indices into rows of at most `row_tokens` tokens (a longer item
    gets a row of its own). Few, full rows mean little tail padding."""
    rows: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        for r, free in enumerate(room):
            if lengths[i] <= free:
                rows[r].append(i)
                room[r] -= lengths[i]
                break
        else:
            rows.append([i])
            room.append(max(0, row_tokens - lengths[i]))
    return rows


def plan_micro_batches(lengths: list[int], budget: int, row_tokens: int) -> list[list[list[int]]]:
    """Micro-batches (lists of rows of item indices) whose padded size, rows x longest row, stays
    within `budget` tokens (a single row longer than the budget still gets its own)."""
    rows = pack_rows(lengths, row_tokens)
    rows.sort(key=lambda row: -sum(lengths[i] for i in row))
    batches: list[list[list[int]]] = []
    current: list[list[int]] = []
    width = 0
    for row in rows:
        row_len = sum(lengths[i] for i in row)
        if current and max(width, row_len) * (len(current) + 1) > budget:
            batches.append(current)
            current, width = [], 0
        current.append(row)
        width = max(width, row_len)
    if current:
        batches.append(current)
    return batches


def build_micro_batch(samples: list[Sample], rows: list[list[Unit]], pad_id: int, kind: str, device, dtype=torch.float32) -> MicroBatch:
    width = max(sum(u.length for u in row) for row in rows)
    # Per position, built as flat Python lists (one tensor each at the end, not one per sample):
    # its token, position id, block (a prompt, one response, or the padding tail), unit, whether
    # it is a prompt token, and whether its logits are kept. Attention: same block causally, or
    # the own unit's prompt.
    ids: list[int] = []
    pos: list[int] = []
    block: list[int] = []
    unit_of: list[int] = []
    is_prompt: list[bool] = []
    keep: list[bool] = []
    sources: list[int] = []  # flat position whose logits score each response token
    targets: list[int] = []
    order: list[int] = []
    lengths: list[int] = []
    pad = 0
    next_id = 1
    for r, row in enumerate(rows):
        row_start = r * width
        for unit in row:
            p = len(unit.prompt)
            if p == 0:
                raise ValueError("a sample has an empty prompt: its first response token has no context")
            if kind == "none" and len(unit.members) != 1:
                raise ValueError("units sharing a prompt need an explicit attention mask (sdpa or eager)")
            unit_id = next_id
            next_id += 1
            ids.extend(unit.prompt)
            pos.extend(range(p))
            block.extend([unit_id] * p)
            unit_of.extend([unit_id] * p)
            is_prompt.extend([True] * p)
            keep.extend([False] * (p - 1) + [True])
            prompt_last = len(ids) - 1
            for i in unit.members:
                response = samples[i].response_ids
                n = len(response)
                start = len(ids)
                fed = n - 1  # the last token is only a target: nothing after it needs its state
                ids.extend(response[:fed])
                pos.extend(range(p, p + fed))
                block.extend([next_id] * fed)
                unit_of.extend([unit_id] * fed)
                is_prompt.extend([False] * fed)
                # logits at a position predict the next token: response token 0 is scored at the
                # prompt's last position (shared by the unit), token j at response position j-1.
                keep.extend([True] * fed)
                sources.append(prompt_last)
                sources.extend(range(start, start + n - 1))
                next_id += 1
                targets.extend(response)
                order.append(i)
                lengths.append(n)
        tail = row_start + width - len(ids)
        if tail:
            # The tail is its own block: it attends only to itself and nothing attends to it.
            ids.extend([pad_id] * tail)
            pos.extend(range(tail))
            block.extend([next_id] * tail)
            unit_of.extend([next_id] * tail)
            is_prompt.extend([False] * tail)
            keep.extend([False] * tail)
            next_id += 1
            pad += tail
    shape = (len(rows), width)
    keep_t = torch.tensor(keep, dtype=torch.bool)
    flat_index = torch.cumsum(keep_t, 0) - 1
    mask = None
    if kind != "none":
        block_t = torch.tensor(block).view(shape)
        unit_t = torch.tensor(unit_of).view(shape)
        prompt_t = torch.tensor(is_prompt).view(shape)
        causal = torch.ones((width, width), dtype=torch.bool).tril()
        same_block = block_t[:, :, None] == block_t[:, None, :]
        own_prompt = prompt_t[:, None, :] & (unit_t[:, :, None] == unit_t[:, None, :])
        allowed = (causal[None] & (same_block | own_prompt))[:, None]
        if kind == "bool":
            mask = allowed
        else:
            mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
        mask = mask.to(device)
    return MicroBatch(
        input_ids=torch.tensor(ids, dtype=torch.long).view(shape).to(device),
        position_ids=torch.tensor(pos, dtype=torch.long).view(shape).to(device),
        attention_mask=mask,
        keep=keep_t.view(shape).to(device),
        gather=flat_index[torch.tensor(sources, dtype=torch.long)].to(device),
        targets=torch.tensor(targets, dtype=torch.long, device=device),
        order=order,
        lengths=lengths,
        pad_tokens=pad,
    )


def default_row_tokens(model, longest: int, budget: int) -> int:
    """Row length for packing. Per token, attention over a row of L tokens costs about 4*L*h
    flops and the linear layers about 24*h^2 (h = hidden size), so rows of about h tokens keep
    attention near a sixth of the forward, where one row holding the whole batch would make it
    quadratic. Never shorter than the longest sequence, never longer than the budget."""
    hidden = int(getattr(getattr(model, "config", None), "hidden_size", 1024) or 1024)
    return max(longest, min(budget, hidden))
