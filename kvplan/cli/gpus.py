"""`kvplan gpus`: the GPU catalog, registered in kvplan.cli.app."""

# No `from __future__ import annotations` here: typer reads each command's signature four
# times as it starts, and an annotation kept as a string is compiled at every read (as in
# kvplan.cli.plan).

from typing import Annotated

import typer

from kvplan.cli.options import FormatOpt, UnitsOpt, emit, handle_errors


@handle_errors
def gpus(
    filter_text: Annotated[str | None, typer.Argument(
        metavar="[FILTER]", help="Keep GPUs whose name, alias, vendor or architecture contains "
        "this (h100, nvidia, blackwell).", show_default=False)] = None,
    fmt: FormatOpt = "table",
    units: UnitsOpt = "iec",
) -> None:
    """List the GPU catalog: memory as the framework reports it, the vendor's figure,
    bandwidth, FP8/FP4, with the source of every number in --format json.

    Examples:

      kvplan gpus

      kvplan gpus h100 --units si

      kvplan gpus amd -f json
    """
    from kvplan.output.gpus import gpus_view
    from kvplan.sources.gpus import filter_gpus, find_gpu, load_catalog

    catalog = load_catalog()
    selected = filter_gpus(catalog, filter_text)
    if filter_text and not selected:
        # a typo: find_gpu raises "unknown GPU" with the closest names (exit 2)
        selected = [find_gpu(filter_text, catalog)]
    emit(gpus_view(selected), fmt, units)
