"""Every install line the documentation and kvplan's own hints give works: kvplan is not on
PyPI, so `pip install kvplan` or `pip install 'kvplan[plot]'` would install nothing (or another
project's package). A line installs a checkout (`pip install .`, `'.[plot]'`, a path) or a
package that is published (`matplotlib`, `torch`, `gguf`)."""

from __future__ import annotations

import re
from pathlib import Path

from paths import ROOT

# `pip install` (any options) followed by the bare project name, quoted or not, with or
# without extras: what would be looked up on the package index
BY_NAME = re.compile(r"pip3?\s+install\s+(?:-{1,2}[\w-]+(?:[= ]\S+)?\s+)*"
                     r"['\"]?kvplan(?:\[|['\"`\s]|$)", re.M)


def _documents() -> list[Path]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
            *sorted((ROOT / "docs").rglob("*.yml")), *sorted((ROOT / "benchmarks").glob("*.md"))]
    return docs + sorted((ROOT / "kvplan").rglob("*.py"))  # error hints and docstrings


def test_no_install_line_names_kvplan_on_the_package_index():
    found = [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
             for path in _documents()
             for text in [path.read_text(encoding="utf-8")]
             for m in BY_NAME.finditer(text)]
    assert found == [], found


def test_the_pattern_finds_what_it_must():
    for line in ("pip install kvplan", "pip install 'kvplan[plot]'", "pip install -U kvplan",
                 'pip install "kvplan[validate]"', "`pip install kvplan`"):
        assert BY_NAME.search(line), line
    for line in ("pip install .", "pip install '.[plot]'", "pip install ./kvplan-src",
                 "pip install 'matplotlib>=3.8'", "pip install kvplan-src/"):
        assert not BY_NAME.search(line), line
