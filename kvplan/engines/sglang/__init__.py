"""SGLang: `max_total_num_tokens` from the mem_fraction_static rule.

- `memory`  the budget: free memory before and after the weight load, mem_fraction_static
- `pools`   the token pools (full, SWA, Mamba) the budget holds, and as `validate` allocates them
- `text`    the `sglang.launch_server` flags and the start-up log lines, as data
- `engine`  the plugin: a Deployment -> Capacity
"""

from typing import TYPE_CHECKING

from kvplan.engines import lazy_exports

if TYPE_CHECKING:
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

# each submodule is imported when one of its names is first asked for (lazy_exports)
__getattr__ = lazy_exports(__name__, {
    "engine": ("ENGINE", "SglangEngine"),
    "memory": (
        "SGLANG_INIT_BYTES", "SglangMemory", "loaded_weight_bytes", "prefill_graph_sizes",
        "sglang_default_mem_fraction", "sglang_memory"),
    "pools": (
        "SglangConfig", "SglangProfile", "mamba_state_bytes", "max_running_requests", "profile"),
})
