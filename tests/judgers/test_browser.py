"""Chromium: build a judger from its form (errors inline), then try it on a pasted response."""

import pytest

from rlweb.judgers.models import JudgerConfig
from tests.support.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_judger_is_built_in_the_page_and_tried_without_leaving_it(live_stack, page, alice):
    log_in(page, live_stack.url, "alice", "alice-password-1")
    page.goto(f"{live_stack.url}/judgers/new/")
    page.click("a[data-kind=regex]")
    page.fill("input[name=name]", "answer-line")
    page.fill("input[name=pattern]", "answer: (\\d+")  # unbalanced: the spec refuses it
    page.click("form.judger-form button[type=submit]")
    assert "invalid regular expression" in page.inner_text(".field-pattern .errorlist")
    page.fill("input[name=pattern]", "answer: (\\d+)")
    page.fill("input[name=group]", "1")
    page.click("form.judger-form button[type=submit]")
    page.wait_for_selector("#try")
    judger = JudgerConfig.objects.get(name="answer-line")
    assert judger.params["pattern"] == "answer: (\\d+)" and judger.params["group"] == 1

    page.fill("#try textarea[name=response]", "thinking... answer: 42")
    page.fill("#try input[name=label]", "42")
    page.click("#try button[type=submit]")
    page.wait_for_selector("#try-result [data-score]")
    assert page.inner_text("#try-result [data-score]") == "1.0"
    assert "42" in page.inner_text("#try-result [data-explanation]")
    assert page.url.endswith(f"/judgers/{judger.pk}/")  # htmx swapped the result in place
