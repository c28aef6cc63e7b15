"""Stable seeds derived from names: the same (run seed, step, uid, ...) always gives the same
stream, in any process and across a resume (Python's hash() is salted per process; this is not)."""

from __future__ import annotations

import hashlib
import random

import numpy as np


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any printable parts."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def seed_everything(seed: int) -> None:
    """Seed the global RNGs (model init, anything a library draws without its own generator)."""
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict:
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
