"""Text Generation Inference (TGI, `text-generation-launcher`): the KV blocks its warm-up
leaves room for.

- `config`  the release rules (TGI_RELEASES), attention backends and block sizes, KV dtypes
- `blocks`  the budget and the blocks it holds ("Setting max batch total tokens to N")
- `text`    the launcher's flags and the start-up log lines, as data
- `engine`  the plugin: a Deployment -> Capacity
"""

from typing import TYPE_CHECKING

from kvplan.engines import lazy_exports

if TYPE_CHECKING:
    from kvplan.engines.tgi.blocks import TgiProfile, bytes_per_block, profile
    from kvplan.engines.tgi.config import (
        BLOCK_SIZES,
        DEFAULT_PREFILL_TOKENS,
        FLASHINFER_HEAD_DIMS,
        KV_DTYPES,
        MEMORY_FRACTION,
        RESOLVED_ATTENTION,
        SCHEMA,
        TGI_RELEASES,
        WIGGLE_ROOM,
        attention_backend,
        kv_format,
        release_rule,
    )
    from kvplan.engines.tgi.engine import ENGINE, TgiEngine
    from kvplan.engines.tgi.text import LOG_FORMAT, launch_flags

__all__ = ["BLOCK_SIZES", "DEFAULT_PREFILL_TOKENS", "ENGINE", "FLASHINFER_HEAD_DIMS",
           "KV_DTYPES", "LOG_FORMAT", "MEMORY_FRACTION", "RESOLVED_ATTENTION", "SCHEMA",
           "TGI_RELEASES", "TgiEngine", "TgiProfile", "WIGGLE_ROOM", "attention_backend",
           "bytes_per_block", "kv_format", "launch_flags", "profile", "release_rule"]

# each submodule is imported when one of its names is first asked for (lazy_exports)
__getattr__ = lazy_exports(__name__, {
    "blocks": ("TgiProfile", "bytes_per_block", "profile"),
    "config": (
        "BLOCK_SIZES", "DEFAULT_PREFILL_TOKENS", "FLASHINFER_HEAD_DIMS", "KV_DTYPES",
        "MEMORY_FRACTION", "RESOLVED_ATTENTION", "SCHEMA", "TGI_RELEASES", "WIGGLE_ROOM",
        "attention_backend", "kv_format", "release_rule"),
    "engine": ("ENGINE", "TgiEngine"),
    "text": ("LOG_FORMAT", "launch_flags"),
})
