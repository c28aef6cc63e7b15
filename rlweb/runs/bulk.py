"""Insert many rows at once, ignoring rows that already exist (any unique constraint).

On Postgres: COPY into a session-local staging table, then one INSERT ... SELECT ... ON CONFLICT
DO NOTHING — COPY is the fastest way in, and the INSERT gives "insert or ignore" semantics that
COPY alone lacks (a resumed step re-sends points that are already stored). Elsewhere (SQLite in
embedded mode): bulk_create(ignore_conflicts=True).

Call it inside a transaction (the staging table is emptied at commit).
"""

from __future__ import annotations

import json

from django.db import connection, models

def _columns(model) -> list[models.Field]:
    return [
        f for f in model._meta.concrete_fields
        if not f.primary_key and not getattr(f, "generated", False)
    ]


def _default(field: models.Field):
    if getattr(field, "auto_now_add", False) or getattr(field, "auto_now", False):
        from django.utils import timezone

        return timezone.now()
    return field.get_default()  # the declared default, else "" for text columns, else None


def insert_ignore(model, rows: list[dict], batch_size: int = 2000) -> None:
    """Insert `rows` (dicts of field attnames -> values; missing fields take their defaults)."""
    if not rows:
        return
    if connection.vendor == "postgresql":
        _copy_insert_ignore(model, rows)
    else:
        objs = [model(**row) for row in rows]
        model.objects.bulk_create(objs, ignore_conflicts=True, batch_size=batch_size)


def _copy_insert_ignore(model, rows: list[dict]) -> None:
    fields = _columns(model)
    table = model._meta.db_table
    stage = f"rlweb_stage_{table}"
    cols = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    defaults = {f.attname: _default(f) for f in fields}
    with connection.cursor() as cursor:
        raw = cursor.cursor  # the psycopg 3 cursor under Django's wrapper
        # Same column types, no constraints; one per database session, emptied at every commit
        # (and here, in case of a second call in the same transaction). One round trip: Django's
        # psycopg cursor binds client-side, so both statements go as one simple query. (Not
        # remembered per session: a rolled-back transaction takes a new temp table with it.)
        raw.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS AS "
            f"SELECT {cols} FROM {connection.ops.quote_name(table)} WITH NO DATA; TRUNCATE {stage}"
        )
        plan = [(f.attname, defaults[f.attname], isinstance(f, models.JSONField)) for f in fields]
        dumps = json.dumps
        with raw.copy(f"COPY {stage} ({cols}) FROM STDIN") as copy:
            for row in rows:
                values = []
                for name, default, is_json in plan:
                    value = row.get(name, default)
                    values.append(dumps(value) if is_json and value is not None else value)
                copy.write_row(values)
        raw.execute(
            f"INSERT INTO {connection.ops.quote_name(table)} ({cols}) SELECT {cols} FROM {stage} ON CONFLICT DO NOTHING"
        )
