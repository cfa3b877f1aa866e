"""`kvplan compare`, registered in kvplan.cli.app: models, GPUs, KV dtypes or engines side
by side. Its own module, so that `kvplan plan` does not build compare's ~40 options as it
starts (the shared ones are plan's, kvplan.cli.plan).
"""

# No `from __future__ import annotations` here (as in kvplan.cli.plan): typer reads the
# command's signature four times as it starts, and a string annotation is compiled each time.

from typing import Annotated, Any

import typer

from kvplan.cli.options import (
    DEFAULT_ENGINE,
    ConcurrencyOpt,
    ContextOpt,
    CountOpt,
    EngineVersionOpt,
    FormatOpt,
    GpuMemoryOpt,
    MaxModelLenOpt,
    ModelsArg,
    UnitsOpt,
    WeightsDtypeOpt,
    emit,
    engine_name,
    handle_errors,
    tokens_flag,
)
from kvplan.cli.settings import engine_options
from kvplan.engines.registry import names as engine_names


@handle_errors
@engine_options(before="policy")
def compare(
    models: ModelsArg,
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="Comma-separated GPUs: h100,a100-80gb,l40s.", show_default=False)] = None,
    count: CountOpt = None,
    engine: Annotated[str, typer.Option(
        "--engine", help="Comma-separated engines: " + ",".join(engine_names()) + ".")
    ] = DEFAULT_ENGINE,
    engine_version: EngineVersionOpt = None,
    kv_dtype: Annotated[str, typer.Option(
        "--kv-dtype", help="Comma-separated KV dtypes: auto,fp8.")] = "auto",
    max_model_len: MaxModelLenOpt = None,
    context: ContextOpt = None,
    concurrency: ConcurrencyOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    weights_dtype: WeightsDtypeOpt = "auto",
    policy: Annotated[list[str] | None, typer.Option(
        "--policy", "-p", help="Also show each deployment under a cache policy (repeat): "
        "sinks+window:S,W, budget:N, snapkv:N, pyramid:N, share:K (see kvplan whatif).",
        show_default=False)] = None,
    fmt: FormatOpt = "table",
    units: UnitsOpt = "iec",
    settings: dict[str, Any] | None = None,
) -> None:
    """Models, GPUs, KV dtypes or engines side by side (every combination of the lists).

    Examples:

      kvplan compare llama-3.1-8b --gpu h100,a100-80gb,l40s --context 32k

      kvplan compare llama-3.1-70b --gpu h100 --count 4 --kv-dtype auto,fp8

      kvplan compare qwen3-32b llama-3.1-70b --gpu h200 --count 2 --engine vllm,sglang -f csv

      kvplan compare llama-3.1-8b --gpu h100 --context 32k -p sinks+window:4,1020 -p share:2
    """
    from kvplan.core.errors import BadInputError
    from kvplan.engines.registry import get as get_engine
    from kvplan.planning.deployment import layout
    from kvplan.planning.policies import parse_policy

    gpus = [g.strip() for g in gpu.split(",")] if gpu else [None]
    engines = [engine_name(e.strip()) for e in engine.split(",")]
    dtypes = [d.strip() for d in kv_dtype.split(",")]
    for e in engines:
        get_engine(e)
    combos = [(m, g, e, d) for m in models for g in gpus for e in engines for d in dtypes]
    if len(combos) > 64:
        raise BadInputError(f"{len(combos)} combinations; compare at most 64 at once")
    layout(count)  # a bad --count is one error, not one per row
    policies = [("none", ())] + [(p, parse_policy(p)) for p in policy] if policy else []
    rows = [row for m, g, e, d in combos
            for row in _compare_rows(m, g, gpu_memory, count, e, d, engine_version,
                                     max_model_len, tokens_flag(context, "--context"), concurrency,
                                     weights_dtype, policies, settings or {})]
    from kvplan.output.plan import compare_view

    emit(compare_view(rows, with_policies=bool(policies)), fmt, units)
    failed = [r for r in rows if not r["fits"]]
    if failed:  # as `plan` and `check`: a deployment that does not fit is exit 1
        typer.echo(f"kvplan: {len(failed)} of {len(rows)} row(s) do not fit or would not start "
                   "(exit 1)", err=True)
        raise typer.Exit(1)


def _compare_rows(model: str, gpu: str | None, gpu_memory: str | None, count: int | None,
                  engine: str, kv_dtype: str, version: str | None, max_model_len: str | None,
                  context: int | None, concurrency: int | None, weights_dtype: str,
                  policies: list[tuple[str, Any]], settings: dict[str, Any]
                  ) -> list[dict[str, Any]]:
    """One row per policy (or one row without --policy): the baseline deployment, then the
    same request under each policy with its bytes and the requests the budget holds."""
    from kvplan.core.sizing import stage_layers
    from kvplan.planning import plan as core
    from kvplan.planning.policies import evaluate_stages

    row = _compare_row(model, gpu, gpu_memory, count, engine, kv_dtype, version,
                       max_model_len, context, concurrency, weights_dtype, settings)
    cap = row.pop("_cap", None)
    if not policies or cap is None:
        return [row]
    dep = cap.deployment
    stages = stage_layers(dep.spec.layers, dep.pp)
    fmt = core.format_for_sizing(cap)
    out = []
    for text, parsed in policies:
        r = evaluate_stages(stages, parsed, fmt, row["context_tokens"], 0, dep.tp,
                            cap.pool.tokens_per_unit, core.kv_budget_bytes(cap))
        out.append({**row, "policy": text, "policy_kv_dtype": r.kv_dtype,
                    "policy_request_bytes": r.request_bytes,
                    "policy_max_requests": r.max_requests})
    return out


def _compare_row(model: str, gpu: str | None, gpu_memory: str | None, count: int | None,
                 engine: str, kv_dtype: str, version: str | None, max_model_len: str | None,
                 context: int | None, concurrency: int | None, weights_dtype: str,
                 settings: dict[str, Any]) -> dict[str, Any]:
    from kvplan.api import deploy
    from kvplan.core.errors import BadInputError
    from kvplan.planning import plan as core

    d = deploy(model, gpu=gpu, gpu_memory=gpu_memory, count=count, engine=engine,
               engine_version=version, kv_dtype=kv_dtype, max_model_len=max_model_len,
               weights_dtype=weights_dtype, **settings)
    dep = d.deployment
    row: dict[str, Any] = {"model": dep.spec.name, "engine": engine, "gpu": dep.gpu_name,
                           "num_gpus": dep.num_gpus, "kv_dtype": kv_dtype, "error": ""}
    try:
        start = d.start
    except BadInputError as exc:  # one impossible combination should not hide the others
        return {**row, "error": exc.message, "fits": False, "engine_starts": False,
                "reason": exc.message}
    verdict = d.verdict(context, concurrency)
    row.update(fits=verdict.fits, engine_starts=verdict.engine_starts, reason=verdict.reason)
    if start.capacity is None:
        return {**row, "error": start.reason}
    cap = start.capacity
    ctx = context or dep.context_limit()
    row.update(kv_dtype=cap.kv_format, weights_per_gpu_bytes=cap.weights_per_gpu_bytes,
               kv_budget_bytes=core.kv_budget_bytes(cap),
               kv_bytes_per_token=cap.kv_bytes_per_token,
               token_capacity=core.token_capacity(cap), context_tokens=ctx,
               max_concurrency=d.max_concurrency(ctx).max_requests)
    if concurrency:
        row["max_context_tokens"] = d.max_context(concurrency).max_context_tokens
    row["_cap"] = cap
    return row
