"""kvplan.sources.plainyaml reads the plain YAML subset without PyYAML: whatever it reads must
be exactly what PyYAML's safe loader reads (values and their types), and whatever PyYAML
refuses it must leave to PyYAML (decline), never read."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.sources import plainyaml

ROOT = Path(__file__).resolve().parents[2]
PACKAGED = [*sorted((ROOT / "model_configs").glob("*.yaml")),
            ROOT / "kvplan" / "data" / "gpus.yaml"]


def same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (1 is not True, 1.0 is not 1), keys in
    the same order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return (list(a) == list(b) and all(type(x) is type(y) for x, y in zip(a, b, strict=True))
                and all(same(a[k], b[k]) for k in a))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def agrees(text: str) -> tuple[bool, Any]:
    """Check one text against PyYAML; (read by the subset, value)."""
    try:
        expected = yaml.safe_load(text)
        refused = False
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError):
        expected, refused = None, True
    done, value = plainyaml.parse(text)
    if done:
        assert not refused, f"PyYAML refuses {text!r}, the subset read {value!r}"
        assert same(value, expected), f"{text!r}: subset {value!r}, PyYAML {expected!r}"
    return done, value


@pytest.mark.parametrize("path", PACKAGED, ids=lambda p: p.name)
def test_every_packaged_file_is_read_by_the_subset_as_pyyaml_reads_it(path):
    # the point of the subset: the library and the catalog never need PyYAML at start-up
    done, _ = agrees(path.read_text(encoding="utf-8"))
    assert done, f"{path.name} is outside the subset: starting with it imports PyYAML"


def test_every_yaml_fixture_is_read_as_pyyaml_reads_it_or_left_to_pyyaml():
    files = [p for p in (ROOT / "tests").rglob("*.y*ml") if ".oracle" not in str(p)]
    assert len(files) > 10
    for path in files:
        agrees(path.read_text(encoding="utf-8-sig"))


def test_the_catalog_entries_read_alone_as_pyyaml_reads_them():
    # `--gpu NAME` parses one entry's lines (kvplan.sources.gpus._find_packaged)
    from kvplan.sources import gpus

    text = gpus.CATALOG_PATH.read_text(encoding="utf-8")
    starts = list(gpus._ENTRY_START.finditer(text))
    assert len(starts) > 20
    for i, start in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        done, _ = agrees(text[start.start():end])
        assert done, text[start.start():start.start() + 60]


# YAML 1.1 scalars whose type is easy to get wrong: each is read as PyYAML reads it, or left
# to PyYAML
SCALARS = [
    "yes", "No", "ON", "off", "y", "n", "true", "False", "TRUE", "null", "Null", "~", "",
    "0", "-0", "+0", "00", "012", "0o12", "0x1F", "0b101", "1_000", "1__0", "_1", "1_",
    "1.5", "1.", ".5", "-1.5", "+1.5", "1.5e+3", "1.5E-3", "1e3", "1.5e3", "1_0.5", ".inf",
    "-.inf", ".nan", ".NaN", "1:30", "190:20:30", "1:30.5", "2024-01-01", "2024-1-1 10:00:00",
    "2001-12-14t21:59:43.10-05:00", "<<", "=", "80 GB HBM3", "9.0", "'9.0'", '"9.0"',
    "H100-80GB", "e4m3", "E5", "nan", "inf", "-", "- a", "a b", "a: b", "a #b", "a#b",
    "'it''s'", "'a' b", '"a\\nb"', '"x"', "-1", "+", ".", "...", "---", "a: [1", "&x a",
    "*x", "!!str 1", "!tag x", "? a", "[a, b]", "{a: 1}", "[a, [b, {c: d}]]", "{a: [1, 2]}",
    "[]", "{}", "[a,]", "{a}", "{a: 1, a: 2}", "[a: 1]", "'", "'a", "|", ">-", "%YAML",
    "@x", "`x", "1 2", "0.1.2", "1-2", "12e", "0x", "0b", "TrUe", "nULL", "1:60",
]


@pytest.mark.parametrize("value", ["yes", "1_000", "1.5e+3", "~", "H100-80GB", "-1",
                                   "[a, b]", "'9.0'", "{a: 1}"])
def test_the_subset_reads_the_common_scalars_itself(value):
    # agrees() holds the subset to PyYAML only where it answers: these it must answer
    assert agrees(f"k: {value}\n")[0], value


@pytest.mark.parametrize("value", SCALARS)
def test_tricky_scalars_in_each_context(value):
    for text in (f"k: {value}\n", f"- {value}\n", f"k: [{value}]\n", f"k: {{x: {value}}}\n",
                 f"k:\n  - {value}\n", f"a: 1\n{value}: 2\n", f"k: [a, {value}, b]\n"):
        agrees(text)


def test_multi_line_values_fold_as_pyyaml_folds_them():
    texts = [
        "a: one\n  two\n  three\nb: 1\n",
        "a: 'one\n  two'\nb: 1\n",
        "a: 'one\n\n  two'\n",
        "a: one\n\n  two\n",
        "a: [1,\n  2, 3]\nb: x\n",
        "a: {k: 1,\n  j: 'x\n  y'}\n",
        "a: >-\n  one\n  two\nb: 1\n",
        "a: >\n  one\n  two\n\nb: 1\n",
        "a: |\n  one\n  two\nb: 1\n",
        "a: |-\n  one\n  two\n",
        "a: >-\n  one\n\n  two\n",
        "a: >-\n  one\n    two\n",
        "a: |\n  one\n  # not a comment\n",
        "- >\n  a", "a: |\n  one", "a: >-\n  one",  # no line break after the block
        "- a\n  b\n- c\n",
        "k:\n- a\n- b\nj: 1\n",
        "  - name: x\n    v: 1\n  - name: y\n",
        "a:\n  b:\n    c: 1\n  d: 2\n",
        "a: 1\n  b: 2\n",
        "a: 1 # note\nb: 'x' # note\nc: [1] # note\n",
        "# only a comment\n",
        "",
        "a: 1\n---\nb: 2\n",
        "a:\tb\n",
        "a: b\r\nc: d\r\n",
        "a: caf\u00e9\n",
    ]
    read = [agrees(t)[0] for t in texts]
    # the common shapes are read by the subset, not only left to PyYAML
    assert all(read[texts.index(t)] for t in (
        "a: one\n  two\n  three\nb: 1\n", "a: 'one\n  two'\nb: 1\n", "a: [1,\n  2, 3]\nb: x\n",
        "a: >-\n  one\n  two\nb: 1\n", "a: |\n  one\n  two\nb: 1\n", "- a\n  b\n- c\n"))


_ALPHABET = st.sampled_from(list("ab01 :-#'\"[]{},>|\n._~&*!yYnN+eE\t") + ["  ", "\n  "])


@settings(max_examples=1500, deadline=None)
@given(st.lists(_ALPHABET, max_size=40).map("".join))
def test_random_text_is_read_as_pyyaml_reads_it_or_left_to_it(text):
    agrees(text)


_WORD = st.sampled_from(["a", "b1", "yes", "1", "0.5", "1_0", "~", "x y", "'q'", '"d"',
                         "[1, a]", "{k: v}", "-1", "2024-01-01", "on", ""])


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["k: ", "j: ", "- ", "- k: ", ""]),
                          _WORD, st.sampled_from(["", " # c"])), max_size=8))
def test_random_documents_are_read_as_pyyaml_reads_them_or_left_to_it(lines):
    agrees("".join(f"{'  ' * depth}{lead}{word}{comment}\n"
                   for depth, lead, word, comment in lines))


def test_its_bounds_are_the_guarded_readers():
    # plainyaml cannot import kvplan.sources.reader (the reader imports it): its copies of
    # the bounds must stay the reader's, or a text past them would be read by one only
    from kvplan.sources import reader

    assert (plainyaml._MAX_DEPTH, plainyaml._MAX_NODES) == (reader.MAX_DEPTH, reader.MAX_NODES)
