"""Indexes on runs_trajectory that the sample browser's filters and sorts need to answer the first
page of a run with a million samples in well under 200 ms (bench/samples.py measures it).

They live here, not in the runs app's models, because they serve this app's queries only; the
runs app's own migrations stay untouched. Every b-tree index leads with run_id (every query is
about one run) and ends with the columns of the sort order it serves, so that the first page is a
short index range scan instead of a sort of the run's samples:

- equality filters (status, finish reason, data source, zero-variance) are followed by
  (step, id), the default "newest first" order;
- range filters and sortable numeric columns are followed by id, the keyset tie-breaker.

Full-text search is migration 0003's (a stored tsvector column and its GIN index). On a live
Postgres database the indexes are built CONCURRENTLY, so a running training run can keep writing
samples meanwhile.
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



def create_indexes(apps, schema_editor):
    concurrently = "CONCURRENTLY " if schema_editor.connection.vendor == "postgresql" else ""
    for name, columns in BTREE_INDEXES.items():
        schema_editor.execute(f"CREATE INDEX {concurrently}{name} ON {TABLE} ({columns})")


def drop_indexes(apps, schema_editor):
    concurrently = "CONCURRENTLY " if schema_editor.connection.vendor == "postgresql" else ""
    for name in BTREE_INDEXES:
        schema_editor.execute(f"DROP INDEX {concurrently}IF EXISTS {name}")


class Migration(migrations.Migration):
    # CREATE INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("review", "0001_initial"),
        ("runs", "0001_initial"),
    ]

    operations = [migrations.RunPython(create_indexes, drop_indexes, elidable=False)]
