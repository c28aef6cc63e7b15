"""Reading numbers out of request text (query parameters, search boxes, references)."""

from __future__ import annotations


def parse_int(text: str | None) -> int | None:
    """The non-negative integer `text` spells in ASCII digits, else None.

    Not `str.isdigit()`: that accepts '²', '①' and other digit characters which `int()` refuses,
    so a search for '²' would crash a page instead of matching nothing."""
    if text and text.isascii() and text.isdecimal():
        return int(text)
    return None
