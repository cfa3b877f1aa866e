"""Terminal tables as plain text, without importing rich (about 20 ms of every table command's
start-up: a fifth of `kvplan size`).

kvplan's terminal output is plain text (no colour, no markup) in one shape: a left-aligned
title, rich's SIMPLE_HEAD box with column widths chosen by kvplan (render._layout), text
columns word-wrapped, number columns cropped, then notes word-wrapped at the terminal width.
This module writes exactly the text rich writes for that shape, for text that is printable
ASCII (one character = one terminal cell); render falls back to rich for anything else.
tests/test_render.py compares the two on generated tables.

The rules follow rich 13-15 (`rich/_wrap.py::divide_line`, `rich/text.py::Text.wrap`,
`rich/table.py::Table._render`, `rich/box.py::SIMPLE_HEAD`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from kvplan.core.patterns import lazy

_WORD = re.compile(r"\s*\S+\s*")  # a word and the spaces around it (rich's re_word)
_TRAILING_SPACE = lazy(r"\s+$")


def is_plain(text: str) -> bool:
    """Text whose width in terminal cells is its length: printable ASCII, no tab or newline."""
    return text.isascii() and text.isprintable()


def _breaks(text: str, width: int) -> list[int]:
    """Where to break `text` to fit `width` cells: at word starts, folding a word longer than
    a whole line (rich's divide_line with fold=True)."""
    breaks: list[int] = []
    offset = 0
    for match in _WORD.finditer(text):
        start, word = match.start(), match.group()
        word_length = len(word.rstrip())
        if width - offset >= word_length:
            offset += len(word)
        elif word_length > width:
            chunks = [word[i:i + width] for i in range(0, len(word), width)]
            for i, chunk in enumerate(chunks):
                if start:
                    breaks.append(start)
                if i == len(chunks) - 1:
                    offset = len(chunk)
                else:
                    start += len(chunk)
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    return breaks


def wrap(text: str, width: int, justify: str = "default", no_wrap: bool = False) -> list[str]:
    """`text` as the lines rich's Text.wrap makes of it (overflow "fold"): "left" pads each
    line to `width`, "right" right-aligns it, "default" leaves it as it is."""
    out: list[str] = []
    for line in text.split("\n"):
        if no_wrap or len(line) <= width:  # a line that fits has no break (_breaks)
            pieces = [line]
        else:
            cuts = [0, *_breaks(line, width), len(line)]
            pieces = [_rstrip_end(line[a:b], width) for a, b in zip(cuts, cuts[1:], strict=False)]
        if justify == "left":
            pieces = [p[:width].ljust(width) for p in pieces]
        elif justify == "right":
            pieces = [p.rstrip()[:width].rjust(width) for p in pieces]
        out.extend(p[:width] for p in pieces)
    return out


def _rstrip_end(piece: str, width: int) -> str:
    """Drop trailing spaces only as far as they pass `width` (rich's Text.rstrip_end)."""
    excess = len(piece) - width
    if excess > 0:
        match = _TRAILING_SPACE.search(piece)
        if match is not None:
            return piece[:len(piece) - min(len(match.group()), excess)]
    return piece


def paragraph(text: str, width: int) -> str:
    """`text` printed at a terminal `width` (rich's Console.print of a plain string)."""
    return "".join(line + "\n" for line in wrap(text, width))


def table(title: str, headers: Sequence[str], rows: Iterable[Sequence[str]],
          widths: Sequence[int], right: Sequence[bool]) -> str:
    """A SIMPLE_HEAD table: each column `widths[i]` wide plus a space of padding each side,
    right-aligned and never wrapped where `right[i]`, word-wrapped otherwise; headers are
    always word-wrapped (a number column's "per token (B)" is never cut to "per token ("),
    the header row aligned to its bottom line, other rows to their top."""
    outer = [w + 2 for w in widths]
    table_width = sum(outer) + len(outer) + 1
    out = [line + "\n" for line in wrap(title, table_width, "left")] if title else []
    blank_edge = " " * table_width + "\n"
    out.append(blank_edge)
    for index, row in enumerate([headers, *rows]):
        cells = [wrap(text, w, "right" if r else "left", no_wrap=r and index > 0)
                 for text, w, r in zip(row, widths, right, strict=True)]
        height = max(len(c) for c in cells)
        if index == 0:
            cells = [[" " * w] * (height - len(c)) + c for c, w in zip(cells, widths, strict=True)]
        else:
            cells = [c + [" " * w] * (height - len(c)) for c, w in zip(cells, widths, strict=True)]
        for line in range(height):
            out.append("  " + "   ".join(c[line] for c in cells) + "  \n")
        if index == 0:
            out.append(" " + "─" * (table_width - 2) + " \n")
    out.append(blank_edge)
    return "".join(out)
