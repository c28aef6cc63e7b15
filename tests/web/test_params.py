"""Numbers read from request text: only ASCII digits are a number."""

import pytest

from rlweb.core.params import parse_int


@pytest.mark.parametrize("text, expected", [("0", 0), ("42", 42), ("007", 7), ("123456789012345678901234567890", 123456789012345678901234567890)])
def test_it_reads_ascii_digits_as_a_number(text, expected):
    assert parse_int(text) == expected


@pytest.mark.parametrize("text", [None, "", " 5", "5 ", "-1", "+1", "1.5", "1e3", "²", "①", "٣", "4²", "#4"])
def test_anything_else_is_not_a_number_even_digit_characters_int_would_refuse(text):
    assert parse_int(text) is None
