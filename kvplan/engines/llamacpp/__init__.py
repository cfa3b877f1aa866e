"""llama.cpp: the K and V buffers `llama_kv_cache` allocates, the compute buffers beside them
and partial offload (`engine`); its flags and log lines as data (`text`).
"""

from typing import TYPE_CHECKING

from kvplan.engines import lazy_exports

if TYPE_CHECKING:
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
    from kvplan.engines.llamacpp.text import LOG_FORMAT, launch_flags

__all__ = ["ENGINE", "LOG_FORMAT", "ComputeBuffers", "LlamacppConfig", "LlamacppEngine",
           "LlamacppProfile", "cache_type", "compute_buffers", "flash_attn_on",
           "gpu_layer_count", "launch_flags", "offload", "pipeline_parallel", "place_weights",
           "profile"]

# each submodule is imported when one of its names is first asked for (lazy_exports)
__getattr__ = lazy_exports(__name__, {
    "engine": ("ENGINE", "ComputeBuffers", "LlamacppConfig", "LlamacppEngine",
               "LlamacppProfile", "cache_type", "compute_buffers", "flash_attn_on",
               "gpu_layer_count", "offload", "pipeline_parallel", "place_weights", "profile"),
    "text": ("LOG_FORMAT", "launch_flags"),
})
