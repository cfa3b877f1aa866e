"""The prediction side of validate: kvplan's byte formulas over the layout the engine itself
describes.

For the vLLM layout the groups, their block sizes and the blocks each request holds come from
kvplan.engines.vllm (`layout`, `held_blocks`), the same code `plan` uses, so `validate`
cannot agree with itself while the planner is wrong; the bytes come from the layer kinds'
formulas (kvplan.core.layers / kvplan.core.sizing). The other layouts ask their engine
module where it has one (SGLang's state bytes, transformers' cache profile). No torch here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kvplan.core.dtypes import KVFormat, cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.layers import (
    ATTENTION_KINDS,
    MLA,
    CrossAttention,
    FullAttention,
    Layer,
    NoCache,
    RecurrentState,
)
from kvplan.core.spec import ModelSpec
from kvplan.validate.results import LAYOUTS, ValidateRequest

if TYPE_CHECKING:
    from kvplan.engines.vllm import VllmConfig

# --- what the engine says: vLLM's groups ----------------------------------------------------


@dataclass(frozen=True)
class VllmGroup:
    """One vLLM KV-cache group as the engine lays it out (kvplan.engines.vllm.KVCacheGroup)."""

    layers: tuple[str, ...]  # "12", or "12.indexer" for MLA layer 12's indexer-key cache
    kind: str  # how the engine stores the group: full, sliding, chunked, cross, mla, mamba
    block_size: int
    held_blocks: int  # blocks one request holds at its peak (engines.vllm.held_blocks)


@dataclass(frozen=True)
class VllmPlan:
    """How vLLM groups the layers: shared=False, every cache layer has its own tensor;
    shared=True (several groups), `slots` tensors each shared by one layer of every group
    (a group with fewer layers leaves padding slots)."""

    groups: tuple[VllmGroup, ...]
    shared: bool
    slots: int


def vllm_config(spec: ModelSpec, tokens: int, tp: int, block_size: int | None
                ) -> VllmConfig:
    """The vLLM settings validate asks the engine about: the newest version read, no prefix
    caching (a Mamba request holds one state page), max_model_len the validated length."""
    from kvplan.engines import vllm

    return vllm.VllmConfig(max_model_len=max(1, tokens), block_size=block_size, tp=tp,
                           mamba_cache_mode="none")


def vllm_plan(spec: ModelSpec, fmt: KVFormat, tp: int, block_size: int | None,
              tokens: int) -> VllmPlan:
    """The engine's own layout for `spec` (one pipeline stage): groups, block sizes, and the
    blocks a request of `tokens` tokens holds in each."""
    from kvplan.engines import vllm

    config = vllm_config(spec, tokens, tp, block_size)
    (stage,) = vllm.layout(spec, config, fmt)
    groups = tuple(VllmGroup(g.layer_names, g.kind, g.block_size,
                             vllm.held_blocks(g, tokens, config)) for g in stage.groups)
    return VllmPlan(groups, len(groups) > 1, stage.group_size)


def member(layers: Sequence[Layer], name: str) -> tuple[Layer, bool]:
    """(the layer, whether it is the indexer-key part) for a vLLM layer name."""
    index, _, part = name.partition(".")
    return layers[int(index)], part == "indexer"


def stored_layer(layer: Layer, kind: str) -> Layer:
    """The layer as the engine stores it: a sliding or chunked layer in a full group (vLLM
    turns the hybrid manager off for chunked attention) keeps every token."""
    if kind == "full" and isinstance(layer, ATTENTION_KINDS) \
            and not isinstance(layer, (FullAttention, CrossAttention)):
        return FullAttention(layer.num_kv_heads, layer.head_dim, layer.v_head_dim)
    return layer


def indexer_token_bytes(layer: MLA) -> int:
    """Bytes per token of an MLA layer's indexer-key cache (the engine's DSA default when the
    spec does not name its indexer)."""
    from kvplan.engines.vllm import INDEXER_BYTES_PER_TOKEN

    return layer.index_token_bytes() or INDEXER_BYTES_PER_TOKEN


def page_bytes(layer: Layer, fmt: KVFormat, tp: int, block_size: int,
               indexer: bool = False) -> int:
    """kvplan's bytes of one block of one cache layer (a state layer: its whole state; an
    MLA layer without its indexer keys, which are a cache layer of their own)."""
    if isinstance(layer, RecurrentState):
        return layer.state_bytes(tp)
    if isinstance(layer, MLA):
        if indexer:
            return block_size * indexer_token_bytes(layer)
        return layer.bytes_for_tokens(block_size, fmt, tp) - block_size * \
            layer.index_token_bytes()
    return layer.bytes_for_tokens(block_size, fmt, tp)


# --- the request's defaults -------------------------------------------------------------------

def block_size(request: ValidateRequest) -> int:
    """--block-size, else the layout's default: SGLang's page of 1, vLLM's block size for
    this model (16; 64 for MLA backends, kvplan's vLLM profile)."""
    if request.block_size is not None:
        return request.block_size
    if request.layout == "sglang":
        from kvplan.engines.sglang import DEFAULT_PAGE_SIZE

        return DEFAULT_PAGE_SIZE
    from kvplan.engines.vllm import default_block_size

    return default_block_size(request.spec)


def max_len(request: ValidateRequest) -> int:
    return request.max_len or request.tokens


def subset(spec: ModelSpec, count: int | None) -> ModelSpec:
    """`count` of the model's layers, evenly spread so that every kind keeps its share."""
    total = spec.num_layers
    if not count or count >= total:
        return spec
    picked = sorted({i * total // count for i in range(count)})
    return replace(spec, layers=tuple(spec.layers[i] for i in picked))


# --- the prediction (kvplan's maths) --------------------------------------------------------

def _no_recent_tokens(fmt: KVFormat, layout: str) -> None:
    if fmt.residual is not None or fmt.per_channel_keys:
        raise BadInputError(
            f"--layout {layout} stores whole tokens in pages; KV dtype {fmt.name} keeps recent "
            "tokens in full precision (Hugging Face QuantizedCache / KIVI)",
            "use --layout hf-dynamic, hf-static or contiguous for this KV dtype")


def predict(layout: str, spec: ModelSpec, fmt: KVFormat, tokens: int, batch: int,
            tp: int, block: int | None, max_len: int) -> dict[str, int]:
    """kvplan's bytes per row (layer kind, plus vLLM's 'null block' and 'padding').
    `block`: the vLLM block size / SGLang page (None: the engine's default)."""
    from kvplan.core.sizing import contiguous_bytes

    layers = spec.layers
    lengths = [tokens] * batch
    rows: dict[str, int] = {}

    def add(kind: str, n: int) -> None:
        rows[kind] = rows.get(kind, 0) + n

    cached = [(i, layer) for i, layer in enumerate(layers) if not isinstance(layer, NoCache)]
    if layout == "contiguous":
        for _, layer in cached:
            add(layer.kind, contiguous_bytes([layer], lengths, fmt, tp, max_len))
    elif layout in ("hf-static", "hf-dynamic"):
        # kvplan's Hugging Face profile (engines/hf.py): static = max_len slots, sliding and
        # chunked layers capped at the window; dynamic keeps window - 1; HF state shapes.
        from kvplan.engines import hf

        for kind in dict.fromkeys(layer.kind for _, layer in cached):
            members = ModelSpec(name=kind, layers=tuple(x for _, x in cached if x.kind == kind),
                                dtype=spec.dtype)
            profile = hf.profile(members, cache=layout[3:],
                                 seq_len=max_len if layout == "hf-static" else tokens,
                                 batch=batch, kv_dtype=fmt.name, tp=tp)
            add(kind, profile.cache_bytes)
    elif layout == "sglang":
        # Rule: one token pool for the batch, each request rounded up to whole pages, plus one
        # padding page (SGLang buffers hold N + page_size rows); every attention layer keeps
        # every token (sliding windows are not capped, as for Gemma 2/3; the hybrid-SWA pool
        # of gpt-oss and Llama 4 is not modelled); the state pool has batch + 1 slots, with the
        # SSM state in float32 (kvplan's SGLang profile, engines/sglang.py).
        from kvplan.engines.sglang import DEFAULT_PAGE_SIZE, mamba_state_bytes

        _no_recent_tokens(fmt, layout)
        page = block or DEFAULT_PAGE_SIZE
        for _, layer in cached:
            if isinstance(layer, RecurrentState):
                add(layer.kind, (batch + 1) * mamba_state_bytes(layer, tp, 4))
                continue
            held = layer.encoder_tokens if isinstance(layer, CrossAttention) else tokens
            pool = batch * cdiv(held, page) * page + page
            add(layer.kind, layer.bytes_for_tokens(pool, fmt, tp))
    elif layout == "vllm":
        _no_recent_tokens(fmt, layout)
        _vllm_rows(spec, fmt, tokens, batch, tp, block, add)
        rows.setdefault("null block", 0)
        rows.setdefault("padding", 0)
    else:
        raise BadInputError(f"--layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    return rows


def _vllm_rows(spec: ModelSpec, fmt: KVFormat, tokens: int, batch: int, tp: int,
               block: int | None, add: Callable[[str, int], None]) -> None:
    """The engine's groups, each request's blocks by the layer formulas: paged_bytes of the
    layer as stored (core.sizing), the null block (one page of every tensor) and the padding
    of pages smaller than their shared tensor's."""
    from kvplan.core.sizing import paged_bytes

    plan = vllm_plan(spec, fmt, tp, block, tokens)
    layers = spec.layers
    lengths = [tokens] * batch
    pages = {name: page_bytes(_stored_member(layers, name, g.kind)[0], fmt, tp, g.block_size,
                              name.endswith(".indexer"))
             for g in plan.groups for name in g.layers}
    largest = max(pages.values(), default=0)
    null = padding = 0
    for group in plan.groups:
        first = stored_layer(member(layers, group.layers[0])[0], group.kind)
        blocks = batch * (1 if isinstance(first, RecurrentState)
                          else first.paged_tokens(tokens, group.block_size) // group.block_size)
        for name in group.layers:
            original, indexer = member(layers, name)
            layer = stored_layer(original, group.kind)  # rows keep the model's layer kind
            if indexer:
                assert isinstance(layer, MLA)
                slots = layer.paged_tokens(tokens, group.block_size)
                add(original.kind, batch * slots * indexer_token_bytes(layer))
            else:
                whole = paged_bytes([layer], lengths, fmt, tp, group.block_size)
                if isinstance(layer, MLA):  # its indexer keys are counted as their own layer
                    whole -= batch * layer.paged_tokens(tokens, group.block_size) * \
                        layer.index_token_bytes()
                add(original.kind, whole)
            if plan.shared:  # a page smaller than the tensor's is padded
                padding += (largest - pages[name]) * blocks
            else:
                null += pages[name]  # the null block: one page of every layer's tensor
        if plan.shared:  # the group's empty slots: pages no layer of this group uses
            padding += (plan.slots - len(group.layers)) * largest * blocks
    if plan.shared:
        null = plan.slots * largest
    add("null block", null)
    add("padding", padding)


def _stored_member(layers: Sequence[Layer], name: str, kind: str) -> tuple[Layer, bool]:
    layer, indexer = member(layers, name)
    return stored_layer(layer, kind), indexer


def total(request: ValidateRequest) -> int:
    """The predicted bytes of one rank for `request` (its --layers subset)."""
    spec = subset(request.spec, request.layers)
    return sum(predict(request.layout, spec, request.fmt, request.tokens, request.batch,
                       request.tp, request.block_size if request.layout == "vllm"
                       else block_size(request), max_len(request)).values())
