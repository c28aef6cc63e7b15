"""Builtin rule judgers: numeric answer, math-verify equivalence, exact, regex, format, length.

Each returns a Verdict whose explanation says what was extracted and why it matched or not.
User-supplied regular expressions run under a per-match timeout (the `regex` package), so a
catastrophic pattern fails one sample with a message instead of hanging the run.
"""

from __future__ import annotations

import logging

import regex

from workers.rl.judgers import extract
from workers.rl.judgers.base import Judger, JudgeError, Verdict, require_label
from workers.rl.judgers.deadline import DeadlineExceeded, run_with_deadline
from workers.rl.judgers.extract import format_number, quote, shorten
from workers.rl.judgers.spec import (
    ExactMatchSpec,
    FormatSpec,
    LengthPenaltySpec,
    MathVerifySpec,
    NumericMatchSpec,
    RegexMatchSpec,
)
from workers.rl.sample import Sample

logger = logging.getLogger(__name__)

# Longest one regular-expression match may run. Legitimate patterns over a model response take
# microseconds; only a catastrophic (exponential backtracking) pattern gets near this.
REGEX_TIMEOUT_S = 1.0


class NumericJudger(Judger):
    """1 if the response's final number equals the label's within `tolerance`, else 0."""

    kind = "numeric"
    spec: NumericMatchSpec

    async def verdict(self, sample: Sample) -> Verdict:
        label = require_label(sample, self.kind)
        expected = extract.extract_label(label)
        if expected is None:
            raise JudgeError(f"numeric judger: the label has no number: {quote(label)}")
        got = extract.extract_answer(sample.response, self.spec.extract)
        label_part = f"label: {expected.describe()}"
        if got is None:
            looked_for = extract.LOOKED_FOR[self.spec.extract]
            return Verdict(0.0, f"response answer: none found (looked for {looked_for}); {label_part} → no match")
        difference = abs(got.value - expected.value)
        matched = difference <= self.spec.tolerance
        outcome = "match" if matched else f"no match (differs by {format_number(difference)})"
        return Verdict(1.0 if matched else 0.0, f"response answer: {got.describe()}; {label_part} → {outcome}")


def _import_math_verify() -> None:
    import math_verify.grader
    import math_verify.parser

    # We pass timeouts of None (our own deadline covers parse + verify, from any thread); tell
    # math-verify it already warned about that instead of logging a warning per process.
    math_verify.parser.TIMEOUT_WARNING_SHOWN = True
    math_verify.grader.TIMEOUT_WARNING_SHOWN = True


def _shown(parsed: list) -> str:
    """"'\\frac{3}{4}' (parsed as 3/4)" for math-verify's [sympy value, extracted text] list."""
    if not parsed:
        return "nothing found"
    value = shorten(str(parsed[0]), 60)
    if len(parsed) < 2:
        return quote(value)
    written = shorten(str(parsed[-1]), 40)
    return quote(written) if written == value else f"{quote(written)} (parsed as {value})"


def parse_label(parse, label_text: str) -> list:
    """A bare label ("x^2+2x+1", "\\{1, 2\\}") has no $...$ or \\boxed{} for math-verify to find,
    and read as prose it yields a stray number (or nothing): read it as LaTeX math first."""
    if "$" in label_text or "\\boxed" in label_text:
        return parse(label_text, parsing_timeout=None)
    return parse(f"${label_text}$", parsing_timeout=None) or parse(label_text, parsing_timeout=None)


def math_verify_compare(response: str, label_text: str) -> dict:
    """Parse both texts and verify equivalence (math-verify; no timeout of its own: run this
    under a deadline). Module-level so a worker process can run it."""
    from math_verify import parse, verify

    gold = parse_label(parse, label_text)
    if not gold:
        return {"label_parsed": False}
    answer = parse(response, parsing_timeout=None)
    matched = bool(answer) and bool(verify(gold, answer, timeout_seconds=None))
    # The label is shown as written (math-verify may rewrite it: '0.5' comes back as '\\frac{1}{2}').
    label_shown = _shown([gold[0], label_text]) if len(gold) > 1 else _shown(gold)
    return {"label_parsed": True, "match": matched, "label": label_shown, "response": _shown(answer)}


class MathVerifyJudger(Judger):
    """1 if math-verify finds the response's answer equivalent to the label ('1/2' = '0.5' =
    '\\frac{1}{2}'), else 0. A GSM8K label is cut to the text after its '####'.

    Runs inline in the main thread (SIGALRM deadline) and in a worker process from any other
    thread (web requests, Ray actors), where signals cannot reach: see deadline.py."""

    kind = "math_verify"
    spec: MathVerifySpec

    def __init__(self, spec: MathVerifySpec, *, isolate: bool | None = None):
        super().__init__(spec)
        self.isolate = isolate  # None: decide per call by thread; True/False: force (tests)

    async def verdict(self, sample: Sample) -> Verdict:
        label_text = extract.label_math_text(require_label(sample, self.kind))
        timeout = self.spec.timeout_s
        try:
            result = await run_with_deadline(
                math_verify_compare, (sample.response, label_text), timeout, warmup=_import_math_verify, isolate=self.isolate
            )
        except DeadlineExceeded:
            raise JudgeError(f"math_verify judger: timed out after {timeout:g} s comparing the response with the label") from None
        if not result["label_parsed"]:
            raise JudgeError(f"math_verify judger: could not parse the label {quote(label_text)}")
        outcome = "equivalent" if result["match"] else "not equivalent"
        explanation = f"response answer: {result['response']}; label: {result['label']} → {outcome}"
        return Verdict(1.0 if result["match"] else 0.0, explanation)


class ExactJudger(Judger):
    """1 if the response equals the label (optionally ignoring case and surrounding space)."""

    kind = "exact"
    spec: ExactMatchSpec

    def _normal(self, text: str) -> str:
        if self.spec.strip:
            text = text.strip()
        return text if self.spec.case_sensitive else text.casefold()

    async def verdict(self, sample: Sample) -> Verdict:
        label = require_label(sample, self.kind)
        matched = self._normal(sample.response) == self._normal(label)
        rules = ", ".join(
            rule for rule, on in (("stripped", self.spec.strip), ("ignoring case", not self.spec.case_sensitive)) if on
        )
        how = f" ({rules})" if rules else ""
        explanation = f"response {quote(sample.response)} vs label {quote(label)}{how} → {'match' if matched else 'no match'}"
        return Verdict(1.0 if matched else 0.0, explanation)


def _run_regex(kind: str, call, text: str):
    try:
        return call(text, timeout=REGEX_TIMEOUT_S)
    except TimeoutError:
        raise JudgeError(
            f"{kind} judger: the regular expression took longer than {REGEX_TIMEOUT_S:g} s on this response "
            "(catastrophic backtracking?); simplify the pattern"
        ) from None


class RegexJudger(Judger):
    """1 if the pattern is found in the response (and, with `group`, that group equals the
    label, stripped), else 0."""

    kind = "regex"
    spec: RegexMatchSpec

    def __init__(self, spec: RegexMatchSpec):
        super().__init__(spec)
        self.pattern = regex.compile(spec.pattern, regex.IGNORECASE if spec.ignore_case else 0)
        group = spec.group
        if group is not None:
            known = group in self.pattern.groupindex if isinstance(group, str) else 0 <= group <= self.pattern.groups
            if not known:
                raise ValueError(f"regex judger: the pattern has no group {group!r}")

    async def verdict(self, sample: Sample) -> Verdict:
        found = _run_regex(self.kind, self.pattern.search, sample.response)
        if self.spec.group is None:
            if found is None:
                return Verdict(0.0, f"pattern {quote(self.spec.pattern)} not found in the response")
            return Verdict(1.0, f"pattern {quote(self.spec.pattern)} found: {quote(found.group(0), 60)}")
        label = require_label(sample, self.kind)
        if found is None:
            return Verdict(0.0, f"pattern {quote(self.spec.pattern)} not found in the response; label: {quote(label)} → no match")
        captured = found.group(self.spec.group)
        if captured is None:
            return Verdict(0.0, f"pattern matched but group {self.spec.group!r} captured nothing; label: {quote(label)} → no match")
        matched = captured.strip() == label.strip()
        explanation = f"group {self.spec.group!r} captured {quote(captured, 60)}; label: {quote(label)} → {'match' if matched else 'no match'}"
        return Verdict(1.0 if matched else 0.0, explanation)


class FormatJudger(Judger):
    """`reward` if the whole response matches the pattern, else 0."""

    kind = "format"
    spec: FormatSpec

    def __init__(self, spec: FormatSpec):
        super().__init__(spec)
        self.pattern = regex.compile(spec.pattern)

    async def verdict(self, sample: Sample) -> Verdict:
        matched = _run_regex(self.kind, self.pattern.fullmatch, sample.response) is not None
        if matched:
            return Verdict(self.spec.reward, f"the whole response matches {quote(self.spec.pattern)} → {format_number(self.spec.reward)}")
        return Verdict(0.0, f"the response does not match {quote(self.spec.pattern)} as a whole → 0")


class LengthPenaltyJudger(Judger):
    """DAPO's overlong penalty: 0 while length <= max_len - buffer, then linear down to -1 at
    max_len, -1 beyond. Length = number of response tokens when the sample has them
    (`response_ids`), else the number of characters of the response text (the web's "try it")."""

    kind = "length_penalty"
    spec: LengthPenaltySpec

    def penalty(self, length: int) -> float:
        max_len, buffer = self.spec.max_len, min(self.spec.buffer, self.spec.max_len)
        start = max_len - buffer
        if length <= start:
            return 0.0
        if length >= max_len:
            return -1.0
        return (start - length) / buffer

    async def verdict(self, sample: Sample) -> Verdict:
        if sample.response_ids:
            length, unit = len(sample.response_ids), "tokens"
        else:
            length, unit = len(sample.response), "characters"
        score = self.penalty(length)
        start = self.spec.max_len - min(self.spec.buffer, self.spec.max_len)
        if score == 0.0:
            why = f"at most {start}"
        elif score == -1.0:
            why = f"at or beyond max_len {self.spec.max_len}"
        else:
            why = f"in the last {self.spec.buffer} before max_len {self.spec.max_len}"
        return Verdict(score, f"response length {length} {unit}, {why} → penalty {format_number(round(score, 6))}")
