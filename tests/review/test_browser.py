"""Rollout review in a real browser against daphne: filter, open a sample, its group and token
strip, search, flag, and live samples with the pause toggle. Runs and samples are written
straight to the database."""

import asyncio
import threading
import time

import pytest
from channels.layers import get_channel_layer

from rlweb.runs.live import group_name
from tests.support.browser import log_in

from .factories import make_group, make_run, make_sample

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TOKENS = [["Q: 2+2?", 0.0, 0], ["The", -0.05, 1], [" answer", -2.3, 1], [" is", -0.01, 1], [" 4", -0.4, 1]]


@pytest.fixture
def run(alice):
    run = make_run(alice, name="review-e2e")
    make_group(run, step=1, prompt_index=3, rewards=[0.0, 0.0, 1.0, 0.0], tokens=TOKENS)
    make_group(run, step=2, prompt_index=3, rewards=[1.0, 1.0, 0.0, 1.0], tokens=TOKENS)
    make_group(run, step=2, prompt_index=4, rewards=[0.0, 0.0, 0.0, 0.0])
    make_sample(run, step=2, prompt_index=5, group_id="g-2-5", reward=1.0, status="failed", response="I am sorry, I cannot.")
    return run


def table_rows(page):
    return page.locator("#samples tbody tr")


def column(page, css):
    return [text.strip() for text in page.locator(f"#samples tbody tr td{css}").all_inner_texts()]


def test_filter_by_reward_and_status_then_open_a_sample_its_group_and_token_strip(live_stack, page, alice, run):
    log_in(page, live_stack.url, "alice", "alice-password-1")
    page.goto(f"{live_stack.url}/review/runs/{run.pk}/samples/")
    assert table_rows(page).count() == 13

    page.fill("input[name=reward_min]", "0.5")
    page.check("input[name=status][value=completed]")
    page.click("text=Apply filters")
    page.wait_for_url("**reward_min=0.5**")
    rewards = column(page, ".reward")
    assert rewards == ["1.000"] * 4  # three at step 2, one at step 1; the failed sample is out
    assert set(page.locator("#samples tbody .badge[class*=status-]").all_inner_texts()) == {"completed"}

    page.locator("#samples tbody tr").first.locator("a.sample-link").click()
    page.wait_for_selector("#token-strip")
    strip = page.locator("#token-strip .tok")
    assert strip.count() == 5
    assert page.locator("#token-strip .tok.masked").count() == 1  # the prompt token
    assert "p = 0.100" in page.locator("#token-strip .tok").nth(2).get_attribute("title")  # logprob -2.3

    page.click("#group-link")
    page.wait_for_selector("#group-samples")
    assert page.locator("#group-samples .group-sample").count() == 4
    assert sorted(page.locator("#group-samples .reward-value").all_inner_texts()) == ["0.0", "1.0", "1.0", "1.0"]
    assert page.locator(".group-sample.highlight").count() == 1  # the sample we came from


def test_search_a_word(live_stack, page, alice, run):
    log_in(page, live_stack.url, "alice", "alice-password-1")
    page.goto(f"{live_stack.url}/review/runs/{run.pk}/samples/")
    page.fill("input[name=q]", "sorry")
    page.press("input[name=q]", "Enter")
    page.wait_for_url("**q=sorry**")
    assert table_rows(page).count() == 1
    assert column(page, ":nth-child(3)") == ["failed"]
    # The list shows no text; ▸ fetches the response into a row below.
    page.click("#samples tbody button.expand")
    page.wait_for_selector("#samples tr.response-row pre:has-text('I am sorry, I cannot.')")


def test_flag_a_sample_and_find_it_in_the_flags_list(live_stack, page, alice, run):
    sample = make_sample(run, step=3, response="#### 4 #### 4 #### 4", reward=1.0)
    log_in(page, live_stack.url, "alice", "alice-password-1")
    page.goto(f"{live_stack.url}/review/runs/{run.pk}/samples/{sample.pk}/")
    page.select_option("#flag-form select[name=kind]", "reward_hacking")
    page.fill("#flag-form textarea[name=note]", "repeats the answer three times")
    page.click("#flag-form button[type=submit]")
    page.wait_for_selector(".msg.success")
    assert "reward hacking" in page.locator("#flags").inner_text()

    page.click("nav.review-nav >> text=Flags")
    page.wait_for_selector("#flag-table")
    row = page.locator("#flag-table tbody tr")
    assert row.count() == 1
    assert "repeats the answer three times" in row.inner_text() and f"#{sample.pk}" in row.inner_text()


def notify(run):
    """What the worker does after writing samples. Playwright's event loop runs in this thread,
    so the message goes out from a thread of its own."""
    message = {"type": "run.updated", "step": 9}
    sender = threading.Thread(target=lambda: asyncio.run(get_channel_layer().group_send(group_name(run.pk), message)))
    sender.start()
    sender.join(10)


def test_new_samples_appear_at_the_top_and_pause_holds_them_back(live_stack, page, alice, run):
    log_in(page, live_stack.url, "alice", "alice-password-1")
    page.goto(f"{live_stack.url}/review/runs/{run.pk}/samples/")
    page.wait_for_selector("#live-state[data-state=live]")

    first = make_sample(run, step=9, reward=0.25)
    notify(run)
    page.wait_for_selector(f'#samples tbody tr[data-id="{first.pk}"]')
    assert table_rows(page).first.get_attribute("data-id") == str(first.pk)
    assert table_rows(page).first.locator(".reward").inner_text() == "0.250"

    page.click("#live-toggle")
    assert page.locator("#live-toggle").get_attribute("aria-pressed") == "true"
    held = make_sample(run, step=9, reward=0.75)
    notify(run)
    page.wait_for_function("document.getElementById('live-pending').textContent.includes('1 new sample held')")
    time.sleep(0.5)
    assert page.locator(f'#samples tbody tr[data-id="{held.pk}"]').count() == 0

    page.click("#live-toggle")
    page.wait_for_selector(f'#samples tbody tr[data-id="{held.pk}"]')
    assert table_rows(page).first.get_attribute("data-id") == str(held.pk)
    assert table_rows(page).count() == 15
