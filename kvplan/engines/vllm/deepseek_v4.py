"""DeepSeek-V4's caches and grouping in vLLM 0.33 (`models/deepseek_v4`).

Each layer keeps a sliding window of fp8_ds_mla rows (`DeepseekV4SWACache`), and on
compressed layers the compressed MLA entries, the compressor's fp32 state and (ratio 4) the
indexer keys; the groups are packed (`kv_cache_planning.py::_get_packed_kv_cache_groups`),
every group sharing the block ids. Modelled on Hopper and Blackwell SM 10.x only (FlashMLA
sparse); elsewhere kvplan refuses rather than guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from kvplan.core.dtypes import FP8_E4M3, cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.layers import CompressedAttention, Layer
from kvplan.engines.vllm.backends import capability
from kvplan.engines.vllm.config import VllmConfig
from kvplan.engines.vllm.grouping import KVCacheGroup, StageLayout
from kvplan.engines.vllm.pages import MambaPage, MlaPage, PageSpec, SlidingPage

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

    def sliding(name: str, block: int, block_bytes: int, window: int) -> None:
        page = _round_up(block_bytes, DSV4_ALIGNMENT)
        out.append((name, SlidingPage(block, page, page, window)))

    def compressed(name: str, block: int, block_bytes: int) -> None:
        page = _round_up(block_bytes, DSV4_ALIGNMENT)
        out.append((name, MlaPage(block, page, page)))

    for i, layer in enumerate(layers):
        if not isinstance(layer, CompressedAttention):
            raise BadInputError(f"layer {start + i} is {layer.kind}; kvplan's vLLM DeepSeek-V4 "
                                "layout expects compressed attention on every layer")
        name = str(start + i)
        row = layer.entry_bytes(FP8_E4M3)  # 448 fp8 NoPE + 128 bf16 RoPE + 8 scale bytes
        sliding(f"{name}.swa", DSV4_SWA_BLOCK, DSV4_SWA_BLOCK * row, layer.window)
        r = layer.ratio
        if not r:
            continue
        if r not in DSV4_STATE_BLOCK:
            raise BadInputError(f"layer {start + i} has compress ratio {r}; vLLM's compressor "
                                "takes 4 or 128")
        coff = 2 if r == 4 else 1
        block = DSV4_STATE_BLOCK[r]
        compressed(name, DSV4_BLOCK, DSV4_BLOCK // r * row)
        sliding(f"{name}.state", block, block * 2 * coff * layer.head_dim * DSV4_STATE_BYTES,
                coff * r)
        if layer.index_head_dim:
            compressed(f"{name}.indexer", DSV4_BLOCK, DSV4_BLOCK // r * layer.index_entry_bytes())
            sliding(f"{name}.indexer.state", block,
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
    buckets: dict[PageSpec, list[tuple[str, PageSpec]]] = {}
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
    if repeats is None and any(isinstance(s, (SlidingPage, MambaPage)) for _, s in named):
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
                first, len(chosen), 1, sum(s.page_bytes for _, s in chosen),
                first.blocks_per_request(config.max_model_len, config),
                tuple(name for name, _ in chosen)))
    return groups


def dsv4_stage(layers: Sequence[Layer], start: int, config: VllmConfig) -> StageLayout:
    if not config.rules.deepseek_v4:
        raise BadInputError("kvplan models vLLM's DeepSeek-V4 cache from 0.33 on",
                            "use --engine-version 0.33")
    cc = capability(config.compute_capability, config.gpu_name)
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
