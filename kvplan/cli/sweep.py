"""`kvplan sweep`: the size quantities over a grid of inputs."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kvplan.cli.options import ModelsArg, handle_errors

PROGRESS_MIN_ROWS = 200_000


@handle_errors
def sweep(
    models: ModelsArg,
    tokens: Annotated[str, typer.Option(
        "--tokens", "-t", help="Lengths: 1k..128k (doubling), 1k..8k:1k (stepped) or "
        "2k,8k,32k.")] = "1k..128k",
    batch: Annotated[str, typer.Option("--batch", "-b", help="Batch sizes: 1,8,32.")] = "1",
    kv_dtype: Annotated[str, typer.Option(
        "--kv-dtype", help="KV dtypes, comma-separated (auto, bf16, fp8, int4:g64, ...).")]
    = "auto",
    tp: Annotated[str, typer.Option("--tp", help="Tensor-parallel degrees: 1,2,4,8.")] = "1",
    fmt: Annotated[str, typer.Option(
        "--format", "-f", help="csv (default), json or markdown.")] = "csv",
) -> None:
    """KV bytes over a grid of models, KV dtypes, TP, lengths and batch sizes, one row each.

    Examples:

      kvplan sweep llama-3.1-8b --tokens 1k..128k --batch 1,8,32 --kv-dtype bf16,fp8

      kvplan sweep llama-3.1-70b qwen3-32b --tp 2,4,8 -f markdown
    """
    from kvplan.core.dtypes import parse_format
    from kvplan.output.stream import write_rows
    from kvplan.planning.sweep import count_rows, parse_int_values, parse_token_range
    from kvplan.planning.sweep import sweep as grid
    from kvplan.sources.library import resolve

    fmt = fmt.lower()
    if fmt not in ("csv", "json", "markdown"):
        from kvplan.core.errors import BadInputError

        raise BadInputError(f"--format must be csv, json or markdown, got {fmt!r}")
    specs = [resolve(m) for m in models]
    dtypes = [d.strip() for d in kv_dtype.split(",") if d.strip()]
    # read per model: 'auto', and the full-precision part of residual/KIVI formats, are each
    # model's own dtype; a dtype named twice (auto and bf16 on a bf16 model) is swept once
    formats = [list(dict.fromkeys(parse_format(d, spec.dtype) for d in dtypes))
               for spec in specs]
    token_list = parse_token_range(tokens)
    batches = parse_int_values(batch, "--batch")
    tps = parse_int_values(tp, "--tp")
    rows = [grid([spec], fmts, tps, token_list, batches)
            for spec, fmts in zip(specs, formats, strict=True)]
    total = sum(count_rows([spec], fmts, tps, token_list, batches)
                for spec, fmts in zip(specs, formats, strict=True))
    from kvplan.output.tables import FORMULA

    inputs = (f"Inputs: models {', '.join(s.name for s in specs)}; tokens {tokens} "
              f"({len(token_list)} lengths); batch {batch}; KV dtype {kv_dtype}; TP {tp}.")
    write_rows(sys.stdout, (r for part in rows for r in part), fmt, total,
               progress=total >= PROGRESS_MIN_ROWS and sys.stderr.isatty(),
               notes=(inputs, FORMULA))
