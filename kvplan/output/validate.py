"""validate's results -> Reports (the table, Markdown, CSV and JSON of `kvplan validate`), and
the lines it writes on stderr while it works."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from kvplan import __version__
from kvplan.output.render import human_bytes

if TYPE_CHECKING:
    from kvplan.output.render import View
    from kvplan.validate.results import (
        AllocationPlan,
        AllResult,
        Progress,
        ValidateResult,
    )

def validate_view(result: ValidateResult) -> View:
    from kvplan.output.render import Column, Table, View
    from kvplan.validate.results import SCHEMA

    r = result
    rank0 = r.ranks[0]
    cuda_allocated = rank0.allocated_bytes  # None on the CPU
    cuda = cuda_allocated is not None
    alloc_header = "allocated (CUDA)" if cuda else "resident change"
    kinds = Table(
        title=(f"{r.model}: {r.layout} layout, {r.tokens:,} tokens x batch {r.batch}, "
               f"KV {r.kv_dtype}, on {rank0.device}"
               + (f", {r.layers_validated} of {r.num_layers} layers" if r.full_predicted_bytes
                  is not None else "")),
        columns=(Column("kind", "layer kind"), Column("num_layers", "layers", "int"),
                 Column("predicted_bytes", "predicted (B)", "exact"),
                 Column("measured_bytes", "measured (B)", "exact"),
                 Column("diff_bytes", "diff (B)", "exact"),
                 Column("allocated_bytes", alloc_header, "exact"),
                 Column("overhead_bytes", "allocator overhead", "exact")),
        rows=tuple(asdict(k) for k in rank0.kinds) + ({
            "kind": "total", "num_layers": r.layers_validated,
            "predicted_bytes": rank0.predicted_bytes, "measured_bytes": rank0.measured_bytes,
            "diff_bytes": rank0.diff_bytes,
            "allocated_bytes": cuda_allocated if cuda else rank0.resident_bytes,
            "overhead_bytes": (cuda_allocated - rank0.measured_bytes
                               if cuda_allocated is not None else None)},),
    )
    tables = [kinds]
    rank_rows = [asdict(x) | {"rank": str(x.rank)} for x in r.ranks]
    rank_columns = (Column("rank", "rank"), Column("device", "device"),
                    Column("predicted_bytes", "predicted (B)", "exact"),
                    Column("measured_bytes", "measured (B)", "exact"),
                    Column("diff_bytes", "diff (B)", "exact"),
                    Column("allocated_bytes", "allocated (CUDA)", "exact"),
                    Column("device_free_drop_bytes", "device free drop", "exact"),
                    Column("resident_bytes", "resident change", "exact"))
    if len(r.ranks) > 1:
        rank_rows.append({"rank": "min", "device": "", "predicted_bytes": min(
            x.predicted_bytes for x in r.ranks), "measured_bytes": r.measured_bytes,
            "diff_bytes": r.diff_bytes})
        tables.append(Table(f"{len(r.ranks)} ranks (TP {r.tp}), each its own shard",
                            rank_columns, tuple(rank_rows)))
    decode = rank0.decode
    if decode:
        tables.append(Table(
            f"Decode check: {decode.steps} steps, one query token per request",
            (Column("quantity", "quantity"), Column("value", "value", "exact")),
            tuple({"quantity": q, "value": v} for q, v in (
                ("time per step (ns)", decode.ns_per_step),
                ("K/V bytes read per step", decode.bytes_per_step),
                ("achieved bytes per second", decode.achieved_bytes_per_s),
                ("kvplan's bytes per step", decode.predicted_bytes_per_step),
                (f"predicted floor (ns) on {decode.gpu or 'this device'}",
                 decode.floor_ns_per_step),
            ))))
    status = "OK: measured == predicted" if r.ok else "DIFF: measured != predicted"
    notes = [
        f"{status} ({r.measured_bytes:,} vs {r.predicted_bytes:,} bytes per rank).",
        "Predicted: kvplan's maths; measured: the storage bytes of the tensors the layout "
        "allocates (untyped_storage().nbytes()), built from its shapes, not from kvplan.",
        _layout_note(r),
    ]
    if r.full_predicted_bytes is not None:
        notes.append(f"Scaled up: {r.layers_validated} of {r.num_layers} layers validated; "
                     f"per kind, the measurement scales to {r.scaled_measured_bytes:,} bytes "
                     f"for the whole model (kvplan predicts {r.full_predicted_bytes:,}).")
    if cuda:
        notes.append("Allocated: change in torch.cuda.memory_allocated(); device free drop: "
                     "change in torch.cuda.mem_get_info() (the caching allocator's segments).")
    else:
        notes.append("Resident change: the process's RSS change (page-granular, noisy for "
                     "small caches); only the storage bytes are compared.")
    payload = {
        "schema": SCHEMA, "kvplan_version": __version__,
        "inputs": {"model": r.model, "layout": r.layout, "tokens": r.tokens, "batch": r.batch,
                   "kv_dtype": r.kv_dtype, "tp": r.tp, "block_size": r.block_size,
                   "max_len": r.max_len, "device": r.device, "layers": r.layers_validated},
        "ok": r.ok, "predicted_bytes": r.predicted_bytes, "measured_bytes": r.measured_bytes,
        "diff_bytes": r.diff_bytes, "num_layers": r.num_layers,
        "layers_validated": r.layers_validated,
        "full_predicted_bytes": r.full_predicted_bytes,
        "scaled_measured_bytes": r.scaled_measured_bytes,
        "kinds": [asdict(k) for k in rank0.kinds],
        "ranks": [asdict(x) for x in r.ranks],
    }
    return View(tables, payload, kinds, notes)


def _layout_note(r: ValidateResult) -> str:
    """The engine's sentence about its layout, with this run's figures."""
    return r.layout_note.format(batch=r.batch, tokens=r.tokens, block_size=r.block_size,
                                max_len=r.max_len)


def validate_all_view(result: AllResult) -> View:
    from kvplan.output.render import Column, Table, View
    from kvplan.validate.results import SCHEMA_ALL

    columns = (Column("model", "model"), Column("layout", "layout"),
               Column("predicted_bytes", "predicted (B)", "exact"),
               Column("measured_bytes", "measured (B)", "exact"),
               Column("diff_bytes", "diff (B)", "exact"), Column("status", "status"))
    rows = tuple(asdict(r) for r in result.rows)
    bad = sum(r.status == "DIFF" for r in result.rows)
    table = Table(f"validate --all: {len({r.model for r in result.rows})} models, "
                  f"{result.tokens} tokens x batch {result.batch} (static layouts "
                  f"{result.max_len}), KV {result.kv_dtype}, CPU", columns, rows)
    payload = {"schema": SCHEMA_ALL, "kvplan_version": __version__, "ok": result.ok,
               "inputs": {"tokens": result.tokens, "batch": result.batch,
                          "max_len": result.max_len, "kv_dtype": result.kv_dtype},
               "elapsed_ms": result.elapsed_ms, "rows": [asdict(r) for r in result.rows]}
    notes = [f"{'OK' if not bad else f'{bad} DIFF'}: {len(rows)} validations in "
             f"{result.elapsed_ms:,} ms."]
    return View([table], payload, table, notes)



def plan_line(plan: AllocationPlan, units: str = "iec") -> str:
    """What a validation is about to allocate, said before it allocates anything."""
    free = (f"; {human_bytes(plan.free_bytes, units)} free"
            if plan.free_bytes is not None else "")
    return (f"kvplan: validate allocates {human_bytes(plan.total_bytes, units)} "
            f"({plan.total_bytes:,} bytes) in {plan.num_tensors:,} tensors on {plan.device}, "
            f"without touching their pages{free}")


def progress_line(step: Progress) -> str:
    return f"kvplan: validate [{step.done + 1}/{step.total}] {step.label}"
