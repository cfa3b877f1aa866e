"""kvplan.output.terminal writes terminal tables without rich: the text must be what rich
writes for the same view (render._rich), character for character, at any width."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.output import render, terminal
from kvplan.output.render import Column, Table, View

_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789(),.-/=+[]:", min_size=1,
                max_size=14)
# words and the spaces between them, leading, trailing and doubled spaces included
_TEXT = st.lists(st.tuples(_WORD, st.sampled_from([" ", "  ", ""])), max_size=9).map(
    lambda parts: "".join(w + s for w, s in parts))
_LEAD = st.sampled_from(["", " ", "  "])


@st.composite
def _views(draw: st.DrawFn) -> View:
    tables = []
    for _ in range(draw(st.integers(0, 3))):
        kinds = draw(st.lists(st.sampled_from(["text", "int", "bytes", "exact"]), min_size=1,
                              max_size=6))
        columns = tuple(Column(f"c{i}", draw(_TEXT) or "h", kind) for i, kind in enumerate(kinds))
        values = {"text": _LEAD.flatmap(lambda lead: _TEXT.map(lambda s: lead + s)),
                  "int": st.integers(-10**6, 10**15), "bytes": st.integers(0, 10**14),
                  "exact": st.integers(0, 10**13)}
        rows = tuple(
            {c.key: draw(st.one_of(st.none(), values[c.kind])) for c in columns}
            for _ in range(draw(st.integers(0, 5))))
        tables.append(Table(draw(_TEXT), columns, rows))
    return View(tables=tables, payload={}, csv_table=Table("", (), ()),
                notes=draw(st.lists(_TEXT, max_size=3)), headline=draw(_TEXT),
                notes_when_verbose=draw(st.booleans()))


@settings(max_examples=300, deadline=None)
@given(view=_views(), width=st.integers(1, 160), verbose=st.booleans(),
       units=st.sampled_from(render.UNITS))
def test_plain_text_tables_are_what_rich_writes(view, width, verbose, units):
    assert render._terminal(view, units, width, verbose) == render._rich(view, units, width,
                                                                         verbose)


@settings(max_examples=300, deadline=None)
@given(text=_LEAD.flatmap(lambda lead: _TEXT.map(lambda s: lead + s)),
       width=st.integers(1, 40), justify=st.sampled_from(["default", "left", "right"]),
       no_wrap=st.booleans())
def test_wrap_is_rich_text_wrap(text, width, justify, no_wrap):
    from rich.console import Console
    from rich.text import Text

    console = Console(width=80, color_system=None)
    want = [line.plain for line in Text(text).wrap(console, width, justify=justify,
                                                   overflow="fold", no_wrap=no_wrap)]
    assert terminal.wrap(text, width, justify, no_wrap) == want


def test_other_characters_are_left_to_rich():
    # two terminal cells per character, or a tab: rich measures them, this module does not
    view = View(tables=[Table("GPUs", (Column("name", "name"), Column("n", "count", "int")),
                              ({"name": "日本語 x", "n": 3}, {"name": "a\tb", "n": 4}))],
                payload={}, csv_table=Table("", (), ()))
    assert not terminal.is_plain("日本語") and not terminal.is_plain("a\tb")
    assert render.render(view, "table", width=40) == render._rich(view, "iec", 40)


def test_a_table_without_columns_is_left_to_rich():
    view = View(tables=[Table("empty", (), ())], payload={}, csv_table=Table("", (), ()))
    assert render.render(view, "table", width=60) == render._rich(view, "iec", 60)


def test_size_and_plan_tables_do_not_import_rich():
    code = ("import sys; from kvplan.cli import main; sys.argv = ['kvplan'] + sys.argv[1:]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('rich' in sys.modules, file=sys.stderr)")
    for args in (["size", "llama-3.1-8b", "--tokens", "8k"],
                 ["plan", "llama-3.1-8b", "--gpu", "h100", "--context", "32k"]):
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                              text=True, check=True)
        assert "KV" in done.stdout
        assert done.stderr.strip().splitlines()[-1] == "False", args


def test_durations_print_in_milliseconds_one_way():
    """The whatif and traffic tables print seconds as milliseconds through one formatter:
    three decimals and thousands separators, from a float or an exact Fraction."""
    from fractions import Fraction

    from kvplan.output import traffic, whatif
    from kvplan.output.render import milliseconds

    assert milliseconds(Fraction(3, 2000)) == "1.500"
    assert milliseconds(1234.5) == "1,234,500.000"
    assert whatif._ms is traffic._ms is milliseconds
