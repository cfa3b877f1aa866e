"""vLLM V1: how the engine lays out its KV cache and what it logs at start-up.

Everything here follows vLLM's own code as summarised in engine-kv-sizing.md §1 (0.11.0 is
the "classic" V1 code; 0.20/0.21/0.33 are where behaviour changed):

- a *page* is the bytes one layer needs for one block of `block_size` tokens
  (`vllm/v1/kv_cache_interface.py`: `AttentionSpec`, `SlidingWindowSpec`, `MLAAttentionSpec`,
  `MambaSpec`, `CrossAttentionSpec`);
- layers are bucketed and split into groups of equal size (`get_kv_cache_groups`); a block
  id spans one page in each of the `group_size` layer tensors, so
  `num_blocks = available // page // group_size` (§1.3, §1.4);
- per request a group needs `cdiv(len, bs)` blocks (full, MLA), `cdiv(min(W-1+T, len), bs)+1`
  (sliding), `cdiv(min(C+T, len), bs)` (chunked), one or two pages (Mamba) (§1.2);
- "Maximum concurrency" = num_blocks / Σ_groups blocks per request (a float; the exact
  Fraction is kept beside it); "GPU KV cache size" is `num_blocks // groups * min_block`
  up to 0.20 and `int(concurrency * max_model_len)` from 0.21 (§1.5).

The memory budget ("Available KV cache memory") comes from kvplan.engines.budget or is given.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from kvplan.core.dtypes import (
    BF16,
    FP8_DS_MLA,
    FP8_E4M3,
    FP8_E5M2,
    FP16,
    FP32,
    NVFP4,
    NVFP4_DS_MLA,
    KVFormat,
    cdiv,
)
from kvplan.core.errors import BadInputError
from kvplan.core.launch import EngineLog
from kvplan.core.layers import (
    ATTENTION_KINDS,
    MLA,
    ChunkedLocal,
    CompressedAttention,
    CrossAttention,
    Layer,
    NoCache,
    RecurrentState,
    SlidingWindow,
    indexer_key_bytes,
)
from kvplan.core.quant import NONE, Quantization
from kvplan.core.record import record
from kvplan.core.sizing import pp_stages
from kvplan.core.spec import ModelSpec
from kvplan.core.weights import ExpertLoad
from kvplan.engines import named_kv_format
from kvplan.engines.base import (
    BaseEngine,
    Capacity,
    Constraint,
    Deployment,
    HostBlocks,
    Need,
    Pool,
    StartCheck,
)
from kvplan.engines.cache import CacheGroup, CacheLayer, CacheLayout, spec_state

if TYPE_CHECKING:
    from kvplan.core.allocator import CachingAllocator
    from kvplan.core.launch import EngineLaunch
    from kvplan.engines.vllm_profile import BatchSettings

SCHEMA = "kvplan.engine.vllm/1"
LATEST = (0, 33, 0)
"""The newest vLLM whose sizing code was read (engine-kv-sizing.md §0); the default."""

DEFAULT_BLOCK_SIZE = 16  # CUDA platform default (0.11 platforms/cuda.py; 0.33 DEFAULT_BLOCK_SIZE)
HYBRID_ALIGN_BLOCK = 16  # 0.11 HybridAttentionMambaModelConfig aligns to multiples of 16

# Version boundaries (tuples compare element-wise; see engine-kv-sizing.md §1.5, §1.6).
TOKEN_LINE_FROM_CONCURRENCY = (0, 21)  # "GPU KV cache size" = int(concurrency * max_model_len)
GMU_092 = (0, 20)  # gpu_memory_utilization default 0.9 -> 0.92
# Newer grouping picks the largest bucket as group size when max < 1.5 * min (read in 2026 main
# and 0.33.0; kvplan applies it from 0.33, the first release read with it).
LARGEST_BUCKET_GROUPING = (0, 33)
# Mamba "align" cache mode (2 pages per request with prefix caching), async scheduling that
# doubles the sliding-window lookahead, page-size unification: read in 0.33.0.
V033 = (0, 33)
V1 = (0, 8)  # envs.py VLLM_USE_V1 defaults to "1"
SEQS_BY_GPU = (0, 8, 3)  # arg_utils: max_num_seqs 1024 / 256 by GPU class (after 0.8.2)

# --- vLLM-only storage formats (kv_cache_dtype names) ------------------------------------
# Per-token-head quantization (0.33 KVQuantMode): 1-byte (or 4-bit) data plus one fp32 scale
# per token, per head, for K and for V (triton_attn.py::customize_spec). Expressed as one
# group spanning the whole row (group size larger than any head) with a 4-byte scale.
_WHOLE_ROW = 2**31
INT8_PER_TOKEN_HEAD = KVFormat(
    "int8_per_token_head", 8, group_size=_WHOLE_ROW, scale_bytes=4,
    description="vLLM int8 per token-head: 1 byte per element + fp32 scale per row")
FP8_PER_TOKEN_HEAD = replace(INT8_PER_TOKEN_HEAD, name="fp8_per_token_head",
                             description="vLLM fp8 per token-head: 1 byte + fp32 scale per row")
INT4_PER_TOKEN_HEAD = KVFormat(
    "int4_per_token_head", 4, group_size=_WHOLE_ROW, scale_bytes=4,
    description="vLLM int4 per token-head: half a byte per element + fp32 scale per row")

_KV_DTYPES: dict[str, KVFormat] = {
    "bfloat16": BF16, "bf16": BF16, "float16": FP16, "fp16": FP16, "half": FP16,
    "float32": FP32, "float": FP32, "fp32": FP32,
    "fp8": FP8_E4M3, "fp8_e4m3": FP8_E4M3, "fp8_inc": FP8_E4M3, "fp8_e5m2": FP8_E5M2,
    "nvfp4": NVFP4, "fp8_ds_mla": FP8_DS_MLA, "nvfp4_ds_mla": NVFP4_DS_MLA,
    "int8_per_token_head": INT8_PER_TOKEN_HEAD, "fp8_per_token_head": FP8_PER_TOKEN_HEAD,
    "int4_per_token_head": INT4_PER_TOKEN_HEAD,
}
KV_DTYPES = ("auto", "bfloat16", "float16", "float32", "fp8", "fp8_e4m3", "fp8_e5m2",
             "fp8_inc", "fp8_ds_mla", "nvfp4", "nvfp4_ds_mla", "int8_per_token_head",
             "fp8_per_token_head", "int4_per_token_head")
SMALLER_KV_DTYPES = ("fp8", "nvfp4")  # what to suggest when bf16 does not fit
INDEX_HEAD_DIM = 128  # the DSA indexer head when the spec names none (DeepSeek-V3.2)
INDEXER_BYTES_PER_TOKEN = indexer_key_bytes(INDEX_HEAD_DIM)  # fp8 key + fp32 scale


def is_sparse_mla(spec: ModelSpec) -> bool:
    """DeepSeek-V3.2 (configs with `index_topk`): FLASHMLA_SPARSE, fp8_ds_mla, indexer cache."""
    return spec.is_mla and (spec.family or "").replace("-", "_") in ("deepseek_v32",)


def has_compressed_attention(spec: ModelSpec) -> bool:
    """DeepSeek-V4 (compress_ratios): its own cache specs and grouping (_dsv4_stage)."""
    return any(isinstance(x, CompressedAttention) for x in spec.layers)


def kv_format(spec: ModelSpec, kv_cache_dtype: str = "auto") -> KVFormat:
    """`--kv-cache-dtype` -> the stored format (vllm/utils STR_DTYPE_TO_TORCH_DTYPE).

    `auto` is the model dtype, but `dtype=auto` itself serves float32 checkpoints in bf16
    (config/model.py::_resolve_auto_dtype). DeepSeek-V3.2 forces any fp8 (and auto) to
    `fp8_ds_mla` (models/config.py::DeepseekV32ForCausalLM).
    """
    name = kv_cache_dtype.strip().lower()
    if is_sparse_mla(spec) and (name == "auto" or name.startswith("fp8")):
        return FP8_DS_MLA
    if has_compressed_attention(spec):
        # models/deepseek_v4/attention.py _resolve_dsv4_kv_cache_dtype, fp8_ds_mla layout (the
        # FlashMLA sparse backend): auto and any fp8 become fp8_ds_mla, anything else refused
        if name == "auto" or name.startswith("fp8"):
            return FP8_DS_MLA
        raise BadInputError(f"--kv-cache-dtype {name}: vLLM's DeepSeek-V4 fp8_ds_mla layout "
                            "only supports fp8 KV cache", "use auto or fp8")
    fmt = named_kv_format(spec, name, _KV_DTYPES, "vLLM", KV_DTYPES)
    if fmt.name in ("fp8_ds_mla", "nvfp4_ds_mla") and not spec.is_mla:
        raise BadInputError(f"--kv-cache-dtype {name} is an MLA-only record; "
                            f"{spec.name} has no MLA layers", "use fp8 instead")
    return fmt


def default_block_size(spec: ModelSpec, gpu_name: str | None = None,
                       version: tuple[int, ...] = LATEST, kv_cache_dtype: str = "auto",
                       compute_capability: str | None = None) -> int:
    """16 on CUDA; MLA backends choose their own (engine-kv-sizing.md §1.7).

    Up to 0.32 (the 0.11 rule, platforms/cuda.py check_and_update_config): FlashMLA 64 on
    Hopper (and sparse MLA everywhere), CUTLASS MLA 128 on datacenter Blackwell, Triton MLA
    keeps 16 elsewhere (the 4xL4 DeepSeek-V2-Lite log shows 807,792 tokens, a multiple of 16
    but not of 64). From 0.33 see `_mla_block_size_033`."""
    if not spec.is_mla:
        return DEFAULT_BLOCK_SIZE
    if is_sparse_mla(spec):
        return 64  # FLASHMLA_SPARSE (kernel blocks of 64, flashmla_sparse.py)
    cc = _capability(compute_capability, gpu_name)
    if version >= V033:
        return _mla_block_size_033(cc, kv_cache_dtype)
    if cc is None:
        return 64  # FlashMLA, the default on the Hopper GPUs most MLA models are served on
    if cc[0] == 10:
        return 128
    if cc[0] == 9:
        return 64
    return DEFAULT_BLOCK_SIZE


# Dense MLA backends of vLLM 0.33.0, in the order platforms/cuda.py::_get_backend_priorities
# tries them; the first whose checks pass serves the model, and its kernel block sizes give
# the block size (Platform._preferred_block_size_for_backends: 16 when the backend accepts
# it, else its smallest size). (name, compute-capability majors, KV dtypes, block size), from
# each backend's supports_compute_capability / supported_kv_cache_dtypes /
# get_supported_kernel_block_sizes (v1/attention/backends/mla/*.py):
_MLA_BACKENDS_033: dict[int, tuple[tuple[str, frozenset[str], int], ...]] = {}
_AUTO_16 = frozenset({"auto", "float16", "bfloat16"})
_WITH_FP8 = _AUTO_16 | {"fp8", "fp8_e4m3"}
_TRITON_MLA = ("TRITON_MLA", _WITH_FP8, 16)  # any capability, MultipleOf(16)
_MLA_BACKENDS_033[9] = (
    ("FLASH_ATTN_MLA", _AUTO_16, 16),  # FA3 on SM 9.x (flashattn_mla.py), MultipleOf(16)
    ("FLASHMLA", _WITH_FP8, 64),  # SM 9.x/10.x (flashmla.py), [64]
    _TRITON_MLA,
)
_MLA_BACKENDS_033[10] = (
    # FlashInfer MLA (flashinfer_mla.py): SM 10.x, kernel blocks [32, 64]; it requires
    # qk_nope_head_dim in (64, 128, 192), which every DeepSeek-style library model has (128)
    ("FLASHINFER_MLA", _WITH_FP8, 32),
    ("CUTLASS_MLA", _WITH_FP8, 128),  # cutlass_mla.py, [128]
    ("FLASHMLA", _WITH_FP8, 64),
    _TRITON_MLA,
)


def _mla_block_size_033(cc: tuple[int, int] | None, kv_cache_dtype: str) -> int:
    """vLLM 0.33's MLA block size on a GPU of compute capability `cc`: Hopper FA3 MLA (16)
    for bf16/fp16 and FlashMLA (64) for fp8; Blackwell SM 10.x FlashInfer MLA (32); SM 12.x,
    Ampere and Ada Triton MLA (16). No GPU given: Hopper, where most MLA models are served."""
    name = kv_cache_dtype.strip().lower()
    if name in ("fp8_ds_mla", "nvfp4_ds_mla"):
        # records only the sparse FlashMLA kernels read (flashmla_sparse.py: [64] for
        # quantized specs)
        return 64
    major = 9 if cc is None else cc[0]
    for _backend, dtypes, block in _MLA_BACKENDS_033.get(major, (_TRITON_MLA,)):
        if name in dtypes:
            return block
    return DEFAULT_BLOCK_SIZE


def _kernel_capability(config: VllmConfig) -> tuple[int, int] | None:
    """The capability a kernel choice is made for: no GPU given at all stands for Hopper
    (9, 0), as the MLA block size does; otherwise `_capability` (None on ROCm/unknown)."""
    if config.compute_capability is None and not config.gpu_name:
        return (9, 0)
    return _capability(config.compute_capability, config.gpu_name)


def _capability(compute_capability: str | None, gpu_name: str | None = None
                ) -> tuple[int, int] | None:
    """"9.0" -> (9, 0); None for ROCm targets ("gfx942") or when unknown. Without a
    capability, a GPU name with a known tag stands for its architecture."""
    text = (compute_capability or "").strip()
    if text:
        major, _, minor = text.partition(".")
        if major.isdigit():
            return int(major), int(minor or 0) if (minor or "0").isdigit() else 0
        return None
    name = (gpu_name or "").lower()
    if any(tag in name for tag in ("b100", "b200", "b300", "gb200", "gb300")):
        return (10, 0)
    if any(tag in name for tag in ("h100", "h200", "h800", "h20", "gh200")):
        return (9, 0)
    if name:
        return (8, 0)  # a named GPU of another generation: neither Hopper nor Blackwell
    return None


def default_max_num_batched_tokens(gpu_memory_bytes: int | None, gpu_name: str | None = None,
                                   usage: str = "server", version: tuple[int, ...] = LATEST
                                   ) -> int:
    """V1 defaults with chunked prefill (0.11 engine/arg_utils.py): GPUs with >= 70 GiB that
    are not A100: 16384 (LLM class) / 8192 (OpenAI server); others 8192 / 2048. 0.33 adds a
    >= 160 GiB tier with 16384 for both."""
    big = _big_gpu(gpu_memory_bytes, gpu_name)
    if version >= V033 and gpu_memory_bytes is not None and gpu_memory_bytes >= 160 * 2**30:
        return 16384
    if big:
        return 16384 if usage == "llm" else 8192
    return 8192 if usage == "llm" else 2048


def default_max_num_seqs(gpu_memory_bytes: int | None, gpu_name: str | None = None,
                         version: tuple[int, ...] = LATEST) -> int:
    """1024 on >= 70 GiB GPUs that are not A100, else 256 (0.11 engine/arg_utils.py). V1 up to
    0.8.2 gave every GPU 1,024 (vllm#15617, 0.8.2 on an RTX 4090: "CUDA out of memory
    occurred when warming up sampler with 1024 dummy requests"; 0.8.5 reads by GPU class);
    V0 256 (`SchedulerConfig.max_num_seqs`)."""
    if V1 <= version < SEQS_BY_GPU:
        return 1024
    if version < V1:
        return 256
    return 1024 if _big_gpu(gpu_memory_bytes, gpu_name) else 256


def _big_gpu(gpu_memory_bytes: int | None, gpu_name: str | None) -> bool:
    """The larger default tier of arg_utils.py: >= 70 GiB and not an A100."""
    return gpu_memory_bytes is not None and gpu_memory_bytes >= 70 * 2**30 and \
        "a100" not in (gpu_name or "").lower()


@record
class RopeCache:
    """One rotary cos/sin cache vLLM builds at load: `positions` x `rotary_dim` in the model
    dtype, created by the first layer (`first_layer`) that asks for its configuration."""

    positions: int
    rotary_dim: int
    first_layer: int
    linear: bool = False  # LinearScalingRotaryEmbedding: one more fp32 copy while built


def rope_caches(spec: ModelSpec, layers: range | None = None) -> tuple[RopeCache, ...]:
    """The caches `get_rope` builds (rotary_embedding `get_rope`: one per distinct (head
    size, rotary dim, max position, base, scaling) key, kept in `_ROPE_DICT`). Lengths as
    each class computes its `cos_sin_cache`:

    - default, llama3, mrope and kinds not listed: max_position_embeddings;
    - linear and dynamic: max_position x factor (LinearScalingRotaryEmbedding,
      DynamicNTKScalingRotaryEmbedding: `max_len = max_position_embeddings * scaling_factor`;
      Gemma 3's global layers: 131,072 x 8 = 1,048,576 positions);
    - yarn and deepseek_yarn: original_max_position_embeddings x factor;
    - longrope: a short cache of original_max_position_embeddings and a long one of
      max_position_embeddings, concatenated (Phi3LongRoPEScaledRotaryEmbedding).

    Sliding layers with a rope of their own (Gemma 3 rope_local_base_freq) get a second,
    unscaled cache. The rotary dim is the head size (MLA: qk_rope_head_dim); partial rotary
    factors are not in the spec, so the full head size is an upper bound. `layers`: those of
    one pipeline stage (each process builds the caches its own layers ask for)."""
    if not spec.max_context_tokens:
        return ()
    max_pos = spec.max_context_tokens
    rope = spec.rope
    found: dict[tuple[int, bool], RopeCache] = {}
    for i in layers if layers is not None else range(spec.num_layers):
        layer = spec.layers[i]
        if isinstance(layer, MLA):
            dim = layer.qk_rope_head_dim
        elif isinstance(layer, ATTENTION_KINDS):
            dim = layer.head_dim
        else:
            continue
        local = rope is not None and rope.local and isinstance(layer, SlidingWindow)
        if (dim, local) in found:
            continue
        positions, linear = max_pos, False
        if rope is not None and not local:
            factor, original = rope.factor, rope.original_max_positions or max_pos
            if rope.scaling in ("linear", "dynamic"):
                positions, linear = math.ceil(max_pos * factor), rope.scaling == "linear"
            elif rope.scaling in ("yarn", "deepseek_yarn"):
                positions = math.ceil(original * factor)
            elif rope.scaling == "longrope":
                positions = original + max_pos
        found[(dim, local)] = RopeCache(positions, dim, i, linear)
    return tuple(found.values())


def rotary_cache_bytes(spec: ModelSpec) -> int:
    """The bytes of every rotary cache (`rope_caches`), each `.to(dtype)` in the model dtype
    (`RotaryEmbedding.__init__`): 32 MiB for Llama 3.1's 131,072 positions x 128."""
    dtype_bytes = 4 if spec.dtype == "fp32" else 2
    return sum(c.positions * c.rotary_dim * dtype_bytes for c in rope_caches(spec))


# Attention.__init__ keeps four fp32 scalars on the device (_k_scale, _v_scale, _q_scale,
# _prob_scale); each takes a 512-byte block of the caching allocator.
ATTENTION_SCALE_TENSORS = 4
# Checkpoint tensors vLLM loads into one parameter (packed_modules_mapping): q/k/v into
# qkv_proj, gate/up into gate_up_proj (dense MLPs, shared experts and the stacked experts
# alike: FusedMoE holds every expert's w13 in one [E, 2I, H] tensor and w2 in one more).
_FUSED = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
          "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj"}


@functools.lru_cache(maxsize=8192)  # names repeat across layouts (find-gpus tries ~30)
def _fused_name(name: str) -> str:
    """A checkpoint tensor's name as vLLM's fused parameter (q/k/v -> qkv_proj, ...)."""
    return ".".join(_FUSED.get(p, p) for p in name.split("."))


def _replay_rope(alloc: CachingAllocator, cache: RopeCache, model_bytes: int,
                 keep_fp32: bool = False) -> None:
    """`_compute_cos_sin_cache` on the device, then `.to(dtype)`: inv_freq and positions,
    freqs = positions x inv_freq, cos, sin and their concatenation in fp32 (linear scaling:
    positions divided by the factor and the list concatenated once more), freed once the
    model-dtype copy exists. Only the order of these fp32 blocks matters: later weights
    reuse them. `keep_fp32`: the fp32 concatenation is the cache (SGLang on CUDA)."""
    n, d = cache.positions, cache.rotary_dim
    temps = [alloc.malloc(d // 2 * 4), alloc.malloc(n * 4)]
    if cache.linear:
        temps.append(alloc.malloc(n * 4))
    temps += [alloc.malloc(n * d // 2 * 4) for _ in range(3)]
    cat = alloc.malloc(n * d * 4)
    if cache.linear:
        temps.append(cat)
        cat = alloc.malloc(n * d * 4)
    for h in temps:
        alloc.free(h)
    if not keep_fp32:
        alloc.malloc(n * d * model_bytes)
        alloc.free(cat)


def loaded_weights(spec: ModelSpec, weights: str = "auto", tp: int = 1, pp: int = 1,
                   ep: int = 1, expert_load: ExpertLoad | None = None) -> tuple[int, ...]:
    """`loaded_weight_bytes` in the format `weights` names (kvplan.core.weights.load_format:
    the checkpoint's, one quantized at load, or a model dtype); MXFP4 experts laid out as
    `expert_load` says."""
    from kvplan.core.weights import load_format

    target, q, _ = load_format(spec, weights)
    return loaded_weight_bytes(target, q, tp, pp, ep,
                               expert_load=expert_load if q.layout == "mxfp4" else None)


def loaded_weight_bytes(spec: ModelSpec, q: Quantization = NONE, tp: int = 1, pp: int = 1,
                        ep: int = 1, include_mtp: bool = False,
                        expert_load: ExpertLoad | None = None, reserved: bool = False,
                        rope_fp32: bool = False) -> tuple[int, ...]:
    """What vLLM logs as the weights one GPU of each pipeline stage loaded ("Loading model
    weights took", "Model loading took", the worker's "model weights take"): the change of
    `torch.cuda.memory_allocated` across `load_model` (`DeviceMemoryProfiler`). That counts
    the caching allocator's blocks (kvplan.core.allocator), so it is the weights as vLLM
    creates its parameters (the checkpoint's tensors, `placement`, fused as
    packed_modules_mapping fuses them) in the order the model's __init__ creates them, plus
    the rotary caches (`rope_caches`, built by the first layer that uses each, with their
    fp32 intermediates freed for later weights to reuse) and the attention layers' scalars,
    each allocation as the allocator rounds it: a 25 MiB o_proj in a fresh 26 MiB segment
    counts 26 MiB. R1-Distill-Qwen-14B at TP 2 (vllm#13061): 13.7561 GiB of tensors, 13.9476
    logged, all of it this. `reserved`: the segments instead of the blocks, as an engine that
    measures the drop in free device memory after `empty_cache` sees them (SGLang);
    `rope_fp32`: rotary caches kept in fp32 (SGLang on CUDA)."""
    from kvplan.core.allocator import CachingAllocator
    from kvplan.core.weights import placement

    plan = placement(spec, q, tp, pp, ep, include_mtp=include_mtp, expert_load=expert_load)
    inv = plan.inventory
    stages = pp_stages(spec.num_layers, pp)
    model_bytes = 4 if spec.dtype == "fp32" else 2
    # (param, layer) -> bytes, in creation order (a dict keeps its insertion order)
    groups: dict[tuple[str, int | None], int] = {}
    places: dict[tuple[str, int | None], str] = {}
    for t in inv.tensors:
        key = (_fused_name(t.name), t.layer)
        places.setdefault(key, t.place)
        groups[key] = groups.get(key, 0) + t.num_bytes
    # each place's parameters in creation order; "layer" ones by their layer
    by_place: dict[str, list[tuple[str, int | None]]] = {}
    by_layer: dict[int | None, list[tuple[str, int | None]]] = {}
    for key, place in places.items():
        by_place.setdefault(place, []).append(key)
        if place == "layer":
            by_layer.setdefault(key[1], []).append(key)
    out = []
    for k, (a, b) in enumerate(stages):
        alloc = CachingAllocator()
        last = k == pp - 1

        def put(key: tuple[str, int | None], alloc: CachingAllocator = alloc) -> None:
            alloc.malloc(groups[key])

        first_use = {c.first_layer: c for c in rope_caches(spec, range(a, b))}
        if k == 0:
            for place in ("vision", "embed"):  # the vision tower is built before the LM
                for key in by_place.get(place, []):
                    put(key)
        for i in range(a, b):
            mine = by_layer.get(i, [])
            attn = [key for key in mine if "attn" in key[0]]
            for key in attn:
                put(key)
            if i in first_use:
                _replay_rope(alloc, first_use[i], model_bytes, rope_fp32)
            if isinstance(spec.layers[i], (*ATTENTION_KINDS, MLA)):
                for _ in range(ATTENTION_SCALE_TENSORS):
                    alloc.malloc(4)
            for key in mine:
                if key not in attn:
                    put(key)
        if last:
            for place in ("final", "head", "mtp"):
                for key in by_place.get(place, []):
                    put(key)
            if pp > 1 and spec.tie_word_embeddings:
                for key in by_place.get("embed", []):
                    put(key)
        out.append(alloc.live_segment_bytes if reserved else alloc.allocated_bytes)
    return tuple(out)


def mxfp4_expert_load(gpu_arch: str = "") -> ExpertLoad | None:
    """How vLLM holds MXFP4 MoE experts on a GPU (quantization/mxfp4.py, default settings:
    `get_mxfp4_backend` picks the backend, `Mxfp4MoEMethod.create_weights` pads, and
    `process_weights_after_loading` re-lays them out). `gpu_arch` holds the compute capability
    ("hopper sm9.0"); None when it does not (the checkpoint's own layout is used).

    - Hopper (9.0): Triton kernels; width rounded to 64; the biases become fp32 and the block
      scales are swizzled into a second tensor while the checkpoint's stay registered (two
      copies).
    - Datacenter Blackwell (10.x): FlashInfer; width and hidden rounded to 256.
    - Other CUDA GPUs (Ampere 8.x, Ada 8.9, consumer Blackwell 12.x): Marlin; width rounded
      to 128, hidden to 256 (the Marlin MoE kernel needs n % 256 and k % 128)."""
    from kvplan.engines.base import compute_capability

    found = compute_capability(gpu_arch)
    if found is None:
        return None
    major, minor = found
    if (major, minor) == (9, 0):
        return ExpertLoad(width_align=64, scale_copies=2, bias_dtype="F32")
    if major == 10:
        return ExpertLoad(width_align=256, hidden_align=256)
    return ExpertLoad(width_align=128, hidden_align=256)


def default_gpu_memory_utilization(version: tuple[int, ...] = LATEST) -> float:
    """0.9 up to 0.19; 0.92 from 0.20 (config/cache.py)."""
    return 0.92 if version >= GMU_092 else 0.9


# --- settings -------------------------------------------------------------------------------

@record
class VllmConfig:
    """The vLLM settings that change the KV-cache layout (names as vLLM's flags)."""

    max_model_len: int
    version: tuple[int, ...] = LATEST
    kv_cache_dtype: str = "auto"
    block_size: int | None = None  # None: the platform/backend default
    tp: int = 1
    pp: int = 1
    max_num_batched_tokens: int = 8192
    # 0.33 schedules two batches ahead (async scheduling, PP=1): sliding layers keep
    # 2 x max_num_batched_tokens in flight. None: on from 0.33.
    async_scheduling: bool | None = None
    disable_hybrid_kv_cache_manager: bool | None = None  # None: vLLM's automatic choice
    mamba_cache_mode: str | None = None  # "none" | "align"; None: version default
    num_speculative_tokens: int = 0
    num_draft_layers: int = 0  # EAGLE/MTP draft layers sharing the pool (last PP stage)
    num_gpu_blocks_override: int | None = None
    gpu_name: str | None = None  # picks the MLA backend's block size
    # decode context parallel: the TP group's ranks split each request's tokens instead of
    # each holding all of them (config/parallel.py decode_context_parallel_size; tp % dcp == 0)
    dcp: int = 1
    # the GPU's compute capability ("9.0", "10.0"; catalog field compute_capability): picks
    # the attention backend and with it the block size, and the GDN prefill kernel (0.33)
    compute_capability: str | None = None

    def in_flight_tokens(self) -> int:
        """T in the sliding/chunked per-request need (SlidingWindowSpec.max_memory_usage)."""
        async_on = self.version >= V033 if self.async_scheduling is None else \
            self.async_scheduling
        return self.max_num_batched_tokens * (2 if async_on and self.pp == 1 else 1)

    def mamba_cache_mode_resolved(self) -> str:
        """"align" from 0.33 (prefix caching on: models/config.py MambaModelConfig), the
        0.11 one-page "legacy" before."""
        return self.mamba_cache_mode or ("align" if self.version >= V033 else "legacy")

    def mamba_pages_per_request(self, checkpoint_blocks: int = 0) -> int:
        """MambaSpec.max_memory_usage_bytes in pages: 1 + spec ("none"), 2 + spec + the
        layer's prefill-checkpoint blocks ("align", 0.33), 1 (0.11)."""
        mode = self.mamba_cache_mode_resolved()
        if mode == "legacy":  # 0.11: the spec's block_size is max_model_len, one page
            return 1
        if mode == "none":
            return 1 + self.num_speculative_tokens
        if mode == "align":
            return 2 + self.num_speculative_tokens + checkpoint_blocks
        raise BadInputError(f"unknown mamba cache mode {mode!r}", "use none or align")


# --- per-layer specs -----------------------------------------------------------------------

@record
class PageSpec:
    """One layer's KV-cache spec as vLLM builds it: kind, block size and page bytes."""

    kind: str  # full | sliding | chunked | cross | mla | mamba
    block_size: int
    page_bytes: int  # allocated per block (Mamba: padded to the attention page)
    real_page_bytes: int
    window: int = 0  # sliding window, or attention chunk
    encoder_tokens: int = 0
    checkpoint_blocks: int = 0  # Mamba: prefill-checkpoint pages in align mode (0.33)

    def blocks_per_request(self, max_model_len: int, config: VllmConfig) -> int:
        """cdiv(max_memory_usage_bytes, page) for one request of max_model_len (§1.2)."""
        bs, t = self.block_size, config.in_flight_tokens()
        if self.kind in ("full", "mla"):
            # kv_cache_interface.py (0.11): each DCP rank keeps cdiv(max_model_len, dcp)
            return cdiv(cdiv(max_model_len, config.dcp), bs)
        if self.kind == "sliding":
            # the window may start mid-block, hence one block more
            return cdiv(min(self.window - 1 + t, max_model_len), bs) + 1
        if self.kind == "chunked":
            return cdiv(min(self.window + t, max_model_len), bs)
        if self.kind == "cross":
            return cdiv(self.encoder_tokens, bs)
        return config.mamba_pages_per_request(self.checkpoint_blocks)  # whole-state pages

    @property
    def token_slots(self) -> str:
        """What decides the token-slot needs; layers of one type share it."""
        return (f"{self.kind}:{self.window}:{self.encoder_tokens}:{self.block_size}:"
                f"{self.checkpoint_blocks}")


def _token_bytes(layer: Layer, fmt: KVFormat, tp: int) -> int:
    """Bytes one token takes in this layer's page on one rank."""
    if isinstance(layer, MLA):
        # one latent per token (no K/V x2), replicated on every TP rank; the DSA indexer
        # keys are a cache layer of their own (_indexer_specs)
        return layer.latent_token_bytes(fmt)
    if not isinstance(layer, ATTENTION_KINDS):
        raise BadInputError(f"kvplan's vLLM profile does not model {layer.kind} layers "
                            f"({type(layer).__name__})",
                            "kvplan size gives its exact bytes; plan it with an engine whose "
                            "profile models this layer kind")
    # K and V rows of max(1, kv // tp) heads (cross attention: per encoder token)
    return sum(layer.kv_token_bytes(fmt, tp))


def layer_page_specs(spec: ModelSpec, layers: Sequence[Layer], config: VllmConfig,
                     fmt: KVFormat | None = None) -> list[PageSpec | None]:
    """One PageSpec per layer (None for layers without cache), after the block-size rules:
    MLA backends' block sizes, the hybrid attention/Mamba alignment and Mamba page padding,
    and the unification of sliding/chunked into full when the hybrid manager is off.
    `fmt`: a stored format given directly (validate's formats beyond vLLM's flag names)."""
    fmt = fmt or kv_format(spec, config.kv_cache_dtype)
    block = config.block_size or default_block_size(
        spec, config.gpu_name, config.version, config.kv_cache_dtype, config.compute_capability)
    tp = config.tp
    disable_hybrid = config.disable_hybrid_kv_cache_manager
    if disable_hybrid is None:
        # set automatically for any model with attention_chunk_size (Llama 4) unless
        # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 (0.11 config/__init__.py)
        disable_hybrid = any(isinstance(x, ChunkedLocal) for x in spec.layers)

    states = [x for x in layers if isinstance(x, RecurrentState)]
    attention = [x for x in spec.layers if not isinstance(x, (RecurrentState, NoCache))]
    # 0.33: a layer gets a window only through the config's `layer_types` (llama.py
    # LlamaAttention, gemma2/gemma3/olmo...); otherwise Attention falls back to
    # cache_config.sliding_window, which 0.33 never sets. So one config-wide
    # `sliding_window` on every layer (Mistral-7B-v0.1, Phi-3-mini-4k: no layer_types) leaves
    # vLLM 0.33's layers full-attention; mixed models always list their layer_types.
    windows = {x.window for x in attention if isinstance(x, SlidingWindow)}
    config_wide_window = config.version >= V033 and len(windows) == 1 and \
        all(isinstance(x, SlidingWindow) for x in attention)
    mamba_page = 0
    if states and attention:
        # Hybrid attention + Mamba (§1.7): the attention block grows until its page holds a
        # whole Mamba state; the Mamba page is then padded to the attention page.
        attn_1tok = _token_bytes(attention[0], fmt, tp)
        raw_mamba = max(s.state_bytes(tp) for s in spec.layers if isinstance(s, RecurrentState))
        base = HYBRID_ALIGN_BLOCK if (config.version < V033 or config.block_size is None) \
            else config.block_size
        if config.version >= V033:
            if any(isinstance(x, MLA) for x in attention):
                base = max(base, 128)  # MLA hybrids: multiples of 128 (_align_hybrid_block_size)
            if config.mamba_cache_mode_resolved() == "align":
                # internal prefill checkpoints land on block boundaries
                base = math.lcm(base, _prefill_checkpoint_alignment(spec, config) or 1)
        attn_block = base * cdiv(raw_mamba, base * attn_1tok)
        if config.block_size is None or config.block_size < attn_block:
            block = attn_block
        mamba_page = block * attn_1tok

    out: list[PageSpec | None] = []
    for layer in layers:
        if isinstance(layer, NoCache):
            out.append(None)
        elif isinstance(layer, RecurrentState):
            real = layer.state_bytes(tp)
            out.append(PageSpec("mamba", block, max(mamba_page, real), real,
                                checkpoint_blocks=_checkpoint_blocks(layer, spec, config)))
        elif isinstance(layer, MLA):
            page = block * _token_bytes(layer, fmt, tp)
            out.append(PageSpec("mla", block, page, page))
        else:
            page = block * _token_bytes(layer, fmt, tp)
            if isinstance(layer, SlidingWindow) and not (disable_hybrid or config_wide_window):
                out.append(PageSpec("sliding", block, page, page, window=layer.window))
            elif isinstance(layer, ChunkedLocal) and not disable_hybrid:
                out.append(PageSpec("chunked", block, page, page, window=layer.chunk))
            elif isinstance(layer, CrossAttention):
                out.append(PageSpec("cross", block, page, page,
                                    encoder_tokens=layer.encoder_tokens))
            else:
                out.append(PageSpec("full", block, page, page))
    return out


# vLLM 0.33.0 v1/attention/backends/gdn_attn.py FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64
# The default vLLM 0.33 wheel is a CUDA 13 build (it requires nvidia-cutlass-dsl[cu13]):
# torch.version.cuda, which the GDN prefill choice reads on Blackwell.
DEFAULT_CUDA_RUNTIME_MAJOR = 13


def gdn_prefill_backend(spec: ModelSpec, config: VllmConfig) -> str | None:
    """The gated-delta-net prefill kernel vLLM 0.33 picks ("flashinfer" | "triton"; None
    without GDN layers): FlashInfer on SM 9.0, and on SM 10.x/12.x when head_k_dim is 128
    and the CUDA runtime is 13 or newer; Triton elsewhere (ROCm, Ampere, Ada)
    (model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py::_resolve_gdn_prefill_backend).
    No GPU given: Hopper, like the MLA block size."""
    gdn = [x for x in spec.layers if isinstance(x, RecurrentState)
           and x.variant == "gated_delta_net"]
    if not gdn or config.version < V033:
        return None if not gdn else "triton"
    cc = _kernel_capability(config)
    if cc is None:
        return "triton"  # ROCm targets take the Triton/FLA (or AITER) path
    head_k_dim = _gdn_head_k_dim(gdn[0])
    if cc == (9, 0):
        return "flashinfer"
    if cc[0] in (10, 12) and head_k_dim == 128 and DEFAULT_CUDA_RUNTIME_MAJOR >= 13:
        return "flashinfer"
    return "triton"


# vLLM 0.33.0 model_executor/layers/mamba/kda_checkpoint.py kda_prefill_checkpoint_alignment:
# the FlashKDA prefill exports checkpoints on a 16-token grid
FLASHKDA_CHECKPOINT_ALIGNMENT = 16


def kda_prefill_backend(spec: ModelSpec, config: VllmConfig) -> str | None:
    """The Kimi Delta Attention prefill kernel vLLM 0.33 picks with the default "auto"
    ("flashkda" | "triton"; None without KDA layers): FlashKDA on CUDA SM 9.x/10.x/12.x when
    the head dim is 128, activations are bf16, the recurrent state bf16 or fp32 and the
    forget gate has a lower bound; Triton elsewhere (FlashInfer only when asked for)
    (models/kimi_k3/nvidia/kda.py resolve_kda_prefill_backend / is_flashkda_supported).
    No GPU given: Hopper, like the MLA block size."""
    kda = [x for x in spec.layers if isinstance(x, RecurrentState) and x.variant == "kda"]
    if not kda or config.version < V033:
        return None if not kda else "triton"
    cc = _kernel_capability(config)
    # the (heads, head_dim, head_dim) recurrent state (kda_state_shape / kda_state_dtype)
    recurrent = [t for t in kda[0].tensors if len(t.shape) == 3]
    bounded = spec.ssm is not None and spec.ssm.kind == "kda" and spec.ssm.bounded_gate
    # dtype=auto serves fp32 checkpoints in bf16 (config/model.py _resolve_auto_dtype)
    if cc is not None and cc[0] in (9, 10, 12) and bounded and spec.dtype != "fp16" \
            and recurrent and recurrent[0].shape[1] == 128 \
            and recurrent[0].dtype_bytes in (2, 4):
        return "flashkda"
    return "triton"


def _gdn_head_k_dim(layer: RecurrentState) -> int | None:
    # the recurrent state is (num_v_heads, head_k_dim, head_v_dim) (gated_delta_net_state_shape)
    shapes = [t.shape for t in layer.tensors if len(t.shape) == 3]
    return shapes[0][1] if shapes else None


def _prefill_checkpoint_alignment(spec: ModelSpec, config: VllmConfig) -> int | None:
    """get_mamba_prefill_checkpoint_alignment: 64 when every Mamba-like layer is a GDN layer
    with the FlashInfer prefill (it exports mid-prefill states); None otherwise (the other
    mixers declare none)."""
    states = [x for x in spec.layers if isinstance(x, RecurrentState)]
    if states and all(x.variant == "gated_delta_net" for x in states) and \
            gdn_prefill_backend(spec, config) == "flashinfer":
        return FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
    return None


def _checkpoint_blocks(layer: RecurrentState, spec: ModelSpec, config: VllmConfig) -> int:
    """MambaSpec.num_prefill_checkpoint_blocks (0.33): 1 for Mamba2 mixers
    (mamba_mixer2.py MambaMixer2.get_kv_cache_spec), 1 for GDN layers that export FlashInfer
    prefill checkpoints (qwen_gdn_linear_attn.py get_kv_cache_spec), 1 for KDA layers on the
    FlashKDA prefill (models/kimi_k3/nvidia/kda.py KimiK3DeltaAttention.get_kv_cache_spec),
    else 0. Counted only in align mode (MambaSpec.max_memory_usage_bytes)."""
    if config.version < V033:
        return 0
    if layer.variant == "mamba2":
        return 1
    if layer.variant == "kda":
        return int(kda_prefill_backend(spec, config) == "flashkda")
    if layer.variant == "gated_delta_net" and config.mamba_cache_mode_resolved() == "align" \
            and _prefill_checkpoint_alignment(spec, config) is not None:
        return 1
    return 0


def _stage_layers(spec: ModelSpec, config: VllmConfig) -> list[list[Layer]]:
    stages = [list(spec.layers[a:b]) for a, b in pp_stages(spec.num_layers, config.pp)]
    if config.num_draft_layers:
        # EAGLE/MTP draft layers are attention layers of the target's shape; they live with
        # the last stage and share its pool (issue #19996: 32 + 1 layers in the pool).
        draft = next((x for x in spec.layers if not isinstance(x, (RecurrentState, NoCache))),
                     None)
        if draft is None:
            raise BadInputError(f"{spec.name} has no attention layer to copy for draft layers")
        stages[-1] += [draft] * config.num_draft_layers
    return stages


def _indexer_specs(spec: ModelSpec, layers: Sequence[Layer], block: int
                   ) -> list[tuple[int, PageSpec]]:
    # DSA models (DeepSeek-V3.2, GLM-5): an MLA layer with an indexer also caches its keys
    # (DeepseekV32IndexerCache), an MLAAttentionSpec with one uint8 "head" of
    # index_head_dim fp8 values + fp32 scales (132 bytes for 128). A DeepSeek-V3.2 spec that
    # does not name its indexer (no index_head_dim) gets the 128-wide one on every MLA layer.
    sparse = is_sparse_mla(spec)
    out = []
    for i, layer in enumerate(layers):
        if not isinstance(layer, MLA):
            continue
        per_token = layer.index_token_bytes() or (INDEXER_BYTES_PER_TOKEN if sparse else 0)
        if per_token:
            out.append((i, PageSpec("mla", block, block * per_token, block * per_token)))
    return out


# --- groups --------------------------------------------------------------------------------

@record
class KVCacheGroup:
    """One KV-cache group: layers sharing block ids, padded to `num_slots` layer tensors."""

    kind: str
    num_layers: int
    num_slots: int
    block_size: int
    page_bytes: int  # per layer slot; for a uniform-type group the summed page of all layers
    blocks_per_request: int  # at max_model_len
    window: int = 0
    # the cache layers in the group, named as vLLM names them by position: "12" is layer 12
    # of the model, "12.indexer" the DSA indexer-key cache of MLA layer 12
    layer_names: tuple[str, ...] = ()
    encoder_tokens: int = 0


@record
class StageLayout:
    """The KV-cache layout of one pipeline stage (what one worker computes)."""

    first_layer: int
    last_layer: int  # exclusive
    groups: tuple[KVCacheGroup, ...]
    group_size: int
    bytes_per_block: int  # one block id across all tensors (group_size x page)
    num_padding_layers: int
    padding_waste: Fraction  # "may waste at most P%" of the padded buckets
    blocks_per_request: int
    per_token_bytes: int  # bytes per token while every layer still grows (no rounding)


def _bucket_groups(specs: list[PageSpec], config: VllmConfig, max_model_len: int,
                   names: Sequence[str] = ()
                   ) -> tuple[list[KVCacheGroup], int, int, int, Fraction]:
    """get_kv_cache_groups: (groups, group_size, bytes_per_block, padding, waste).
    `names`: the layers' names, parallel to `specs` (kept on the groups)."""
    if not specs:
        return [], 0, 0, 0, Fraction(0)
    names = tuple(names) or tuple(str(i) for i in range(len(specs)))
    if len(set(specs)) == 1:
        # all layers identical: one group of every layer (the common case)
        s = specs[0]
        group = KVCacheGroup(s.kind, len(specs), len(specs), s.block_size, s.page_bytes,
                             s.blocks_per_request(max_model_len, config), s.window, names,
                             s.encoder_tokens)
        return [group], len(specs), len(specs) * s.page_bytes, 0, Fraction(0)
    if len({s.token_slots for s in specs}) == 1 and specs[0].kind != "mamba":
        # one type, different pages (MLA + indexer, per-layer head counts):
        # UniformTypeKVCacheSpecs, page = the sum of the members' pages
        s = specs[0]
        summed = sum(x.page_bytes for x in specs)
        group = KVCacheGroup(s.kind, len(specs), 1, s.block_size, summed,
                             s.blocks_per_request(max_model_len, config), s.window, names,
                             s.encoder_tokens)
        return [group], 1, summed, 0, Fraction(0)

    specs = _unify_pages(specs, config)
    buckets: dict[PageSpec, list[str]] = {}
    for s, name in zip(specs, names, strict=True):
        buckets.setdefault(s, []).append(name)
    counts = [len(members) for members in buckets.values()]
    group_size = min(counts)
    if config.version >= LARGEST_BUCKET_GROUPING and max(counts) < 1.5 * min(counts):
        group_size = max(counts)
    groups: list[KVCacheGroup] = []
    padding = padded_real = 0
    for s, bucket in buckets.items():
        n = len(bucket)
        num_groups = cdiv(n, group_size)
        for j in range(num_groups):
            members = tuple(bucket[j::num_groups])  # layers j::num_groups of the bucket
            groups.append(KVCacheGroup(s.kind, len(members), group_size, s.block_size,
                                       s.page_bytes,
                                       s.blocks_per_request(max_model_len, config), s.window,
                                       members, s.encoder_tokens))
        if num_groups * group_size > n:
            padding += num_groups * group_size - n
            padded_real += n
    page = specs[0].page_bytes
    waste = Fraction(padding, padded_real) if padded_real else Fraction(0)
    return groups, group_size, group_size * page, padding, waste


def _unify_pages(specs: list[PageSpec], config: VllmConfig) -> list[PageSpec]:
    """Hybrid groups need one page size. 0.11 requires it already (NotImplementedError);
    0.33 `unify_kv_cache_spec_page_size` scales the block size of an attention page that
    divides the largest and pads the rest (Mamba pages were padded by the alignment)."""
    largest = max(s.page_bytes for s in specs)
    if all(s.page_bytes == largest for s in specs):
        return specs
    if config.version < V033:
        raise BadInputError(
            "vLLM before 0.33 cannot group layers with different page sizes "
            f"({sorted({s.page_bytes for s in specs})} bytes)",
            "use --engine-version 0.33 or newer, or set --block-size")
    out = []
    for s in specs:
        if s.page_bytes == largest:
            out.append(s)
        elif s.kind != "mamba" and largest % s.page_bytes == 0:
            ratio = largest // s.page_bytes
            out.append(replace(s, block_size=s.block_size * ratio, page_bytes=largest,
                               real_page_bytes=largest))
        else:
            out.append(replace(s, page_bytes=largest))
    return out


def layout(spec: ModelSpec, config: VllmConfig, fmt: KVFormat | None = None
           ) -> tuple[StageLayout, ...]:
    """The KV-cache layout of every pipeline stage (independent of the memory budget).
    `fmt`: a stored format given directly instead of config.kv_cache_dtype's."""
    if config.max_model_len <= 0:
        raise BadInputError(f"--max-model-len must be positive, got {config.max_model_len}")
    if config.tp < 1 or config.pp < 1:
        raise BadInputError("tensor and pipeline parallel sizes must be at least 1")
    if config.dcp < 1 or config.tp % config.dcp:
        # parallel_state.py: the TP group is split into tp // dcp DCP groups
        raise BadInputError(f"--dcp {config.dcp} must divide --tp {config.tp}",
                            "decode context parallel reuses the TP group's GPUs")
    if config.dcp > 1 and any(s.kind not in ("full", "mla") for s in spec.layers):
        raise BadInputError("vLLM's decode context parallel serves full-attention and MLA "
                            "models only", "kv_cache_coordinator.py: 'DCP not support hybrid "
                            "attn now'")
    out = []
    start = 0
    for layers in _stage_layers(spec, config):
        if has_compressed_attention(spec):
            out.append(_dsv4_stage(layers, start, config))
            start += len(layers)
            continue
        page_specs = layer_page_specs(spec, layers, config, fmt)
        names = [str(start + i) for i, s in enumerate(page_specs) if s is not None]
        real = [s for s in page_specs if s is not None]
        block = real[0].block_size if real else (config.block_size or DEFAULT_BLOCK_SIZE)
        indexers = _indexer_specs(spec, layers, block)
        real += [s for _, s in indexers]
        names += [f"{start + i}.indexer" for i, _ in indexers]
        groups, gs, per_block, padding, waste = _bucket_groups(real, config,
                                                               config.max_model_len, names)
        per_token = sum(s.real_page_bytes // s.block_size for s in real if s.kind != "mamba")
        out.append(StageLayout(
            first_layer=start, last_layer=start + len(layers), groups=tuple(groups),
            group_size=gs, bytes_per_block=per_block, num_padding_layers=padding,
            padding_waste=waste, blocks_per_request=sum(g.blocks_per_request for g in groups),
            per_token_bytes=per_token,
        ))
        start += len(layers)
    return tuple(out)


# --- DeepSeek-V4 (vLLM 0.33 models/deepseek_v4) -------------------------------------------
DSV4_SWA_BLOCK = 64  # v1/attention/backends/mla/sparse_swa.py DeepseekV4SWACache block_size
DSV4_BLOCK = 256  # models/deepseek_v4/sparse_mla.py: the sparse MLA kernel's only block size
DSV4_ALIGNMENT = 576  # every fp8_ds_mla-layout page is rounded up to a multiple of this
DSV4_STATE_BYTES = 4  # the compressors' kv and score states are fp32
# compressor.py CompressorStateCache: blocks of 4 tokens (ratio 4) or 8 (ratio 128)
DSV4_STATE_BLOCK = {4: 4, 128: 8}


def _round_up(n: int, m: int) -> int:
    return cdiv(n, m) * m


def _dsv4_specs(layers: Sequence[Layer], start: int) -> list[tuple[str, PageSpec]]:
    """Each DeepSeek-V4 layer's caches as vLLM 0.33 builds them (fp8_ds_mla layout):
    DeepseekV4SWACache (a sliding window of 584-byte rows in 64-token blocks), on ratio-4/128
    layers the compressed MLAAttentionSpec (tokens_per_state = ratio: a 256-token block
    holds 256 / ratio entries) and the CompressorStateCache (fp32 kv + score, 2 * coff *
    head_dim a row, window coff * ratio), on ratio-4 layers the DeepseekV4IndexerCache keys
    (tokens_per_state 4) and the indexer's own compressor state."""
    out: list[tuple[str, PageSpec]] = []

    def add(name: str, kind: str, block: int, block_bytes: int, window: int = 0) -> None:
        page = _round_up(block_bytes, DSV4_ALIGNMENT)
        out.append((name, PageSpec(kind, block, page, page, window=window)))

    for i, layer in enumerate(layers):
        if not isinstance(layer, CompressedAttention):
            raise BadInputError(f"layer {start + i} is {layer.kind}; kvplan's vLLM DeepSeek-V4 "
                                "layout expects compressed attention on every layer")
        name = str(start + i)
        row = layer.entry_bytes(FP8_E4M3)  # 448 fp8 NoPE + 128 bf16 RoPE + 8 scale bytes
        add(f"{name}.swa", "sliding", DSV4_SWA_BLOCK, DSV4_SWA_BLOCK * row, layer.window)
        r = layer.ratio
        if not r:
            continue
        if r not in DSV4_STATE_BLOCK:
            raise BadInputError(f"layer {start + i} has compress ratio {r}; vLLM's compressor "
                                "takes 4 or 128")
        coff = 2 if r == 4 else 1
        block = DSV4_STATE_BLOCK[r]
        add(name, "mla", DSV4_BLOCK, DSV4_BLOCK // r * row)
        add(f"{name}.state", "sliding", block,
            block * 2 * coff * layer.head_dim * DSV4_STATE_BYTES, coff * r)
        if layer.index_head_dim:
            add(f"{name}.indexer", "mla", DSV4_BLOCK, DSV4_BLOCK // r * layer.index_entry_bytes())
            add(f"{name}.indexer.state", "sliding", block,
                block * 2 * coff * layer.index_head_dim * DSV4_STATE_BYTES, coff * r)
    return out


def _approximate_gcd(values: Sequence[int], lower_bound: int) -> int:
    """The divisor d >= lower_bound that rounds `values` up to multiples of d with the least
    total padding, the larger on ties (kv_cache_planning.py _approximate_gcd)."""
    best_d, best_pad = 0, -1
    for d in range(max(1, lower_bound), max(values) + 1):
        pad = sum(-x % d for x in values)
        if best_pad < 0 or pad <= best_pad:
            best_d, best_pad = d, pad
    return best_d


def _packed_groups(named: list[tuple[str, PageSpec]], config: VllmConfig
                   ) -> list[KVCacheGroup]:
    """vLLM 0.33 `_get_packed_kv_cache_groups` (block-outermost layouts, which the DeepSeek-V4
    backends use): layers of one type form a bucket; a bucket with as many layers of each page
    size is a repeating pattern, split into groups of `repeats` pattern repeats (chosen by
    _approximate_gcd, no fewer than the largest multi-page pattern); other buckets stay one
    group. Every group shares the block ids; a group's page is the sum of its layers'."""
    buckets: dict[str, list[tuple[str, PageSpec]]] = {}
    for name, s in named:
        buckets.setdefault(s.token_slots, []).append((name, s))
    infos = []
    for members in buckets.values():
        by_page: dict[int, list[tuple[str, PageSpec]]] = {}
        for name, s in members:
            by_page.setdefault(s.page_bytes, []).append((name, s))
        balanced = len({len(v) for v in by_page.values()}) == 1
        infos.append((members, by_page, balanced))
    floor = max((max(len(v) for v in by_page.values())
                 for _, by_page, balanced in infos if balanced and len(by_page) > 1), default=0)
    repeats = _approximate_gcd([max(len(v) for v in by_page.values())
                                for _, by_page, balanced in infos if balanced],
                               floor) if floor else None
    if repeats is None and any(s.kind in ("sliding", "mamba") for _, s in named):
        raise BadInputError("kvplan models vLLM's packed grouping only with a repeating "
                            "multi-page pattern (DeepSeek-V4)")
    groups = []
    for members, by_page, balanced in infos:
        most = max(len(v) for v in by_page.values())
        n = cdiv(most, repeats) if balanced and repeats else 1
        patterns = list(zip(*by_page.values(), strict=True)) if n > 1 else [tuple(members)]
        for j in range(n):
            chosen = [m for pattern in patterns[j::n] for m in pattern]
            first = chosen[0][1]
            groups.append(KVCacheGroup(
                first.kind, len(chosen), 1, first.block_size,
                sum(s.page_bytes for _, s in chosen),
                first.blocks_per_request(config.max_model_len, config), first.window,
                tuple(name for name, _ in chosen)))
    return groups


def _dsv4_stage(layers: Sequence[Layer], start: int, config: VllmConfig) -> StageLayout:
    if config.version < V033:
        raise BadInputError("kvplan models vLLM's DeepSeek-V4 cache from 0.33 on",
                            "use --engine-version 0.33")
    cc = _capability(config.compute_capability, config.gpu_name)
    if cc is not None and cc[0] not in (9, 10):
        # models/deepseek_v4/nvidia/model.py: DeepseekV4FlashMLAAttention (FlashMLA sparse,
        # fp8_ds_mla rows) on every CUDA GPU but SM 12.x (FlashInfer, plain rows); FlashMLA's
        # kernels run on SM 9.x/10.x only
        raise BadInputError(
            "kvplan models vLLM's DeepSeek-V4 cache on Hopper and Blackwell SM 10.x only "
            f"(FlashMLA sparse, fp8_ds_mla rows); {config.gpu_name or 'this GPU'} is "
            f"SM {cc[0]}.{cc[1]}", "plan it for an H100/H200/B200, or use `kvplan size` for "
            "its exact per-request bytes")
    named = _dsv4_specs(layers, start)
    groups = _packed_groups(named, config)
    return StageLayout(
        first_layer=start, last_layer=start + len(layers), groups=tuple(groups), group_size=1,
        # the widest group's page: every group's block id addresses that many bytes
        bytes_per_block=max(g.page_bytes for g in groups), num_padding_layers=0,
        padding_waste=Fraction(0), blocks_per_request=sum(g.blocks_per_request for g in groups),
        # kvplan's own average (CompressedAttention.token_bytes): window rows plus the
        # compressed entries and indexer keys spread over their ratio
        per_token_bytes=sum(x.token_bytes(FP8_E4M3) for x in layers
                            if isinstance(x, CompressedAttention)))


def held_blocks(group: KVCacheGroup, tokens: int, config: VllmConfig) -> int:
    """Blocks one request of `tokens` tokens holds in `group` at its peak, growing one token
    per step with no prefix caching (what the managers really hold, at most
    group_needs(...).units(tokens), the admission bound).

    Before computing token m the sliding-window manager frees blocks wholly before
    m - window (remove_skipped_blocks: (computed - window + 1) // block_size); the chunked
    manager frees those before the current chunk's start. A request that reached `tokens`
    passed through every shorter length, so the pool held the largest count.
    """
    bs = group.block_size
    if group.kind == "mamba":
        return group.blocks_per_request  # align mode: 2 + speculative + checkpoint pages
    if group.kind == "cross":
        return cdiv(group.encoder_tokens, bs)
    if group.kind == "sliding":
        w = group.window
        last = min(tokens, w + 2 * bs)  # periodic after this
        return max(cdiv(m, bs) - max(0, (m - w) // bs) for m in range(1, last + 1))
    if group.kind == "chunked":
        c = group.window
        period = c * bs // math.gcd(c, bs)
        last = min(tokens, period + c)
        return max(cdiv(m, bs) - ((m - 1) // c * c) // bs for m in range(1, last + 1))
    return cdiv(tokens, bs)


def blocks_for_request(stage: StageLayout, tokens: int, config: VllmConfig) -> int:
    """Blocks one request of `tokens` tokens needs in this stage (Σ over groups)."""
    return sum(group_needs(g, config).units(tokens) for g in stage.groups)


# --- the start-up numbers ------------------------------------------------------------------

@record
class VllmProfile:
    """What vLLM computes and logs at start-up for one deployment (per rank)."""

    schema: str
    version: str
    model: str
    kv_cache_dtype: str
    block_size: int
    tp: int
    pp: int
    max_model_len: int
    stages: tuple[StageLayout, ...]
    stage_available_bytes: tuple[int, ...]
    stage_num_blocks: tuple[int, ...]
    # the logged numbers
    available_kv_cache_bytes: int  # "Available KV cache memory" of the limiting worker
    num_blocks: int  # min over workers ("num_gpu_blocks")
    kv_cache_tokens: int  # "GPU KV cache size: N tokens" (version-dependent formula)
    max_concurrency: float  # "Maximum concurrency for L tokens per request: X.XXx"
    max_concurrency_exact: Fraction
    blocks_per_request: int
    num_kv_cache_groups: int
    num_padding_layers: int
    padding_waste: Fraction
    mamba_padding: Fraction  # "Padding mamba page size by X%" (0 when no Mamba layers)
    # derived
    usable_blocks: int  # num_blocks - 1: one block is the permanent null block
    physical_token_slots: int  # num_blocks x block size (the smallest group block size)
    bytes_per_block: int
    per_token_bytes: int  # the limiting stage, every layer still growing
    fits_max_model_len: bool  # the start-up check: one request of max_model_len fits
    estimated_max_model_len: int  # the largest length one request can have (search)
    num_cpu_blocks: int  # swap space / CPU offload blocks (0 when none given)

    def log_lines(self) -> list[str]:
        """The start-up lines as this vLLM version prints them."""
        from kvplan.engines import parse_version

        ver = parse_version(self.version) or LATEST
        gib = self.available_kv_cache_bytes / 2**30
        lines = [f"Available KV cache memory: {round(gib, 2)} GiB"]
        if ver >= V033:
            lines.append(f"GPU KV cache size: {self.kv_cache_tokens:,} tokens, Maximum "
                         f"concurrency for {self.max_model_len:,} tokens per request: "
                         f"{self.max_concurrency:.2f}x")
        else:
            lines.append(f"GPU KV cache size: {self.kv_cache_tokens:,} tokens")
            lines.append(f"Maximum concurrency for {self.max_model_len:,} tokens per "
                         f"request: {self.max_concurrency:.2f}x")
        return lines


def profile(spec: ModelSpec, config: VllmConfig,
            available_kv_cache_bytes: int | Sequence[int], cpu_swap_bytes: int = 0
            ) -> VllmProfile:
    """vLLM's block count, token line and concurrency for a KV budget (one int for every
    worker, or one per pipeline stage, as each worker measures its own)."""
    stages = layout(spec, config)
    if isinstance(available_kv_cache_bytes, int):
        budgets = (available_kv_cache_bytes,) * len(stages)
    else:
        budgets = tuple(int(b) for b in available_kv_cache_bytes)
        if len(budgets) != len(stages):
            raise BadInputError(f"got {len(budgets)} per-stage budgets for {len(stages)} "
                                "pipeline stages")
    stage_blocks = []
    for stage, budget in zip(stages, budgets, strict=True):
        if not stage.groups:
            stage_blocks.append(1)  # attention-free: vLLM still makes one (empty) block
            continue
        # general case: int(available // page // group_size), floored at 0
        stage_blocks.append(max(0, budget // stage.bytes_per_block))
    num_blocks = min(stage_blocks)
    if config.num_gpu_blocks_override is not None:
        num_blocks = config.num_gpu_blocks_override
    limiting = min(range(len(stages)), key=lambda i: (stage_blocks[i], i))
    stage = stages[limiting]
    bpr = max(1, max(s.blocks_per_request for s in stages))
    exact = Fraction(num_blocks, bpr)
    concurrency = num_blocks / bpr  # the engine's float
    block_sizes = [g.block_size for g in stage.groups] or [config.block_size or 16]
    if config.version >= TOKEN_LINE_FROM_CONCURRENCY:
        tokens = int(concurrency * config.max_model_len)
    else:
        # "Multiplying the GPU KV cache size by the dcp_world_size" (0.11 kv_cache_utils.py)
        tokens = num_blocks // max(1, len(stage.groups)) * min(block_sizes) * config.dcp
    mamba = [g for g in stage.groups if g.kind == "mamba"]
    mamba_padding = Fraction(0)
    if mamba:
        real = max(s.state_bytes(config.tp) for s in spec.layers
                   if isinstance(s, RecurrentState))
        mamba_padding = Fraction(mamba[0].page_bytes - real, real)
    # 0.33 keeps one block aside (the null block) when checking fit; 0.11 compares bytes.
    reserve = 1 if config.version >= V033 else 0
    fits = all(s.blocks_per_request <= num_blocks - reserve for s in stages)
    return VllmProfile(
        schema=SCHEMA, version=".".join(map(str, config.version)), model=spec.name,
        kv_cache_dtype=kv_format(spec, config.kv_cache_dtype).name,
        block_size=min(block_sizes), tp=config.tp, pp=config.pp,
        max_model_len=config.max_model_len, stages=stages,
        stage_available_bytes=budgets, stage_num_blocks=tuple(stage_blocks),
        available_kv_cache_bytes=budgets[limiting], num_blocks=num_blocks,
        kv_cache_tokens=tokens, max_concurrency=concurrency, max_concurrency_exact=exact,
        blocks_per_request=bpr, num_kv_cache_groups=len(stage.groups),
        num_padding_layers=stage.num_padding_layers, padding_waste=stage.padding_waste,
        mamba_padding=mamba_padding, usable_blocks=max(0, num_blocks - 1),
        physical_token_slots=num_blocks * min(block_sizes),
        bytes_per_block=stage.bytes_per_block, per_token_bytes=stage.per_token_bytes,
        fits_max_model_len=fits,
        estimated_max_model_len=_max_len_that_fits(stages, config, num_blocks - reserve),
        num_cpu_blocks=(cpu_swap_bytes // stage.bytes_per_block
                        if cpu_swap_bytes and stage.bytes_per_block else 0),
    )


def _max_len_that_fits(stages: Sequence[StageLayout], config: VllmConfig, blocks: int) -> int:
    """Binary search over the length, as vLLM's estimate_max_model_len does."""
    def fits(n: int) -> bool:
        return all(blocks_for_request(s, n, config) <= blocks for s in stages)

    if blocks <= 0 or not fits(1):
        return 0
    lo, hi = 1, config.max_model_len
    if fits(hi):
        return hi
    while lo + 1 < hi:  # invariant: fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


__all__ = ["VllmConfig", "VllmProfile", "PageSpec", "KVCacheGroup", "StageLayout", "layout",
           "profile", "kv_format", "default_block_size", "default_max_num_batched_tokens",
           "default_max_num_seqs", "default_gpu_memory_utilization", "blocks_for_request",
           "LATEST", "VllmEngine", "ENGINE", "config_for", "group_needs"]


# --- the engine plugin ---------------------------------------------------------------------

def _flag_dtype(name: str) -> str:
    """kvplan's KV dtype names -> vLLM's --kv-cache-dtype spelling of the same format."""
    return {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(name, name)


def batch_for(dep: Deployment) -> BatchSettings:
    """The scheduler's batch limits for a deployment (flags, else the version's defaults by
    GPU: kvplan.engines.vllm_profile.batch_settings)."""
    from kvplan.engines import parse_version
    from kvplan.engines.vllm_profile import batch_settings

    ver = parse_version(dep.engine_version) or LATEST
    return batch_settings(ver, dep.gpu_memory_bytes, dep.gpu_name, dep.context_limit(),
                          max_num_batched_tokens=dep.max_num_batched_tokens,
                          max_num_seqs=dep.max_num_seqs)


def expert_parallel_size(dep: Deployment) -> int:
    """GPUs the routed experts are spread over: with --enable-expert-parallel the EP group is
    the TP x DP ranks, each holding whole experts (config/parallel.py, fused_moe/config.py
    FusedMoEParallelConfig.make: ep_size = tp_size x dp_size); without it the experts are
    tensor-parallel over the same tp x dp ranks, the same bytes per GPU up to rounding."""
    if dep.spec.num_experts and (dep.expert_parallel or dep.dp > 1):
        return dep.tp * dep.dp
    return 1


def config_for(dep: Deployment) -> VllmConfig:
    """The vLLM settings a deployment implies (defaults by version and GPU filled in)."""
    from kvplan.engines import parse_version

    ver = parse_version(dep.engine_version) or LATEST
    if dep.num_speculative_tokens < 0:
        raise BadInputError(f"--num-speculative-tokens must be at least 0, got "
                            f"{dep.num_speculative_tokens}")
    return VllmConfig(
        max_model_len=dep.context_limit(), version=ver,
        kv_cache_dtype=_flag_dtype(dep.kv_dtype), block_size=dep.block_size, tp=dep.tp,
        pp=dep.pp, max_num_batched_tokens=batch_for(dep).max_num_batched_tokens,
        num_draft_layers=dep.num_draft_layers,
        num_speculative_tokens=dep.num_speculative_tokens, dcp=dep.dcp,
        gpu_name=f"{dep.gpu_name or ''} {dep.gpu_arch}".strip() or None,
        compute_capability=_arch_capability(dep.gpu_arch))


def _arch_capability(gpu_arch: str) -> str | None:
    """'hopper sm9.0' (Deployment.gpu_arch, from the catalog) -> '9.0'; None for ROCm
    targets ('cdna3 smgfx942') and unknown GPUs."""
    from kvplan.engines.base import compute_capability

    found = compute_capability(gpu_arch)
    return f"{found[0]}.{found[1]}" if found else None


def group_needs(group: KVCacheGroup, config: VllmConfig) -> Need:
    """How one request uses one KV-cache group's blocks (the per-request rule of §1.2 as a
    Need: whole blocks; a sliding window keeps W - 1 + T tokens and one block more; a chunk
    C + T; Mamba and cross attention a fixed number of blocks)."""
    t = config.in_flight_tokens()
    if group.kind in ("full", "mla"):
        # with DCP the manager's block covers block_size x dcp tokens, block_size per rank
        # (v1/core/single_type_kv_cache_manager.py: `self.block_size *= dcp_world_size`)
        return Need("full", group.block_size * config.dcp, shareable=True)
    if group.kind == "sliding":
        return Need("window", group.block_size, cap=group.window - 1 + t, extra_blocks=1)
    if group.kind == "chunked":
        return Need("window", group.block_size, cap=group.window + t)
    return Need("fixed", group.block_size, fixed=group.blocks_per_request)


# --- the launch command (`vllm serve`), read by kvplan.sources.launch -------------------------
# Flags from vllm/engine/arg_utils.py EngineArgs.add_cli_args (0.33). Those that change what the
# memory holds map to a deployment setting; the rest are read and ignored.
@functools.cache
def launch_flags() -> EngineLaunch:
    from kvplan.core.launch import EngineLaunch

    setting = {
        "--model": ("model", "str"), "--tensor-parallel-size": ("tp", "int"),
        "-tp": ("tp", "int"), "--pipeline-parallel-size": ("pp", "int"), "-pp": ("pp", "int"),
        "--data-parallel-size": ("dp", "int"), "-dp": ("dp", "int"),
        "--decode-context-parallel-size": ("dcp", "int"), "-dcp": ("dcp", "int"),
        "--enable-expert-parallel": ("expert_parallel", "flag"),
        "--max-model-len": ("max_model_len", "tokens"),
        "--gpu-memory-utilization": ("memory_fraction", "float"),
        "--kv-cache-dtype": ("kv_dtype", "str"), "--block-size": ("block_size", "int"),
        "--max-num-seqs": ("max_num_seqs", "int"),
        "--max-num-batched-tokens": ("max_num_batched_tokens", "int"),
        "--quantization": ("quantization", "str"), "-q": ("quantization", "str"),
        "--dtype": ("model_dtype", "str"),
        "--enforce-eager": ("enforce_eager", "flag"),
        "--kv-cache-memory-bytes": ("kv_memory_bytes", "int"),
        "--enable-prefix-caching": ("prefix_caching", "flag"),
        "--no-enable-prefix-caching": ("prefix_caching", "no-flag"),
        "--enable-chunked-prefill": ("chunked_prefill", "flag"),
        "--no-enable-chunked-prefill": ("chunked_prefill", "no-flag"),
        "--revision": ("revision", "str"), "--swap-space": ("swap_space_gib", "float"),
        # speculative decoding: a JSON object from 0.8 (its num_speculative_tokens is read),
        # a flag of its own before (0.4-0.7 EngineArgs)
        "--speculative-config": ("speculative_config", "json"),
        "--num-speculative-tokens": ("num_speculative_tokens", "int"),
    }
    ignored = ("--host", "--port", "--served-model-name", "--api-key", "--tokenizer",
               "--tokenizer-mode", "--download-dir", "--chat-template", "--tool-call-parser",
               "--reasoning-parser", "--seed", "--max-logprobs", "--root-path",
               "--uvicorn-log-level", "--allowed-origins", "--generation-config",
               "--distributed-executor-backend", "--config-format", "--load-format",
               "--tokenizer-revision", "--code-revision", "--response-role", "--ssl-keyfile",
               "--ssl-certfile", "--log-config-file", "--hf-overrides",
               "--override-generation-config", "--worker-cls", "--max-log-len")
    ignored_flags = ("--trust-remote-code", "--disable-log-requests", "--disable-log-stats",
                     "--enable-auto-tool-choice", "--disable-fastapi-docs",
                     "--enable-log-requests", "--disable-frontend-multiprocessing",
                     "--enable-prompt-tokens-details", "--enable-server-load-tracking")
    flags = {**setting, **{f: ("", "ignore") for f in ignored},
             **{f: ("", "ignore-flag") for f in ignored_flags}}
    return EngineLaunch("vllm", (("vllm", "serve"), ("-m", "vllm.entrypoints.openai.api_server"),
                                 ("-m", "vllm.entrypoints.api_server")),
                        images=("vllm/vllm-openai", "vllm-openai"), flags=flags,
                        positional="model")


# --- the cache as allocated (what `kvplan validate` builds with torch) ---------------------

CACHE_NOTE = ("vLLM: raw int8 block pools per layer group, block {block_size} (raised for "
              "attention + Mamba hybrids until a page holds a state), block 0 the null "
              "block; K and V planes per attention layer, one latent plane for MLA; each "
              "request holds the blocks it peaks at growing one token per step.")


def _stored(layer: Layer, group_kind: str) -> Layer:
    """The layer as a group of `group_kind` stores it: a sliding or chunked layer in a full
    group (vLLM turns the hybrid manager off for chunked attention) keeps every token."""
    from kvplan.core.layers import FullAttention

    if group_kind == "full" and isinstance(layer, ATTENTION_KINDS) \
            and not isinstance(layer, (FullAttention, CrossAttention)):
        return FullAttention(layer.num_kv_heads, layer.head_dim, layer.v_head_dim)
    return layer


def cache_layout(spec: ModelSpec, fmt: KVFormat, tokens: int, batch: int, *, tp: int = 1,
                 block_size: int | None = None) -> CacheLayout:
    """The block pools of one stage for `batch` requests of `tokens` tokens: the newest
    version's groups (`layout`), no prefix caching (a Mamba request holds one state page),
    max_model_len the requests' length, the blocks each request holds at its peak."""

    config = VllmConfig(max_model_len=max(1, tokens), block_size=block_size, tp=tp,
                        mamba_cache_mode="none")
    (stage,) = layout(spec, config, fmt)
    groups = []
    for g in stage.groups:
        members = []
        for name in g.layer_names:
            index, _, part = name.partition(".")
            original = spec.layers[int(index)]
            stored = _stored(original, g.kind)
            indexer = part == "indexer"
            if indexer and isinstance(stored, MLA) and stored.index_head_dim is None:
                stored = replace(stored, index_head_dim=INDEX_HEAD_DIM)
            members.append(CacheLayer(
                int(index), name, stored, original.kind, indexer,
                state=spec_state(stored, tp) if isinstance(stored, RecurrentState) else ()))
        groups.append(CacheGroup(tuple(members), g.block_size, held_blocks(g, tokens, config)))
    return CacheLayout(paged=True, block_tokens=block_size or default_block_size(spec),
                       batch=batch, groups=tuple(groups),
                       shared_tensors=stage.group_size if len(groups) > 1 else 0,
                       reserved_blocks=1, whole_tokens=True, note=CACHE_NOTE)


# --- its start-up log (read by kvplan.sources.startlog; units as the engine prints them) ---

LOG_FORMAT = EngineLog(
    "vllm", "vLLM",
    markers=(r"vLLM|vllm serve|gpu_worker\.py|kv_cache_utils\.py|Memory profiling "
             r"results|# GPU blocks:|GPU KV cache size:|Available KV cache memory"),
    figures=(
        ("version", r"vLLM API server version ([\w.+\-]+)", "str", "version"),
        ("version", r"Initializing a V[01] LLM engine \(v([\w.+\-]+)\)", "str", "version"),
        ("model", r"\bmodel='([^']+)'", "str", "model"),
        ("model", r"'model': '([^']+)'", "str", "model"),
        ("model", r"\bvllm serve ([^\s\\]+)", "str", "model"),
        ("max_model_len", r"\bmax_seq_len=(\d+)", "int", "settings"),
        ("max_model_len", r"'max_model_len': (\d+)", "int", "settings"),
        ("max_model_len", r"--max-model-len[= ](\d+)", "int", "settings"),
        ("tp", r"\btensor_parallel_size=(\d+)", "int", "settings"),
        ("tp", r"--tensor-parallel-size[= ](\d+)", "int", "settings"),
        ("pp", r"\bpipeline_parallel_size=(\d+)", "int", "settings"),
        ("pp", r"--pipeline-parallel-size[= ](\d+)", "int", "settings"),
        ("kv_dtype", r"\bkv_cache_dtype=(\w+)", "str", "settings"),
        ("block_size", r"'block_size': (\d+)", "int", "settings"),
        ("memory_fraction", r"gpu_memory_utilization=([\d.]+)", "num", "settings"),
        ("memory_fraction", r"'gpu_memory_utilization': ([\d.]+)", "num", "settings"),
        ("weights_bytes", r"Model loading took ([\d.]+) ?GiB", "gib", "weights"),
        ("gpu_total_bytes", r"total_gpu_memory=([\d.]+) ?GiB", "gib", "gpu"),
        ("non_torch_bytes", r"non_torch_memory=([\d.]+) ?GiB", "gib", "terms"),
        ("peak_torch_bytes", r"peak_torch_memory=([\d.]+) ?GiB", "gib", "terms"),
        ("cudagraph_bytes", r"Graph capturing finished in [\d.]+ secs?, took ([\d.]+) GiB",
         "gib", "terms"),
        ("available_kv_cache_bytes", r"Available KV cache memory: ([\d.]+) GiB", "gib", "kv"),
        ("available_kv_cache_bytes", r"kv_cache_size=([\d.]+) ?GiB", "gib", "kv"),
        ("num_blocks", r"# (?:GPU|cuda) blocks: (\d+)", "int", "kv"),
        ("kv_cache_tokens", r"GPU KV cache size: ([\d,]+) tokens", "int", "kv"),
        ("max_concurrency_tokens", r"Maximum concurrency for ([\d,]+) tokens per request",
         "int", "kv"),
        ("max_concurrency", r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x",
         "num", "kv"),
    ),
)


class VllmEngine(BaseEngine):
    name = "vllm"
    display_name = "vLLM"
    # vllm/config/cache.py `BlockSize = Literal[1, 8, 16, 32, 64, 128]`
    block_sizes = (1, 8, 16, 32, 64, 128)
    latest_version = LATEST
    kv_dtypes = KV_DTYPES
    smaller_kv_dtypes = SMALLER_KV_DTYPES
    cache_variants = ("",)  # `validate --layout vllm` allocates cache_layout()
    models_compressed_attention = True  # DeepSeek-V4 on Hopper (_dsv4_stage)

    def capacity(self, dep: Deployment) -> Capacity:
        from kvplan.engines.base import weights_per_gpu
        from kvplan.engines.budget import measured_budget, vllm_budget

        config = config_for(dep)
        if dep.kv_memory_bytes is not None:
            budget = measured_budget(dep.kv_memory_bytes, self.name,
                                     ".".join(map(str, config.version)), dep.pp)
        else:
            assert dep.gpu_memory_bytes is not None
            budget = vllm_budget(
                dep.spec, dep.gpu_memory_bytes, version=config.version, tp=dep.tp, pp=dep.pp,
                gpu_memory_utilization=dep.memory_fraction, weights=dep.weights_dtype,
                weights_bytes=dep.weights_bytes, activation_bytes=dep.activation_bytes,
                non_torch_bytes=dep.non_torch_bytes, cudagraph_bytes=dep.cudagraph_bytes,
                max_num_batched_tokens=config.max_num_batched_tokens,
                max_num_seqs=dep.max_num_seqs, dims=dep.dims, gpu_name=dep.gpu_name,
                gpu_arch=dep.gpu_arch, max_model_len=config.max_model_len,
                enforce_eager=dep.enforce_eager, ep=expert_parallel_size(dep), dp=dep.dp,
                flashinfer_sampler=bool(dep.flashinfer_sampler),
                num_draft_layers=dep.num_draft_layers,
                num_speculative_tokens=dep.num_speculative_tokens)
        prof = profile(dep.spec, config, budget.available_kv_cache_bytes)
        constraints = []
        for i, stage in enumerate(prof.stages):
            needs = tuple(group_needs(g, config) for g in stage.groups)
            name = "KV blocks" + (f" (stage {i})" if len(prof.stages) > 1 else "")
            # every worker allocates the min over workers; one block is the permanent null
            # block (block_pool.py)
            constraints.append(Constraint(name, "block", prof.usable_blocks, needs))
        # the scheduler never runs more than max_num_seqs requests at once
        # (core/sched/scheduler.py: `len(self.running) == self.max_num_running_reqs`)
        pool = Pool(self.name, tuple(constraints), config.max_model_len,
                    max_requests=batch_for(dep).max_num_seqs, tokens_per_unit=prof.block_size,
                    reserved_units=1, max_requests_setting="max_num_seqs", replicas=dep.dp)
        return Capacity(dep, budget, prof, pool, prof.kv_cache_dtype,
                        max(budget.weights_bytes) or weights_per_gpu(dep), prof.per_token_bytes,
                        budget.notes)

    def numbers(self, cap: Capacity) -> dict[str, Any]:
        p: VllmProfile = cap.engine_profile
        return {"available_kv_cache_bytes": p.available_kv_cache_bytes,
                "num_blocks": p.num_blocks, "block_size": p.block_size,
                "kv_cache_tokens": p.kv_cache_tokens, "max_concurrency": p.max_concurrency,
                "max_concurrency_fraction": f"{p.max_concurrency_exact.numerator}/"
                                            f"{p.max_concurrency_exact.denominator}",
                "max_model_len": p.max_model_len, "blocks_per_request": p.blocks_per_request,
                "num_kv_cache_groups": p.num_kv_cache_groups,
                "num_padding_layers": p.num_padding_layers,
                "bytes_per_block": p.bytes_per_block,
                "fits_max_model_len": p.fits_max_model_len,
                "estimated_max_model_len": p.estimated_max_model_len}

    def kv_budget_bytes(self, cap: Capacity) -> int:
        return int(cap.engine_profile.available_kv_cache_bytes)

    def token_capacity(self, cap: Capacity) -> int:
        p: VllmProfile = cap.engine_profile
        return p.num_blocks * p.block_size

    def sizing_format(self, cap: Capacity) -> KVFormat:
        return kv_format(cap.deployment.spec, _flag_dtype(cap.deployment.kv_dtype))

    def start_check(self, cap: Capacity) -> StartCheck:
        # the start-up check: one request of max_model_len must fit, else vLLM exits
        p: VllmProfile = cap.engine_profile
        return StartCheck(p.fits_max_model_len, p.estimated_max_model_len)

    def concurrency_limit(self, dep: Deployment) -> tuple[int, str] | None:
        return batch_for(dep).max_num_seqs, "max_num_seqs"

    def launch_overrides(self, image: str | None, image_version: str | None,
                         env: dict[str, str]) -> dict[str, Any]:
        """The sampler a launch implies: VLLM_USE_FLASHINFER_SAMPLER when set; else the
        vllm/vllm-openai image (it installs flashinfer: docker/Dockerfile) of 0.8-0.11, whose
        V1 sampler takes FlashInfer whenever it is importable (topk_topp_sampler.py:
        `VLLM_USE_FLASHINFER_SAMPLER is not False`)."""
        from kvplan.engines import parse_version
        from kvplan.engines.vllm_profile import FLASHINFER_DEFAULT_UNTIL, V1_DEFAULT

        flag = env.get("VLLM_USE_FLASHINFER_SAMPLER")
        if flag in ("0", "1"):
            return {"flashinfer_sampler": flag == "1"}
        ver = parse_version(image_version) if image_version else None
        if image and "vllm-openai" in image and ver is not None and \
                V1_DEFAULT <= ver < FLASHINFER_DEFAULT_UNTIL:
            return {"flashinfer_sampler": True}
        return {}

    def host_blocks(self, cap: Capacity, context_tokens: int | None = None) -> HostBlocks:
        # swap space / CPU offload: whole blocks of the same layout ("# CPU blocks")
        p: VllmProfile = cap.engine_profile
        need = cap.pool.constraints[0].units(context_tokens) if context_tokens else 0
        return HostBlocks(p.bytes_per_block, p.block_size, need)

    def launch(self) -> EngineLaunch:
        return launch_flags()

    def defaults(self, spec: ModelSpec, gpu_name: str | None = None,
                 gpu_memory_bytes: int | None = None,
                 version: str | None = None) -> dict[str, Any]:
        from kvplan.engines import parse_version

        ver = parse_version(version) or LATEST
        return {"block_size": default_block_size(spec, gpu_name),
                "gpu_memory_utilization": default_gpu_memory_utilization(ver),
                "max_num_batched_tokens": default_max_num_batched_tokens(
                    gpu_memory_bytes, gpu_name, version=ver),
                "max_num_seqs": min(default_max_num_seqs(gpu_memory_bytes, gpu_name, ver),
                                    default_max_num_batched_tokens(
                                        gpu_memory_bytes, gpu_name, version=ver))}


    def cache_layout(self, spec: ModelSpec, fmt: KVFormat, tokens: int, batch: int, *,
                     tp: int = 1, block_size: int | None = None, max_len: int | None = None,
                     variant: str = "") -> CacheLayout:
        return cache_layout(spec, fmt, tokens, batch, tp=tp, block_size=block_size)


    def log_format(self) -> EngineLog:
        return LOG_FORMAT

ENGINE = VllmEngine()
