"""The one renderer: a View -> terminal table, Markdown, CSV or JSON text.

Commands build Reports from raw ints; human strings (GiB, GB, thousands separators) are made
here and nowhere else, with one exception: the byte formatter itself lives in
kvplan.core.units (`human_bytes`, re-exported here) because the core's "no memory is left"
error states its figures in it. JSON is written with json.dumps (never through a pretty-printer that
wraps lines). Terminal tables are laid out as rich lays them out and written as plain text by
kvplan.output.terminal; rich itself is imported only for text that is not printable ASCII.
"""

from __future__ import annotations

import io
from dataclasses import field
from typing import Any

from kvplan.core.record import record
from kvplan.core.units import human_bytes

FORMATS = ("table", "markdown", "csv", "json")
UNITS = ("iec", "si")



def json_plain(value: Any) -> Any:
    """A result's values as JSON holds them (kvplan.core.record.plain: Fractions -> 'a/b'
    strings, exact unlike a float; tuples -> lists; dicts, lists and records walked)."""
    from kvplan.core.record import plain

    return plain(value)


def milliseconds(seconds: Any) -> str:
    """A duration in seconds (a float or a Fraction) as the tables print it: milliseconds to
    three decimals with thousands separators ('1,234.500')."""
    return f"{float(seconds) * 1000:,.3f}"


def unit_note(units: str) -> str:
    if units == "iec":
        return ("Units: B = bytes; KiB/MiB/GiB/TiB are powers of 2 "
                "(1 GiB = 2^30 = 1,073,741,824 bytes).")
    return "Units: B = bytes; KB/MB/GB/TB are powers of 10 (1 GB = 10^9 bytes)."


@record
class Column:
    key: str
    header: str
    # text | int | bytes (human unit) | exact (bytes with separators) | figure (a number
    # already written as text, "14.989 GiB": right-aligned and never wrapped, as numbers are)
    kind: str = "text"
    # a terminal too narrow for the whole table leaves out the columns with drop > 0,
    # highest first, before it prints one record per row (0: always shown)
    drop: int = 0


@record
class Table:
    title: str
    columns: tuple[Column, ...]
    rows: tuple[dict[str, Any], ...]


@record
class View:
    """A result made ready to show: its tables, its JSON document, the one table CSV writes,
    and the notes and warnings around them. Each result type has one builder returning a View
    (kvplan.output); `render` turns it into a table, Markdown, CSV or JSON. ("report" names
    only the `kvplan report` page.) A record (a plain dataclass compiled three methods as
    every command started): its fields are not reassigned, though its lists are added to
    (a command's launch warnings go first in `warnings`)."""

    tables: list[Table]
    payload: dict[str, Any]  # the JSON document (schema, inputs, raw ints)
    csv_table: Table  # the one table CSV writes, with raw values
    notes: list[str] = field(default_factory=list)  # inputs, formula, units: under tables
    warnings: list[str] = field(default_factory=list)  # go to stderr
    headline: str = ""  # the answer in one line, first in the terminal table
    notes_when_verbose: bool = False  # terminal tables show the notes only with --verbose


def _cell(value: Any, kind: str, units: str) -> str:
    if value is None:
        return "-"
    if kind == "bytes":
        return human_bytes(value, units)
    if kind in ("int", "exact"):
        return f"{value:,}"
    return str(value)


def render(view: View, fmt: str, units: str = "iec", width: int | None = None,
           verbose: bool = False) -> str:
    if fmt == "json":
        import json

        return json.dumps(view.payload, indent=2) + "\n"
    if fmt == "csv":
        return _csv(view.csv_table)
    if fmt == "markdown":
        return _markdown(view, units)
    return _terminal(view, units, width, verbose)


def _csv(table: Table) -> str:
    import csv

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([c.key for c in table.columns])
    for row in table.rows:
        writer.writerow(["" if row.get(c.key) is None else row.get(c.key) for c in table.columns])
    return buf.getvalue()


def _escape_md(text: str) -> str:
    return text.replace("|", "\\|")


def _markdown(view: View, units: str) -> str:
    out: list[str] = []
    for table in view.tables:
        out.append(f"**{_escape_md(table.title)}**\n")
        out.append("| " + " | ".join(_escape_md(c.header) for c in table.columns) + " |")
        out.append("| " + " | ".join(
            "---" if c.kind == "text" else "---:" for c in table.columns) + " |")
        for row in table.rows:
            out.append("| " + " | ".join(
                _escape_md(_cell(row.get(c.key), c.kind, units)) for c in table.columns) + " |")
        out.append("")
    for note in [*view.notes, unit_note(units)]:
        out.append(f"- {note}")
    return "\n".join(out) + "\n"


def _terminal(view: View, units: str, width: int | None, verbose: bool = False) -> str:
    """Terminal tables that never cut a number: a table whose numbers do not fit the width
    side by side (headers may wrap onto several lines) is printed one record per row
    instead, label beside value. Laid out as rich lays out these tables, written by
    kvplan.output.terminal when every string is printable ASCII (rich's import is a fifth of
    a table command's start-up), by rich otherwise."""
    from kvplan.output import terminal

    notes = ["--verbose: the inputs, the engine's log lines and the formulas."] if (
        view.notes_when_verbose and not verbose) else [*view.notes, unit_note(units)]
    grids = [[[_cell(row.get(c.key), c.kind, units) for c in table.columns]
              for row in table.rows] for table in view.tables]
    texts = [view.headline, *notes, *(t.title for t in view.tables),
             *(c.header for t in view.tables for c in t.columns),
             *(text for grid in grids for row in grid for text in row)]
    if not all(map(terminal.is_plain, texts)) or not all(t.columns for t in view.tables):
        return _rich(view, units, width, verbose)
    width = width or 80
    out = [view.headline + "\n\n"] if view.headline else []
    left_out: list[str] = []
    for table, cells in zip(view.tables, grids, strict=True):
        table, cells, widths = _fit(table, cells, width, left_out)
        if widths is None:
            out.append(terminal.paragraph(_vertical(table, cells, width), width))
            continue
        out.append(terminal.table(table.title, [c.header for c in table.columns], cells,
                                  widths, [c.kind != "text" for c in table.columns]))
    out.extend(terminal.paragraph(note, width) for note in [*_left_out(left_out), *notes])
    return "".join(out)


def _fit(table: Table, cells: list[list[str]], width: int, left_out: list[str]
         ) -> tuple[Table, list[list[str]], list[int] | None]:
    """The table as it fits `width`: whole, else without its droppable columns (highest
    `drop` first, as few as will do; their headers are added to `left_out`), else None
    widths (print it one record per row)."""
    widths = _layout(table, cells, width)
    order = sorted((c.drop, i) for i, c in enumerate(table.columns) if c.drop > 0)
    dropped: set[int] = set()
    while widths is None and order:
        dropped.add(order.pop()[1])
        keep = [i for i in range(len(table.columns)) if i not in dropped]
        narrow = Table(table.title, tuple(table.columns[i] for i in keep), table.rows)
        narrow_cells = [[row[i] for i in keep] for row in cells]
        widths = _layout(narrow, narrow_cells, width)
        if widths is not None:
            left_out.extend(table.columns[i].header for i in sorted(dropped))
            return narrow, narrow_cells, widths
    return table, cells, widths


def _left_out(headers: list[str]) -> list[str]:
    if not headers:
        return []
    return [f"Columns left out at this width: {', '.join(headers)} (a wider terminal, "
            "-f csv or -f json shows them)."]


def _rich(view: View, units: str, width: int | None, verbose: bool = False) -> str:
    """_terminal's tables drawn by rich: for text that is not printable ASCII (characters
    that take two terminal cells, or none)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

    width = width or 80
    buf = io.StringIO()
    # text is printed as it is: no [markup] or :emoji: codes (that look-up table alone costs
    # about 10 ms to import, a tenth of the command's start-up)
    console = Console(file=buf, width=width, force_terminal=False, color_system=None,
                      highlight=False, soft_wrap=False, markup=False, emoji=False)
    if view.headline:
        console.print(view.headline + "\n", soft_wrap=True)  # one line, even when long
    left_out: list[str] = []
    for table in view.tables:
        cells = [[_cell(row.get(c.key), c.kind, units) for c in table.columns]
                 for row in table.rows]
        table, cells, widths = _fit(table, cells, width, left_out)
        if widths is None:
            console.print(_vertical(table, cells, width), markup=False, highlight=False)
            continue
        rt = RichTable(title=table.title, title_justify="left", box=box.SIMPLE_HEAD)
        for c, w in zip(table.columns, widths, strict=True):
            justify: Any = "left" if c.kind == "text" else "right"
            # the header wraps at its words even over a number column that never wraps
            rt.add_column(Text(c.header, justify=justify, no_wrap=False, overflow="fold"),
                          justify=justify, width=w, no_wrap=c.kind != "text", overflow="fold")
        for row_cells in cells:
            rt.add_row(*row_cells)
        console.print(rt)
    for note in _left_out(left_out):
        console.print(note, markup=False)
    if view.notes_when_verbose and not verbose:
        console.print("--verbose: the inputs, the engine's log lines and the formulas.")
        return buf.getvalue()
    for note in [*view.notes, unit_note(units)]:
        console.print(note, markup=False)
    return buf.getvalue()


def _layout(table: Table, cells: list[list[str]], width: int) -> list[int] | None:
    """Each column's width, chosen here (not by rich, which shrinks any column to fit): every
    column at least its _min_width, text columns then widened toward their natural width with
    what is left. None when even the minimum does not fit: print it vertically."""
    columns = [[r[i] for r in cells] for i in range(len(table.columns))]
    low = [_min_width(c, col) for c, col in zip(table.columns, columns, strict=True)]
    natural = [max([len(c.header), *map(len, col)]) for c, col in zip(table.columns, columns,
                                                                      strict=True)]
    # rich's SIMPLE_HEAD layout: one space of padding each side of a cell, a separator
    # between columns and an edge each side
    room = width - (3 * len(low) + 1)
    if sum(low) > room:
        return None
    if sum(natural) <= room:
        return natural
    spare = room - sum(low)
    want = [n - lo for n, lo in zip(natural, low, strict=True)]
    total = sum(want)
    out = [lo + (w * spare) // total for lo, w in zip(low, want, strict=True)]
    return out


def _min_width(column: Column, cells: list[str]) -> int:
    """The narrowest a column may be: its longest value whole (numbers never wrap, text
    wraps at spaces) and its header's longest word."""
    words = [w for text in cells for w in (text.split() if column.kind == "text" else [text])]
    header = column.header.split() or [""]
    return max(len(w) for w in [*words, *header])


def _vertical(table: Table, cells: list[list[str]], width: int) -> str:
    """One block per row: the row's first cell, then `label  value` lines."""
    import textwrap

    labels = [c.header for c in table.columns[1:]]
    pad = min(max((len(h) for h in labels), default=0), max(8, width // 3))
    out = [table.title, ""]
    for row_cells in cells:
        out.append(row_cells[0])
        for label, value in zip(labels, row_cells[1:], strict=True):
            room = max(20, width - pad - 4)
            if value and len(value) <= room and value.isprintable() and value == value.strip():
                lines = [value]  # what textwrap.wrap gives a line that fits, without its cost
            else:
                lines = textwrap.wrap(value, room, break_long_words=False,
                                      break_on_hyphens=False) or [""]
            head = label if len(label) <= pad else label[:pad - 1] + "."
            out.append(f"  {head:<{pad}}  {lines[0]}")
            out.extend(f"  {'':<{pad}}  {line}" for line in lines[1:])
        out.append("")
    return "\n".join(out)
