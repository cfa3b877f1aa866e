"""The quantities, each against a hand formula written in the test."""

import pytest
from factories import (
    MLA,
    ChunkedLocal,
    CrossAttention,
    FullAttention,
    ModelSpec,
    NoCache,
    SlidingWindow,
    alternating,
    dense,
    hybrid,
    mla,
)

from kvplan.core.dtypes import BF16, FP8_DS_MLA, parse_format
from kvplan.core.errors import BadInputError
from kvplan.core.sizing import per_token_bytes, pp_stages, request_bytes, size

GIB = 2**30


def test_llama_3_1_8b_shape():
    r = size(dense(), BF16, tokens=8192)
    assert r.per_token_bytes == 2 * 32 * 8 * 128 * 2  # K+V x layers x kv heads x head x bf16
    assert r.request_bytes == 2 * 32 * 8 * 128 * 2 * 8192 == GIB
    assert r.batch_bytes == r.request_bytes


def test_batch_is_sum_of_requests():
    r = size(dense(), BF16, tokens=8192, batch=32)
    assert r.batch_bytes == 32 * GIB


def test_list_of_lengths():
    per_token = 2 * 32 * 8 * 128 * 2
    r = size(dense(), BF16, lengths=[1000, 2000, 3000])
    assert r.batch_bytes == per_token * 6000
    assert r.batch == 3


def test_mla_has_no_factor_two_and_is_not_split_by_tp():
    spec = mla()
    per_token = 61 * (512 + 64) * 2  # DeepSeek-V3: one latent per token per layer
    assert per_token_bytes(spec.layers, BF16) == per_token == 70272
    r = size(spec, BF16, tokens=8192, tp=8)
    assert r.per_gpu_batch_bytes == per_token * 8192  # replicated on each of the 8 ranks
    assert r.all_gpus_batch_bytes == 8 * per_token * 8192


def test_fp8_ds_mla_deepseek_v3():
    # vLLM docs/engine-kv-sizing.md worked example: 656 B x 61 layers = 40,016 B per token
    assert per_token_bytes(mla().layers, FP8_DS_MLA) == 656 * 61 == 40016


def test_fp8_ds_mla_rejected_for_plain_attention():
    with pytest.raises(BadInputError):
        size(dense(), FP8_DS_MLA, tokens=16)


def test_sliding_window_caps_tokens():
    spec = alternating()  # Gemma-2-9B shape: 21 sliding (4096) + 21 full, 8 KV heads x 256
    per_layer_token = 2 * 8 * 256 * 2
    assert request_bytes(spec.layers, 8192, BF16) == (
        21 * 8192 * per_layer_token + 21 * 4096 * per_layer_token) == 2_113_929_216
    # below the window both kinds hold every token
    assert request_bytes(spec.layers, 1000, BF16) == 42 * 1000 * per_layer_token


def test_chunked_local_caps_at_chunk():
    layer = ChunkedLocal(8, 128, chunk=8192)
    assert layer.request_bytes(32768, BF16) == 8192 * 2 * 8 * 128 * 2
    assert layer.request_bytes(100, BF16) == 100 * 2 * 8 * 128 * 2


def test_llama4_scout_static_cache_example():
    # docs/engine-kv-sizing.md section 4.2: Llama-4-Scout text (36 chunked @8192 + 12 full),
    # max_cache_len 32768: 4,096 x (36 x 8192 + 12 x 32768) = 2,818,572,288 B
    layers = (ChunkedLocal(8, 128, chunk=8192),) * 3 + (FullAttention(8, 128),)
    spec = ModelSpec("scout", layers * 12, num_attention_heads=40, max_context_tokens=32768)
    r = size(spec, BF16, tokens=32768)
    assert r.request_bytes == 4096 * (36 * 8192 + 12 * 32768) == 2_818_572_288


def test_cross_attention_is_independent_of_text_length():
    layer = CrossAttention(8, 128, encoder_tokens=6404)  # Mllama: 4 tiles x 1,601 tokens
    assert layer.request_bytes(10, BF16) == layer.request_bytes(100000, BF16) == (
        6404 * 2 * 8 * 128 * 2)
    assert layer.token_bytes(BF16) == 0


def test_recurrent_state_is_fixed_per_request():
    spec = hybrid()
    gdn_state = 3 * 8192 * 2 + 32 * 128 * 128 * 2  # conv + recurrent, bf16 = 1,097,728 B
    attn = 2 * 2 * 256 * 2  # 12 full layers, 2 KV heads x 256
    assert request_bytes(spec.layers, 1, BF16) == 36 * gdn_state + 12 * attn
    assert request_bytes(spec.layers, 8192, BF16) == 36 * gdn_state + 12 * attn * 8192
    assert per_token_bytes(spec.layers, BF16) == 12 * attn


def test_gdn_state_split_by_tp():
    spec = hybrid()
    state_layer = spec.layers[0]
    # docs/engine-kv-sizing.md: Qwen3-Next TP=4 -> conv (3, 2048) + ssm (8, 128, 128) = 274,432 B
    assert state_layer.request_bytes(1, BF16, tp=4) == 3 * 2048 * 2 + 8 * 128 * 128 * 2 == 274432


def test_no_cache_layers_cost_nothing():
    assert NoCache().request_bytes(10**6, BF16) == 0


def test_different_k_and_v_head_dims():
    layer = FullAttention(4, 192, v_head_dim=128)  # MiMo: K 192, V 128
    assert layer.token_bytes(BF16) == 4 * (192 + 128) * 2


def test_tp_splits_kv_heads_and_replicates_past_them():
    spec = dense(layers=80, kv_heads=8, heads=64)  # Llama-3.1-70B
    per_rank_tp4 = 80 * 2 * 2 * 128 * 2  # 8 // 4 = 2 heads per rank: 81,920 B per token
    assert size(spec, BF16, tokens=1, tp=4).per_gpu_batch_bytes == per_rank_tp4 == 81920
    # TP 16 > 8 KV heads: each rank keeps max(1, 8 // 16) = 1 head, not half of one
    r = size(spec, BF16, tokens=1, tp=16)
    assert r.per_gpu_batch_bytes == 80 * 2 * 1 * 128 * 2
    assert r.all_gpus_batch_bytes == 16 * 80 * 2 * 1 * 128 * 2


def test_tp_that_does_not_fit():
    with pytest.raises(BadInputError, match="attention heads"):
        size(dense(heads=32), BF16, tokens=1, tp=3)
    with pytest.raises(BadInputError, match="KV heads"):
        size(dense(kv_heads=6, heads=48), BF16, tokens=1, tp=4)
    with pytest.raises(BadInputError):
        size(dense(layers=4), BF16, tokens=1, pp=5)


def test_pp_split_follows_vllm_get_pp_indices():
    # 80 layers on 3 stages: 26 each, the remainder 2 to the stages before the last
    assert [b - a for a, b in pp_stages(80, 3)] == [27, 27, 26]
    # 61 on 4: 15 each, 1 left -> stage index 2 (second-to-last)
    assert [b - a for a, b in pp_stages(61, 4)] == [15, 15, 16, 15]
    assert pp_stages(32, 1) == [(0, 32)]


def test_pp_reports_largest_stage():
    spec = dense(layers=61, kv_heads=8)
    r = size(spec, BF16, tokens=100, pp=4)
    assert r.per_gpu_batch_bytes == 16 * 100 * 2 * 8 * 128 * 2
    assert r.stage_layers == (15, 15, 16, 15)


def test_paged_rounds_each_request_up_to_whole_blocks():
    spec = dense(layers=2, kv_heads=1, head_dim=64, heads=1)
    per_token = 2 * 2 * 1 * 64 * 2
    r = size(spec, BF16, lengths=[17, 32, 1], block_size=16)
    assert r.paged_batch_bytes == per_token * (32 + 32 + 16)
    assert r.paged_waste_bytes == per_token * (80 - 50)


def test_paged_sliding_layer_holds_one_extra_block_past_the_window():
    layer = SlidingWindow(1, 64, window=4096)
    assert layer.paged_tokens(8192, 16) == (4096 // 16 + 1) * 16
    assert layer.paged_tokens(4096, 16) == 4096  # not past the window yet
    assert layer.paged_tokens(100, 16) == 112
    # a window of 24 with blocks of 16: tokens [1, 24] touch blocks 0-1 at 25 tokens; from
    # 33 tokens ([9, 32]) the window touches 3 blocks
    odd = SlidingWindow(1, 64, window=24)
    assert [odd.paged_tokens(n, 16) // 16 for n in (24, 25, 32, 33, 1000)] == [2, 2, 2, 3, 3]


def test_paged_chunked_layer_counts_the_blocks_its_chunk_touches():
    aligned = ChunkedLocal(1, 64, chunk=8192)
    assert aligned.paged_tokens(20000, 16) == 8192
    odd = ChunkedLocal(1, 64, chunk=20)
    # chunks [0,19] [20,39] [40,59] [60,79] touch blocks {0,1} {1,2} {2,3} {3,4}: never 3
    assert [odd.paged_tokens(n, 16) // 16 for n in (10, 20, 21, 50, 1000)] == [1, 2, 2, 2, 2]
    # chunk 24, block 16: [0,23] {0,1}; [24,47] {1,2}; [48,71] {3,4}: 2 blocks; a chunk of 17
    # starting at 17 ([17,33]) touches {1,2} but [34,50] touches {2,3}: still 2; chunk 30
    # starting at 30 ([30,59]) touches {1,2,3}: 3
    assert ChunkedLocal(1, 64, chunk=30).paged_tokens(60, 16) // 16 == 3


def test_contiguous_preallocates_max_len_but_windows_only_their_window():
    spec = alternating(pairs=1)  # 1 sliding (4096) + 1 full, 8 x 256
    per_layer_token = 2 * 8 * 256 * 2
    r = size(spec, BF16, tokens=100, max_len=8192)
    assert r.contiguous_batch_bytes == per_layer_token * (4096 + 8192)
    assert r.contiguous_waste_bytes == r.contiguous_batch_bytes - per_layer_token * 200


def test_quantized_request_bytes():
    spec = dense(layers=32, kv_heads=8)
    # int4:g64 -> per row of 128: 64 B data + 2 groups x (fp16 scale + zero) = 72 B
    r = size(spec, parse_format("int4:g64"), tokens=1000)
    assert r.request_bytes == 32 * 2 * 8 * 72 * 1000


@pytest.mark.parametrize("kwargs", [{"tokens": 0}, {"tokens": -5}, {"tokens": 5, "batch": 0},
                                    {"lengths": []}, {"tokens": 5, "block_size": 0}])
def test_bad_quantities(kwargs):
    with pytest.raises(BadInputError):
        size(dense(), BF16, **kwargs)


def test_mla_spec_has_no_tp_limit_from_kv_heads():
    spec = ModelSpec("m", (MLA(512, 64),) * 4, num_attention_heads=128)
    assert size(spec, BF16, tokens=1, tp=16).per_gpu_batch_bytes == 4 * 576 * 2
