"""Find the final answer in a model response (or a label) and read it as a number.

Pure functions, no state. Where an answer can be:
- GSM8K style: the first number after the last ``####`` ("#### 72", "#### $1,234").
- LaTeX: the content of the last ``\\boxed{...}`` (braces may nest: ``\\boxed{\\frac{3}{4}}``).
- Anywhere: the last number of the text.

Numbers understood: integers, signed numbers ("-3", "−3"), decimals ("3.50", ".5"), thousands
separators ("1,234,567": groups of exactly three digits), a currency sign ("$5", "-$5"), plain
fractions ("3/4") and LaTeX fractions ("\\frac{3}{4}", "\\dfrac", "\\tfrac", "-\\frac{1}{2}"). A
sentence's full stop is not a decimal point ("it is 72." reads 72). Not understood on purpose:
scientific notation and spelled-out numbers ("seventy-two").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

ExtractMode = Literal["auto", "gsm8k", "boxed", "last_number", "whole"]

# Human-readable names of where an answer came from; they appear in explanations.
FROM_GSM8K = "'####'"
FROM_BOXED = "\\boxed{}"
FROM_LAST_NUMBER = "last number"
FROM_WHOLE = "whole text"

_PLAIN = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+"
_FRAC_ARG = r"\s*[-−]?\s*(?:\d+(?:\.\d+)?|\.\d+)\s*"
# One number token. A sign counts only when the minus is not glued to what precedes it, so
# "10-3" reads 10 and 3, while "x = -3" reads -3. Alternatives are tried left to right, so the
# LaTeX fraction wins over its own digits.
_NUMBER = re.compile(
    rf"""
    (?P<latex>
        (?<![\w.)}}])(?P<lsign>[-−]\s*)?
        \\[dt]?frac\s*\{{(?P<lnum>{_FRAC_ARG})\}}\s*\{{(?P<lden>{_FRAC_ARG})\}}
    )
    |
    (?P<plain>
        (?<![\w.)}}])(?P<sign>[-−+])?(?:\\?\$\s?)?
        (?P<num>{_PLAIN})
        (?:\s*/\s*(?P<den>\d+(?:\.\d+)?))?
        (?![\d])
    )
    """,
    re.VERBOSE,
)
_GSM8K_MARK = "####"
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


@dataclass(frozen=True)
class Answer:
    """An answer found in a text: the text as written, its value, and where it came from."""

    text: str
    value: float
    source: str

    def describe(self) -> str:
        shown = format_number(self.value)
        written = self.text.strip()
        if written == shown:
            return f"{shown} (from {self.source})"
        return f"{shown} (wrote {quote(written, 40)}, from {self.source})"


def format_number(value: float) -> str:
    """72.0 → '72', 0.75 → '0.75', -3.0 → '-3' (explanations read like the text they came from)."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def shorten(text: str, limit: int = 80) -> str:
    """One line, at most `limit` characters, for quoting model output in an explanation."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def quote(text: str, limit: int = 80) -> str:
    """'text' shortened to one line, quoted without escaping backslashes (LaTeX stays readable)."""
    return f"'{shorten(text, limit)}'"


def _token_value(match: re.Match) -> float | None:
    try:
        if match.group("latex"):
            value = Fraction(_clean(match.group("lnum"))) / Fraction(_clean(match.group("lden")))
            return float(-value if match.group("lsign") else value)
        value = Fraction(match.group("num").replace(",", ""))
        if match.group("den"):
            value /= Fraction(match.group("den"))
        return float(-value if match.group("sign") in ("-", "−") else value)
    except (ZeroDivisionError, ValueError):
        return None  # "3/0" is not a number; skip it rather than guess


def _clean(part: str) -> str:
    return part.replace(" ", "").replace("−", "-")


def numbers(text: str) -> list[tuple[str, float]]:
    """Every number token of `text`, in order, as (text as written, value)."""
    found = []
    for match in _NUMBER.finditer(text):
        value = _token_value(match)
        if value is not None:
            found.append((match.group(0), value))
    return found


def parse_number(text: str) -> float | None:
    """The value of `text` if the whole of it (ignoring $...$ math delimiters, a trailing full
    stop or percent sign, and surrounding spaces) is one number, else None."""
    core = text.strip().strip("$").strip()
    core = re.sub(r"^\\\(|\\\)$", "", core).strip()
    core = re.sub(r"(\\?%|\.)$", "", core).strip()
    if not core:
        return None
    match = _NUMBER.fullmatch(core)
    return _token_value(match) if match else None


def last_boxed(text: str) -> str | None:
    """The content of the last \\boxed{...} (or \\fbox{...}), braces balanced; None if absent or
    unbalanced (a truncated response)."""
    starts = [m.end() for m in _BOXED.finditer(text)]
    for start in reversed(starts):
        depth = 1
        for pos in range(start, len(text)):
            char = text[pos]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    return text[start:pos]
    return None


def gsm8k_tail(text: str) -> str | None:
    """The line after the last '####', or None if there is no '####'."""
    at = text.rfind(_GSM8K_MARK)
    if at < 0:
        return None
    return text[at + len(_GSM8K_MARK) :].strip().split("\n", 1)[0]


def _from_gsm8k(text: str) -> Answer | None:
    tail = gsm8k_tail(text)
    if tail is None:
        return None
    found = numbers(tail)
    return Answer(found[0][0], found[0][1], FROM_GSM8K) if found else None


def _from_boxed(text: str) -> Answer | None:
    content = last_boxed(text)
    if content is None:
        return None
    whole = parse_number(content)
    if whole is not None:
        return Answer(content, whole, FROM_BOXED)
    found = numbers(content)  # "\boxed{x = 5}", "\boxed{72 \text{ apples}}"
    return Answer(found[-1][0], found[-1][1], FROM_BOXED) if found else None


def _from_last_number(text: str) -> Answer | None:
    found = numbers(text)
    return Answer(found[-1][0], found[-1][1], FROM_LAST_NUMBER) if found else None


def _from_whole(text: str) -> Answer | None:
    value = parse_number(text)
    return Answer(text.strip(), value, FROM_WHOLE) if value is not None else None


_STRATEGIES = {
    "gsm8k": (_from_gsm8k,),
    "boxed": (_from_boxed,),
    "last_number": (_from_last_number,),
    "whole": (_from_whole,),
    "auto": (_from_gsm8k, _from_boxed, _from_last_number),
}

LOOKED_FOR = {
    "gsm8k": "a number after '####'",
    "boxed": "a number in \\boxed{}",
    "last_number": "a number",
    "whole": "a response that is just a number",
    "auto": "'####', \\boxed{} or any number",
}


def extract_answer(text: str, mode: ExtractMode = "auto") -> Answer | None:
    """The final numeric answer of a response, or None. 'auto' tries '####', then \\boxed{},
    then the last number of the text."""
    for strategy in _STRATEGIES[mode]:
        answer = strategy(text)
        if answer is not None:
            return answer
    return None


def extract_label(label: str) -> Answer | None:
    """The reference number of a label: a bare number ("72", "$1,234", "\\frac{3}{4}") or a
    worked solution that ends in '#### 72' or \\boxed{72} (else its last number)."""
    return _from_whole(label) or extract_answer(label, "auto")


def label_math_text(label: str) -> str:
    """The part of a label that holds the answer, for symbolic comparison: the text after the
    last '####' of a GSM8K solution, else the label itself."""
    tail = gsm8k_tail(label)
    return tail if tail else label
