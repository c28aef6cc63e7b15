"""Prompt datasets for the engine: loading rows, rendering prompts, and a resumable sampler.

A dataset reference is one of
- `builtin:arith`: generated two-digit additions (workers/rl/arith.py);
- a path to a local JSONL file: one object per line with `prompt` (text) or `messages` (chat
  turns), `answer` or `label`, and optionally `data_source`;
- `dataset:<id>`: a dataset stored by the web app; the web worker exports it to JSONL and passes
  that path before calling the engine (the engine itself never talks to the database).

Rows are normalized to {"prompt" | "messages", "label", "data_source", "index"}.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from workers.rl import arith
from workers.rl.config import DataConfig

BUILTIN_ARITH = "builtin:arith"
DATASET_PREFIX = "dataset:"
EVAL_SEED = 0  # builtin eval rows do not depend on the run seed: runs stay comparable


class DataError(ValueError):
    pass


def _normalize(raw: dict, index: int, where: str) -> dict:
    if not isinstance(raw, dict):
        raise DataError(f"{where}: a row must be a JSON object")
    messages = raw.get("messages")
    prompt = raw.get("prompt")
    if messages is not None:
        if not isinstance(messages, list) or not all(isinstance(m, dict) and "content" in m for m in messages):
            raise DataError(f"{where}: 'messages' must be a list of {{role, content}} objects")
    elif not isinstance(prompt, str) or not prompt:
        raise DataError(f"{where}: a row needs a non-empty 'prompt' or a 'messages' list")
    label = raw.get("answer", raw.get("label"))
    return {
        "prompt": prompt if messages is None else None,
        "messages": messages,
        "label": None if label is None else str(label),
        "data_source": str(raw.get("data_source") or ""),
        "index": index,
    }


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            rows.append(_normalize(raw, len(rows), f"{path}:{lineno}"))
    return rows


def load_rows(ref: str, cfg: DataConfig, split: str, seed: int) -> list[dict]:
    """The normalized rows of a dataset reference (`split` is 'train' or 'eval')."""
    if ref == BUILTIN_ARITH:
        size = cfg.builtin_train_size if split == "train" else cfg.builtin_eval_size
        raw = arith.make_rows(split, size, seed if split == "train" else EVAL_SEED)
        rows = [_normalize(r, i, ref) for i, r in enumerate(raw)]
    elif ref.startswith(DATASET_PREFIX):
        raise DataError(f"{ref}: a stored dataset must be exported to JSONL first (the web worker does this)")
    elif ref.startswith("builtin:"):
        raise DataError(f"unknown builtin dataset {ref!r} (known: {BUILTIN_ARITH})")
    else:
        path = Path(ref).expanduser()
        if not path.is_file():
            raise DataError(f"dataset file {ref!r} does not exist (datasets are local JSONL files, '{BUILTIN_ARITH}' or 'dataset:<id>')")
        rows = read_jsonl(path)
    if not rows:
        raise DataError(f"dataset {ref!r} has no rows")
    return rows


# --- prompt rendering ------------------------------------------------------------------------


class PromptRenderer:
    """Row -> (prompt text exactly as the model sees it, prompt token ids).

    `data.prompt_template` is applied by a plain replacement of '{prompt}' (never str.format, so
    braces in prompts or templates are just text). With `use_chat_template` and a tokenizer that
    has a chat template, the result is rendered as one user turn (or the row's `messages`) with
    the generation prompt appended; otherwise the text is tokenized as is (with the tokenizer's
    own special tokens, e.g. a bos).
    """

    def __init__(self, tokenizer, cfg: DataConfig):
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.chat = bool(cfg.use_chat_template and getattr(tokenizer, "chat_template", None))

    def text(self, row: dict) -> str:
        template = self.cfg.prompt_template
        if row.get("messages") is not None:
            messages = [dict(m) for m in row["messages"]]
            if self.chat:
                # The template wraps the last user turn's content.
                for m in reversed(messages):
                    if m.get("role", "user") == "user":
                        m["content"] = template.replace("{prompt}", str(m["content"]))
                        break
                return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            return template.replace("{prompt}", "\n".join(str(m["content"]) for m in messages))
        text = template.replace("{prompt}", row["prompt"])
        if self.chat:
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
            )
        return text

    def render(self, row: dict) -> tuple[str, list[int]]:
        text = self.text(row)
        ids = list(self.tokenizer(text, add_special_tokens=not self.chat).input_ids)
        if len(ids) > self.cfg.max_prompt_len:
            ids = ids[-self.cfg.max_prompt_len :]  # keep the end: it holds the question and the generation prompt
        return text, ids


# --- sampling prompts ------------------------------------------------------------------------


class PromptSampler:
    """Seeded epochs over row indices (shuffled per epoch if asked); the cursor is resumable."""

    def __init__(self, num_rows: int, seed: int, shuffle: bool = True):
        if num_rows <= 0:
            raise DataError("cannot sample prompts from an empty dataset")
        self.num_rows = num_rows
        self.seed = seed
        self.shuffle = shuffle
        self.epoch = 0
        self.cursor = 0
        self._order = self._epoch_order(0)

    def _epoch_order(self, epoch: int) -> list[int]:
        order = list(range(self.num_rows))
        if self.shuffle:
            random.Random(f"prompts:{self.seed}:{epoch}").shuffle(order)
        return order

    def next_indices(self, count: int) -> list[int]:
        out = []
        while len(out) < count:
            if self.cursor >= self.num_rows:
                self.epoch += 1
                self.cursor = 0
                self._order = self._epoch_order(self.epoch)
            take = min(count - len(out), self.num_rows - self.cursor)
            out.extend(self._order[self.cursor : self.cursor + take])
            self.cursor += take
        return out

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "cursor": self.cursor, "num_rows": self.num_rows, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        if state["num_rows"] != self.num_rows:
            raise DataError(f"the dataset changed since the checkpoint: {state['num_rows']} rows then, {self.num_rows} now")
        self.epoch, self.cursor = int(state["epoch"]), int(state["cursor"])
        self._order = self._epoch_order(self.epoch)
