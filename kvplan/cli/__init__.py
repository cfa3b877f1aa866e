"""The command line: a thin typer layer over the library (`kvplan.cli.app` builds the app and
registers the commands; each command module checks its flags, calls the library, renders)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer

__all__ = ["app", "main"]


def main() -> None:
    """The console script: builds only the command it runs (kvplan.cli.app.main)."""
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
