"""What vLLM computes and logs at start-up for a KV budget: the layout, blocks, token line
and concurrency.

"Maximum concurrency" = num_blocks / Σ_groups blocks per request (a float; the exact
Fraction is kept beside it); "GPU KV cache size" is `num_blocks // groups * min_block` up
to 0.20 and `int(concurrency * max_model_len)` from 0.21 (`v1/core/kv_cache_utils.py`).
The start-up check refuses a max_model_len one request cannot fill (0.33 keeps the null
block aside), and `estimate_max_model_len`'s binary search gives the longest that fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

from kvplan.core.dtypes import KVFormat
from kvplan.core.errors import BadInputError
from kvplan.core.layers import RecurrentState
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec
from kvplan.engines.vllm.config import (
    DEFAULT_BLOCK_SIZE,
    LATEST,
    SCHEMA,
    VllmConfig,
    rules_for,
)
from kvplan.engines.vllm.formats import has_compressed_attention, kv_format
from kvplan.engines.vllm.grouping import StageLayout, blocks_for_request, bucket_groups
from kvplan.engines.vllm.pages import MambaPage, indexer_specs, layer_page_specs, stage_layers


def layout(spec: ModelSpec, config: VllmConfig, fmt: KVFormat | None = None
           ) -> tuple[StageLayout, ...]:
    """The KV-cache layout of every pipeline stage (independent of the memory budget).
    `fmt`: a stored format given directly instead of config.kv_cache_dtype's."""
    if config.max_model_len <= 0:
        raise BadInputError(f"--max-model-len must be positive, got {config.max_model_len}")
    if config.tp < 1 or config.pp < 1:
        raise BadInputError("tensor and pipeline parallel sizes must be at least 1")
    if config.dcp < 1 or config.tp % config.dcp:
        # parallel_state.py: the TP group is split into tp // dcp DCP groups
        raise BadInputError(f"--dcp {config.dcp} must divide --tp {config.tp}",
                            "decode context parallel reuses the TP group's GPUs")
    if config.dcp > 1 and any(s.kind not in ("full", "mla") for s in spec.layers):
        raise BadInputError("vLLM's decode context parallel serves full-attention and MLA "
                            "models only", "kv_cache_coordinator.py: 'DCP not support hybrid "
                            "attn now'")
    out = []
    start = 0
    for layers in stage_layers(spec, config):
        if has_compressed_attention(spec):
            from kvplan.engines.vllm.deepseek_v4 import dsv4_stage  # DeepSeek-V4 only

            out.append(dsv4_stage(layers, start, config))
            start += len(layers)
            continue
        page_specs = layer_page_specs(spec, layers, config, fmt)
        names = [str(start + i) for i, s in enumerate(page_specs) if s is not None]
        real = [s for s in page_specs if s is not None]
        block = real[0].block_size if real else (config.block_size or DEFAULT_BLOCK_SIZE)
        indexers = indexer_specs(spec, layers, block)
        real += [s for _, s in indexers]
        names += [f"{start + i}.indexer" for i, _ in indexers]
        groups, gs, per_block, padding, waste = bucket_groups(real, config,
                                                               config.max_model_len, names)
        per_token = sum(s.real_page_bytes // s.block_size for s in real
                        if not isinstance(s, MambaPage))
        out.append(StageLayout(
            first_layer=start, last_layer=start + len(layers), groups=tuple(groups),
            group_size=gs, bytes_per_block=per_block, num_padding_layers=padding,
            padding_waste=waste, blocks_per_request=sum(g.blocks_per_request for g in groups),
            per_token_bytes=per_token,
        ))
        start += len(layers)
    return tuple(out)


# --- the start-up numbers ------------------------------------------------------------------

@record
class VllmProfile:
    """What vLLM computes and logs at start-up for one deployment (per rank)."""

    schema: str
    version: str
    model: str
    kv_cache_dtype: str
    block_size: int
    tp: int
    pp: int
    max_model_len: int
    stages: tuple[StageLayout, ...]
    stage_available_bytes: tuple[int, ...]
    stage_num_blocks: tuple[int, ...]
    # the logged numbers
    available_kv_cache_bytes: int  # "Available KV cache memory" of the limiting worker
    num_blocks: int  # min over workers ("num_gpu_blocks")
    kv_cache_tokens: int  # "GPU KV cache size: N tokens" (version-dependent formula)
    max_concurrency: float  # "Maximum concurrency for L tokens per request: X.XXx"
    max_concurrency_exact: Fraction
    blocks_per_request: int
    num_kv_cache_groups: int
    num_padding_layers: int
    padding_waste: Fraction
    mamba_padding: Fraction  # "Padding mamba page size by X%" (0 when no Mamba layers)
    # derived
    usable_blocks: int  # num_blocks - 1: one block is the permanent null block
    physical_token_slots: int  # num_blocks x block size (the smallest group block size)
    bytes_per_block: int
    per_token_bytes: int  # the limiting stage, every layer still growing
    fits_max_model_len: bool  # the start-up check: one request of max_model_len fits
    estimated_max_model_len: int  # the largest length one request can have (search)
    num_cpu_blocks: int  # swap space / CPU offload blocks (0 when none given)

    def log_lines(self) -> list[str]:
        """The start-up lines as this vLLM version prints them."""
        from kvplan.engines import parse_version

        ver = parse_version(self.version) or LATEST
        gib = self.available_kv_cache_bytes / 2**30
        lines = [f"Available KV cache memory: {round(gib, 2)} GiB"]
        if rules_for(ver).one_line_kv_log:
            lines.append(f"GPU KV cache size: {self.kv_cache_tokens:,} tokens, Maximum "
                         f"concurrency for {self.max_model_len:,} tokens per request: "
                         f"{self.max_concurrency:.2f}x")
        else:
            lines.append(f"GPU KV cache size: {self.kv_cache_tokens:,} tokens")
            lines.append(f"Maximum concurrency for {self.max_model_len:,} tokens per "
                         f"request: {self.max_concurrency:.2f}x")
        return lines


def profile(spec: ModelSpec, config: VllmConfig,
            available_kv_cache_bytes: int | Sequence[int], cpu_swap_bytes: int = 0
            ) -> VllmProfile:
    """vLLM's block count, token line and concurrency for a KV budget (one int for every
    worker, or one per pipeline stage, as each worker measures its own)."""
    stages = layout(spec, config)
    if isinstance(available_kv_cache_bytes, int):
        budgets = (available_kv_cache_bytes,) * len(stages)
    else:
        budgets = tuple(int(b) for b in available_kv_cache_bytes)
        if len(budgets) != len(stages):
            raise BadInputError(f"got {len(budgets)} per-stage budgets for {len(stages)} "
                                "pipeline stages")
    stage_blocks = []
    for stage, budget in zip(stages, budgets, strict=True):
        if not stage.groups:
            stage_blocks.append(1)  # attention-free: vLLM still makes one (empty) block
            continue
        # general case: int(available // page // group_size), floored at 0
        stage_blocks.append(max(0, budget // stage.bytes_per_block))
    num_blocks = min(stage_blocks)
    if config.num_gpu_blocks_override is not None:
        num_blocks = config.num_gpu_blocks_override
    limiting = min(range(len(stages)), key=lambda i: (stage_blocks[i], i))
    stage = stages[limiting]
    bpr = max(1, max(s.blocks_per_request for s in stages))
    exact = Fraction(num_blocks, bpr)
    concurrency = num_blocks / bpr  # the engine's float
    block_sizes = [g.block_size for g in stage.groups] or [config.block_size or 16]
    if config.rules.token_line_from_concurrency:
        tokens = int(concurrency * config.max_model_len)
    else:
        # "Multiplying the GPU KV cache size by the dcp_world_size" (0.11 kv_cache_utils.py)
        tokens = num_blocks // max(1, len(stage.groups)) * min(block_sizes) * config.dcp
    mamba = [g for g in stage.groups if isinstance(g.page, MambaPage)]
    mamba_padding = Fraction(0)
    if mamba:
        real = max(s.state_bytes(config.tp) for s in spec.layers
                   if isinstance(s, RecurrentState))
        mamba_padding = Fraction(mamba[0].page_bytes - real, real)
    # 0.33 keeps one block aside (the null block) when checking fit; 0.11 compares bytes.
    reserve = 1 if config.rules.null_block_in_fit_check else 0
    if len(stages) > 1 and config.rules.whole_model_fit_check:
        fits, estimated = _whole_model_check(spec, config, budgets, reserve)
    else:
        fits = all(s.blocks_per_request <= num_blocks - reserve for s in stages)
        estimated = _max_len_that_fits(stages, config, num_blocks - reserve)
    return VllmProfile(
        schema=SCHEMA, version=".".join(map(str, config.version)), model=spec.name,
        kv_cache_dtype=kv_format(spec, config.kv_cache_dtype, config.version).name,
        block_size=min(block_sizes), tp=config.tp, pp=config.pp,
        max_model_len=config.max_model_len, stages=stages,
        stage_available_bytes=budgets, stage_num_blocks=tuple(stage_blocks),
        available_kv_cache_bytes=budgets[limiting], num_blocks=num_blocks,
        kv_cache_tokens=tokens, max_concurrency=concurrency, max_concurrency_exact=exact,
        blocks_per_request=bpr, num_kv_cache_groups=len(stage.groups),
        num_padding_layers=stage.num_padding_layers, padding_waste=stage.padding_waste,
        mamba_padding=mamba_padding, usable_blocks=max(0, num_blocks - 1),
        physical_token_slots=num_blocks * min(block_sizes),
        bytes_per_block=stage.bytes_per_block, per_token_bytes=stage.per_token_bytes,
        fits_max_model_len=fits,
        estimated_max_model_len=estimated,
        num_cpu_blocks=(cpu_swap_bytes // stage.bytes_per_block
                        if cpu_swap_bytes and stage.bytes_per_block else 0),
    )


def _whole_model_check(spec: ModelSpec, config: VllmConfig, budgets: Sequence[int],
                       reserve: int) -> tuple[bool, int]:
    """The start-up check of releases that test every worker's memory against the whole
    model's layers (Rules.whole_model_fit_check; 0.15's v1/core/kv_cache_utils.py
    get_kv_cache_configs calls check_enough_kv_cache_memory with the merged spec of all
    workers): one request of max_model_len must fit each worker's budget as if that worker
    held every layer, and the first worker that fails raises, its estimate
    (estimate_max_model_len) the whole model's longest request in its own budget."""
    whole = layout(spec, replace(config, pp=1, pp_layers=None))[0]
    for budget in budgets:
        blocks = budget // whole.bytes_per_block - reserve if whole.groups else 0
        if whole.blocks_per_request > blocks:
            return False, _max_len_that_fits((whole,), config, blocks)
    return True, config.max_model_len


def _max_len_that_fits(stages: Sequence[StageLayout], config: VllmConfig, blocks: int) -> int:
    """Binary search over the length, as vLLM's estimate_max_model_len does."""
    def fits(n: int) -> bool:
        return all(blocks_for_request(s, n, config) <= blocks for s in stages)

    if blocks <= 0 or not fits(1):
        return 0
    lo, hi = 1, config.max_model_len
    if fits(hi):
        return hi
    while lo + 1 < hi:  # invariant: fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
