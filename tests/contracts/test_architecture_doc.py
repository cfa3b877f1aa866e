"""docs/architecture.md names every module of each layer in that layer's row, so a newcomer
finds the room a module lives in (and a new module cannot be added without saying where)."""

import re

from paths import ROOT

PAGE = ROOT / "docs" / "architecture.md"
# packages whose row lists its modules one by one (cli, output and validate rows describe theirs
# by kind: one module per command group, one builder per result type)
LISTED = ("core", "sources", "engines", "planning")


def _rows() -> dict[str, str]:
    rows = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `kvplan\.(\w+)` \| (.*?) \|", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def test_every_module_is_named_in_its_layers_row():
    rows = _rows()
    missing = []
    for package in LISTED:
        words = set(re.findall(r"\w+", rows[package]))
        for module in sorted((ROOT / "kvplan" / package).glob("*.py")):
            if module.stem != "__init__" and module.stem not in words:
                missing.append(f"kvplan.{package}.{module.stem}")
    assert missing == [], "name these in docs/architecture.md's table"
