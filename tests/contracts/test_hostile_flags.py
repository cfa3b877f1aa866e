"""Flag values that a sweep of hostile values over the numeric flags and `-o` found
mishandled: str.isdigit() also takes '²' (which int() refuses) and says nothing of length
(int() of a 5,000-digit string raises past Python's 4,300-digit limit); `-o` onto a link to
a missing file created that file's folders wherever the link pointed."""

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


@pytest.mark.parametrize("command", [("import", "llama-3.1-8b"), ("report", "llama-3.1-8b"),
                                     ("plot", "llama-3.1-8b", "-t", "1k..4k")])
def test_o_onto_a_link_into_a_missing_folder_creates_nothing_there(tmp_path, command):
    elsewhere = tmp_path / "elsewhere"
    link = tmp_path / "out" / "link.svg"
    link.parent.mkdir()
    link.symlink_to(elsewhere / "a" / "b" / "x.svg")
    one_message(invoke(*command, "-o", str(link)), "whose folder does not exist")
    assert not elsewhere.exists() and link.is_symlink()


def test_o_onto_a_link_to_a_missing_file_in_an_existing_folder_writes_it(tmp_path):
    target = tmp_path / "real.yaml"
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    assert invoke("import", "llama-3.1-8b", "-o", str(link)).exit_code == 0
    assert link.is_symlink() and target.read_text().startswith("schema: kvplan.model/1")


def test_o_onto_a_loop_of_links_is_named_as_one(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    res = invoke("import", "llama-3.1-8b", "-o", str(loop))
    one_message(res, "symbolic links")
    assert "open file of a process" not in res.stderr
