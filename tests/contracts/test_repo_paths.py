"""Docs, code and tests cite files inside the repository, or shared notes by name
("engine-kv-sizing.md"), never a path on the machine they were written on: a reader of a clean
clone cannot follow /work/... or ../shared/... ."""

import re
from pathlib import Path

from paths import ROOT

TEXT = (".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".json")
# the development checkout lived at /work/...; its reference notes beside it in ../shared
FORBIDDEN = ("/work/", "../shared")
# the shared notes' folder as a path ("shared/engine-logs.yaml"): name the file alone, or the
# repository's copy (tests/fixtures/...)
SHARED_PATH = re.compile(r"(?<![\w./-])shared/")


def _files():
    for top in ("kvplan", "docs", "tests", "scripts", "benchmarks", "model_configs", ".ci"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in TEXT and "__pycache__" not in path.parts:
                yield path
    yield ROOT / "README.md"
    yield ROOT / "pyproject.toml"


def test_no_file_cites_a_path_outside_the_repository():
    this = Path(__file__).resolve()
    found = []
    for path in _files():
        if path.resolve() == this or not path.exists():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            if any(bad in line for bad in FORBIDDEN) or SHARED_PATH.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}")
    assert found == []
