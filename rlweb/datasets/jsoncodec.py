"""JSON in and out of the importer's hot loop, strict in the way Postgres' jsonb is strict.

orjson is used when it is installed (about 3x faster to parse a JSONL line, which is most of the
Python time of a large import; RLWEB_NO_ORJSON=1 turns it off); otherwise the standard library,
made as strict: NaN and Infinity are refused (jsonb cannot hold them) and lone surrogate escapes
are reported by the caller (`unstorable`). Both give the same accepted/refused answer for a row.
"""

from __future__ import annotations

import json
import math
import os

try:  # optional speed-up; see the module docstring
    import orjson
except ImportError:  # pragma: no cover - exercised only where orjson is missing
    orjson = None


class JSONError(ValueError):
    """A JSON text that cannot be read (or a value that cannot be written); message for people."""


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


_std_decoder = json.JSONDecoder(parse_constant=_refuse_constant)


def std_loads(data: bytes | str):
    try:
        if isinstance(data, bytes):
            data = data.decode("utf-8")
        return _std_decoder.decode(data)
    except UnicodeDecodeError as exc:
        raise JSONError(f"invalid UTF-8 at byte {exc.start}") from None
    except ValueError as exc:
        raise JSONError(str(exc)) from None


def std_dumps(value) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, default=_default)
    except (TypeError, ValueError) as exc:
        raise JSONError(_type_message(exc)) from None


if orjson is not None and os.environ.get("RLWEB_NO_ORJSON") != "1":
    _orjson_loads = orjson.loads
    _orjson_dumps = orjson.dumps
    _OrjsonError = orjson.JSONDecodeError

    def loads(data: bytes | str):
        try:
            return _orjson_loads(data)
        except _OrjsonError as exc:
            raise JSONError(str(exc)) from None

    def dumps(value) -> str:
        try:
            return _orjson_dumps(value, default=_default).decode()
        except TypeError as exc:
            raise JSONError(_type_message(exc)) from None

    FAST = True
else:  # without orjson (or RLWEB_NO_ORJSON=1, to compare): the standard library
    loads, dumps, FAST = std_loads, std_dumps, False


def _default(value):
    # Values a Parquet/Arrow column can hold that JSON cannot: write them the way people read them.
    import datetime
    import decimal

    if isinstance(value, (datetime.date, datetime.time, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise TypeError(f"{value} cannot be stored as JSON")
    raise TypeError(f"a {type(value).__name__} value cannot be stored as JSON")


def _type_message(exc: Exception) -> str:
    text = str(exc)
    if "not JSON serializable" in text or "Type is not" in text:
        return "holds a value that cannot be stored as JSON (" + text + ")"
    return text


def unstorable(value) -> str | None:
    """Why Postgres could not store this parsed value (NUL characters, lone surrogates, NaN),
    or None. Walks nested containers; only called for rows that look suspicious."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "contains a NUL character (\\u0000), which the database cannot store"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "contains a lone UTF-16 surrogate escape (e.g. \\ud800), which is not valid text"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"contains {item}, which JSON cannot hold"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return None
