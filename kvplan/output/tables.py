"""Results -> Reports (tables of raw values + the JSON document) for the renderer."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from kvplan import __version__
from kvplan.core.dtypes import KVFormat
from kvplan.core.sizing import SCHEMA as SIZE_SCHEMA
from kvplan.core.sizing import SizeResult
from kvplan.core.spec import ModelSpec
from kvplan.output.render import Column, Table, View, human_bytes

if TYPE_CHECKING:
    from kvplan.sources.weights import Weights

BUDGET_FORMULA = (
    "Budget: KV cache = the GPU's reported memory x utilization - weights per GPU - activation "
    "peak - non-torch memory - CUDA graphs (or the measured --kv-memory); the engine then "
    "divides it into its own pages/blocks (vLLM: num_blocks = budget // (page bytes x layers "
    "per group); concurrency = usable blocks / blocks per request). See docs/engine-accuracy.md."
)

FORMULA = (
    "Formula: per layer and token, attention stores K and V rows of head_dim for each KV head "
    "(2 x kv_heads x head_dim x bytes); MLA one latent of kv_lora_rank + qk_rope_head_dim "
    "(no x2, not split by TP); sliding/chunked layers hold at most window/chunk tokens; "
    "recurrent-state layers a fixed state per request. See docs/formulas.md."
)

# the flat row shared by `size --format csv` (and later sweeps): inputs then raw byte counts
SIZE_ROW_KEYS = (
    "model", "tokens", "batch", "kv_dtype", "tp", "pp", "block_size", "max_len",
    "per_token_bytes", "request_bytes", "batch_bytes", "per_gpu_batch_bytes",
    "all_gpus_batch_bytes", "paged_batch_bytes", "paged_waste_bytes",
    "contiguous_batch_bytes", "contiguous_waste_bytes",
)


def size_view(result: SizeResult, spec: ModelSpec, fmt: KVFormat,
              warnings: list[str]) -> View:
    """The JSON states the requests as `inputs.length_counts`, [length, that many requests]
    in order (`--batch 1000000 --tokens 8k` is [[8192, 1000000]]), never one entry per
    request."""
    r = result
    distinct = {n for n, _ in r.length_runs}
    mixed = len(distinct) > 1
    # with --lengths, `per request` (and inputs.tokens) is the first request's (formulas §3.2)
    requests = (f"{r.batch} requests of {min(distinct):,}..{max(distinct):,} tokens "
                f"(per request: the first, {r.tokens:,} tokens)" if mixed else "")
    head = (f"{spec.name}: {requests}, KV {r.kv_dtype}" if mixed
            else f"{spec.name}: {r.tokens:,} tokens x batch {r.batch}, KV {r.kv_dtype}")
    breakdown = Table(
        title=head,
        columns=(
            Column("kind", "layer kind"), Column("num_layers", "layers", "int"),
            Column("detail", "shape"), Column("per_token_bytes", "per token (B)", "exact"),
            Column("request_bytes", "per request", "bytes"),
            Column("batch_bytes", "batch", "bytes"),
        ),
        rows=tuple(asdict(b) for b in r.breakdown) + ({
            "kind": "total", "num_layers": spec.num_layers, "detail": "",
            "per_token_bytes": r.per_token_bytes, "request_bytes": r.request_bytes,
            "batch_bytes": r.batch_bytes},),
    )
    gpus = r.tp * r.pp
    par = f"TP {r.tp} x PP {r.pp}"
    stage = (f", largest stage {max(r.stage_layers)} of {spec.num_layers} layers"
             if r.pp > 1 else "")
    summary = Table(
        title=f"Batch memory ({par} = {gpus} GPU{'s' if gpus > 1 else ''}{stage})",
        columns=(Column("quantity", "quantity"), Column("bytes", "bytes", "exact"),
                 Column("human", "size", "bytes")),
        rows=tuple({"quantity": q, "bytes": b, "human": b} for q, b in (
            ("KV cache, whole model (one copy)", r.batch_bytes),
            *((("per GPU (largest)", r.per_gpu_batch_bytes),
               (f"all {gpus} GPUs together", r.all_gpus_batch_bytes)) if gpus > 1 else ()),
            (f"paged, block {r.block_size}, per GPU", r.paged_batch_bytes),
            ("  paged waste", r.paged_waste_bytes),
            (f"contiguous at max length {r.max_len:,}, per GPU", r.contiguous_batch_bytes),
            ("  contiguous waste", r.contiguous_waste_bytes),
        )),
    )
    inputs = {
        "model": r.model, "tokens": r.tokens, "batch": r.batch,
        "length_counts": [[n, count] for n, count in r.length_runs],
        "kv_dtype": r.kv_dtype, "tp": r.tp, "pp": r.pp, "block_size": r.block_size,
        "max_len": r.max_len,
    }
    payload: dict[str, Any] = {
        "schema": SIZE_SCHEMA,
        "kvplan_version": __version__,
        "inputs": inputs,
        "model": {"name": spec.name, "source": spec.source.describe(),
                  "num_layers": spec.num_layers, "layer_kinds": spec.kind_counts()},
        **{k: getattr(r, k) for k in SIZE_ROW_KEYS if k.endswith("_bytes")},
        "stage_layers": list(r.stage_layers),
        "breakdown": [asdict(b) for b in r.breakdown],
        "warnings": warnings,
    }
    notes = [
        f"Inputs: model {spec.name} ({spec.source.describe()}), "
        f"{requests if mixed else f'{r.tokens:,} tokens, {r.batch} request(s)'}, "
        f"KV dtype {r.kv_dtype} ({fmt.description}), {par}, "
        f"block size {r.block_size}, max length {r.max_len:,}.",
        FORMULA,
        *class_defaults_notes(spec),
    ]
    csv_row = {k: getattr(r, k) for k in SIZE_ROW_KEYS}
    csv_table = Table("size", tuple(Column(k, k) for k in SIZE_ROW_KEYS), (csv_row,))
    return View([breakdown, summary], payload, csv_table, notes, list(warnings))


def _kinds(spec: ModelSpec) -> str:
    return ", ".join(f"{n} {k}" for k, n in spec.kind_counts().items())


def models_view(specs: list[ModelSpec], fmt: KVFormat | None) -> View:
    from kvplan.core.sizing import per_token_bytes

    rows = []
    for s in specs:
        f = fmt
        if f is None:
            from kvplan.core.dtypes import parse_format

            f = parse_format(s.dtype)
        rows.append({
            "name": s.name, "family": s.family, "layers": s.num_layers, "kinds": _kinds(s),
            "max_context_tokens": s.max_context_tokens, "dtype": s.dtype,
            "per_token_bytes": per_token_bytes(s.layers, f), "num_params": s.num_params,
            "source": s.source.describe(),
        })
    columns = (
        # a narrow terminal leaves out layer kinds, then family, dtype, max context
        Column("name", "model"), Column("family", "family", drop=3),
        Column("layers", "layers", "int"), Column("kinds", "layer kinds", drop=4),
        Column("max_context_tokens", "max context", "int", drop=1),
        Column("dtype", "dtype", drop=2), Column("per_token_bytes", "KV per token (B)", "exact"),
        Column("num_params", "params", "int"),
    )
    table = Table(f"{len(rows)} models", columns, tuple(rows))
    payload = {"schema": "kvplan.models/1", "kvplan_version": __version__, "models": rows}
    csv_table = Table("models", columns + (Column("source", "source"),), tuple(rows))
    notes = ["KV per token: every layer still growing, in the model's dtype unless --kv-dtype "
             "is given.", FORMULA]
    return View([table], payload, csv_table, notes)


def show_view(spec: ModelSpec) -> View:
    from kvplan.sources.yamlspec import spec_to_dict

    runs: list[tuple[int, int]] = []  # (first layer index, count) of identical neighbours
    for i, layer in enumerate(spec.layers):
        if runs and spec.layers[runs[-1][0]] == layer:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((i, 1))
    rows = tuple({
        "layers": f"{first}" if count == 1 else f"{first}-{first + count - 1}",
        "count": count, "kind": spec.layers[first].kind,
        "detail": spec.layers[first].describe(),
    } for first, count in runs)
    columns = (Column("layers", "layers"), Column("count", "count", "int"),
               Column("kind", "kind"), Column("detail", "shape"))
    info = [
        f"Model: {spec.display_name or spec.name} ({spec.name}); family {spec.family or '-'}.",
        f"Source: {spec.source.describe()}.",
        f"Default dtype {spec.dtype}; max context "
        f"{spec.max_context_tokens:,}" if spec.max_context_tokens else
        f"Default dtype {spec.dtype}; max context unknown",
        f"Parameters: {spec.num_params:,}." if spec.num_params else "Parameters: unknown.",
        f"Layers: {spec.num_layers} ({_kinds(spec)}).",
        *class_defaults_notes(spec),
    ]
    table = Table(f"{spec.name}: layers", columns, rows)
    payload = {"schema": "kvplan.show/1", "kvplan_version": __version__,
               "spec": spec_to_dict(spec)}
    return View([table], payload, table, info)


def class_defaults_notes(spec: ModelSpec) -> list[str]:
    """The config fields the reader took from a config class's default (ModelSpec
    .class_defaults), as the engine's config object fills them in: one note, or none."""
    if not spec.class_defaults:
        return []
    return ["Config class defaults used (the config.json leaves these out; the engine's "
            "config object fills them in): " + "; ".join(spec.class_defaults) + "."]


def weights_note(w: Weights) -> str:
    """One line for `show` and `import`: the weights' parameters and bytes, exact or estimated."""
    how = (f"exact, from the safetensors headers of {w.num_files} file"
           f"{'s' if w.num_files != 1 else ''}" if w.exact
           else "an estimate from config.json; no safetensors headers were read")
    split = "; ".join(f"{d.dtype} {d.num_params:,} params = {d.num_bytes:,} B"
                      for d in w.by_dtype)
    return (f"Weights: {w.total_params:,} parameters, {w.total_bytes:,} bytes "
            f"({human_bytes(w.total_bytes)}) ({how}): {split}.")
