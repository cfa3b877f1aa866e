"""Docstrings say what, why and where from in about ten lines; the research behind them
(derivations, measured tables, release histories) lives in docs/ and the docstring points to
it. A docstring of more than MAX_LINES lines fails here, wherever it is in kvplan (module,
class, function or method), except the CLI's command functions, whose docstrings are the
`--help` text (checked by tests/cli's doc-drift tests)."""

import ast

from paths import ROOT


def _commands() -> tuple[tuple[str, str, str], ...]:
    """kvplan.cli.app.COMMANDS, read from the source: importing kvplan.cli.app here would bind
    the submodule as `kvplan.cli.app`, which other tests import as the Typer app."""
    tree = ast.parse((ROOT / "kvplan" / "cli" / "app.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "COMMANDS":
            return ast.literal_eval(node.value)
    raise AssertionError("kvplan/cli/app.py has no COMMANDS")


COMMANDS = _commands()

MAX_LINES = 15

def _docstrings():
    """(dotted name, docstring line count) for every module, class and function in kvplan."""
    for path in sorted((ROOT / "kvplan").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = [(module, tree)]
        while found:
            name, node = found.pop()
            doc = ast.get_docstring(node)
            if doc:
                yield name, len(doc.splitlines())
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    found.append((f"{name}.{child.name}", child))


def _too_long():
    commands = {f"kvplan.cli.{module}.{function}" for _, module, function in COMMANDS}
    return {name: lines for name, lines in _docstrings()
            if lines > MAX_LINES and name not in commands}


def test_no_docstring_runs_past_fifteen_lines():
    long = _too_long()
    assert long == {}, (
        f"these docstrings run past {MAX_LINES} lines: keep what, why and the source they "
        "follow, and move the research to docs/ with a pointer (docs/<file>.md §N)")


def test_the_walk_sees_command_functions_and_long_docstrings():
    names = dict(_docstrings())
    commands = {f"kvplan.cli.{m}.{f}" for _, m, f in COMMANDS}
    # the command functions are found, and some --help texts are longer than MAX_LINES, so
    # the walk measures long docstrings and leaving the commands out is not vacuous
    assert commands <= set(names)
    assert max(names[name] for name in commands) > MAX_LINES
