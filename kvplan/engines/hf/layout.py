"""The transformers caches as allocated: the tensors `kvplan validate` builds with torch
(a DynamicCache holding the tokens, or a StaticCache of max_cache_len slots).
"""

from __future__ import annotations

from kvplan.core.dtypes import KVFormat
from kvplan.core.errors import BadInputError
from kvplan.core.layers import ATTENTION_KINDS, RecurrentState
from kvplan.core.spec import ModelSpec
from kvplan.engines.cache import CacheLayout, StateBuffer, dense_layers, spec_state
from kvplan.engines.hf.caches import (
    CACHES,
    check_quantized,
    full_precision_tokens,
    held_tokens,
    residual_window,
    state_bytes,
)

# --- the cache as allocated (what `kvplan validate` builds with torch) ---------------------

CACHE_NOTES = {
    "static": ("HF StaticCache: [batch, kv_heads, {max_len:,}, head_dim] per K and V, "
               "sliding and chunked layers capped at their window."),
    "dynamic": ("HF DynamicCache: [batch, kv_heads, tokens, head_dim]; sliding layers keep "
                "window - 1 tokens."),
}


def state_buffers(layer: RecurrentState, model_dtype: str, tp: int) -> tuple[StateBuffer, ...]:
    """The state tensors of one row: the conv state as (conv_dim, kernel), one column more
    than vLLM's (kernel - 1, conv_dim), in the model dtype (bf16 unless fp32/fp16); the
    recurrent/SSM state in float32."""

    conv = {"fp32": "float32", "fp16": "float16"}.get(model_dtype, "bfloat16")
    out = []
    for b in spec_state(layer, tp):
        if b.name == "conv":
            width = 1
            for d in b.shape[1:]:
                width *= d
            out.append(StateBuffer(b.name, conv, (width, b.shape[0] + 1)))
        else:
            out.append(StateBuffer(b.name, "float32", b.shape))
    return tuple(out)


def cache_layout(spec: ModelSpec, fmt: KVFormat, tokens: int, batch: int, *, tp: int = 1,
                 cache: str = "dynamic", max_len: int | None = None) -> CacheLayout:
    """The tensors of a DynamicCache holding `tokens` tokens per row, or of a StaticCache
    with max_cache_len = `max_len`: per layer K and V of [batch, kv_heads, slots, head_dim]
    (`held_tokens` slots), MLA's latent and k_rot as two tensors, states per row."""

    if cache not in CACHES:
        raise BadInputError(f"unknown cache class {cache!r}", "use dynamic or static")
    check_quantized(spec, fmt)
    seq_len = (max_len or tokens) if cache == "static" else tokens
    model_bytes = 4 if spec.dtype == "fp32" else 2
    layers = dense_layers(
        spec, lambda layer: held_tokens(layer, cache, seq_len)
        if isinstance(layer, ATTENTION_KINDS) else seq_len,  # MLA: every token
        batch, lambda layer: (state_buffers(layer, spec.dtype, tp),
                              state_bytes(layer, model_bytes, tp)))
    # validate's `tokens` arrive as one prefill, which a QuantizedCache quantizes whole
    recent = full_precision_tokens(fmt, seq_len) if residual_window(fmt) else None
    return CacheLayout(paged=False, block_tokens=None, batch=batch, axes="batch-heads",
                       layers=layers, split_latent=True, note=CACHE_NOTES[cache],
                       recent_tokens=recent, whole_tensor_groups=True)
