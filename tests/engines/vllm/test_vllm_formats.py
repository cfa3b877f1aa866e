"""vLLM's KV cache dtypes (kvplan.engines.vllm.formats): bytes per token of fp8_ds_mla, the
DeepSeek-V3.2 indexer, NVFP4 and int8 per-token-head, and the dtypes it refuses.
"""

from __future__ import annotations

import pytest
from factories import ModelSpec, dense, mla

from kvplan.core.errors import BadInputError
from kvplan.engines import vllm
from kvplan.sources.families import with_family_facts


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
    # 0.11.0's DeepseekV32ForCausalLM hook stores auto as fp8_ds_mla records: 512 fp8 latent
    # + 4 fp32 scales + 64 bf16 rope = 656 B, beside the indexer's 128 fp8 keys + a 4-byte scale
    (stage,) = vllm.layout(v32, vllm.VllmConfig(max_model_len=8192, version=(0, 11, 0)))
    assert stage.per_token_bytes == 61 * (656 + 132) == 48068
    # from 0.11.1 (the 0.11.1, 0.11.2, 0.12.0 and 0.33.0 wheels) only fp8 dtypes become the
    # record: auto keeps the bf16 latent, (512 + 64) x 2 = 1,152 B, the indexer unchanged
    for version in ((0, 11, 1), vllm.LATEST):
        (later,) = vllm.layout(v32, vllm.VllmConfig(max_model_len=8192, version=version))
        assert later.per_token_bytes == 61 * ((512 + 64) * 2 + 132) == 78324
    (fp8_v32,) = vllm.layout(v32, vllm.VllmConfig(max_model_len=8192, kv_cache_dtype="fp8"))
    assert fp8_v32.per_token_bytes == 48068
    with pytest.raises(BadInputError):
        vllm.layout(dense(), config)  # fp8_ds_mla is MLA-only


def test_vllm_per_token_head_and_nvfp4_formats():
    nv = vllm.layout(dense(), vllm.VllmConfig(max_model_len=8192, kv_cache_dtype="nvfp4"))
    assert nv[0].per_token_bytes == 32 * 2 * 8 * (64 + 8)  # 1,152 B per layer
    i8 = vllm.layout(dense(), vllm.VllmConfig(max_model_len=8192,
                                              kv_cache_dtype="int8_per_token_head"))
    assert i8[0].per_token_bytes == 32 * 8 * ((128 + 128) * 1 + 2 * 4)
    with pytest.raises(BadInputError):
        vllm.kv_format(dense(), "int4:g64")
