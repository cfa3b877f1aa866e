"""vLLM --cpu-offload-gb: one declaration (kvplan.engines.settings) plus its use in the budget
(kvplan.engines.vllm.budget.offloaded_weights).

vLLM keeps `int(cpu_offload_gb * 1024**3)` bytes of decoder-layer parameters per GPU in CPU
memory (config/offload.py UVAOffloadConfig; model_executor/offloader/uva.py), so the weights
term of "Available KV cache memory" falls by that much, never by more than the layers: the
embedding and the LM head stay on the GPU."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()
GIB = 2**30
# Llama-3.1-8B: vocabulary 128,256 x hidden 4,096 in bf16, an input embedding and an untied
# LM head (config.json: tie_word_embeddings false)
LLAMA_EMBEDDING = 128256 * 4096 * 2


def budget(*args: str) -> dict:
    res = runner.invoke(app, ["plan", "llama-3.1-8b", "--gpu", "l4", "--max-model-len", "8k",
                              *args, "-f", "json"])
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.stdout)["budget"]


def test_offload_lowers_the_weights_term_by_the_gib_given():
    base, offloaded = budget(), budget("--cpu-offload-gb", "4")
    assert base["weights_bytes"][0] - offloaded["weights_bytes"][0] == 4 * GIB
    assert offloaded["available_kv_cache_bytes"][0] - base["available_kv_cache_bytes"][0] \
        == 4 * GIB
    # a fraction of a GiB: vLLM's int(x * 1024**3)
    half = budget("--cpu-offload-gb", "0.5")
    assert base["weights_bytes"][0] - half["weights_bytes"][0] == GIB // 2
    # what moved is named beside the weights: read over UVA each step, so the decode floor
    # (kvplan.planning.plan.decode_floor) leaves it out by name
    assert offloaded["offloaded_weights_bytes"] == [4 * GIB]
    assert half["offloaded_weights_bytes"] == [GIB // 2] and base["offloaded_weights_bytes"] == []


def test_at_most_the_layers_move():
    everything = budget("--cpu-offload-gb", "100")
    assert everything["weights_bytes"] == [2 * LLAMA_EMBEDDING]
    assert everything["weights_bytes"][0] + everything["offloaded_weights_bytes"][0] == \
        budget()["weights_bytes"][0]
    assert any("--cpu-offload-gb" in note for note in everything["notes"])


def test_the_same_from_a_plan_file_and_a_launch_line(tmp_path):
    flag = budget("--cpu-offload-gb", "4")
    plan = tmp_path / "plan.yaml"
    plan.write_text("schema: kvplan.capacity/1\ndeployments:\n  - name: a\n"
                    "    model: llama-3.1-8b\n    gpu: l4\n    max_model_len: 8k\n"
                    "    engine: {name: vllm, cpu_offload_gb: 4}\n"
                    "    requires: {min_concurrency: {concurrency: 1, context: 8k}}\n")
    res = runner.invoke(app, ["check", str(plan), "-f", "json"])
    assert res.exit_code == 0, res.output
    (dep,) = json.loads(res.stdout)["deployments"]
    assert dep["kv_budget_bytes"] == flag["available_kv_cache_bytes"][0]
    launched = runner.invoke(app, [
        "plan", "--gpu", "l4", "-f", "json", "--from-command",
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --cpu-offload-gb 4"])
    assert launched.exit_code == 0, launched.output
    assert json.loads(launched.stdout)["budget"] == flag


def test_other_engines_refuse_it_by_name():
    res = runner.invoke(app, ["plan", "llama-3.1-8b", "--gpu", "l4", "--engine", "sglang",
                              "--cpu-offload-gb", "4"])
    assert res.exit_code == 2
    assert "--cpu-offload-gb" in res.stderr and "vllm only" in res.stderr
