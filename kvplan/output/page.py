"""A one-page sizing report for docs: per-token and per-request sizes, a context-by-batch
grid, the capacity on chosen GPUs for each KV dtype, and a chart.

    r = sizing_report(resolve("llama-3.1-8b"), gpus=["h100"], kv_dtypes=["auto", "fp8"])
    text = report_markdown(r, chart="sizing.svg")   # the page, through kvplan.output.render
    chart, warnings = report_chart(r)               # kvplan.output.chart.draw(chart, "sizing.svg")

Every number is computed by kvplan.core.sizing and kvplan.planning.plan;
this module only arranges them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from kvplan.core.errors import KvplanError
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec
from kvplan.planning.plan import Deployment, kv_budget_bytes

if TYPE_CHECKING:
    from kvplan.output.chart import Chart
    from kvplan.output.render import View

SCHEMA = "kvplan.report/1"


@record
class DtypeSizes:
    kv_dtype: str
    description: str
    per_token_bytes: int  # every layer still growing
    request_bytes: tuple[int, ...]  # one request of each context (whole model, one copy)


@record
class CapacityRow:
    gpu: str
    num_gpus: int
    tp: int
    pp: int
    kv_dtype: str  # the engine's format
    weights_per_gpu_bytes: int | None
    kv_budget_bytes: int | None  # per GPU
    kv_bytes_per_token: int | None  # per GPU
    max_requests: tuple[int | None, ...]  # at each context (None past max_model_len)
    error: str = ""


@record
class SizingReport:
    spec: ModelSpec
    kv_dtypes: tuple[str, ...]  # as asked ('auto' included)
    contexts: tuple[int, ...]  # per-request and capacity columns
    tokens: tuple[int, ...]  # grid rows and chart x
    batches: tuple[int, ...]  # grid columns
    sizes: tuple[DtypeSizes, ...]
    grid: tuple[tuple[int, ...], ...]  # [token row][batch column], first KV dtype, bytes
    deployments: tuple[Deployment, ...]  # one per GPU (the first KV dtype)
    capacity: tuple[CapacityRow, ...]


def sizing_report(spec: ModelSpec, deployments: Sequence[Deployment] = (),
                  kv_dtypes: Sequence[str] = ("auto",), contexts: Sequence[int] = (),
                  tokens: Sequence[int] = (), batches: Sequence[int] = (1, 8, 32)
                  ) -> SizingReport:
    """The figures of the page. `deployments`: one per GPU (engine, layout, max length set);
    each is evaluated in every KV dtype."""
    from kvplan.core.dtypes import parse_format
    from kvplan.core.sizing import batch_bytes, per_token_bytes, request_bytes
    from kvplan.planning import plan as core

    limit = spec.max_context_tokens or 131072
    contexts = tuple(c for c in (contexts or (8192, 32768, 131072)) if c <= limit) or (limit,)
    tokens = tuple(tokens or _doubling(1024, limit))
    sizes = []
    for name in kv_dtypes:
        fmt = parse_format(name, spec.dtype)
        sizes.append(DtypeSizes(fmt.name, fmt.description, per_token_bytes(spec.layers, fmt),
                                tuple(request_bytes(spec.layers, c, fmt) for c in contexts)))
    first = parse_format(kv_dtypes[0], spec.dtype)
    grid = tuple(tuple(batch_bytes(spec.layers, [n] * b, first) for b in batches)
                 for n in tokens)
    rows = []
    for base in deployments:
        for name in kv_dtypes:
            dep = replace(base, kv_dtype=name)
            gpu = dep.gpu_name or "given KV budget"
            try:
                cap = core.capacity(dep)
            except KvplanError as exc:
                rows.append(CapacityRow(gpu, dep.num_gpus, dep.tp, dep.pp, name, None, None,
                                        None, (None,) * len(contexts), exc.message))
                continue
            rows.append(CapacityRow(
                gpu, dep.num_gpus, dep.tp, dep.pp, cap.kv_format, cap.weights_per_gpu_bytes,
                kv_budget_bytes(cap), cap.kv_bytes_per_token,
                tuple(core.max_concurrency(cap, c).max_requests
                      if c <= dep.context_limit() else None for c in contexts)))
    return SizingReport(spec, tuple(kv_dtypes), contexts, tokens, tuple(batches),
                        tuple(sizes), grid, tuple(replace(d, kv_dtype=kv_dtypes[0])
                                                  for d in deployments), tuple(rows))


def _doubling(lo: int, hi: int) -> list[int]:
    out, n = [], lo
    while n <= hi:
        out.append(n)
        n *= 2
    return out


def report_chart(r: SizingReport) -> tuple[Chart, list[str]]:
    """KV cache per GPU against context for each KV dtype at the smallest and largest batch,
    with each GPU's KV budget as a dashed line."""
    from kvplan.output.chart import memory_chart

    first = r.deployments[0] if r.deployments else None
    batches = sorted({min(r.batches), max(r.batches)})
    return memory_chart([r.spec], r.kv_dtypes, r.tokens, batches,
                        tp=first.tp if first else 1, pp=first.pp if first else 1,
                        deployments=r.deployments)


def _ctx(n: int) -> str:
    return f"{n // 1024}k" if n % 1024 == 0 else f"{n:,}"


def report_view(r: SizingReport) -> View:
    """The page's tables and notes as one View for kvplan.output.render."""
    from dataclasses import asdict

    from kvplan.output.render import Column, Table, View
    from kvplan.output.tables import FORMULA

    spec = r.spec
    per_req = tuple(Column(f"c{c}", f"1 request, {_ctx(c)} tokens", "bytes")
                    for c in r.contexts)
    sizes = Table("Per token and per request (whole model, one copy)", (
        Column("kv_dtype", "KV dtype"), Column("per_token_bytes", "per token (B)", "exact"),
        *per_req), tuple({"kv_dtype": s.kv_dtype, "per_token_bytes": s.per_token_bytes,
                          **{f"c{c}": b for c, b in zip(r.contexts, s.request_bytes,
                                                        strict=True)}} for s in r.sizes))
    grid = Table(f"KV cache of a batch, {r.sizes[0].kv_dtype} (context x batch; whole model)",
                 (Column("tokens", "context (tokens)", "int"),
                  *(Column(f"b{b}", f"batch {b}", "bytes") for b in r.batches)),
                 tuple({"tokens": n, **{f"b{b}": v for b, v in zip(r.batches, row,
                                                                    strict=True)}}
                       for n, row in zip(r.tokens, r.grid, strict=True)))
    tables = [sizes, grid]
    notes = [_inputs(r), FORMULA]
    if r.capacity:
        dep = r.deployments[0]
        version = f" {dep.engine_version}" if dep.engine_version else ""
        cap_rows = tuple({**{k: v for k, v in asdict(row).items() if k != "max_requests"},
                          **{f"r{c}": n for c, n in zip(r.contexts, row.max_requests,
                                                        strict=True)}}
                         for row in r.capacity)
        columns = (Column("gpu", "GPU"), Column("num_gpus", "GPUs", "int"),
                   Column("kv_dtype", "KV dtype"),
                   Column("weights_per_gpu_bytes", "weights/GPU", "bytes"),
                   Column("kv_budget_bytes", "KV budget/GPU", "bytes"),
                   Column("kv_bytes_per_token", "KV/token/GPU (B)", "exact"),
                   *(Column(f"r{c}", f"requests @ {_ctx(c)}", "int") for c in r.contexts),
                   Column("error", "why not"))
        shown = tuple(c for c in columns if c.key != "error" or any(x.error for x in r.capacity))
        tables.append(Table(f"Capacity on the chosen GPUs ({dep.engine}{version}, max length "
                            f"{dep.context_limit():,})", shown, cap_rows))
        notes.append(
            "Capacity: the KV budget per GPU is what the engine gives its KV pool (vLLM: the "
            "reported memory x gpu_memory_utilization - weights - activation peak - "
            "non-torch memory); requests @ N: whole requests of N tokens that fit at once, "
            "each rounded up to whole blocks, one block kept aside as vLLM's null block "
            "(`kvplan plan` shows each step).")
    payload = {"schema": SCHEMA, "model": spec.name, "contexts": list(r.contexts),
               "tokens": list(r.tokens), "batches": list(r.batches),
               "sizes": [asdict(s) for s in r.sizes],
               "grid": [list(row) for row in r.grid],
               "capacity": [asdict(c) for c in r.capacity]}
    return View(tables, payload, tables[-1], notes)


def _inputs(r: SizingReport) -> str:
    spec = r.spec
    parts = [f"Inputs: model {spec.name} ({spec.source.describe()}); KV dtypes "
             f"{', '.join(s.kv_dtype for s in r.sizes)}; contexts "
             f"{', '.join(f'{c:,}' for c in r.contexts)} tokens; batches "
             f"{', '.join(map(str, r.batches))}"]
    if r.deployments:
        d = r.deployments[0]
        gpus = ", ".join(dict.fromkeys(x.gpu_name or "given KV budget" for x in r.deployments))
        parts.append(f"GPUs {gpus} ({d.num_gpus} per instance, TP {d.tp} x PP {d.pp}); engine "
                     f"{d.engine} {d.engine_version or '(newest kvplan reads)'}; max length "
                     f"{d.context_limit():,}; weights {d.weights_dtype}")
    return "; ".join(parts) + "."


def report_markdown(r: SizingReport, chart: str | None = None, units: str = "iec") -> str:
    """The page: a heading, the model in one line, the chart, the tables, then the inputs,
    the formula and the units."""
    from kvplan.output.render import render

    spec = r.spec
    kinds = ", ".join(f"{n} {k}" for k, n in spec.kind_counts().items())
    facts = [f"{spec.num_layers} layers ({kinds})", f"dtype {spec.dtype}"]
    if spec.max_context_tokens:
        facts.append(f"maximum context {spec.max_context_tokens:,} tokens")
    if spec.num_params:
        facts.append(f"{spec.num_params:,} parameters")
    out = [f"# KV-cache sizing: {spec.display_name or spec.name}", "",
           f"`{spec.name}` ({spec.source.describe()}): {'; '.join(facts)}.", ""]
    if chart:
        out += [f"![KV cache per GPU against context length, with each GPU's KV budget]"
                f"({chart})", ""]
    return "\n".join(out) + "\n" + render(report_view(r), "markdown", units)
