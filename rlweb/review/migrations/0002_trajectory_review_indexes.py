"""Indexes on runs_trajectory that the sample browser's filters and sorts need to answer the first
page of a run with a million samples in well under 200 ms (bench/samples.py measures it).

They live here, not in the runs app's models, because they serve this app's queries only; the
runs app's own migrations stay untouched. Every b-tree index leads with run_id (every query is
about one run) and ends with the columns of the sort order it serves, so that the first page is a
short index range scan instead of a sort of the run's samples:

- equality filters (status, finish reason, data source, zero-variance) are followed by
  (step, id), the default "newest first" order;
- range filters and sortable numeric columns are followed by id, the keyset tie-breaker.

Full-text search uses a GIN index on the same tsvector expression the query uses
(rlweb.review.queries.SEARCH_VECTOR_SQL); Postgres only. On a live Postgres database the indexes
are built CONCURRENTLY, so a running training run can keep writing samples meanwhile.
"""

from django.db import migrations

TABLE = "runs_trajectory"

BTREE_INDEXES = {
    "review_traj_step_idx": "run_id, step, id",
    "review_traj_reward_idx": "run_id, reward, id",
    "review_traj_advantage_idx": "run_id, advantage, id",
    "review_traj_resplen_idx": "run_id, response_len, id",
    "review_traj_staleness_idx": "run_id, staleness, id",
    "review_traj_status_idx": "run_id, status, step, id",
    "review_traj_finish_idx": "run_id, finish_reason, step, id",
    "review_traj_source_idx": "run_id, data_source, step, id",
    "review_traj_zerovar_idx": "run_id, zero_variance, step, id",
    "review_traj_prompt_idx": "run_id, prompt_index, step, id",
}

# Must stay the expression of rlweb.review.queries.SEARCH_VECTOR_SQL, or the planner cannot use it.
SEARCH_INDEX = "review_traj_search_idx"
SEARCH_EXPRESSION = "to_tsvector('simple'::regconfig, prompt || ' ' || response)"


def create_indexes(apps, schema_editor):
    postgres = schema_editor.connection.vendor == "postgresql"
    concurrently = "CONCURRENTLY " if postgres else ""
    for name, columns in BTREE_INDEXES.items():
        schema_editor.execute(f"CREATE INDEX {concurrently}{name} ON {TABLE} ({columns})")
    if postgres:
        schema_editor.execute(f"CREATE INDEX CONCURRENTLY {SEARCH_INDEX} ON {TABLE} USING gin (({SEARCH_EXPRESSION}))")


def drop_indexes(apps, schema_editor):
    postgres = schema_editor.connection.vendor == "postgresql"
    concurrently = "CONCURRENTLY " if postgres else ""
    names = [*BTREE_INDEXES, SEARCH_INDEX] if postgres else list(BTREE_INDEXES)
    for name in names:
        schema_editor.execute(f"DROP INDEX {concurrently}IF EXISTS {name}")


class Migration(migrations.Migration):
    # CREATE INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("review", "0001_initial"),
        ("runs", "0001_initial"),
    ]

    operations = [migrations.RunPython(create_indexes, drop_indexes, elidable=False)]
