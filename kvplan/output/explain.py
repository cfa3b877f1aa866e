"""`kvplan explain` as a View: each figure the log printed beside kvplan's, the difference,
and the log line it came from."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kvplan.output.render import Column, Table, View
from kvplan.planning.explain import TOLERANCE_TEXT, Explanation

SCHEMA = "kvplan.explain/1"


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:,.2f}"
    return value


def explain_view(e: Explanation) -> View:
    from kvplan import __version__

    rows = tuple({"quantity": r.quantity, "basis": r.basis, "logged": _cell(r.logged),
                  "kvplan": _cell(r.kvplan),
                  "diff": "-" if r.diff_percent is None else f"{r.diff_percent:+.2f}%",
                  "status": r.status} for r in e.rows)
    table = Table(f"{e.engine} start-up log of {e.model}: logged vs kvplan", (
        Column("quantity", "quantity"), Column("basis", "basis"), Column("logged", "logged"),
        Column("kvplan", "kvplan"), Column("diff", "diff"), Column("status", "status")), rows)
    bad = sum(r.status == "DIFF" for r in e.rows)
    notes = [f"{'OK' if not bad else f'{bad} DIFF'}: KV lines recomputed from the logged "
             f"budget must agree within {TOLERANCE_TEXT} (exit 1 otherwise); 'from settings' "
             "rows predict the budget and its terms from the GPU and settings alone.",
             "Settings read from the log: " + (", ".join(f"{k}={v}" for k, v in
                                                         sorted(e.settings.items())) or "none")]
    notes += [f"{r.quantity}: {r.line}" for r in e.rows if r.line]
    payload = {"schema": SCHEMA, "kvplan_version": __version__, "ok": e.ok,
               **asdict(e)}
    return View([table], payload, table, notes, list(e.notes))
