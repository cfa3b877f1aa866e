"""transformers' QuantizedCache residual: what it keeps in full precision, against real runs.

Expected figures come from transformers 5.24.0 itself (tests/oracle_hf/run_oracle.py: a
random-weight model built from the config, batch 2, `QuantizedCache(backend="quanto", nbits=4,
q_group_size=64, residual_length=R)`, the bytes of every tensor its layers hold). The model
is Llama-3.1-8B-Instruct's config shrunk to 8 layers (8 KV heads of 128 kept).
"""

from __future__ import annotations

import pytest

from kvplan.core.dtypes import parse_format
from kvplan.core.errors import BadInputError
from kvplan.core.layers import MLA, FullAttention, SlidingWindow
from kvplan.core.spec import ModelSpec
from kvplan.engines import hf
from kvplan.engines.cache import dense_batch_bytes
from kvplan.validate.predict import predict
from kvplan.validate.results import ValidateRequest

LLAMA_8_LAYERS = ModelSpec(name="llama-3.1-8b-8-layers", layers=(FullAttention(8, 128),) * 8,
                           num_attention_heads=32, max_context_tokens=131072)


def _bytes(tokens: int, decoded: int, residual: int) -> int:
    fmt = f"int4:g64:r{residual}"
    return hf.profile(LLAMA_8_LAYERS, seq_len=tokens, batch=2, kv_dtype=fmt,
                      decoded=decoded).cache_bytes


@pytest.mark.parametrize(("tokens", "decoded", "residual", "real_bytes"), [
    # a prefill is quantized whole: 100 tokens x 8 layers x 2 rows x (K + V) of 8 heads x
    # (64 packed bytes + 2 groups x (scale + zero point) 2 B) = 1,843,200 B
    (40, 0, 128, 737_280),
    (100, 0, 128, 1_843_200),
])
def test_a_prefill_is_quantized_whole(tokens, decoded, residual, real_bytes):
    # kvplan charged min(N, R) = all 100 tokens in bf16 before: 6,553,600 B
    assert _bytes(tokens, decoded, residual) == real_bytes


def test_decoded_tokens_stay_in_full_precision_until_the_flush():
    # `QuantizedLayer.update`: each one-token step appends to a bf16 buffer, and the step that
    # would make it R long re-quantizes everything: the buffer holds decoded mod R tokens
    assert hf.full_precision_tokens(parse_format("int4:g64:r8"), 100, 10) == 2
    assert hf.full_precision_tokens(parse_format("int4:g64:r8"), 100, 7) == 7
    assert hf.full_precision_tokens(parse_format("int4:g64:r8"), 100, 8) == 0
    assert hf.full_precision_tokens(parse_format("int4:g64:r128"), 100, 0) == 0


def test_validate_hf_dynamic_prefill_has_no_recent_tokens():
    fmt = parse_format("int4:g64:r128")
    request = ValidateRequest(LLAMA_8_LAYERS, fmt, 100, 2, layout="hf-dynamic")
    assert sum(predict(request).values()) == 1_843_200


def test_quantized_cache_refuses_sliding_layers():
    # transformers 5.24 QuantizedCache.__init__: "`QuantizedCache` is only supported for
    # models with only full attention layers"
    spec = ModelSpec(name="mistral-like", layers=(SlidingWindow(8, 128, window=32),) * 2,
                     num_attention_heads=32, max_context_tokens=32768)
    with pytest.raises(BadInputError, match="full attention"):
        hf.profile(spec, seq_len=40, kv_dtype="int4:g64:r128")



# --- quanto's packing: each K/V tensor grouped whole, group rows packed and rounded up --------
# optimum-quanto 0.2.7 (the backend transformers' `generate` picks): tensor/grouped.py `group`
# (axis 0) reshapes a [batch, heads, tokens, dim] tensor to (elements / G, G); packed.py
# `pack_weights` packs 8 // bits of those group rows into one uint8 row of G, rounding the
# row count up; MaxOptimizer keeps a scale and a shift per group in the model dtype (bf16).

DEEPSEEK_5_LAYERS = ModelSpec(name="deepseek-v3-5-layers", layers=(MLA(512, 64),) * 5,
                              num_attention_heads=128, max_context_tokens=163840)


def test_int2_mla_after_a_flush_rounds_the_rope_key_rows_up():
    # transformers 5.24.0 held 117,880 B (tests/oracle_hf: DeepSeek-V3 cut to 5 layers,
    # quanto int2, groups of 64, residual 8, batch 2, 60 tokens of which 25 decoded).
    # 35 prefilled + 24 flushed = 59 quantized tokens, 25 mod 8 = 1 token in bf16. Per layer:
    # latent  2 x 59 x 512 = 60,416 values = 944 groups -> 236 rows x 64 B = 15,104 B
    #         + 944 x (scale 2 B + shift 2 B)                               =  3,776 B
    # RoPE    2 x 59 x 64 = 7,552 values = 118 groups -> ceil(118 / 4) = 30 rows x 64 = 1,920 B
    #         (118 / 4 = 29.5 rows by the row formula: 32 B less)
    #         + 118 x 4                                                     =    472 B
    # bf16    2 x 1 x (512 + 64) x 2                                        =  2,304 B
    per_layer = 15_104 + 3_776 + 1_920 + 472 + 2_304
    assert per_layer * 5 == 117_880
    assert hf.profile(DEEPSEEK_5_LAYERS, seq_len=60, batch=2, kv_dtype="int2:g64:r8",
                      decoded=25).cache_bytes == 117_880


def test_validate_predicts_and_allocates_the_rounded_rows():
    # a prefill of 41 tokens, batch 2: the RoPE key's 82 groups pack into ceil(82 / 4) = 21
    # rows. Per layer: latent 2 x 41 x 512 / 64 = 656 groups -> 164 rows x 64 = 10,496 B +
    # 656 x 4 = 2,624 B; RoPE 21 x 64 = 1,344 B + 82 x 4 = 328 B
    per_layer = 10_496 + 2_624 + 1_344 + 328
    fmt = parse_format("int2:g64:r8")
    request = ValidateRequest(DEEPSEEK_5_LAYERS, fmt, 41, 2, layout="hf-dynamic")
    assert sum(predict(request).values()) == 5 * per_layer
    assert hf.profile(DEEPSEEK_5_LAYERS, seq_len=41, batch=2,
                      kv_dtype="int2:g64:r8").cache_bytes == 5 * per_layer
    pytest.importorskip("torch")
    from kvplan.validate import validate

    result = validate(ValidateRequest(DEEPSEEK_5_LAYERS, fmt, 41, 2, layout="hf-dynamic",
                                      device="cpu"))
    assert result.measured_bytes == 5 * per_layer and result.ok


def test_groups_span_rows_narrower_than_the_group():
    # Llama-3.2-1B's head_dim 64 under groups of 128 (transformers 5.24.0 held 178,432 B for
    # 4 layers, 8 KV heads, batch 2, a prefill of 41 tokens, quanto int4 g128): per layer K and
    # V each 2 x 8 x 41 x 64 = 41,984 values = 328 groups of 128 (one group covers two rows)
    # -> 164 rows x 128 = 20,992 B + 328 x 4 = 1,312 B; a group per 64-value row would count
    # 656 x 4 B of scales
    spec = ModelSpec(name="llama-3.2-1b-4-layers", layers=(FullAttention(8, 64),) * 4,
                     num_attention_heads=32, max_context_tokens=131072)
    assert 4 * 2 * (20_992 + 1_312) == 178_432
    assert hf.profile(spec, seq_len=41, batch=2, kv_dtype="int4:g128:r16").cache_bytes \
        == 178_432


def test_row_formats_elsewhere_keep_their_rows():
    # a group-wise format without a residual window (not a QuantizedCache) is still priced
    # row by row: 2 x 41 tokens x (32 packed bytes + 2 B scale + 2 B zero point) for RoPE 64
    fmt = parse_format("int4:g64")
    assert dense_batch_bytes(MLA(512, 64), 41, fmt, 2, whole_tensor_groups=True) == \
        2 * 41 * ((256 + 8 * 4) + (32 + 4))
