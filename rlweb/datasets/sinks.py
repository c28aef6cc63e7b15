"""Writing rows to the database in chunks: COPY on Postgres, bulk_create elsewhere (SQLite).

The caller holds the transaction; a sink never commits. `encode` turns one row into what the
sink buffers (a line of COPY text, or a model instance) and `write` sends a buffered chunk.
"""

from __future__ import annotations

from django.db import connection

from .models import DatasetRow

COPY_COLUMNS = ("dataset_id", "index", "split", "prompt", "messages", "answer", "data_source", "extra")


def _copy_escape(text: str) -> str:
    # COPY's text format: backslash, tab, newline and carriage return must be escaped. The
    # membership tests are C scans, much cheaper than translate() on the usual clean text.
    if "\\" in text or "\t" in text or "\n" in text or "\r" in text:
        return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return text


class CopySink:
    """COPY ... FROM STDIN in text format, one chunk of lines per write."""

    def __init__(self, dataset_id: int):
        self._prefix = f"{dataset_id}\t"
        self._cursor = connection.cursor()
        table = connection.ops.quote_name(DatasetRow._meta.db_table)
        columns = ", ".join(connection.ops.quote_name(c) for c in COPY_COLUMNS)
        self._copy_cm = self._cursor.copy(f"COPY {table} ({columns}) FROM STDIN")
        self._copy = self._copy_cm.__enter__()
        self._open = True

    def encode(self, index, split, prompt, messages, messages_json, answer, data_source, extra, extra_json) -> str:
        esc = _copy_escape
        if messages_json is None:
            messages_field = "\\N"
        else:
            messages_field = messages_json.replace("\\", "\\\\") if "\\" in messages_json else messages_json
        if "\\" in extra_json:  # JSON text never holds raw tabs or newlines, only backslashes
            extra_json = extra_json.replace("\\", "\\\\")
        return f"{self._prefix}{index}\t{split}\t{esc(prompt)}\t{messages_field}\t{esc(answer)}\t{esc(data_source)}\t{extra_json}\n"

    def write(self, lines: list[str]) -> None:
        self._copy.write("".join(lines).encode("utf-8"))

    def finish(self) -> None:
        if self._open:
            self._open = False
            self._copy_cm.__exit__(None, None, None)
            self._cursor.close()

    def abort(self) -> None:
        """End the COPY without keeping what it sent (the transaction is rolled back anyway)."""
        if self._open:
            self._open = False
            try:
                error = RuntimeError("import aborted")
                self._copy_cm.__exit__(RuntimeError, error, None)
            except Exception:  # psycopg re-raises the CopyFail as QueryCanceled; expected
                pass
            finally:
                self._cursor.close()


class BulkCreateSink:
    """The portable path (SQLite, embedded mode): bulk_create in chunks."""

    def __init__(self, dataset_id: int):
        self._dataset_id = dataset_id

    def encode(self, index, split, prompt, messages, messages_json, answer, data_source, extra, extra_json) -> DatasetRow:
        return DatasetRow(
            dataset_id=self._dataset_id, index=index, split=split, prompt=prompt, messages=messages, answer=answer, data_source=data_source, extra=extra
        )

    def write(self, rows: list[DatasetRow]) -> None:
        DatasetRow.objects.bulk_create(rows, batch_size=500)

    def finish(self) -> None:
        pass

    def abort(self) -> None:
        pass


def open_sink(dataset_id: int):
    if connection.vendor == "postgresql":
        return CopySink(dataset_id)
    return BulkCreateSink(dataset_id)
