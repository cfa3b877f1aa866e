"""A pure calculation and --help must not pay for torch or huggingface_hub."""

import json

from probes import probe

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
