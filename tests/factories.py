"""Small spec factories for core tests: expected values are written as formulas beside them."""

from __future__ import annotations

from kvplan.core.layers import (
    MLA,
    ChunkedLocal,
    CrossAttention,
    FullAttention,
    NoCache,
    RecurrentState,
    SlidingWindow,
    StateTensor,
)
from kvplan.core.spec import ModelSpec


def dense(layers: int = 32, kv_heads: int = 8, head_dim: int = 128, heads: int = 32,
          max_ctx: int | None = 131072, name: str = "dense") -> ModelSpec:
    return ModelSpec(name=name, layers=(FullAttention(kv_heads, head_dim),) * layers,
                     num_attention_heads=heads, max_context_tokens=max_ctx)


def alternating(pairs: int = 21, kv_heads: int = 8, head_dim: int = 256, window: int = 4096,
                heads: int = 16) -> ModelSpec:
    """Gemma-2 style: even layers sliding, odd layers full."""
    pair = (SlidingWindow(kv_heads, head_dim, window=window), FullAttention(kv_heads, head_dim))
    return ModelSpec(name="alternating", layers=pair * pairs, num_attention_heads=heads,
                     max_context_tokens=8192)


def mla(layers: int = 61, rank: int = 512, rope: int = 64) -> ModelSpec:
    return ModelSpec(name="mla", layers=(MLA(rank, rope),) * layers, num_attention_heads=128,
                     max_context_tokens=163840)


def hybrid() -> ModelSpec:
    """Qwen3-Next-like: 3 gated delta-net layers then 1 full-attention layer, 12 times."""
    gdn = RecurrentState("gated_delta_net", (
        StateTensor("conv", (3, 8192), 2, tp_axis=1),
        StateTensor("recurrent", (32, 128, 128), 2, tp_axis=0),
    ))
    return ModelSpec(name="hybrid", layers=(gdn, gdn, gdn, FullAttention(2, 256)) * 12,
                     num_attention_heads=16, max_context_tokens=262144)


__all__ = ["dense", "alternating", "mla", "hybrid", "ChunkedLocal", "CrossAttention", "NoCache",
           "FullAttention", "SlidingWindow", "MLA", "RecurrentState", "StateTensor", "ModelSpec"]
