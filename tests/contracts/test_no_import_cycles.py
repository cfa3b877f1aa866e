"""No import circle anywhere in kvplan: every module's imports, read with `ast` (those inside
functions and under TYPE_CHECKING too, which import-linter's sibling contract sees only at
package granularity), form a graph without strongly connected components.

A circle makes a module's meaning depend on import order and hides which of two modules is
the lower one; pyproject.toml's `acyclic_siblings` contract holds the packages, this test
holds single modules. The finder itself is checked on a planted circle below.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_graph(root: Path, package: str = "kvplan") -> dict[str, set[str]]:
    """module -> the package's modules it imports (the deepest module each import names)."""
    files: dict[str, Path] = {}
    for path in (root / package).rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path

    def deepest(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if is_package else name.split(".")[:-1]
                    here = here[:len(here) - node.level + 1]
                    base = ".".join(here + ([base] if base else []))
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                found = deepest(target) if target.split(".")[0] == package else None
                if found and found != name:
                    graph[name].add(found)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_kvplan_has_no_import_circle():
    graph = module_graph(ROOT)
    assert len(graph) > 50  # the whole package was read
    found = cycles(graph)
    assert found == [], "\n".join(
        "circle: " + ", ".join(f"{m} -> {sorted(graph[m] & set(c))}" for m in c)
        for c in found)


def test_the_finder_sees_a_planted_circle_through_a_function_local_import(tmp_path):
    pkg = tmp_path / "kvplan"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "errors.py").write_text(
        "def f():\n    from kvplan.core.units import human_bytes\n    return human_bytes\n")
    (pkg / "core" / "units.py").write_text("from .errors import f\n")
    (pkg / "core" / "spec.py").write_text("from kvplan.core import units\n")
    graph = module_graph(tmp_path)
    assert graph["kvplan.core.spec"] == {"kvplan.core.units"}
    assert cycles(graph) == [["kvplan.core.errors", "kvplan.core.units"]]
    (pkg / "core" / "errors.py").write_text("X = 1\n")
    assert cycles(module_graph(tmp_path)) == []
