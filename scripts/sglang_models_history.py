"""Derive kvplan/data/sglang-served.txt: the release that added each model class SGLang
serves, and the release that removed it, from the model files of each release.

SGLang's registry (python/sglang/srt/models/registry.py `import_model_classes`) serves every
class a module of sglang/srt/models/ names in its `EntryClass` (a class or a list of
classes), keyed by the class's name. This reads each module's `EntryClass` (parsed, never
imported) from each release given and writes, for every class some release names, the first
release that names it and the first later release that no longer does.

    python scripts/sglang_models_history.py sglang-0.4.0-*.whl sglang-0.5.23-*.whl ...
    python scripts/sglang_models_history.py 0.5.23=path/to/sglang/srt/models ...
    python scripts/sglang_models_history.py --check ...     # exit 1 when the file differs

A source is a wheel (its version from the file name) or VERSION=the models folder. A class
named by the oldest release read is written as added "<=" that release.
"""

from __future__ import annotations

import argparse
import ast
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import served_history  # noqa: E402  (the writer both engines' scripts share)

OUT = served_history.ROOT / "kvplan" / "data" / "sglang-served.txt"
MODELS = "sglang/srt/models/"
HEADER = """\
# SGLang's model classes by release: the classes each module of sglang/srt/models/ names in
# its EntryClass, in each release read. One line each: the class, the first release naming it
# ("<=" when the oldest release read names it already), the first release that no longer does
# ("-": still named by the newest), and "model". Written by scripts/sglang_models_history.py;
# do not edit by hand.
"""


def entry_classes(source: str) -> set[str]:
    """The class names a module's top-level `EntryClass = ...` assignments name."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if (isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "EntryClass" for t in node.targets)):
            names |= {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
    return names


def _modules(path: Path) -> list[str]:
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as wheel:
            return [wheel.read(n).decode("utf-8-sig") for n in wheel.namelist()
                    if n.startswith(MODELS) and n.endswith(".py") and "/" not in n[len(MODELS):]]
    return [p.read_text(encoding="utf-8-sig") for p in sorted(path.glob("*.py"))]


def _source(arg: str) -> tuple[str, Path]:
    if "=" in arg:
        version, path = arg.split("=", 1)
        return version, Path(path)
    p = Path(arg)
    if p.suffix != ".whl":
        raise SystemExit(f"{arg}: give a wheel or VERSION=models-folder")
    return p.name.split("-")[1], p


def history(sources: list[tuple[str, Path]]) -> str:
    return served_history.history(HEADER, [
        (version, dict.fromkeys(set().union(*map(entry_classes, _modules(path))), "model"))
        for version, path in sources])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+")
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed file instead of writing it")
    args = parser.parse_args(argv)
    text = history([_source(a) for a in args.sources])
    return served_history.write_or_check(OUT, text, args.check, "sglang_models_history.py")


if __name__ == "__main__":
    sys.exit(main())
