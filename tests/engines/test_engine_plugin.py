"""An engine defined only here, registered at run time, planned with through the library and
the CLI: adding an engine needs no change anywhere else in kvplan (the Engine protocol and
the registry are the whole contract)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import paths
import pytest
from factories import dense
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.dtypes import cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.sizing import request_bytes
from kvplan.engines import registry
from kvplan.engines.base import (
    BaseEngine,
    Capacity,
    Constraint,
    Deployment,
    Engine,
    Need,
    Pool,
)
from kvplan.planning import plan

GIB = 2**30
FIXTURES = paths.FIXTURES / "engines" / "models"
LLAMA8B = str(FIXTURES / "llama-3.1-8b.yaml")
TOY_BLOCK = 8  # tokens per block of the toy engine
# Llama-3.1-8B: K and V (x2) of 8 KV heads x 128 dims in bf16 (2 B) on 32 layers
LLAMA8B_TOKEN_BYTES = 2 * 8 * 128 * 2 * 32  # 131,072


class ToyEngine(BaseEngine):
    """One flat pool of blocks of 8 tokens; the whole given budget (or 90 % of the GPU)."""

    name = "toy"
    display_name = "Toy"
    kv_dtypes = ("auto",)
    smaller_kv_dtypes = ()

    def capacity(self, dep: Deployment) -> Capacity:
        from kvplan.core.dtypes import parse_format

        fmt = parse_format("auto", dep.spec.dtype)
        per_token = request_bytes(dep.spec.layers, 1, fmt, dep.tp)
        budget = dep.kv_memory_bytes if dep.kv_memory_bytes is not None \
            else dep.gpu_memory_bytes * 9 // 10
        blocks = budget // (per_token * TOY_BLOCK)
        pool = Pool(self.name, (Constraint("toy blocks", "block", blocks,
                                           (Need("full", TOY_BLOCK),)),),
                    dep.context_limit(), tokens_per_unit=TOY_BLOCK)
        return Capacity(dep, self, None, {"blocks": blocks}, pool, fmt.name, 0, per_token)

    def numbers(self, cap: Capacity) -> dict[str, Any]:
        return {"num_blocks": cap.engine_profile["blocks"]}

    def log_lines(self, cap: Capacity) -> list[str]:
        return [f"toy: {cap.engine_profile['blocks']} blocks"]


@pytest.fixture
def toy():
    engine = registry.register(ToyEngine())
    yield engine
    registry.unregister("toy")


def test_the_toy_engine_meets_the_protocol(toy):
    assert isinstance(toy, Engine)
    assert registry.get("toy") is toy and "toy" in registry.names()


def test_plan_with_a_registered_engine_through_the_library(toy):
    spec = replace(dense(), name="llama-3.1-8b")
    cap = plan.capacity(Deployment(spec, engine="toy", kv_memory_bytes=10 * GIB,
                                   max_model_len=32768))
    blocks = 10 * GIB // (LLAMA8B_TOKEN_BYTES * TOY_BLOCK)  # 10,240
    assert plan.engine_numbers(cap) == {"num_blocks": blocks}
    assert plan.engine_log_lines(cap) == [f"toy: {blocks} blocks"]
    c = plan.max_concurrency(cap, 8192)
    assert c.max_requests == blocks // cdiv(8192, TOY_BLOCK) == 10
    assert c.engine_concurrency == blocks / (8192 // TOY_BLOCK)
    assert plan.max_context(cap, 4).max_context_tokens == blocks // 4 * TOY_BLOCK
    assert plan.token_capacity(cap) == blocks * TOY_BLOCK
    assert plan.kv_budget_bytes(cap) == blocks  # BaseEngine: the first constraint's capacity
    w = plan.check_workload(cap, plan.parse_workload("8x(4k+4k)"))
    assert w.fits and w.uses[0].needed == 8 * 8192 // TOY_BLOCK
    best = plan.fewest_gpus(Deployment(spec, engine="toy", gpu_memory_bytes=20 * GIB),
                            plan.Target(context_tokens=131072, concurrency=2))
    # per GPU: 18 GiB / (131,072 B / tp x 8) blocks; 2 x 16,384 blocks need tp = 2
    assert best.best is not None and (best.best.tp, best.best.pp) == (2, 1)


def test_unknown_engines_name_the_registered_ones(toy):
    with pytest.raises(BadInputError, match="unknown engine 'lmdeploy'") as err:
        registry.get("lmdeploy")
    assert "toy" in (err.value.hint or "")


def test_plan_and_compare_with_a_registered_engine_through_the_cli(toy):
    runner = CliRunner()
    res = runner.invoke(app, ["plan", LLAMA8B, "--engine", "toy", "--kv-memory", "10GiB",
                              "--max-model-len", "32k", "--context", "8k", "-f", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    blocks = 10 * GIB // (LLAMA8B_TOKEN_BYTES * TOY_BLOCK)
    assert doc["deployment"]["engine"] == "toy"
    assert doc["engine"] == {"num_blocks": blocks}
    assert doc["log_lines"] == [f"toy: {blocks} blocks"]
    assert doc["answer"]["max_concurrency"] == blocks // (8192 // TOY_BLOCK)
    res = runner.invoke(app, ["compare", LLAMA8B, "--engine", "toy,vllm", "--kv-memory",
                              "10GiB", "--max-model-len", "32k", "--context", "8k",
                              "-f", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    assert [r["engine"] for r in rows] == ["toy", "vllm"]
    assert rows[0]["token_capacity"] == blocks * TOY_BLOCK


def test_check_reads_a_registered_engine(toy, tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(f"""\
schema: kvplan.capacity/1
deployments:
  - name: toy-10g
    model: {LLAMA8B}
    engine: {{name: toy, kv_memory: 10GiB}}
    max_model_len: 32768
    requires:
      min_concurrency: {{concurrency: 10, context: 8192}}
      min_context: {{concurrency: 11, context: 8192}}
""")
    res = CliRunner().invoke(app, ["check", str(path), "-f", "json"])
    # 10 requests of 8,192 tokens fill the 10,240 blocks exactly; 11 do not fit
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["deployments"][0]["engine"] == "toy"
    rows = {r["kind"]: r for r in doc["results"]}
    assert rows["min_concurrency"]["passed"] and not rows["min_context"]["passed"]
    assert rows["min_context"]["measured"] == 10240 // 11 * TOY_BLOCK


def test_a_plugin_names_its_launch_table_and_log_as_class_attributes():
    # BaseEngine answers launch() and log_format() from `launch_table` (a function building
    # the flag table, called through the class, so never bound to the engine) and
    # `start_log`; an engine naming neither reads no launch line and no log
    from kvplan.core.launch import EngineLaunch, EngineLog
    from kvplan.planning.launch import from_command

    built: list[str] = []

    def table() -> EngineLaunch:
        built.append("table")
        return EngineLaunch("toy-served", (("toy-serve",),),
                            flags={"--model": ("model", "str"), "--kv-memory": ("", "ignore")})

    log = EngineLog("toy-served", "Toy", markers=r"toy:", figures=())

    class Served(ToyEngine):
        name = "toy-served"
        launch_table = table
        start_log = log

    assert ToyEngine().launch() is None and ToyEngine().log_format() is None
    engine = registry.register(Served())
    try:
        assert engine.log_format() is log
        lp = from_command(f"toy-serve --model {LLAMA8B} --kv-memory 1GiB")
        assert lp.engine == "toy-served" and lp.model == LLAMA8B and built
    finally:
        registry.unregister("toy-served")
