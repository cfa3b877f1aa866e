"""kvplan.core.patterns: `lazy`, a pattern compiled on its first use, answers as re.compile's;
`pattern_problem` bounds what a pattern costs to match."""

import re
import sys

import pytest

from kvplan.core.patterns import LazyPattern, lazy, pattern_problem


def test_a_lazy_pattern_compiles_on_first_use_and_answers_as_the_compiled_one():
    text = "name: a\nName: b\nname:c"
    p = lazy(r"^name:\s*(\w+)$", re.M | re.I)
    assert isinstance(p, LazyPattern) and p._compiled is None  # nothing compiled at import
    compiled = re.compile(r"^name:\s*(\w+)$", re.M | re.I)
    assert p.findall(text) == compiled.findall(text) == ["a", "b", "c"]
    assert p._compiled is not None
    assert p.match(text, 8).group(1) == compiled.match(text, 8).group(1) == "b"
    assert p.sub("x", text) == compiled.sub("x", text)
    assert (p.pattern, p.flags) == (compiled.pattern, compiled.flags)



@pytest.mark.parametrize("pattern, problem", [
    # a repeat of more than one step around another, or around alternatives: exponential
    ("(a+)+b", "itself repeats"), ("(?:a{2})*x", "itself repeats"), ("(\\w+\\.?)+x", "repeats"),
    ("(.|.)*x", "branches"), ("(a|ab)*x", "branches"), ("(?>(a|bc))*x", "branches"),
    ("(?=(a|bc)+)x", "branches"),
    # alternatives Python's own parser turns into one character set, or whose shared first
    # character it moves out, do not branch (sre_parse._parse_sub); nor does an optional part
    ("(a|b)*x", None), ("(ab|ac)*x", None), ("(\\d|[ab])+", None), ("(a?b?)*x", None),
    ("(?x)( a | b )*  # a comment", None), ("(?x)(a b|c)*", "branches"),
    # unbounded repeats in sequence multiply the work; '{0,8}' is short, '{0,9}' is not
    (".*.*.*x", None), (".*.*.*.*x", "4 unbounded repeats"),
    ("a{0,8}" * 5, None), ("a{0,9}" * 4, "4 unbounded repeats"),
    # published spellings
    (".*lm_head", None), (r".*layers\.(0|1|2)\..*(q|k|v)_proj", None),
    (r"blk\.(1[0-4])\.ffn_.*_exps\.", None), ("(", "is not a regular expression"),
])
def test_a_pattern_problem_is_found_without_pythons_private_parser(monkeypatch, pattern,
                                                                   problem):
    monkeypatch.setitem(sys.modules, "re._parser", None)  # importing it now fails
    monkeypatch.setitem(sys.modules, "sre_parse", None)
    found = pattern_problem(pattern)
    assert found is None if problem is None else problem in (found or ""), found
