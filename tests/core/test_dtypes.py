"""Storage cost of each KV format, against hand arithmetic and engine sources."""

import pytest

from kvplan.core.dtypes import BF16, FP8_DS_MLA, NVFP4_DS_MLA, format_names, parse_format
from kvplan.core.errors import BadInputError


@pytest.mark.parametrize(("name", "row_bytes"), [
    ("fp32", 128 * 4),
    ("fp16", 128 * 2),
    ("bf16", 128 * 2),
    ("fp8", 128),
    ("fp8_e5m2", 128),
    ("int8", 128),
    ("int4", 128 // 2),
    ("int2", 128 // 4),
    # NVFP4: 4-bit values + one fp8 scale per 16 elements (vLLM nvfp4_kv_cache_full_dim:
    # head_size // 2 + head_size // 16)
    ("nvfp4", 128 // 2 + 128 // 16),
    # group-wise: 4-bit data + per 64 elements a fp16 scale and a fp16 zero-point
    ("int4:g64", 64 + 2 * (2 + 2)),
    ("int4:g64:sym", 64 + 2 * 2),
    ("int2:g32:s=fp32", 32 + 4 * (4 + 4)),
    ("int8:g128:s=bf16:sym", 128 + 2),
])
def test_row_bytes_for_head_dim_128(name, row_bytes):
    assert parse_format(name).row_bytes(128) == row_bytes


def test_sub_byte_rows_round_up_to_whole_bytes():
    # 3 elements of 4 bits = 12 bits -> 2 bytes; 5 of 2 bits = 10 bits -> 2 bytes
    assert parse_format("int4").row_bytes(3) == 2
    assert parse_format("int2").row_bytes(5) == 2
    # nvfp4 on 20 elements: 10 data bytes + 2 scales (ceil(20 / 16))
    assert parse_format("nvfp4").row_bytes(20) == 10 + 2


def test_fp8_ds_mla_is_656_bytes_per_token():
    # vLLM flashmla_sparse: 512 fp8 NoPE values + 4 fp32 scales (1 per 128) + 64 bf16 RoPE
    assert FP8_DS_MLA.latent_bytes(512, 64) == 512 + 4 * 4 + 64 * 2 == 656


def test_nvfp4_ds_mla_is_352_bytes_per_token():
    # vLLM 0.33: 256 B packed e2m1 NoPE + 32 B fp8 scales + 64 B fp8 RoPE
    assert NVFP4_DS_MLA.latent_bytes(512, 64) == 256 + 32 + 64 == 352


def test_bf16_latent_is_576_elements_times_2():
    assert BF16.latent_bytes(512, 64) == (512 + 64) * 2


def test_auto_is_the_model_dtype():
    assert parse_format("auto", "fp16").name == "fp16"
    assert parse_format("auto", "bf16").name == "bf16"


def test_aliases():
    assert parse_format("float16").name == "fp16"
    assert parse_format("bfloat16").name == "bf16"
    assert parse_format("fp8").name == "fp8_e4m3"


def test_kivi_keys_pay_scales_per_channel_per_token_group():
    fmt = parse_format("int2:g32:kivi", "bf16")
    heads, dim, tokens = 8, 128, 100
    # keys: 3 full groups of 32 tokens quantized (2-bit rows of 32 B) with, per channel, one
    # fp16 scale + zero-point per group; the 4 tokens of the unfinished group stay bf16
    keys = 96 * heads * 32 + heads * dim * 3 * (2 + 2) + 4 * heads * dim * 2
    # values: per-token groups of 32 elements: 32 B data + 4 groups * 4 B
    values = tokens * heads * (32 + 4 * 4)
    assert fmt.tensor_bytes(tokens, heads, dim, "key") == keys
    assert fmt.tensor_bytes(tokens, heads, dim, "value") == values


def test_residual_window_keeps_recent_tokens_in_model_dtype():
    fmt = parse_format("int4:g64:r128", "bf16")
    heads, dim = 8, 128
    # 1000 tokens: the last 128 in bf16 (256 B/row), 872 quantized (64 + 2 * 4 = 72 B/row)
    assert fmt.tensor_bytes(1000, heads, dim, "value") == heads * (872 * 72 + 128 * 256)
    # fewer tokens than the residual: all full precision
    assert fmt.tensor_bytes(100, heads, dim, "key") == heads * 100 * 256


@pytest.mark.parametrize("bad", ["fp7", "int4:", "int4:x", "int4:g0", "int9:g64", "int4:s=fp16",
                                 "", "int4:g64:r"])
def test_unknown_dtype_lists_valid_ones(bad):
    with pytest.raises(BadInputError) as info:
        parse_format(bad)
    assert info.value.hint


def test_format_names_cover_the_issue_list():
    names = set(format_names())
    for required in ("fp32", "fp16", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2", "int8", "int4",
                     "int2", "nvfp4", "fp8_ds_mla"):
        assert required in names
