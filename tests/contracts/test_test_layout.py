"""The tests mirror the packages: each package of kvplan has a folder under tests/ and each
engine package under kvplan/engines/ a folder under tests/engines/ with at least one test
module, so a reader finds an engine's tests beside its name and a new engine cannot arrive
untested. The modules left flat in tests/engines/ are the suites that cross engines, each
listed with why."""

from __future__ import annotations

from pathlib import Path

from paths import ROOT, TESTS

# tests/engines/*.py that test several engines at once (or the engines' shared front), and why
CROSS_ENGINE = {
    "test_engines.py": "every log of engine-logs.yaml has a case; kvplan.engines.parse_version",
    "test_engine_buffers.py": "llama.cpp, SGLang and TensorRT-LLM against buffer-logs.yaml: "
                              "one table in docs/engine-accuracy.md",
    "test_engine_plugin.py": "the engine base and registry, with a toy engine",
    "test_mla_scale.py": "MLA layouts at scale under vLLM and SGLang, through plan",
    "test_checkpoint_weights.py": "the checkpoint inventory (kvplan.core.weights) every engine "
                                  "loads, against published checkpoints; one docs table",
    "test_vocab_parallel.py": "the vocabulary split (kvplan.core.weights) of vLLM and "
                              "TensorRT-LLM",
    "test_accuracy_commands.py": "a kvplan command for each figure of docs/engine-accuracy.md, "
                                 "every engine's",
    "test_registry_tables.py": "the registry hands every engine's launch and log tables",
    "test_dsa_families.py": "one DSA config (GLM-5) as vLLM's pages and SGLang's pool size it",
    "test_checkpoint_kv_request.py": "one checkpoint KV cache request as vLLM, SGLang and "
                                     "TensorRT-LLM each resolve --kv-cache-dtype auto from it",
}


def packages(root: Path) -> set[str]:
    """The subpackages directly under `root` (folders with an __init__.py)."""
    return {p.parent.name for p in root.glob("*/__init__.py")}


def untested(package_root: Path, tests_root: Path) -> list[str]:
    """Each subpackage of `package_root` without a folder of test modules under `tests_root`."""
    return sorted(f"{name}: no {tests_root.name}/{name}/test_*.py"
                  for name in packages(package_root)
                  if not any((tests_root / name).glob("test_*.py")))


def test_every_package_of_kvplan_has_a_test_folder():
    assert untested(ROOT / "kvplan", TESTS) == []


def test_every_engine_package_has_a_test_folder():
    assert untested(ROOT / "kvplan" / "engines", TESTS / "engines") == []


def test_every_engine_test_folder_names_an_engine_package():
    folders = {p.name for p in (TESTS / "engines").iterdir()
               if p.is_dir() and p.name != "__pycache__"}
    assert folders - packages(ROOT / "kvplan" / "engines") == set()


def test_only_the_cross_engine_suites_sit_flat_in_tests_engines():
    """A test of one engine goes in that engine's folder; a new flat module names here why it
    crosses engines."""
    unlisted = sorted({p.name for p in (TESTS / "engines").glob("test_*.py")} - set(CROSS_ENGINE))
    assert unlisted == [], f"{unlisted}: move to tests/engines/<engine>/ or list in CROSS_ENGINE"


def test_a_new_engine_package_without_tests_is_named(tmp_path):
    engines, tests = tmp_path / "engines", tmp_path / "tests_engines"
    for name in ("vllm", "newengine"):
        (engines / name).mkdir(parents=True)
        (engines / name / "__init__.py").write_text("")
    (tests / "vllm").mkdir(parents=True)
    (tests / "vllm" / "test_vllm_pages.py").write_text("")
    (tests / "newengine").mkdir()  # a folder without a test module does not count
    assert untested(engines, tests) == ["newengine: no tests_engines/newengine/test_*.py"]
