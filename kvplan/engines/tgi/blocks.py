"""Text Generation Inference (TGI, `text-generation-launcher`): the KV blocks its warm-up
leaves room for and the "Setting max batch total tokens to N" line its router prints.

TGI sizes its cache after a warm-up prefill (huggingface/text-generation-inference,
`server/text_generation_server/models/flash_causal_lm.py::FlashCausalLM.warmup`): the free
memory under `MEMORY_FRACTION * TGI_WIGGLE_ROOM` divided by `total_cache_size` (K and V for
every layer, no sliding-window savings), plus the warm-up's own blocks, times BLOCK_SIZE
(by attention backend, `models/globals.py`). The wiggle room and where it applies change by
release (`TGI_RELEASES`, 0.9.4 to 3.3); before 0.9.4 kvplan refuses to size it from memory.
Each rule with its file, and the release table: docs/engine-kv-sizing.md §7.1.
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
    PREFILL_CHECK_BEFORE,
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


def given_batch_total(dep: Deployment, version: tuple[int, ...] | None) -> str | None:
    """--max-batch-total-tokens as TGI takes it on a flash-attention model (0.9.4 on): the
    launcher checks it against --max-total-tokens (every release) and
    --max-batch-prefill-tokens (before PREFILL_CHECK_BEFORE) and refuses to start where one is
    larger (launcher/src/main.rs); then the router keeps the warm-up's figure and warns
    "`--max-batch-total-tokens` is deprecated for Flash Attention models" (router/src/main.rs
    to 2.0, router/src/server.rs 2.1-2.2, backends/v3/src/lib.rs `connect_backend` from 2.3).
    The note that says so, or None when the flag is not given."""
    total = dep.max_batch_total_tokens
    if total is None:
        return None
    hint = "raise --max-batch-total-tokens or leave it out (TGI sizes the batch itself)"
    if dep.max_model_len is not None and dep.max_model_len > total:
        raise BadInputError(f"TGI refuses --max-total-tokens {dep.max_model_len:,} above "
                            f"--max-batch-total-tokens {total:,} (launcher: \"`max_total_tokens`"
                            " must be <= `max_batch_total_tokens`\")", hint)
    prefill = dep.max_num_batched_tokens
    if prefill is not None and prefill > total and version is not None and \
            version < PREFILL_CHECK_BEFORE:
        raise BadInputError(f"TGI {'.'.join(map(str, version))} refuses "
                            f"--max-batch-prefill-tokens {prefill:,} above "
                            f"--max-batch-total-tokens {total:,} (launcher, up to 2.3: "
                            "\"`max_batch_prefill_tokens` must be <= `max_batch_total_tokens`\")",
                            hint)
    return (f"--max-batch-total-tokens {total:,}: ignored on flash-attention models, which "
            "keep the warm-up's figure (TGI's router: \"`--max-batch-total-tokens` is "
            "deprecated for Flash Attention models\")")


def profile(spec: ModelSpec, dep: Deployment, compute_major: int | None) -> TgiProfile:
    from kvplan.engines import parse_version
    from kvplan.engines.shared.activations import forward_activation_bytes
    from kvplan.engines.shared.device import NON_TORCH_BYTES, is_rocm
    from kvplan.engines.shared.weights import estimate_dims

    fmt = kv_format(spec, dep.kv_dtype)
    version = parse_version(dep.engine_version)
    wiggle, rule = release_rule(version)
    attention = attention_backend(spec, compute_major, version, is_rocm(dep.gpu_arch))
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
