"""Flag values that a sweep of hostile numbers over every numeric flag found escaping as a
traceback: str.isdigit() also takes '²' (which int() refuses) and says nothing of length
(int() of a 5,000-digit string raises past Python's 4,300-digit limit)."""

from __future__ import annotations

import pytest
from hostile import invoke, one_message

LONG = "9" * 5000


@pytest.mark.parametrize("args, needle", [
    (("sweep", "llama-3.1-8b", "--tp", LONG), "5,000 digits"),
    (("sweep", "llama-3.1-8b", "--tp", "2,\u00b2"), "'\u00b2'"),
    (("size", "llama-3.1-8b", "--kv-dtype", f"int4:g{LONG}"), "5,000 digits"),
    (("size", "llama-3.1-8b", "--kv-dtype", "int4:g\u00b2"), "'g\u00b2'"),
    (("size", "llama-3.1-8b", "--kv-dtype", f"int4:g64:r{LONG}"), "5,000 digits"),
    (("size", "llama-3.1-8b", "--kv-dtype", "int4:g64:r\u00b3"), "'r\u00b3'"),
])
def test_a_digit_int_cannot_read_is_one_message(args, needle):
    one_message(invoke(*args), needle)


def test_whole_digits_reads_ascii_digits_only():
    from kvplan.core.errors import BadInputError
    from kvplan.core.units import whole_digits

    assert whole_digits("0064", "x") == 64
    assert [whole_digits(t, "x") for t in ("", "\u00b2", "\u0661\u0662", "1.5", "-1", " 1")] \
        == [None] * 6
    with pytest.raises(BadInputError, match="25 digits"):
        whole_digits("1" * 25, "x")
