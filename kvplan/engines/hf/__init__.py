"""Hugging Face transformers: the bytes its cache classes hold (transformers 5.23-5.24
cache_utils.py).

- `caches`  DynamicCache / StaticCache / QuantizedCache: tokens held per layer, bytes
- `layout`  the caches as allocated (the tensors `kvplan validate` builds)
- `memory`  the budget: what the weights and the forward pass leave
- `engine`  the plugin: a Deployment -> Capacity
"""

from kvplan.engines.hf.caches import (
    CACHES,
    SCHEMA,
    SMALLER_KV_DTYPES,
    HfProfile,
    check_quantized,
    full_precision_tokens,
    held_tokens,
    kv_format,
    profile,
    window_cap,
)
from kvplan.engines.hf.engine import ENGINE, HfEngine
from kvplan.engines.hf.layout import CACHE_NOTES, cache_layout, state_buffers
from kvplan.engines.hf.memory import hf_free_bytes

__all__ = ["CACHES", "CACHE_NOTES", "ENGINE", "SCHEMA", "SMALLER_KV_DTYPES", "HfEngine",
           "HfProfile", "cache_layout", "check_quantized", "full_precision_tokens",
           "held_tokens", "hf_free_bytes", "kv_format", "profile", "state_buffers",
           "window_cap"]
