"""vLLM V1: how the engine lays out its KV cache, sizes its budget and what it logs at start-up.

Modules in the order they build on each other (each imports only those before it): `config`
(VllmConfig; RULES, one row per release of the behaviour switches, newest max(RULES)),
`formats` (--kv-cache-dtype names), `backends` (attention kernels and block sizes by compute
capability), `pages` (one class per KVCacheSpec kind: page bytes, per-request need, held
blocks; vllm/v1/kv_cache_interface.py), `grouping` (get_kv_cache_groups), `deepseek_v4`
(0.33 models/deepseek_v4 caches), `startup` (every stage's layout, blocks, token line,
concurrency, start-up check), `memory` (the profile run's reserves), `budget` ("Available KV
cache memory"), `text` (`vllm serve` flags and log lines, as data), `served` (the releases
whose registry lists each architecture), `engine` (the plugin: a Deployment -> Capacity).
The public names below are what the planner, `validate` and the tests ask for.
"""

from typing import TYPE_CHECKING

from kvplan.engines import lazy_exports

if TYPE_CHECKING:
    from kvplan.engines.vllm.backends import (
        default_block_size,
        gdn_prefill_backend,
        kda_prefill_backend,
        mxfp4_expert_load,
    )
    from kvplan.engines.vllm.budget import vllm_budget
    from kvplan.engines.vllm.config import (
        LATEST,
        VllmConfig,
        default_gpu_memory_utilization,
        default_max_num_batched_tokens,
        default_max_num_seqs,
    )
    from kvplan.engines.vllm.engine import ENGINE, VllmEngine, batch_for, config_for
    from kvplan.engines.vllm.formats import kv_format
    from kvplan.engines.vllm.grouping import KVCacheGroup, StageLayout, blocks_for_request
    from kvplan.engines.vllm.pages import (
        ChunkedPage,
        CrossPage,
        FullPage,
        MambaPage,
        MlaPage,
        PageSpec,
        SlidingPage,
        layer_page_specs,
    )
    from kvplan.engines.vllm.startup import VllmProfile, layout, profile

__all__ = ["ENGINE", "LATEST", "ChunkedPage", "CrossPage", "FullPage", "KVCacheGroup",
           "MambaPage", "MlaPage", "PageSpec", "SlidingPage", "StageLayout", "VllmConfig",
           "VllmEngine", "VllmProfile", "batch_for", "blocks_for_request", "config_for",
           "default_block_size", "default_gpu_memory_utilization",
           "default_max_num_batched_tokens", "default_max_num_seqs", "gdn_prefill_backend",
           "kda_prefill_backend", "kv_format",
           "layer_page_specs", "layout", "mxfp4_expert_load", "profile", "vllm_budget"]

# each submodule is imported when one of its names is first asked for (lazy_exports)
__getattr__ = lazy_exports(__name__, {
    "backends": (
        "default_block_size", "gdn_prefill_backend", "kda_prefill_backend", "mxfp4_expert_load"),
    "budget": ("vllm_budget",),
    "config": (
        "LATEST", "VllmConfig", "default_gpu_memory_utilization", "default_max_num_batched_tokens",
        "default_max_num_seqs"),
    "engine": ("ENGINE", "VllmEngine", "batch_for", "config_for"),
    "formats": ("kv_format",),
    "grouping": ("KVCacheGroup", "StageLayout", "blocks_for_request"),
    "pages": (
        "ChunkedPage", "CrossPage", "FullPage", "MambaPage", "MlaPage", "PageSpec", "SlidingPage",
        "layer_page_specs"),
    "startup": ("VllmProfile", "layout", "profile"),
})
