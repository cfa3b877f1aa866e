"""vLLM's KV-cache groups: layers sharing block ids (`get_kv_cache_groups`).

Layers are bucketed by page and split into groups of equal size; a block id spans one page
in each of the `group_size` layer tensors, so `num_blocks = available // page //
group_size`. From 0.32 the largest bucket is the group size when max < 1.5 x min, and page
sizes are unified (`unify_kv_cache_spec_page_size`). A group holds the page spec its
layers share (kvplan.engines.vllm.pages), which says the blocks one request needs
(`need`, the admission rule) and holds at its peak (`held_blocks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

from kvplan.core.dtypes import cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.record import record
from kvplan.engines.base import Need
from kvplan.engines.vllm.config import VllmConfig
from kvplan.engines.vllm.pages import MambaPage, PageSpec

# --- groups --------------------------------------------------------------------------------

@record
class KVCacheGroup:
    """One KV-cache group: layers sharing block ids, padded to `num_slots` layer tensors.
    Its layers share one spec (`page`: their kind, block size and window), which says how a
    request uses the group's blocks."""

    page: PageSpec
    num_layers: int
    num_slots: int
    page_bytes: int  # per layer slot; for a uniform-type group the summed page of all layers
    blocks_per_request: int  # at max_model_len
    # the cache layers in the group, named as vLLM names them by position: "12" is layer 12
    # of the model, "12.indexer" the DSA indexer-key cache of MLA layer 12
    layer_names: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return self.page.kind

    @property
    def block_size(self) -> int:
        return self.page.block_size

    def need(self, config: VllmConfig) -> Need:
        """How one request uses this group's blocks (its spec's per-request rule)."""
        return self.page.need(config)

    def held_blocks(self, tokens: int, config: VllmConfig) -> int:
        """Blocks one request of `tokens` tokens holds here at its peak (at most
        `need(config).units(tokens)`, the admission bound)."""
        return self.page.held_blocks(tokens, config)


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
        group = KVCacheGroup(s, len(specs), len(specs), s.page_bytes,
                             s.blocks_per_request(max_model_len, config), names)
        return [group], len(specs), len(specs) * s.page_bytes, 0, Fraction(0)
    if len({s.token_slots for s in specs}) == 1 and not isinstance(specs[0], MambaPage):
        # one type, different pages (MLA + indexer, per-layer head counts):
        # UniformTypeKVCacheSpecs, page = the sum of the members' pages
        s = specs[0]
        summed = sum(x.page_bytes for x in specs)
        group = KVCacheGroup(s, len(specs), 1, summed, s.blocks_per_request(max_model_len, config),
                             names)
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
            groups.append(KVCacheGroup(s, len(members), group_size, s.page_bytes,
                                       s.blocks_per_request(max_model_len, config), members))
        if num_groups * group_size > n:
            padding += num_groups * group_size - n
            padded_real += n
    page = specs[0].page_bytes
    waste = Fraction(padding, padded_real) if padded_real else Fraction(0)
    return groups, group_size, group_size * page, padding, waste


def _unify_pages(specs: list[PageSpec], config: VllmConfig) -> list[PageSpec]:
    """Hybrid groups need one page size. 0.11 requires it already (NotImplementedError);
    from 0.32 `unify_kv_cache_spec_page_size` (v1/core/kv_cache_utils.py) scales the block
    size of an attention page that divides the largest and pads the rest (Mamba pages were
    padded by the alignment)."""
    largest = max(s.page_bytes for s in specs)
    if all(s.page_bytes == largest for s in specs):
        return specs
    if not config.rules.unify_page_sizes:
        raise BadInputError(
            "vLLM before 0.32 cannot group layers with different page sizes "
            f"({sorted({s.page_bytes for s in specs})} bytes)",
            "use --engine-version 0.32 or newer, or set --block-size")
    out = []
    for s in specs:
        if s.page_bytes == largest:
            out.append(s)
        elif not isinstance(s, MambaPage) and largest % s.page_bytes == 0:
            ratio = largest // s.page_bytes
            out.append(replace(s, block_size=s.block_size * ratio, page_bytes=largest,
                               real_page_bytes=largest))
        else:
            out.append(replace(s, page_bytes=largest))
    return out


def blocks_for_request(stage: StageLayout, tokens: int, config: VllmConfig) -> int:
    """Blocks one request of `tokens` tokens needs in this stage (Σ over groups)."""
    return sum(g.need(config).units(tokens) for g in stage.groups)
