"""Docs, code and tests cite files inside the repository (the research notes are
docs/engine-kv-sizing.md), never a path on the machine they were written on: a reader of a
clean clone cannot follow /work/... or ../shared/... ."""

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


# `docs/NAME.md` as cited by code, tests and docs
DOCS_CITED = re.compile(r"(?<![\w./-])docs/([\w.-]+\.md)")


def test_every_cited_docs_page_exists():
    """A citation of docs/NAME.md names a page that is in the repository (the research notes
    were once cited as a file that lived outside it)."""
    missing = set()
    for path in _files():
        if not path.exists() or path.resolve() == Path(__file__).resolve():
            continue
        for name in DOCS_CITED.findall(path.read_text(encoding="utf-8", errors="replace")):
            if not (ROOT / "docs" / name).is_file():
                missing.add(f"{path.relative_to(ROOT)}: docs/{name}")
    assert sorted(missing) == []


def test_the_research_notes_are_cited_by_their_path_in_the_repository():
    bare = re.compile(r"(?<![\w/])engine-kv-sizing\.md")
    found = [f"{path.relative_to(ROOT)}:{n}" for path in _files() if path.exists()
             and path.resolve() != Path(__file__).resolve()
             and path.name != "engine-kv-sizing.md"
             for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace")
                                      .splitlines(), 1) if bare.search(line)]
    assert found == []
