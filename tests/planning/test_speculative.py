"""Speculative decoding's draft tokens as a deployment setting: `plan --num-speculative-tokens`,
vLLM's `--speculative-config '{"num_speculative_tokens": k}'` in `--from-command`, and
`engine.num_speculative_tokens` in a plan file all reach vLLM's CUDA-graph estimate."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

# Llama-3.1-8B (config.json: hidden 4,096, intermediate 14,336, 32 layers), bf16, TP 1
HIDDEN, INTER, LAYERS = 4096, 14336, 32
# the forward's widest buffers a token: gate/up output and the activation (3 x intermediate)
# plus three hidden-size buffers, bf16 (shared.activations.forward_bytes_per_token's rule)
FORWARD_PER_TOKEN = 3 * INTER * 2 + 3 * HIDDEN * 2
PER_GRAPH = max(2**20, LAYERS * 156 * 2**10)  # each later graph: the driver's executable graph


def graphs_by_hand(k: int, seqs: int = 64) -> int:
    """vLLM 0.33 `config/vllm.py::_set_cudagraph_sizes` with q = 1 + k tokens a request and
    8,192 batched tokens: the grid 1, 2, 4, 8..248 step 8, 256.. step 16 up to
    min(2 x q x seqs, 512), plus the uniform-decode sizes q x n for n = 1, 2, 4, 8.. step 8 up
    to seqs; FULL decode graphs for the sizes from q to q x seqs (`cudagraph_dispatcher.py::
    initialize_cudagraph_keys`). The estimate (`gpu_model_runner.py::profile_cudagraph_memory`):
    twice the largest size's forward, then one graph's bytes for every later graph."""
    q = 1 + k
    ceiling = min(2 * q * seqs, 512)
    grid = [s for s in [1, 2, 4, *range(8, 256, 8), *range(256, 513, 16)] if s <= ceiling]
    decode = [q * n for n in [1, 2, 4, *range(8, seqs + 1, 8)] if q * n <= ceiling]
    sizes = sorted(set(grid + decode))
    full = [s for s in sizes if q <= s <= q * seqs]
    return 2 * sizes[-1] * FORWARD_PER_TOKEN + (len(sizes) - 1 + len(full) - 1) * PER_GRAPH


def test_the_hand_counts():
    # k = 0: 19 sizes up to 128, 11 of them FULL (1..64); k = 3: 51 sizes up to 512, 33 FULL
    assert graphs_by_hand(0) == 2 * 128 * FORWARD_PER_TOKEN + (18 + 10) * PER_GRAPH
    assert graphs_by_hand(3) == 2 * 512 * FORWARD_PER_TOKEN + (50 + 32) * PER_GRAPH


def budget(*args: str) -> dict:
    res = CliRunner().invoke(app, [*args, "-f", "json"], env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["budget"]


BASE = ("--gpu", "h100", "--engine-version", "0.33.0", "--max-num-seqs", "64")


@pytest.mark.parametrize("k", [0, 3])
def test_plan_flag_sizes_the_graphs(k):
    b = budget("plan", "llama-3.1-8b", *BASE, "--num-speculative-tokens", str(k))
    assert b["cudagraph_bytes"] == graphs_by_hand(k)


def test_draft_tokens_leave_less_for_the_cache():
    without = budget("plan", "llama-3.1-8b", *BASE)
    with_drafts = budget("plan", "llama-3.1-8b", *BASE, "--num-speculative-tokens", "3")
    assert without["available_kv_cache_bytes"][0] - with_drafts["available_kv_cache_bytes"][0] \
        == graphs_by_hand(3) - graphs_by_hand(0)


def test_speculative_config_in_a_launch_command():
    cmd = ("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 64 --speculative-config "
           "'{\"method\": \"eagle\", \"model\": \"yuhuili/EAGLE-LLaMA3.1-Instruct-8B\", "
           "\"num_speculative_tokens\": 3}'")
    res = CliRunner().invoke(app, ["plan", "--from-command", cmd, "--gpu", "h100",
                                   "--engine-version", "0.33.0", "-f", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["budget"]["cudagraph_bytes"] == graphs_by_hand(3)
    assert "3 draft tokens" in res.stderr and "eagle" in res.stderr
    # the pre-0.8 flag of its own
    old = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 64 --num-speculative-tokens 3"
    assert budget("plan", "--from-command", old, "--gpu", "h100", "--engine-version",
                  "0.33.0")["cudagraph_bytes"] == graphs_by_hand(3)


@pytest.mark.parametrize("config, message", [
    ("'[3]'", "not a valid JSON object"),
    ("'{\"num_speculative_tokens\": -1}'", "num_speculative_tokens must be a whole number"),
    ("'{\"num_speculative_tokens\": \"3\"}'", "num_speculative_tokens must be a whole number"),
])
def test_bad_speculative_config(config, message):
    cmd = f"vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config {config}"
    res = CliRunner().invoke(app, ["plan", "--from-command", cmd, "--gpu", "h100"])
    assert res.exit_code == 2
    assert message in res.output


def test_flag_and_command_both_is_an_error():
    cmd = "vllm serve meta-llama/Llama-3.1-8B-Instruct --num-speculative-tokens 3"
    res = CliRunner().invoke(app, ["plan", "--from-command", cmd, "--gpu", "h100",
                                   "--num-speculative-tokens", "2"])
    assert res.exit_code == 2
    assert "--num-speculative-tokens" in res.output


def test_negative_flag_is_an_error():
    res = CliRunner().invoke(app, ["plan", "llama-3.1-8b", "--gpu", "h100",
                                   "--num-speculative-tokens", "-1"])
    assert res.exit_code == 2
    assert "--num-speculative-tokens must be between 0 and" in res.output


def plan_file(tmp_path: Path, engine: str) -> Path:
    path = tmp_path / "capacity.yaml"
    path.write_text(textwrap.dedent(f"""\
        schema: kvplan.capacity/1
        deployments:
          - name: drafts
            model: llama-3.1-8b
            gpu: h100
            engine: {engine}
            requires:
              min_concurrency: {{concurrency: 1, context: 8k}}
        """))
    return path


def test_plan_file_engine_setting(tmp_path):
    from kvplan.planning.check import build_capacity, load_plan

    plan = load_plan(plan_file(tmp_path, "{name: vllm, version: '0.33.0', max_num_seqs: 64, "
                                         "num_speculative_tokens: 3}"))
    cap = build_capacity(plan.deployments[0].deployment)
    assert not isinstance(cap, str) and cap.budget is not None
    assert cap.budget.cudagraph_bytes == graphs_by_hand(3)


def test_plan_file_refuses_a_negative_count(tmp_path):
    res = CliRunner().invoke(app, ["check", str(plan_file(
        tmp_path, "{name: vllm, num_speculative_tokens: -2}"))])
    assert res.exit_code == 2
    assert "num_speculative_tokens" in res.output and "between 0 and" in res.output
