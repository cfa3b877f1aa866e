"""llama.cpp: the K and V buffers `llama_kv_cache` allocates, the compute buffers beside them
and partial offload (`engine`)."""

from kvplan.engines.llamacpp.engine import (
    ENGINE,
    ComputeBuffers,
    LlamacppConfig,
    LlamacppEngine,
    LlamacppProfile,
    cache_type,
    compute_buffers,
    flash_attn_on,
    gpu_layer_count,
    offload,
    pipeline_parallel,
    place_weights,
    profile,
)

__all__ = ["ENGINE", "ComputeBuffers", "LlamacppConfig", "LlamacppEngine", "LlamacppProfile",
           "cache_type", "compute_buffers", "flash_attn_on", "gpu_layer_count", "offload",
           "pipeline_parallel", "place_weights", "profile"]
