"""CSV (or TSV) with a header row. Cells are text; a `messages` cell holds a JSON chat list.

Bytes are decoded line by line, so an invalid UTF-8 sequence is reported on its own line (a
text-mode file would fail somewhere in a 8 KiB chunk, with no line to show).
"""

from __future__ import annotations

import csv
import os

from ..validation import RowError, decode_json_cell
from .base import FileError, Source

BOM = "\ufeff"


class CsvSource(Source):
    unit = "bytes"

    def __init__(self, path, columns, delimiter: str = ","):
        super().__init__(path, columns)
        self.total = os.path.getsize(path)
        self.delimiter = delimiter
        self._file = open(path, "rb")
        # Cells can be large (long prompts); the csv module's default cap is 128 KiB.
        csv.field_size_limit(64 * 1024 * 1024)

    def position(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        self._file.close()

    def __iter__(self):
        undecodable: list[tuple[int, UnicodeDecodeError]] = []

        def text_lines():
            for number, raw in enumerate(self._file, start=1):
                try:
                    yield raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    undecodable.append((number, exc))
                    yield "\n"  # keeps the line count right; the row is reported below

        reader = csv.reader(text_lines(), delimiter=self.delimiter)
        try:
            header = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise FileError(f"the header is not valid CSV: {exc}", line=1, field="header") from None
        if undecodable and undecodable[0][0] == 1:
            raise FileError(f"invalid UTF-8 at byte {undecodable[0][1].start + 1} of the header", line=1, field="header")
        if header and header[0].startswith(BOM):
            header[0] = header[0][1:]
        header = [name.strip() for name in header]
        self._check_header(header)
        width = len(header)
        prompt_col, messages_col = self.columns.prompt, self.columns.messages
        json_cols = [messages_col] if messages_col in header else []
        prompt_in = prompt_col in header
        last_line = reader.line_num
        while True:
            try:
                cells = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                line = last_line + 1
                last_line = reader.line_num
                yield line, RowError("", f"not valid CSV: {exc}", "bad_csv"), None
                continue
            line, last_line = last_line + 1, reader.line_num
            if undecodable:
                bad = [item for item in undecodable if line <= item[0] <= last_line]
                undecodable[:] = [item for item in undecodable if item[0] > last_line]
                if bad:
                    number, exc = bad[0]
                    yield number, RowError("", f"invalid UTF-8 at byte {exc.start + 1} of the line", "invalid_utf8"), None
                    continue
            if not cells or (len(cells) == 1 and not cells[0].strip()):
                continue  # blank line
            if len(cells) != width:
                yield line, RowError("", f"has {len(cells)} fields; the header has {width}", "bad_csv"), None
                continue
            record = dict(zip(header, cells))
            try:
                # An empty prompt or messages cell means "this row uses the other one".
                if prompt_in and record[prompt_col] == "":
                    record[prompt_col] = None
                for name in json_cols:
                    cell = record[name]
                    record[name] = decode_json_cell(cell, name) if cell.strip() else None
            except RowError as exc:
                yield line, exc, None
                continue
            yield line, record, None

    def _check_header(self, header: list[str]) -> None:
        if not any(header):
            raise FileError("the header row is empty", line=1, field="header")
        seen = set()
        for name in header:
            if not name:
                raise FileError("the header has an empty column name", line=1, field="header")
            if name in seen:
                raise FileError(f"the header names the column {name!r} twice", line=1, field="header")
            seen.add(name)
        if self.columns.prompt not in seen and self.columns.messages not in seen:
            raise FileError(
                f"the header has no '{self.columns.prompt}' or '{self.columns.messages}' column (columns: {', '.join(header)})",
                line=1,
                field="header",
            )
