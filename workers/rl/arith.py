"""Two-digit addition problems: the task of the builtin tiny model ("37+45=" -> "82").

The 90 x 90 problems with both operands in 10..99 are split once, by a fixed permutation that
does not depend on any run seed, into an eval pool and a train pool. Train rows (and the tiny
model's supervised warm-up) only ever come from the train pool and eval rows from the eval pool,
so evaluation is always on problems the model was never trained on.
"""

from __future__ import annotations

import random

DATA_SOURCE = "arith"
LOW, HIGH = 10, 99
EVAL_POOL_SIZE = 1000
_SPLIT_SEED = 20240601  # fixed forever: changing it would move problems between the pools


def _all_pairs() -> list[tuple[int, int]]:
    return [(a, b) for a in range(LOW, HIGH + 1) for b in range(LOW, HIGH + 1)]


def pool(split: str) -> list[tuple[int, int]]:
    """The operand pairs of a split ('train' or 'eval'), in a fixed order."""
    pairs = _all_pairs()
    random.Random(_SPLIT_SEED).shuffle(pairs)
    if split == "eval":
        return pairs[:EVAL_POOL_SIZE]
    if split == "train":
        return pairs[EVAL_POOL_SIZE:]
    raise ValueError(f"unknown split {split!r} (use 'train' or 'eval')")


def prompt_of(a: int, b: int) -> str:
    return f"{a}+{b}="


def row_of(a: int, b: int) -> dict:
    return {"prompt": prompt_of(a, b), "answer": str(a + b), "data_source": DATA_SOURCE}


def make_rows(split: str, size: int, seed: int) -> list[dict]:
    """`size` problems of a split, drawn with a seeded RNG: without repetition while the pool
    lasts, then again from a reshuffled pool."""
    pairs = pool(split)
    rng = random.Random(f"arith:{split}:{seed}")
    rows: list[dict] = []
    while len(rows) < size:
        order = list(pairs)
        rng.shuffle(order)
        rows.extend(row_of(a, b) for a, b in order[: size - len(rows)])
    return rows
