"""The prediction side of validate: kvplan's byte formulas over the layout the engine itself
describes.

A layout name (`--layout`) is resolved through the engine registry: `vllm` is the vLLM
engine's `cache_layout`, `hf-static` the hf engine's with the variant "static", and so on
for every engine that lists `cache_variants`; `contiguous` is validate's own neutral layout
(every request preallocated at --max-len, as `kvplan size` counts it). The description
(kvplan.engines.cache.CacheLayout: cache layers as stored, token rows, groups, block sizes,
blocks per request, padding, state tensors) is the engine's own plan, the code `plan` uses;
the bytes come from the layer kinds' formulas (kvplan.core.layers / kvplan.core.sizing). No
engine name is tested here and no torch is imported.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kvplan.core.dtypes import KVFormat
from kvplan.core.errors import BadInputError
from kvplan.core.layers import MLA, Layer, RecurrentState
from kvplan.core.spec import ModelSpec
from kvplan.engines.cache import (
    CacheLayout,
    dense_batch_bytes,
    dense_layers,
    spec_state,
)
from kvplan.validate.results import ValidateRequest

# --- layout names -> the engines' layouts ---------------------------------------------------

CONTIGUOUS = "contiguous"  # validate's own neutral layout, no engine's
CONTIGUOUS_NOTE = "Contiguous: [batch, {max_len:,}, kv_heads, head_dim] per K and V."


def _engine_layouts() -> dict[str, tuple[Any, str]]:
    """layout name -> (engine, variant), for every registered engine with cache variants."""
    from kvplan.engines import registry

    out: dict[str, tuple[Any, str]] = {}
    for engine in registry.all_engines():
        for variant in getattr(engine, "cache_variants", ()):
            out[f"{engine.name}-{variant}" if variant else engine.name] = (engine, variant)
    return out


def layouts() -> tuple[str, ...]:
    """Every --layout name: the engines' (registry order), then the neutral contiguous one."""
    return (*_engine_layouts(), CONTIGUOUS)


def contiguous_layout(spec: ModelSpec, tokens: int, batch: int, tp: int, max_len: int
                      ) -> CacheLayout:
    """Every request preallocated at `max_len` tokens, [batch, slots, heads, dim] per K and
    V, slots as `kvplan size` counts them (Layer.contiguous_tokens: a window caps them); the
    state tensors as the spec gives them."""
    layers = dense_layers(spec, lambda layer: layer.contiguous_tokens(max(max_len, tokens)),
                          batch, lambda layer: (spec_state(layer, tp), layer.state_bytes(tp)))
    return CacheLayout(paged=False, block_tokens=None, batch=batch, axes="batch-tokens",
                       layers=layers, note=CONTIGUOUS_NOTE)


@functools.lru_cache(maxsize=32)
def cache_layout(name: str, spec: ModelSpec, fmt: KVFormat, tokens: int, batch: int,
                 tp: int = 1, block_size: int | None = None, max_len: int | None = None
                 ) -> CacheLayout:
    """The layout `name` describes for `batch` requests of `tokens` tokens (one rank)."""
    if name == CONTIGUOUS:
        return contiguous_layout(spec, tokens, batch, tp, max_len or tokens)
    found = _engine_layouts().get(name)
    if found is None:
        raise BadInputError(f"--layout must be one of {', '.join(layouts())}, got {name!r}")
    engine, variant = found
    return engine.cache_layout(spec, fmt, tokens, batch, tp=tp, block_size=block_size,
                               max_len=max_len or tokens, variant=variant)


def request_layout(request: ValidateRequest, spec: ModelSpec | None = None) -> CacheLayout:
    """The layout of `request` (for `spec`: its --layers subset, default the whole model)."""
    return cache_layout(request.layout, spec or request.spec, request.fmt, request.tokens,
                        request.batch, request.tp, request.block_size, max_len(request))


def layouts_where(test: Callable[[CacheLayout], bool], request: ValidateRequest) -> list[str]:
    """The layout names whose layout for `request` passes `test` (for hints)."""
    out = []
    for name in layouts():
        try:
            if test(cache_layout(name, request.spec, request.fmt, request.tokens,
                                 request.batch, request.tp, None, max_len(request))):
                out.append(name)
        except BadInputError:
            continue
    return out


def either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def page_bytes(layer: Layer, fmt: KVFormat, tp: int, block_size: int,
               indexer: bool = False) -> int:
    """kvplan's bytes of one block of one cache layer (a state layer: its whole state; an
    MLA layer without its indexer keys, which are a cache layer of their own)."""
    if isinstance(layer, RecurrentState):
        return layer.state_bytes(tp)
    if isinstance(layer, MLA):
        if indexer:
            return block_size * layer.index_token_bytes()
        return layer.bytes_for_tokens(block_size, fmt, tp) - block_size * \
            layer.index_token_bytes()
    return layer.bytes_for_tokens(block_size, fmt, tp)


# --- the request's defaults -------------------------------------------------------------------

def block_size(request: ValidateRequest, layout: CacheLayout | None = None) -> int:
    """--block-size, else the layout's block or page (vLLM 16, 64 for MLA backends; SGLang
    1). A layout without blocks reports the default engine's block size for the model (what
    --block-size would mean there), as validate always has."""
    if request.block_size is not None:
        return request.block_size
    block = (layout or request_layout(request)).block_tokens
    if block is not None:
        return block
    from kvplan.engines import registry

    default = registry.get(registry.DEFAULT).defaults(request.spec).get("block_size")
    return int(default or 1)


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

def _no_recent_tokens(fmt: KVFormat, name: str, request: ValidateRequest) -> None:
    if fmt.residual is not None or fmt.per_channel_keys:
        dense = layouts_where(lambda lay: not lay.whole_tokens, request)
        raise BadInputError(
            f"--layout {name} stores whole tokens in pages; KV dtype {fmt.name} keeps recent "
            "tokens in full precision (Hugging Face QuantizedCache / KIVI)",
            f"use --layout {either(dense)} for this KV dtype")


def predict(request: ValidateRequest, spec: ModelSpec | None = None,
            layout: CacheLayout | None = None) -> dict[str, int]:
    """kvplan's bytes per row (layer kind; paged layouts add 'null block' and 'padding') for
    `request` on `spec` (its --layers subset; default the whole model), whose layout is
    `layout` when the caller has it."""
    spec = spec or request.spec
    layout = layout or request_layout(request, spec)
    fmt, tokens, tp = request.fmt, request.tokens, request.tp
    rows: dict[str, int] = {}

    def add(kind: str, n: int) -> None:
        rows[kind] = rows.get(kind, 0) + n

    if layout.whole_tokens:
        _no_recent_tokens(fmt, request.layout, request)
    if layout.paged:
        _paged_rows(layout, fmt, tokens, tp, add)
        rows.setdefault("null block", 0)
        rows.setdefault("padding", 0)
        return rows
    # one pool holds the whole batch's rows; per-request tensors hold `slots` rows per request
    requests = 1 if layout.axes == "pool" else layout.batch
    for cached in layout.layers:
        if isinstance(cached.layer, RecurrentState):
            add(cached.kind, cached.slots * cached.state_bytes)
        else:
            add(cached.kind, dense_batch_bytes(cached.layer, cached.slots, fmt, requests, tp,
                                               layout.recent_tokens,
                                               layout.whole_tensor_groups))
    return rows


def _paged_rows(layout: CacheLayout, fmt: KVFormat, tokens: int, tp: int,
                add: Callable[[str, int], None]) -> None:
    """The engine's groups, each request's blocks by the layer formulas: paged_bytes of the
    layer as stored (core.sizing), the reserved blocks (one page of every tensor each) and
    the padding of pages smaller than their shared tensor's."""
    from kvplan.core.sizing import paged_bytes

    batch = layout.batch
    lengths = [tokens] * batch
    shared = layout.shared_tensors > 0
    pages = {c.name: page_bytes(c.layer, fmt, tp, g.block_tokens, c.indexer)
             for g in layout.groups for c in g.layers}
    largest = max(pages.values(), default=0)
    null = padding = 0
    for group in layout.groups:
        first, block = group.layers[0].layer, group.block_tokens
        blocks = batch * (1 if isinstance(first, RecurrentState)
                          else first.paged_tokens(tokens, block) // block)
        for cached in group.layers:
            layer = cached.layer
            if cached.indexer:
                assert isinstance(layer, MLA)
                add(cached.kind, batch * layer.paged_tokens(tokens, block) *
                    layer.index_token_bytes())
            else:
                whole = paged_bytes([layer], lengths, fmt, tp, block)
                if isinstance(layer, MLA):  # its indexer keys are counted as their own layer
                    whole -= batch * layer.paged_tokens(tokens, block) * \
                        layer.index_token_bytes()
                add(cached.kind, whole)
            if shared:  # a page smaller than the tensor's is padded
                padding += (largest - pages[cached.name]) * blocks
            else:
                null += pages[cached.name] * layout.reserved_blocks
        if shared:  # the group's empty slots: pages no layer of this group uses
            padding += (layout.shared_tensors - len(group.layers)) * largest * blocks
    if shared:
        null = layout.shared_tensors * largest * layout.reserved_blocks
    add("null block", null)
    add("padding", padding)


def total(request: ValidateRequest) -> int:
    """The predicted bytes of one rank for `request` (its --layers subset)."""
    return sum(predict(request, subset(request.spec, request.layers)).values())
