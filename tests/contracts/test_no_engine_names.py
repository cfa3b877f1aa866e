"""No code outside kvplan/engines/ tests an engine's name (issue 9): the planner, compare,
check, sweep, the reports, explain and validate ask the Engine object from the registry.

An AST scan of every module of the package except kvplan/engines/ looks for a comparison
(`==`, `!=`, `in`, `not in`) with an engine's name, its display name or one of its
`validate --layout` names, a `.startswith`/`.endswith` on one, and a dict literal keyed by
one (a name -> rule table), and a name assigned to a variable (`VLLM = "vllm"`, to compare
later). CLI option declarations (choices in help text, a default) are
not comparisons and pass. The scan is shown to fail on planted examples first.
"""

from __future__ import annotations

import ast

from paths import ROOT

from kvplan.engines import registry

PACKAGE = ROOT / "kvplan"


def engine_words() -> set[str]:
    """Every name that identifies an engine: registry names, display names, layout names."""
    from kvplan.validate.predict import CONTIGUOUS, layouts

    words = set(registry.names())
    words |= {e.display_name for e in registry.all_engines() if e.display_name}
    words |= {name for name in layouts() if name != CONTIGUOUS}
    return words


def _constants(node: ast.AST) -> list[str]:
    """String constants of `node`, or of the items of a tuple/list/set literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for item in node.elts for s in _constants(item)]
    return []


def name_tests(source: str, words: set[str], filename: str = "<planted>") -> list[str]:
    """Where `source` tests an engine's name: 'file:line: what'."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename)):
        hits: list[str] = []
        if isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            hits = [s for side in (node.left, *node.comparators) for s in _constants(side)
                    if s in words]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("startswith", "endswith"):
            hits = [s for arg in node.args for s in _constants(arg)
                    if len(s) >= 2 and any(w.startswith(s) for w in words)]
        elif isinstance(node, ast.Dict):
            hits = [s for key in node.keys if key is not None for s in _constants(key)
                    if s in words]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            hits = [s for s in _constants(node.value) if s in words]  # VLLM = "vllm"
        found += [(node.lineno, s) for s in hits]  # type: ignore[attr-defined]
    return [f"{filename}:{line}: {s!r}" for line, s in sorted(found)]


def test_the_scan_finds_planted_name_tests():
    words = engine_words()
    planted = '''
def capacity(dep, layout, name, rules):
    if dep.engine == "sglang":
        return 1
    if layout in ("hf-static", "contiguous"):
        return 2
    if name.startswith("hf"):
        return 3
    if dep.engine != "vLLM":
        return 4
    return {"vllm": 16, "trtllm": 32}[dep.engine]
PAGED = ("sglang",)
'''
    found = name_tests(planted, words)
    assert [f.split(": ", 1)[1] for f in found] == [
        "'sglang'", "'hf-static'", "'hf'", "'vLLM'", "'trtllm'", "'vllm'", "'sglang'"], found
    # what is allowed: a CLI option's help text and default, a layout that is no engine's,
    # the registry's default, and the Hub prefix "hf:" of a model argument
    allowed = '''
import typer
def validate(layout: str = typer.Option("vllm", help="vllm, sglang or hf-static.")):
    if layout == "contiguous":
        return registry.get(registry.DEFAULT)
    if model.startswith("hf:"):
        return model
'''
    assert name_tests(allowed, words) == []


def test_no_engine_name_is_tested_outside_the_engines():
    words = engine_words()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "engines") in path.parents:
            continue
        found += name_tests(path.read_text(), words, str(path.relative_to(PACKAGE.parent)))
    assert found == [], "ask the Engine object from kvplan.engines.registry instead"
