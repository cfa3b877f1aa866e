"""The TensorRT-LLM plugin: a Deployment -> Capacity from the pool (`pool`) and the
profiled budget (`memory`).
"""

from __future__ import annotations

from typing import Any

from kvplan.core.spec import ModelSpec
from kvplan.engines.base import BaseEngine, Capacity, Deployment, Pool, weights_per_gpu
from kvplan.engines.trtllm.memory import TRTLLM_MAX_NUM_TOKENS, TRTLLM_VOCAB, trtllm_memory
from kvplan.engines.trtllm.pool import (
    FREE_GPU_MEMORY_FRACTION,
    KV_DTYPES,
    MAX_BATCH_SIZE,
    SMALLER_KV_DTYPES,
    TOKENS_PER_BLOCK,
    TrtllmConfig,
    TrtllmProfile,
    kv_cache_dtype_from_checkpoint,
    profile,
)
from kvplan.engines.trtllm.text import LOG_FORMAT, launch_flags


class TrtllmEngine(BaseEngine):
    name = "trtllm"
    display_name = "TensorRT-LLM"
    start_log = LOG_FORMAT
    launch_table = launch_flags
    budget_figure = "kv_cache_bytes"
    tokens_figure = "kv_cache_tokens"
    kv_dtypes = KV_DTYPES
    smaller_kv_dtypes = SMALLER_KV_DTYPES

    def capacity(self, dep: Deployment) -> Capacity:
        from kvplan.engines.shared.budget import SCHEMA as BUDGET_SCHEMA
        from kvplan.engines.shared.budget import Budget

        fraction = dep.memory_fraction if dep.memory_fraction is not None else \
            FREE_GPU_MEMORY_FRACTION
        kv_dtype = kv_cache_dtype_from_checkpoint(dep.spec, dep.kv_dtype)
        config = TrtllmConfig(tp=dep.tp, pp=dep.pp, kv_cache_dtype=kv_dtype,
                              tokens_per_block=dep.block_size or TOKENS_PER_BLOCK,
                              free_gpu_memory_fraction=fraction)
        budget = None
        if dep.kv_memory_bytes is not None:
            prof = profile(dep.spec, config, 0, kv_cache_bytes=dep.kv_memory_bytes)
        else:
            assert dep.gpu_memory_bytes is not None
            tokens = dep.max_num_batched_tokens or TRTLLM_MAX_NUM_TOKENS
            mem = trtllm_memory(dep.spec, dep.gpu_memory_bytes, tp=dep.tp, pp=dep.pp,
                                weights=dep.weights_dtype, weights_bytes=dep.weights_bytes,
                                activation_bytes=dep.activation_bytes,
                                non_torch_bytes=dep.non_torch_bytes, max_num_tokens=tokens,
                                dims=dep.dims)
            prof = profile(dep.spec, config, mem.free_bytes)
            # the terms as explain and find-gpus read them; the fraction applies to what is
            # left after the peak (requested = total: nothing is held back before it)
            budget = Budget(BUDGET_SCHEMA, self.name, dep.engine_version or "", "estimated",
                            mem.total_bytes, fraction, mem.total_bytes, (mem.weights_bytes,),
                            (mem.activation_bytes,), mem.non_torch_bytes, 0,
                            (prof.kv_cache_bytes,), max_num_seqs=dep.max_num_seqs,
                            max_num_batched_tokens=tokens)
        bs = config.tokens_per_block
        pool = Pool.of_blocks(self.name, prof.num_blocks, bs, dep.context_limit(),
                              # the scheduler runs at most max_batch_size requests at once
                              max_requests=dep.max_num_seqs or MAX_BATCH_SIZE,
                              max_requests_setting="max_batch_size")
        notes: tuple[str, ...] = (f"free_gpu_memory_fraction {fraction}",)
        if dep.kv_memory_bytes is None:
            notes += ("free memory as the PyTorch backend profiles it (weights + one forward "
                      "pass over max_num_tokens + the CUDA context); an engine built by "
                      "trtllm-build also holds its execution context, runtime and decoder "
                      "buffers (not modelled; GBs at a large max_batch_size): give --kv-memory "
                      "from its log",)
        req = dep.spec.quantization.kv_cache
        if req is not None and dep.kv_dtype.strip().lower() == "auto" == kv_dtype.lower():
            notes += (f"the checkpoint asks for {req.describe()}; TensorRT-LLM's KV dtype auto "
                      "does not take it (it keeps a ModelOpt FP8 or NVFP4 request only, "
                      "pool.kv_cache_dtype_from_checkpoint): give --kv-cache-dtype to choose "
                      "the KV format",)
        return Capacity(dep, self, budget, prof, pool, prof.kv_cache_dtype,
                        weights_per_gpu(dep, TRTLLM_VOCAB), prof.bytes_per_token, notes)

    def memory_rows(self, cap: Capacity) -> list[tuple[str, int]] | None:
        """The profiled peak's terms, what is left of the GPU, and the fraction of it the pool
        gets (KvCacheCreator._cal_max_memory); None when the budget was given."""
        b = cap.budget
        if b is None:
            return None
        free = b.total_memory_bytes - max(b.weights_bytes) - max(b.activation_bytes) - \
            b.non_torch_bytes
        return [("GPU memory (reported)", b.total_memory_bytes),
                ("- weights", max(b.weights_bytes)),
                ("- activation peak (max_num_tokens)", max(b.activation_bytes)),
                ("- non-torch", b.non_torch_bytes),
                ("= free after the profile", free),
                (f"x free_gpu_memory_fraction {b.utilization}", b.available)]

    def concurrency_limit(self, dep: Deployment) -> tuple[int, str] | None:
        return dep.max_num_seqs or MAX_BATCH_SIZE, "max_batch_size"

    def numbers(self, cap: Capacity) -> dict[str, Any]:
        p: TrtllmProfile = cap.engine_profile
        return {"free_bytes": p.free_bytes, "kv_cache_bytes": p.kv_cache_bytes,
                "bytes_per_token": p.bytes_per_token, "max_tokens": p.max_tokens,
                "num_blocks": p.num_blocks, "tokens_per_block": p.tokens_per_block,
                "kv_cache_tokens": p.kv_cache_tokens, "allocated_bytes": p.allocated_bytes}

    def defaults(self, spec: ModelSpec, gpu_name: str | None = None,
                 gpu_memory_bytes: int | None = None,
                 version: str | None = None) -> dict[str, Any]:
        return {"tokens_per_block": TOKENS_PER_BLOCK,
                "free_gpu_memory_fraction": FREE_GPU_MEMORY_FRACTION}

ENGINE = TrtllmEngine()
