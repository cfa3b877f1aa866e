import pytest

from kvplan.core.errors import BadInputError
from kvplan.core.units import parse_bytes, parse_int_list, parse_tokens


@pytest.mark.parametrize(("text", "value"), [
    ("8192", 8192), ("8k", 8 * 1024), ("128k", 128 * 1024), ("128K", 131072),
    ("1m", 2**20), ("8,192", 8192), ("1.5k", 1536), (4096, 4096),
])
def test_tokens(text, value):
    assert parse_tokens(text) == value


@pytest.mark.parametrize("text", ["0", "-1", "1.3k", "abc", "8kb", "", "1e3"])
def test_bad_tokens(text):
    with pytest.raises(BadInputError):
        parse_tokens(text)


@pytest.mark.parametrize(("text", "value"), [
    ("24GiB", 24 * 2**30), ("80GB", 80 * 10**9), ("57.65GiB", 5765 * 2**30 // 100),
    ("512 MiB", 512 * 2**20), ("1TB", 10**12), ("100B", 100),
])
def test_bytes(text, value):
    assert parse_bytes(text) == value


def test_bytes_need_a_unit_and_whole_bytes():
    for text in ("24", "24G", "0.5B", "-1GiB", "0GiB"):
        with pytest.raises(BadInputError):
            parse_bytes(text)


def test_int_list():
    assert parse_int_list("2k, 4096,8k", "--lengths") == [2048, 4096, 8192]
    with pytest.raises(BadInputError):
        parse_int_list(" , ", "--lengths")


def test_the_binary_units_have_one_home():
    """GiB and MiB are declared in kvplan.core.units alone: a module that needs them imports
    them (an AST scan of the package for a module-level `GIB = ...` / `MIB = ...`)."""
    import ast

    from paths import ROOT

    from kvplan.core.units import GIB, MIB

    assert (GIB, MIB) == (1024**3, 1024**2)
    homes = []
    for path in sorted((ROOT / "kvplan").rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign) else []
            homes += [(path.relative_to(ROOT).as_posix(), t.id) for t in targets
                      if isinstance(t, ast.Name) and t.id in ("GIB", "MIB", "KIB", "TIB")]
    assert homes == [("kvplan/core/units.py", "GIB"), ("kvplan/core/units.py", "MIB")], homes
