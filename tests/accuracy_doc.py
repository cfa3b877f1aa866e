"""docs/engine-accuracy.md holds tables that test modules print
(`python tests/<package>/test_X.py`).

One check that a printed table is still in the document, for every module that prints one.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ACCURACY_DOC = ROOT / "docs" / "engine-accuracy.md"


def assert_in_accuracy_doc(table: str, module_file: str) -> None:
    """`table` (made by the test module at `module_file`) appears verbatim in the document."""
    script = Path(module_file).resolve().relative_to(ROOT).as_posix()
    assert table in ACCURACY_DOC.read_text(encoding="utf-8"), \
        f"docs/engine-accuracy.md is stale: run `python {script}`"
