"""Insert many rows at once, ignoring rows that already exist (any unique constraint).

On Postgres: COPY into a session-local staging table, then one INSERT ... SELECT ... ON CONFLICT
DO NOTHING — COPY is the fastest way in, and the INSERT gives "insert or ignore" semantics that
COPY alone lacks (a resumed step re-sends points that are already stored). Elsewhere (SQLite in
embedded mode): bulk_create(ignore_conflicts=True).

The staging table is a temp table created once per database session (remembered only once the
transaction that created it commits: a rollback takes it away) and emptied right after each use;
ON COMMIT DELETE ROWS is the safety net. The worker writes every step this way, so the fixed
cost per call is kept to one COPY and one round trip.
"""

from __future__ import annotations

import json
import weakref

from django.db import connection, models, transaction

# Temp tables known to exist, per psycopg connection (a reconnect is a new object).
_staged: "weakref.WeakKeyDictionary[object, set[str]]" = weakref.WeakKeyDictionary()


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
        _ensure_stage(raw, table, stage, cols)
        plan = [(f.attname, defaults[f.attname], isinstance(f, models.JSONField)) for f in fields]
        dumps = json.dumps
        with raw.copy(f"COPY {stage} ({cols}) FROM STDIN") as copy:
            for row in rows:
                values = []
                for name, default, is_json in plan:
                    value = row.get(name, default)
                    values.append(dumps(value) if is_json and value is not None else value)
                copy.write_row(values)
        # Both statements in one round trip (Django's psycopg cursor binds client-side, so a
        # parameterless multi-statement string goes as one simple query).
        raw.execute(
            f"INSERT INTO {connection.ops.quote_name(table)} ({cols}) SELECT {cols} FROM {stage} ON CONFLICT DO NOTHING; "
            f"DELETE FROM {stage}"
        )


def _ensure_stage(raw, table: str, stage: str, cols: str) -> None:
    conn = raw.connection
    if table in _staged.get(conn, ()):
        return
    # Same column types as the target, no constraints.
    raw.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS AS "
        f"SELECT {cols} FROM {connection.ops.quote_name(table)} WITH NO DATA"
    )
    transaction.on_commit(lambda: _staged.setdefault(conn, set()).add(table))
