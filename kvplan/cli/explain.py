"""`kvplan explain LOGFILE`: an engine's start-up log reconciled with kvplan."""

# No `from __future__ import annotations` here: typer reads each command's signature four
# times as it starts, and an annotation kept as a string is compiled at every read (as in
# kvplan.cli.plan).

from typing import Annotated

import typer

from kvplan.cli.options import FormatOpt, UnitsOpt, emit, engine_name, handle_errors


@handle_errors
def explain(
    logfile: Annotated[str, typer.Argument(
        help="A vLLM (V0/V1), SGLang, llama.cpp/Ollama, TensorRT-LLM or TGI start-up log; - "
        "reads standard input.", show_default=False)],
    model: Annotated[str | None, typer.Option(
        "--model", "-m", help="The model, when the log does not name one kvplan knows.",
        show_default=False)] = None,
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="The GPU, to predict the budget when the log does not print the total.",
        show_default=False)] = None,
    kv_dtype: Annotated[str | None, typer.Option(
        "--kv-dtype", help="The KV cache dtype, when the log does not print it.",
        show_default=False)] = None,
    tp: Annotated[int | None, typer.Option(
        "--tp", help="Tensor-parallel size, when the log does not print it.",
        show_default=False)] = None,
    engine: Annotated[str | None, typer.Option(
        "--engine", help="Which engine wrote the log (default: recognised from its lines).",
        show_default=False, callback=lambda v: v if v is None else engine_name(v))] = None,
    engine_version: Annotated[str | None, typer.Option(
        "--engine-version", help="The engine release that wrote the log, when it prints none "
        "(default: dated by its line formats).", show_default=False)] = None,
    draft_layers: Annotated[int | None, typer.Option(
        "--draft-layers", min=0, max=1024, help="An EAGLE or MTP drafter's decoder layers, "
        "which share vLLM's KV pool (the draft model's num_hidden_layers; the log does not "
        "print them).", show_default=False)] = None,
    fmt: FormatOpt = "table",
    units: UnitsOpt = "iec",
) -> None:
    """Read an engine's start-up log, recompute every KV line it printed (and, from the GPU
    and settings alone, its budget and reserves) and show logged beside kvplan.

    Exit 1 when a KV line recomputed from the logged budget differs by more than the log's
    printed precision allows (or its figure is not a number, or the logged budget is zero or
    less: the engine refused to start): a CI check that kvplan still matches the engine
    version a team deploys.

    Examples:

      kvplan explain vllm-startup.log

      docker logs my-vllm 2>&1 | kvplan explain - --gpu h100

      kvplan explain llama-server.log --model llama-3.2-3b
    """
    from kvplan.output.explain import explain_view
    from kvplan.planning.explain import explain as run
    from kvplan.sources.reader import read_stdin, read_text
    from kvplan.sources.startlog import MAX_LOG_BYTES

    if logfile == "-":  # standard input, with a file's limits
        text = read_stdin("the log on standard input (-)", MAX_LOG_BYTES)
    else:
        text = read_text(logfile, "the log", MAX_LOG_BYTES)
    result = run(text, model, gpu, engine, kv_dtype, tp, engine_version, draft_layers)
    emit(explain_view(result, units), fmt, units)
    if not result.ok:
        typer.echo("kvplan: a KV line differs from the log by more than its printed "
                   "precision allows, or the log's KV figure is unusable (exit 1)", err=True)
        raise typer.Exit(1)
