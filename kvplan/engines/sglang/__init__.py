"""SGLang: `max_total_num_tokens` from the mem_fraction_static rule.

- `memory`  the budget: free memory before and after the weight load, mem_fraction_static
- `engine`  the token pools (full, SWA, Mamba), launch flags, log lines and the plugin
"""

from kvplan.engines.sglang.engine import (
    ENGINE,
    SglangConfig,
    SglangEngine,
    SglangProfile,
    mamba_state_bytes,
    max_running_requests,
    profile,
)
from kvplan.engines.sglang.memory import (
    SGLANG_INIT_BYTES,
    SglangMemory,
    loaded_weight_bytes,
    prefill_graph_sizes,
    sglang_default_mem_fraction,
    sglang_memory,
)

__all__ = ["ENGINE", "SGLANG_INIT_BYTES", "SglangConfig", "SglangEngine", "SglangMemory",
           "SglangProfile", "loaded_weight_bytes", "mamba_state_bytes",
           "max_running_requests", "prefill_graph_sizes", "profile",
           "sglang_default_mem_fraction", "sglang_memory"]
