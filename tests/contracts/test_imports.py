"""A pure calculation and --help must not pay for torch or huggingface_hub."""

import json
import subprocess
import sys

from probes import ROOT, probe

HEAVY = ("torch", "huggingface_hub", "transformers", "numpy", "gguf")

def _heavy_imports(argv):
    result = probe(argv, HEAVY)
    assert result.ran, result.stderr  # an early error would import nothing either
    return result.loaded


def test_size_imports_nothing_heavy():
    assert _heavy_imports(["size", "llama-3.1-8b", "--tokens", "8k", "--format", "json"]) == []


def test_size_table_imports_nothing_heavy():
    assert _heavy_imports(["size", "llama-3.1-8b", "--tokens", "8k"]) == []


def test_help_imports_nothing_heavy():
    assert _heavy_imports(["--help"]) == []
    assert _heavy_imports(["size", "--help"]) == []


def test_json_path_does_not_import_rich():
    # the JSON output path is the start-up benchmark's; rich is only for terminal tables
    result = probe(["size", "llama-3.1-8b", "-f", "json"], ("rich",))
    assert result.loaded == []
    assert json.loads(result.stdout)["per_token_bytes"] == 2 * 32 * 8 * 128 * 2  # it ran


def _gc_when_typer_imported(command: str) -> str:
    # records gc.isenabled() at the moment typer is first imported, then runs the CLI
    code = f"""
import gc, sys, importlib.abc
seen = []
class Spy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "typer" and not seen:
            seen.append(gc.isenabled())
        return None
sys.meta_path.insert(0, Spy())
sys.argv = ["kvplan", {command!r}, "--help"]
try:
    from kvplan.cli import main
    main()
except SystemExit:
    pass
print("GC_AT_TYPER=" + str(seen), file=sys.stderr)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    return next(line for line in proc.stderr.splitlines() if line.startswith("GC_AT_TYPER="))


def test_quick_commands_import_typer_with_the_collector_off():
    # start-up: the cyclic collector costs ~7 ms while typer and click are imported
    assert _gc_when_typer_imported("size") == "GC_AT_TYPER=[False]"
    assert _gc_when_typer_imported("validate") == "GC_AT_TYPER=[True]"  # long: keeps it
