"""`kvplan explain` as a View: each figure the log printed beside kvplan's, the difference,
and the log line it came from."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kvplan.output.render import Column, Table, View, human_bytes
from kvplan.planning.explain import BYTE_QUANTITIES, TOLERANCE_TEXT, Explanation, Row

SCHEMA = "kvplan.explain/1"


def _cell(value: Any, row: Row, units: str) -> Any:
    """A figure as the other tables print one: bytes as a size in `units`, counts with
    thousands separators, a ratio to two decimals (JSON keeps the raw numbers)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int) and (row.quantity in BYTE_QUANTITIES
                                   or row.quantity.endswith("_bytes")):
        return human_bytes(value, units)
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return value


def explain_view(e: Explanation, units: str = "iec") -> View:
    from kvplan import __version__

    rows = tuple({"quantity": r.quantity, "basis": r.basis, "logged": _cell(r.logged, r, units),
                  "kvplan": _cell(r.kvplan, r, units),
                  "diff": "-" if r.diff_percent is None else f"{r.diff_percent:+.2f}%",
                  "status": r.status} for r in e.rows)
    table = Table(f"{e.engine} start-up log of {e.model}: logged vs kvplan", (
        Column("quantity", "quantity"), Column("basis", "basis"),
        Column("logged", "logged", "figure"), Column("kvplan", "kvplan", "figure"),
        Column("diff", "diff", "figure"), Column("status", "status")), rows)
    # CSV: the figures as numbers, as JSON has them
    csv_rows = tuple({**row, "logged": r.logged, "kvplan": r.kvplan}
                     for row, r in zip(rows, e.rows, strict=True))
    csv_table = Table(table.title, tuple(Column(c.key, c.header) for c in table.columns),
                      csv_rows)
    bad = sum(r.status == "DIFF" for r in e.rows)
    notes = [f"{'OK' if not bad else f'{bad} DIFF'}: KV lines recomputed from the logged "
             f"budget must agree within {TOLERANCE_TEXT} (exit 1 otherwise); 'from settings' "
             "rows predict the budget and its terms from the GPU and settings alone.",
             "Settings read from the log: " + (", ".join(f"{k}={v}" for k, v in
                                                         sorted(e.settings.items())) or "none")]
    notes += [f"{r.quantity}: {r.line}" + (f" ({r.note})" if r.note else "")
              for r in e.rows if r.line]
    payload = {"schema": SCHEMA, "kvplan_version": __version__, "ok": e.ok,
               **asdict(e)}
    return View([table], payload, csv_table, notes, list(e.notes))
