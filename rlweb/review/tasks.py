"""Celery tasks of rollout review: thin wrappers around services."""

from celery import shared_task


@shared_task(name="rlweb.review.rejudge_run", acks_late=True)
def rejudge_run(job_id: int) -> None:
    """Score a run's stored samples with a re-judge job's judger (services.run_rejudge)."""
    from .services import run_rejudge

    run_rejudge(job_id)
