"""TensorRT-LLM: tokens and blocks of the paged KV pool (TensorRT-LLM 1.1-1.3, PyTorch flow).

- `pool`    the pool: bytes per token, tokens and blocks from the KV memory
- `memory`  the budget: the free memory the profiling run leaves
- `text`    the `trtllm-serve` flags and the start-up log lines, as data
- `engine`  the plugin: a Deployment -> Capacity
"""

from typing import TYPE_CHECKING

from kvplan.engines import lazy_exports

if TYPE_CHECKING:
    from kvplan.engines.trtllm.engine import ENGINE, TrtllmEngine
    from kvplan.engines.trtllm.memory import (
        TRTLLM_MAX_NUM_TOKENS,
        TRTLLM_VOCAB,
        TrtllmMemory,
        trtllm_allreduce_workspace_bytes,
        trtllm_free_bytes,
        trtllm_memory,
    )
    from kvplan.engines.trtllm.pool import (
        FREE_GPU_MEMORY_FRACTION,
        KV_DTYPES,
        MAX_BATCH_SIZE,
        SCHEMA,
        TOKENS_PER_BLOCK,
        TrtllmConfig,
        TrtllmProfile,
        bytes_per_token,
        kv_format,
        profile,
    )
    from kvplan.engines.trtllm.text import LOG_FORMAT, launch_flags

__all__ = ["ENGINE", "FREE_GPU_MEMORY_FRACTION", "KV_DTYPES", "LOG_FORMAT", "MAX_BATCH_SIZE",
           "SCHEMA", "TOKENS_PER_BLOCK", "TRTLLM_MAX_NUM_TOKENS", "TRTLLM_VOCAB",
           "TrtllmConfig", "TrtllmEngine", "TrtllmMemory", "TrtllmProfile", "bytes_per_token",
           "kv_format", "launch_flags", "profile", "trtllm_allreduce_workspace_bytes",
           "trtllm_free_bytes", "trtllm_memory"]

# each submodule is imported when one of its names is first asked for (lazy_exports)
__getattr__ = lazy_exports(__name__, {
    "engine": ("ENGINE", "TrtllmEngine"),
    "memory": (
        "TRTLLM_MAX_NUM_TOKENS", "TRTLLM_VOCAB", "TrtllmMemory", "trtllm_allreduce_workspace_bytes",
        "trtllm_free_bytes", "trtllm_memory"),
    "pool": (
        "FREE_GPU_MEMORY_FRACTION", "KV_DTYPES", "MAX_BATCH_SIZE", "SCHEMA", "TOKENS_PER_BLOCK",
        "TrtllmConfig", "TrtllmProfile", "bytes_per_token", "kv_format", "profile"),
    "text": ("LOG_FORMAT", "launch_flags"),
})
