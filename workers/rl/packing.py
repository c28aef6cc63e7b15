"""Packing samples into padding-free training rows, with the prompt of a group forwarded once.

A *unit* is one prompt followed by the responses of one or more samples that share it (the n
samples of a GRPO group do). In a row, a unit is laid out as

    [prompt p0..pP-1][response 1][response 2]...   positions: 0..P-1, then P.. for every response

and the attention mask lets every response see the whole prompt and its own earlier tokens, but
never another response or another unit. The prompt's hidden states are thus computed once for the
whole group instead of n times, and gradients through them are exactly the sum over the n
responses, as in n separate sequences. Units are packed first-fit-decreasing into rows; rows into
micro-batches bounded by a token budget. The only padding is the tail of each row.

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
    length: int  # tokens: prompt + all member responses


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
            Unit(list(samples[i].prompt_ids), [i], len(samples[i].prompt_ids) + len(samples[i].response_ids))
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
            n = len(samples[i].response_ids)
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
    n_rows = len(rows)
    ids = torch.full((n_rows, width), pad_id, dtype=torch.long)
    pos = torch.zeros((n_rows, width), dtype=torch.long)
    keep = torch.zeros((n_rows, width), dtype=torch.bool)
    # Per position: its block (a prompt, one response, or the padding tail), its unit, and
    # whether it is a prompt token. Attention: same block causally, or the own unit's prompt.
    block = torch.zeros((n_rows, width), dtype=torch.long)
    unit_of = torch.zeros((n_rows, width), dtype=torch.long)
    is_prompt = torch.zeros((n_rows, width), dtype=torch.bool)
    sources: list[tuple[int, int]] = []  # (row, position) whose logits score each response token
    targets: list[int] = []
    order: list[int] = []
    lengths: list[int] = []
    pad = 0
    next_id = 1
    for r, row in enumerate(rows):
        offset = 0
        for unit in row:
            p = len(unit.prompt)
            if p == 0:
                raise ValueError("a sample has an empty prompt: its first response token has no context")
            if kind == "none" and len(unit.members) != 1:
                raise ValueError("units sharing a prompt need an explicit attention mask (sdpa or eager)")
            ids[r, offset : offset + p] = torch.tensor(unit.prompt, dtype=torch.long)
            pos[r, offset : offset + p] = torch.arange(p)
            block[r, offset : offset + p] = next_id
            unit_of[r, offset : offset + p] = next_id
            is_prompt[r, offset : offset + p] = True
            unit_id, next_id = next_id, next_id + 1
            prompt_last = offset + p - 1
            keep[r, prompt_last] = True
            offset += p
            for i in unit.members:
                response = samples[i].response_ids
                n = len(response)
                ids[r, offset : offset + n] = torch.tensor(response, dtype=torch.long)
                pos[r, offset : offset + n] = torch.arange(p, p + n)
                block[r, offset : offset + n] = next_id
                unit_of[r, offset : offset + n] = unit_id
                next_id += 1
                # logits at a position predict the next token: response token 0 is scored at the
                # prompt's last position (shared by the unit), token j at response position j-1.
                keep[r, offset : offset + n - 1] = True
                sources.append((r, prompt_last))
                sources.extend((r, offset + j) for j in range(n - 1))
                targets.extend(response)
                order.append(i)
                lengths.append(n)
                offset += n
        if offset < width:
            # The tail is its own block: it attends only to itself and nothing attends to it.
            pos[r, offset:] = torch.arange(width - offset)
            block[r, offset:] = next_id
            unit_of[r, offset:] = next_id
            next_id += 1
            pad += width - offset
    flat_index = torch.cumsum(keep.flatten(), 0) - 1
    src = torch.tensor([r * width + c for r, c in sources], dtype=torch.long)
    mask = None
    if kind != "none":
        causal = torch.ones((width, width), dtype=torch.bool).tril()
        same_block = block[:, :, None] == block[:, None, :]
        own_prompt = is_prompt[:, None, :] & (unit_of[:, :, None] == unit_of[:, None, :])
        allowed = (causal[None] & (same_block | own_prompt))[:, None]
        if kind == "bool":
            mask = allowed
        else:
            mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
        mask = mask.to(device)
    return MicroBatch(
        input_ids=ids.to(device),
        position_ids=pos.to(device),
        attention_mask=mask,
        keep=keep.to(device),
        gather=flat_index[src].to(device),
        targets=torch.tensor(targets, dtype=torch.long, device=device),
        order=order,
        lengths=lengths,
        pad_tokens=pad,
    )


def default_row_tokens(model, longest: int, budget: int) -> int:
    """Row length for packing. Attention over a packed row costs ~ row length per token while the
    linear layers cost ~ hidden size per token, so rows of about 2 x hidden keep attention a small
    share of the forward (one row holding the whole batch would make it quadratic); never shorter
    than the longest sequence, never longer than the budget."""
    hidden = int(getattr(getattr(model, "config", None), "hidden_size", 1024) or 1024)
    return max(longest, min(budget, 2 * hidden))
