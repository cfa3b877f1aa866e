"""The `kvplan` app: every command registered here, explicitly, in the order --help lists them.
Command modules define plain functions; nothing registers itself as an import side effect."""

# No `from __future__ import annotations`: typer reads the version option's signature (and
# its callback's) as it starts, and compiles each string annotation at every read.

import sys
from typing import Annotated

import typer

# (command, module in kvplan.cli, function), in the order --help lists them
COMMANDS = (
    ("size", "model", "size"),
    ("models", "model", "models"),
    ("show", "model", "show"),
    ("gpus", "gpus", "gpus"),
    ("plan", "plan", "plan"),
    ("compare", "compare", "compare"),
    ("sweep", "sweep", "sweep"),
    ("validate", "validate", "validate"),
    ("import", "model", "import_model"),
    ("check", "check", "check"),
    ("plot", "plot", "plot"),
    ("report", "report", "report"),
    ("whatif", "whatif", "whatif"),
    ("explain", "explain", "explain"),
)


def _print_version(value: bool) -> None:
    # eager: runs while the options are parsed, before click asks for a command (without it
    # `kvplan --version` was "Missing command")
    if value:
        from kvplan import __version__

        typer.echo(f"kvplan {__version__}")
        raise typer.Exit(0)


def _version_option(
    version: Annotated[bool, typer.Option(
        "--version", help="Print the version and exit.", is_eager=True,
        callback=_print_version)] = False,
) -> None:
    pass


def build_app(only: str | None = None) -> typer.Typer:
    """The typer app with every command, or with command `only` alone.

    Start-up builds just the invoked command: typer turns each registered command's
    signature into a click command (about 20 ms for a dozen), and importing a command's
    module costs its options and imports (the planner's for `plan`); `size` should pay for
    neither. `kvplan --help` and unknown names build them all."""
    from importlib import import_module

    app = typer.Typer(
        name="kvplan",
        help=(
            "Exact KV-cache memory sizes for LLM serving.\n\n"
            "Exit codes: 0 success; 1 a stated target is not met or the model does not fit "
            "(validate: a measured size differs; explain: a KV line is more than 0.5% off the "
            "log); 2 bad input (unknown model, bad file or field, bad flag); 3 the Hugging "
            "Face Hub unreachable with nothing cached. Set KVPLAN_DEBUG=1 for tracebacks."
        ),
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        add_completion=True,  # --install-completion / --show-completion: bash, zsh, fish
    )
    app.callback()(_version_option)
    for name, module, function in COMMANDS:
        if only is None or name == only:
            app.command(name)(getattr(import_module(f"kvplan.cli.{module}"), function))
    return app


def main() -> None:
    """Runs the command named in sys.argv (kvplan.cli.main has already switched the garbage
    collector off for the quick ones)."""
    name = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    known = {c for c, _, _ in COMMANDS}
    build_app(name if name in known else None)()


_full: typer.Typer | None = None


def full_app() -> typer.Typer:
    """Every command (built once): `kvplan.cli.app` as tests and the docs scripts use it."""
    global _full
    if _full is None:
        _full = build_app()
    return _full


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # `from kvplan.cli.app import app`, as before commands were lazy
        return full_app()
    raise AttributeError(name)
