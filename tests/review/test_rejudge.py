"""Re-judge: another judger scores a run's stored samples; the two scores are compared."""

import pytest

from rlweb.judgers.models import JudgerConfig
from rlweb.review.models import RejudgeJob, RejudgeScore
from rlweb.review.services import filters_to_json, run_rejudge, spec_snapshot
from rlweb.review.tasks import rejudge_run

from .factories import make_run, make_sample

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(alice):
    return make_run(alice)


@pytest.fixture
def numeric(alice):
    return JudgerConfig.objects.create(owner=alice, name="numeric", kind="numeric", params={})


def job_for(run, judger, **fields):
    return RejudgeJob.objects.create(run=run, created_by=run.owner, judger=judger, judger_name=judger.name, spec=spec_snapshot(judger), **fields)


def test_it_scores_every_sample_and_lists_where_the_judgers_disagree(run, numeric):
    # The run's judger accepted "41" for 42 (wrong) and rejected "#### 42" (also wrong).
    right = make_sample(run, response="so #### 42", label="42", reward=1.0)
    accepted_wrong = make_sample(run, response="it is 41", label="42", reward=1.0)
    rejected_right = make_sample(run, response="#### 42", label="42", reward=0.0)
    job = run_rejudge(job_for(run, numeric).pk, batch=2)
    assert (job.status, job.total, job.done, job.agree, job.disagree, job.failed) == ("completed", 3, 3, 1, 2, 0)
    scores = {s.trajectory_id: s for s in RejudgeScore.objects.filter(job=job)}
    assert (scores[right.pk].score, scores[right.pk].old_score, scores[right.pk].disagrees) == (1.0, 1.0, False)
    assert (scores[accepted_wrong.pk].score, scores[accepted_wrong.pk].disagrees) == (0.0, True)
    assert (scores[rejected_right.pk].score, scores[rejected_right.pk].disagrees) == (1.0, True)
    assert "41" in scores[accepted_wrong.pk].explanation


def test_a_sample_the_new_judger_cannot_judge_is_failed_not_the_job(run, numeric):
    make_sample(run, response="#### 3", label="no number here", reward=1.0)
    job = run_rejudge(job_for(run, numeric).pk)
    [score] = RejudgeScore.objects.filter(job=job)
    assert (job.status, job.failed, job.disagree) == ("completed", 1, 1)
    assert (score.status, score.score, score.old_score) == ("failed", None, 1.0)
    assert "label has no number" in score.explanation


def test_it_rejudges_only_the_filtered_samples(run, numeric):
    from django.http import QueryDict

    make_sample(run, step=1, response="#### 1", label="1")
    late = make_sample(run, step=5, response="#### 2", label="2")
    job = run_rejudge(job_for(run, numeric, filters=filters_to_json(QueryDict("step_min=3&after=xyz"))).pk)
    assert job.total == 1
    assert list(RejudgeScore.objects.values_list("trajectory_id", flat=True)) == [late.pk]


def test_a_restarted_job_continues_after_the_last_scored_sample(run, numeric):
    samples = [make_sample(run, step=s, response=f"#### {s}", label=str(s)) for s in range(5)]
    job = job_for(run, numeric, status="running")
    # A first attempt scored the first two samples, then its worker died.
    for sample in samples[:2]:
        RejudgeScore.objects.create(job=job, trajectory=sample, score=1.0, old_score=1.0)
    RejudgeJob.objects.filter(pk=job.pk).update(done=2, agree=2)
    job = run_rejudge(job.pk, batch=2)
    assert RejudgeScore.objects.filter(job=job).count() == 5
    assert (job.status, job.done, job.total) == ("completed", 5, 5)


def test_a_cancelled_job_stops_after_its_current_batch(run, numeric):
    for s in range(6):
        make_sample(run, step=s, response=f"#### {s}", label=str(s))
    job = job_for(run, numeric, cancel_requested=True)
    job = run_rejudge(job.pk, batch=2)
    assert (job.status, job.done) == ("cancelled", 2)


def test_the_spec_is_a_snapshot_editing_the_judger_later_changes_nothing(run, numeric):
    make_sample(run, response="42.4", label="42", reward=0.0)
    job = job_for(run, numeric)
    numeric.params = {"tolerance": 1.0}
    numeric.save()
    assert run_rejudge(job.pk).disagree == 0  # still the default tolerance: 42.4 != 42


def test_starting_from_the_page_queues_the_task_and_the_comparison_lists_disagreements(
    alice_client, run, numeric, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(rejudge_run, "delay", lambda job_id: rejudge_run.apply(args=[job_id]))
    wrong = make_sample(run, response="41", label="42", reward=1.0)
    make_sample(run, response="#### 42", label="42", reward=1.0)
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(f"/review/runs/{run.pk}/rejudge/", {"judger": numeric.pk, "filters": ""})
    job = RejudgeJob.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/review/rejudge/{job.pk}/"
    assert (job.status, job.disagree, job.created_by, job.judger_name) == ("completed", 1, run.owner, "numeric")
    html = alice_client.get(f"/review/rejudge/{job.pk}/").content.decode()
    table = html.split('id="disagreements"')[1]
    assert f"#{wrong.pk}</a>" in table and table.count("<tr") == 2  # header + the one disagreement
    past = alice_client.get(f"/review/rejudge/{job.pk}/", {"after": wrong.pk}).content.decode()
    assert f"#{wrong.pk}</a>" not in past and 'id="disagreements"' not in past  # the cursor is past the only one
    unicode_digit = alice_client.get(f"/review/rejudge/{job.pk}/", {"after": "²"}).content.decode()
    assert f"#{wrong.pk}</a>" in unicode_digit.split('id="disagreements"')[1]  # not a cursor: from the start
    progress = alice_client.get(f"/review/rejudge/{job.pk}/progress/").content.decode()
    assert "2 / 2 judged" in progress and "<strong>1</strong> disagree" in progress


def test_a_cancelled_job_resumes_where_it_stopped(alice_client, run, numeric, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr(rejudge_run, "delay", lambda job_id: rejudge_run.apply(args=[job_id]))
    for s in range(5):
        make_sample(run, step=s, response=f"#### {s}", label=str(s))
    job = run_rejudge(job_for(run, numeric, cancel_requested=True).pk, batch=2)
    assert (job.status, job.done) == ("cancelled", 2)
    with django_capture_on_commit_callbacks(execute=True):
        alice_client.post(f"/review/rejudge/{job.pk}/resume/")
    job.refresh_from_db()
    assert (job.status, job.done, job.total, RejudgeScore.objects.filter(job=job).count()) == ("completed", 5, 5, 5)


def test_bob_cannot_resume_alices_job(client, bob, run, numeric):
    job = job_for(run, numeric, status="failed")
    client.force_login(bob)
    assert client.post(f"/review/rejudge/{job.pk}/resume/").status_code == 404
    job.refresh_from_db()
    assert job.status == "failed"
