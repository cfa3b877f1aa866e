"""Transformers' static and dynamic caches (kvplan.engines.hf.caches) against the worked
numbers of docs/engine-kv-sizing.md.
"""

from __future__ import annotations

from engine_cases import gemma3_27b
from factories import FullAttention, ModelSpec, hybrid, mla

from kvplan.engines import hf


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
