"""JSON Lines: one JSON object per line, read as bytes line by line."""

from __future__ import annotations

import os
import re

from .. import jsoncodec
from ..validation import RowError
from .base import FileError, Source

BOM = b"\xef\xbb\xbf"


class JsonlSource(Source):
    unit = "bytes"

    def __init__(self, path, columns):
        super().__init__(path, columns)
        self.total = os.path.getsize(path)
        self._file = open(path, "rb")
        head = self._file.read(4096).lstrip(BOM).lstrip()
        self._file.seek(0)
        if head.startswith(b"["):
            raise FileError("the file is one JSON array; write one JSON object per line (JSON Lines)", line=1)

    def position(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        self._file.close()

    def __iter__(self):
        loads, JSONError, unstorable = jsoncodec.loads, jsoncodec.JSONError, jsoncodec.unstorable
        # Escapes that parse but that Postgres cannot store: NUL always; lone surrogates only
        # with the standard library (orjson refuses them while parsing).
        suspicious = (b"\\u0000",) if jsoncodec.FAST else (b"\\u0000", b"\\ud", b"\\uD")
        lineno = 0
        for line in self._file:
            lineno += 1
            if lineno == 1 and line.startswith(BOM):
                line = line[3:]
            try:
                record = loads(line)
            except JSONError as exc:
                if not line.strip():
                    continue  # blank lines (a trailing newline, spacing) are not rows
                yield lineno, _line_error(line, exc), None
                continue
            for marker in suspicious:
                if marker in line:
                    problem = unstorable(record)
                    if problem:
                        record = RowError("", f"the line {problem}", "unstorable")
                    break
            yield lineno, record, None


# Both JSON parsers say where, as "...: line L column C (char N)" counted inside the text they
# were given: here one line, so "line 2" would only mean its trailing newline. Say the character.
_POSITION = re.compile(r":? line \d+ column \d+ \(char (\d+)\)")


def _line_error(line: bytes, exc: Exception) -> RowError:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        return RowError("", f"invalid UTF-8 at byte {bad.start + 1} of the line", "invalid_utf8")
    message = _POSITION.sub(lambda m: f" (at character {int(m.group(1)) + 1})", str(exc))
    return RowError("", f"not valid JSON: {message}", "bad_json")
