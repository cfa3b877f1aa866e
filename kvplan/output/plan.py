"""`kvplan plan` and `kvplan compare` results shown: one View builder each (plan_view,
compare_view) and the small tables around them. JSON keys are the library's field names; the
human strings (GiB, thousands separators, fractions) are made here."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.engines.base import Deployment
    from kvplan.output.render import Table, View
    from kvplan.planning.plan import Capacity, LayoutResult, WorkloadResult
    from kvplan.planning.verdict import Start, Verdict


def bytes_table(title: str, rows: list[tuple[str, int]]) -> Table:
    from kvplan.output.render import Column, Table

    return Table(title, (Column("quantity", "quantity"), Column("bytes", "bytes", "exact"),
                         Column("human", "size", "bytes")),
                 tuple({"quantity": q, "bytes": v, "human": v} for q, v in rows))


def _deployment_dict(dep: Deployment) -> dict[str, Any]:
    return {"model": dep.spec.name, "engine": dep.engine, "engine_version": dep.engine_version,
            "gpu": dep.gpu_name, "gpu_memory_bytes": dep.gpu_memory_bytes,
            "tp": dep.tp, "pp": dep.pp, "dp": dep.dp, "dcp": dep.dcp,
            "expert_parallel": dep.expert_parallel, "dp_attention": dep.dp_attention,
            "num_gpus": dep.num_gpus, "kv_dtype": dep.kv_dtype,
            "max_model_len": dep.context_limit(), "block_size": dep.block_size,
            "kv_memory_bytes": dep.kv_memory_bytes, "memory_fraction": dep.memory_fraction,
            "weights_dtype": dep.weights_dtype}


def _verdict_fields(start: Start | None, verdict: Verdict | None) -> dict[str, Any]:
    """The verdict in a plan's JSON (kvplan.planning.verdict): fits, engine_starts, the
    reason when not, and one GPU's budget terms in bytes."""
    if start is None or verdict is None:
        return {}
    return {"fits": verdict.fits, "engine_starts": verdict.engine_starts,
            "reason": verdict.reason, "budget_terms": start.budget_terms()}


def refused_view(dep: Deployment, start: Start, extra_tables: list[Table],
                 warnings: list[str]) -> View:
    """A deployment whose engine would not start before any capacity exists (no memory is
    left for the KV cache): the reason and the budget terms, as one document."""
    from kvplan import __version__
    from kvplan.engines.registry import get as get_engine
    from kvplan.output.render import Column, Table, View, json_plain
    from kvplan.planning.plan import SCHEMA
    from kvplan.planning.verdict import Verdict

    label = get_engine(dep.engine).display_name or dep.engine
    where = f"{dep.num_gpus}x {dep.gpu_name}" if dep.gpu_name else f"{dep.num_gpus} GPU(s)"
    terms = [(name, value) for name, value in (
        ("GPU memory (the budget starts from)", start.memory_bytes),
        ("- weights", start.weights_bytes),
        ("= left for the KV cache", start.kv_cache_bytes)) if value is not None]
    tables = [bytes_table("Memory per GPU (fullest stage)", terms)] if terms else []
    payload = {
        "schema": SCHEMA, "kvplan_version": __version__, "deployment": _deployment_dict(dep),
        "budget": None, "engine": {}, "log_lines": [], "answer": {}, "target_met": False,
        "tables": {t.title: [json_plain(r) for r in t.rows] for t in extra_tables},
        "notes": [start.hint] if start.hint else [], "warnings": warnings,
        **_verdict_fields(start, Verdict(False, False, start.reason))}
    csv_row = {"model": dep.spec.name, "engine": dep.engine, "gpu": dep.gpu_name,
               "tp": dep.tp, "pp": dep.pp, "kv_dtype": dep.kv_dtype, "fits": False,
               "reason": start.reason}
    csv_table = Table("plan", tuple(Column(k, k) for k in csv_row), (csv_row,))
    return View(tables + extra_tables, payload, csv_table, [], warnings,
                headline=f"{label} would not start on {where}: {start.reason}")


def plan_view(cap: Capacity, answer: dict[str, Any], target_met: bool | None,
              extra_tables: list[Table], warnings: list[str], start: Start | None = None,
              verdict: Verdict | None = None) -> View:
    from kvplan import __version__
    from kvplan.output.render import Column, Table, View, json_plain
    from kvplan.output.tables import class_defaults_notes
    from kvplan.planning.plan import SCHEMA, engine_log_lines, engine_numbers

    dep = cap.deployment
    where = (f"{dep.num_gpus} x {dep.gpus_shown()}" if dep.gpu_name else "given KV budget")
    dp_attention = dep.dp_attention and dep.dp > 1
    par = f"TP {dep.tp} x PP {dep.pp}" + \
        (f" x DP {dep.dp}" if dep.dp > 1 and not dp_attention else "") + \
        (f", DP attention {dep.dp}" if dp_attention else "") + \
        (f", DCP {dep.dcp}" if dep.dcp > 1 else "") + (", EP" if dep.expert_parallel else "")
    head = (f"{dep.spec.name} on {where} ({par}), {dep.engine}"
            f"{' ' + dep.engine_version if dep.engine_version else ''}, KV {cap.kv_format}, "
            f"max length {dep.context_limit():,}")
    tables = []
    rows = getattr(cap.engine, "memory_rows", lambda _: None)(cap)
    if rows is not None:
        # the engine's own account of one GPU (llama.cpp: a fixed cache and what is left;
        # TensorRT-LLM: a fraction of what the profile leaves)
        tables.append(bytes_table("Memory per GPU", rows))
    elif cap.budget is not None and cap.budget.method == "estimated":
        b = cap.budget
        title, weights, activation = ("Memory per GPU (fullest stage)", max(b.weights_bytes),
                                      max(b.activation_bytes))
        if dep.stage_gpu_memory_bytes:  # a GPU per stage: the stage left with the least
            i = b.available_kv_cache_bytes.index(b.available)
            title = f"Memory per GPU (stage {i}, {dep.stage_gpu_names[i]}, the least left)" \
                if dep.stage_gpu_names else f"Memory per GPU (stage {i}, the least left)"
            weights, activation = b.weights_bytes[i], b.activation_bytes[i]
        tables.append(bytes_table(title, [
            ("GPU memory (reported)", b.total_memory_bytes),
            (f"x utilization {b.utilization}", b.requested_bytes),
            ("- weights", weights),
            ("- activation peak", activation),
            ("- non-torch", b.non_torch_bytes),
            ("- CUDA graphs", b.cudagraph_bytes),
            ("= KV cache budget", b.available),
        ]))
    numbers = engine_numbers(cap)
    tables.append(Table("Engine start-up numbers",
                        (Column("name", "name"), Column("value", "value")),
                        tuple({"name": k, "value": _show(v)} for k, v in numbers.items())))
    tables.append(Table("Answer", (Column("name", "question"), Column("value", "answer")),
                        tuple({"name": k, "value": _show(v)} for k, v in answer.items())))
    tables += extra_tables
    payload = {
        "schema": SCHEMA, "kvplan_version": __version__,
        "deployment": _deployment_dict(dep),
        "budget": json_plain(asdict(cap.budget)) if cap.budget is not None else None,
        "engine": json_plain(numbers), "log_lines": engine_log_lines(cap),
        "answer": json_plain(answer), "target_met": target_met,
        "tables": {t.title: [json_plain(r) for r in t.rows] for t in extra_tables},
        "notes": list(cap.notes) + class_defaults_notes(dep.spec), "warnings": warnings,
        **_verdict_fields(start, verdict),
    }
    csv_row = {"model": dep.spec.name, "engine": dep.engine, "gpu": dep.gpu_name,
               "tp": dep.tp, "pp": dep.pp, "kv_dtype": cap.kv_format,
               # the engine's own figure under a name the answer also uses (vLLM's
               # max_concurrency is at max_model_len, the answer's at --context): both kept
               **{(f"engine_{k}" if k in answer else k): v for k, v in numbers.items()
                  if not isinstance(v, (list, tuple))},
               **{k: json_plain(v) for k, v in answer.items()}, "target_met": target_met,
               **({"fits": verdict.fits} if verdict is not None else {})}
    csv_table = Table("plan", tuple(Column(k, k) for k in csv_row), (csv_row,))
    notes = [f"Deployment: {head}."]
    notes += ["Engine log lines: " + " | ".join(engine_log_lines(cap))] \
        if engine_log_lines(cap) else []
    notes += list(cap.notes)
    notes += class_defaults_notes(dep.spec)
    notes += _formula_notes()
    return View(tables, payload, csv_table, notes, warnings,
                headline=_headline(cap, answer, target_met, start), notes_when_verbose=True)


def _headline(cap: Capacity, answer: dict[str, Any], met: bool | None,
              start: Start | None = None) -> str:
    """The answer in one line: '64 requests of 32,768 tokens fit on 1x H100 SXM (vLLM 0.33),
    limited by KV blocks'."""
    dep, engine = cap.deployment, cap.engine
    latest = getattr(engine, "latest_version", None)
    version = dep.engine_version or (".".join(map(str, latest[:2])) if latest else "")
    label = f"{engine.display_name or dep.engine} {version}".strip()
    where = (f"{dep.num_gpus}x {dep.gpus_shown()}" if dep.gpu_name
             else f"{dep.num_gpus} GPU(s) with the given KV budget")
    on = f"on {where} ({label})"
    if start is not None and not start.starts:
        return f"{engine.display_name or dep.engine} would not start {on}: {start.reason}"

    def requests(n: int) -> str:
        return f"{n:,} request{'' if n == 1 else 's'}"

    lead = ""
    if "fewest_gpus" in answer:
        if answer["fewest_gpus"] is None:
            return f"No layout tried meets the target ({label})"
        lead = (f"Fewest GPUs: {answer['fewest_gpus']} (TP {answer['tp']} x PP "
                f"{answer['pp']}). ")
    limited = f", limited by {answer['limited_by']}" if answer.get("limited_by") else ""
    if "fits" in answer:
        n = answer["requests"]
        verdict = (f"{'fits' if n == 1 else 'fit'} {answer['headroom_factor']:.2f} times over"
                   if answer["fits"] else "do not fit")
        why = f": {answer['reason']}" if not answer["fits"] and answer.get("reason") else ""
        return (f"{lead}{requests(n)} (longest {answer['longest_tokens']:,} tokens) "
                f"{verdict} {on}{why}")
    if "max_context_tokens" in answer:
        if answer["max_context_tokens"] <= 0:
            return f"{lead}{requests(answer['concurrency'])} do not fit at all {on}{limited}"
        verb = "fits" if answer["concurrency"] == 1 else "fit"
        return (f"{lead}{requests(answer['concurrency'])} of up to "
                f"{answer['max_context_tokens']:,} tokens each {verb} {on}{limited}")
    if "max_concurrency" in answer:
        n, ctx = answer["max_concurrency"], answer["context_tokens"]
        want = answer.get("target_concurrency")
        short = f" ({want:,} wanted)" if want is not None and met is False else ""
        if n <= 0:
            return f"{lead}No request of {ctx:,} tokens fits {on}{limited}"
        verb = "fits" if n == 1 else "fit"
        return f"{lead}{requests(n)} of {ctx:,} tokens {verb} {on}{short}{limited}"
    return f"{lead}{dep.spec.name} {on}"


def _show(value: Any) -> str:
    from kvplan.output.render import json_plain

    if value is None:  # a figure the engine does not have here (SGLang's SWA pool, no SWA)
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(json_plain(value))


def name_value_table(title: str, values: dict[str, Any]) -> Table:
    from kvplan.output.render import Column, Table

    return Table(title, (Column("name", "name"), Column("value", "value")),
                 tuple({"name": k, "value": _show(v)} for k, v in values.items()))


def uses_table(result: WorkloadResult) -> Table:
    from kvplan.output.render import Column, Table

    return Table("Workload use per pool", (
        Column("name", "pool"), Column("unit", "unit"), Column("needed", "needed", "int"),
        Column("capacity", "capacity", "int"), Column("shared_saving", "saved by sharing",
                                                      "int")),
        tuple(asdict(u) for u in result.uses))


def layout_table(layout: LayoutResult) -> Table:
    from kvplan.output.render import Column, Table

    rows = tuple({"num_gpus": o.num_gpus, "tp": o.tp, "pp": o.pp, "dp": o.dp, "dcp": o.dcp,
                  "meets_target": "yes" if o.meets_target else "no",
                  "max_requests": o.max_requests, "kv_budget_bytes": o.kv_budget_bytes,
                  "error": o.error} for o in layout.options)
    extra = [Column("dp", "DP", "int")] if any(o.dp > 1 for o in layout.options) else []
    extra += [Column("dcp", "DCP", "int")] if any(o.dcp > 1 for o in layout.options) else []
    return Table(f"Layouts tried for {layout.target}", (
        Column("num_gpus", "GPUs", "int"), Column("tp", "TP", "int"), Column("pp", "PP", "int"),
        *extra, Column("meets_target", "meets target"), Column("max_requests", "requests", "int"),
        Column("kv_budget_bytes", "KV budget/GPU", "bytes"), Column("error", "why not")), rows)


COMPARE_KEYS = ("model", "engine", "gpu", "num_gpus", "kv_dtype", "weights_per_gpu_bytes",
                "kv_budget_bytes", "kv_bytes_per_token", "token_capacity", "context_tokens",
                "max_concurrency", "max_context_tokens", "error",
                # the verdict (kvplan.planning.verdict): `compare` exits 1 when a row fails
                "fits", "engine_starts", "reason")
# with --policy: each deployment once per policy (the baseline first), side by side
POLICY_KEYS = ("policy", "policy_kv_dtype", "policy_request_bytes", "policy_max_requests")


def compare_view(rows: list[dict[str, Any]], with_policies: bool = False) -> View:
    from kvplan import __version__
    from kvplan.output.render import Column, Table, View
    from kvplan.planning.plan import COMPARE_SCHEMA

    keys = COMPARE_KEYS + (POLICY_KEYS if with_policies else ())
    full = [{k: r.get(k) for k in keys} for r in rows]
    columns = (
        Column("model", "model"), Column("engine", "engine"), Column("gpu", "GPU"),
        Column("num_gpus", "GPUs", "int"), Column("kv_dtype", "KV dtype"),
        Column("weights_per_gpu_bytes", "weights", "bytes"),
        Column("kv_budget_bytes", "KV budget", "bytes"),
        Column("kv_bytes_per_token", "KV B/token", "exact"),
        Column("token_capacity", "token slots", "int"),
        Column("context_tokens", "context", "int"),
        Column("max_concurrency", "max requests", "int"),
        Column("max_context_tokens", "max context", "int"),
        *((Column("policy", "policy"), Column("policy_request_bytes", "request", "bytes"),
           Column("policy_max_requests", "requests (policy)", "int"))
          if with_policies else ()),
        Column("fits", "fits"), Column("reason", "why not"), Column("error", "error"))
    shown = tuple(c for c in columns
                  if any(r.get(c.key) not in (None, "") for r in full) or c.key == "model")
    table = Table(f"{len(full)} deployment(s) side by side", shown, tuple(full))
    payload = {"schema": COMPARE_SCHEMA, "kvplan_version": __version__, "rows": full}
    notes = ["Per GPU: weights, KV budget and KV bytes per token are those of one GPU (the "
             "fullest pipeline stage).",
             "token slots: the engine's KV pool in tokens (vLLM num_blocks x block size, "
             "SGLang max_total_num_tokens, TRT-LLM blocks x 32, llama.cpp cells).",
             "max requests: whole requests of `context` tokens at once, blocks rounded up."]
    csv_table = Table("compare", tuple(Column(k, k) for k in keys), tuple(full))
    if with_policies:
        notes.append("policy rows: the same request under a cache policy (a what-if the engine "
                     "must implement; kvplan whatif cites each paper); requests (policy) = the "
                     "KV budget // the request's bytes in whole blocks, the baseline row alike.")
    notes += _formula_notes()
    return View([table], payload, csv_table, notes)


def _formula_notes() -> list[str]:
    from kvplan.output.tables import BUDGET_FORMULA, FORMULA

    return [FORMULA, BUDGET_FORMULA]
