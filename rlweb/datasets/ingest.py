"""The import loop: records from a source → validated rows → the database, in one pass.

Runs inside the caller's transaction. Every bad record is reported with its line (or row) and
field; without `skip_bad_rows` the first error stops writing (the caller rolls back) but the
rest of the file is still checked, so people see every error at once, not one per attempt.

This loop runs once per row of files with millions of rows, so it is written for speed: one
function, local names, JSON text built once and reused by the duplicate check and the COPY.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Callable

from . import jsoncodec
from .importers.base import FileError, Source
from .sinks import open_sink
from .validation import Columns, RowError, make_normalizer

CHUNK_ROWS = 2000
LISTED_MAX = 200  # errors and duplicates listed in the report (all are counted)
DUPLICATE_POLICIES = {
    "report": "Keep duplicates and list them",
    "skip": "Drop duplicates (keep the first)",
    "error": "Treat duplicates as bad rows",
}

Progress = Callable[[int, int], None]


@dataclass
class Issues:
    """Errors (or skipped rows) and duplicates, counted in full and listed up to LISTED_MAX."""

    errors: list[dict] = field(default_factory=list)
    error_count: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    duplicates: list[dict] = field(default_factory=list)
    duplicate_count: int = 0

    def error(self, line: int, fld: str, message: str, code: str) -> None:
        self.error_count += 1
        self.by_reason[code] = self.by_reason.get(code, 0) + 1
        if len(self.errors) < LISTED_MAX:
            self.errors.append({"line": line, "field": fld, "message": message})

    def duplicate(self, line: int, first: int) -> None:
        self.duplicate_count += 1
        if len(self.duplicates) < LISTED_MAX:
            self.duplicates.append({"line": line, "duplicate_of": first})


@dataclass
class Outcome:
    row_count: int
    train_count: int
    eval_count: int
    summary: dict
    issues: Issues
    seconds: float


def ingest(
    dataset_id: int,
    source: Source,
    *,
    skip_bad_rows: bool = False,
    eval_fraction: float = 0.0,
    seed: int = 0,
    duplicates: str = "report",
    columns: Columns | None = None,
    progress: Progress | None = None,
) -> tuple[Outcome, bool]:
    """Import every record of `source` into dataset `dataset_id`. Returns (outcome, ok): when not
    ok, nothing usable was written and the caller must roll back and show `outcome.issues`."""
    if duplicates not in DUPLICATE_POLICIES:
        raise ValueError(f"duplicates must be one of {', '.join(DUPLICATE_POLICIES)}")
    started = time.monotonic()
    normalize = make_normalizer(columns)
    dumps, JSONError = jsoncodec.dumps, jsoncodec.JSONError
    issues = Issues()
    sink = open_sink(dataset_id)
    encode, buffer = sink.encode, []
    append = buffer.append
    rnd = random.Random(seed).random
    seen: dict[int, int] = {}  # hash of (prompt, messages, answer, data_source) -> first line
    seen_get = seen.get
    ok = True
    index = train = 0
    # Field summary, gathered on the way (cheap counters only).
    messages_rows = answered = 0
    prompt_chars = 0
    prompt_min, prompt_max = None, 0
    data_sources: dict[str, int] = {}
    key_sets: dict[tuple, int] = {}
    splits_from_file = 0
    records = 0

    def report_error(where, err):
        nonlocal ok
        issues.error(where, err.field, err.message, err.code)
        if not skip_bad_rows:
            ok = False

    try:
        for where, record, split in source:
            records += 1
            if record.__class__ is RowError:
                report_error(where, record)
                continue
            try:
                prompt, messages, answer, data_source, extra = normalize(record)
                messages_json = dumps(messages) if messages is not None else None
                extra_json = dumps(extra) if extra else "{}"
            except RowError as err:
                report_error(where, err)
                continue
            except JSONError as err:
                report_error(where, RowError("extra", f"a field {err}", "wrong_type"))
                continue
            key = hash((prompt, messages_json, answer, data_source))
            first = seen_get(key)
            if first is None:
                seen[key] = where
            else:
                issues.duplicate(where, first)
                if duplicates == "skip":
                    continue
                if duplicates == "error":
                    report_error(where, RowError("", f"duplicate of {source.where_name} {first}", "duplicate"))
                    continue
            if not ok:
                continue  # keep checking the file, but nothing more is written
            if split is None:
                split = "eval" if eval_fraction and rnd() < eval_fraction else "train"
            else:
                splits_from_file += 1
            if split == "train":
                train += 1
            append(encode(index, split, prompt, messages, messages_json, answer, data_source, extra, extra_json))
            index += 1
            if messages is None:
                size = len(prompt)
            else:
                messages_rows += 1
                size = sum(len(m["content"]) for m in messages)
            prompt_chars += size
            if size > prompt_max:
                prompt_max = size
            if prompt_min is None or size < prompt_min:
                prompt_min = size
            if answer:
                answered += 1
            data_sources[data_source] = data_sources.get(data_source, 0) + 1
            if extra:
                keys = tuple(extra)
                key_sets[keys] = key_sets.get(keys, 0) + 1
            if len(buffer) >= CHUNK_ROWS:
                sink.write(buffer)
                buffer.clear()
                if progress is not None:
                    progress(source.position(), source.total)
        if ok and buffer:
            sink.write(buffer)
            buffer.clear()
    except BaseException:  # a FileError mid-file, a database error, a cancelled task
        sink.abort()
        raise
    if ok and index == 0 and issues.error_count == 0:
        sink.abort()
        raise FileError("the file is empty" if records == 0 else "the file has no rows")
    if not ok or index == 0:
        sink.abort()
        ok = False
    else:
        sink.finish()
    if progress is not None:
        progress(source.total, source.total)

    extra_keys: dict[str, int] = {}
    for keys, count in key_sets.items():
        for key in keys:
            extra_keys[key] = extra_keys.get(key, 0) + count
    summary = {
        "rows": index,
        "prompt_rows": index - messages_rows,
        "messages_rows": messages_rows,
        "with_answer": answered,
        "prompt_chars": {"min": prompt_min or 0, "mean": round(prompt_chars / index, 1) if index else 0, "max": prompt_max},
        "data_sources": dict(sorted(data_sources.items(), key=lambda kv: -kv[1])[:50]),
        "data_source_count": len(data_sources),
        "extra_fields": dict(sorted(extra_keys.items(), key=lambda kv: -kv[1])[:100]),
        "split_from_file": splits_from_file > 0,
    }
    outcome = Outcome(index, train, index - train, summary, issues, time.monotonic() - started)
    return outcome, ok
