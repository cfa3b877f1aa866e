"""Engine profiles against real engine logs and the worked numbers of docs/engine-kv-sizing.md.

Every log in tests/fixtures/engines/engine-logs.yaml (a copy of the shared engine-logs.yaml) has a
case below: the logged settings (and the logged budget, where the log gives one) go in, and
the logged token count, block count and concurrency must come out within 0.5%. Budgets are
logged with two decimals of GiB, so a recomputed block count can differ by the rounding
(+-0.005 GiB); 0.5% covers that, exact matches are asserted where the log allows.
"""

from __future__ import annotations

import paths
import pytest
import yaml
from factories import (
    FullAttention,
    ModelSpec,
    RecurrentState,
    SlidingWindow,
    StateTensor,
    dense,
    hybrid,
    mla,
)

from kvplan.core.errors import BadInputError
from kvplan.core.units import parse_bytes
from kvplan.engines import hf, llamacpp, parse_version, sglang, trtllm, vllm
from kvplan.sources.families import with_family_facts
from kvplan.sources.library import resolve

FIXTURES = paths.FIXTURES / "engines"
MODELS = FIXTURES / "models"
GIB = 2**30
LOGS = yaml.safe_load((FIXTURES / "engine-logs.yaml").read_text())["entries"]
BY_ID = {e["id"]: e for e in LOGS}


def model(name: str) -> ModelSpec:
    return resolve(str(MODELS / f"{name}.yaml"))


def gib(x: float) -> int:
    """A GiB figure printed with two decimals -> bytes, as kvplan --kv-memory reads it."""
    return parse_bytes(f"{x}GiB")


def close(predicted: float, logged: float, tol: float = 0.005) -> bool:
    return abs(predicted - logged) <= tol * abs(logged)


# --- vLLM logs ---------------------------------------------------------------------------

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
                             gpu_name="L4 ada-lovelace sm8.9")
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
    assert vllm.default_block_size(model("deepseek-v2-lite"), "H100 SXM", (0, 11, 0)) == 64


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


# --- SGLang logs -------------------------------------------------------------------------

def test_sglang_qwq32b_tp4_classic_mem_fraction():
    e = BY_ID["sglang-doc-qwq-32b-tp4-24gb"]["reported"]
    from kvplan.engines.sglang import sglang_default_mem_fraction

    # The server_args line with mem_fraction_static was not captured; SGLang of March 2025
    # used the per-TP table: TP 4 -> 0.85. rest = 6.09 - 21.63 x 0.15 GB.
    fraction = sglang_default_mem_fraction(0, tp=4, version=(0, 4, 3))
    assert fraction == 0.85
    p = sglang.profile(model("qwq-32b"), sglang.SglangConfig(tp=4),
                       gib(e["avail_mem_before_weights_gb"]),
                       gib(e["avail_mem_after_weights_gb"]), fraction)
    assert p.cell_size_bytes == 64 * 2 * (128 + 128) * 2  # 2 KV heads per rank
    assert p.max_total_num_tokens == int(gib(6.09) - gib(21.63) * 0.15) // 65536 == 46620
    assert close(p.max_total_num_tokens, e["kv_cache_tokens"])
    assert f"{p.k_size_bytes / GIB:.2f}" == f"{e['k_size_gb']:.2f}"
    assert f"{p.v_size_bytes / GIB:.2f}" == f"{e['v_size_gb']:.2f}"


def test_sglang_qwen3_235b_tp4_k_size_from_tokens():
    e = BY_ID["sglang-i21348-qwen3-235b-fp8-4xh100-tp4"]["reported"]
    # Only the token count and K/V sizes are logged (no free-memory readings), so the
    # token count is fed back as --max-total-tokens and the buffer sizes recomputed:
    # 94 layers x (N + 1 padding page) x 1 KV head per rank x 128 x 2 bytes.
    config = sglang.SglangConfig(tp=4, max_total_tokens=e["kv_cache_tokens"])
    p = sglang.profile(model("qwen3-235b-a22b"), config, 80 * GIB, 70 * GIB, 0.93)
    assert p.max_total_num_tokens == e["kv_cache_tokens"]
    assert p.k_size_bytes == 94 * (367404 + 1) * 1 * 128 * 2
    assert f"{p.k_size_bytes / GIB:.2f}" == "8.23" == f"{e['k_size_gb']:.2f}"
    assert "K size: 8.23 GB, V size: 8.23 GB" in p.log_line()


def test_sglang_worked_example_llama8b():
    # docs/engine-kv-sizing.md §2.1: free 79.0 GB before, 62.5 after, 0.9 -> 447,283 tokens;
    # K = V = 27.30 GB.
    p = sglang.profile(dense(), sglang.SglangConfig(), gib(79.0), gib(62.5), 0.9)
    assert p.cell_size_bytes == 8 * (128 + 128) * 32 * 2 == 131072
    # rest = 62.5 - 79.0 x (1 - 0.9) = 54.6 GiB; int(54.6 x 2^30) // 131,072
    assert p.max_total_num_tokens == int((62.5 - 79.0 * 0.1) * GIB) // 131072 == 447283
    # K buffer: 32 layers x (N + 1 page) x 8 heads x 128 x 2 B
    assert p.k_size_bytes == 32 * (447283 + 1) * 8 * 128 * 2
    assert f"{p.k_size_bytes / GIB:.2f}" == "27.30"


def test_sglang_page_size_rounds_down_and_mla_cell():
    p = sglang.profile(dense(), sglang.SglangConfig(page_size=64), gib(79.0), gib(62.5), 0.9)
    assert p.max_total_num_tokens == 447283 // 64 * 64
    m = sglang.profile(mla(), sglang.SglangConfig(tp=8), gib(79.0), gib(62.5), 0.9)
    assert m.cell_size_bytes == 61 * 576 * 2  # no x2, not divided by TP
    assert m.v_size_bytes == 0 and "KV size" in m.log_line()


def test_sglang_page_padding_and_heads_floor():
    # §2.3: every buffer holds N + page_size rows: 32 layers x (N + 64) x 8 heads x 128 x 2 B
    p = sglang.profile(dense(), sglang.SglangConfig(page_size=64), gib(79.0), gib(62.5), 0.9)
    tokens = 447283 // 64 * 64
    assert p.k_size_bytes == p.v_size_bytes == 32 * (tokens + 64) * 8 * 128 * 2
    # §2.1: KV heads per rank max(1, 8 // 16) = 1 at TP 16, not half a head
    p16 = sglang.profile(dense(heads=64), sglang.SglangConfig(tp=16), gib(79.0), gib(62.5), 0.9)
    assert p16.cell_size_bytes == 1 * (128 + 128) * 32 * 2


def test_sglang_hybrid_swa_and_mamba():
    pair = (SlidingWindow(8, 64, window=128), FullAttention(8, 64))
    gpt_oss = with_family_facts(ModelSpec("gpt-oss-120b", pair * 18, family="gpt_oss",
                                          num_attention_heads=64))
    p = sglang.profile(gpt_oss, sglang.SglangConfig(), gib(79.0), gib(62.5), 0.9)
    # cell = 36,864 + 0.8 x 36,864 = 66,355.2 B/token (docs/engine-kv-sizing.md §2.4)
    full_tokens = int(int((62.5 - 79.0 * 0.1) * GIB) // 66355.2)
    assert p.max_total_num_tokens == full_tokens
    assert p.swa_max_total_num_tokens == int(full_tokens * 0.8)
    # Gemma-style models are not in SGLang's hybrid-SWA list: sliding layers get full KV
    gemma = with_family_facts(ModelSpec("gemma", pair * 18, family="gemma2",
                                        num_attention_heads=64))
    assert sglang.profile(gemma, sglang.SglangConfig(), gib(79.0), gib(62.5), 0.9) \
        .swa_max_total_num_tokens is None
    # Qwen3-Next GDN state with SGLang's float32 SSM state: 2,146,304 B per layer per slot
    gdn = hybrid().layers[0]
    assert sglang.mamba_state_bytes(gdn, 1, 4) == 3 * 8192 * 2 + 32 * 128 * 128 * 4
    h = sglang.profile(hybrid(), sglang.SglangConfig(), gib(79.0), gib(62.5), 0.9)
    assert h.mamba_state_bytes_per_request == 36 * 2146304 == 77266944
    # §2.4 _handle_max_mamba_cache: budget = rest x r / (1 + r), r = 0.9;
    # max_mamba_cache_size = (budget - per_req) // per_req; the pool holds that + 1 slots
    rest = gib(62.5) - gib(79.0) * 0.1
    slots = int(rest * 0.9 / 1.9 - 77266944) // 77266944
    assert h.max_mamba_cache_size == slots == 358
    # the KV tokens come from what the Mamba pool leaves: 12 attention layers x 2 x 2 x 256 x 2
    assert h.max_total_num_tokens == (int(rest) - (slots + 1) * 77266944) // (12 * 2 * 2 * 256 * 2)


def test_sglang_refuses_a_budget_without_one_mamba_slot():
    """SGLang 0.5.23 `KVCacheConfigurator._handle_max_mamba_cache` raises "Not enough GPU
    memory for hybrid (mamba/linear-attention) state cache" when max_mamba_cache_size <= 0;
    kvplan planned 0 slots and 59,376 tokens. Figures from SGLang 0.5.23 itself
    (`bash tests/oracle_sglang/run.sh --model nemotron-h-56b`: its ServerArgs, ModelConfig,
    `_handle_max_mamba_cache` and `config_from_budget` on the model's config.json): at
    3 GiB + 123,456,789 B it refuses ("max_mamba_cache_size=0 ... mamba_cache_per_req=870.33
    MB"); at 21 GiB, page 16, bf16 it gives 10 state slots and 305,408 tokens."""
    from kvplan.api import deploy
    from kvplan.core.errors import NoKVMemoryError

    spec = resolve("nemotron-h-56b")
    with pytest.raises(NoKVMemoryError, match="state pool gets no request slot"):
        _ = deploy(spec, gpu="h100", engine="sglang", kv_memory=3 * GIB + 123_456_789,
                   block_size=16).capacity
    p = deploy(spec, gpu="h100", engine="sglang", kv_memory=21 * GIB,
               block_size=16).capacity.engine_profile
    assert (p.max_mamba_cache_size, p.max_total_num_tokens) == (10, 305_408)


# --- TensorRT-LLM ------------------------------------------------------------------------

def test_trtllm_rtx5090_llama8b_fp8():
    e = BY_ID["trtllm-doc-llama31-8b-fp8-rtx5090"]["reported"]
    config = trtllm.TrtllmConfig(kv_cache_dtype="fp8", free_gpu_memory_fraction=0.9)
    p = trtllm.profile(model("llama-3.1-8b"), config, gib(e["trt_available_mem_gib"]))
    assert p.bytes_per_token == 32 * 2 * 8 * 128 * 1  # fp8: 64 KiB
    # max_tokens = int(17.83 GiB x 0.9) // 64 KiB = 262,914; blocks = ceil(/ 32)
    assert p.num_blocks == -(-(int(gib(17.83) * 0.9) // 65536) // 32) == 8217
    assert p.kv_cache_tokens == 8217 * 32  # the log's "(263008)" is also blocks x 32
    assert close(p.num_blocks, e["trt_num_blocks"])
    assert close(p.kv_cache_tokens, e["kv_cache_tokens"])
    assert f"{p.allocated_bytes / GIB:.2f}" == f"{e['trt_kv_alloc_gib']:.2f}"


def test_trtllm_worked_example_and_heads():
    # §3: 80 GiB, profile peak 20 GiB, 1 GiB temporary KV, 0.9 -> 449,740 tokens, 14,055 blocks
    p = trtllm.profile(dense(), trtllm.TrtllmConfig(), 61 * GIB)
    assert p.kv_cache_bytes == int((80 - 20 + 1) * GIB * 0.9) == 58948426137
    assert p.max_tokens == 58948426137 // 131072 == 449740
    assert p.num_blocks == -(-449740 // 32) == 14055  # ceil(tokens / 32)
    # TP 16 on 8 KV heads: the pool keeps ceil(8/16) = 1 head; the estimate floors 8*128//16
    p16 = trtllm.profile(dense(heads=64), trtllm.TrtllmConfig(tp=16), 61 * GIB)
    assert p16.bytes_per_token == 32 * 1 * 256 * 2
    assert p16.estimate_bytes_per_token == 32 * 2 * (8 * 128 // 16) * 2
    # NVFP4: 0.5625 B per element -> 32,768 + 4,096 = 36,864 B/token for Llama-3.1-8B
    nv = trtllm.profile(dense(), trtllm.TrtllmConfig(kv_cache_dtype="nvfp4"), 61 * GIB)
    elements = 2 * 32 * 8 * 128  # K+V x layers x KV heads x head_dim
    assert nv.bytes_per_token == elements // 2 + elements // 16 == 36864


# --- llama.cpp ----------------------------------------------------------------------------

@pytest.mark.parametrize("log_id,k_type,v_type", [
    ("llamacpp-doc-llama32-3b-cpu-c4096-f16", "f16", "f16"),
    ("llamacpp-doc-llama32-3b-cpu-c4096-q8_0k", "q8_0", "f16"),
])
def test_llamacpp_llama32_3b(log_id, k_type, v_type):
    e = BY_ID[log_id]["reported"]
    p = llamacpp.profile(model("llama-3.2-3b"), llamacpp.LlamacppConfig(
        ctx=e["n_ctx"], cache_type_k=k_type, cache_type_v=v_type))
    assert p.k_mib == e["llama_cpp_k_mib"]
    assert p.v_mib == e["llama_cpp_v_mib"]
    assert p.kv_mib == e["llama_cpp_kv_mib"]
    # 4,096 cells x 28 layers x 8 KV heads x 128: f16 2 B, q8_0 34 B per 32 values
    per_value = {"f16": 2, "q8_0": 34 / 32}
    assert p.k_mib == 4096 * 28 * 8 * 128 * per_value[k_type] / 2**20


def test_llamacpp_qwen3_8b_ollama():
    e = BY_ID["ollama-doc-qwen3-8b-ctx40960"]["reported"]
    p = llamacpp.profile(model("qwen3-8b"), llamacpp.LlamacppConfig(ctx=e["n_ctx"]))
    assert p.kv_mib == e["llama_cpp_kv_mib"] == 40960 * 36 * 2 * 8 * 128 * 2 / 2**20 == 5760


def test_llamacpp_q4_padding_parallel_and_log_line():
    spec = model("llama-3.2-3b")
    q4 = llamacpp.profile(spec, llamacpp.LlamacppConfig(ctx=4096, cache_type_k="q4_0"))
    assert q4.k_mib == 4096 * 28 * 8 * 128 // 32 * 18 / 2**20 == 63.0  # 18 B per 32 values
    padded = llamacpp.profile(spec, llamacpp.LlamacppConfig(ctx=4000))
    assert padded.cells == 4096  # padded to 256
    split = llamacpp.profile(spec, llamacpp.LlamacppConfig(ctx=8192, parallel=4,
                                                           kv_unified=False))
    assert split.cells == 8192 and split.cells_per_seq == 2048
    line = llamacpp.profile(spec, llamacpp.LlamacppConfig(ctx=4096)).log_line()
    # src/llama-kv-cache.cpp prints "K (%s): %7.2f MiB"
    assert "4096 cells" in line and "K (f16):  224.00 MiB" in line
    with pytest.raises(BadInputError):
        llamacpp.cache_type("q3_k")


# --- every log has a case -------------------------------------------------------------------

def test_every_log_is_covered():
    covered = {
        "vllm-i10517-llama31-8b-rtx3090-mml29000", "vllm-i19996-llama31-8b-eagle-h100",
        "vllm-pr20665-deepseek-v2-lite-4xl4-tp2-pp2", "lmcache-i1739-qwen3-14b-1gpu",
        "vllm-doc-qwen25-7b-awq-rtx4080", "vllm-doc-mistral7b-gptq-dgx-spark",
        "vllm-doc-llama2-7b-rocm-throughput", "vllm-doc-qwen3-4b-2507-rtx5090-bf16-mml131072",
        "sglang-i21348-qwen3-235b-fp8-4xh100-tp4", "sglang-doc-qwq-32b-tp4-24gb",
        "llamacpp-doc-llama32-3b-cpu-c4096-f16", "llamacpp-doc-llama32-3b-cpu-c4096-q8_0k",
        "ollama-doc-qwen3-8b-ctx40960", "trtllm-doc-llama31-8b-fp8-rtx5090",
    }
    assert set(BY_ID) == covered


# --- worked examples of docs/engine-kv-sizing.md ------------------------------------------

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


def test_qwen3_next_hybrid_alignment():
    # §1.7: Mamba page 1,097,728 B, attention 2,048 B/token -> block 16 x 34 = 544, page
    # 1,114,112 B, padding 1.49%; TP 4: block 272, page 278,528 B.
    config = vllm.VllmConfig(max_model_len=262144, version=(0, 11, 0))
    mamba_page = 3 * 8192 * 2 + 32 * 128 * 128 * 2  # 1,097,728 B
    attn_token = 2 * 2 * 256 * 2  # 2,048 B
    block = 16 * -(-mamba_page // (16 * attn_token))  # 16 x 34 = 544
    (stage,) = vllm.layout(hybrid(), config)
    assert {g.block_size for g in stage.groups} == {block} == {544}
    assert {g.page_bytes for g in stage.groups} == {block * attn_token} == {1114112}
    assert [g.kind for g in stage.groups].count("mamba") == 3 and stage.group_size == 12
    p = vllm.profile(hybrid(), config, 40 * GIB)
    assert f"{float(p.mamba_padding) * 100:.2f}" == f"{(1114112 / mamba_page - 1) * 100:.2f}"
    assert f"{float(p.mamba_padding) * 100:.2f}" == "1.49"
    assert p.num_blocks == 40 * GIB // 1114112 // 12 == 3212
    assert p.kv_cache_tokens == 3212 // 4 * 544 == 436832  # 4 groups, min block 544
    assert p.blocks_per_request == -(-262144 // 544) + 3 == 482 + 3
    assert f"{p.max_concurrency:.2f}" == f"{3212 / 485:.2f}" == "6.62"
    (tp4,) = vllm.layout(hybrid(), vllm.VllmConfig(max_model_len=262144, tp=4,
                                                   version=(0, 11, 0)))
    # TP 4: Mamba 3 x 2,048 x 2 + 8 x 128 x 128 x 2 = 274,432 B, attention 1,024 B/token
    tp4_block = 16 * -(-(3 * 2048 * 2 + 8 * 128 * 128 * 2) // (16 * 1024))
    assert {(g.block_size, g.page_bytes) for g in tp4.groups} == {
        (tp4_block, tp4_block * 1024)} == {(272, 278528)}
    # 0.33 "align" mode off Hopper (A100: Triton GDN prefill): 2 pages per Mamba group per
    # request (MambaSpec.max_memory_usage_bytes: 2 + speculative blocks)
    new = vllm.profile(hybrid(), vllm.VllmConfig(max_model_len=262144, compute_capability="8.0"),
                       40 * GIB)
    assert new.block_size == 544
    assert new.blocks_per_request == 482 + 3 * 2


def test_qwen3_next_hopper_gdn_checkpoint_alignment():
    # vLLM 0.33 on Hopper: the FlashInfer GDN prefill exports a checkpoint per GDN layer
    # (qwen_gdn_linear_attn.py, FLASHINFER_GDN_CHECKPOINT_ALIGNMENT 64), so
    # _align_hybrid_block_size takes the block in multiples of lcm(16, 64) = 64 and
    # MambaSpec.max_memory_usage_bytes charges 2 + 0 + 1 checkpoint page per GDN group.
    mamba_page = 3 * 8192 * 2 + 32 * 128 * 128 * 2  # 1,097,728 B
    attn_token = 2 * 2 * 256 * 2  # 2,048 B
    block = 64 * -(-mamba_page // (64 * attn_token))  # 64 x 9 = 576
    assert block == 576
    for cc in ("9.0", None):  # an H100/H200, or no GPU given (Hopper assumed)
        config = vllm.VllmConfig(max_model_len=262144, compute_capability=cc)
        assert vllm.gdn_prefill_backend(hybrid(), config) == "flashinfer"
        p = vllm.profile(hybrid(), config, 40 * GIB)
        assert p.block_size == block
        assert p.num_blocks == 40 * GIB // (block * attn_token * 12)  # 12 slots per group
        assert p.blocks_per_request == -(-262144 // block) + 3 * 3 == 465
        assert p.max_concurrency == p.num_blocks / 465
    # Blackwell (SM 10.x / 12.x, head_k_dim 128, the CUDA 13 wheel): FlashInfer too
    for cc in ("10.0", "12.0"):
        config = vllm.VllmConfig(max_model_len=262144, compute_capability=cc)
        assert vllm.profile(hybrid(), config, 40 * GIB).block_size == 576
    # Ampere, Ada, ROCm: the Triton prefill, 544 tokens and 2 pages per GDN group
    for cc in ("8.0", "8.9", "gfx942"):
        config = vllm.VllmConfig(max_model_len=262144, compute_capability=cc)
        assert vllm.gdn_prefill_backend(hybrid(), config) == "triton"
        assert vllm.profile(hybrid(), config, 40 * GIB).blocks_per_request == 482 + 3 * 2


def test_vllm_033_mla_block_size_by_backend():
    # vLLM 0.33.0 platforms/cuda.py::_get_backend_priorities with each backend's checks:
    # Hopper: FLASH_ATTN_MLA (kv auto/bf16/fp16; MultipleOf(16) -> 16), FlashMLA for fp8 ([64]);
    # SM 10.x: FLASHINFER_MLA ([32, 64]: 16 unsupported -> the smallest, 32);
    # SM 12.x, Ampere, Ada: TRITON_MLA (MultipleOf(16) -> 16).
    ds = resolve("deepseek-v3")  # the library entry: 61 MLA layers
    expect = {("9.0", "auto"): 16, ("9.0", "fp8"): 64, ("10.0", "auto"): 32,
              ("10.0", "fp8"): 32, ("12.0", "auto"): 16, ("8.0", "auto"): 16,
              ("8.9", "fp8"): 16}
    for (cc, kv), block in expect.items():
        assert vllm.default_block_size(ds, None, vllm.LATEST, kv, cc) == block, (cc, kv)
        config = vllm.VllmConfig(max_model_len=4096, kv_cache_dtype=kv, compute_capability=cc)
        # one MLA group of 61 layers: bytes per block = 61 x block x 576 x dtype bytes
        per_block = 61 * block * 576 * (1 if kv == "fp8" else 2)
        assert vllm.profile(ds, config, 21 * GIB).num_blocks == 21 * GIB // per_block
    # up to 0.32 (the 0.11 rule): FlashMLA 64 on Hopper, CUTLASS MLA 128 on Blackwell
    assert vllm.default_block_size(ds, "H100 SXM", (0, 11, 0)) == 64
    assert vllm.default_block_size(ds, "B200", (0, 11, 0)) == 128


def test_jamba_block_80():
    mamba = RecurrentState("mamba1", (StateTensor("conv", (3, 8192), 2, tp_axis=1),
                                      StateTensor("ssm", (8192, 16), 2, tp_axis=0)))
    assert mamba.state_bytes() == 3 * 8192 * 2 + 8192 * 16 * 2 == 311296
    jamba = ModelSpec("jamba", ((mamba,) * 4 + (FullAttention(8, 128),) + (mamba,) * 3) * 4,
                      num_attention_heads=32)
    p = vllm.profile(jamba, vllm.VllmConfig(max_model_len=262144, version=(0, 11)), 40 * GIB)
    assert p.block_size == 16 * -(-311296 // (16 * 4096)) == 80
    assert p.stages[0].groups[0].page_bytes == 80 * 4096 == 327680
    assert f"{float(p.mamba_padding) * 100:.2f}" == f"{(327680 / 311296 - 1) * 100:.2f}" == "5.26"
    # 0.33 align mode: MambaMixer (Mamba1) declares no prefill checkpoint: 2 pages per group
    new = vllm.profile(jamba, vllm.VllmConfig(max_model_len=262144), 40 * GIB)
    assert new.blocks_per_request == 262144 // 80 + 1 + 7 * 2  # cdiv(L, 80) + 7 Mamba groups


def test_mamba2_align_mode_charges_a_checkpoint_page():
    # vLLM 0.33 mamba_mixer2.py MambaMixer2.get_kv_cache_spec sets
    # num_prefill_checkpoint_blocks=1 on every GPU; in align mode (prefix caching, the default)
    # MambaSpec.max_memory_usage_bytes charges 2 + 0 speculative + 1 = 3 pages per request.
    mamba2 = RecurrentState("mamba2", (StateTensor("conv", (3, 10240), 2, tp_axis=1),
                                       StateTensor("ssm", (128, 64, 128), 4, tp_axis=0)))
    spec = ModelSpec("mamba2-hybrid", ((mamba2,) * 3 + (FullAttention(8, 128),)) * 4,
                     num_attention_heads=32)
    for cc in ("9.0", "8.0"):  # whatever the GPU
        config = vllm.VllmConfig(max_model_len=8192, compute_capability=cc)
        p = vllm.profile(spec, config, 40 * GIB)
        block = p.block_size  # alignment 1: 16 x cdiv(mamba page, 16 x 4,096 B)
        assert block == 16 * -(-mamba2.state_bytes() // (16 * 4096))
        assert p.blocks_per_request == -(-8192 // block) + 3 * 3  # 3 Mamba groups x 3 pages
    # "none" mode (no prefix caching): 1 page, the checkpoint is not charged
    off = vllm.profile(spec, vllm.VllmConfig(max_model_len=8192, mamba_cache_mode="none"),
                       40 * GIB)
    assert off.blocks_per_request == -(-8192 // off.block_size) + 3 * 1


def gemma3_27b() -> ModelSpec:
    sliding, full = SlidingWindow(16, 128, window=1024), FullAttention(16, 128)
    return ModelSpec("gemma-3-27b", ((sliding,) * 5 + (full,)) * 10 + (sliding,) * 2,
                     num_attention_heads=32)


def test_gemma3_27b_groups_and_padding():
    # §1.3/§1.5: group size 10 -> 1 full + 6 sliding groups (9,9,9,9,8,8), 8 padding slots
    # ("may waste at most 15.38%"); 40 GiB -> 32,768 blocks; 8,192 + 6 x 577 = 11,654
    # blocks per request -> 2.81x; token line 74,896 (<= 0.20) or 368,540 (>= 0.21).
    page = 2 * 16 * 16 * 128 * 2  # K+V x block 16 x 16 KV heads x 128 x bf16 = 131,072 B
    num_blocks = 40 * GIB // page // 10  # group size 10
    sliding_blocks = -(-(1023 + 8192) // 16) + 1  # cdiv(W - 1 + T, 16) + 1 = 577
    per_request = 131072 // 16 + 6 * sliding_blocks
    for version, tokens in (((0, 11, 0), num_blocks // 7 * 16),  # 7 groups, block 16
                            ((0, 21, 0), int(num_blocks / per_request * 131072))):
        config = vllm.VllmConfig(max_model_len=131072, version=version,
                                 max_num_batched_tokens=8192)
        p = vllm.profile(gemma3_27b(), config, 40 * GIB)
        groups = p.stages[0].groups
        assert sorted(g.num_layers for g in groups if g.kind == "sliding") == [8, 8, 9, 9, 9, 9]
        assert [g.num_layers for g in groups if g.kind == "full"] == [10]
        # 7 groups x 10 slots - 62 layers = 8 padding slots; at most 8 / 52 of the sliding
        assert p.num_padding_layers == 7 * 10 - 62 == 8
        assert f"{float(p.padding_waste) * 100:.2f}" == f"{8 / 52 * 100:.2f}" == "15.38"
        assert p.stages[0].groups[0].page_bytes == page == 131072
        assert p.num_blocks == num_blocks == 32768
        assert p.blocks_per_request == per_request == 8192 + 6 * 577 == 11654
        assert f"{p.max_concurrency:.2f}" == f"{num_blocks / per_request:.2f}" == "2.81"
        assert p.kv_cache_tokens == tokens
    assert (32768 // 7 * 16, int(32768 / 11654 * 131072)) == (74896, 368540)  # §1.5


def test_vllm_033_sliding_layers_reserve_two_batches_in_flight():
    # §1.2: 0.33 sizes a sliding request with T = 2 x max_num_batched_tokens (async
    # scheduling): cdiv(1,023 + 16,384, 16) + 1 = 1,089 blocks per sliding group
    config = vllm.VllmConfig(max_model_len=131072, max_num_batched_tokens=8192,
                             version=(0, 33, 0))
    p = vllm.profile(gemma3_27b(), config, 40 * GIB)
    assert p.blocks_per_request == 131072 // 16 + 6 * (-(-(1023 + 2 * 8192) // 16) + 1)


def test_vllm_mla_block_size_by_backend():
    # §1.7 (0.11 rule): FlashMLA (Hopper) 64, CUTLASS MLA (Blackwell) 128; Triton MLA
    # elsewhere keeps 16. 0.33: test_vllm_033_mla_block_size_by_backend.
    spec = model("deepseek-v2-lite")
    old = (0, 11, 0)
    assert vllm.default_block_size(spec, "H100 SXM", old) == 64
    assert vllm.default_block_size(spec, "B200", old) == 128
    assert vllm.default_block_size(spec, "L4 ada-lovelace sm8.9", old) == 16
    assert vllm.default_block_size(dense(), "B200") == 16  # not MLA: the CUDA default


def test_gpt_oss_and_all_sliding_concurrency():
    # §1.5: page 2 x 16 x 8 x 64 x 2 = 32,768 B; 18 + 18 layers: 2 groups of 18
    pair = (SlidingWindow(8, 64, window=128), FullAttention(8, 64))
    gpt_oss = ModelSpec("gpt-oss-120b", pair * 18, num_attention_heads=64)
    blocks = 40 * GIB // (2 * 16 * 8 * 64 * 2) // 18  # 72,817
    per_request = 131072 // 16 + (-(-(127 + 8192) // 16) + 1)  # 8,192 + 521
    for version, tokens in (((0, 11), blocks // 2 * 16),
                            ((0, 21), int(blocks / per_request * 131072))):
        p = vllm.profile(gpt_oss, vllm.VllmConfig(max_model_len=131072, version=version),
                         40 * GIB)
        assert p.num_blocks == blocks == 72817 and p.blocks_per_request == per_request == 8713
        assert f"{p.max_concurrency:.2f}" == f"{blocks / per_request:.2f}" == "8.36"
        assert p.kv_cache_tokens == tokens
    assert (72817 // 2 * 16, int(72817 / 8713 * 131072)) == (582528, 1095405)  # §1.5
    # all-sliding Mistral-7B-v0.1: one group of 32, page 2 x 16 x 8 x 128 x 2 = 65,536 B
    mistral = ModelSpec("mistral", (SlidingWindow(8, 128, window=4096),) * 32,
                        num_attention_heads=32)
    blocks = 40 * GIB // 65536 // 32  # 20,480
    per_request = -(-(4095 + 8192) // 16) + 1  # 769
    for version, tokens in (((0, 11), blocks * 16),
                            ((0, 21), int(blocks / per_request * 32768))):
        p = vllm.profile(mistral, vllm.VllmConfig(max_model_len=32768, version=version),
                         40 * GIB)
        assert p.num_blocks == blocks == 20480 and p.blocks_per_request == per_request == 769
        assert f"{p.max_concurrency:.2f}" == f"{blocks / per_request:.2f}" == "26.63"
        assert p.kv_cache_tokens == tokens
    assert (20480 * 16, int(20480 / 769 * 32768)) == (327680, 872677)  # §1.5
    # 0.33: no `layer_types` in Mistral-7B-v0.1's config, so llama.py gives its layers no
    # window (Attention's fallback cache_config.sliding_window is never set): one full group,
    # cdiv(32768, 16) = 2,048 blocks per request; the vLLM 0.33 oracle found this
    p = vllm.profile(mistral, vllm.VllmConfig(max_model_len=32768), 40 * GIB)
    assert p.num_blocks == blocks and p.blocks_per_request == 32768 // 16
    assert p.kv_cache_tokens == int(blocks / 2048 * 32768) == blocks * 16
    # a model mixing windowed and full layers keeps its windows (its config lists layer_types)
    mixed = ModelSpec("mixed", (SlidingWindow(8, 128, window=4096), FullAttention(8, 128)) * 16,
                      num_attention_heads=32)
    p = vllm.profile(mixed, vllm.VllmConfig(max_model_len=32768), 40 * GIB)
    assert sorted(g.kind for g in p.stages[0].groups) == ["full", "sliding"]


def test_deepseek_v3_fp8_ds_mla_and_v32_indexer():
    config = vllm.VllmConfig(max_model_len=163840, kv_cache_dtype="fp8_ds_mla")
    (stage,) = vllm.layout(mla(), config)
    assert stage.per_token_bytes == 61 * 656 == 40016
    assert stage.groups[0].block_size == 64 and stage.groups[0].page_bytes == 64 * 656 == 41984
    (bf16,) = vllm.layout(mla(), vllm.VllmConfig(max_model_len=8192))
    assert bf16.per_token_bytes == 61 * 576 * 2 == 70272
    (fp8,) = vllm.layout(mla(), vllm.VllmConfig(max_model_len=8192, kv_cache_dtype="fp8"))
    assert fp8.per_token_bytes == 61 * 576 * 1 == 35136
    v32 = with_family_facts(ModelSpec("deepseek-v3.2", mla().layers, family="deepseek_v32",
                                      num_attention_heads=128))
    (stage,) = vllm.layout(v32, vllm.VllmConfig(max_model_len=8192))  # auto -> fp8_ds_mla
    assert stage.per_token_bytes == 61 * (656 + 132) == 48068
    with pytest.raises(BadInputError):
        vllm.layout(dense(), config)  # fp8_ds_mla is MLA-only


def test_llama70b_tp4_page_and_heads_floor():
    (stage,) = vllm.layout(dense(layers=80, heads=64), vllm.VllmConfig(max_model_len=8192,
                                                                        tp=4))
    assert stage.groups[0].page_bytes == 2 * 16 * 2 * 128 * 2 == 16384
    assert stage.per_token_bytes == 81920
    # TP 16 on 8 KV heads: max(1, 8 // 16) = 1 head per rank, replicated
    (tp16,) = vllm.layout(dense(layers=80, heads=64), vllm.VllmConfig(max_model_len=8192,
                                                                       tp=16))
    assert tp16.groups[0].page_bytes == 2 * 16 * 1 * 128 * 2


def test_vllm_per_token_head_and_nvfp4_formats():
    nv = vllm.layout(dense(), vllm.VllmConfig(max_model_len=8192, kv_cache_dtype="nvfp4"))
    assert nv[0].per_token_bytes == 32 * 2 * 8 * (64 + 8)  # 1,152 B per layer
    i8 = vllm.layout(dense(), vllm.VllmConfig(max_model_len=8192,
                                              kv_cache_dtype="int8_per_token_head"))
    assert i8[0].per_token_bytes == 32 * 8 * ((128 + 128) * 1 + 2 * 4)
    with pytest.raises(BadInputError):
        vllm.kv_format(dense(), "int4:g64")


def test_vllm_chunked_local_is_full_by_default():
    from kvplan.core.layers import ChunkedLocal

    scout = ModelSpec("scout", ((ChunkedLocal(8, 128, chunk=8192),) * 3
                                + (FullAttention(8, 128),)) * 12, num_attention_heads=40)
    (stage,) = vllm.layout(scout, vllm.VllmConfig(max_model_len=131072))
    assert [g.kind for g in stage.groups] == ["full"]  # hybrid manager disabled (§1.3)
    (hybrid_on,) = vllm.layout(scout, vllm.VllmConfig(max_model_len=131072,
                                                      disable_hybrid_kv_cache_manager=False,
                                                      max_num_batched_tokens=8192,
                                                      version=(0, 11)))
    chunked = [g for g in hybrid_on.groups if g.kind == "chunked"]
    assert chunked[0].blocks_per_request == (8192 + 8192) // 16


def test_vllm_pp_split_and_log_lines():
    p = vllm.profile(dense(layers=30), vllm.VllmConfig(max_model_len=8192, pp=4,
                                                        version=(0, 11)), 10 * GIB)
    assert [s.last_layer - s.first_layer for s in p.stages] == [7, 8, 8, 7]
    assert p.num_blocks == 10 * GIB // (65536 * 8)  # the 8-layer stages limit
    assert p.log_lines()[1].startswith("GPU KV cache size: ")
    new = vllm.profile(dense(), vllm.VllmConfig(max_model_len=8192), 10 * GIB)
    assert len(new.log_lines()) == 2 and "Maximum concurrency" in new.log_lines()[1]


def test_hf_static_and_dynamic_caches():
    # §4.2: Gemma-3-27B StaticCache, max_cache_len 8,192: 8,192 B x (52 x 1,024 + 10 x 8,192)
    assert hf.profile(gemma3_27b(), cache="static", seq_len=8192).cache_bytes == (
        8192 * (52 * 1024 + 10 * 8192)) == 1107296256
    from kvplan.core.layers import ChunkedLocal

    scout = ModelSpec("scout", ((ChunkedLocal(8, 128, chunk=8192),) * 3
                                + (FullAttention(8, 128),)) * 12, num_attention_heads=40)
    assert hf.profile(scout, cache="static", seq_len=32768).cache_bytes == \
        4096 * (36 * 8192 + 12 * 32768) == 2818572288
    dyn = hf.profile(gemma3_27b(), cache="dynamic", seq_len=8192)
    assert dyn.cache_bytes == 8192 * (52 * 1023 + 10 * 8192)  # sliding keeps window - 1
    assert hf.profile(mla(), seq_len=100).cache_bytes == 61 * 100 * 1152  # 5.x latent
    gdn = hf.profile(ModelSpec("gdn", hybrid().layers[:1]), seq_len=10)
    assert gdn.state_bytes == 4 * 8192 * 2 + 32 * 128 * 128 * 4  # kernel, fp32 state


def test_parse_version():
    assert parse_version("0.9.1.dev705+g01220ce89") == (0, 9, 1)
    assert parse_version("0.11.0+582e4e37.nv25.11") == (0, 11, 0)
    assert parse_version("b8247 (aaa18bb49)") == (8247,)
    assert parse_version(None) is None
    with pytest.raises(BadInputError):
        parse_version("latest")


@pytest.mark.parametrize("window", [1, 7, 16, 20, 24, 33, 64])
@pytest.mark.parametrize("block", [1, 16, 64])
def test_vllm_held_blocks_agree_with_the_layers_paged_tokens(window, block):
    """The engine's peak blocks per request (a replay of its managers freeing blocks) and the
    layer kinds' own paged-token formulas are written independently; they must agree."""
    from kvplan.core.layers import ChunkedLocal, SlidingWindow
    from kvplan.engines import vllm

    config = vllm.VllmConfig(max_model_len=4096)
    sliding = vllm.SlidingPage(block, 0, 0, window)
    chunked = vllm.ChunkedPage(block, 0, 0, window)
    for tokens in range(1, 3 * (window + block) + 2):
        assert sliding.held_blocks(tokens, config) * block == \
            SlidingWindow(1, 8, window=window).paged_tokens(tokens, block), tokens
        assert chunked.held_blocks(tokens, config) * block == \
            ChunkedLocal(1, 8, chunk=window).paged_tokens(tokens, block), tokens
