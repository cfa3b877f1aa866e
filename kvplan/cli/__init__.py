"""The command line: a thin typer layer over the library (`kvplan.cli.app` holds the app and
registers every command; each command module checks its flags, calls the library, renders)."""

from kvplan.cli.app import app, main

__all__ = ["app", "main"]
