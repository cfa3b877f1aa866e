"""kvplan's reach over vLLM's generation registry, read from the wheel the oracle downloads.

Lists `_TEXT_GENERATION_MODELS`, `_MULTIMODAL_MODELS` and `_TRANSFORMERS_SUPPORTED_MODELS` of
vllm/model_executor/models/registry.py (parsed, never imported: vLLM needs a GPU stack to
import), checks that kvplan/data/vllm-registry.txt is the same list, and prints
"N of 274 architectures read, M refused by name, 0 without a reader". Exits 1 when the
snapshot has drifted or an architecture has no reader.

    python tests/oracle/registry.py [REGISTRY_PY_OR_WHEEL]   # check and print the counts
    python tests/oracle/registry.py --write [...]           # rewrite the snapshot

Without an argument it reads .oracle-vllm/ (tests/oracle/setup.sh unpacks the wheel there),
else the wheel in $ORACLE_DOWNLOAD_DIR or .oracle-download/.
"""

from __future__ import annotations

import ast
import os
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
REGISTRY = "vllm/model_executor/models/registry.py"
TABLES = {"_TEXT_GENERATION_MODELS": "text", "_MULTIMODAL_MODELS": "multimodal",
          "_TRANSFORMERS_SUPPORTED_MODELS": "transformers"}


def find_source() -> Path | None:
    """registry.py unpacked by setup.sh, else the downloaded wheel; None when neither."""
    unpacked = ROOT / ".oracle-vllm" / REGISTRY
    if unpacked.is_file():
        return unpacked
    folder = Path(os.environ.get("ORACLE_DOWNLOAD_DIR", ROOT / ".oracle-download"))
    wheels = sorted(folder.glob("vllm-*.whl")) if folder.is_dir() else []
    return wheels[-1] if wheels else None


def wheel_version(source: Path) -> str:
    """The vLLM version of a wheel's file name (vllm-0.33.0-cp38-...), else setup.sh's pin."""
    if source.suffix == ".whl":
        return source.name.split("-")[1]
    setup = (ROOT / "tests" / "oracle" / "setup.sh").read_text(encoding="utf-8")
    return next(line.split("=", 1)[1] for line in setup.splitlines()
                if line.startswith("VLLM_VERSION="))


def read_registry(source: Path) -> dict[str, tuple[str, str]]:
    """class name -> (table, module) of the generation tables, from registry.py's AST."""
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as wheel:
            text = wheel.read(REGISTRY).decode("utf-8")
    else:
        text = source.read_text(encoding="utf-8")
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(text).body:
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in TABLES and isinstance(node.value, ast.Dict)):
            continue
        table = TABLES[node.targets[0].id]
        for key, value in zip(node.value.keys, node.value.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(value, ast.Tuple):
                module = value.elts[0]
                assert isinstance(module, ast.Constant)
                found[key.value] = (table, module.value)
    return found


def snapshot_text(version: str, found: dict[str, tuple[str, str]]) -> str:
    head = (ROOT / "kvplan" / "data" / "vllm-registry.txt").read_text(
        encoding="utf-8").splitlines()
    comments = [line for line in head if line.startswith("#")]
    lines = [*comments, f"version {version}"]
    lines += [f"{name} {table} {module}" for name, (table, module) in sorted(found.items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    write = "--write" in argv
    args = [a for a in argv if a != "--write"]
    source = Path(args[0]) if args else find_source()
    if source is None:
        print("no vLLM wheel: run tests/oracle/setup.sh first", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    from kvplan.sources.hfarch import REGISTRY_FILE, registry_counts, registry_summary

    found = read_registry(source)
    text = snapshot_text(wheel_version(source), found)
    if write:
        REGISTRY_FILE.write_text(text, encoding="utf-8")
    elif REGISTRY_FILE.read_text(encoding="utf-8") != text:
        print(f"{REGISTRY_FILE.relative_to(ROOT)} differs from {source}'s registry: run "
              "python tests/oracle/registry.py --write and regenerate docs/architectures.md",
              file=sys.stderr)
        return 1
    names = sorted(found)
    print(registry_summary(names))
    return 1 if registry_counts(names)["none"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
