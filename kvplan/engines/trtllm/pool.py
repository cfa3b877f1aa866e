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

import math

from kvplan.core.dtypes import BF16, FP8_E4M3, FP16, FP32, INT8, NVFP4, KVFormat, cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.layers import ATTENTION_KINDS, MLA, NoCache, RecurrentState
from kvplan.core.record import record
from kvplan.core.sizing import pp_stages
from kvplan.core.spec import ModelSpec
from kvplan.core.units import GIB
from kvplan.engines import named_kv_format

SCHEMA = "kvplan.engine.trtllm/1"
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


def kv_cache_dtype_from_checkpoint(spec: ModelSpec, kv_cache_dtype: str) -> str:
    """KvCacheConfig.dtype as the PyTorch flow resolves it: "auto" keeps the checkpoint's own
    KV quantization (_torch/pyexecutor/model_loader.py validate_and_set_kv_cache_quant,
    model_engine.py in earlier releases: "Using checkpoint KV quantization"), read from
    hf_quant_config.json's `kv_cache_quant_algo` into QuantConfig (_torch/model_config.py
    ModelConfig.load_modelopt_quant_config): FP8 gets an FP8 pool, NVFP4 an NVFP4 pool
    (e2m1 values and one fp8 scale per 16: kv_format's "nvfp4"). So "auto" is "fp8" or
    "nvfp4" for a ModelOpt checkpoint that asks for that KV format
    (spec.quantization.kv_cache; a kv_cache_scheme mapping by its float bits), in every
    release kvplan models; a request from another config kind (Fp8Config,
    compressed-tensors) is not read here, and any other dtype is returned as given."""
    req = spec.quantization.kv_cache
    if (kv_cache_dtype.strip().lower() == "auto" and req is not None
            and req.config == "modelopt" and req.format in ("FP8", "NVFP4")):
        return "fp8" if req.format == "FP8" else "nvfp4"
    return kv_cache_dtype


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
