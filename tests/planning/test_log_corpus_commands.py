"""The `kvplan explain` command behind each row of docs/engine-accuracy.md section 8.

Section 8's table is computed through the Python API (tests/planning/test_log_corpus.py). Each
row's command is the log file with the flags its index entry gives (`explain:` in
tests/fixtures/logs/index.yaml); the test runs every command with `--format json` and holds
what it prints to the table's row: the same outcome from the logged budget (exact, diff, none,
error) and the same from-settings difference. `python
tests/planning/test_log_corpus_commands.py` prints the list the document holds."""

from __future__ import annotations

import json
import re
import shlex
import sys
from functools import cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/

import pytest
import yaml
from accuracy_doc import ACCURACY_DOC, assert_in_accuracy_doc
from paths import FIXTURES, ROOT
from typer.testing import CliRunner

from kvplan.cli import app

CORPUS = FIXTURES / "logs"
INDEX = yaml.safe_load((CORPUS / "index.yaml").read_text(encoding="utf-8"))
LOGS: list[dict[str, Any]] = INDEX["logs"]
runner = CliRunner()


def command(entry: dict[str, Any]) -> list[str]:
    """`kvplan explain`'s arguments for a log (from the repository root): the file and each
    flag its entry gives, spelled as explain's option of the same name."""
    args = ["explain", (CORPUS / entry["file"]).relative_to(ROOT).as_posix()]
    for key, value in (entry.get("explain") or {}).items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


@cache
def _run(entry_id: str) -> tuple[str, float | None]:
    """(the outcome from the logged budget, the from-settings difference in %) as the
    command prints them."""
    entry = next(e for e in LOGS if e["id"] == entry_id)
    args = [str(ROOT / a) if a.startswith("tests/") else a for a in command(entry)]
    result = runner.invoke(app, [*args, "--format", "json"])
    if result.exit_code == 2:
        return "error", None
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    checked = [r for r in out["rows"] if r["basis"] == "given the logged budget"]
    status = "none" if not checked else \
        "exact" if all(r["status"] == "ok" for r in checked) else "diff"
    budget = next((r for r in out["rows"] if r["quantity"] == "KV budget"), None)
    return status, None if budget is None else budget["diff_percent"]


def _table_row(entry_id: str) -> list[str]:
    text = ACCURACY_DOC.read_text(encoding="utf-8")
    section = text[text.index("## 8. "):text.index("## 9. ")]
    line = next(x for x in section.splitlines() if x.startswith(f"| {entry_id} |"))
    return [c.strip() for c in line.strip("|").split("|")]


@pytest.mark.parametrize("entry", LOGS, ids=[e["id"] for e in LOGS])
def test_the_command_prints_the_tables_row(entry):
    status, diff = _run(entry["id"])
    row = _table_row(entry["id"])
    # a log on an assumed model keeps its outcome, marked as left out of the count
    assert row[3].split(":")[0].removesuffix(" (assumed model, not counted)") == status, \
        (row, status)
    shown = re.match(r"[+-]\d+\.\d%", row[4])
    assert (shown.group(0) if shown else None) == \
        (None if diff is None else f"{diff:+.1f}%"), (row, diff)


def command_list() -> str:
    lines = ["The command behind each row (from the repository root; `python "
             "tests/planning/test_log_corpus_commands.py` prints this list, and a test runs "
             "each command with `--format json` and holds what it prints to the row):", ""]
    lines += [f"- {e['id']}: `kvplan {shlex.join(command(e))}`" for e in LOGS]
    return "\n".join(lines) + "\n"


def test_the_document_holds_the_commands():
    assert_in_accuracy_doc(command_list(), __file__)


if __name__ == "__main__":
    print(command_list())
