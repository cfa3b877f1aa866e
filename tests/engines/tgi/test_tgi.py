"""Text Generation Inference as an engine plugin: the warm-up's block count and the router's
"Setting max batch total tokens to N" line, derived here from TGI's own source:

    free       = max(0, mem_get_info free - (1 - MEMORY_FRACTION * TGI_WIGGLE_ROOM) * total)
    num_blocks = int(free // total_cache_size) + warm-up blocks     (flash_causal_lm.warmup)
    total_cache_size = num_layers * BLOCK_SIZE * num_kv_heads * head_size * 2 * dtype_size
    max batch total tokens = num_blocks * BLOCK_SIZE

with TGI_WIGGLE_ROOM 0.90 and MEMORY_FRACTION 1.0 by default, BLOCK_SIZE 1 for flashinfer.
"""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import BadInputError
from kvplan.core.layers import FullAttention
from kvplan.core.spec import ModelSpec
from kvplan.engines.base import Deployment
from kvplan.engines.registry import get, names
from kvplan.planning.launch import from_command
from kvplan.sources.gpus import find_gpu, load_catalog
from kvplan.sources.library import resolve

H100_TOTAL = 85_028_896_768  # deviceQuery, the catalog's H100 SXM


def test_tgi_is_a_registered_engine():
    assert "tgi" in names() and get("tgi").display_name == "TGI"


def test_max_batch_total_tokens_from_tgis_warmup_formula():
    weights, activation, context = 16_060_522_496, 2 * 2**30, 500 * 2**20  # measured terms
    dep = Deployment(resolve("llama-3.1-8b"), engine="tgi", weights_bytes=weights,
                     activation_bytes=activation, non_torch_bytes=context).with_gpu(
        find_gpu("h100"))
    cap = get("tgi").capacity(dep)
    # Llama-3.1-8B: 32 layers x 1 (flashinfer block) x 8 KV heads x 128 x 2 (K, V) x 2 bytes
    total_cache_size = 32 * 1 * 8 * 128 * 2 * 2
    free = math.floor(H100_TOTAL * 1.0 * 0.90) - weights - activation - context
    blocks = free // total_cache_size
    assert cap.engine_numbers["num_blocks"] == blocks
    assert cap.engine_numbers["max_batch_total_tokens"] == blocks * 1
    assert get("tgi").log_lines(cap)[-1] == f"Setting max batch total tokens to {blocks}"


def test_cuda_memory_fraction_and_shards():
    base = Deployment(resolve("llama-3.1-70b"), engine="tgi", tp=4, memory_fraction=0.8,
                      weights_bytes=141_107_412_992, activation_bytes=2**30,
                      non_torch_bytes=2**29).with_gpu(find_gpu("h100"))
    cap = get("tgi").capacity(base)
    # per shard: 141.1 GB / 4 of weights; 8 KV heads / 4 shards = 2 per layer, 80 layers
    per_token = 80 * 2 * 128 * 2 * 2
    free = math.floor(H100_TOTAL * 0.8 * 0.90) - 141_107_412_992 // 4 - 2**30 - 2**29
    assert cap.engine_numbers["max_batch_total_tokens"] == free // per_token


def test_block_size_follows_the_attention_backend():
    from kvplan.engines import tgi

    llama = resolve("llama-3.1-8b")
    assert tgi.attention_backend(llama, 9) == "flashinfer"  # head dim 128
    # resolve_attention falls back only for head dims flashinfer lacks (here 96): to
    # flashdecoding (BLOCK_SIZE 256), or to paged (16) below compute capability 8
    odd = ModelSpec("odd", (FullAttention(32, 96),) * 32, max_context_tokens=4096)
    assert tgi.attention_backend(odd, 9) == "flashdecoding"
    assert tgi.attention_backend(odd, 7) == "paged"
    assert tgi.BLOCK_SIZES == {"flashinfer": 1, "flashdecoding": 256, "paged": 16}
    dep = Deployment(llama, engine="tgi", weights_bytes=16_060_522_496).with_gpu(find_gpu("t4"))
    with pytest.raises(BadInputError):
        get("tgi").capacity(dep)  # 16 GB of weights do not leave room on a 16 GB T4


def test_tgi_refuses_what_it_does_not_model():
    dep = Deployment(resolve("llama-3.1-8b"), engine="tgi", pp=2).with_gpu(find_gpu("h100"))
    with pytest.raises(BadInputError, match="pipeline"):
        get("tgi").capacity(dep)


def test_launcher_line_through_docker():
    lp = from_command("docker run --gpus all --shm-size 1g -p 8080:80 -v $PWD/data:/data "
                      "ghcr.io/huggingface/text-generation-inference:3.0.1 --model-id "
                      "meta-llama/Llama-3.1-8B-Instruct --num-shard 2 --max-total-tokens 8192 "
                      "--cuda-memory-fraction 0.85 --max-batch-prefill-tokens 8192")
    assert lp.engine == "tgi" and lp.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert lp.overrides["tp"] == 2 and lp.overrides["memory_fraction"] == 0.85
    assert lp.overrides["max_model_len"] == 8192
    assert lp.overrides["max_num_batched_tokens"] == 8192
    assert lp.launch.image_version == "3.0.1"


def test_cli_plan_with_a_tgi_launch_line():
    result = CliRunner().invoke(app, [
        "plan", "--from-command", "text-generation-launcher --model-id "
        "meta-llama/Llama-3.1-8B-Instruct --max-total-tokens 8192", "--gpu", "h100",
        "--context", "8k", "-f", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    tokens = out["engine"]["max_batch_total_tokens"]
    assert out["answer"]["max_concurrency"] == tokens // 8192  # block size 1: whole tokens


def test_the_budget_rule_follows_the_release():
    """flash_causal_lm.warmup: up to 2.4 `int(free_memory * 0.95 // total_cache_size)` with
    free = total x fraction - used (2.4: TGI_WIGGLE_ROOM 0.90); from 3.0
    `get_free_memory(device, MEMORY_FRACTION * TGI_WIGGLE_ROOM)`; paged blocks of 16 before
    2.3 (models/cache_manager.py BLOCK_SIZE) and on ROCm."""
    from kvplan.engines import tgi

    weights, activation, context = 16_060_522_496, 2 * 2**30, 500 * 2**20
    used = weights + activation + context

    def numbers(version, gpu="h100"):
        dep = Deployment(resolve("llama-3.1-8b"), engine="tgi", engine_version=version,
                         weights_bytes=weights, activation_bytes=activation,
                         non_torch_bytes=context).with_gpu(find_gpu(gpu))
        return get("tgi").capacity(dep).engine_numbers

    per_block_16 = 16 * 32 * 8 * 128 * 2 * 2  # BLOCK_SIZE x layers x KV heads x dim x K,V x 2 B
    old = numbers("2.0.2")
    assert old["block_size"] == 16
    assert old["kv_budget_bytes"] == math.floor((H100_TOTAL - used) * 0.95)
    assert old["num_blocks"] == math.floor((H100_TOTAL - used) * 0.95) // per_block_16
    assert numbers("2.4.1")["kv_budget_bytes"] == math.floor((H100_TOTAL - used) * 0.90)
    assert numbers("3.0.0")["kv_budget_bytes"] == math.floor(H100_TOTAL * 0.95) - used
    assert numbers("3.2.0")["kv_budget_bytes"] == math.floor(H100_TOTAL * 0.93) - used
    assert numbers("3.0.0")["block_size"] == 1  # flashinfer for head dim 128
    assert numbers("3.0.0", "mi300x")["block_size"] == 16  # ROCm: paged attention
    # every AMD GPU of the catalog is a ROCm target (its gfx compute_capability), and only
    # they (the GPUs with room for the 8B model's 16 GB of weights)
    for gpu in (g for g in load_catalog() if g.memory_bytes > 40 * 2**30):
        rocm = gpu.vendor == "amd"
        assert (numbers("3.0.0", gpu.name)["block_size"] == 16) == rocm, gpu.name
    assert tgi.release_rule(None) == (0.90, "fraction")


def test_the_first_releases_take_the_free_memory_whole_and_older_ones_do_not_size():
    """0.9.4-1.4.0 flash_causal_lm.warmup: `int(free_memory // total_cache_size)`, no wiggle
    room; before 0.9.4 the router takes --max-batch-total-tokens (16,000 by default)."""
    from kvplan.engines import tgi

    assert tgi.release_rule((1, 0, 3)) == (1.0, "free")
    assert tgi.release_rule((1, 4, 0)) == (1.0, "free")
    assert tgi.release_rule((1, 4, 1)) == (0.95, "free")
    assert tgi.release_rule((2, 3, 1)) == (0.95, "free")
    with pytest.raises(BadInputError, match="before 0.9.4"):
        tgi.release_rule((0, 9, 3))


# --max-batch-total-tokens on a flash-attention model: TGI's router keeps the warm-up's figure
# and warns that the flag "is deprecated for Flash Attention models" (router/src/main.rs up to
# 2.0, router/src/server.rs 2.1-2.2, backends/v3/src/lib.rs connect_backend from 2.3); its
# launcher first checks the flag against --max-total-tokens (every release) and
# --max-batch-prefill-tokens (0.9.4 to 2.3) and refuses to start where one is larger

def _plan_json(*args: str) -> dict:
    result = CliRunner().invoke(app, ["plan", *args, "-f", "json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_the_warm_up_figure_wins_over_max_batch_total_tokens():
    # huggingface/text-generation-inference#1831 (TGI 2.0.0, one A100 80GB, a Mistral-7B):
    # Args { ... max_total_tokens: Some(8512), max_batch_prefill_tokens: Some(32768),
    # max_batch_total_tokens: Some(4294967295) ... } and then the warm-up's 425,472 tokens, not
    # the 4,294,967,295 given: the figure does not move with the flag
    base = ("mistral-7b-v0.1", "--engine", "tgi", "--engine-version", "2.0.0", "--max-model-len",
            "8512", "--max-num-batched-tokens", "32768", "--gpu", "a100-80gb")
    given = _plan_json(*base, "--max-batch-total-tokens", "4294967295")
    plain = _plan_json(*base)
    assert given["engine"] == plain["engine"]
    assert given["engine"]["max_batch_total_tokens"] != 4294967295
    assert any("deprecated for Flash Attention models" in n for n in given["notes"])
    # from a launch line (the variable the Kubernetes deployment set, as clap reads it)
    launched = from_command("MAX_BATCH_TOTAL_TOKENS=4294967295 text-generation-launcher "
                            "--model-id mistralai/Mistral-7B-v0.1 --max-total-tokens 8512")
    assert launched.overrides["max_batch_total_tokens"] == 4294967295
    assert not any("does not model it" in w for w in launched.warnings)


@pytest.mark.parametrize("version,prefill,refused", [
    ("2.0.0", "32768", True), ("2.3.0", "32768", True), ("2.4.0", "32768", False),
    ("3.3.6", "32768", False), ("2.0.0", "4096", False)])
def test_the_launchers_checks_of_max_batch_total_tokens(version, prefill, refused):
    result = CliRunner().invoke(app, [
        "plan", "mistral-7b-v0.1", "--engine", "tgi", "--engine-version", version,
        "--max-num-batched-tokens", prefill, "--max-batch-total-tokens", "16000",
        "--gpu", "a100-80gb"])
    assert (result.exit_code == 2) == refused, result.output
    if refused:
        assert "`max_batch_prefill_tokens` must be <= `max_batch_total_tokens`" in result.output
    # --max-total-tokens above it: refused by every release's launcher
    over = CliRunner().invoke(app, [
        "plan", "mistral-7b-v0.1", "--engine", "tgi", "--engine-version", version,
        "--max-model-len", "16384", "--max-batch-total-tokens", "16000", "--gpu", "a100-80gb"])
    assert over.exit_code == 2 and "`max_total_tokens` must be <= " in over.output


def test_max_batch_total_tokens_is_tgis_only():
    result = CliRunner().invoke(app, ["plan", "llama-3.1-8b", "--engine", "vllm",
                                      "--max-batch-total-tokens", "16000", "--gpu", "h100"])
    assert result.exit_code == 2 and "for tgi only" in result.output
