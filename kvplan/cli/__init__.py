"""The command line: a thin typer layer over the library (`kvplan.cli.app` builds the app and
registers the commands; each command module checks its flags, calls the library, renders)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer

__all__ = ["app", "main"]


# Commands that answer in well under a second, where start-up is most of the time. They run
# without the cyclic garbage collector: importing kvplan creates tens of thousands of objects
# (dataclass methods, typer's parameters) and the collector scans them again and again while
# nothing they make is cyclic garbage (reference counting frees it). It is switched off here,
# before typer is imported (typer and click alone: ~7 ms of collections), and saves about a
# tenth of `size`'s start-up. Long or memory-heavy commands (sweep, validate, check, report,
# plot, import) keep it.
QUICK = frozenset({"size", "models", "show", "gpus", "plan", "compare", "explain", "whatif"})


def main() -> None:
    """The console script: builds only the command it runs (kvplan.cli.app.main)."""
    import sys

    name = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    if name is None or name in QUICK:
        import gc

        gc.disable()
    from kvplan.cli.app import main as run

    run()


def __getattr__(name: str) -> typer.Typer:
    """`app`: the whole app with every command, for tests and scripts, built on first use
    so that `main` never pays for the commands it does not run."""
    if name == "app":
        from kvplan.cli.app import full_app

        app = full_app()
        globals()["app"] = app  # importing kvplan.cli.app bound the name to the module
        return app
    raise AttributeError(name)
