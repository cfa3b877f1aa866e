"""The `kvplan` app: every command registered here, explicitly, in the order --help lists them.
Command modules define plain functions; nothing registers itself as an import side effect."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kvplan.cli import check, explain, gpus, model, plan, plot, report, sweep, validate, whatif

app = typer.Typer(
    name="kvplan",
    help=(
        "Exact KV-cache memory sizes for LLM serving.\n\n"
        "Exit codes: 0 success; 1 a stated target is not met; 2 bad input (unknown model, "
        "bad file or field, bad flag); 3 the Hugging Face Hub unreachable with nothing cached. "
        "Set KVPLAN_DEBUG=1 for tracebacks."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
)

app.command()(model.size)
app.command()(model.models)
app.command()(model.show)
app.command()(gpus.gpus)
app.command()(plan.plan)
app.command()(plan.compare)
app.command()(sweep.sweep)
app.command()(validate.validate)
app.command("import")(model.import_model)
app.command()(check.check)
app.command()(plot.plot)
app.command()(report.report)
app.command()(whatif.whatif)
app.command()(explain.explain)


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")]
    = False,
) -> None:
    if version:
        from kvplan import __version__

        typer.echo(f"kvplan {__version__}")
        raise typer.Exit(0)


def main() -> None:
    _build_only_the_invoked_command(sys.argv[1:])
    app()


def _build_only_the_invoked_command(args: list[str]) -> None:
    """typer turns every registered command's signature into a click command at each start
    (about 20 ms for a dozen commands) though only one runs: keep just the one named, when
    one is. `kvplan --help` and unknown names still see them all."""
    name = next((a for a in args if not a.startswith("-")), None)
    if name is None:
        return
    keep = [c for c in app.registered_commands
            if (c.name or getattr(c.callback, "__name__", "").replace("_", "-")) == name]
    if keep:
        app.registered_commands[:] = keep


# Commands defined in their own modules register themselves on `app` when imported; each
# imports its heavy parts inside the command function, so this costs little at start-up.
