"""`kvplan plan --rate` as a View: requests in flight, then replicas by memory, bandwidth and
compute, aggregated and split into prefill and decode pools; bounds, with their assumptions."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kvplan.output.render import Column, Table, View, json_plain
from kvplan.output.render import milliseconds as _ms  # the tables' one ms format
from kvplan.planning.traffic import SCHEMA, TrafficLayouts, TrafficPlan


def traffic_view(t: TrafficPlan, deployment: str, layouts: TrafficLayouts | None = None
                 ) -> View:
    def latency(value: Any, target: bool) -> str:
        return f"{_ms(value)} ({'target' if target else 'floor'})"

    load = Table("traffic and requests in flight (Little's law)", (
        Column("quantity", "quantity"), Column("value", "value")), tuple(
        {"quantity": k, "value": v} for k, v in (
            ("rate (requests/s)", f"{float(t.rate_per_s):,.3f}"),
            ("mean prompt / output tokens",
             f"{float(t.mean_prompt_tokens):,.1f} / {float(t.mean_output_tokens):,.1f}"),
            ("TTFT (ms)", latency(t.ttft_s, t.ttft_target)),
            ("ITL (ms)", latency(t.itl_s, t.itl_target)),
            ("time in system (s) = TTFT + output x ITL", f"{float(t.time_in_system_s):,.3f}"),
            ("requests in flight = rate x time", f"{float(t.in_flight):,.2f}"),
            ("  in prefill / in decode",
             f"{float(t.in_flight_prefill):,.2f} / {float(t.in_flight_decode):,.2f}"),
            ("KV cache in flight (one copy, B)", f"{t.kv_bytes_in_flight:,}"),
            ("mean prompt's prefill floor (ms)", _ms(t.prefill_floor_s)),
            (f"decode step at batch {t.decode_batch:,} ({t.decode_context_tokens:,} tokens, ms)",
             _ms(t.decode.ms_per_token / 1000) if t.decode else "-"))))
    replicas = Table(f"replicas of {deployment} ({t.gpus_per_replica} GPU each): lower bounds", (
        Column("bound", "bound"), Column("share", "replicas' worth"),
        Column("replicas", "replicas", "int"), Column("how", "from")), (
        {"bound": "memory", "share": f"{float(t.memory_share):,.2f}",
         "replicas": t.replicas_by_memory,
         "how": (f"in flight / {t.max_requests_per_replica:,} ({t.memory_constraint})"
                 if t.memory_by_request_cap else
                 f"in flight x {float(t.units_per_request):,.1f} units ({t.memory_constraint}) / "
                 f"{t.capacity_units_per_replica:,} per replica")},
        {"bound": "bandwidth", "share": f"{float(t.decode_share):,.2f}",
         "replicas": t.replicas_by_bandwidth,
         "how": f"rate x output x step / batch {t.decode_batch:,}"},
        {"bound": "compute", "share": f"{float(t.compute_share):,.2f} "
                                       f"({float(t.prefill_share):,.2f} prefill)",
         "replicas": t.replicas_by_compute,
         "how": f"rate x FLOPs / ({t.gpus_per_replica} x {t.compute_dtype} peak x "
                f"{float(t.efficiency):.0%})"},
        {"bound": f"aggregated (binds: {t.aggregated_binding})", "share": "",
         "replicas": t.aggregated_replicas,
         "how": "max(memory, prefill + decode time shares)"},
        {"bound": "split: prefill pool", "share": "", "replicas": t.prefill_replicas,
         "how": "prefill FLOPs"},
        {"bound": f"split: decode pool (binds: {t.decode_binding})", "share": "",
         "replicas": t.decode_replicas, "how": "max(memory of decoding requests, bandwidth)"}))
    notes = [f"These are bounds: the fewest replicas that could carry this traffic, not a "
             f"simulation. Aggregated: {_n(t.aggregated_replicas, 'replica')} = "
             f"{_n(t.aggregated_gpus, 'GPU')}; split: {t.prefill_replicas} prefill + "
             f"{t.decode_replicas} decode = {_n(t.split_gpus, 'GPU')}."]
    notes += [f"Assumption: {a}." for a in t.assumptions]
    warnings = [f"not reachable on this layout at any rate: {x}" for x in t.infeasible]
    payload: dict[str, Any] = {"schema": SCHEMA, "deployment": deployment,
                               **json_plain(asdict(t)), "aggregated_gpus": t.aggregated_gpus,
                               "split_gpus": t.split_gpus}
    tables = [load, replicas]
    if layouts is not None:
        rows = tuple({"layout": f"TP {o.tp} x PP {o.pp}", "gpus": o.gpus_per_replica,
                      "replicas": o.plan.aggregated_replicas if o.plan else None,
                      "total": o.total_gpus,
                      "binds": o.plan.aggregated_binding if o.plan else "",
                      "note": o.error or ("fewest GPUs" if o is layouts.best else "")}
                     for o in layouts.options)
        tables.insert(0, Table("layouts tried (aggregated replicas)", (
            Column("layout", "layout"), Column("gpus", "GPUs/replica", "int"),
            Column("replicas", "replicas", "int"), Column("total", "GPUs in all", "int"),
            Column("binds", "binds"), Column("note", "note")), rows))
        payload["layouts"] = [{"tp": o.tp, "pp": o.pp, "gpus_per_replica": o.gpus_per_replica,
                               "aggregated_replicas": r["replicas"], "total_gpus": o.total_gpus,
                               "error": o.error} for o, r in zip(layouts.options, rows,
                                                                 strict=True)]
    from kvplan import __version__

    payload["kvplan_version"] = __version__
    headline = (f"{_n(t.aggregated_replicas, 'replica')} aggregated (binds: "
                f"{t.aggregated_binding}); {t.prefill_replicas} prefill + {t.decode_replicas} "
                "decode split")
    return View(tables, payload, replicas, notes, warnings, headline)


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
