"""The layering contract (pyproject's [tool.importlinter], docs/architecture.md) holds, and
it really fails when a lower layer imports a higher one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from paths import ROOT

LINT = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT), "--no-cache", "--no-logo", "--config",
                           str(root / "pyproject.toml")],
                          capture_output=True, text=True, cwd=root, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(root)})


def test_the_package_keeps_its_layers():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def _copy_with(tmp_path: Path, module: str, line: str) -> Path:
    shutil.copytree(ROOT / "kvplan", tmp_path / "kvplan",
                    ignore=shutil.ignore_patterns("__pycache__", "model_configs"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / "kvplan" / (module.replace(".", "/") + ".py")
    # inside a function, as the package writes its lazy imports
    path.write_text(path.read_text() + f"\n\ndef _wrong() -> None:\n    {line}  # noqa\n")
    return tmp_path


def test_an_upward_import_breaks_the_contract(tmp_path):
    result = _lint(_copy_with(tmp_path, "core.units",
                              "from kvplan.cli.options import handle_errors"))
    assert result.returncode == 1
    assert "kvplan.core is not allowed to import kvplan.cli" in result.stdout
    assert "kvplan.core.units -> kvplan.cli.options" in result.stdout


def test_engines_and_sources_are_independent(tmp_path):
    # siblings in one layer: an engine reads no file and no catalog; the caller passes values
    result = _lint(_copy_with(tmp_path, "engines.vllm.engine", "from kvplan.sources import gpus"))
    assert result.returncode == 1
    assert "kvplan.engines.vllm.engine -> kvplan.sources.gpus" in result.stdout


def test_an_engine_importing_another_engine_breaks_the_contract(tmp_path):
    # engines are independent siblings: what two of them share lives in engines.shared
    result = _lint(_copy_with(tmp_path, "engines.sglang.memory",
                              "from kvplan.engines.vllm import vllm_budget"))
    assert result.returncode == 1
    assert "kvplan.engines.sglang.memory -> kvplan.engines.vllm" in result.stdout


def test_base_asking_the_registry_breaks_the_contract(tmp_path):
    # a Capacity holds its engine; base never looks one up by name
    result = _lint(_copy_with(tmp_path, "engines.base", "from kvplan.engines.registry import get"))
    assert result.returncode == 1
    assert "kvplan.engines.base -> kvplan.engines.registry" in result.stdout


def test_a_circle_inside_a_package_breaks_the_contract(tmp_path):
    # errors is core's lowest module; units raises its errors, so errors may not ask units
    result = _lint(_copy_with(tmp_path, "core.errors", "from kvplan.core.units import GIB"))
    assert result.returncode == 1
    assert "No cycles are allowed in kvplan.core" in result.stdout
