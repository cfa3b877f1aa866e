"""MLA at scale: vLLM decode context parallel and data parallel with expert parallel, SGLang
DP attention -- DeepSeek-V3 on 8 x H200, the per-rank KV bytes written from each engine's rule.

DeepSeek-V3: 61 layers, one MLA latent of kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values
per token and layer, bf16, not split by TP (vLLM MLAAttentionSpec num_kv_heads=1; SGLang
calculate_mla_kv_cache_dim). vLLM 0.33's block on Hopper for a bf16 cache is 16 tokens: its first
MLA backend there is FLASH_ATTN_MLA (FA3, kernel blocks MultipleOf(16), DCP supported;
platforms/cuda.py _get_backend_priorities); up to 0.32 it was FlashMLA's 64.
"""

from __future__ import annotations

import json
from dataclasses import replace

from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.dtypes import cdiv
from kvplan.planning import plan
from kvplan.sources.gpus import find_gpu
from kvplan.sources.library import resolve

LATENT_BYTES = (512 + 64) * 2 * 61  # per token on one rank: 70,272 B
BLOCK = 16
OLD_BLOCK = 64  # the 0.11 rule: FlashMLA on Hopper
CONTEXT = 131072


def deployment(**kw) -> plan.Deployment:
    return plan.Deployment(resolve("deepseek-v3"), max_model_len=CONTEXT,
                           **kw).with_gpu(find_gpu("h200"))


def test_vllm_decode_context_parallel_splits_the_latent():
    tp8 = plan.capacity(deployment(tp=8))
    dcp = plan.capacity(deployment(tp=8, dcp=8))
    assert dcp.deployment.num_gpus == tp8.deployment.num_gpus == 8
    # the same budget and blocks per rank: DCP changes what a block holds, not its bytes
    assert dcp.engine_profile.num_blocks == tp8.engine_profile.num_blocks
    assert dcp.engine_profile.bytes_per_block == BLOCK * LATENT_BYTES
    # replicated (TP only): every rank stores all 131,072 tokens of a request;
    # DCP 8 (kv_cache_interface.py: max_model_len = cdiv(max_model_len, dcp); the manager's
    # block covers block_size x dcp tokens): each rank stores an eighth
    full = plan.max_concurrency(tp8, CONTEXT)
    split = plan.max_concurrency(dcp, CONTEXT)
    assert full.units_per_request == (cdiv(CONTEXT, BLOCK),)
    assert split.units_per_request == (cdiv(cdiv(CONTEXT, 8), BLOCK),)
    per_rank_bytes_tp8 = cdiv(CONTEXT, BLOCK) * BLOCK * LATENT_BYTES
    per_rank_bytes_dcp = cdiv(cdiv(CONTEXT, 8), BLOCK) * BLOCK * LATENT_BYTES
    assert per_rank_bytes_tp8 == 8 * per_rank_bytes_dcp == 9_210_691_584
    assert split.units_per_request[0] * dcp.engine_profile.bytes_per_block == per_rank_bytes_dcp
    usable = dcp.engine_profile.num_blocks - 1  # the null block
    assert split.max_requests == usable // cdiv(cdiv(CONTEXT, 8), BLOCK)
    assert full.max_requests == usable // cdiv(CONTEXT, BLOCK)
    # 0.33's token line: int(num_blocks / blocks_per_request x max_model_len)
    blocks = dcp.engine_profile.num_blocks
    assert dcp.engine_profile.kv_cache_tokens == int(blocks / cdiv(cdiv(CONTEXT, 8), BLOCK)
                                                     * CONTEXT)
    # 0.11: num_blocks x block_size, "Multiplying the GPU KV cache size by the dcp_world_size"
    old = plan.capacity(replace(deployment(tp=8, dcp=8), engine_version="0.11.0"))
    assert old.engine_profile.kv_cache_tokens == old.engine_profile.num_blocks * OLD_BLOCK * 8


def test_vllm_data_parallel_with_expert_parallel():
    cap = plan.capacity(deployment(tp=1, dp=8, expert_parallel=True))
    assert cap.deployment.num_gpus == 8
    # each DP rank is its own engine: its own scheduler, requests and KV cache
    assert cap.pool.replicas == 8
    r = plan.max_concurrency(cap, CONTEXT)
    assert r.units_per_request == (cdiv(CONTEXT, BLOCK),)
    per_rank = (cap.engine_profile.num_blocks - 1) // cdiv(CONTEXT, BLOCK)
    assert r.max_requests == 8 * per_rank
    # the routed experts are spread whole over the 8 GPUs (EP = TP x DP), the rest
    # (attention, dense layers, shared experts, embeddings) is on every GPU
    from kvplan.core.weights import weight_plan

    ep8 = weight_plan(resolve("deepseek-v3"), "auto", 1, 1, 8)
    assert ep8 is not None
    # vLLM's weights term is that placement as memory_allocated counts it: plus the rotary
    # cache (163,840 positions x 64 x 2 B = 20 MiB) and the allocator's rounding (a few MiB)
    extra = cap.budget.weights_bytes[0] - ep8.stage_bytes[0]
    assert 163840 * 64 * 2 <= extra < 163840 * 64 * 2 + 64 * 2**20


def test_sglang_dp_attention():
    from kvplan.engines.sglang import sglang_default_mem_fraction

    cap = plan.capacity(deployment(engine="sglang", tp=8, dp=8, dp_attention=True))
    assert cap.deployment.num_gpus == 8  # DP attention splits the TP group
    assert cap.pool.replicas == 8
    assert cap.kv_bytes_per_token == LATENT_BYTES  # SGLang's MLA cell, page size 1
    tokens = cap.engine_profile.max_total_num_tokens
    r = plan.max_concurrency(cap, CONTEXT)
    assert r.max_requests == 8 * (tokens // CONTEXT)
    # server_args.py (0.5.3) _handle_gpu_memory_settings on a 139.8 GiB H200: chunked prefill
    # 8,192, decode graphs up to 512 at TP 4 or more, + 512 x dp x 3 MB for DP attention and
    # 512 x dp x 1.5 more as max_bs > 300
    h200 = find_gpu("h200").memory_bytes
    mb = h200 / 2**20
    reserved = 512 + 8192 * 1.5 + 8 * 1 / 8 * 1024 + 2 * 512 + 512 * 8 * 3 + 512 * 8 * 1.5
    assert sglang_default_mem_fraction(h200, 8, 1, (0, 5, 3), 8, True) == \
        round((mb - reserved) / mb, 3)
    assert cap.engine_profile.max_total_num_tokens > 0


def test_cli_plans_the_layouts():
    runner = CliRunner()
    for args in (["--count", "8", "--dp", "8", "--enable-expert-parallel"],
                 ["--tp", "8", "--dcp", "8"],
                 ["--engine", "sglang", "--tp", "8", "--dp", "8", "--enable-dp-attention"]):
        res = runner.invoke(app, ["plan", "deepseek-v3", "--gpu", "h200", "--context", "128k",
                                  "--max-model-len", "128k", *args, "--format", "json"])
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        assert doc["deployment"]["num_gpus"] == 8
        assert doc["answer"]["max_concurrency"] > 0
    bad = runner.invoke(app, ["plan", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--dcp", "3"])
    assert bad.exit_code == 2 and "--dcp 3 must divide --tp 8" in bad.stderr


def test_find_gpus_keeps_the_parallel_style():
    target = plan.Target(context_tokens=CONTEXT, concurrency=16)
    dp = plan.fewest_gpus(deployment(tp=1, dp=2, expert_parallel=True), target)
    assert dp.best is not None and all(o.tp == 1 and o.dp == o.num_gpus for o in dp.options)
    dcp = plan.fewest_gpus(deployment(tp=8, dcp=8), target)
    assert dcp.best is not None and all(o.dcp == o.tp for o in dcp.options)


def test_sglang_max_running_requests_caps_concurrency():
    from kvplan.engines.sglang import max_running_requests

    # managers/tp_worker.py (0.5.3): min(tokens // 2, max_num_reqs); model_runner.py:
    # max_num_reqs = min(max(int(tokens / context_len x 512), 2048), 4096)
    assert max_running_requests(46611, 131072) == min(46611 // 2, 2048)
    assert max_running_requests(10_000_000, 8192) == 4096
    assert max_running_requests(3000, 8192) == 3000 // 2
    assert max_running_requests(10_000_000, 8192, flag=64, dp_attention_size=8) == 64 // 8
    cap = plan.capacity(replace(deployment(engine="sglang", tp=8), max_model_len=8192))
    r = plan.max_concurrency(cap, 128)
    tokens = cap.engine_profile.max_total_num_tokens
    assert (r.max_requests, r.limited_by) == (max_running_requests(tokens, 8192),
                                              "max_running_requests")
