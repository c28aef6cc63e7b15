"""A row's prompt exactly as the model will see it, without importing transformers or torch.

The rules are the engine's (workers.rl.data.PromptRenderer.text): `prompt_template` replaces
'{prompt}' by plain substitution; with a chat template, a prompt row becomes one user turn (a
`messages` row has the template applied to its last user turn) and the chat template renders it
with the generation prompt appended; without one, a `messages` row is its contents joined by
newlines.

The chat template is the tokenizer's own Jinja text (`chat_template.jinja`, or the
`chat_template` entry of `tokenizer_config.json`) rendered in the same kind of sandbox that
transformers uses (immutable sandbox, trim_blocks, lstrip_blocks, loop controls, `tojson`,
`raise_exception`, `strftime_now`), with the tokenizer's special tokens as variables. What this
cannot show: special tokens the tokenizer itself adds when it encodes (e.g. a BOS token).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path

from django.conf import settings

BUILTIN_TINY = "builtin:tiny-arith"
SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")


class RenderError(Exception):
    """The model's chat template cannot be found, read or rendered; the message says why."""


@dataclass(frozen=True)
class ChatTemplate:
    source: str  # where it was read, for the page
    text: str
    tokens: tuple[tuple[str, str], ...]  # special token variables

    def render(self, messages: list[dict]) -> str:
        template = _compile(self.text)
        try:
            return template.render(messages=messages, add_generation_prompt=True, tools=None, documents=None, **dict(self.tokens))
        except Exception as exc:  # TemplateError, SecurityError, raise_exception(...)
            raise RenderError(f"the chat template ({self.source}) failed: {exc}") from None


def _raise(message):
    raise RenderError(message)


@lru_cache(maxsize=16)
def _compile(text: str):
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        return env.from_string(text)
    except Exception as exc:
        raise RenderError(f"the chat template does not compile: {exc}") from None


def model_dir(model: str) -> Path:
    """A local model directory named by people, if it lies under MODEL_ROOTS; else RenderError."""
    path = Path(model).expanduser().resolve()
    roots = [Path(root).resolve() for root in settings.MODEL_ROOTS]
    if not any(path == root or path.is_relative_to(root) for root in roots):
        raise RenderError(f"{model} is not under a model directory (MODEL_ROOTS)")
    if not path.is_dir():
        raise RenderError(f"{model} is not a directory")
    return path


def local_models(limit: int = 50) -> list[str]:
    """Model directories one level under MODEL_ROOTS that have a tokenizer, for a picker."""
    found = []
    for root in settings.MODEL_ROOTS:
        root = Path(root)
        if not root.is_dir():
            continue
        for child in sorted(root.iterdir()):
            if child.is_dir() and ((child / "tokenizer_config.json").exists() or (child / "tokenizer.json").exists()):
                found.append(str(child))
                if len(found) >= limit:
                    return found
    return found


def _token_text(value) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def load_chat_template(model: str) -> ChatTemplate | None:
    """The chat template of a model (a local directory, or the builtin tiny model, which has
    none), or None when the tokenizer has none."""
    if not model or model == BUILTIN_TINY:
        return None
    path = model_dir(model)
    config: dict = {}
    config_file = path / "tokenizer_config.json"
    if config_file.exists():
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise RenderError(f"tokenizer_config.json cannot be read: {exc}") from None
    tokens = {}
    special_map = path / "special_tokens_map.json"
    if special_map.exists():
        try:
            for name, value in json.loads(special_map.read_text(encoding="utf-8")).items():
                if name in SPECIAL_TOKENS and _token_text(value) is not None:
                    tokens[name] = _token_text(value)
        except (OSError, ValueError):
            pass
    for name in SPECIAL_TOKENS:
        if _token_text(config.get(name)) is not None:
            tokens[name] = _token_text(config.get(name))
    jinja_file = path / "chat_template.jinja"
    if jinja_file.exists():
        text, source = jinja_file.read_text(encoding="utf-8"), "chat_template.jinja"
    else:
        text, source = config.get("chat_template"), "tokenizer_config.json"
        if isinstance(text, list):  # named templates: the default one
            named = {item.get("name"): item.get("template") for item in text if isinstance(item, dict)}
            text = named.get("default")
    if not isinstance(text, str) or not text.strip():
        return None
    return ChatTemplate(source=source, text=text, tokens=tuple(sorted(tokens.items())))


def render_prompt(prompt: str, messages: list | None, prompt_template: str = "{prompt}", chat: ChatTemplate | None = None) -> str:
    """The text the model is given for a row (see the module docstring for the rules)."""
    if messages is not None:
        turns = [dict(m) for m in messages]
        if chat is not None:
            for turn in reversed(turns):
                if turn.get("role", "user") == "user":
                    turn["content"] = prompt_template.replace("{prompt}", str(turn["content"]))
                    break
            return chat.render(turns)
        return prompt_template.replace("{prompt}", "\n".join(str(m["content"]) for m in turns))
    text = prompt_template.replace("{prompt}", prompt)
    if chat is not None:
        return chat.render([{"role": "user", "content": text}])
    return text
