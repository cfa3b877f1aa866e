"""vLLM's KV-cache groups: layers sharing block ids (`get_kv_cache_groups`).

Layers are bucketed by page and split into groups of equal size; a block id spans one page
in each of the `group_size` layer tensors, so `num_blocks = available // page //
group_size`. From 0.18 the largest bucket is the group size when max < 1.5 x min; from 0.12
page sizes are unified first (`unify_kv_cache_spec_page_size`, `_unify_pages`). A group
holds the page spec its layers share (kvplan.engines.vllm.pages), which says the blocks one
request needs (`need`, the admission rule) and holds at its peak (`held_blocks`).
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

    specs = _unify_pages(specs, names, config)
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


def _unify_pages(specs: list[PageSpec], names: Sequence[str], config: VllmConfig
                 ) -> list[PageSpec]:
    """One page size for every layer, as v1/core/kv_cache_utils.py get_kv_cache_groups needs
    for layers of different kinds (Rules.unify_page_sizes, pad_mamba_pages):

    - up to 0.11.2 there is no unification: different pages raise NotImplementedError;
    - from 0.12 (vllm#29143) `unify_kv_cache_spec_page_size` gives a page that divides the
      largest a block size that many times larger (its page becomes the largest) and raises
      NotImplementedError for any other;
    - from 0.24 it pads an attention page that does not divide the largest
      (`page_size_padded`: the block size kept, the page the largest);
    - from 0.26 it pads a smaller Mamba page too; before, its `replace(block_size=...)`
      leaves a Mamba page unchanged and the `assert new_spec.page_size_bytes ==
      max_page_size` fails (Mamba pages are otherwise padded by the hybrid alignment,
      kvplan.engines.vllm.pages)."""
    largest = max(s.page_bytes for s in specs)
    if all(s.page_bytes == largest for s in specs):
        return specs
    mode = config.rules.unify_page_sizes
    version = ".".join(map(str, config.version))
    if mode == "none":
        raise BadInputError(
            f"vLLM {version} cannot group layers with different page sizes "
            f"({sorted({s.page_bytes for s in specs})} bytes): its v1/core/kv_cache_utils.py "
            "get_kv_cache_groups raises NotImplementedError",
            "vLLM 0.12 and newer unify them (--engine-version 0.12 or newer)")
    out = []
    for s, name in zip(specs, names, strict=True):
        if s.page_bytes == largest:
            out.append(s)
        elif isinstance(s, MambaPage):
            if not config.rules.pad_mamba_pages:
                raise BadInputError(
                    f"vLLM {version} cannot unify layer {name}'s Mamba page ({s.page_bytes:,} "
                    f"bytes) with the largest page ({largest:,} bytes): its "
                    "unify_kv_cache_spec_page_size fails on a Mamba page",
                    "vLLM 0.26 and newer pad it (--engine-version 0.26 or newer)")
            out.append(replace(s, page_bytes=largest))
        elif largest % s.page_bytes == 0:
            ratio = largest // s.page_bytes
            out.append(replace(s, block_size=s.block_size * ratio, page_bytes=largest,
                               real_page_bytes=largest))
        elif mode == "pad":
            out.append(replace(s, page_bytes=largest))
        else:
            raise BadInputError(
                f"vLLM {version} cannot unify layer {name}'s page ({s.page_bytes:,} bytes) "
                f"with the largest ({largest:,} bytes): it does not divide it, and "
                "unify_kv_cache_spec_page_size raises NotImplementedError",
                "vLLM 0.24 and newer pad it (--engine-version 0.24 or newer), or choose a "
                "--block-size or --kv-cache-dtype whose pages divide")
    return out


def blocks_for_request(stage: StageLayout, tokens: int, config: VllmConfig) -> int:
    """Blocks one request of `tokens` tokens needs in this stage (Σ over groups)."""
    return sum(g.need(config).units(tokens) for g in stage.groups)
