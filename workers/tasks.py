"""Celery tasks: thin wrappers; the work is in workers.execution and rlweb.runs.services.

Cancelling is not a task: the page sets the run's cancel flag in the database and the running
attempt's reporter reads it at the next step boundary.
"""

from celery import shared_task


@shared_task(name="workers.tasks.train_run", acks_late=False)
def train_run(run_id: int, attempt: int | None = None):
    # acks_late=False: a training run is not safe to redeliver blindly after a worker dies; the
    # heartbeat declares it lost and a person (or the API) resumes it from its checkpoint.
    from workers.execution import execute

    return execute(run_id, attempt)


@shared_task(name="workers.tasks.reap_lost_runs", acks_late=False)  # a missed beat is harmless
def reap_lost_runs():
    from rlweb.runs.services import reap_lost_runs as reap

    return reap()
