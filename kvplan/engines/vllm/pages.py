"""One layer's KV-cache page as vLLM builds it (`vllm/v1/kv_cache_interface.py`).

A page is the bytes one layer needs for one block of `block_size` tokens (`AttentionSpec`,
`SlidingWindowSpec`, `ChunkedLocalAttentionSpec`, `MLAAttentionSpec`, `MambaSpec`,
`CrossAttentionSpec`), after the block-size rules: the MLA backend's block size, the hybrid
attention/Mamba alignment and Mamba page padding, and sliding/chunked layers turned full
when the hybrid manager is off. Per request a page kind needs `cdiv(len, bs)` blocks (full,
MLA), `cdiv(min(W-1+T, len), bs)+1` (sliding), `cdiv(min(C+T, len), bs)` (chunked), or one
or two pages (Mamba) (`max_memory_usage_bytes`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar

from kvplan.core.dtypes import KVFormat, cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.layers import (
    ATTENTION_KINDS,
    MLA,
    ChunkedLocal,
    CrossAttention,
    Layer,
    NoCache,
    RecurrentState,
    SlidingWindow,
)
from kvplan.core.record import record
from kvplan.core.sizing import pp_stages
from kvplan.core.spec import ModelSpec
from kvplan.engines.base import Need
from kvplan.engines.vllm.backends import (
    checkpoint_blocks,
    default_block_size,
    prefill_checkpoint_alignment,
)
from kvplan.engines.vllm.config import HYBRID_ALIGN_BLOCK, VllmConfig
from kvplan.engines.vllm.formats import INDEXER_BYTES_PER_TOKEN, is_sparse_mla, kv_format

# --- per-layer specs -----------------------------------------------------------------------

@record
class PageSpec:
    """One layer's KV-cache spec as vLLM builds it: a block of `block_size` tokens takes
    `page_bytes` (Mamba: padded to the attention page; `real_page_bytes` before padding).
    One subclass per spec kind, as vLLM keeps one KVCacheSpec class per layer kind
    (v1/kv_cache_interface.py); each says how one request uses its blocks (`need`, the
    admission rule, from the spec's max_memory_usage_bytes) and how many it holds at its peak
    (`held_blocks`, what the managers keep as a request grows)."""

    kind: ClassVar[str] = ""  # how vLLM's logs and kvplan's tables name the kind

    block_size: int
    page_bytes: int
    real_page_bytes: int

    def need(self, config: VllmConfig) -> Need:
        """How one request uses this kind's blocks (the per-request rule)."""
        raise NotImplementedError

    def held_blocks(self, tokens: int, config: VllmConfig) -> int:
        """Blocks one request of `tokens` tokens holds at its peak, growing one token per
        step with no prefix caching (at most `need(config).units(tokens)`)."""
        raise NotImplementedError

    def blocks_per_request(self, max_model_len: int, config: VllmConfig) -> int:
        """cdiv(max_memory_usage_bytes, page) for one request of max_model_len: the need at
        that length (the one per-request rule, `need`)."""
        return self.need(config).units(max_model_len)

    @property
    def token_slots(self) -> PageSpec:
        """What decides the token-slot needs (the spec without its page bytes); layers of
        one type share it."""
        return replace(self, page_bytes=0, real_page_bytes=0)


@record
class FullPage(PageSpec):
    """FullAttentionSpec: every token of the request."""

    kind = "full"

    def need(self, config: VllmConfig) -> Need:
        # kv_cache_interface.py: each DCP rank keeps cdiv(max_model_len, dcp) tokens; the
        # manager's block covers block_size x dcp tokens, block_size per rank
        # (v1/core/single_type_kv_cache_manager.py: `self.block_size *= dcp_world_size`)
        return Need("full", self.block_size * config.dcp, shareable=True)

    def held_blocks(self, tokens: int, config: VllmConfig) -> int:
        return cdiv(tokens, self.block_size)


@record
class MlaPage(FullPage):
    """MLAAttentionSpec: one latent per token (and the DSA indexer keys), every token."""

    kind = "mla"


@record
class SlidingPage(PageSpec):
    """SlidingWindowSpec: the last `window` tokens and the tokens in flight."""

    window: int
    kind = "sliding"

    def need(self, config: VllmConfig) -> Need:
        # W - 1 + T tokens; the window may start mid-block, hence one block more
        return Need("window", self.block_size, cap=self.window - 1 + config.in_flight_tokens(),
                    extra_blocks=1)

    def held_blocks(self, tokens: int, config: VllmConfig) -> int:
        # before computing token m the manager frees the blocks wholly before m - window
        # (remove_skipped_blocks: (computed - window + 1) // block_size); a request that
        # reached `tokens` passed through every shorter length, so it held the largest count
        bs, w = self.block_size, self.window
        last = min(tokens, w + 2 * bs)  # periodic after this
        return max(cdiv(m, bs) - max(0, (m - w) // bs) for m in range(1, last + 1))


@record
class ChunkedPage(PageSpec):
    """ChunkedLocalAttentionSpec: the current chunk of `window` tokens and those in flight."""

    window: int  # the attention chunk
    kind = "chunked"

    def need(self, config: VllmConfig) -> Need:
        return Need("window", self.block_size, cap=self.window + config.in_flight_tokens())

    def held_blocks(self, tokens: int, config: VllmConfig) -> int:
        # the manager frees the blocks before the current chunk's start
        bs, c = self.block_size, self.window
        period = c * bs // math.gcd(c, bs)
        last = min(tokens, period + c)
        return max(cdiv(m, bs) - ((m - 1) // c * c) // bs for m in range(1, last + 1))


@record
class CrossPage(PageSpec):
    """CrossAttentionSpec: the encoder's tokens, whatever the request's length."""

    encoder_tokens: int
    kind = "cross"

    def need(self, config: VllmConfig) -> Need:
        return Need("fixed", self.block_size, fixed=cdiv(self.encoder_tokens, self.block_size))

    def held_blocks(self, tokens: int, config: VllmConfig) -> int:
        return cdiv(self.encoder_tokens, self.block_size)


@record
class MambaPage(PageSpec):
    """MambaSpec: whole-state pages (config.mamba_pages_per_request), whatever the length."""

    checkpoint_blocks: int = 0  # prefill-checkpoint pages in align mode (0.32)
    kind = "mamba"

    def need(self, config: VllmConfig) -> Need:
        return Need("fixed", self.block_size,
                    fixed=config.mamba_pages_per_request(self.checkpoint_blocks))

    def held_blocks(self, tokens: int, config: VllmConfig) -> int:
        return config.mamba_pages_per_request(self.checkpoint_blocks)


def _token_bytes(layer: Layer, fmt: KVFormat, tp: int) -> int:
    """Bytes one token takes in this layer's page on one rank."""
    if isinstance(layer, MLA):
        # one latent per token (no K/V x2), replicated on every TP rank; the DSA indexer
        # keys are a cache layer of their own (indexer_specs)
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
    fmt = fmt or kv_format(spec, config.kv_cache_dtype, config.version)
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
    config_wide_window = config.rules.windows_from_layer_types and len(windows) == 1 and \
        all(isinstance(x, SlidingWindow) for x in attention)
    mamba_page = 0
    if states and attention:
        # Hybrid attention + Mamba (0.11 HybridAttentionMambaModelConfig): the attention
        # block grows until its page holds a whole Mamba state; the Mamba page is then
        # padded to the attention page.
        attn_1tok = _token_bytes(attention[0], fmt, tp)
        raw_mamba = max(s.state_bytes(tp) for s in spec.layers if isinstance(s, RecurrentState))
        rules = config.rules
        mla = any(isinstance(x, MLA) for x in attention)
        base = HYBRID_ALIGN_BLOCK
        if rules.hybrid_block_size_base:
            # 0.20 _align_hybrid_block_size: max(the backend's smallest kernel block,
            # --block-size); hybrids keep the default 16 (update_block_size_for_backend)
            base = config.block_size or HYBRID_ALIGN_BLOCK
            if mla:
                base = max(base, default_block_size(
                    spec, config.gpu_name, config.version, config.kv_cache_dtype,
                    config.compute_capability))
        elif mla and rules.hybrid_mla_block_64:
            base = 64  # 0.11.1-0.19 models/config.py: "Other MLA backends" 64
        if rules.align_hybrid_block_size:
            if mla:
                base = max(base, 128)  # MLA hybrids: multiples of 128 (_align_hybrid_block_size)
            if config.mamba_cache_mode_resolved() == "align":
                # internal prefill checkpoints land on block boundaries
                base = math.lcm(base, prefill_checkpoint_alignment(spec, config) or 1)
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
            out.append(MambaPage(block, max(mamba_page, real), real,
                                 checkpoint_blocks(layer, spec, config)))
        elif isinstance(layer, MLA):
            page = block * _token_bytes(layer, fmt, tp)
            out.append(MlaPage(block, page, page))
        else:
            page = block * _token_bytes(layer, fmt, tp)
            if isinstance(layer, SlidingWindow) and not (disable_hybrid or config_wide_window):
                out.append(SlidingPage(block, page, page, layer.window))
            elif isinstance(layer, ChunkedLocal) and not disable_hybrid:
                out.append(ChunkedPage(block, page, page, layer.chunk))
            elif isinstance(layer, CrossAttention):
                out.append(CrossPage(block, page, page, layer.encoder_tokens))
            else:
                out.append(FullPage(block, page, page))
    return out


def stage_layers(spec: ModelSpec, config: VllmConfig) -> list[list[Layer]]:
    stages = [list(spec.layers[a:b])
              for a, b in pp_stages(spec.num_layers, config.pp, config.pp_layers)]
    if config.num_draft_layers:
        # EAGLE/MTP draft layers are attention layers of the target's shape; they live with
        # the last stage and share its pool (issue #19996: 32 + 1 layers in the pool).
        draft = next((x for x in spec.layers if not isinstance(x, (RecurrentState, NoCache))),
                     None)
        if draft is None:
            raise BadInputError(f"{spec.name} has no attention layer to copy for draft layers")
        stages[-1] += [draft] * config.num_draft_layers
    return stages


def indexer_specs(spec: ModelSpec, layers: Sequence[Layer], block: int
                  ) -> list[tuple[int, PageSpec]]:
    """The DSA indexer-key caches of a stage's MLA layers, by layer position."""
    # DSA models (DeepSeek-V3.2, GLM-5): an MLA layer with an indexer also caches its keys
    # (DeepseekV32IndexerCache), an MLAAttentionSpec with one uint8 "head" of
    # index_head_dim fp8 values + fp32 scales (132 bytes for 128). A DeepSeek-V3.2 spec that
    # does not name its indexer (no index_head_dim) gets the 128-wide one on every MLA layer.
    sparse = is_sparse_mla(spec)
    out: list[tuple[int, PageSpec]] = []
    for i, layer in enumerate(layers):
        if not isinstance(layer, MLA):
            continue
        per_token = layer.index_token_bytes() or (INDEXER_BYTES_PER_TOKEN if sparse else 0)
        if per_token:
            out.append((i, MlaPage(block, block * per_token, block * per_token)))
    return out
