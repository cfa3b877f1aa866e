"""Text Generation Inference (TGI, `text-generation-launcher`): the KV blocks its warm-up
leaves room for and the "Setting max batch total tokens to N" line its router prints.

From TGI's source (huggingface/text-generation-inference, server/text_generation_server):
- `models/flash_causal_lm.py::FlashCausalLM.warmup`: after loading the weights, a prefill of
  `max_batch_prefill_tokens` runs (its KV blocks allocated), then
      free_memory = get_free_memory(device, MEMORY_FRACTION * TGI_WIGGLE_ROOM)
      num_blocks  = int(free_memory // total_cache_size) + batch_num_blocks
  and it returns `num_blocks * BLOCK_SIZE`, which the router logs as the max batch total tokens.
- `utils/import_utils.py::get_cuda_free_memory`:
      free = max(0, mem_get_info free - (1 - memory_fraction) * total)
  so, with the warm-up's own blocks added back, num_blocks = floor((total x fraction x wiggle
  - weights - activation peak - CUDA context) / total_cache_size).
- `total_cache_size = num_layers * BLOCK_SIZE * num_kv_heads * head_size * 2 * dtype_size`
  (K and V for every layer, heads per shard; every layer gets a full cache: no sliding-window
  savings).
- `models/globals.py`: TGI_WIGGLE_ROOM 0.90 (env), BLOCK_SIZE by attention backend: flashinfer
  1, flashdecoding 256, paged 16; `utils/dist.py`: MEMORY_FRACTION = CUDA_MEMORY_FRACTION
  (launcher --cuda-memory-fraction, default 1.0).
- Per release (`TGI_RELEASES`): 0.9.4 (the first to size max_batch_total_tokens from
  memory) to 1.4.0 take the free memory as it is, `int(free_memory // total_cache_size)`;
  1.4.1 to 2.4 multiply it by a wiggle room, `int(free_memory * 0.95 // total_cache_size)`
  (1.4.1-2.2: a literal 0.95; 2.3: TGI_WIGGLE_ROOM 0.95; 2.4: 0.90); from 3.0 it multiplies
  the fraction, `get_free_memory(device, MEMORY_FRACTION * TGI_WIGGLE_ROOM)` (3.0: 0.95;
  3.1-3.2: 0.93; 3.3: 0.90). Before 0.9.4 the router takes --max-batch-total-tokens (default
  16,000) and kvplan refuses to size it from memory. Before 2.3 the
  block size is 16 (paged attention; `models/cache_manager.py` BLOCK_SIZE); ROCm builds keep
  paged attention (16) in every release.
- `launcher/src/main.rs::resolve_attention` (2.3 on): flashinfer by default; head dims other
  than 64, 128, 256 (and falcon / deepseek_v2) fall back to flashdecoding, or to paged on GPUs below
  compute capability 8.0. `max_batch_prefill_tokens` defaults to 4096 (capped at
  max_position_embeddings; the launcher may lower it further from a FLOPs estimate).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

from kvplan.core.dtypes import BF16, FP8_E4M3, FP8_E5M2, FP16, KVFormat
from kvplan.core.errors import BadInputError, NoKVMemoryError
from kvplan.core.launch import EngineLog, LogLine
from kvplan.core.layers import ATTENTION_KINDS, CrossAttention
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec
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

if TYPE_CHECKING:
    from kvplan.core.launch import EngineLaunch

SCHEMA = "kvplan.engine.tgi/1"
WIGGLE_ROOM = 0.90  # TGI_WIGGLE_ROOM default (models/globals.py, 3.3)
# (first release, wiggle room, what it multiplies): "free" = (total x fraction - used) x wiggle
# (flash_causal_lm.warmup up to 2.4), "fraction" = total x fraction x wiggle - used (3.0 on)
TGI_RELEASES: tuple[tuple[tuple[int, ...], float, str], ...] = (
    ((0, 9, 4), 1.0, "free"), ((1, 4, 1), 0.95, "free"), ((2, 3), 0.95, "free"),
    ((2, 4), 0.90, "free"),
    ((3, 0), 0.95, "fraction"), ((3, 1), 0.93, "fraction"), ((3, 3), WIGGLE_ROOM, "fraction"))
RESOLVED_ATTENTION = (2, 3)  # the launcher picks the attention backend from this release
MEMORY_FRACTION = 1.0  # CUDA_MEMORY_FRACTION / --cuda-memory-fraction default
DEFAULT_PREFILL_TOKENS = 4096  # launcher default max_batch_prefill_tokens
BLOCK_SIZES = {"flashinfer": 1, "flashdecoding": 256, "paged": 16}
FLASHINFER_HEAD_DIMS = (64, 128, 256)
KV_DTYPES = ("auto", "fp8_e4m3fn", "fp8_e5m2")
_FORMATS = {"bf16": BF16, "fp16": FP16, "fp8_e4m3fn": FP8_E4M3, "fp8_e5m2": FP8_E5M2}


def kv_format(spec: ModelSpec, kv_cache_dtype: str = "auto") -> KVFormat:
    """The model's dtype unless --kv-cache-dtype fp8_e4m3fn / fp8_e5m2."""
    return named_kv_format(spec, kv_cache_dtype, _FORMATS, "TGI", KV_DTYPES)


def release_rule(version: tuple[int, ...] | None) -> tuple[float, str]:
    """(wiggle room, what it multiplies) for a TGI release; the newest rule without one."""
    found = TGI_RELEASES[-1]
    if version is not None:
        known = [r for r in TGI_RELEASES if version >= r[0]]
        if not known:
            raise BadInputError(
                f"TGI {'.'.join(map(str, version))} does not size its batch from memory: "
                "before 0.9.4 the router takes --max-batch-total-tokens (default 16,000)",
                "give --engine-version 0.9.4 or newer, or --kv-memory")
        found = known[-1]
    return found[1], found[2]


def attention_backend(spec: ModelSpec, compute_major: int | None,
                      version: tuple[int, ...] | None = None, rocm: bool = False) -> str:
    """launcher resolve_attention: flashinfer unless the head dim (or the GPU) rules it out;
    paged attention before 2.3 and on ROCm."""
    if rocm or (version is not None and version[:2] < RESOLVED_ATTENTION):
        return "paged"
    heads = {layer.head_dim for layer in spec.layers if isinstance(layer, ATTENTION_KINDS)}
    fallback = "paged" if compute_major is not None and compute_major < 8 else "flashdecoding"
    if not heads <= set(FLASHINFER_HEAD_DIMS) or (spec.family or "") in ("falcon",
                                                                          "deepseek_v2"):
        return fallback
    return "flashinfer"


@record
class TgiProfile:
    schema: str
    attention: str
    block_size: int
    bytes_per_block: int  # total_cache_size: every layer's K and V for one block
    kv_budget_bytes: int  # total x fraction x wiggle - weights - activation - CUDA context
    num_blocks: int
    max_batch_total_tokens: int
    max_batch_prefill_tokens: int
    memory_fraction: float
    wiggle_room: float

    def log_lines(self) -> list[str]:
        return [f"KV-cache blocks: {self.num_blocks}, size: {self.block_size}",
                f"Setting max batch total tokens to {self.max_batch_total_tokens}"]


def bytes_per_block(spec: ModelSpec, fmt: KVFormat, tp: int, block_size: int) -> int:
    """total_cache_size: num_layers x BLOCK_SIZE x kv_heads per shard x head_size x 2 x dtype."""
    layers = [layer for layer in spec.layers if isinstance(layer, ATTENTION_KINDS)
              and not isinstance(layer, CrossAttention)]
    if len(layers) != spec.num_layers:
        kinds = sorted({layer.kind for layer in spec.layers})
        raise BadInputError(f"kvplan's TGI profile covers models whose every layer is "
                            f"K/V attention; {spec.name} has {', '.join(kinds)} layers")
    return sum(block_size * layer.token_bytes(fmt, tp) for layer in layers)


def profile(spec: ModelSpec, dep: Deployment, compute_major: int | None) -> TgiProfile:
    from kvplan.engines import parse_version
    from kvplan.engines.shared.activations import forward_activation_bytes
    from kvplan.engines.shared.device import NON_TORCH_BYTES
    from kvplan.engines.shared.weights import estimate_dims

    fmt = kv_format(spec, dep.kv_dtype)
    version = parse_version(dep.engine_version)
    wiggle, rule = release_rule(version)
    attention = attention_backend(spec, compute_major, version, "gfx" in (dep.gpu_arch or ""))
    block = dep.block_size or BLOCK_SIZES[attention]
    per_block = bytes_per_block(spec, fmt, dep.tp, block)
    fraction = dep.memory_fraction if dep.memory_fraction is not None else MEMORY_FRACTION
    prefill = dep.max_num_batched_tokens or min(DEFAULT_PREFILL_TOKENS,
                                                spec.max_context_tokens or 10**9)
    weights = 0
    if dep.kv_memory_bytes is not None:
        budget = dep.kv_memory_bytes
    else:
        if dep.gpu_memory_bytes is None:
            raise BadInputError("TGI's budget needs the GPU's memory", "give --gpu")
        weights = weights_per_gpu(dep)
        acts = dep.activation_bytes if dep.activation_bytes is not None else \
            forward_activation_bytes(dep.dims or estimate_dims(spec), prefill, dep.tp)
        context = dep.non_torch_bytes if dep.non_torch_bytes is not None else NON_TORCH_BYTES
        if rule == "fraction":
            budget = math.floor(dep.gpu_memory_bytes * fraction * wiggle) - weights - acts \
                - context
        else:
            budget = math.floor((math.floor(dep.gpu_memory_bytes * fraction) - weights - acts
                                 - context) * wiggle)
    if budget < per_block:
        # the engine would not start: exit 1 as for every engine (core.errors.NoKVMemoryError)
        raise NoKVMemoryError(f"no memory is left for the KV cache: TGI would find "
                              f"{budget:,} bytes for KV blocks of {per_block:,}",
                              "use more GPUs (--num-shard), a larger --cuda-memory-fraction or "
                              "a smaller --max-batch-prefill-tokens", engine="TGI",
                              left_bytes=budget, weights_bytes=weights,
                              memory_bytes=dep.gpu_memory_bytes or 0)
    blocks = budget // per_block
    return TgiProfile(SCHEMA, attention, block, per_block, budget, blocks, blocks * block,
                      prefill, fraction, wiggle)


@functools.cache
def launch_flags() -> EngineLaunch:
    """`text-generation-launcher` flags (launcher/src/main.rs Args)."""
    from kvplan.core.launch import EngineLaunch

    setting = {
        "--model-id": ("model", "str"), "--revision": ("revision", "str"),
        "--num-shard": ("tp", "int"), "--quantize": ("quantization", "str"),
        "--dtype": ("model_dtype", "str"), "--kv-cache-dtype": ("kv_dtype", "str"),
        "--max-total-tokens": ("max_model_len", "tokens"),
        "--max-input-tokens": ("max_input_tokens", "tokens"),
        "--max-input-length": ("max_input_tokens", "tokens"),
        "--max-batch-prefill-tokens": ("max_num_batched_tokens", "int"),
        "--max-batch-total-tokens": ("max_batch_total_tokens", "int"),
        "--max-batch-size": ("max_num_seqs", "int"),
        "--cuda-memory-fraction": ("memory_fraction", "float"),
        "--cuda-graphs": ("cuda_graphs", "str"),
    }
    ignored = ("--port", "--hostname", "--max-concurrent-requests", "--max-best-of",
               "--max-stop-sequences", "--max-top-n-tokens", "--waiting-served-ratio",
               "--max-waiting-tokens", "--huggingface-hub-cache", "--weights-cache-override",
               "--api-key", "--shard-uds-path", "--master-addr", "--master-port",
               "--tokenizer-config-path", "--otlp-endpoint", "--payload-limit", "--sharded")
    flags = {**setting, **{f: ("", "ignore") for f in ignored},
             "--trust-remote-code": ("", "ignore-flag"), "--json-output": ("", "ignore-flag")}
    return EngineLaunch("tgi", (("text-generation-launcher",),),
                        images=("huggingface/text-generation-inference",
                                "text-generation-inference"), flags=flags)


# --- its start-up log (read by kvplan.sources.startlog; units as the engine prints them) ---

LOG_FORMAT = EngineLog(
    "tgi", "TGI",
    markers=(r"text_generation_(?:launcher|router)|Setting max batch total tokens"),
    figures=(
        LogLine("model", "model_id:", r"model_id: \"([^\"]+)\"", "str", "model"),
        LogLine("tp", "num_shard:", r"num_shard: Some\((\d+)\)", "int", "settings"),
        LogLine("max_model_len", "max_total_tokens:", r"max_total_tokens: (?:Some\()?(\d+)",
                "int", "settings"),
        LogLine("memory_fraction", "cuda_memory_fraction:", r"cuda_memory_fraction: ([\d.]+)",
                "num", "settings"),
        LogLine("max_batch_prefill_tokens", "max_batch_prefill_tokens:",
                r"max_batch_prefill_tokens: (?:Some\()?(\d+)", "int", "settings"),
        LogLine("num_blocks", "KV-cache blocks:", r"KV-cache blocks: (\d+), size: \d+", "int",
                "kv", "blocks"),
        LogLine("block_size", "KV-cache blocks:", r"KV-cache blocks: \d+, size: (\d+)", "int",
                "kv", "tokens"),
        LogLine("max_batch_total_tokens", "Setting max batch total tokens to",
                r"Setting max batch total tokens to (\d+)", "int", "kv", "tokens"),
    ),
)


class TgiEngine(BaseEngine):
    name = "tgi"
    display_name = "TGI"
    kv_dtypes = KV_DTYPES
    smaller_kv_dtypes = ("fp8_e4m3fn",)

    def capacity(self, dep: Deployment) -> Capacity:
        if dep.pp != 1:
            raise BadInputError("TGI shards tensors only (--num-shard); it has no pipeline "
                                "parallelism", "use --tp")
        capability = dep.compute_capability
        prof = profile(dep.spec, dep, capability[0] if capability else None)
        pool = Pool(self.name, (Constraint("KV blocks", "block", prof.num_blocks,
                                           (Need("full", prof.block_size,
                                                 shareable=True),)),),
                    dep.context_limit(), tokens_per_unit=prof.block_size)
        fmt = kv_format(dep.spec, dep.kv_dtype)
        return Capacity(dep, self, None, prof, pool, fmt.name, weights_per_gpu(dep),
                        prof.bytes_per_block // prof.block_size,
                        (f"attention {prof.attention}, BLOCK_SIZE {prof.block_size}",
                         f"cuda_memory_fraction {prof.memory_fraction} x TGI_WIGGLE_ROOM "
                         f"{prof.wiggle_room}"))

    def numbers(self, cap: Capacity) -> dict[str, Any]:
        p: TgiProfile = cap.engine_profile
        return {"kv_budget_bytes": p.kv_budget_bytes, "num_blocks": p.num_blocks,
                "block_size": p.block_size, "bytes_per_block": p.bytes_per_block,
                "max_batch_total_tokens": p.max_batch_total_tokens,
                "max_batch_prefill_tokens": p.max_batch_prefill_tokens}

    def kv_budget_bytes(self, cap: Capacity) -> int:
        return int(cap.engine_profile.kv_budget_bytes)

    def token_capacity(self, cap: Capacity) -> int:
        return int(cap.engine_profile.max_batch_total_tokens)

    def sizing_format(self, cap: Capacity) -> KVFormat:
        return kv_format(cap.deployment.spec, cap.deployment.kv_dtype)

    def launch(self) -> EngineLaunch:
        return launch_flags()

    def defaults(self, spec: ModelSpec, gpu_name: str | None = None,
                 gpu_memory_bytes: int | None = None,
                 version: str | None = None) -> dict[str, Any]:
        return {"cuda_memory_fraction": MEMORY_FRACTION, "wiggle_room": WIGGLE_ROOM,
                "max_batch_prefill_tokens": DEFAULT_PREFILL_TOKENS}


    def log_format(self) -> EngineLog:
        return LOG_FORMAT

ENGINE = TgiEngine()
