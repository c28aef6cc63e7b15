"""Acceptance: re-judging 100,000 stored samples runs as a background task (the live stack's Celery
worker) with visible progress, and the comparison view lists the disagreements."""

import time

import pytest

from rlweb.judgers.models import JudgerConfig
from rlweb.review.models import RejudgeJob, RejudgeScore
from tests.support.browser import log_in

from .factories import copy_samples, make_run

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SAMPLES = 100_000
WRONG_EVERY = 7  # the run's judger rewarded every 7th sample although its answer is wrong


def stored_samples():
    for n in range(SAMPLES):
        wrong = n % WRONG_EVERY == 0
        answer = n % 1000
        yield {
            "step": n // 512,
            "uid": str(n),
            "group_id": f"{n // 512}-{(n % 512) // 8}",
            "prompt_index": (n % 512) // 8,
            "data_source": "arith",
            "reward": 1.0,
            "reward_components": {"correct": 1.0},
            "response_len": 6,
            "prompt": f"What is {answer} + 0?",
            "response": f"#### {answer + 1 if wrong else answer}",
            "label": str(answer),
        }


def test_rejudging_100k_samples_in_the_background_shows_progress_and_the_disagreements(live_stack, page, alice):
    run = make_run(alice, name="rejudge-100k")
    started = time.monotonic()
    assert copy_samples(run, stored_samples()) == SAMPLES
    JudgerConfig.objects.create(owner=alice, name="strict numeric", kind="numeric", params={})
    print(f"stored {SAMPLES} samples in {time.monotonic() - started:.1f} s")

    log_in(page, live_stack.url, "alice", "alice-password-1")
    page.goto(f"{live_stack.url}/review/runs/{run.pk}/rejudge/")
    page.select_option("#rejudge-form select[name=judger]", label="strict numeric (numeric)")
    clicked = time.monotonic()
    page.click("#rejudge-form button[type=submit]")
    page.wait_for_selector("#rejudge-progress")
    job = RejudgeJob.objects.get(run=run)

    # Progress is written batch by batch: watch it move while the worker judges.
    seen = set()
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        job.refresh_from_db()
        seen.add(job.done)
        if not job.is_active:
            break
        time.sleep(0.2)
    took = time.monotonic() - clicked
    print(f"re-judged {job.done} samples in {took:.1f} s; progress values seen: {sorted(seen)[:12]}...")
    assert job.status == "completed", (job.status, job.error, live_stack.logs())
    assert any(0 < done < SAMPLES for done in seen), sorted(seen)
    expected = len(range(0, SAMPLES, WRONG_EVERY))
    assert (job.total, job.done, job.disagree, job.agree, job.failed) == (SAMPLES, SAMPLES, expected, SAMPLES - expected, 0)
    assert RejudgeScore.objects.filter(job=job).count() == SAMPLES

    # The page polls the progress and reloads itself with the comparison when the job is done.
    page.wait_for_selector("#disagreements", timeout=30_000)
    assert page.locator("#rejudge-status").inner_text() == "completed"
    assert f"{SAMPLES} / {SAMPLES} judged" in page.locator("#rejudge-counts").inner_text()
    rows = page.locator("#disagreements tbody tr")
    assert rows.count() == 50
    assert set(page.locator("#disagreements .old-score").all_inner_texts()) == {"1.0"}
    assert set(page.locator("#disagreements .new-score").all_inner_texts()) == {"0.0"}
    first_id = int(rows.first.locator("a").inner_text().lstrip("#"))
    assert RejudgeScore.objects.get(job=job, trajectory_id=first_id).disagrees
    pairs = page.locator("#score-pairs").inner_text()
    assert str(SAMPLES - expected) in pairs and str(expected) in pairs
