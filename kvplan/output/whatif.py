"""The `kvplan whatif` result as a View: policies beside the baseline, prefix reuse, prefill
beside decode, offload tiers and the disaggregated plan."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kvplan.output.render import Column, Table, View, json_plain
from kvplan.output.render import milliseconds as _ms  # the tables' one ms format
from kvplan.planning.whatif import WhatIfResult

SCHEMA = "kvplan.whatif/2"  # 2: disaggregated wire/per-rank bytes, prefix needs, turns

WHATIF_NOTE = ("What-ifs: a policy's bytes assume the engine implements it; kvplan's baseline is "
               "the exact cache the engine keeps today. Capacity = the engine's KV budget // one "
               "request's bytes in whole blocks, for every row alike.")


def whatif_view(r: WhatIfResult) -> View:
    tables: list[Table] = []
    notes = [f"{r.model} on {r.deployment}: requests of {r.prompt_tokens:,} prompt + "
             f"{r.output_tokens:,} output tokens, blocks of {r.block_size} tokens.", WHATIF_NOTE]
    policy_rows = tuple({
        "policy": p.policy, "kv_dtype": p.kv_dtype, "kept_tokens": (
            f"{p.kept_tokens_min:,}" if p.kept_tokens_min == p.kept_tokens_max else
            f"{p.kept_tokens_min:,}-{p.kept_tokens_max:,}"),
        "request_bytes": p.request_bytes, "paged_request_bytes": p.paged_request_bytes,
        "saved": f"{1 - p.request_bytes / p.baseline_request_bytes:.1%}"
                 if p.baseline_request_bytes else "-",
        "max_requests": p.max_requests,
    } for p in r.policies)
    policies = Table("cache policies beside the exact baseline (per GPU)", (
        Column("policy", "policy"), Column("kv_dtype", "KV dtype"),
        Column("kept_tokens", "kept/layer"), Column("request_bytes", "request", "bytes"),
        Column("paged_request_bytes", "in blocks", "bytes"), Column("saved", "saved"),
        Column("max_requests", "requests", "int")), policy_rows)
    tables.append(policies)
    for p in r.policies[1:]:
        if p.policy == "none":
            notes.append(f"{p.kv_dtype} (no policy): {p.citation}.")
            continue
        notes.append(f"{p.policy} in {p.kv_dtype}: {p.citation}; assumes "
                     f"{'; '.join(p.assumptions)}.")
    if r.prefix is not None:
        x = r.prefix
        pairs: list[tuple[str, Any]] = [
            ("shared prefix tokens", x.shared_prefix_tokens),
            (f"{x.unit}s held once (the prefix's whole blocks)", x.shared_blocks)]
        pairs += [(f"  {n.kind} group: per request / shared",
                   f"{n.units_per_request:,} / {n.shared_units:,}") for n in x.needs]
        pairs += [
            (f"{x.unit}s per request", x.blocks_per_request),
            (f"{x.unit}s per request that hits", x.blocks_per_hit_request),
            ("requests without reuse", x.max_requests_without_reuse),
            ("requests with reuse", x.max_requests_with_reuse),
            (f"{x.unit}s saved", x.blocks_saved)]
        tables.append(Table("prefix reuse (whole blocks shared)", (
            Column("quantity", "quantity"), Column("value", "value")),
            tuple({"quantity": k, "value": v if isinstance(v, str) else f"{v:,}"}
                  for k, v in pairs)))
        notes.append(f"Prefix reuse ({x.citation}): hit rate {float(x.hit_rate):.0%}; only "
                     "whole blocks of the prefix are shared, its last partial block is private; "
                     "a sliding-window group shares only the prefix blocks still in its window "
                     "(vLLM frees the rest), recurrent state none.")
    if r.multi_turn is not None:
        m = r.multi_turn
        tables.append(Table(f"multi-turn reuse ({m.user_tokens:,} in + {m.output_tokens:,} out "
                            "per turn)", (
            Column("turn", "turn", "int"), Column("prompt_tokens", "prompt", "int"),
            Column("cached_tokens", "cached", "int"), Column("computed_tokens", "computed", "int"),
            Column("prefill_ms", "prefill (ms)"), Column("without_ms", "without reuse (ms)"),
            Column("request_bytes", "cache after", "bytes")),
            tuple({"turn": t.turn, "prompt_tokens": t.prompt_tokens,
                   "cached_tokens": t.cached_tokens, "computed_tokens": t.computed_tokens,
                   "prefill_ms": "-" if t.prefill_s is None else _ms(t.prefill_s),
                   "without_ms": "-" if t.prefill_without_reuse_s is None
                   else _ms(t.prefill_without_reuse_s),
                   "request_bytes": t.request_bytes} for t in m.turns)))
        notes.append(f"Multi-turn ({m.citation}): prefill computes {m.computed_tokens:,} tokens "
                     f"over the conversation instead of {m.computed_without_reuse_tokens:,}; "
                     "assumes the history stays cached between turns.")
        notes.extend(m.notes)
    if r.prefill is not None:
        f = r.prefill
        tables.append(Table("prefill beside decode", (
            Column("quantity", "quantity"), Column("value", "value")), (
            {"quantity": "prefill FLOPs", "value": f"{f.flops.total_flops:,}"},
            {"quantity": "  linear (2 x active params x tokens)",
             "value": f"{f.flops.linear_flops:,}"},
            {"quantity": "  attention", "value": f"{f.flops.attention_flops:,}"},
            {"quantity": f"peak dense {f.compute_dtype} FLOP/s per GPU",
             "value": f"{f.peak_flops_per_s:,}"},
            {"quantity": "  math dtype because", "value": f.compute_dtype_why},
            {"quantity": "time to first token (ms)", "value": _ms(f.ttft_s)},
            {"quantity": "decode batch", "value": f"{f.decode_batch:,}"},
            {"quantity": "decode context (tokens)", "value": f"{f.decode_context_tokens:,}"},
            {"quantity": "weights read per step (B)", "value": f"{f.weights_read_bytes:,}"},
            {"quantity": "KV read per step (B)", "value": f"{f.kv_read_bytes:,}"},
            {"quantity": "decode step floor (ms)", "value": _ms(f.decode_step_s)},
            {"quantity": "decode tokens/s (batch)", "value": f"{f.decode_tokens_per_s:,.1f}"})))
        notes.append(f"Prefill (Kaplan et al., arXiv:2001.08361, section 2.1: 2 FLOPs per "
                     f"parameter per token, plus attention): FLOPs / ({f.gpus} GPU x peak x "
                     f"efficiency {float(f.efficiency):.0%}); decode floor (kvplan plan's): "
                     "bytes read per step / HBM bandwidth (MoE: the experts a step touches, "
                     "uniform routing).")
        notes.extend(f.flops.assumptions)
    if r.tiers:
        tables.append(Table("offload tiers", (
            Column("name", "tier"), Column("capacity_bytes", "size", "bytes"),
            Column("bandwidth", "bandwidth (B/s)", "int"), Column("requests", "requests", "int"),
            Column("tokens", "tokens", "int"), Column("reload_ms", "reload (ms)")),
            tuple({"name": t.name, "capacity_bytes": t.capacity_bytes,
                   "bandwidth": t.bandwidth_bytes_per_s, "requests": t.requests,
                   "tokens": t.tokens, "reload_ms": _ms(t.reload_s)} for t in r.tiers)))
        notes.append("Offload (vLLM's KV offloading connector and LMCache move whole blocks): "
                     "a tier holds whole requests of this shape in whole blocks; reload = one "
                     "request's bytes / the tier's bandwidth.")
    if r.disaggregated is not None:
        d = r.disaggregated
        rows = [
            {"quantity": f"one copy of the prompt cache ({d.prefill_kv_dtype})",
             "value": f"{d.transfer_bytes:,}"}]
        rows += [{"quantity": f"  {k.kind} x {k.num_layers}", "value": f"{k.bytes:,}"}
                 for k in d.by_kind]
        rows += [
            {"quantity": "bytes on the wire (every decode rank's share)",
             "value": f"{d.wire_bytes:,}"},
            {"quantity": "  busiest decode rank pulls", "value": f"{d.per_decode_rank_bytes:,}"},
            {"quantity": "  busiest prefill rank sends",
             "value": f"{d.per_prefill_rank_bytes:,}"},
            {"quantity": f"link {d.link} per GPU (B/s)", "value": f"{d.link_bytes_per_s:,}"},
            {"quantity": "transfer time (ms)", "value": _ms(d.transfer_s)},
            {"quantity": "prefill GPU-ms per request", "value": _ms(d.prefill_gpu_s)},
            {"quantity": f"decode GPU-ms per request (batch {d.decode_batch:,})",
             "value": _ms(d.decode_gpu_s)},
            {"quantity": "prefill GPUs per decode GPU",
             "value": f"{d.prefill_gpus_per_decode_gpu:.3f}"}]
        tables.append(Table("disaggregated prefill and decode", (
            Column("quantity", "quantity"), Column("value", "value")), tuple(rows)))
        notes.append(f"Disaggregated: {d.link_note}, one link per GPU; vLLM's NIXL connector "
                     "has each decode rank read its own KV heads from the prefill rank that "
                     "holds them (a replicated cache such as MLA's latent once per rank), so the "
                     "transfer is the busier side's per-rank bytes over one link; the ratio keeps "
                     "neither pool idle (prefill GPU-seconds / decode GPU-seconds per request).")
    notes.extend(r.notes)
    payload = {"schema": SCHEMA, **json_plain(asdict(r))}
    from kvplan import __version__

    payload["kvplan_version"] = __version__
    return View(tables, payload, policies, notes)
