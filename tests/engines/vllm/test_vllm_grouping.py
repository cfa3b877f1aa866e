"""vLLM's KV cache groups and blocks per request (kvplan.engines.vllm.grouping, through
`profile` and `layout`): hybrid sliding/full models, Mamba alignment and padding, against the
worked numbers of docs/engine-kv-sizing.md and vLLM's rules.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_cases import GIB, gemma3_27b
from factories import FullAttention, ModelSpec, RecurrentState, SlidingWindow, StateTensor, hybrid
from paths import FIXTURES

import kvplan
from kvplan.core.errors import BadInputError
from kvplan.engines import vllm


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


def gpt_oss_120b() -> ModelSpec:
    pair = (SlidingWindow(8, 64, window=128), FullAttention(8, 64))
    return ModelSpec("gpt-oss-120b", pair * 18, num_attention_heads=64)


def mistral_7b_v01() -> ModelSpec:
    return ModelSpec("mistral", (SlidingWindow(8, 128, window=4096),) * 32,
                     num_attention_heads=32)


@pytest.mark.parametrize(
    ("spec", "max_model_len", "blocks", "per_request", "groups", "counts", "concurrency",
     "section_1_5"), [
        # §1.5: page 2 x 16 x 8 x 64 x 2 = 32,768 B; 18 + 18 layers: 2 groups of 18;
        # 8,192 full blocks + cdiv(127 + 8,192, 16) + 1 = 521 sliding blocks per request
        pytest.param(gpt_oss_120b(), 131072, 40 * GIB // (2 * 16 * 8 * 64 * 2) // 18,
                     131072 // 16 + (-(-(127 + 8192) // 16) + 1), 2, (72817, 8713), "8.36",
                     (582528, 1095405), id="gpt-oss-120b"),
        # all-sliding Mistral-7B-v0.1: one group of 32, page 2 x 16 x 8 x 128 x 2 = 65,536 B;
        # cdiv(4,095 + 8,192, 16) + 1 = 769 blocks per request
        pytest.param(mistral_7b_v01(), 32768, 40 * GIB // 65536 // 32,
                     -(-(4095 + 8192) // 16) + 1, 1, (20480, 769), "26.63", (327680, 872677),
                     id="mistral-7b-v0.1"),
    ])
def test_gpt_oss_and_all_sliding_concurrency(spec, max_model_len, blocks, per_request, groups,
                                             counts, concurrency, section_1_5):
    # up to 0.20 the token line is num_blocks // groups x block 16; from 0.21 the concurrency
    # times max_model_len
    for version, tokens in (((0, 11), blocks // groups * 16),
                            ((0, 21), int(blocks / per_request * max_model_len))):
        p = vllm.profile(spec, vllm.VllmConfig(max_model_len=max_model_len, version=version),
                         40 * GIB)
        assert p.num_blocks == blocks == counts[0]
        assert p.blocks_per_request == per_request == counts[1]
        assert f"{p.max_concurrency:.2f}" == f"{blocks / per_request:.2f}" == concurrency
        assert p.kv_cache_tokens == tokens
    assert (counts[0] // groups * 16,
            int(counts[0] / counts[1] * max_model_len)) == section_1_5  # §1.5


def test_vllm_033_a_window_without_layer_types_is_full():
    blocks = 40 * GIB // 65536 // 32  # 20,480: one group of 32 layers, page 65,536 B
    # 0.33: no `layer_types` in Mistral-7B-v0.1's config, so llama.py gives its layers no
    # window (Attention's fallback cache_config.sliding_window is never set): one full group,
    # cdiv(32768, 16) = 2,048 blocks per request; the vLLM 0.33 oracle found this
    p = vllm.profile(mistral_7b_v01(), vllm.VllmConfig(max_model_len=32768), 40 * GIB)
    assert p.num_blocks == blocks and p.blocks_per_request == 32768 // 16
    assert p.kv_cache_tokens == int(blocks / 2048 * 32768) == blocks * 16
    # a model mixing windowed and full layers keeps its windows (its config lists layer_types)
    mixed = ModelSpec("mixed", (SlidingWindow(8, 128, window=4096), FullAttention(8, 128)) * 16,
                      num_attention_heads=32)
    p = vllm.profile(mixed, vllm.VllmConfig(max_model_len=32768), 40 * GIB)
    assert sorted(g.kind for g in p.stages[0].groups) == ["full", "sliding"]


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


# --- page sizes that differ by release (v1/core/kv_cache_utils.py get_kv_cache_groups) -------

GEMMA4_26B = "google--gemma-4-26B-A4B.json"  # tests/fixtures/hf-configs, its real config.json


def _gemma4_numbers(version: str, kv_memory: int, config: Path | None = None) -> dict:
    d = kvplan.deploy(str(config or FIXTURES / "hf-configs" / GEMMA4_26B), engine="vllm",
                      engine_version=version, kv_memory=kv_memory, max_model_len=131072,
                      max_num_batched_tokens=2048)
    return d.capacity.engine.numbers(d.capacity)


def test_gemma4_26b_a4b_on_vllm_019_unifies_by_block_size():
    # Gemma-4-26B-A4B: 25 sliding layers (8 KV heads x head_dim 256, window 1024) and 5 full
    # ones (num_global_key_value_heads 2 x global_head_dim 512; gemma4.py stores K and V
    # even where attention_k_eq_v). At block 16 (Triton, the backend gemma4's
    # models/config.py Gemma4Config forces for head dims 256 / 512) the pages are
    sliding_page = 16 * 2 * 8 * 256 * 2  # block x (K, V) x heads x head_dim x bf16 = 131,072
    full_page = 16 * 2 * 2 * 512 * 2  # 65,536
    # 0.19's unify_kv_cache_spec_page_size: 65,536 divides 131,072, so the full layers take
    # block 16 x 2 = 32 and a 131,072 B page; _get_kv_cache_groups_uniform_page_size then has
    # buckets of 25 and 5 (25 >= 1.5 x 5: group size 5): five sliding groups and one full
    assert sliding_page % full_page == 0 and sliding_page // full_page == 2
    budget = int(21.5 * 2**30)  # the budget the blog's 0.19.0 logged ("21.5 GiB")
    n = _gemma4_numbers("0.19.0", budget)
    assert n["num_kv_cache_groups"] == 6
    assert n["bytes_per_block"] == 5 * sliding_page == 655_360
    num_blocks = budget // (5 * sliding_page)
    assert n["num_blocks"] == num_blocks == 35_225
    # a request of 131,072 tokens (SlidingWindowSpec / FullAttentionSpec
    # max_memory_usage_bytes, 2,048 batched tokens): each sliding group
    # cdiv(1023 + 2048, 16) + 1 = 193 blocks, the full group cdiv(131072, 32) = 4,096
    per_request = 5 * (-(-(1023 + 2048) // 16) + 1) + 131072 // 32
    assert n["blocks_per_request"] == per_request == 5_061
    assert n["max_concurrency"] == num_blocks / per_request
    # 0.19's line: num_blocks // groups x the smallest block size
    assert n["kv_cache_tokens"] == num_blocks // 6 * 16 == 93_920


def test_different_pages_are_refused_before_vllm_012(tmp_path):
    # 0.11.2's get_kv_cache_groups: neither one spec, nor one type, nor one page size ->
    # NotImplementedError; 0.12.0's unify_kv_cache_spec_page_size groups it as 0.19 does.
    # Gemma4ForConditionalGeneration itself is first listed by 0.19.0's registry.py: the
    # layout is asked of the config without its `architectures` (read by model_type)
    with pytest.raises(BadInputError, match="does not serve Gemma4ForConditionalGeneration "
                       r"yet \(added in 0.19\)"):
        _gemma4_numbers("0.12.0", 20 * GIB)
    raw = json.loads((FIXTURES / "hf-configs" / GEMMA4_26B).read_text(encoding="utf-8"))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({k: v for k, v in raw.items() if k != "architectures"}))
    with pytest.raises(BadInputError, match="vLLM 0.11.2 cannot group"):
        _gemma4_numbers("0.11.2", 20 * GIB, config)
    assert _gemma4_numbers("0.12.0", 20 * GIB, config)["bytes_per_block"] == 5 * 131072


def test_a_page_that_does_not_divide_is_padded_from_vllm_024():
    # sliding 8 x 128 (65,536 B at block 16) and full 8 x 192 (98,304 B): no ratio of block
    # sizes makes them equal. 0.12-0.23's unify_kv_cache_spec_page_size raises
    # NotImplementedError; 0.24's pads the sliding page to 98,304 B (page_size_padded, block 16
    # kept: FlashAttention reads pages by the block stride)
    spec = ModelSpec("mixed", (SlidingWindow(8, 128, window=4096),) * 3
                     + (FullAttention(8, 192),), num_attention_heads=32)
    small, large = 16 * 2 * 8 * 128 * 2, 16 * 2 * 8 * 192 * 2
    assert large % small
    with pytest.raises(BadInputError, match="vLLM 0.23.0 cannot unify layer 0's page"):
        vllm.layout(spec, vllm.VllmConfig(max_model_len=8192, version=(0, 23, 0)))
    (stage,) = vllm.layout(spec, vllm.VllmConfig(max_model_len=8192, version=(0, 24, 0)))
    assert {(g.kind, g.block_size, g.page_bytes) for g in stage.groups} == {
        ("sliding", 16, large), ("full", 16, large)}
    # buckets 3 and 1: group size 1, one block id over one 98,304 B page
    assert stage.bytes_per_block == large


def test_a_smaller_mamba_page_is_padded_from_vllm_026():
    # the Mamba page is aligned to the first attention layer's page (full 8 x 128); a sliding
    # layer with head_dim 256 has a page twice that. Before 0.26 unify_kv_cache_spec_page_size
    # replaces the Mamba spec's block size, which leaves its page as it is, and its assert
    # fails; 0.26 pads the Mamba page ("elif isinstance(layer_spec, MambaSpec)")
    mamba = RecurrentState("mamba2", (StateTensor("conv", (3, 4096), 2),
                                      StateTensor("ssm", (32, 64, 64), 4)))
    spec = ModelSpec("hybrid", (FullAttention(8, 128), SlidingWindow(8, 256, window=4096),
                                mamba, mamba), num_attention_heads=32)
    with pytest.raises(BadInputError, match="vLLM 0.25.0 cannot unify layer 2's Mamba page"):
        vllm.layout(spec, vllm.VllmConfig(max_model_len=8192, version=(0, 25, 0)))
    (stage,) = vllm.layout(spec, vllm.VllmConfig(max_model_len=8192, version=(0, 26, 0)))
    attn_token = 2 * 8 * 128 * 2  # the full layer's bytes per token
    block = 16 * -(-mamba.state_bytes() // (16 * attn_token))  # the hybrid alignment
    sliding_page = block * 2 * 8 * 256 * 2
    assert {g.page_bytes for g in stage.groups} == {sliding_page}
    # the full layer's block doubles (its page divides the sliding one); the Mamba block stays
    assert {(g.kind, g.block_size) for g in stage.groups} == {
        ("full", 2 * block), ("sliding", block), ("mamba", block)}


def test_largest_bucket_grouping_from_018():
    # _get_kv_cache_groups_uniform_page_size takes the largest bucket when max < 1.5 x min
    # from the 0.18.0 wheel; 0.17.0's takes the smallest: 10 sliding + 8 full -> 8
    page = 16 * 2 * 8 * 128 * 2
    spec = ModelSpec("mixed", (SlidingWindow(8, 128, window=4096),) * 10
                     + (FullAttention(8, 128),) * 8, num_attention_heads=32)
    for version, group_size in (((0, 17, 0), 8), ((0, 18, 0), 10)):
        p = vllm.profile(spec, vllm.VllmConfig(max_model_len=8192, version=version), 10 * GIB)
        assert p.stages[0].group_size == group_size
        assert p.num_blocks == 10 * GIB // (group_size * page)
