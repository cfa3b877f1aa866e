"""vLLM's KV-cache groups: layers sharing block ids (`get_kv_cache_groups`).

Layers are bucketed by page and split into groups of equal size; a block id spans one page
in each of the `group_size` layer tensors, so `num_blocks = available // page //
group_size`. 0.33 picks the largest bucket as the group size when max < 1.5 x min and
unifies page sizes (`unify_kv_cache_spec_page_size`). Per group: the blocks one request
needs (`group_needs`, the admission rule) and the blocks it holds at its peak
(`held_blocks`, what the managers free as a window slides).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

from kvplan.core.dtypes import cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.record import record
from kvplan.engines.base import Need
from kvplan.engines.vllm.config import VllmConfig
from kvplan.engines.vllm.pages import PageSpec

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


def bucket_groups(specs: list[PageSpec], config: VllmConfig, max_model_len: int,
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
    if config.rules.largest_bucket_grouping and max(counts) < 1.5 * min(counts):
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
    if not config.rules.unify_page_sizes:
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


def group_needs(group: KVCacheGroup, config: VllmConfig) -> Need:
    """How one request uses one KV-cache group's blocks (the per-request rule of
    kv_cache_interface.py as a Need: whole blocks; a sliding window keeps W - 1 + T tokens and
    one block more; a chunk C + T; Mamba and cross attention a fixed number of blocks)."""
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
