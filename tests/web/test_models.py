import pytest
from django.db import IntegrityError, transaction

from rlweb.datasets.models import Dataset, DatasetRow
from rlweb.judgers.models import JudgerConfig
from rlweb.runs.models import Checkpoint, MetricPoint, Run, Trajectory

pytestmark = pytest.mark.django_db


def make_run(owner, **kw):
    return Run.objects.create(owner=owner, name=kw.pop("name", "r"), config={"seed": 0}, **kw)


def test_it_keeps_one_metric_point_per_run_name_and_step(alice):
    run = make_run(alice)
    MetricPoint.objects.create(run=run, step=1, name="reward/mean", value=0.5, wall_time=1.0)
    with pytest.raises(IntegrityError), transaction.atomic():
        MetricPoint.objects.create(run=run, step=1, name="reward/mean", value=0.7, wall_time=2.0)
    # The same step of another series, or another run, is fine.
    MetricPoint.objects.create(run=run, step=1, name="kl", value=0.0, wall_time=1.0)
    MetricPoint.objects.create(run=make_run(alice), step=1, name="reward/mean", value=0.1, wall_time=1.0)
    assert MetricPoint.objects.count() == 3


def test_it_ignores_a_repeated_metric_point_when_written_idempotently(alice):
    run = make_run(alice)
    rows = [MetricPoint(run=run, step=s, name="reward/mean", value=s / 10, wall_time=s) for s in range(5)]
    MetricPoint.objects.bulk_create(rows, ignore_conflicts=True)
    MetricPoint.objects.bulk_create(
        [MetricPoint(run=run, step=s, name="reward/mean", value=9.9, wall_time=s) for s in range(3, 8)], ignore_conflicts=True
    )
    values = dict(MetricPoint.objects.filter(run=run).values_list("step", "value"))
    assert values == {0: 0.0, 1: 0.1, 2: 0.2, 3: 0.3, 4: 0.4, 5: 9.9, 6: 9.9, 7: 9.9}


def test_it_refuses_two_datasets_of_one_owner_with_the_same_name(alice, bob):
    Dataset.objects.create(owner=alice, name="gsm8k")
    Dataset.objects.create(owner=bob, name="gsm8k")
    with pytest.raises(IntegrityError), transaction.atomic():
        Dataset.objects.create(owner=alice, name="gsm8k")


def test_it_refuses_two_rows_at_the_same_index_of_a_dataset(alice):
    ds = Dataset.objects.create(owner=alice, name="d")
    DatasetRow.objects.create(dataset=ds, index=0, prompt="1+1=", answer="2")
    with pytest.raises(IntegrityError), transaction.atomic():
        DatasetRow.objects.create(dataset=ds, index=0, prompt="2+2=", answer="4")


def test_it_refuses_two_judgers_of_one_owner_with_the_same_name(alice):
    JudgerConfig.objects.create(owner=alice, name="numeric", kind="numeric")
    with pytest.raises(IntegrityError), transaction.atomic():
        JudgerConfig.objects.create(owner=alice, name="numeric", kind="exact")


def test_it_refuses_a_second_checkpoint_or_sample_at_the_same_step(alice):
    run = make_run(alice)
    Checkpoint.objects.create(run=run, step=10, path="/x/10")
    with pytest.raises(IntegrityError), transaction.atomic():
        Checkpoint.objects.create(run=run, step=10, path="/y/10")
    Trajectory.objects.create(run=run, step=1, uid="u1", group_id="g1")
    with pytest.raises(IntegrityError), transaction.atomic():
        Trajectory.objects.create(run=run, step=1, uid="u1", group_id="g1")


def test_deleting_a_run_deletes_its_points_samples_and_checkpoints(alice):
    run = make_run(alice)
    MetricPoint.objects.create(run=run, step=1, name="kl", value=0.0, wall_time=1.0)
    Trajectory.objects.create(run=run, step=1, uid="u", group_id="g")
    Checkpoint.objects.create(run=run, step=1, path="/p")
    run.delete()
    assert (MetricPoint.objects.count(), Trajectory.objects.count(), Checkpoint.objects.count()) == (0, 0, 0)


def test_a_run_knows_its_progress_and_whether_it_can_resume(alice):
    run = make_run(alice, current_step=15, total_steps=60, status=Run.Status.LOST)
    assert run.progress == 0.25
    assert run.can_resume and not run.is_active
    run.status = Run.Status.RUNNING
    assert run.is_active and not run.can_resume
