"""`kvplan validate`: allocate the predicted cache with torch and measure it (torch optional)."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli.options import (
    FormatOpt,
    KVDtypeOpt,
    TPOpt,
    UnitsOpt,
    emit,
    handle_errors,
)
from kvplan.engines.registry import DEFAULT as DEFAULT_ENGINE


@handle_errors
def validate(
    model: Annotated[str | None, typer.Argument(
        metavar="[MODEL]", help="Library name, YAML spec or config.json (omit with --all).",
        show_default=False)] = None,
    tokens: Annotated[str, typer.Option("--tokens", "-t", help="Tokens per request.")] = "1k",
    batch: Annotated[int, typer.Option("--batch", "-b", help="Requests.")] = 1,
    kv_dtype: KVDtypeOpt = "auto",
    layout: Annotated[str, typer.Option(
        "--layout", help="vllm, sglang, hf-static, hf-dynamic (the built-in engines' "
        "layouts; a plugin engine's own layout names are accepted too) or contiguous.")]
    = DEFAULT_ENGINE,
    block_size: Annotated[int | None, typer.Option(
        "--block-size", help="vLLM block (default 16, MLA 64) / SGLang page (default 1).",
        show_default=False)] = None,
    max_len: Annotated[str | None, typer.Option(
        "--max-len", help="Static layouts preallocate this length (default --tokens).",
        show_default=False)] = None,
    tp: TPOpt = 1,
    device: Annotated[str, typer.Option("--device", help="auto, cuda or cpu.")] = "auto",
    layers: Annotated[int | None, typer.Option(
        "--layers", help="Validate K layers and scale up (models larger than the device).",
        show_default=False)] = None,
    decode_steps: Annotated[int, typer.Option(
        "--decode-steps", help="Time N attention decode steps over the cache.")] = 0,
    all_models: Annotated[bool, typer.Option(
        "--all", help="Every library model and layout at a small probe size, on the CPU.")]
    = False,
    fmt: FormatOpt = "table",
    units: UnitsOpt = "iec",
) -> None:
    """Allocate real KV caches with torch, exactly as a layout stores them, and compare the
    measured bytes with kvplan's prediction (exit 1 on any difference). The vllm layout is
    the one kvplan's vLLM engine plans (its groups, block sizes and blocks per request).
    Tensors are allocated without touching their pages, after a free-memory check before each
    one; what will be allocated is said on stderr first. Exit 2 when it would not fit (nothing
    is left allocated). Needs torch: pip install 'torch>=2.1'.

    Examples:

      kvplan validate llama-3.1-8b --tokens 4k --batch 4 --layout hf-static

      kvplan validate deepseek-v3 --kv-dtype fp8_ds_mla --block-size 64 --layers 4

      kvplan validate --all
    """
    from kvplan import validate as v
    from kvplan.core.dtypes import parse_format
    from kvplan.core.errors import BadInputError
    from kvplan.core.units import parse_tokens
    from kvplan.output import validate as out
    from kvplan.sources.library import resolve

    tty = _stderr_is_terminal()
    if all_models:
        if model is not None:
            raise BadInputError("--all validates every library model; give no MODEL with it")
        every = v.validate_all(kv_dtype, progress=(
            (lambda step: _status(out.progress_line(step))) if tty else None))
        if tty:
            _status("")
        report, ok = out.validate_all_view(every), every.ok
    else:
        if model is None:
            raise BadInputError("give a MODEL to validate, or --all")
        spec = resolve(model)
        one = v.validate(v.ValidateRequest(
            spec, parse_format(kv_dtype, spec.dtype), parse_tokens(tokens, "--tokens"), batch,
            layout, block_size, parse_tokens(max_len, "--max-len") if max_len else None, tp,
            device, layers, decode_steps),
            announce=lambda plan: typer.echo(out.plan_line(plan, units), err=True))
        report, ok = out.validate_view(one), one.ok
    emit(report, fmt, units)
    if not ok:
        raise typer.Exit(1)


def _stderr_is_terminal() -> bool:
    import sys

    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _status(line: str) -> None:
    """One progress line, rewritten in place on the terminal (stderr only)."""
    import sys

    sys.stderr.write("\r\033[K" + line)
    sys.stderr.flush()
