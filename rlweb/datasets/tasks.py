"""Celery tasks of the datasets app: thin wrappers over services."""

from celery import shared_task


@shared_task(name="rlweb.datasets.import_dataset", ignore_result=True)
def import_dataset_task(dataset_id: int, job: dict) -> None:
    """Import an uploaded file into an "importing" dataset (see services.start_import)."""
    from .services import run_import

    run_import(dataset_id, job)
