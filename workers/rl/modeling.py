"""Where models come from: only local Hugging Face directories, or `builtin:tiny-arith`, which
is built on first use. Nothing is ever fetched from a hub (`local_files_only`)."""

from __future__ import annotations

import logging
from pathlib import Path

from workers.rl.config import BUILTIN_TINY_MODEL

log = logging.getLogger(__name__)


class ModelPathError(ValueError):
    pass


def resolve_model_path(path: str) -> Path:
    """The local directory of a model reference (building the tiny model if needed)."""
    if path == BUILTIN_TINY_MODEL:
        from workers.rl.tiny import ensure_tiny_model

        return ensure_tiny_model()
    if path.startswith("builtin:"):
        raise ModelPathError(f"unknown builtin model {path!r} (known: {BUILTIN_TINY_MODEL})")
    local = Path(path).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise ModelPathError(f"{path!r} is a directory but not a Hugging Face model (no config.json)")
        return local.resolve()
    if not local.is_absolute() and path.count("/") == 1 and not path.startswith("."):
        raise ModelPathError(
            f"{path!r} looks like a Hugging Face Hub name, but models load only from local directories: "
            "download it first and give its local path"
        )
    raise ModelPathError(f"model directory {path!r} does not exist")


def quiet_transformers() -> None:
    """No per-file progress bars from transformers: a run loads and saves models often, and the
    run's own progress (CLI bar, web page) is what people watch."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def torch_dtype(name: str):
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def load_tokenizer(model_dir: Path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    if tokenizer.pad_token_id is None:
        # Padding is only ever masked out; the eos id is a safe stand-in.
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_causal_lm(model_dir: Path, dtype: str, device):
    from transformers import AutoModelForCausalLM

    quiet_transformers()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch_dtype(dtype), local_files_only=True)
    return model.to(device)
