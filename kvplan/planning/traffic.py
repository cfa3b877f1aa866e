"""Sizing from traffic: a request rate, a request mix and latency targets -> replicas.

Bounds, not a simulation: each figure is what the traffic needs at the least, from the same
models `kvplan plan` and `kvplan whatif` use (plan.decode_floor's memory-bound decode step,
compute.prefill's FLOPs over the dense peak at a stated efficiency). Queueing, scheduling,
chunked prefill interfering with decode and skewed expert routing only add to them.
Requests in flight come from Little's law (L = lambda x W, W = TTFT + O x ITL); replicas are
the largest of the memory, bandwidth and compute bounds (aggregated: max(memory,
ceil(prefill share + decode share)); a prefill:decode split sizes each pool on its own).
The derivation: docs/formulas.md §7; a worked example: docs/whatif.md, "Sizing from traffic".
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import TYPE_CHECKING

from kvplan.core.errors import BadInputError
from kvplan.core.record import record

if TYPE_CHECKING:
    from kvplan.engines.base import Capacity, Deployment
    from kvplan.planning.plan import DecodeFloor
    from kvplan.sources.workload import Workload

SCHEMA = "kvplan.traffic/1"

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|us)?\s*$", re.IGNORECASE)
_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(/s|/min|/h|rps|qps)?\s*$", re.IGNORECASE)


def parse_seconds(text: str, flag: str) -> Fraction:
    """'200ms', '0.2s', '0.2' (seconds), '50us' -> seconds as a Fraction (positive)."""
    m = _DURATION.match(text)
    if not m:
        raise BadInputError(f"{flag} {text!r} is not a duration", "e.g. 200ms, 0.5s or 2s")
    value = Fraction(m.group(1)) / {"ms": 1000, "us": 10**6}.get((m.group(2) or "s").lower(), 1)
    if value <= 0:
        raise BadInputError(f"{flag} must be positive, got {text!r}")
    return value


def parse_rate(text: str) -> Fraction:
    """'5', '5/s', '300/min', '18000/h', '5 rps' -> requests per second (positive)."""
    m = _RATE.match(text)
    if not m:
        raise BadInputError(f"--rate {text!r} is not a request rate", "e.g. 5/s or 300/min")
    per = {"/min": 60, "/h": 3600}.get((m.group(2) or "/s").lower(), 1)
    value = Fraction(m.group(1)) / per
    if value <= 0:
        raise BadInputError(f"--rate must be positive, got {text!r}")
    return value


@record
class TrafficPlan:
    rate_per_s: Fraction
    requests_in_mix: int
    mean_prompt_tokens: Fraction
    mean_output_tokens: Fraction  # per request (parallel samples included)
    decode_context_tokens: int  # the decode-time-weighted mean context (P + O / 2)
    gpus_per_replica: int
    # latencies: the targets, or the floors where no target was given
    ttft_s: Fraction
    ttft_target: bool
    itl_s: Fraction
    itl_target: bool
    prefill_floor_s: float  # the mean prompt's prefill on one replica's TP ranks
    time_in_system_s: Fraction  # TTFT + O x ITL
    in_flight: Fraction  # Little's law: rate x time in system
    in_flight_prefill: Fraction
    in_flight_decode: Fraction
    # memory
    kv_bytes_in_flight: int  # the in-flight requests' cache, every replica together
    memory_constraint: str  # the pool constraint that binds, or the request cap's setting
    units_per_request: Fraction
    capacity_units_per_replica: int
    max_requests_per_replica: int | None  # the request cap (max_num_seqs), if any
    memory_share: Fraction  # replicas' worth of memory the in-flight requests take
    memory_by_request_cap: bool  # the request cap binds before the pool does
    replicas_by_memory: int
    # bandwidth
    decode_batch: int  # B*: the largest batch meeting the ITL target that fits one replica
    decode: DecodeFloor | None  # at decode_batch
    decode_share: Fraction  # replicas' worth of time decode takes: rate x O x step / B*
    replicas_by_bandwidth: int
    # compute
    prefill_flops_per_request: int
    decode_flops_per_request: int
    compute_dtype: str
    peak_flops_per_s: int
    efficiency: Fraction
    prefill_share: Fraction  # replicas' worth of time prefill takes
    compute_share: Fraction  # ... prefill and decode FLOPs together
    replicas_by_compute: int
    # answers
    aggregated_replicas: int
    aggregated_binding: str  # memory | bandwidth | compute
    prefill_replicas: int  # the split: a prefill pool by compute
    decode_replicas: int  # ... and a decode pool by max(memory of decoding requests, bandwidth)
    decode_binding: str
    infeasible: tuple[str, ...]  # targets this layout cannot meet at any rate
    assumptions: tuple[str, ...]

    @property
    def aggregated_gpus(self) -> int:
        return self.aggregated_replicas * self.gpus_per_replica

    @property
    def split_gpus(self) -> int:
        return (self.prefill_replicas + self.decode_replicas) * self.gpus_per_replica


def _ceil(x: Fraction) -> int:
    return max(1, math.ceil(x)) if x > 0 else 0


def size_for_traffic(cap: Capacity, workload: Workload, rate_per_s: Fraction,
                     ttft_s: Fraction | None = None, itl_s: Fraction | None = None,
                     efficiency: Fraction = Fraction(1, 2), compute_dtype: str | None = None,
                     tflops: Fraction | None = None) -> TrafficPlan:
    """Replicas of `cap`'s deployment that `rate_per_s` requests/s of `workload` need, by
    memory, bandwidth and compute, for aggregated serving and a prefill:decode split (module
    docstring)."""
    from kvplan.planning.compute import deployment_prefill, param_split, prefill_flops
    from kvplan.planning.plan import decode_floor, max_concurrency, workload_units

    if rate_per_s <= 0:
        raise BadInputError("--rate must be positive")
    dep = cap.deployment
    if not dep.gpu_bandwidth_bytes_per_s:
        raise BadInputError("sizing from traffic needs the GPU's bandwidth and throughput",
                            "give a catalog GPU with --gpu")
    groups = workload.groups
    count = workload.num_requests
    prompt_sum = sum(g.count * g.prompt_tokens for g in groups)
    output_sum = sum(g.count * g.output_tokens * g.n for g in groups)
    mean_p = Fraction(prompt_sum, count)
    mean_o = Fraction(output_sum, count)
    if output_sum == 0:
        raise BadInputError("the workload generates no tokens", "give output lengths, e.g. "
                            "--requests 2k+512")
    # the context a decode step sees, weighted by the time each request spends decoding
    ctx = round(Fraction(sum(g.count * g.n * g.output_tokens
                             * (2 * g.prompt_tokens + g.output_tokens) for g in groups),
                         2 * output_sum))
    gpus = dep.tp * dep.pp
    # prefill: the same model whatif uses, for each distinct prompt
    split = param_split(dep.spec)
    prefill_flops_sum = sum(g.count * prefill_flops(dep.spec, g.prompt_tokens, split).total_flops
                            for g in groups if g.prompt_tokens)
    prefill_per_request = round(Fraction(prefill_flops_sum, count))
    decode_per_request = round(2 * split.active_params * mean_o)
    mean_prompt = max(1, round(mean_p))
    pre = deployment_prefill(dep, mean_prompt, compute_dtype, tflops, efficiency)
    replica_flops = gpus * pre.peak_flops_per_s * efficiency
    infeasible: list[str] = []
    longest = max(g.prompt_tokens for g in groups)
    if ttft_s is not None and longest:
        # every request must meet the target: the longest prompt's prefill, alone on the
        # replica's TP ranks, is the least its TTFT can be
        slow = pre if longest == mean_prompt else deployment_prefill(
            dep, longest, compute_dtype, tflops, efficiency)
        if Fraction(slow.seconds) > ttft_s:
            infeasible.append(f"TTFT {float(ttft_s) * 1000:,.1f} ms: a {longest:,}-token "
                              f"prompt's prefill alone takes {slow.seconds * 1000:,.1f} ms on "
                              f"{dep.tp} GPU(s) at {float(efficiency):.0%} of peak")
    # decode: the largest batch that fits one replica and meets the ITL target
    fits = max_concurrency(cap, max(1, ctx)).max_requests
    if fits < 1:
        raise BadInputError(f"not one request of {ctx:,} tokens fits this deployment",
                            "more GPUs per replica, or a smaller KV dtype")

    def step(batch: int) -> Fraction:
        return Fraction(decode_floor(cap, batch, ctx).ms_per_token) / 1000

    batch = fits
    if itl_s is not None:
        if step(1) > itl_s:
            infeasible.append(f"ITL {float(itl_s) * 1000:,.2f} ms: one request's decode step "
                              f"alone reads for {float(step(1)) * 1000:,.2f} ms")
            batch = 1
        else:
            lo, hi = 1, fits  # step(lo) meets the target; find the largest that does
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if step(mid) <= itl_s else (lo, mid - 1)
            batch = lo
    floor = decode_floor(cap, batch, ctx)
    step_s = Fraction(floor.ms_per_token) / 1000
    ttft = ttft_s if ttft_s is not None else Fraction(pre.seconds)
    itl = itl_s if itl_s is not None else step_s
    in_prefill = rate_per_s * ttft
    in_decode = rate_per_s * mean_o * itl
    in_flight = in_prefill + in_decode
    # memory: each request in the system holds its whole length, as the engine counts it
    best: tuple[Fraction, str, Fraction, int] | None = None
    pool = cap.pool
    for c in pool.constraints:
        needed, _ = workload_units(c, workload)
        per_request = Fraction(needed, count)
        replicas = in_flight * per_request / (c.capacity * pool.replicas)
        if best is None or replicas > best[0]:
            best = (replicas, c.name, per_request, c.capacity * pool.replicas)
    assert best is not None
    mem_replicas, mem_name, per_request, units = best
    slots = None if pool.max_requests is None else pool.max_requests * pool.replicas
    by_cap = slots is not None and in_flight / slots > mem_replicas
    if by_cap:
        assert slots is not None
        mem_replicas, mem_name = in_flight / slots, pool.max_requests_setting
    decode_mem = in_decode * per_request / units
    if slots is not None:
        decode_mem = max(decode_mem, in_decode / slots)
    from kvplan.core.sizing import request_bytes

    fmt = cap.engine.sizing_format(cap)
    kv_in_flight = round(in_flight * Fraction(
        sum(g.count * g.n * request_bytes(dep.spec.layers, g.tokens, fmt) for g in groups),
        count))
    decode_share = rate_per_s * mean_o * step_s / batch
    prefill_share = rate_per_s * prefill_per_request / replica_flops
    compute_share = rate_per_s * (prefill_per_request + decode_per_request) / replica_flops
    by_memory = _ceil(mem_replicas)
    by_bandwidth = _ceil(decode_share)
    by_compute = _ceil(compute_share)
    time_shared = _ceil(prefill_share + decode_share)
    aggregated = max(by_memory, time_shared)
    shares = {"memory": mem_replicas, "bandwidth": decode_share, "compute": prefill_share}
    binding = max(shares, key=lambda k: shares[k])
    decode_pool = max(_ceil(decode_mem), by_bandwidth)
    decode_binding = "memory" if decode_mem > decode_share else "bandwidth"
    assumptions = (
        "queueing, scheduling, chunked prefill beside decode and routing skew only add to "
        "these bounds",
        f"Little's law: in flight = rate x (TTFT + {float(mean_o):,.1f} output tokens x ITL)"
        + ("" if ttft_s is not None and itl_s is not None else
           "; latencies not given are their floors"),
        "each in-flight request holds its whole length (prompt + output) in the engine's "
        "blocks",
        f"decode step: weights read + the batch's cache at {ctx:,} tokens (the decode-time "
        "mean context) over HBM bandwidth (kvplan plan's decode floor)",
        f"prefill: FLOPs over {pre.compute_dtype} dense peak x {float(efficiency):.0%} "
        f"({pre.compute_dtype_why}); decode: 2 x {split.active_params:,} active parameters a "
        "token, attention FLOPs left out",
        "aggregated: a replica's time is shared by prefill and decode; split: a prefill pool "
        "sized by compute, a decode pool by memory and bandwidth, the same layout each",
    ) + (("prefill FLOPs count every prompt token: a cached shared prefix would save its "
          "FLOPs (the memory bound shares its whole blocks)",)
         if workload.shared_prefix_tokens else ())
    return TrafficPlan(
        rate_per_s, count, mean_p, mean_o, ctx, gpus, ttft, ttft_s is not None, itl,
        itl_s is not None, pre.seconds, ttft + mean_o * itl, in_flight, in_prefill, in_decode,
        kv_in_flight, mem_name, per_request, units, slots, mem_replicas, by_cap, by_memory,
        batch, floor,
        decode_share, by_bandwidth, prefill_per_request, decode_per_request, pre.compute_dtype,
        pre.peak_flops_per_s, efficiency, prefill_share, compute_share, by_compute, aggregated,
        binding, _ceil(prefill_share), decode_pool, decode_binding, tuple(infeasible), assumptions)


@record
class TrafficLayout:
    tp: int
    pp: int
    gpus_per_replica: int
    plan: TrafficPlan | None  # None: the layout cannot serve (error)
    error: str

    @property
    def total_gpus(self) -> int | None:
        return self.plan.aggregated_gpus if self.plan is not None else None


@record
class TrafficLayouts:
    best: TrafficLayout | None  # the fewest GPUs in all whose targets are reachable
    options: tuple[TrafficLayout, ...]


def fewest_gpus_for_traffic(dep: Deployment, workload: Workload, rate_per_s: Fraction,
                            ttft_s: Fraction | None = None, itl_s: Fraction | None = None,
                            efficiency: Fraction = Fraction(1, 2),
                            compute_dtype: str | None = None,
                            counts: tuple[int, ...] = (1, 2, 4, 8)) -> TrafficLayouts:
    """`size_for_traffic` for replicas of each TP x PP layout of `counts` GPUs (as `plan
    --find-gpus` lays them out): the layout whose aggregated replicas use the fewest GPUs in
    all, among those that can meet the targets (then the one with fewer GPUs per replica)."""
    from kvplan.planning.plan import candidate_deployments, capacity

    options: list[TrafficLayout] = []
    for count in counts:
        for trial in candidate_deployments(dep, count):
            try:
                t = size_for_traffic(capacity(trial), workload, rate_per_s, ttft_s, itl_s,
                                     efficiency, compute_dtype)
            except BadInputError as exc:
                options.append(TrafficLayout(trial.tp, trial.pp, trial.num_gpus, None,
                                             exc.message))
                continue
            options.append(TrafficLayout(trial.tp, trial.pp, trial.num_gpus, t,
                                         "; ".join(t.infeasible)))
    usable = [o for o in options if o.plan is not None and not o.error]
    best = min(usable, key=lambda o: (o.total_gpus, o.gpus_per_replica), default=None)
    return TrafficLayouts(best, tuple(options))
