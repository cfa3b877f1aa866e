"""`kvplan size`, `models`, `show` and `import`: one model's KV bytes and its spec."""

# No `from __future__ import annotations` here: typer reads each command's signature four
# times as it starts (inspect.signature(eval_str=True) and get_type_hints, twice), and an
# annotation kept as a string is compiled at every read (~3 ms of `plan`'s start-up for its
# ~50 options). Names imported only for type checking are quoted instead.

import sys
from typing import Annotated

import typer

from kvplan.cli.options import (
    AssumeStandardOpt,
    FormatOpt,
    KVDtypeOpt,
    ModelArg,
    PPOpt,
    TPOpt,
    UnitsOpt,
    check_choice,
    emit,
    handle_errors,
    warn,
    write_atomic,
)


@handle_errors
def size(
    model: ModelArg,
    tokens: Annotated[str | None, typer.Option(
        "--tokens", "-t", help="Tokens per request: 8192, 8k (= 8,192), 128k (= 131,072). "
        "Default: the model's maximum context.", show_default=False)] = None,
    batch: Annotated[int, typer.Option("--batch", "-b", help="Requests of --tokens each.")] = 1,
    lengths: Annotated[str | None, typer.Option(
        "--lengths", help="A batch of different lengths instead: 2k,4k,8192; @FILE reads "
        "them from a file (separated by commas, spaces or lines; @- reads standard input).",
        show_default=False)] = None,
    kv_dtype: KVDtypeOpt = "auto",
    tp: TPOpt = 1,
    pp: PPOpt = 1,
    block_size: Annotated[int, typer.Option(
        "--block-size", help="Tokens per block for the paged figure (vLLM's default 16).")] = 16,
    max_len: Annotated[str | None, typer.Option(
        "--max-len", help="Length each request preallocates in the contiguous figure. "
        "Default: the model's maximum context.", show_default=False)] = None,
    fmt: FormatOpt = "table",
    units: UnitsOpt = "iec",
    assume_standard: AssumeStandardOpt = False,
) -> None:
    """KV-cache bytes per token, per request, per batch and per GPU.

    Examples:

      kvplan size llama-3.1-8b --tokens 8k

      kvplan size deepseek-v3 --tokens 128k --batch 16 --kv-dtype fp8 --tp 8 -f json

      kvplan size ./my-model/config.json --lengths 2k,4k,32k --format markdown
    """
    from kvplan.api import kv_format
    from kvplan.api import model as load
    from kvplan.output.tables import size_view

    runs: str | list[str | int] | None = _lengths_file(lengths[1:]) if lengths and \
        lengths.startswith("@") else lengths
    m = load(model, assume_standard_attention=assume_standard)
    warnings: list[str] = list(m.spec.warnings)
    result = m.size(tokens, batch, lengths=runs, kv_dtype=kv_dtype, tp=tp, pp=pp,
                    block_size=block_size, max_len=max_len, warnings=warnings)
    spec, fmt_kv = m.spec, kv_format(kv_dtype, m.spec.dtype)
    emit(size_view(result, spec, fmt_kv, warnings), fmt, units)


@handle_errors
def models(
    filter_text: Annotated[str | None, typer.Argument(
        metavar="[FILTER]", help="Keep models whose name, family or source contains this.",
        show_default=False)] = None,
    kind: Annotated[str | None, typer.Option(
        "--kind", help="Keep models with a layer of this kind: full, sliding, chunked, mla, "
        "cross, state, compressed, none.", show_default=False)] = None,
    kv_dtype: Annotated[str | None, typer.Option(
        "--kv-dtype", help="Per-token bytes in this KV dtype (default: each model's own).",
        show_default=False)] = None,
    fmt: FormatOpt = "table",
    units: UnitsOpt = "iec",
) -> None:
    """List the embedded model library.

    Examples:

      kvplan models

      kvplan models qwen --kind sliding -f csv
    """
    from kvplan.core.dtypes import parse_format
    from kvplan.output.tables import models_view
    from kvplan.sources.library import filter_models, load_library

    specs = filter_models(load_library(), filter_text, kind)
    emit(models_view(specs, parse_format(kv_dtype) if kv_dtype else None), fmt, units)


@handle_errors
def show(
    model: ModelArg,
    fmt: Annotated[str, typer.Option(
        "--format", "-f", help="table, markdown, json, or yaml (a library spec file).")] = "table",
    assume_standard: AssumeStandardOpt = False,
) -> None:
    """Print the resolved spec of a model: its layers, kinds, shapes and source.

    Examples:

      kvplan show gemma-2-9b

      kvplan show ./config.json --format yaml > model_configs/my-model.yaml
    """
    from dataclasses import asdict, replace

    from kvplan.output.tables import show_view, weights_note
    from kvplan.sources.library import resolve
    from kvplan.sources.weights import cheap_weights

    fmt = check_choice(fmt.lower(), ("table", "markdown", "json", "yaml", "csv"), "--format")
    spec = resolve(model, assume_standard)
    warn(spec.warnings)
    weights = cheap_weights(model)  # a local checkpoint with safetensors: exact, no network
    if weights is not None:
        spec = replace(spec, num_params=weights.total_params)
    if fmt == "yaml":
        from kvplan.sources.yamlspec import dump_yaml

        sys.stdout.write(dump_yaml(spec))
        return
    report = show_view(spec)
    if weights is not None:
        report.notes.append(weights_note(weights))
        report.payload["weights"] = asdict(weights)
    emit(report, fmt, "iec")



def _lengths_file(path: str) -> list[str | int]:
    """The lengths in a file (`-`: standard input), read with the limits of any workload file
    (kvplan.sources.reader): a list the shell's argument limit would cut short."""
    import re

    from kvplan.core.errors import BadInputError
    from kvplan.core.units import MAX_BATCH
    from kvplan.sources.reader import MAX_WORKLOAD_BYTES, read_stdin, read_text

    if path == "-":
        text = read_stdin("--lengths @-", MAX_WORKLOAD_BYTES)
    else:
        text = read_text(path, "the --lengths file", MAX_WORKLOAD_BYTES)
    items = re.split(r"[\s,]+", text.strip())
    if items == [""]:
        raise BadInputError(f"--lengths @{path} holds no lengths",
                            "write one length a line, or 2k,4k,8192")
    if len(items) > MAX_BATCH:
        raise BadInputError(f"--lengths @{path} lists more than {MAX_BATCH:,} lengths")
    return list(items)


@handle_errors
def import_model(
    model: ModelArg,
    output: Annotated[str | None, typer.Option(
        "--output", "-o", help="Write the YAML here (replaced whole, never half-written) "
        "instead of stdout (- is stdout).", show_default=False)] = None,
) -> None:
    """Write MODEL's resolved spec as a library YAML, with its source (repo, commit sha,
    config.json sha256) and its parameter count when the weights are known.

    Examples:

      kvplan import hf:meta-llama/Llama-3.1-8B@main -o model_configs/llama-3.1-8b.yaml

      kvplan import ./my-checkpoint/ > my-model.yaml
    """
    from kvplan.output.tables import weights_note
    from kvplan.sources.importing import import_spec
    from kvplan.sources.yamlspec import dump_yaml

    spec, weights = import_spec(model)
    warn(spec.warnings)  # e.g. an MLX checkpoint's weights counted unquantized
    if weights is not None:
        typer.echo(f"kvplan: {weights_note(weights)}", err=True)
    elif spec.num_params is None and spec.checkpoint is None:
        from kvplan.core.weights import unsized_weights

        # the YAML is still written (its KV is sized); `plan` will ask for what is missing
        typer.echo(f"kvplan: note: {unsized_weights(spec)}; the YAML has no num_params",
                   err=True)
    if output is None or str(output) == "-":
        sys.stdout.write(dump_yaml(spec))
        return
    write_atomic(output, dump_yaml(spec))
    typer.echo(f"kvplan: wrote {output} ({spec.name}, {spec.num_layers} layers)", err=True)
