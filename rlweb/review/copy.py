"""Write many rows fast: COPY on Postgres, bulk_create elsewhere (SQLite in embedded mode).

Plain COPY, no conflict handling: callers write rows that cannot exist yet (a re-judge job resumes
after the last sample it scored). Call it inside a transaction when the rows must appear together.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from django.db import connection


def copy_rows(model, columns: Sequence[str], rows: Iterable[Sequence], batch_size: int = 5000) -> int:
    """Insert `rows` (tuples in the order of `columns`, which are field attnames) into `model`'s
    table; JSON fields take Python values. Returns the number of rows written."""
    fields = [model._meta.get_field(name) for name in columns]
    json_columns = {n for n, f in enumerate(fields) if f.get_internal_type() == "JSONField"}
    if connection.vendor != "postgresql":
        objs = [model(**dict(zip(columns, row))) for row in rows]
        model.objects.bulk_create(objs, batch_size=batch_size)
        return len(objs)
    quoted = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    count = 0
    with connection.cursor() as cursor:
        raw = cursor.cursor  # psycopg 3's cursor under Django's wrapper: it has copy()
        with raw.copy(f"COPY {connection.ops.quote_name(model._meta.db_table)} ({quoted}) FROM STDIN") as copy:
            for row in rows:
                if json_columns:
                    row = [json.dumps(v) if n in json_columns else v for n, v in enumerate(row)]
                copy.write_row(row)
                count += 1
    return count
