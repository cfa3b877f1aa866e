"""The TGI plugin: a Deployment -> Capacity from the blocks its warm-up leaves (`blocks`).
"""

from __future__ import annotations

from typing import Any

from kvplan.core.dtypes import KVFormat
from kvplan.core.errors import BadInputError
from kvplan.core.spec import ModelSpec
from kvplan.engines.base import BaseEngine, Capacity, Deployment, Pool, weights_per_gpu
from kvplan.engines.tgi.blocks import TgiProfile, given_batch_total, profile
from kvplan.engines.tgi.config import (
    DEFAULT_PREFILL_TOKENS,
    KV_DTYPES,
    MEMORY_FRACTION,
    WIGGLE_ROOM,
    kv_format,
)
from kvplan.engines.tgi.text import LOG_FORMAT, launch_flags


class TgiEngine(BaseEngine):
    name = "tgi"
    display_name = "TGI"
    start_log = LOG_FORMAT
    launch_table = launch_flags
    budget_figure = "kv_budget_bytes"
    tokens_figure = "max_batch_total_tokens"
    kv_dtypes = KV_DTYPES
    smaller_kv_dtypes = ("fp8_e4m3fn",)

    def capacity(self, dep: Deployment) -> Capacity:
        if dep.pp != 1:
            raise BadInputError("TGI shards tensors only (--num-shard); it has no pipeline "
                                "parallelism", "use --tp")
        from kvplan.engines import parse_version

        capability = dep.compute_capability
        given = given_batch_total(dep, parse_version(dep.engine_version))
        prof = profile(dep.spec, dep, capability[0] if capability else None)
        pool = Pool.of_blocks(self.name, prof.num_blocks, prof.block_size, dep.context_limit())
        fmt = kv_format(dep.spec, dep.kv_dtype)
        return Capacity(dep, self, None, prof, pool, fmt.name, weights_per_gpu(dep),
                        prof.bytes_per_block // prof.block_size,
                        (f"attention {prof.attention}, BLOCK_SIZE {prof.block_size}",
                         f"cuda_memory_fraction {prof.memory_fraction} x TGI_WIGGLE_ROOM "
                         f"{prof.wiggle_room}", *([given] if given else [])))

    def numbers(self, cap: Capacity) -> dict[str, Any]:
        p: TgiProfile = cap.engine_profile
        return {"kv_budget_bytes": p.kv_budget_bytes, "num_blocks": p.num_blocks,
                "block_size": p.block_size, "bytes_per_block": p.bytes_per_block,
                "max_batch_total_tokens": p.max_batch_total_tokens,
                "max_batch_prefill_tokens": p.max_batch_prefill_tokens}

    def sizing_format(self, cap: Capacity) -> KVFormat:
        return kv_format(cap.deployment.spec, cap.deployment.kv_dtype)

    def defaults(self, spec: ModelSpec, gpu_name: str | None = None,
                 gpu_memory_bytes: int | None = None,
                 version: str | None = None) -> dict[str, Any]:
        return {"cuda_memory_fraction": MEMORY_FRACTION, "wiggle_room": WIGGLE_ROOM,
                "max_batch_prefill_tokens": DEFAULT_PREFILL_TOKENS}

ENGINE = TgiEngine()
