"""vLLM's start-up sizing (kvplan.engines.vllm.startup: `profile`, `layout`) against the real
logs of tests/fixtures/engines/engine-logs.yaml and the worked numbers of
docs/engine-kv-sizing.md: the logged settings (and the logged budget, where the log gives
one) go in, and the logged token count, block count and concurrency must come out within
0.5% (engine_cases.close).
"""

from __future__ import annotations

from engine_cases import BY_ID, GIB, close, gib, model
from factories import dense

from kvplan.engines import parse_version, vllm


def test_vllm_rtx3090_llama8b_v0_refuses_to_start():
    e = BY_ID["vllm-i10517-llama31-8b-rtx3090-mml29000"]["reported"]
    # V0 engine (its "# GPU blocks / # CPU blocks" line); the block maths of a plain model is
    # the same as V1's: 2.89 GiB // (16 x 131,072) = 1,479 (logged 1,478: the budget was
    # 2.886..2.888 GiB, printed as 2.89).
    config = vllm.VllmConfig(max_model_len=29000, version=(0, 6, 4), block_size=16)
    p = vllm.profile(model("llama-3.1-8b"), config, gib(e["available_kv_cache_gib"]),
                     cpu_swap_bytes=4 * GIB)  # V0 default swap_space 4 GiB
    assert p.num_blocks == gib(2.89) // (16 * 131072) == 1479
    assert close(p.num_blocks, e["num_gpu_blocks"])
    assert close(p.kv_cache_tokens, e["kv_cache_tokens"])
    assert f"{p.max_concurrency:.2f}" == f"{1479 / -(-29000 // 16):.2f}" == "0.82"
    assert p.num_cpu_blocks == e["num_cpu_blocks"] == 4 * GIB // (16 * 131072)
    # one request of 29,000 tokens needs 1,813 blocks: vLLM refused to start
    assert not p.fits_max_model_len
    assert p.estimated_max_model_len == p.num_blocks * 16


def test_vllm_h100_llama8b_eagle_draft_layer():
    e = BY_ID["vllm-i19996-llama31-8b-eagle-h100"]["reported"]
    # 32 target layers + 1 EAGLE draft layer share the pool: page 65,536 x 33 per block.
    config = vllm.VllmConfig(max_model_len=131072, version=parse_version("0.9.1.dev705"),
                             num_draft_layers=1)
    p = vllm.profile(model("llama-3.1-8b"), config, gib(e["available_kv_cache_gib"]))
    assert p.bytes_per_block == 16 * 4096 * 33
    # 51.63 GiB // (16 tokens x 4,096 B x 33 layers) = 25,633 blocks x 16 tokens, exact
    assert p.kv_cache_tokens == e["kv_cache_tokens"] == gib(51.63) // (16 * 4096 * 33) * 16
    assert p.kv_cache_tokens == 410128
    assert f"{p.max_concurrency:.2f}" == "3.13"  # 25,633 / (131,072 / 16)
    # without the draft layer the same budget holds 32 layers per block: ~3% more
    plain = vllm.profile(model("llama-3.1-8b"), vllm.VllmConfig(max_model_len=131072,
                                                                version=(0, 9, 1)),
                         gib(e["available_kv_cache_gib"]))
    assert plain.kv_cache_tokens == gib(51.63) // (16 * 4096 * 32) * 16 == 422944


def test_vllm_4xl4_deepseek_v2_lite_tp2_pp2_min_over_stages():
    e = BY_ID["vllm-pr20665-deepseek-v2-lite-4xl4-tp2-pp2"]["reported"]
    # MLA on an L4 (Ada): Triton MLA keeps block 16 (807,792 is a multiple of 16, not 64).
    # The latent is not split by TP; PP splits 27 layers 14/13 (get_pp_indices). Each stage
    # has its own budget; vLLM takes the smaller block count.
    config = vllm.VllmConfig(max_model_len=1024, version=(0, 10, 0), tp=2, pp=2,
                             gpu_name="L4", compute_capability="8.9")
    budgets = (gib(e["available_kv_cache_gib_rank0"]), gib(e["available_kv_cache_gib_rank2"]))
    p = vllm.profile(model("deepseek-v2-lite"), config, budgets)
    assert [s.last_layer - s.first_layer for s in p.stages] == [14, 13]
    assert p.per_token_bytes == 14 * 576 * 2
    # blocks per stage: budget // (16 tokens x 1,152 B x stage layers); the minimum wins
    stage_blocks = (gib(12.13) // (16 * 1152 * 14), gib(11.33) // (16 * 1152 * 13))
    assert p.stage_num_blocks == stage_blocks == (50473, 50770)  # stage 0 limits
    assert p.kv_cache_tokens == 50473 * 16
    assert close(p.kv_cache_tokens, e["kv_cache_tokens"])
    assert close(p.max_concurrency, e["max_concurrency"])
    assert vllm.default_block_size(model("deepseek-v2-lite"), "H100 SXM", (0, 11, 0),
                                   compute_capability="9.0") == 64


def test_vllm_qwen3_14b_lmcache():
    e = BY_ID["lmcache-i1739-qwen3-14b-1gpu"]["reported"]
    config = vllm.VllmConfig(max_model_len=32768, version=(0, 11, 0))
    p = vllm.profile(model("qwen3-14b"), config, gib(e["available_kv_cache_gib"]))
    assert p.per_token_bytes == 40 * 2 * 8 * 128 * 2  # 160 KiB
    # 6.51 GiB // (16 x 160 KiB) = 2,666 blocks x 16 tokens, exact
    assert p.kv_cache_tokens == e["kv_cache_tokens"] == gib(6.51) // (16 * 163840) * 16 == 42656
    assert f"{p.max_concurrency:.2f}" == "1.30"


def test_vllm_rtx4080_qwen25_awq_new_token_line():
    e = BY_ID["vllm-doc-qwen25-7b-awq-rtx4080"]["reported"]
    # 0.26: "GPU KV cache size" = int(concurrency x max_model_len); with max_model_len a
    # multiple of 16 it equals num_blocks x 16. 8.0 GiB // 917,504 = 9,362 blocks (logged
    # 9,357: the budget printed as 8.0 was 7.9955..7.9964 GiB).
    config = vllm.VllmConfig(max_model_len=32768, version=parse_version("0.26.0"))
    p = vllm.profile(model("qwen2.5-7b"), config, gib(e["available_kv_cache_gib"]))
    assert p.per_token_bytes == 28 * 2 * 4 * 128 * 2 == 57344
    blocks = gib(8.0) // (16 * 57344)
    assert p.num_blocks == blocks == 9362
    assert p.kv_cache_tokens == int(blocks / (32768 // 16) * 32768) == 149792
    assert close(p.kv_cache_tokens, e["kv_cache_tokens"])
    assert f"{p.max_concurrency:.2f}" == "4.57"


def test_vllm_dgx_spark_mistral_gptq():
    e = BY_ID["vllm-doc-mistral7b-gptq-dgx-spark"]["reported"]
    config = vllm.VllmConfig(max_model_len=32768, version=parse_version("0.11.0+582e4e37"))
    p = vllm.profile(model("mistral-7b-v0.2"), config, gib(e["available_kv_cache_gib"]))
    # fp16 Mistral-7B: 32 layers x 2 x 8 KV heads x 128 x 2 B = 128 KiB per token; exact
    assert p.num_blocks == e["num_gpu_blocks"] == gib(102.56) // (16 * 131072) == 52510
    assert p.kv_cache_tokens == e["kv_cache_tokens"] == 52510 * 16
    assert f"{p.max_concurrency:.2f}" == "25.64"


def test_vllm_rocm_llama2_blocks_given():
    e = BY_ID["vllm-doc-llama2-7b-rocm-throughput"]["reported"]
    # No budget and no GPU name in this log: the block count is fed back
    # (--num-gpu-blocks-override) and the concurrency and CPU blocks recomputed.
    config = vllm.VllmConfig(max_model_len=4096, version=(0, 6, 0),
                             num_gpu_blocks_override=e["num_gpu_blocks"])
    p = vllm.profile(model("llama-2-7b"), config, 0, cpu_swap_bytes=4 * GIB)
    assert f"{p.max_concurrency:.2f}" == "78.85"  # 20,186 / 256
    assert p.num_cpu_blocks == e["num_cpu_blocks"] == 512  # 4 GiB / (16 x 512 KiB)


def test_vllm_rtx5090_qwen3_4b():
    e = BY_ID["vllm-doc-qwen3-4b-2507-rtx5090-bf16-mml131072"]["reported"]
    config = vllm.VllmConfig(max_model_len=131072, version=(0, 20, 0))
    p = vllm.profile(model("qwen3-4b-2507"), config, gib(e["available_kv_cache_gib"]))
    assert p.per_token_bytes == 36 * 2 * 8 * 128 * 2  # 144 KiB
    assert p.kv_cache_tokens == gib(18.96) // (16 * 147456) * 16 == 138048
    assert close(p.kv_cache_tokens, e["kv_cache_tokens"])
    assert f"{p.max_concurrency:.2f}" == "1.05"


def test_llama8b_block_count_and_both_token_lines():
    # §1.4/§1.5: 60 GiB -> 30,720 blocks -> 491,520 tokens; 3.75x at 131,072, 60.00x at 8,192
    for version in ((0, 11, 0), (0, 21, 0)):
        p = vllm.profile(dense(), vllm.VllmConfig(max_model_len=131072, version=version),
                         60 * GIB)
        assert p.num_blocks == 64424509440 // 65536 // 32 == 30720
        assert p.kv_cache_tokens == 30720 * 16 == 491520
        assert f"{p.max_concurrency:.2f}" == f"{30720 / (131072 // 16):.2f}" == "3.75"
    p = vllm.profile(dense(), vllm.VllmConfig(max_model_len=8192), 60 * GIB)
    assert f"{p.max_concurrency:.2f}" == "60.00"
    # max_model_len 10,001: 626 blocks per request, 49.07x; >= 0.21 line 490,783
    p = vllm.profile(dense(), vllm.VllmConfig(max_model_len=10001, version=(0, 21)), 60 * GIB)
    assert p.blocks_per_request == -(-10001 // 16) == 626
    assert f"{p.max_concurrency:.2f}" == "49.07"
    assert p.kv_cache_tokens == int(30720 / 626 * 10001) == 490783
    old = vllm.profile(dense(), vllm.VllmConfig(max_model_len=10001, version=(0, 20)), 60 * GIB)
    assert old.kv_cache_tokens == 30720 * 16 == 491520  # num_blocks // 1 group x block 16


def test_llama70b_tp4_page_and_heads_floor():
    (stage,) = vllm.layout(dense(layers=80, heads=64), vllm.VllmConfig(max_model_len=8192,
                                                                        tp=4))
    assert stage.groups[0].page_bytes == 2 * 16 * 2 * 128 * 2 == 16384
    assert stage.per_token_bytes == 81920
    # TP 16 on 8 KV heads: max(1, 8 // 16) = 1 head per rank, replicated
    (tp16,) = vllm.layout(dense(layers=80, heads=64), vllm.VllmConfig(max_model_len=8192,
                                                                       tp=16))
    assert tp16.groups[0].page_bytes == 2 * 16 * 1 * 128 * 2


def test_vllm_pp_split_and_log_lines():
    p = vllm.profile(dense(layers=30), vllm.VllmConfig(max_model_len=8192, pp=4,
                                                        version=(0, 11)), 10 * GIB)
    assert [s.last_layer - s.first_layer for s in p.stages] == [7, 8, 8, 7]
    assert p.num_blocks == 10 * GIB // (65536 * 8)  # the 8-layer stages limit
    assert p.log_lines()[1].startswith("GPU KV cache size: ")
    new = vllm.profile(dense(), vllm.VllmConfig(max_model_len=8192), 10 * GIB)
    assert len(new.log_lines()) == 2 and "Maximum concurrency" in new.log_lines()[1]
