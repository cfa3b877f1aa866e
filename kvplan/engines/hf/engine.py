"""The transformers plugin: a Deployment -> Capacity (a byte budget the cache classes of
`caches` grow into; `memory` for the budget, `layout` for `validate`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvplan.core.dtypes import KVFormat
from kvplan.core.layers import ATTENTION_KINDS, CrossAttention, NoCache, RecurrentState
from kvplan.core.spec import ModelSpec
from kvplan.engines.base import (
    BaseEngine,
    Capacity,
    Constraint,
    Deployment,
    Need,
    Pool,
    merge_needs,
    weights_per_gpu,
)
from kvplan.engines.cache import CacheLayout
from kvplan.engines.hf.caches import (
    SMALLER_KV_DTYPES,
    HfProfile,
    held_tokens,
    kv_format,
    profile,
    window_cap,
)
from kvplan.engines.hf.layout import cache_layout
from kvplan.engines.hf.memory import hf_free_bytes

# --- the engine plugin ---------------------------------------------------------------------

class HfEngine(BaseEngine):
    name = "hf"
    display_name = "transformers"
    kv_dtypes = ("auto", "bf16", "fp16", "fp32", "fp8", "int8", "int4", "int2")
    smaller_kv_dtypes = SMALLER_KV_DTYPES
    cache_variants = ("static", "dynamic")  # `validate --layout hf-static` / `hf-dynamic`

    def capacity(self, dep: Deployment) -> Capacity:
        fmt = kv_format(dep.spec, dep.kv_dtype)
        budget = dep.kv_memory_bytes
        if budget is None:
            assert dep.gpu_memory_bytes is not None
            budget = hf_free_bytes(dep.spec, dep.gpu_memory_bytes, weights=dep.weights_dtype,
                                   weights_bytes=dep.weights_bytes,
                                   activation_bytes=dep.activation_bytes, dims=dep.dims)
        max_len = dep.context_limit()
        needs: list[Need] = []
        growing = 0  # bytes per token of the layers that grow with the text
        for layer in dep.spec.layers:
            if isinstance(layer, NoCache):
                continue
            if isinstance(layer, RecurrentState):
                state = profile(replace(dep.spec, layers=(layer,)), seq_len=1, tp=dep.tp)
                needs.append(Need("fixed", fixed=1, weight=state.state_bytes))
                continue
            per_token = layer.bytes_for_tokens(1, fmt, dep.tp)
            if isinstance(layer, CrossAttention):  # the encoder's tokens, whatever the length
                needs.append(Need("fixed", fixed=layer.encoder_tokens, weight=per_token))
                continue
            growing += per_token
            if dep.hf_cache == "static":  # max_cache_len = max_len slots, capped by the window
                slots = held_tokens(layer, "static", max_len) \
                    if isinstance(layer, ATTENTION_KINDS) else max_len  # MLA: no window
                needs.append(Need("fixed", fixed=slots, weight=per_token))
                continue
            cap = window_cap(layer, "dynamic") if isinstance(layer, ATTENTION_KINDS) else None
            if cap is None:
                needs.append(Need("full", 1, weight=per_token))
            else:
                needs.append(Need("window", 1, cap=cap, weight=per_token))
        prof = profile(dep.spec, cache=dep.hf_cache, seq_len=max_len, kv_dtype=dep.kv_dtype,
                       tp=dep.tp)
        pool = Pool(self.name, (Constraint("bytes", "byte", budget, merge_needs(needs)),),
                    max_len)
        return Capacity(dep, self, None, prof, pool, fmt.name, weights_per_gpu(dep), growing,
                        (f"transformers {dep.hf_cache} cache; nothing reserved up front",))

    def numbers(self, cap: Capacity) -> dict[str, Any]:
        p: HfProfile = cap.engine_profile
        return {"cache": p.cache, "cache_bytes": p.cache_bytes, "seq_len": p.seq_len,
                "budget_bytes": cap.pool.constraints[0].capacity}

    def token_capacity(self, cap: Capacity) -> int:
        return cap.pool.constraints[0].capacity // max(1, cap.kv_bytes_per_token)

    def defaults(self, spec: ModelSpec, gpu_name: str | None = None,
                 gpu_memory_bytes: int | None = None,
                 version: str | None = None) -> dict[str, Any]:
        return {"cache": "dynamic", "kv_dtype": kv_format(spec).name}

    def cache_layout(self, spec: ModelSpec, fmt: KVFormat, tokens: int, batch: int, *,
                     tp: int = 1, block_size: int | None = None, max_len: int | None = None,
                     variant: str = "dynamic") -> CacheLayout:
        return cache_layout(spec, fmt, tokens, batch, tp=tp, cache=variant or "dynamic",
                            max_len=max_len)

ENGINE = HfEngine()
