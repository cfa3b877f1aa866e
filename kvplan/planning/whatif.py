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
from kvplan.core.layers import MLA, FullAttention
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec
from kvplan.planning.compute import ParamSplit, PrefillFlops, prefill_flops
from kvplan.planning.policies import Policy, PolicyResult

if TYPE_CHECKING:
    from kvplan.planning.plan import Capacity, Deployment

# --- prefix reuse ----------------------------------------------------------------------------


@record
class PrefixReuse:
    """Requests of prompt + output tokens whose first `shared_prefix_tokens` are one system
    prompt; a share `hit_rate` of them find it cached. Paged engines share whole blocks only:
    the prefix's full blocks are held once, its last partial block by every request."""

    prompt_tokens: int
    output_tokens: int
    shared_prefix_tokens: int
    hit_rate: Fraction
    block_size: int
    num_blocks: int  # the KV pool, in blocks
    shared_blocks: int  # prefix_tokens // block_size, held once
    blocks_per_request: int  # cdiv(prompt + output, block_size) without reuse
    blocks_per_hit_request: int  # the same, less the shared blocks
    max_requests_without_reuse: int
    max_requests_with_reuse: int
    blocks_saved: int  # at max_requests_with_reuse, versus every request holding its own
    bytes_per_block: int


def prefix_reuse(spec: ModelSpec, fmt: KVFormat, prompt_tokens: int, output_tokens: int,
                 shared_prefix_tokens: int, hit_rate: Fraction, num_blocks: int,
                 block_size: int, tp: int = 1) -> PrefixReuse:
    """Concurrency with and without prefix caching for one request shape (vLLM / SGLang radix
    style: full blocks of a common prefix are stored once and referenced by each request)."""
    if any(not isinstance(layer, (FullAttention, MLA)) for layer in spec.layers):
        kinds = sorted({layer.kind for layer in spec.layers})
        raise BadInputError(f"prefix reuse is modelled for models whose every layer keeps every "
                            f"token; {spec.name} has {', '.join(kinds)} layers",
                            "windowed and state layers free or fold the prefix differently")
    if not 0 <= hit_rate <= 1:
        raise BadInputError(f"--hit-rate must be between 0 and 1, got {float(hit_rate)}")
    if not 0 <= shared_prefix_tokens <= prompt_tokens:
        raise BadInputError(f"the shared prefix ({shared_prefix_tokens:,} tokens) must fit in "
                            f"the prompt ({prompt_tokens:,})")
    if block_size < 1 or num_blocks < 0:
        raise BadInputError("the block size must be positive and the pool not negative")
    per_request = cdiv(prompt_tokens + output_tokens, block_size)
    shared = shared_prefix_tokens // block_size if hit_rate else 0
    per_hit = per_request - shared
    without = num_blocks // per_request if per_request else 0
    # R requests: shared + R x (h x per_hit + (1 - h) x per_request) <= num_blocks
    mean = hit_rate * per_hit + (1 - hit_rate) * per_request
    with_reuse = int((num_blocks - shared) / mean) if num_blocks > shared and mean else without
    with_reuse = max(with_reuse, without)
    saved = int(with_reuse * per_request - (shared + with_reuse * mean)) if with_reuse else 0
    per_block = sum(layer.bytes_for_tokens(block_size, fmt, tp) for layer in spec.layers)
    return PrefixReuse(prompt_tokens, output_tokens, shared_prefix_tokens, hit_rate, block_size,
                       num_blocks, shared, per_request, per_hit, without, with_reuse,
                       max(0, saved), per_block)


# --- prefill beside decode -------------------------------------------------------------------

@record
class PrefillDecode:
    prompt_tokens: int
    flops: PrefillFlops
    compute_dtype: str
    peak_flops_per_s: int  # one GPU, dense
    efficiency: Fraction  # the share of peak the kernels reach (a stated assumption)
    gpus: int  # GPUs sharing the FLOPs (tensor parallel)
    ttft_s: float  # time to first token: FLOPs / (gpus x peak x efficiency)
    decode_batch: int
    weights_read_bytes: int  # per GPU per decode step (active experts only)
    kv_read_bytes: int  # per GPU per decode step: the batch's cache
    hbm_bandwidth_bytes_per_s: int
    decode_step_s: float  # (weights + KV) / bandwidth: the memory-bound floor
    decode_tokens_per_s: float  # the batch's tokens per second at that floor


def peak_flops(dense_flops_per_s: dict[str, int], gpu_name: str, dtype: str) -> int:
    if dtype not in dense_flops_per_s:
        known = ", ".join(sorted(dense_flops_per_s)) or "none"
        raise BadInputError(f"the catalog has no dense {dtype} throughput for {gpu_name} "
                            f"(it has: {known})", "give --tflops, the dense TFLOP/s to assume")
    return dense_flops_per_s[dtype]


def prefill_decode(spec: ModelSpec, split: ParamSplit, prompt_tokens: int, peak: int,
                   compute_dtype: str, efficiency: Fraction, tp: int, decode_batch: int,
                   weights_read_bytes_per_gpu: int, kv_bytes_per_gpu: int,
                   bandwidth_bytes_per_s: int) -> PrefillDecode:
    """Time to first token from FLOPs, beside the decode floor of `decode_batch` requests."""
    if not 0 < efficiency <= 1:
        raise BadInputError(f"--efficiency must be in (0, 1], got {float(efficiency)}")
    if peak <= 0 or bandwidth_bytes_per_s <= 0:
        raise BadInputError("the GPU's throughput and memory bandwidth must be known")
    if decode_batch < 1:
        raise BadInputError("the decode batch must be at least 1 request")
    flops = prefill_flops(spec, prompt_tokens, split)
    ttft = Fraction(flops.total_flops) / (tp * peak * efficiency)
    weights_read = int(weights_read_bytes_per_gpu * split.read_fraction(decode_batch))
    step = Fraction(weights_read + kv_bytes_per_gpu, bandwidth_bytes_per_s)
    return PrefillDecode(prompt_tokens, flops, compute_dtype, peak, efficiency, tp, float(ttft),
                         decode_batch, weights_read, kv_bytes_per_gpu, bandwidth_bytes_per_s,
                         float(step), float(decode_batch / step))


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
    transfer_bytes: int  # one request's prompt cache as the prefill side stores it (paged)
    by_kind: tuple[LayerKindTransfer, ...]
    decode_held_bytes: int  # the same tokens in the decode side's format (paged)
    link: str
    link_note: str
    link_bytes_per_s: int
    transfer_s: float
    prefill_gpu_s: float  # GPU-seconds of prefill per request (all its tensor-parallel GPUs)
    decode_gpu_s: float  # GPU-seconds of decode per request at the decode batch
    decode_batch: int
    prefill_gpus_per_decode_gpu: float  # the ratio at which neither pool idles


def disaggregated(spec: ModelSpec, prefill_fmt: KVFormat, decode_fmt: KVFormat,
                  prompt_tokens: int, output_tokens: int, block_size: int, link: str,
                  prefill_tp: int, decode_tp: int, prefill: PrefillDecode,
                  decode_step_s: float, decode_batch: int, decode_gpus: int) -> Disaggregated:
    """What crosses from the prefill pool to the decode pool per request, how long it takes,
    and the GPU ratio that keeps both pools busy: prefill GPU-seconds per request over decode
    GPU-seconds per request (output tokens x step time / batch x the decode instance's GPUs).
    Transfers move whole blocks of each layer's cache (vLLM's NIXL and Mooncake connectors move
    blocks); each distinct byte of the cache crosses once, whatever the two sides' TP."""
    name, bw, note = parse_link(link)
    kinds: dict[str, list[int]] = {}
    total = held = 0
    for layer in spec.layers:
        # one copy of each layer's cache: KV heads split by TP add up to it, and a replicated
        # cache (MLA, fewer KV heads than ranks) crosses once
        slots = layer.paged_tokens(prompt_tokens, block_size)
        sent = (layer.bytes_for_tokens(slots, prefill_fmt) if slots
                else layer.request_bytes(prompt_tokens, prefill_fmt))
        kept = (layer.bytes_for_tokens(slots, decode_fmt) if slots
                else layer.request_bytes(prompt_tokens, decode_fmt))
        entry = kinds.setdefault(layer.kind, [0, 0])
        entry[0] += 1
        entry[1] += sent
        total += sent
        held += kept
    if decode_batch < 1 or decode_step_s <= 0:
        raise BadInputError("the decode pool fits no request of this shape")
    prefill_gpu_s = prefill.ttft_s * prefill_tp
    decode_gpu_s = output_tokens * decode_step_s / decode_batch * decode_gpus
    ratio = prefill_gpu_s / decode_gpu_s if decode_gpu_s else float("inf")
    return Disaggregated(prompt_tokens, output_tokens, prefill_fmt.name, decode_fmt.name, total,
                         tuple(LayerKindTransfer(k, n, b) for k, (n, b) in kinds.items()),
                         held, name, note, bw, float(Fraction(total, bw)), prefill_gpu_s,
                         decode_gpu_s, decode_batch, ratio)


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
    compute_dtype: str | None = None  # None: the checkpoint's (bf16 / fp16 -> bf16 peak)
    tflops: Fraction | None = None  # overrides the catalog's dense throughput (TFLOP/s)
    efficiency: Fraction = Fraction(1, 2)
    active_params: int | None = None
    decode_batch: int | None = None  # None: as many as fit
    tiers: tuple[Tier, ...] = ()
    link: str | None = None  # set: plan disaggregated prefill and decode over it
    decode: Deployment | None = None  # the decode pool's deployment (default: the same)


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


def _decode_side(cap: Capacity, tokens: int, batch: int | None) -> tuple[int, int, int]:
    """(batch, weights bytes per GPU, KV bytes read per GPU) for a decode step at `tokens`."""
    from kvplan.planning.plan import decode_floor, max_concurrency

    fits = max_concurrency(cap, tokens).max_requests
    if batch is None:
        batch = fits
    if batch < 1:
        raise BadInputError(f"not one request of {tokens:,} tokens fits this deployment",
                            "try a shorter --tokens, more GPUs or a smaller KV dtype")
    floor = decode_floor(cap, batch, tokens)
    return batch, floor.weights_read_bytes_per_gpu, floor.kv_bytes_per_gpu


def _prefill(dep: Deployment, cap: Capacity, q: WhatIfQuestion, batch: int | None
             ) -> PrefillDecode:
    from kvplan.planning.compute import param_split
    from kvplan.sources.gpus import find_gpu

    spec = dep.spec
    split = param_split(spec, q.active_params)
    dtype = q.compute_dtype or ("fp16" if spec.dtype == "fp16" else "bf16")
    if q.tflops is not None:
        peak = int(q.tflops * 10**12)
    else:
        if not dep.gpu_name:
            raise BadInputError("the prefill time needs a catalog GPU", "give --gpu, or --tflops")
        gpu = find_gpu(dep.gpu_name)
        peak = peak_flops(gpu.dense_flops_per_s, gpu.name, "bf16" if dtype == "fp16" else dtype)
    tokens = q.prompt_tokens + q.output_tokens
    batch, weights, kv = _decode_side(cap, tokens, batch)
    return prefill_decode(spec, split, q.prompt_tokens, peak, dtype, q.efficiency, dep.tp,
                          batch, weights, kv, dep.gpu_bandwidth_bytes_per_s)


def run(dep: Deployment, question: WhatIfQuestion) -> WhatIfResult:
    """Every what-if the question asks, over one deployment's exact baseline."""
    from kvplan.core.sizing import stage_layers
    from kvplan.planning.plan import capacity, format_for_sizing, kv_budget_bytes, token_capacity
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
        blocks = token_capacity(cap) // block if cap is not None else 0
        if cap is None:
            raise BadInputError("prefix reuse needs a KV pool", "give --gpu or --kv-memory")
        prefix = prefix_reuse(dep.spec, fmt, q.prompt_tokens, q.output_tokens,
                              q.shared_prefix_tokens, q.hit_rate, blocks, block, dep.tp)
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
                               block, q.link, dep.tp, decode_dep.tp, prefill,
                               decode.decode_step_s, decode.decode_batch,
                               decode_dep.tp * decode_dep.pp)
    where = (f"{dep.tp * dep.pp}x {dep.gpu_name}" if dep.gpu_name else
             "a given KV budget" if dep.kv_memory_bytes else "no GPU")
    return WhatIfResult(dep.spec.name, f"{where}, {dep.engine}", q.prompt_tokens,
                        q.output_tokens, block, budget, tuple(rows), prefix, prefill, tiers,
                        disagg, tuple(notes))
