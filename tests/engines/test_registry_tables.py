"""The registry hands the launch-line and log readers each built-in engine's tables from its
package's `text` module (kvplan.engines.registry), without importing its code: the
same tables the engine itself returns, and a command reading a vLLM log or launch line
imports no other engine's code."""

from __future__ import annotations

import pytest
from paths import FIXTURES
from probes import probe

from kvplan.engines import registry

OTHER_ENGINES = ("kvplan.engines.sglang.engine", "kvplan.engines.trtllm.engine",
                 "kvplan.engines.tgi.engine", "kvplan.engines.hf.engine",
                 "kvplan.engines.llamacpp.engine")


@pytest.mark.parametrize("name", registry.names())
def test_the_tables_are_the_engines_own(name):
    engine = registry.get(name)
    assert registry.log_format(name) == engine.log_format()
    assert registry.launch_table(name) == engine.launch()


@pytest.mark.parametrize("argv", [
    ["explain", str(FIXTURES / "logs" / "vllm-v1-llama-3.1-8b.log")],
    ["plan", "--from-command", "vllm serve meta-llama/Llama-3.1-8B-Instruct "
     "--tensor-parallel-size 2", "--gpu", "h100"]])
def test_reading_a_vllm_log_or_command_imports_no_other_engines_code(argv):
    result = probe(argv, OTHER_ENGINES + ("kvplan.engines.vllm.engine",))
    assert result.ran, result.stderr
    assert result.loaded == ["kvplan.engines.vllm.engine"], result.loaded


def test_a_package_imports_a_submodule_when_one_of_its_names_is_asked_for():
    import importlib

    for package in ("vllm", "sglang", "trtllm", "tgi", "llamacpp"):
        module = importlib.import_module(f"kvplan.engines.{package}")
        for name in module.__all__:
            assert getattr(module, name) is not None, (package, name)
        with pytest.raises(AttributeError, match="no attribute 'nothing'"):
            module.nothing  # noqa: B018
