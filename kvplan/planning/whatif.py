"""What-if planning over a deployment's exact KV baseline: prefix reuse, prefill time beside the
decode floor, offload tiers, and disaggregated prefill and decode pools.

Every function is pure over ints (bytes, tokens, blocks) and the engine's own capacity
(kvplan.planning.plan.Capacity); times are float seconds computed from exact integers.
Cache policies (eviction, compression, sharing) live in kvplan.planning.policies.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING

from kvplan.core.dtypes import KVFormat, cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec
from kvplan.planning.compute import ParamSplit, Prefill, PrefillFlops
from kvplan.planning.policies import Policy, PolicyResult

if TYPE_CHECKING:
    from kvplan.engines.base import Constraint, Need
    from kvplan.planning.plan import Capacity, DecodeFloor, Deployment

# --- prefix reuse ----------------------------------------------------------------------------


@record
class PrefixNeed:
    """One way a request uses the pool (a KV-cache group) under prefix reuse."""

    kind: str  # full | window | fixed (the engine's Need)
    units_per_request: int
    shared_units: int  # held once for every request that hits the prefix


@record
class PrefixReuse:
    """Requests of prompt + output tokens whose first `shared_prefix_tokens` are one system
    prompt; a share `hit_rate` of them find it cached. Paged engines share whole blocks only:
    the prefix's full blocks are held once, its last partial block by every request. A
    sliding-window group shares only the prefix blocks still inside the window at the
    request's full length (vLLM's SlidingWindowManager frees the blocks that fall out of it,
    so a long request holds none of the prefix there); recurrent state is never shared."""

    prompt_tokens: int
    output_tokens: int
    shared_prefix_tokens: int
    hit_rate: Fraction
    block_size: int
    constraint: str  # the pool constraint that binds
    unit: str
    capacity_units: int
    needs: tuple[PrefixNeed, ...]
    shared_blocks: int  # units held once (the binding constraint)
    blocks_per_request: int  # units per request without reuse
    blocks_per_hit_request: int  # the same, less the shared units
    max_requests_without_reuse: int
    max_requests_with_reuse: int
    blocks_saved: int  # at max_requests_with_reuse, versus every request holding its own
    citation: str = ("vLLM automatic prefix caching: KVCacheManager.get_computed_blocks and "
                     "HybridKVCacheCoordinator.find_longest_cache_hit (v1/core), whole blocks "
                     "per KV-cache group")


def _shared_units(need: Need, prefix_tokens: int, tokens: int) -> int:
    """Units of a common prefix one request holds that another request's can be: whole
    blocks; for a window, only those still inside it at `tokens` (the blocks before it are
    freed: vLLM SlidingWindowManager.remove_skipped_blocks)."""
    if need.kind == "full":
        return need.shared_units(prefix_tokens) if need.shareable else 0
    if need.kind != "window":
        return 0
    whole = prefix_tokens // need.block_size
    held = need.units(tokens) // need.weight
    first_held = max(0, cdiv(tokens, need.block_size) - held)
    return max(0, min(whole - first_held, held)) * need.weight


def prefix_reuse(cap: Capacity, prompt_tokens: int, output_tokens: int,
                 shared_prefix_tokens: int, hit_rate: Fraction) -> PrefixReuse:
    """Concurrency with and without prefix caching for one request shape, over the engine's
    own pool (vLLM / SGLang radix style: whole blocks of a common prefix are stored once and
    referenced by each request; each KV-cache group shares what it keeps)."""
    if not 0 <= hit_rate <= 1:
        raise BadInputError(f"--hit-rate must be between 0 and 1, got {float(hit_rate)}")
    if not 0 <= shared_prefix_tokens <= prompt_tokens:
        raise BadInputError(f"the shared prefix ({shared_prefix_tokens:,} tokens) must fit in "
                            f"the prompt ({prompt_tokens:,})")
    tokens = prompt_tokens + output_tokens
    pool = cap.pool
    best: tuple[int, int, Constraint, list[PrefixNeed], int, int] | None = None
    for c in pool.constraints:
        needs = [PrefixNeed(n.kind, n.units(tokens),
                            _shared_units(n, shared_prefix_tokens, tokens) if hit_rate else 0)
                 for n in c.needs]
        per_request = sum(n.units_per_request for n in needs)
        shared = sum(n.shared_units for n in needs)
        per_hit = per_request - shared
        without = c.capacity // per_request if per_request else 10**12
        # R requests: shared + R x (h x per_hit + (1 - h) x per_request) <= capacity
        mean = hit_rate * per_hit + (1 - hit_rate) * per_request
        with_reuse = (int((c.capacity - shared) / mean) if c.capacity > shared and mean
                      else without)
        with_reuse = max(with_reuse, without)
        if best is None or with_reuse < best[1]:
            best = (without, with_reuse, c, needs, per_request, shared)
    assert best is not None
    without, with_reuse, c, needs, per_request, shared = best
    if pool.max_requests is not None:
        without = min(without, pool.max_requests)
        with_reuse = min(with_reuse, pool.max_requests)
    mean = hit_rate * (per_request - shared) + (1 - hit_rate) * per_request
    saved = int(with_reuse * per_request - (shared + with_reuse * mean)) if with_reuse else 0
    return PrefixReuse(prompt_tokens, output_tokens, shared_prefix_tokens, hit_rate,
                       pool.tokens_per_unit, c.name, c.unit, c.capacity, tuple(needs), shared,
                       per_request, per_request - shared, without * pool.replicas,
                       with_reuse * pool.replicas, max(0, saved))


# --- multi-turn reuse ------------------------------------------------------------------------

@record
class Turn:
    turn: int
    prompt_tokens: int  # the whole conversation so far plus the new user message
    cached_tokens: int  # the history's whole blocks, found in the prefix cache
    computed_tokens: int  # what prefill computes: prompt - cached
    prefill_s: float | None  # time to first token with the cache (None without a GPU)
    prefill_without_reuse_s: float | None
    request_bytes: int  # the conversation's exact cache after this turn's output (per GPU)


@record
class MultiTurn:
    turns: tuple[Turn, ...]
    user_tokens: int
    output_tokens: int
    block_size: int
    computed_tokens: int  # over all turns, with reuse
    computed_without_reuse_tokens: int
    notes: tuple[str, ...] = ()
    citation: str = ("vLLM automatic prefix caching: a turn's prompt starts with the previous "
                     "turns' prompt and output, whose whole blocks are cached (generated tokens "
                     "included), so prefill computes the rest")


def multi_turn(dep: Deployment, cap: Capacity | None, turns: int, user_tokens: int,
               output_tokens: int, block_size: int, q: WhatIfQuestion) -> MultiTurn:
    """A conversation of `turns` turns of `user_tokens` in and `output_tokens` out: each
    turn's prompt is the history plus the new message; with prefix caching the history's
    whole blocks are found cached (assumed not evicted between turns) and prefill computes
    only the rest. Prefill times use the prefill model (compute.deployment_prefill) on the
    tokens computed, attention over the whole context."""
    from kvplan.core.sizing import request_bytes, stage_layers
    from kvplan.planning.compute import deployment_prefill, prefill_flops

    if turns < 1:
        raise BadInputError(f"--turns must be at least 1, got {turns}")
    fmt = format_for(cap, dep)
    rows = []
    total = total_without = 0
    for t in range(1, turns + 1):
        history = (t - 1) * (user_tokens + output_tokens)
        prompt = history + user_tokens
        cached = history // block_size * block_size
        computed = prompt - cached
        with_s = without_s = None
        if cap is not None and (dep.gpu_name or q.tflops is not None):
            full = deployment_prefill(dep, prompt, q.compute_dtype, q.tflops, q.efficiency,
                                      q.active_params)
            without_s = full.seconds
            # FLOPs of the computed suffix: the whole prompt's less the cached prefix's (each
            # counts the output head once; the suffix still samples one token)
            if cached:
                before = prefill_flops(dep.spec, cached, _split(dep, q))
                share = Fraction(full.flops.total_flops - before.total_flops
                                 + 2 * _split(dep, q).table_params, full.flops.total_flops)
                with_s = float(full.seconds * share)
            else:
                with_s = full.seconds
        stage = max(stage_layers(dep.spec.layers, dep.pp),
                    key=lambda ls: request_bytes(ls, prompt + output_tokens, fmt, dep.tp))
        rows.append(Turn(t, prompt, cached, computed, with_s, without_s,
                         request_bytes(stage, prompt + output_tokens, fmt, dep.tp)))
        total += computed
        total_without += prompt
    notes: tuple[str, ...] = ()
    if any(layer.kind == "state" for layer in dep.spec.layers):
        notes = ("the model keeps recurrent state: kvplan assumes the engine resumes it where "
                 "the cached history ends (vLLM keeps Mamba state at block boundaries with "
                 "prefix caching on, mamba_cache_mode 'align'); it does not check that the "
                 "engine does",)
    return MultiTurn(tuple(rows), user_tokens, output_tokens, block_size, total, total_without,
                     notes)


def _split(dep: Deployment, q: WhatIfQuestion) -> ParamSplit:
    from kvplan.planning.compute import param_split

    return param_split(dep.spec, q.active_params)


def format_for(cap: Capacity | None, dep: Deployment) -> KVFormat:
    from kvplan.core.dtypes import parse_format
    from kvplan.planning.plan import format_for_sizing

    return format_for_sizing(cap) if cap is not None else parse_format(dep.kv_dtype,
                                                                       dep.spec.dtype)


# --- prefill beside decode -------------------------------------------------------------------

@record
class PrefillDecode:
    """One prompt's prefill (kvplan.planning.compute.prefill) beside the decode step of
    `decode_batch` requests (kvplan.planning.plan.decode_floor): the same two models `kvplan
    plan` uses, so the figures they share agree."""

    prompt_tokens: int
    flops: PrefillFlops
    compute_dtype: str
    compute_dtype_why: str
    peak_flops_per_s: int  # one GPU, dense
    efficiency: Fraction  # the share of peak the kernels reach (a stated assumption)
    gpus: int  # GPUs sharing the FLOPs (tensor parallel)
    ttft_s: float  # time to first token: FLOPs / (gpus x peak x efficiency)
    prefill_gpu_s: float  # FLOPs / (peak x efficiency): what one prompt costs a pool
    decode_batch: int
    decode_context_tokens: int
    weights_read_bytes: int  # per GPU per decode step (active experts only)
    kv_read_bytes: int  # per GPU per decode step: the batch's cache
    hbm_bandwidth_bytes_per_s: int
    decode_step_s: float  # plan.decode_floor's step: the memory-bound floor
    decode_tokens_per_s: float  # the batch's tokens per second at that floor


def prefill_decode(pre: Prefill, floor: DecodeFloor) -> PrefillDecode:
    """Time to first token from FLOPs, beside the decode floor of `floor.batch` requests."""
    return PrefillDecode(pre.flops.prompt_tokens, pre.flops, pre.compute_dtype,
                         pre.compute_dtype_why, pre.peak_flops_per_s, pre.efficiency, pre.gpus,
                         pre.seconds, pre.gpu_seconds, floor.batch, floor.context_tokens,
                         floor.weights_read_bytes_per_gpu, floor.kv_bytes_per_gpu,
                         floor.hbm_bandwidth_bytes_per_s, floor.ms_per_token / 1000,
                         floor.tokens_per_s)


# --- offload tiers ---------------------------------------------------------------------------

_SIZE = re.compile(r"^\s*([A-Za-z][\w-]*)\s*:\s*([^@]+?)\s*@\s*(.+?)\s*$")


@record
class Tier:
    name: str
    capacity_bytes: int
    bandwidth_bytes_per_s: int


def parse_tier(text: str) -> Tier:
    """`NAME:SIZE@BANDWIDTH`, e.g. `host:512GiB@50GB/s`, `ssd:4TB@7GB/s`."""
    m = _SIZE.match(text)
    if not m:
        raise BadInputError(f"--tier {text!r} is not NAME:SIZE@BANDWIDTH",
                            "e.g. host:512GiB@50GB/s or ssd:4TB@7GB/s")
    name, size, bw = m.groups()
    bw = bw.strip()
    if not bw.lower().endswith("/s"):
        raise BadInputError(f"--tier {text!r}: the bandwidth {bw!r} must end in /s",
                            "e.g. 50GB/s")
    from kvplan.core.units import parse_bytes

    capacity = parse_bytes(size, f"--tier {name} size")
    bandwidth = parse_bytes(bw[:-2], f"--tier {name} bandwidth")
    if capacity <= 0 or bandwidth <= 0:
        raise BadInputError(f"--tier {text!r}: size and bandwidth must be positive")
    return Tier(name, capacity, bandwidth)


@record
class TierResult:
    name: str
    capacity_bytes: int
    bandwidth_bytes_per_s: int
    request_bytes: int  # one request's cache in whole blocks, as the engine offloads it
    requests: int  # whole requests the tier holds
    tokens: int  # requests x tokens per request
    reload_s: float  # time to bring one request's cache back to the GPU


def offload_tiers(tiers: list[Tier], request_bytes: int, tokens_per_request: int
                  ) -> tuple[TierResult, ...]:
    """Each tier as a capacity (whole requests of this shape) and the time to bring one back:
    request bytes over the tier's bandwidth (the slowest link on the way to the GPU)."""
    if request_bytes <= 0:
        raise BadInputError("the request holds no KV cache: nothing to offload")
    return tuple(TierResult(t.name, t.capacity_bytes, t.bandwidth_bytes_per_s, request_bytes,
                            t.capacity_bytes // request_bytes,
                            (t.capacity_bytes // request_bytes) * tokens_per_request,
                            float(Fraction(request_bytes, t.bandwidth_bytes_per_s)))
                 for t in tiers)


# --- disaggregated prefill and decode ------------------------------------------------------

#: interconnects by name: bytes/s in one direction, per GPU (the link a KV transfer crosses)
LINKS: dict[str, tuple[int, str]] = {
    "nvlink4": (450 * 10**9, "NVLink 4 (H100/H200): 900 GB/s total, 450 GB/s each way "
                "(NVIDIA H100 datasheet)"),
    "nvlink5": (900 * 10**9, "NVLink 5 (B200): 1.8 TB/s total, 900 GB/s each way "
                "(NVIDIA B200 datasheet)"),
    "ib-ndr": (50 * 10**9, "InfiniBand NDR 400 Gb/s per port = 50 GB/s each way"),
    "ib-hdr": (25 * 10**9, "InfiniBand HDR 200 Gb/s per port = 25 GB/s each way"),
    "roce-400": (50 * 10**9, "RoCE over 400 GbE = 50 GB/s each way (line rate)"),
    "roce-200": (25 * 10**9, "RoCE over 200 GbE = 25 GB/s each way (line rate)"),
    "eth-100": (12_500_000_000, "100 Gb Ethernet = 12.5 GB/s each way (line rate)"),
    "eth-25": (3_125_000_000, "25 Gb Ethernet = 3.125 GB/s each way (line rate)"),
    "pcie5": (63_015_384_615, "PCIe 5.0 x16: 32 GT/s x 16 lanes x 128/130 / 8 bits, each way"),
    "pcie4": (31_507_692_307, "PCIe 4.0 x16: 16 GT/s x 16 lanes x 128/130 / 8 bits, each way"),
}


def parse_link(text: str) -> tuple[str, int, str]:
    """A named interconnect (`ib-ndr`, `nvlink4` ...) or a bandwidth such as `25GB/s`."""
    key = text.strip().lower()
    if key in LINKS:
        bw, note = LINKS[key]
        return key, bw, note
    if key.endswith("/s"):
        from kvplan.core.units import parse_bytes

        return text.strip(), parse_bytes(text.strip()[:-2], "--link"), "as given"
    raise BadInputError(f"--link {text!r} is neither a known interconnect nor a bandwidth",
                        "one of " + ", ".join(LINKS) + ", or e.g. 25GB/s")


@record
class LayerKindTransfer:
    kind: str
    num_layers: int
    bytes: int  # this kind's share of one request's transfer


@record
class Disaggregated:
    prompt_tokens: int
    output_tokens: int
    prefill_kv_dtype: str
    decode_kv_dtype: str
    transfer_bytes: int  # one copy of a request's prompt cache as the prefill side stores it
    by_kind: tuple[LayerKindTransfer, ...]
    wire_bytes: int  # what crosses: every decode rank pulls its own heads (a replicated
    # cache - MLA's latent, fewer KV heads than ranks - once per rank)
    per_decode_rank_bytes: int  # what the busiest decode rank pulls
    per_prefill_rank_bytes: int  # what the busiest prefill rank sends (wire / its ranks)
    link: str
    link_note: str
    link_bytes_per_s: int  # per GPU: one NIC per GPU, rank i to rank i
    transfer_s: float  # the busier side's per-rank bytes over one GPU's link
    prefill_gpu_s: float  # GPU-seconds of prefill per request
    decode_gpu_s: float  # GPU-seconds of decode per request at the decode batch
    decode_batch: int
    prefill_gpus_per_decode_gpu: float  # the ratio at which neither pool idles


def disaggregated(spec: ModelSpec, prefill_fmt: KVFormat, decode_fmt: KVFormat,
                  prompt_tokens: int, output_tokens: int, block_size: int, link: str,
                  prefill_tp: int, prefill_pp: int, decode_tp: int, decode_pp: int,
                  prefill: PrefillDecode, decode: PrefillDecode) -> Disaggregated:
    """What crosses from the prefill pool to the decode pool per request, how long it takes,
    and the GPU ratio that keeps both pools busy: prefill GPU-seconds per request over decode
    GPU-seconds per request (output tokens x step time / batch x the decode instance's GPUs).

    vLLM's NIXL connector (vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py)
    has each decode worker read the blocks of its own KV heads from the prefill worker that
    holds them (rank i from rank i at equal TP), so each GPU's link carries its rank's share:
    the transfer takes the busier side's per-rank bytes over one link (an H100/H200 node has
    one NIC per GPU). A cache every rank replicates (MLA's latent, KV heads fewer than the
    ranks) is pulled by every decode rank. Its handshake
    (NixlConnectorWorker._validate_remote_agent_handshake) asserts that the remote block
    length matches the local one "and same dtype": two pools with different KV dtypes are
    refused, not converted."""
    from kvplan.core.sizing import pp_stages

    if prefill_fmt.name != decode_fmt.name:
        raise BadInputError(
            f"the decode pool stores {decode_fmt.name} and the prefill pool {prefill_fmt.name}: "
            "vLLM's NIXL connector refuses to pair KV caches of different dtypes (its "
            "handshake asserts equal block lengths 'and same dtype')",
            f"give both pools the same --kv-dtype (e.g. --kv-dtype {decode_fmt.name} and no "
            "--decode-kv-dtype)")
    name, bw, note = parse_link(link)
    if decode.decode_batch < 1 or decode.decode_step_s <= 0:
        raise BadInputError("the decode pool fits no request of this shape")

    def layer_bytes(layer: object, fmt: KVFormat, tp: int) -> int:
        slots = layer.paged_tokens(prompt_tokens, block_size)  # type: ignore[attr-defined]
        return (layer.bytes_for_tokens(slots, fmt, tp)  # type: ignore[attr-defined]
                if slots else layer.request_bytes(prompt_tokens, fmt, tp))  # type: ignore

    kinds: dict[str, list[int]] = {}
    total = 0
    for layer in spec.layers:
        sent = layer_bytes(layer, prefill_fmt, 1)  # one copy of the layer's cache
        entry = kinds.setdefault(layer.kind, [0, 0])
        entry[0] += 1
        entry[1] += sent
        total += sent
    stages = [spec.layers[a:b] for a, b in pp_stages(spec.num_layers, decode_pp)]
    per_rank = [sum(layer_bytes(layer, decode_fmt, decode_tp) for layer in stage)
                for stage in stages]
    wire = decode_tp * sum(per_rank)
    per_decode = max(per_rank)
    per_prefill = cdiv(wire, prefill_tp * prefill_pp)
    link_bytes = max(per_decode, per_prefill)
    decode_gpus = decode_tp * decode_pp
    decode_gpu_s = output_tokens * decode.decode_step_s / decode.decode_batch * decode_gpus
    ratio = prefill.prefill_gpu_s / decode_gpu_s if decode_gpu_s else float("inf")
    return Disaggregated(prompt_tokens, output_tokens, prefill_fmt.name, decode_fmt.name, total,
                         tuple(LayerKindTransfer(k, n, b) for k, (n, b) in kinds.items()),
                         wire, per_decode, per_prefill, name, note, bw,
                         float(Fraction(link_bytes, bw)), prefill.prefill_gpu_s, decode_gpu_s,
                         decode.decode_batch, ratio)


# --- all of it over one deployment -----------------------------------------------------------

@record
class WhatIfQuestion:
    """What `kvplan whatif` was asked, as plain values (strings parsed by the caller)."""

    prompt_tokens: int
    output_tokens: int = 0
    policies: tuple[tuple[Policy, ...], ...] = ()
    shared_prefix_tokens: int | None = None
    hit_rate: Fraction = Fraction(1)
    prefill: bool = False
    compute_dtype: str | None = None  # None: compute.default_compute_dtype (FP8 checkpoints: fp8)
    tflops: Fraction | None = None  # overrides the catalog's dense throughput (TFLOP/s)
    efficiency: Fraction = Fraction(1, 2)
    active_params: int | None = None
    decode_batch: int | None = None  # None: as many as fit
    tiers: tuple[Tier, ...] = ()
    link: str | None = None  # set: plan disaggregated prefill and decode over it
    decode: Deployment | None = None  # the decode pool's deployment (default: the same)
    turns: int | None = None  # set: a conversation of this many turns of prompt + output


@record
class WhatIfResult:
    model: str
    deployment: str  # "1x H100 SXM, vLLM" or "no GPU"
    prompt_tokens: int
    output_tokens: int
    block_size: int
    kv_budget_bytes: int | None
    policies: tuple[PolicyResult, ...]  # the baseline first
    prefix: PrefixReuse | None
    prefill: PrefillDecode | None
    tiers: tuple[TierResult, ...]
    disaggregated: Disaggregated | None
    notes: tuple[str, ...]
    multi_turn: MultiTurn | None = None


def _decode_floor(cap: Capacity, tokens: int, batch: int | None) -> DecodeFloor:
    """plan.decode_floor at `tokens`, for `batch` requests (None: as many as fit)."""
    from kvplan.planning.plan import decode_floor, max_concurrency

    if batch is None:
        batch = max_concurrency(cap, tokens).max_requests
    if batch < 1:
        raise BadInputError(f"not one request of {tokens:,} tokens fits this deployment",
                            "try a shorter --tokens, more GPUs or a smaller KV dtype")
    return decode_floor(cap, batch, tokens)


def _prefill(dep: Deployment, cap: Capacity, q: WhatIfQuestion, batch: int | None
             ) -> PrefillDecode:
    from kvplan.planning.compute import deployment_prefill

    pre = deployment_prefill(dep, q.prompt_tokens, q.compute_dtype, q.tflops, q.efficiency,
                             q.active_params)
    return prefill_decode(pre, _decode_floor(cap, q.prompt_tokens + q.output_tokens, batch))


def run(dep: Deployment, question: WhatIfQuestion) -> WhatIfResult:
    """Every what-if the question asks, over one deployment's exact baseline."""
    from kvplan.core.sizing import stage_layers
    from kvplan.planning.plan import capacity, format_for_sizing, kv_budget_bytes
    from kvplan.planning.policies import evaluate_stages

    q = question
    if q.prompt_tokens < 1 or q.output_tokens < 0:
        raise BadInputError("the prompt must be at least 1 token and the output not negative")
    from kvplan.core.dtypes import parse_format

    notes: list[str] = []
    has_memory = dep.gpu_memory_bytes is not None or dep.kv_memory_bytes is not None
    what_fmt = parse_format(dep.kv_dtype, dep.spec.dtype)
    cap = None
    if has_memory:
        try:
            cap = capacity(dep)
        except BadInputError:
            # a KV format the engine does not serve (KIVI, int2 ...) is itself a what-if:
            # the engine's budget comes from its own default format, the rows use the asked one
            dep = replace(dep, kv_dtype="auto")
            cap = capacity(dep)
            notes.append(f"{what_fmt.name} is not a KV format {dep.engine} serves: its budget "
                         "is planned with the model's own dtype, the rows below the baseline "
                         f"use {what_fmt.name} (a what-if)")
    fmt = format_for_sizing(cap) if cap is not None else what_fmt
    block = cap.pool.tokens_per_unit if cap is not None else dep.block_size or 16
    budget = kv_budget_bytes(cap) if cap is not None else None
    stages = stage_layers(dep.spec.layers, dep.pp)

    def row(policies: Sequence[Policy], row_fmt: KVFormat) -> PolicyResult:
        return evaluate_stages(stages, policies, row_fmt, q.prompt_tokens, q.output_tokens,
                               dep.tp, block, budget)

    rows = [row((), fmt)]
    if what_fmt.name != fmt.name:
        rows.append(row((), what_fmt))
    rows += [row(p, what_fmt) for p in q.policies]
    tokens = q.prompt_tokens + q.output_tokens
    prefix = None
    if q.shared_prefix_tokens is not None:
        if cap is None:
            raise BadInputError("prefix reuse needs a KV pool", "give --gpu or --kv-memory")
        prefix = prefix_reuse(cap, q.prompt_tokens, q.output_tokens, q.shared_prefix_tokens,
                              q.hit_rate)
    turns = None
    if q.turns is not None:
        turns = multi_turn(dep, cap, q.turns, q.prompt_tokens, q.output_tokens, block, q)
    prefill = None
    if q.prefill or q.link is not None:
        if cap is None:
            raise BadInputError("prefill and decode times need a GPU", "give --gpu")
        prefill = _prefill(dep, cap, q, q.decode_batch)
    tiers: tuple[TierResult, ...] = ()
    if q.tiers:
        tiers = offload_tiers(list(q.tiers), rows[0].baseline_paged_request_bytes, tokens)
    disagg = None
    if q.link is not None:
        assert prefill is not None and cap is not None
        decode_dep = q.decode or dep
        decode_cap = capacity(decode_dep) if q.decode is not None else cap
        decode_fmt = format_for_sizing(decode_cap)
        decode = _prefill(decode_dep, decode_cap, q, q.decode_batch) if q.decode else prefill
        disagg = disaggregated(dep.spec, fmt, decode_fmt, q.prompt_tokens, q.output_tokens,
                               block, q.link, dep.tp, dep.pp, decode_dep.tp, decode_dep.pp,
                               prefill, decode)
    where = (f"{dep.tp * dep.pp}x {dep.gpu_name}" if dep.gpu_name else
             "a given KV budget" if dep.kv_memory_bytes else "no GPU")
    return WhatIfResult(dep.spec.name, f"{where}, {dep.engine}", q.prompt_tokens,
                        q.output_tokens, block, budget, tuple(rows), prefix, prefill, tiers,
                        disagg, tuple(notes), turns)
