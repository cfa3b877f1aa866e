"""`kvplan plot`: charts as PNG or SVG (registered in kvplan.cli.app). matplotlib (the
`kvplan[plot]` extra) is imported only when the chart is drawn."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kvplan.cli.options import (
    DEFAULT_ENGINE,
    CountOpt,
    EngineOpt,
    EngineVersionOpt,
    GpuMemoryOpt,
    GpusOpt,
    KVMemoryOpt,
    MaxModelLenOpt,
    ModelsArg,
    UnitsOpt,
    WeightsMemoryOpt,
    check_choice,
    handle_errors,
    warn,
)


@handle_errors
def plot(
    models: ModelsArg,
    output: Annotated[str, typer.Option(
        "--output", "-o", help="The image: chart.png or chart.svg (- writes SVG to standard "
        "output).", show_default=False)],
    y: Annotated[str, typer.Option(
        "--y", help="memory: KV cache per GPU against context, with each GPU's KV budget as "
        "a dashed line; concurrency: requests that fit at once against context.")] = "memory",
    kv_dtype: Annotated[str, typer.Option(
        "--kv-dtype", help="Comma-separated KV dtypes: auto,fp8.")] = "auto",
    tokens: Annotated[str | None, typer.Option(
        "--tokens", "-t", help="Context lengths: 1k..128k (doubling) or 2k,8k,32k. Default: "
        "1k up to the longest model maximum.", show_default=False)] = None,
    batch: Annotated[str, typer.Option(
        "--batch", "-b", help="Batch sizes for --y memory: 1,8.")] = "1",
    gpu: GpusOpt = None,
    count: CountOpt = None,
    engine: EngineOpt = DEFAULT_ENGINE,
    engine_version: EngineVersionOpt = None,
    max_model_len: MaxModelLenOpt = None,
    kv_memory: KVMemoryOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    weights_memory: WeightsMemoryOpt = None,
    units: UnitsOpt = "iec",
) -> None:
    """Draw KV memory (or concurrency) against context length as PNG or SVG.

    Examples:

      kvplan plot llama-3.1-8b qwen3-8b -o kv.png

      kvplan plot llama-3.1-8b --kv-dtype bf16,fp8 --gpu h100,l40s -o kv.svg

      kvplan plot llama-3.1-8b --y concurrency --gpu h100 --kv-dtype auto,fp8 -o conc.png
    """
    from kvplan.cli.options import output_target
    from kvplan.core.errors import BadInputError
    from kvplan.output import chart as core
    from kvplan.planning.deployment import deployment, layout
    from kvplan.planning.sweep import parse_int_values, parse_token_range
    from kvplan.sources.library import resolve

    check_choice(y, ("memory", "concurrency"), "--y")
    target = output_target(output)
    if target is not None:
        core.image_format(target)
    specs = [resolve(m) for m in models]
    longest = max(s.max_context_tokens or 131072 for s in specs)
    lengths = parse_token_range(tokens or f"1k..{longest}")
    dtypes = [d.strip() for d in kv_dtype.split(",") if d.strip()]
    tp, pp = layout(count)
    gpus: list[str | None] = [g.strip() for g in gpu.split(",")] if gpu else []
    if y == "concurrency" and not (gpus or kv_memory or gpu_memory):
        raise BadInputError("--y concurrency needs memory to plan with",
                            "give --gpu h100, --gpu-memory 24GiB or --kv-memory 57.65GiB")
    deployments = [deployment(spec, gpu=g, gpu_memory=gpu_memory, count=count, engine=engine,
                              kv_dtype=d, engine_version=engine_version, kv_memory=kv_memory,
                              max_model_len=max_model_len, weights_memory=weights_memory)
                   for spec in specs for g in (gpus or [None])
                   for d in (dtypes if y == "concurrency" else dtypes[:1])
                   if gpus or kv_memory or gpu_memory]
    warnings: list[str] = []
    if y == "concurrency":
        chart = core.concurrency_chart(deployments, lengths)
    else:
        chart, warnings = core.memory_chart(specs, dtypes, lengths,
                                            parse_int_values(batch, "--batch"), tp, pp,
                                            deployments)
    warn(warnings)
    if target is None:
        core.draw(chart, sys.stdout.buffer, units, fmt="svg")
        sys.stdout.flush()
        return
    core.draw(chart, target, units)
    typer.echo(f"kvplan: wrote {output} ({len(chart.series)} series)", err=True)
