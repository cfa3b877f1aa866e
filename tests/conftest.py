import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def _build_click_commands_once() -> None:
    """typer's CliRunner.invoke turns the Typer app into a click command on every call
    (typer/testing.py: `_get_command(app)`): every command's signature and annotations read
    again, about four fifths of a `runner.invoke` of `plan`. The app is built once
    (kvplan.cli.app.full_app) and its commands never change, so its click command is built
    once per app and kept; each invoke still parses, runs and exits as before."""
    import typer.testing

    build = typer.testing._get_command
    built: dict[int, tuple[object, object]] = {}

    def get_command(app):  # type: ignore[no-untyped-def]
        key = id(app)
        if key not in built or built[key][0] is not app:
            built[key] = (app, build(app))
        return built[key][1]

    typer.testing._get_command = get_command


_build_click_commands_once()
