"""What a dataset row is, and the precise reasons a record is not one.

A record (a JSON object, a CSV row, a Parquet row) maps onto a row as:
- `prompt`: text, or `messages`: a chat list [{"role", "content"}, ...] (a `prompt` that is a
  chat list, as in verl's Parquet files, counts as `messages`); exactly one of them;
- `answer` or `label` (at most one): the reference answer, text or a number; may be absent;
- `data_source`: optional text (routes the judger);
- every other field: kept as `extra` JSON.
`columns` renames: {"prompt": "question"} reads the prompt from the `question` field.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import jsoncodec

ROLES = frozenset({"system", "user", "assistant", "tool"})
DATA_SOURCE_MAX = 100  # DatasetRow.data_source max_length
TARGET_FIELDS = ("prompt", "messages", "answer", "data_source")


class RowError(Exception):
    """Why one record cannot become a row. `code` groups reasons in the report."""

    def __init__(self, field: str, message: str, code: str = "invalid"):
        super().__init__(message)
        self.field = field
        self.message = message
        self.code = code


@dataclass(frozen=True)
class Columns:
    """Which source field feeds each row field (the defaults are the field names themselves)."""

    prompt: str = "prompt"
    messages: str = "messages"
    answer: str | None = None  # None: 'answer', else 'label'
    data_source: str = "data_source"

    @classmethod
    def from_mapping(cls, mapping: dict | None) -> "Columns":
        mapping = {k: v.strip() for k, v in (mapping or {}).items() if v and v.strip()}
        unknown = set(mapping) - set(TARGET_FIELDS)
        if unknown:
            raise ValueError(f"unknown target field(s): {', '.join(sorted(unknown))} (use {', '.join(TARGET_FIELDS)})")
        sources = list(mapping.values())
        if len(sources) != len(set(sources)):
            raise ValueError("two fields cannot be read from the same column")
        return cls(**mapping)

    def as_dict(self) -> dict:
        out = {"prompt": self.prompt, "messages": self.messages, "data_source": self.data_source}
        if self.answer:
            out["answer"] = self.answer
        return out


def check_messages(messages) -> str | None:
    """Why `messages` is not a chat list, or None."""
    if type(messages) is not list:
        return f"must be a list of {{role, content}} objects, not {_type_name(messages)}"
    if not messages:
        return "is an empty list"
    for i, message in enumerate(messages):
        if type(message) is not dict:
            return f"item {i} must be an object with role and content, not {_type_name(message)}"
        role = message.get("role")
        if role not in ROLES:
            return f"item {i} has role {role!r}; use one of {', '.join(sorted(ROLES))}"
        content = message.get("content")
        if type(content) is not str:
            return f"item {i} ({role}) needs a text 'content', not {_type_name(content)}"
    return None


def _type_name(value) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "text", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def make_normalizer(columns: Columns | None = None):
    """A fast function record(dict) -> (prompt, messages|None, answer, data_source, extra) that
    raises RowError. It pops the mapped fields out of the record, which then *is* `extra`: the
    caller must not reuse the record. One closure with its keys bound, because it runs once per
    row of files with millions of rows."""
    columns = columns or Columns()
    prompt_key, messages_key, ds_key = columns.prompt, columns.messages, columns.data_source
    answer_key = columns.answer
    missing = object()

    def normalize(record):
        if type(record) is not dict:
            raise RowError("", f"a row must be a JSON object, not {_type_name(record)}", "wrong_type")
        pop = record.pop
        prompt = pop(prompt_key, missing)
        messages = pop(messages_key, missing)
        if type(prompt) is str:
            if messages is not missing and messages is not None:
                raise RowError(messages_key, f"the row has both '{prompt_key}' and '{messages_key}'; keep one", "ambiguous")
            if not prompt.strip():
                raise RowError(prompt_key, "the prompt is empty", "missing_prompt")
            messages = None
        elif prompt is missing or prompt is None:
            if messages is missing or messages is None:
                raise RowError(prompt_key, f"missing prompt: give '{prompt_key}' (text) or '{messages_key}' (chat list)", "missing_prompt")
            problem = check_messages(messages)
            if problem:
                raise RowError(messages_key, f"'{messages_key}' {problem}", "bad_messages")
            prompt = ""
        elif type(prompt) is list:  # verl-style: the prompt is the chat
            if messages is not missing and messages is not None:
                raise RowError(messages_key, f"the row has both '{prompt_key}' and '{messages_key}'; keep one", "ambiguous")
            problem = check_messages(prompt)
            if problem:
                raise RowError(prompt_key, f"'{prompt_key}' (a chat list) {problem}", "bad_messages")
            messages, prompt = prompt, ""
        else:
            raise RowError(prompt_key, f"'{prompt_key}' must be text or a chat list, not {_type_name(prompt)}", "wrong_type")

        if answer_key is None:
            answer = pop("answer", missing)
            label = pop("label", missing)
            name = "answer"
            if label is not missing:
                if answer is not missing:
                    raise RowError("label", "the row has both 'answer' and 'label'; keep one", "ambiguous")
                answer, name = label, "label"
        else:
            answer, name = pop(answer_key, missing), answer_key
        kind = type(answer)
        if kind is str:
            pass
        elif answer is missing or answer is None:
            answer = ""
        elif kind is int or kind is float:
            answer = str(answer)
        else:
            raise RowError(name, f"'{name}' must be text or a number, not {_type_name(answer)}", "wrong_type")

        data_source = pop(ds_key, "")
        if type(data_source) is not str:
            if data_source is None:
                data_source = ""
            else:
                raise RowError(ds_key, f"'{ds_key}' must be text, not {_type_name(data_source)}", "wrong_type")
        elif len(data_source) > DATA_SOURCE_MAX:
            raise RowError(ds_key, f"'{ds_key}' is longer than {DATA_SOURCE_MAX} characters", "too_long")
        return prompt, messages, answer, data_source, record

    return normalize


def decode_json_cell(value: str, field: str):
    """A CSV cell that holds JSON (a `messages` column): the parsed value, or RowError."""
    try:
        return jsoncodec.loads(value)
    except jsoncodec.JSONError as exc:
        raise RowError(field, f"'{field}' is not valid JSON: {exc}", "bad_json") from None
