"""SGLang: `max_total_num_tokens` from the mem_fraction_static rule.

- `memory`  the budget: free memory before and after the weight load, mem_fraction_static
- `pools`   the token pools (full, SWA, Mamba) the budget holds, and as `validate` allocates them
- `text`    the `sglang.launch_server` flags and the start-up log lines, as data
- `engine`  the plugin: a Deployment -> Capacity
"""

from kvplan.engines.sglang.engine import ENGINE, SglangEngine
from kvplan.engines.sglang.memory import (
    SGLANG_INIT_BYTES,
    SglangMemory,
    loaded_weight_bytes,
    prefill_graph_sizes,
    sglang_default_mem_fraction,
    sglang_memory,
)
from kvplan.engines.sglang.pools import (
    SglangConfig,
    SglangProfile,
    mamba_state_bytes,
    max_running_requests,
    profile,
)

__all__ = ["ENGINE", "SGLANG_INIT_BYTES", "SglangConfig", "SglangEngine", "SglangMemory",
           "SglangProfile", "loaded_weight_bytes", "mamba_state_bytes",
           "max_running_requests", "prefill_graph_sizes", "profile",
           "sglang_default_mem_fraction", "sglang_memory"]
