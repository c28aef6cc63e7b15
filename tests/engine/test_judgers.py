"""Rule judgers, routers and the judging contract, on realistic model responses.

Every expected score is worked out by hand in the table (the comment says why)."""

import asyncio
import json
import subprocess
import sys
import threading
import time

import pytest

from workers.rl.judgers import extract, rules
from workers.rl.judgers.base import Judger, Verdict
from workers.rl.judgers.build import build_judger, build_judger_from_dict, judge_one
from workers.rl.judgers.deadline import DeadlineExceeded, call_with_deadline, run_isolated, run_with_deadline
from workers.rl.judgers.spec import (
    ExactMatchSpec,
    FormatSpec,
    LengthPenaltySpec,
    MathVerifySpec,
    NumericMatchSpec,
    RegexMatchSpec,
    parse_judger_spec,
)
from workers.rl.sample import Sample, SampleStatus

GSM8K_SOLUTION = (
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
    "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n"
    "#### 72"
)


def make_sample(response, label=None, data_source="", response_ids=None, uid="s0"):
    return Sample(
        uid=uid,
        group_id="g0",
        prompt="Natalia sold clips to 48 of her friends in April...",
        prompt_ids=[1, 2, 3],
        label=label,
        data_source=data_source,
        response=response,
        response_ids=list(response_ids or []),
    )


def judge(judger, sample):
    return asyncio.run(judger.judge(sample))


# --- answer extraction -----------------------------------------------------------------------

EXTRACTION = [
    # text, mode, expected value (None: no answer), expected source
    ("Natalia sold 48+24 = 72 clips.\n#### 72", "auto", 72, extract.FROM_GSM8K),
    ("#### $1,234 dollars", "auto", 1234, extract.FROM_GSM8K),
    ("#### The answer is 18\n\nextra 5", "auto", 18, extract.FROM_GSM8K),  # first number after ####
    ("So the answer is \\boxed{\\frac{3}{4}}.", "auto", 0.75, extract.FROM_BOXED),
    ("\\boxed{-\\dfrac{1}{2}}", "auto", -0.5, extract.FROM_BOXED),
    ("\\boxed{x = 5} and then 9", "auto", 5, extract.FROM_BOXED),  # a number inside the box
    ("\\boxed{72 \\text{ apples}}", "auto", 72, extract.FROM_BOXED),
    ("The total is 1,234,567 people", "auto", 1234567, extract.FROM_LAST_NUMBER),
    ("It dropped to -3.", "auto", -3, extract.FROM_LAST_NUMBER),  # full stop is not a decimal point
    ("It dropped to −3 degrees", "auto", -3, extract.FROM_LAST_NUMBER),  # unicode minus
    ("10-3=7", "auto", 7, extract.FROM_LAST_NUMBER),  # a minus between numbers is not a sign
    ("It costs $3.50 each", "auto", 3.5, extract.FROM_LAST_NUMBER),
    ("It costs -$5", "auto", -5, extract.FROM_LAST_NUMBER),
    ("The probability is 3/4", "auto", 0.75, extract.FROM_LAST_NUMBER),
    ("The numbers are 3,4,5", "auto", 5, extract.FROM_LAST_NUMBER),  # not a thousands separator
    ("H2O boils at 100", "auto", 100, extract.FROM_LAST_NUMBER),  # the 2 of H2O is no number
    ("It is 5/0", "auto", None, None),  # division by zero is not a number
    ("", "auto", None, None),
    ("no digits at all", "auto", None, None),
    ("\\boxed{72", "boxed", None, None),  # truncated box
    ("The answer is 72", "gsm8k", None, None),
    ("#### 72", "boxed", None, None),
    ("  72. ", "whole", 72, extract.FROM_WHOLE),
    ("The answer is 72", "whole", None, None),
]


@pytest.mark.parametrize("text,mode,value,source", EXTRACTION)
def test_it_extracts_the_final_answer(text, mode, value, source):
    answer = extract.extract_answer(text, mode)
    if value is None:
        assert answer is None
    else:
        assert answer.value == pytest.approx(value)
        assert answer.source == source


@pytest.mark.parametrize(
    "label,value",
    [("72", 72), ("$1,234", 1234), ("\\frac{3}{4}", 0.75), ("3/4", 0.75), ("-3", -3), ("50%", 50), (GSM8K_SOLUTION, 72)],
)
def test_it_reads_the_label_as_a_number_or_a_gsm8k_solution(label, value):
    assert extract.extract_label(label).value == pytest.approx(value)


# --- numeric --------------------------------------------------------------------------------

NUMERIC_TABLE = [
    # response, label, expected score
    (GSM8K_SOLUTION, "72", 1.0),  # right, GSM8K format
    ("Natalia sold 48+24 = 70 clips.\n#### 70", "72", 0.0),  # wrong
    ("She sold 72 clips in total.", "72", 1.0),  # unformatted: last number
    ("She sold 72 clips over 2 months.", "72", 0.0),  # unformatted, last number is 2: a miss, as specified
    ("Thus the answer is \\boxed{72}.", "72", 1.0),  # boxed
    ("\\boxed{72}\n\nCheck: 48 + 24 = 72, plus 3 more for fun", "72", 1.0),  # extra text after the box
    ("#### 72\nI hope this helps! Ask me 2 more questions.", "72", 1.0),  # extra text after ####
    ("I first thought 72, but #### 71", "72", 0.0),  # the final answer counts, not an earlier one
    ("\\boxed{\\frac{3}{4}}", "0.75", 1.0),  # LaTeX fraction
    ("The probability is 3/4.", "\\frac{3}{4}", 1.0),  # plain fraction vs LaTeX label
    ("The temperature is -3 degrees.", "-3", 1.0),  # negative
    ("The temperature is 3 degrees.", "-3", 0.0),  # sign matters
    ("The total is $1,234.", "1234", 1.0),  # thousands separator and currency
    ("It costs $3.50.", "3.5", 1.0),  # decimal with trailing zero
    ("The answer is 72.", "72", 1.0),  # full stop after the answer
    ("0.3333333", "1/3", 1.0),  # |0.3333333 - 1/3| = 3.3e-8 <= 1e-6
    ("0.33", "1/3", 0.0),  # differs by 0.0033
    ("", "72", 0.0),  # empty response
    ("I am not sure how to solve this.", "72", 0.0),  # no number at all
    ("72", GSM8K_SOLUTION, 1.0),  # the label is a whole GSM8K solution
    ("She has 24 + 48 = 72 clips", GSM8K_SOLUTION, 1.0),
]


@pytest.mark.parametrize("response,label,score", NUMERIC_TABLE)
def test_numeric_judger_scores_realistic_responses(response, label, score):
    sample = judge(build_judger(NumericMatchSpec()), make_sample(response, label))
    assert sample.reward == {"score": score}
    assert sample.status != SampleStatus.FAILED
    assert sample.explanation


def test_numeric_explanation_says_what_was_extracted_and_why():
    judger = build_judger(NumericMatchSpec())
    right = judge(judger, make_sample("#### 72", "72"))
    assert right.explanation == "response answer: 72 (from '####'); label: 72 (from whole text) → match"
    wrong = judge(judger, make_sample("\\boxed{\\frac{3}{4}}", GSM8K_SOLUTION))
    assert wrong.explanation == (
        "response answer: 0.75 (wrote '\\frac{3}{4}', from \\boxed{}); label: 72 (from '####') → no match (differs by 71.25)"
    )
    empty = judge(judger, make_sample("", "72"))
    assert empty.explanation.startswith("response answer: none found (looked for '####', \\boxed{} or any number)")


@pytest.mark.parametrize(
    "extract_mode,response,score",
    [
        ("gsm8k", "The answer is 72", 0.0),  # no '####': no answer in this mode
        ("gsm8k", "#### 72", 1.0),
        ("boxed", "#### 72", 0.0),
        ("boxed", "so \\boxed{72}", 1.0),
        ("last_number", "\\boxed{72} and 5", 0.0),  # last number is 5
        ("whole", "72", 1.0),
        ("whole", "The answer is 72", 0.0),
    ],
)
def test_numeric_extract_mode_limits_where_the_answer_may_be(extract_mode, response, score):
    sample = judge(build_judger(NumericMatchSpec(extract=extract_mode)), make_sample(response, "72"))
    assert sample.score == score


def test_numeric_tolerance_is_absolute():
    judger = build_judger(NumericMatchSpec(tolerance=0.5))
    assert judge(judger, make_sample("72.4", "72")).score == 1.0
    assert judge(judger, make_sample("72.6", "72")).score == 0.0


def test_numeric_fails_the_sample_without_a_label_or_with_a_label_without_number():
    judger = build_judger(NumericMatchSpec())
    no_label = judge(judger, make_sample("#### 72", None))
    assert no_label.status == SampleStatus.FAILED
    assert no_label.reward == {"score": 0.0}
    assert no_label.error == "numeric judger needs a label, and this sample has none"
    bad_label = judge(judger, make_sample("#### 72", "seventy-two"))
    assert bad_label.status == SampleStatus.FAILED
    assert bad_label.error == "numeric judger: the label has no number: 'seventy-two'"


# --- math-verify ----------------------------------------------------------------------------

MATH_TABLE = [
    ("The answer is \\boxed{\\frac{1}{2}}", "0.5", 1.0),
    ("So $x = \\boxed{(x+1)^2}$", "x^2+2x+1", 1.0),  # symbolic equivalence
    ("Therefore the answer is \\boxed{3}.", "4", 0.0),
    ("The answer is 72", GSM8K_SOLUTION, 1.0),  # GSM8K label: the text after ####
    ("I give up.", "4", 0.0),  # nothing to parse in the response
    ("The set is \\boxed{\\{1, 2\\}}", "\\{2, 1\\}", 1.0),  # a bare LaTeX label
]

# Equal, but proving it takes sympy several seconds on this machine: a reliable timeout.
SLOW_RESPONSE = "\\boxed{(x+y+z+1)^{20}(x-y)^{20}}"
SLOW_LABEL = "(x^2-y^2 + xz - yz + x - y)^{20}"


def test_math_verify_judges_equivalence_inside_an_event_loop():
    judger = build_judger(MathVerifySpec())

    async def all_of_them():
        return await judger.judge_many([make_sample(r, l, uid=str(i)) for i, (r, l, _) in enumerate(MATH_TABLE)])

    judged = asyncio.run(all_of_them())
    assert [s.score for s in judged] == [score for _, _, score in MATH_TABLE]
    assert judged[0].explanation == "response answer: '\\frac{1}{2}' (parsed as 1/2); label: '0.5' (parsed as 1/2) → equivalent"


def test_math_verify_works_from_a_worker_thread():
    # Signals do not reach other threads: this goes through a worker process.
    results = {}

    def in_thread():
        results["right"] = judge_one(MathVerifySpec(), "\\boxed{\\frac{1}{2}}", "0.5")
        results["wrong"] = judge_one(MathVerifySpec(), "\\boxed{3}", "4")

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join(120)
    assert results["right"].score == 1.0, results["right"]
    assert results["wrong"].score == 0.0
    assert results["wrong"].status == "completed"


def test_math_verify_timeout_fails_the_sample_in_the_main_thread():
    started = time.monotonic()
    outcome = judge_one(MathVerifySpec(timeout_s=0.5), SLOW_RESPONSE, SLOW_LABEL)
    assert time.monotonic() - started < 3
    assert outcome.status == SampleStatus.FAILED
    assert outcome.error == "math_verify judger: timed out after 0.5 s comparing the response with the label"


def test_math_verify_timeout_fails_the_sample_from_a_worker_thread_and_the_next_one_works():
    results = {}

    def in_thread():
        results["slow"] = judge_one(MathVerifySpec(timeout_s=0.5), SLOW_RESPONSE, SLOW_LABEL)
        results["next"] = judge_one(MathVerifySpec(timeout_s=0.5), "\\boxed{2}", "2")

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join(120)
    assert results["slow"].status == SampleStatus.FAILED
    assert "timed out after 0.5 s" in results["slow"].error
    assert results["next"].score == 1.0


def test_math_verify_fails_the_sample_when_the_label_cannot_be_parsed():
    outcome = judge_one(MathVerifySpec(), "\\boxed{2}", "  ")
    assert outcome.status == SampleStatus.FAILED
    assert outcome.error == "math_verify judger: could not parse the label ''"


# --- deadlines ------------------------------------------------------------------------------


def _spin():
    while True:
        pass


def test_call_with_deadline_interrupts_python_code_in_the_main_thread():
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        call_with_deadline(_spin, 0.1)
    assert time.monotonic() - started < 2


def test_run_with_deadline_in_a_worker_process_interrupts_it():
    with pytest.raises(DeadlineExceeded):
        asyncio.run(run_with_deadline(time.sleep, (30,), 0.2, isolate=True))


def test_a_worker_process_that_stops_answering_is_replaced():
    async def scenario():
        with pytest.raises(DeadlineExceeded):
            # No deadline inside the child; the parent's backstop must end the wait.
            await run_isolated(time.sleep, (30,), None, backstop_s=1.0)
        return await run_isolated(abs, (-3,), 5.0)

    started = time.monotonic()
    assert asyncio.run(scenario()) == 3
    assert time.monotonic() - started < 25


# --- exact, regex, format, length -------------------------------------------------------------


@pytest.mark.parametrize(
    "spec,response,label,score",
    [
        (ExactMatchSpec(), " Paris\n", "Paris", 1.0),  # stripped by default
        (ExactMatchSpec(), "paris", "Paris", 0.0),  # case-sensitive by default
        (ExactMatchSpec(case_sensitive=False), "PARIS", "paris", 1.0),
        (ExactMatchSpec(strip=False), " Paris", "Paris", 0.0),
        (ExactMatchSpec(), "The capital is Paris", "Paris", 0.0),
    ],
)
def test_exact_judger(spec, response, label, score):
    assert judge(build_judger(spec), make_sample(response, label)).score == score


def test_exact_explanation_quotes_both_sides():
    sample = judge(build_judger(ExactMatchSpec(case_sensitive=False)), make_sample("Lyon", "Paris"))
    assert sample.explanation == "response 'Lyon' vs label 'Paris' (stripped, ignoring case) → no match"


@pytest.mark.parametrize(
    "spec,response,label,score",
    [
        (RegexMatchSpec(pattern=r"answer: (\d+)", group=1), "The answer: 72", "72", 1.0),
        (RegexMatchSpec(pattern=r"answer: (\d+)", group=1), "The answer: 71", "72", 0.0),
        (RegexMatchSpec(pattern=r"answer: (\d+)", group=1), "I think 72", "72", 0.0),  # not found
        (RegexMatchSpec(pattern=r"answer: (?P<n>\d+)", group="n"), "answer: 72", "72", 1.0),
        (RegexMatchSpec(pattern=r"ANSWER", ignore_case=True), "the answer", None, 1.0),  # no group: found = 1
        (RegexMatchSpec(pattern=r"ANSWER"), "the answer", None, 0.0),
    ],
)
def test_regex_judger(spec, response, label, score):
    sample = judge(build_judger(spec), make_sample(response, label))
    assert sample.status != SampleStatus.FAILED, sample.error
    assert sample.score == score


def test_a_catastrophic_regex_times_out_and_fails_only_that_sample(monkeypatch):
    monkeypatch.setattr(rules, "REGEX_TIMEOUT_S", 0.1)
    judger = build_judger(RegexMatchSpec(pattern=r"(a|aa)+$"))
    slow = judge(judger, make_sample("a" * 40 + "b"))
    assert slow.status == SampleStatus.FAILED
    assert slow.error.startswith("regex judger: the regular expression took longer than 0.1 s on this response")
    assert judge(judger, make_sample("aaaa")).score == 1.0


def test_a_regex_group_the_pattern_lacks_is_refused_at_build_and_in_judge_one():
    spec = RegexMatchSpec(pattern=r"answer: (\d+)", group=2)
    with pytest.raises(ValueError, match="has no group 2"):
        build_judger(spec)
    outcome = judge_one(spec, "answer: 72", "72")
    assert outcome.status == SampleStatus.FAILED
    assert outcome.error == "could not build the judger: regex judger: the pattern has no group 2"


@pytest.mark.parametrize(
    "spec,response,score",
    [
        (FormatSpec(), "Adding gives 72, so \\boxed{72}.", 1.0),  # default: a \boxed{} somewhere
        (FormatSpec(), "The answer is 72.", 0.0),
        (FormatSpec(reward=0.5), "\\boxed{72}", 0.5),
        (FormatSpec(pattern=r"<think>.*</think>\s*\d+"), "<think>48+24</think> 72", 1.0),
        (FormatSpec(pattern=r"<think>.*</think>\s*\d+"), "<think>48+24</think> 72 apples", 0.0),  # whole response
    ],
)
def test_format_judger_rewards_a_whole_response_match(spec, response, score):
    assert judge(build_judger(spec), make_sample(response)).score == score


@pytest.mark.parametrize(
    "length,score",
    [(0, 0.0), (6, 0.0), (7, -0.25), (8, -0.5), (9, -0.75), (10, -1.0), (15, -1.0)],  # max 10, buffer 4: ramp 6 → 10
)
def test_length_penalty_ramps_down_over_the_buffer(length, score):
    sample = judge(build_judger(LengthPenaltySpec(max_len=10, buffer=4)), make_sample("x" * length))
    assert sample.score == pytest.approx(score)


def test_length_penalty_counts_tokens_when_the_sample_has_them():
    judger = build_judger(LengthPenaltySpec(max_len=10, buffer=4))
    sample = judge(judger, make_sample("short", response_ids=range(9)))  # 9 tokens, 5 characters
    assert sample.score == pytest.approx(-0.75)
    assert sample.explanation == "response length 9 tokens, in the last 4 before max_len 10 → penalty -0.75"


def test_length_penalty_without_buffer_is_a_cliff_after_max_len():
    judger = build_judger(LengthPenaltySpec(max_len=10))
    assert judge(judger, make_sample("x" * 10)).score == 0.0
    assert judge(judger, make_sample("x" * 11)).score == -1.0


# --- routers --------------------------------------------------------------------------------

ROUTER = {
    "mode": "by_data_source",
    "routes": {"gsm8k": {"kind": "numeric"}, "capitals": {"kind": "exact", "case_sensitive": False}},
}


def test_router_picks_the_judger_by_data_source():
    judger = build_judger_from_dict("router", ROUTER)
    math = judge(judger, make_sample("#### 72", "72", data_source="gsm8k"))
    assert math.score == 1.0
    assert math.explanation.startswith("data_source 'gsm8k' → numeric: response answer: 72")
    capital = judge(judger, make_sample("PARIS", "paris", data_source="capitals"))
    assert capital.score == 1.0
    # The same response under the other route is judged by the other rule.
    assert judge(judger, make_sample("#### 72", "72", data_source="capitals")).score == 0.0


def test_router_fails_a_sample_whose_data_source_has_no_judger():
    judger = build_judger_from_dict("router", ROUTER)
    sample = judge(judger, make_sample("#### 72", "72", data_source="mmlu"))
    assert sample.status == SampleStatus.FAILED
    assert sample.error == "no judger for data_source 'mmlu' (routes: 'capitals', 'gsm8k'; no default)"


def test_router_default_judges_unlisted_data_sources():
    judger = build_judger_from_dict("router", {**ROUTER, "default": {"kind": "regex", "pattern": "72"}})
    sample = judge(judger, make_sample("it is 72", None, data_source="mmlu"))
    assert sample.score == 1.0
    assert sample.explanation.startswith("data_source 'mmlu' (default) → regex: ")


def test_router_passes_on_a_route_failure_with_its_message():
    judger = build_judger_from_dict("router", ROUTER)
    sample = judge(judger, make_sample("#### 72", None, data_source="gsm8k"))
    assert sample.error == "data_source 'gsm8k' → numeric: numeric judger needs a label, and this sample has none"


WEIGHTED = {
    "mode": "weighted_sum",
    "components": [
        {"name": "acc", "weight": 1.0, "judger": {"kind": "numeric"}},
        {"name": "fmt", "weight": 0.2, "judger": {"kind": "format"}},
        {"name": "len", "weight": 0.5, "judger": {"kind": "length_penalty", "max_len": 30, "buffer": 12}},
    ],
}


def test_weighted_sum_adds_weighted_components():
    response = "The answer is \\boxed{72}"  # 24 characters: penalty (18 - 24) / 12 = -0.5
    sample = judge(build_judger_from_dict("router", WEIGHTED), make_sample(response, "72"))
    # 1.0 * 1 + 0.2 * 1 + 0.5 * -0.5 = 0.95
    assert sample.reward == pytest.approx({"score": 0.95, "acc": 1.0, "fmt": 1.0, "len": -0.5})
    assert sample.explanation.splitlines()[0] == "score = 1×acc(1) + 0.2×fmt(1) + 0.5×len(-0.5) = 0.95"
    wrong = judge(build_judger_from_dict("router", WEIGHTED), make_sample("72", "71"))  # 2 chars: no penalty, no box
    assert wrong.reward == {"score": 0.0, "acc": 0.0, "fmt": 0.0, "len": 0.0}


def test_weighted_sum_fails_the_sample_when_a_component_fails():
    sample = judge(build_judger_from_dict("router", WEIGHTED), make_sample("\\boxed{72}", None))
    assert sample.status == SampleStatus.FAILED
    assert sample.reward == {"score": 0.0}
    assert sample.error == "component 'acc' (numeric): numeric judger needs a label, and this sample has none"


def test_nested_components_keep_their_names():
    spec = {"mode": "by_data_source", "routes": {"gsm8k": {"kind": "router", **WEIGHTED}}}
    sample = judge(build_judger_from_dict("router", spec), make_sample("#### 72", "72", data_source="gsm8k"))
    assert sample.reward == pytest.approx({"score": 1.0, "acc": 1.0, "fmt": 0.0, "len": 0.0})
    outer = {"mode": "weighted_sum", "components": [{"name": "inner", "weight": 2, "judger": {"kind": "router", **WEIGHTED}}]}
    sample = judge(build_judger_from_dict("router", outer), make_sample("#### 72", "72"))
    assert sample.reward == pytest.approx({"score": 2.0, "inner": 1.0, "inner.acc": 1.0, "inner.fmt": 0.0, "inner.len": 0.0})


# --- the judging contract -------------------------------------------------------------------


class Exploding(Judger):
    kind = "exploding"

    async def verdict(self, sample):
        raise RuntimeError("division by zero in a reward rule")


def test_an_exception_in_a_rule_fails_the_sample_and_does_not_raise():
    sample = judge(Exploding(spec=None), make_sample("72", "72"))
    assert sample.status == SampleStatus.FAILED
    assert sample.reward == {"score": 0.0}
    assert sample.error == "exploding judger raised RuntimeError: division by zero in a reward rule"


class CountsConcurrency(Judger):
    kind = "counting"

    def __init__(self):
        super().__init__(spec=None)
        self.now = self.peak = 0

    async def verdict(self, sample):
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(0.01)
        self.now -= 1
        return Verdict(float(sample.uid), "echo")


def test_judge_many_keeps_order_and_bounds_concurrency():
    judger = CountsConcurrency()
    samples = [make_sample("", uid=str(i)) for i in range(50)]
    judged = asyncio.run(judger.judge_many(samples, max_concurrency=8))
    assert [s.score for s in judged] == [float(i) for i in range(50)]
    assert judged[3] is samples[3]
    assert judger.peak == 8


def test_judge_one_returns_score_components_and_explanation():
    outcome = judge_one(parse_judger_spec("router", WEIGHTED), "The answer is \\boxed{72}", "72")
    assert outcome.score == pytest.approx(0.95)
    assert outcome.components == pytest.approx({"acc": 1.0, "fmt": 1.0, "len": -0.5})
    assert outcome.status == "completed" and outcome.error is None
    assert "acc: response answer: 72 (from \\boxed{})" in outcome.explanation


def test_judge_one_works_when_an_event_loop_is_already_running():
    async def from_async_code():
        return judge_one(NumericMatchSpec(), "#### 72", "72")

    assert asyncio.run(from_async_code()).score == 1.0


def test_judge_one_ignores_ray_actors():
    outcome = judge_one(NumericMatchSpec(ray_actors=4), "#### 72", "72")
    assert outcome.score == 1.0
    assert "ray" not in sys.modules or not __import__("ray").is_initialized()


def test_importing_the_judgers_imports_neither_torch_nor_ray():
    code = (
        "import sys, json\n"
        "import workers.rl.judgers.build, workers.rl.judgers.pool, workers.rl.judgers.http\n"
        "from workers.rl.judgers.build import judge_one\n"
        "from workers.rl.judgers.spec import NumericMatchSpec\n"
        "judge_one(NumericMatchSpec(), '#### 72', '72')\n"
        "print(json.dumps(sorted(m for m in ('torch', 'ray') if m in sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def _judge_from_a_thread_of_a_daemon_process(results):
    """Runs in a daemonic process (as in some worker pools): it may not start worker processes."""
    outcomes = {}

    def in_thread():
        outcomes["right"] = judge_one(MathVerifySpec(), "\\boxed{\\frac{1}{2}}", "0.5")
        outcomes["slow"] = judge_one(MathVerifySpec(timeout_s=0.5), SLOW_RESPONSE, SLOW_LABEL)

    thread = threading.Thread(target=in_thread)
    started = time.monotonic()
    thread.start()
    thread.join()
    results.put([(o.score, o.status.value, o.error) for o in (outcomes["right"], outcomes["slow"])] + [time.monotonic() - started])


def test_math_verify_from_a_thread_where_no_worker_process_can_start():
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=_judge_from_a_thread_of_a_daemon_process, args=(results,), daemon=True)
    process.start()
    right, slow, seconds = results.get(timeout=120)
    process.join(30)
    assert right == (1.0, "completed", None)
    assert slow == (0.0, "failed", "math_verify judger: timed out after 0.5 s comparing the response with the label")
    assert seconds < 4  # the slow comparison (several seconds) was not waited for
