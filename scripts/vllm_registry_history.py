"""Derive kvplan/data/vllm-served.txt: the release that added each generation architecture of
vLLM's registry, and the release that removed it, from registry.py across releases.

Reads `_TEXT_GENERATION_MODELS`, `_MULTIMODAL_MODELS` and `_TRANSFORMERS_SUPPORTED_MODELS` of
vllm/model_executor/models/registry.py (parsed, never imported: tests/oracle/registry.py's
reader) from each release given, and writes, for every class some release lists, the first
release that lists it and the first later release that no longer does.

    python scripts/vllm_registry_history.py vllm-0.22.1-*.whl vllm-0.23.0-*.whl ...
    python scripts/vllm_registry_history.py 0.22.1=path/to/registry.py ...
    python scripts/vllm_registry_history.py --git VLLM_CHECKOUT     # every v0.X.Y tag from v0.6.3
    python scripts/vllm_registry_history.py --check ...             # exit 1 when the file differs

A source is a wheel (its version from the file name), VERSION=registry.py, or VERSION=a source
tree holding vllm/model_executor/models/registry.py. registry.py first appears in 0.6.3;
an architecture listed by the oldest release read is written as added "<=" that release.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import served_history  # noqa: E402  (the writer both engines' scripts share)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "kvplan" / "data" / "vllm-served.txt"
REGISTRY = "vllm/model_executor/models/registry.py"
HEADER = """\
# vLLM's generation architectures by release: the classes of _TEXT_GENERATION_MODELS,
# _MULTIMODAL_MODELS and _TRANSFORMERS_SUPPORTED_MODELS of vllm/model_executor/models/registry.py
# in each release read. One line each: the class, the first release listing it ("<=" when the
# oldest release read lists it already), the first release that no longer does ("-": still
# listed by the newest), and the table the last release listing it puts it in (text,
# multimodal, or transformers: served by the Transformers backend). Written by
# scripts/vllm_registry_history.py; do not edit by hand.
"""


def _reader():  # tests/oracle/registry.py's AST reader: one parser of registry.py
    sys.path.insert(0, str(ROOT / "tests" / "oracle"))
    import registry

    return registry.read_registry


def _from_git(checkout: Path, folder: Path) -> list[tuple[str, Path]]:
    tags = subprocess.run(["git", "-C", str(checkout), "tag", "--list", "v0.*"], check=True,
                          capture_output=True, text=True).stdout.split()
    out = []
    for tag in tags:
        if not re.fullmatch(r"v\d+\.\d+\.\d+(\.post\d+|\.\d+)?", tag):
            continue  # release candidates and the like
        version = tag[1:]
        if served_history.version_key(version) < (0, 6, 3):
            continue
        shown = subprocess.run(["git", "-C", str(checkout), "show", f"{tag}:{REGISTRY}"],
                               capture_output=True, text=True)
        if shown.returncode != 0:
            continue
        path = folder / f"{version}.py"
        path.write_text(shown.stdout, encoding="utf-8")
        out.append((version, path))
    return out


def _source(arg: str) -> tuple[str, Path]:
    if "=" in arg:
        version, path = arg.split("=", 1)
        p = Path(path)
        return version, (p / REGISTRY if p.is_dir() else p)
    p = Path(arg)
    if p.suffix != ".whl":
        raise SystemExit(f"{arg}: give a wheel, VERSION=registry.py or VERSION=source-tree")
    return p.name.split("-")[1], p


def history(sources: list[tuple[str, Path]]) -> str:
    read = _reader()
    # the table of each class (text, multimodal or transformers) in each release
    return served_history.history(HEADER, [
        (version, {name: t for name, (t, _module) in read(path).items()})
        for version, path in sources])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*")
    parser.add_argument("--git", type=Path, help="a vLLM git checkout: read every release tag")
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed file instead of writing it")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        sources = [_source(a) for a in args.sources]
        if args.git:
            sources += _from_git(args.git, Path(tmp))
        if not sources:
            parser.error("give wheels, VERSION=registry.py sources or --git CHECKOUT")
        text = history(sources)
    return served_history.write_or_check(OUT, text, args.check, "vllm_registry_history.py")


if __name__ == "__main__":
    sys.exit(main())
