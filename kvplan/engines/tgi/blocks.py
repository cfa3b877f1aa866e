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

import math

from kvplan.core.dtypes import KVFormat
from kvplan.core.errors import BadInputError, NoKVMemoryError
from kvplan.core.layers import ATTENTION_KINDS, CrossAttention
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec
from kvplan.engines.base import Deployment, weights_per_gpu
from kvplan.engines.tgi.config import (
    BLOCK_SIZES,
    DEFAULT_PREFILL_TOKENS,
    MEMORY_FRACTION,
    SCHEMA,
    attention_backend,
    kv_format,
    release_rule,
)


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
