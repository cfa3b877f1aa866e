"""`kvplan report`: a one-page Markdown sizing report and its chart (registered on
kvplan.cli.app)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli.options import (
    DEFAULT_ENGINE,
    CountOpt,
    EngineOpt,
    EngineVersionOpt,
    GpusOpt,
    MaxModelLenOpt,
    ModelArg,
    UnitsOpt,
    WeightsDtypeOpt,
    WeightsMemoryOpt,
    handle_errors,
    warn,
    write_atomic,
)


@handle_errors
def report(
    model: ModelArg,
    output: Annotated[str, typer.Option(
        "--output", "-o", help="The Markdown file to write (sizing.md; - for standard output, "
        "with a chart only where --chart names one).", show_default=False)],
    gpu: GpusOpt = None,
    count: CountOpt = None,
    engine: EngineOpt = DEFAULT_ENGINE,
    engine_version: EngineVersionOpt = None,
    kv_dtype: Annotated[str, typer.Option(
        "--kv-dtype", help="Comma-separated KV dtypes; the first fills the grid.")] = "auto,fp8",
    contexts: Annotated[str, typer.Option(
        "--contexts", help="Per-request and capacity columns.")] = "8k,32k,128k",
    tokens: Annotated[str | None, typer.Option(
        "--tokens", "-t", help="Grid rows and chart lengths: 1k..128k (default: 1k up to the "
        "model's maximum).", show_default=False)] = None,
    batch: Annotated[str, typer.Option("--batch", "-b", help="Grid columns.")] = "1,8,32",
    max_model_len: MaxModelLenOpt = None,
    weights_dtype: WeightsDtypeOpt = "auto",
    weights_memory: WeightsMemoryOpt = None,
    chart: Annotated[str | None, typer.Option(
        "--chart", help="The chart (.svg or .png); default: beside the report, same name, "
        ".svg.", show_default=False)] = None,
    no_chart: Annotated[bool, typer.Option("--no-chart", help="Write no chart.")] = False,
    units: UnitsOpt = "iec",
) -> None:
    """Write a one-page sizing report: per-token and per-request sizes, a context-by-batch
    grid, the capacity on the chosen GPUs for each KV dtype, and a chart.

    Examples:

      kvplan report llama-3.1-8b --gpu h100,a100-80gb -o sizing.md

      kvplan report llama-3.1-70b --gpu h100 --count 4 --kv-dtype auto,fp8 -o 70b.md --no-chart
    """
    from kvplan.cli.options import output_target
    from kvplan.core.errors import BadInputError
    from kvplan.output import page as core
    from kvplan.planning.deployment import deployment, layout
    from kvplan.planning.sweep import parse_int_values, parse_token_range
    from kvplan.sources.library import resolve

    if chart is not None and no_chart:
        raise BadInputError("--chart and --no-chart contradict each other; give one")
    target = output_target(output)
    if chart is not None and output_target(chart) is None:
        raise BadInputError("--chart - is not possible: the report goes there",
                            "give the chart a file name")
    spec = resolve(model)
    layout(count)  # a bad --count is an error even without --gpu
    deps = [deployment(spec, gpu=g.strip(), count=count, engine=engine,
                       engine_version=engine_version, weights_dtype=weights_dtype,
                       max_model_len=max_model_len, weights_memory=weights_memory)
            for g in (gpu.split(",") if gpu else [])]
    dtypes = [d.strip() for d in kv_dtype.split(",") if d.strip()]
    figures = core.sizing_report(spec, deps, dtypes, parse_token_range(contexts),
                                 parse_token_range(tokens) if tokens else (),
                                 parse_int_values(batch, "--batch"))
    image = None if no_chart else (Path(chart) if chart is not None else
                                   target.with_suffix(".svg") if target else None)
    if image is not None:
        from kvplan.output.chart import draw

        drawing, warnings = core.report_chart(figures)
        warn(warnings)
        image_target = output_target(image)
        assert image_target is not None
        draw(drawing, image_target, units)
    base = target.parent if target is not None else Path(".")
    link = os.path.relpath(image, base).replace(os.sep, "/") if image else None
    write_atomic(output, core.report_markdown(figures, link, units))
    if target is None:
        return
    typer.echo(f"kvplan: wrote {output}" + (f" and {image}" if image else ""), err=True)
