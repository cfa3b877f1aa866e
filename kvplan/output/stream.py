"""Writing sweep rows: CSV and JSON stream row by row; a rich progress bar goes to stderr."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from typing import TextIO

from kvplan import __version__
from kvplan.planning.sweep import COLUMNS, SCHEMA


def _with_progress(rows: Iterable[tuple], total: int) -> Iterator[tuple]:
    from rich.progress import Progress

    with Progress(transient=True) as progress:  # rich's Console writes to stderr by default
        task = progress.add_task("sweep", total=total)
        for i, row in enumerate(rows, 1):
            yield row
            if i % 10_000 == 0:
                progress.update(task, completed=i)


def write_rows(out: TextIO, rows: Iterable[tuple], fmt: str, total: int,
               progress: bool = False, notes: Iterable[str] = ()) -> None:
    if progress:
        rows = _with_progress(rows, total)
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    elif fmt == "json":
        head = json.dumps({"schema": SCHEMA, "kvplan_version": __version__,
                           "columns": COLUMNS, "rows": []})
        out.write(head[:-2] + "\n")  # cut "]}" and stream the rows into the list
        first = True
        for row in rows:
            out.write(("" if first else ",\n") + json.dumps(row))
            first = False
        out.write("\n]}\n")
    else:
        out.write("| " + " | ".join(COLUMNS) + " |\n")
        out.write("| " + " | ".join("---" if c in ("model", "kv_dtype") else "---:"
                                    for c in COLUMNS) + " |\n")
        for row in rows:
            out.write("| " + " | ".join(f"{v:,}" if isinstance(v, int) else str(v)
                                        for v in row) + " |\n")
        out.write("\n")
        for note in notes:
            out.write(f"- {note}\n")
        out.write("- Units: sizes are exact bytes (B, no unit conversion); tokens are exact "
                  "counts.\n")
