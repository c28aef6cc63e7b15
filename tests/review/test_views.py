"""Rollout review pages: what alice sees of her run's samples, and that bob sees none of it."""

import json
import re

import pytest
from django.urls import reverse

from rlweb.judgers.models import JudgerConfig
from rlweb.review.models import RejudgeJob, SampleFlag

from .factories import make_group, make_run, make_sample

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(alice):
    return make_run(alice, name="alices run")


@pytest.fixture
def sample(run):
    return make_sample(
        run, step=3, prompt_index=7, group_id="g-3-7", response="<script>alert(1)</script> The answer is 4.",
        reward_components={"correct": 1.0, "format": 0.5}, explanation="response answer: 4; label: 4 -> match",
        tokens=[["<b>", -0.01, 0], ["The", -0.1, 1], [" answer", -3.0, 1], [" 4", -0.2, 1]],
    )


def test_the_run_pages_link_target_is_the_sample_list(run):
    assert reverse("review:samples", kwargs={"run_id": run.pk}) == f"/review/runs/{run.pk}/samples/"


def test_the_sample_list_shows_rows_filters_and_component_columns(alice_client, run, sample):
    make_sample(run, reward=0.0, status="failed", reward_components={"correct": 0.0, "format": 0.0})
    response = alice_client.get(f"/review/runs/{run.pk}/samples/?status=completed&reward_min=0.5")
    html = response.content.decode()
    assert response.status_code == 200
    assert f'data-id="{sample.pk}"' in html
    assert html.count("<tr data-id=") == 1
    assert ">correct</th>" in html and ">format</th>" in html
    assert "alert(1)" not in html  # the list shows no response text at all


def test_the_sample_list_pages_forward_and_back(alice_client, run):
    for step in range(60):
        make_sample(run, step=step)
    first = alice_client.get(f"/review/runs/{run.pk}/samples/").content.decode()
    assert first.count("<tr data-id=") == 50 and 'rel="next"' in first
    after = first.split('rel="prev"')[0].split("after=")[1].split('"')[0]
    second = alice_client.get(f"/review/runs/{run.pk}/samples/?after={after}").content.decode()
    assert second.count("<tr data-id=") == 10 and 'rel="prev"' in second and 'rel="next"' not in second


def test_the_sample_detail_shows_everything_escaped(alice_client, run, sample):
    html = alice_client.get(f"/review/runs/{run.pk}/samples/{sample.pk}/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    assert "response answer: 4; label: 4 -&gt; match" in html
    assert '<span class="tok masked"' in html and "&lt;b&gt;</span>" in html  # the masked prompt token, escaped
    assert '<span class="tok h0"' in html  # logprob -3.0: p = 0.05, the unlikely end of the scale
    assert '<span class="tok h9"' in html  # logprob -0.1: p = 0.90
    assert f"/review/runs/{run.pk}/groups/g-3-7/?step=3" in html
    assert f"/review/runs/{run.pk}/prompts/7/?split=train" in html


def test_the_group_page_shows_every_sample_with_reward_and_advantage(alice_client, run):
    group = make_group(run, step=2, prompt_index=1, rewards=[1.0, 0.0, 0.0, 1.0])
    make_group(run, step=3, prompt_index=1, rewards=[1.0, 1.0, 1.0, 1.0])
    html = alice_client.get(f"/review/runs/{run.pk}/groups/{group[0].group_id}/?step=2").content.decode()
    assert html.count('class="card group-sample') == 4
    advantages = re.findall(r'<dd class="advantage-value">([^<]*)</dd>', html)
    assert sorted(advantages) == ["-1.0000", "-1.0000", "1.0000", "1.0000"]  # GRPO: (r - 0.5) / 0.5


def test_the_prompt_over_time_page_lists_steps_and_diffs_two_responses(alice_client, run):
    early = make_group(run, step=1, prompt_index=5, rewards=[0.0, 0.0], responses=["I think it is 41", "maybe 40"])
    late = make_group(run, step=9, prompt_index=5, rewards=[1.0, 0.0], responses=["It is 42 <b>", "41"])
    html = alice_client.get(f"/review/runs/{run.pk}/prompts/5/?a={early[0].pk}&b={late[0].pk}").content.decode()
    steps = html.split('id="prompt-steps"')[1].split("</table>")[0]
    assert steps.count("<tr>") == 2 + 1  # header + steps 1 and 9
    diff = html.split('id="response-diff">')[1].split("</pre>")[0]
    # Word by word, and the response's markup is shown as text, never rendered.
    assert diff == "<del>I think it</del><ins>It</ins> is <del>41</del><ins>42 &lt;b&gt;</ins>"


def test_flagging_a_sample_lists_it_on_the_runs_flags_page(alice_client, alice, run, sample):
    response = alice_client.post(f"/review/runs/{run.pk}/samples/{sample.pk}/flag/", {"kind": "judger_wrong", "note": "4 is right but format 0.5?"})
    assert response.status_code == 302
    flag = SampleFlag.objects.get()
    assert (flag.trajectory, flag.run, flag.user, flag.kind) == (sample, run, alice, "judger_wrong")
    html = alice_client.get(f"/review/runs/{run.pk}/flags/").content.decode()
    assert "4 is right but format 0.5?" in html and f"#{sample.pk}" in html


def test_export_streams_jsonl_with_flags(alice_client, alice, run, sample):
    from rlweb.review.services import add_flag

    other = make_sample(run, step=4)
    add_flag(sample, alice, "good_example", "clean")
    response = alice_client.get(f"/review/runs/{run.pk}/export.jsonl")
    assert response.streaming and response["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert [line["id"] for line in lines] == [sample.pk, other.pk]
    assert lines[0]["flags"][0]["kind"] == "good_example" and lines[0]["flags"][0]["note"] == "clean"
    assert lines[0]["response"].startswith("<script>") and "tokens" not in lines[0]
    flagged = alice_client.get(f"/review/runs/{run.pk}/export.jsonl?flagged=any")
    assert [json.loads(line)["id"] for line in b"".join(flagged.streaming_content).decode().splitlines()] == [sample.pk]


def test_export_reads_in_chunks_not_all_at_once(run, sample):
    from django.http import QueryDict

    from rlweb.review.services import export_lines

    for step in range(5):
        make_sample(run, step=10 + step)
    chunks = list(export_lines(run, QueryDict(""), chunk=2))
    assert [chunk.count(b"\n") for chunk in chunks] == [2, 2, 2]


def test_bob_cannot_see_flag_export_or_rejudge_alices_samples(client, bob, run, sample):
    client.force_login(bob)
    judger = JudgerConfig.objects.create(owner=bob, name="bobs", kind="numeric", params={})
    flag = SampleFlag.objects.create(run=run, trajectory=sample, user=run.owner, kind="good_example")
    job = RejudgeJob.objects.create(run=run, created_by=run.owner, judger_name="x", spec={"kind": "numeric"})
    for url in (
        f"/review/runs/{run.pk}/samples/",
        f"/review/runs/{run.pk}/samples/{sample.pk}/",
        f"/review/runs/{run.pk}/samples/{sample.pk}/response.txt",
        f"/review/runs/{run.pk}/groups/{sample.group_id}/",
        f"/review/runs/{run.pk}/prompts/{sample.prompt_index}/",
        f"/review/runs/{run.pk}/flags/",
        f"/review/runs/{run.pk}/export.jsonl",
        f"/review/runs/{run.pk}/rejudge/",
        f"/review/rejudge/{job.pk}/",
        f"/review/rejudge/{job.pk}/progress/",
    ):
        assert client.get(url).status_code == 404, url
    assert client.post(f"/review/runs/{run.pk}/samples/{sample.pk}/flag/", {"kind": "judger_wrong"}).status_code == 404
    assert client.post(f"/review/runs/{run.pk}/flags/{flag.pk}/delete/").status_code == 404
    assert client.post(f"/review/runs/{run.pk}/rejudge/", {"judger": judger.pk}).status_code == 404
    assert client.post(f"/review/rejudge/{job.pk}/cancel/").status_code == 404
    assert SampleFlag.objects.count() == 1 and RejudgeJob.objects.count() == 1
    assert not RejudgeJob.objects.get().cancel_requested


def test_a_sample_of_another_run_is_not_found_under_this_run(alice_client, alice, run):
    other = make_run(alice, name="other")
    foreign = make_sample(other)
    assert alice_client.get(f"/review/runs/{run.pk}/samples/{foreign.pk}/").status_code == 404


def test_alice_cannot_rejudge_with_bobs_judger(alice_client, bob, run, sample):
    judger = JudgerConfig.objects.create(owner=bob, name="bobs judger", kind="numeric", params={})
    assert alice_client.post(f"/review/runs/{run.pk}/rejudge/", {"judger": judger.pk}).status_code == 404
    assert not RejudgeJob.objects.exists()
    assert "bobs judger" not in alice_client.get(f"/review/runs/{run.pk}/rejudge/").content.decode()


def test_staff_may_review_anyones_run(client, staff, run, sample):
    client.force_login(staff)
    assert client.get(f"/review/runs/{run.pk}/samples/{sample.pk}/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_under_asgi_the_export_is_sent_chunk_by_chunk(alice, monkeypatch):
    """Django would read a plain iterator to the end before sending it under ASGI; the export
    hands daphne an asynchronous one, so each chunk of samples goes out as it is read."""
    import asyncio
    import threading

    from asgiref.sync import sync_to_async
    from django.db import connections
    from django.test import AsyncClient

    from rlweb.review import services

    monkeypatch.setattr(services, "EXPORT_CHUNK", 2)
    run = make_run(alice)
    for step in range(5):
        make_sample(run, step=step)
    got = {}

    async def download():
        client = AsyncClient()
        await sync_to_async(client.force_login)(alice)
        response = await client.get(f"/review/runs/{run.pk}/export.jsonl")
        got["is_async"] = response.is_async
        got["chunks"] = [chunk async for chunk in response.streaming_content]
        # The test client keeps Django from closing the request thread's connection: close it
        # here, so that the test database can be dropped at the end of the session.
        await sync_to_async(connections.close_all)()

    # An event loop of its own, on a thread of its own (a browser test may run one in this one).
    downloader = threading.Thread(target=lambda: asyncio.run(download()))
    downloader.start()
    downloader.join(60)
    assert got["is_async"]
    assert [chunk.count(b"\n") for chunk in got["chunks"]] == [2, 2, 1]
