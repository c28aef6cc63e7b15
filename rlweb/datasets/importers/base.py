"""What every importer is: a stream of records read without loading the file into memory.

A source yields `(where, record, split)` triples: `where` is the 1-based line (text files) or row
(Parquet, Arrow) number people will be shown; `record` is a dict, or a RowError saying why that
line is not a record; `split` is "train"/"eval" when the file itself says (a Hugging Face
DatasetDict), else None. `position()` and `total` drive the progress bar, in `unit`s.
"""

from __future__ import annotations

from typing import Iterator

from ..validation import Columns, RowError

Record = tuple[int, "dict | RowError", "str | None"]


class FileError(Exception):
    """The file as a whole cannot be read (empty, not that format, bad header)."""

    def __init__(self, message: str, line: int = 0, field: str = ""):
        super().__init__(message)
        self.message = message
        self.line = line
        self.field = field


class Source:
    unit = "bytes"
    total = 0
    # What `where` counts: shown in errors as "line 3" or "row 3".
    where_name = "line"

    def __init__(self, path, columns: Columns):
        self.path = path
        self.columns = columns

    def __iter__(self) -> Iterator[Record]:
        raise NotImplementedError

    def position(self) -> int:
        return 0

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


__all__ = ["FileError", "Record", "RowError", "Source"]
