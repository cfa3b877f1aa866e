"""TensorRT-LLM: tokens and blocks of the paged KV pool (TensorRT-LLM 1.1-1.3, PyTorch flow).

    available_kv = (total - profiled peak + temporary KV) x free_gpu_memory_fraction (0.9)
    max_tokens   = int(available_kv // bytes_per_token)
    blocks       = ceil(max_tokens / tokens_per_block)   (tokens_per_block 32)

`_torch/pyexecutor/_util.py::KvCacheCreator`, `resource_manager.py::KVCacheManager`,
`cpp/.../kvCacheManager.cpp`. The pool gives each layer `ceil(kv_heads / tp)` heads
(`(h + tp - 1) // tp`), so a TP that does not divide the heads rounds up; the capacity
*estimate* `get_cache_size_per_token` floors `kv_heads x head_dim // tp` without a clamp
(kept as `estimate_bytes_per_token`). MLA: `kv_lora_rank + qk_rope_head_dim`, one copy.
The log prints "Allocated X GiB for max tokens in paged KV cache (N)" with N = blocks x 32.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

from kvplan.core.dtypes import BF16, FP8_E4M3, FP16, FP32, INT8, NVFP4, KVFormat, cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.launch import EngineLog, LogLine
from kvplan.core.layers import ATTENTION_KINDS, MLA, NoCache, RecurrentState
from kvplan.core.record import record
from kvplan.core.sizing import pp_stages
from kvplan.core.spec import ModelSpec
from kvplan.core.weights import VocabSplit
from kvplan.engines import named_kv_format
from kvplan.engines.base import (
    BaseEngine,
    Capacity,
    Constraint,
    Deployment,
    Need,
    Pool,
    weights_per_gpu,
)
from kvplan.engines.shared.activations import forward_bytes, profile_shapes
from kvplan.engines.shared.budget import check_positive
from kvplan.engines.shared.device import NON_TORCH_BYTES
from kvplan.engines.shared.weights import ModelDims, stage_weights

if TYPE_CHECKING:
    from kvplan.core.launch import EngineLaunch

SCHEMA = "kvplan.engine.trtllm/1"
GIB = 2**30
TOKENS_PER_BLOCK = 32  # KvCacheConfig.tokens_per_block (PyTorch backend)
FREE_GPU_MEMORY_FRACTION = 0.9  # KvCacheConfig.free_gpu_memory_fraction default
MAX_BATCH_SIZE = 2048  # tensorrt_llm/llmapi/llm_args.py BaseLlmArgs.max_batch_size default

KV_DTYPES = ("auto", "bf16", "fp16", "fp32", "fp8", "int8", "nvfp4")
SMALLER_KV_DTYPES = ("fp8", "nvfp4")
_FORMATS = {"bf16": BF16, "bfloat16": BF16, "fp16": FP16, "float16": FP16, "fp32": FP32,
            "fp8": FP8_E4M3, "int8": INT8, "nvfp4": NVFP4}


def kv_format(spec: ModelSpec, kv_cache_dtype: str = "auto") -> KVFormat:
    """FP8, HALF, BF16, FLOAT, NVFP4 (0.5625 B per element: e2m1 + one fp8 scale per 16)."""
    return named_kv_format(spec, kv_cache_dtype, _FORMATS, "TensorRT-LLM", KV_DTYPES,
                           flag="KV dtype")


@record
class TrtllmConfig:
    tp: int = 1
    pp: int = 1
    kv_cache_dtype: str = "auto"
    tokens_per_block: int = TOKENS_PER_BLOCK
    free_gpu_memory_fraction: float = FREE_GPU_MEMORY_FRACTION
    max_tokens: int | None = None  # KvCacheConfig.max_tokens (the smaller memory wins)
    attention_dp: bool = False  # attention data parallel: every rank holds all KV heads


@record
class TrtllmProfile:
    schema: str
    model: str
    kv_cache_dtype: str
    tp: int
    pp: int
    free_bytes: int  # "available" in "Memory usage when calculating max tokens"
    free_gpu_memory_fraction: float
    kv_cache_bytes: int  # the fraction of it given to the pool
    bytes_per_token: int  # the pool: ceil(kv_heads / tp) heads per layer
    estimate_bytes_per_token: int  # get_cache_size_per_token: kv_heads*head_dim // tp, floored
    max_tokens: int  # int(kv_cache_bytes // bytes_per_token), capped by max_tokens
    tokens_per_block: int
    num_blocks: int  # "Number of blocks in KV cache primary pool"
    kv_cache_tokens: int  # "max tokens in paged KV cache (N)" = blocks x tokens_per_block
    allocated_bytes: int  # "Allocated X GiB for max tokens in paged KV cache"

    def log_lines(self) -> list[str]:
        return [
            f"Number of blocks in KV cache primary pool: {self.num_blocks}",
            f"Number of tokens per block: {self.tokens_per_block}.",
            f"[MemUsageChange] Allocated {self.allocated_bytes / GIB:.2f} GiB for max tokens "
            f"in paged KV cache ({self.kv_cache_tokens})",
        ]


def bytes_per_token(spec: ModelSpec, fmt: KVFormat, tp: int = 1, pp: int = 1,
                    attention_dp: bool = False, pool: bool = True) -> int:
    """Bytes per token on the fullest pipeline stage. `pool`: ceil(heads/tp) per layer
    (the real pool); otherwise the floored estimate of get_cache_size_per_token."""
    rank_tp = 1 if attention_dp else tp
    best = 0
    for a, b in pp_stages(spec.num_layers, pp):
        elements = 0
        for layer in spec.layers[a:b]:
            if isinstance(layer, MLA):
                elements += layer.kv_lora_rank + layer.qk_rope_head_dim  # kv_factor 1
            elif isinstance(layer, ATTENTION_KINDS):
                if pool:
                    heads = cdiv(layer.num_kv_heads, rank_tp)
                    elements += heads * (layer.head_dim + layer.value_dim)
                else:
                    elements += 2 * (layer.num_kv_heads * layer.head_dim // rank_tp)
            elif isinstance(layer, (RecurrentState, NoCache)):
                continue
        best = max(best, elements)
    # get_size_in_bytes: whole bytes for 8/16/32-bit; NVFP4 adds one fp8 scale per 16 values
    return cdiv(best * fmt.bits, 8) + (cdiv(best, fmt.group_size) * fmt.scale_bytes
                                      if fmt.group_size else 0)


def profile(spec: ModelSpec, config: TrtllmConfig, free_bytes: int,
            kv_cache_bytes: int | None = None) -> TrtllmProfile:
    """Capacity from the free memory measured after the profiling run (per GPU), or from a
    KV pool size given directly (`kv_cache_bytes`, the fraction already applied)."""
    if not 0 < config.free_gpu_memory_fraction < 1:
        raise BadInputError("free_gpu_memory_fraction must be in (0, 1), got "
                            f"{config.free_gpu_memory_fraction}")
    if any(isinstance(x, RecurrentState) for x in spec.layers):
        raise BadInputError(f"kvplan's TensorRT-LLM profile does not model {spec.name}'s "
                            "recurrent-state layers", "use --engine vllm or sglang")
    fmt = kv_format(spec, config.kv_cache_dtype)
    bpt = bytes_per_token(spec, fmt, config.tp, config.pp, config.attention_dp)
    estimate = bytes_per_token(spec, fmt, config.tp, config.pp, config.attention_dp, pool=False)
    # a float, as in _cal_max_memory
    kv_bytes = free_bytes * config.free_gpu_memory_fraction if kv_cache_bytes is None \
        else kv_cache_bytes
    max_tokens = int(kv_bytes // bpt) if bpt else 0
    if config.max_tokens is not None:
        max_tokens = min(max_tokens, config.max_tokens)
    blocks = math.ceil(max_tokens / config.tokens_per_block)
    return TrtllmProfile(
        schema=SCHEMA, model=spec.name, kv_cache_dtype=fmt.name, tp=config.tp, pp=config.pp,
        free_bytes=free_bytes, free_gpu_memory_fraction=config.free_gpu_memory_fraction,
        kv_cache_bytes=int(kv_bytes), bytes_per_token=bpt, estimate_bytes_per_token=estimate,
        max_tokens=max_tokens, tokens_per_block=config.tokens_per_block, num_blocks=blocks,
        kv_cache_tokens=blocks * config.tokens_per_block,
        allocated_bytes=blocks * config.tokens_per_block * bpt,
    )


# --- the engine plugin ---------------------------------------------------------------------

# --- the launch command (`trtllm-serve`), read by kvplan.sources.launch ------------------------
# Flags from tensorrt_llm/commands/serve.py (click options, underscore spelling).
@functools.cache
def launch_flags() -> EngineLaunch:
    from kvplan.core.launch import EngineLaunch

    setting = {
        "--tp_size": ("tp", "int"), "--pp_size": ("pp", "int"), "--ep_size": ("ep", "int"),
        "--max_batch_size": ("max_num_seqs", "int"),
        "--max_num_tokens": ("max_num_batched_tokens", "int"),
        "--max_seq_len": ("max_model_len", "tokens"),
        "--kv_cache_free_gpu_memory_fraction": ("memory_fraction", "float"),
        "--backend": ("backend", "str"), "--tokenizer": ("", "ignore"),
        "--extra_llm_api_options": ("extra_options", "str"),
    }
    ignored = ("--host", "--port", "--log_level", "--num_postprocess_workers",
               "--server_role", "--metadata_server_config_file", "--reasoning_parser")
    flags = {**setting, **{f: ("", "ignore") for f in ignored},
             "--trust_remote_code": ("", "ignore-flag")}
    return EngineLaunch("trtllm", (("trtllm-serve", "serve"), ("trtllm-serve",)),
                        images=("nvidia/tensorrt-llm/release", "tensorrt_llm/release"),
                        flags=flags, positional="model")


# --- its start-up log (read by kvplan.sources.startlog; units as the engine prints them) ---

LOG_FORMAT = EngineLog(
    "trtllm", "TensorRT-LLM",
    markers=(r"\[TensorRT-LLM\]|paged kv cache|paged KV cache|KV cache primary pool|"
             r"MemUsageChange|memory usage profiling"),
    figures=(
        LogLine("gpu_total_bytes", "max tokens in paged kv cache: total:",
                r"max tokens in paged kv cache: total: ([\d.]+) GiB", "gib", "gpu", "GiB"),
        LogLine("free_bytes", "max tokens in paged kv cache: total:",
                r"max tokens in paged kv cache: total: [\d.]+ GiB, available: ([\d.]+) GiB",
                "gib", "kv", "GiB"),
        LogLine("num_blocks", "Number of blocks in KV cache primary pool:",
                r"Number of blocks in KV cache primary pool: (\d+)", "int", "kv", "blocks"),
        LogLine("tokens_per_block", "Number of tokens per block:",
                r"Number of tokens per block: (\d+)", "int", "kv", "tokens"),
        LogLine("kv_cache_bytes", "for max tokens in paged KV cache",
                r"Allocated ([\d.]+) GiB for max tokens in paged KV cache", "gib", "kv", "GiB"),
        # the C++ runtime of 0.5-0.8 printed the tokens only (kvCacheManager: "Using %d tokens
        # in paged KV cache"; TensorRT-LLM#224, #1400)
        LogLine("kv_cache_tokens", "tokens in paged KV cache.",
                r"Using (\d+) tokens in paged KV cache\.", "int", "kv", "tokens",
                releases=("0.5.0", "0.8.0")),
        LogLine("kv_cache_tokens", "for max tokens in paged KV cache (",
                r"for max tokens in paged KV cache \((\d+)\)", "int", "kv", "tokens"),
        # the PyTorch backend's profile (_util.py::KvCacheCreator.configure_kv_cache_capacity
        # and _cal_max_memory): the pool's bytes after the fraction, and the peak's terms
        LogLine("gpu_total_bytes", "device total memory", r"device total memory ([\d.]+) GiB",
                "gib", "gpu", "GiB"),
        LogLine("available_kv_cache_bytes", "available KV cache memory when calculating",
                r"available KV cache memory when calculating max tokens: ([\d.]+) GiB", "gib",
                "kv", "GiB"),
        LogLine("weights_bytes", "Memory used after loading model weights (inside torch)",
                r"Memory used after loading model weights \(inside torch\)[^:]*: ([\d.]+) GiB",
                "gib", "weights", "GiB"),
        LogLine("activation_bytes", "Memory dynamically allocated during inference",
                r"Memory dynamically allocated during inference \(inside torch\)[^:]*: "
                r"([\d.]+) GiB", "gib", "terms", "GiB"),
        LogLine("memory_fraction", "fraction is set", r"fraction is set ([\d.]+)", "num",
                "settings"),
        LogLine("block_size", "Number of tokens per block:", r"Number of tokens per block: "
                r"(\d+)", "int", "settings"),
    ),
)


class TrtllmEngine(BaseEngine):
    name = "trtllm"
    display_name = "TensorRT-LLM"
    kv_dtypes = KV_DTYPES
    smaller_kv_dtypes = SMALLER_KV_DTYPES

    def capacity(self, dep: Deployment) -> Capacity:
        from kvplan.engines.shared.budget import SCHEMA as BUDGET_SCHEMA
        from kvplan.engines.shared.budget import Budget

        fraction = dep.memory_fraction if dep.memory_fraction is not None else \
            FREE_GPU_MEMORY_FRACTION
        config = TrtllmConfig(tp=dep.tp, pp=dep.pp, kv_cache_dtype=dep.kv_dtype,
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
        pool = Pool(self.name, (Constraint("KV blocks", "block", prof.num_blocks,
                                           (Need("full", bs, shareable=True),)),),
                    dep.context_limit(), tokens_per_unit=bs,
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

    def kv_budget_bytes(self, cap: Capacity) -> int:
        return int(cap.engine_profile.kv_cache_bytes)

    def token_capacity(self, cap: Capacity) -> int:
        return int(cap.engine_profile.kv_cache_tokens)

    def launch(self) -> EngineLaunch:
        return launch_flags()

    def defaults(self, spec: ModelSpec, gpu_name: str | None = None,
                 gpu_memory_bytes: int | None = None,
                 version: str | None = None) -> dict[str, Any]:
        return {"tokens_per_block": TOKENS_PER_BLOCK,
                "free_gpu_memory_fraction": FREE_GPU_MEMORY_FRACTION}


    def log_format(self) -> EngineLog:
        return LOG_FORMAT


# --- its memory budget --------------------------------------------------------------------
# The PyTorch backend (the default of `trtllm-serve` and the LLM API from 1.0) sizes the pool in
# `tensorrt_llm/_torch/pyexecutor/_util.py::KvCacheCreator.configure_kv_cache_capacity`
# (1.1-1.3, same in 2026 main): after loading the weights, autotuning and capturing the CUDA
# graphs it resets torch's peak, runs dummy context requests holding `max_num_tokens` tokens
# together (`_create_dummy_context_requests`: requests of min(max_num_tokens, max_seq_len - 1)
# tokens until the total is reached, one output token each), then
#     peak = torch allocated peak (weights + graphs + the forward's activations)
#            + max(device used - torch allocated, 0)  (CUDA context, cuBLAS, NCCL, the
#              temporary KV pool of the dummy requests)
#     available_kv = (total - peak + temporary KV) x free_gpu_memory_fraction   (_cal_max_memory)
# so the temporary pool cancels and kvplan's free memory is total - weights - activations -
# non-torch. The TRT-engine flow (C++ runtime, `trtllm-build` engines) measures free device
# memory after the engine, its execution context (activations sized by the builder for the
# engine's max_num_tokens) and the runtime/decoder buffers (sized by max_batch_size,
# max_seq_len and the vocabulary) are allocated (`kvCacheManager.cpp::calculateFreeMemBytes`);
# those are not modelled (docs/engine-accuracy.md section 7).
# llmapi/llm_args.py BaseLlmArgs.max_num_tokens default (the 1.1.0rc3 gpt-oss log prints
# "max_num_tokens=8192" with it unset)
TRTLLM_MAX_NUM_TOKENS = 8192
# TRT-LLM's PyTorch flow splits the embedding and LM head by vocabulary rows with no padding
# to 64: ceil(vocab / tp) rows a rank, the last one padded (tensorrt_llm/_torch/modules/
# embedding.py LMHead / Embedding with TensorParallelMode.COLUMN), so any TP starts
TRTLLM_VOCAB = VocabSplit(pad_to=1, exact=False)


def trtllm_allreduce_workspace_bytes(tp: int) -> int:
    """The custom all-reduce workspace each GPU allocates outside torch when TP > 1
    (`_torch/distributed/ops.py::AllReduce.__init__` -> `get_allreduce_workspace`, once per
    mapping): `tensorrt_llm/plugin/plugin.py::CustomAllReduceHelper.
    allocate_allreduce_fusion_workspace` holds an IPC buffer of `size x tp`, barriers of
    `256 x tp` and three Lamport buffers of `size x tp`, with `size` from
    `max_workspace_size_auto`: 16,000,000 B up to TP 2, 8,000,000 B beyond (1.0-1.2; 2026 main
    raises it to 64 MiB, not modelled: the release it lands in is not known)."""
    if tp <= 1:
        return 0
    size = 16_000_000 if tp <= 2 else 8_000_000
    return 4 * size * tp + 256 * tp


@record
class TrtllmMemory:
    """The terms of TensorRT-LLM's profiled peak on the fullest GPU (PyTorch backend)."""

    total_bytes: int  # "device total memory"
    weights_bytes: int  # "Memory used after loading model weights (inside torch)"
    activation_bytes: int  # "Memory dynamically allocated during inference (inside torch)"
    non_torch_bytes: int  # "Memory used outside torch" less the temporary KV pool
    max_num_tokens: int  # the dummy requests' tokens together

    @property
    def peak_bytes(self) -> int:
        """The logged "Peak memory during memory usage profiling (torch + non-torch)" less
        the temporary KV pool (which `_cal_max_memory` adds back)."""
        return self.weights_bytes + self.activation_bytes + self.non_torch_bytes

    @property
    def free_bytes(self) -> int:
        """`total - peak + temporary KV`: the memory the fraction is applied to."""
        return self.total_bytes - self.peak_bytes


def trtllm_memory(spec: ModelSpec, gpu_memory_bytes: int, *, tp: int = 1, pp: int = 1,
                  weights: str = "auto", weights_bytes: int | None = None,
                  activation_bytes: int | None = None, non_torch_bytes: int | None = None,
                  max_num_tokens: int = TRTLLM_MAX_NUM_TOKENS,
                  dims: ModelDims | None = None) -> TrtllmMemory:
    """The profiled peak's terms: the weights on the fullest GPU, one forward pass over the
    dummy requests' `max_num_tokens` tokens with the model's own shapes (hidden, MLP or the
    active experts; logits only for each request's last token, so no vocabulary-sized term)
    and the CUDA context with its kernels (+ the all-reduce workspace with TP)."""
    per_gpu = max(stage_weights(spec, weights, weights_bytes, tp, pp, dims,
                                vocab=TRTLLM_VOCAB)[0])
    acts = forward_bytes(profile_shapes(spec, dims), max_num_tokens, tp) \
        if activation_bytes is None else activation_bytes
    non_torch = NON_TORCH_BYTES + trtllm_allreduce_workspace_bytes(tp) \
        if non_torch_bytes is None else non_torch_bytes
    mem = TrtllmMemory(gpu_memory_bytes, per_gpu, acts, non_torch, max_num_tokens)
    check_positive("TensorRT-LLM", [mem.free_bytes], gpu_memory_bytes, [per_gpu],
                    "use more GPUs (--tp/--pp) or a smaller weight format")
    return mem


def trtllm_free_bytes(spec: ModelSpec, gpu_memory_bytes: int, *, tp: int = 1, pp: int = 1,
                      weights: str = "auto", weights_bytes: int | None = None,
                      activation_bytes: int | None = None, non_torch_bytes: int | None = None,
                      max_num_tokens: int = TRTLLM_MAX_NUM_TOKENS,
                      dims: ModelDims | None = None) -> int:
    """`total - profiled peak + temporary KV` on the fullest GPU: what TRT-LLM multiplies by
    free_gpu_memory_fraction (`trtllm_memory`)."""
    return trtllm_memory(spec, gpu_memory_bytes, tp=tp, pp=pp, weights=weights,
                         weights_bytes=weights_bytes, activation_bytes=activation_bytes,
                         non_torch_bytes=non_torch_bytes, max_num_tokens=max_num_tokens,
                         dims=dims).free_bytes

ENGINE = TrtllmEngine()
