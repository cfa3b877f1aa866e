"""Capacity planning: the questions `kvplan plan` answers, as library functions.

A `Deployment` becomes a `Capacity`: the engine's own start-up numbers (kvplan.engines) and a
`Pool` that says how requests use the memory. Each question is a pure function over a
Capacity that returns a frozen dataclass of ints: `max_concurrency`, `max_context`,
`check_workload`, `fewest_gpus` (the smallest TP x PP layout), `decode_floor` (bytes a decode
step reads -> ms/token), `offload_capacity` (host memory) and `suggestions` (when something
does not fit: what does). Every request is rounded up to whole blocks per group as the
engine rounds it (vLLM's `cdiv(len, block_size)`, the sliding window's extra block, the null
block).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from kvplan.core.dtypes import cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec
from kvplan.engines.base import (  # re-exported: the planner's vocabulary
    Capacity,
    Constraint,
    Deployment,
    Need,
    Pool,
    weights_per_gpu,
)
from kvplan.engines.registry import get as get_engine

if TYPE_CHECKING:
    from kvplan.core.dtypes import KVFormat
    from kvplan.engines.base import Engine
    from kvplan.sources.workload import RequestGroup as RequestGroup
    from kvplan.sources.workload import Workload as Workload
    from kvplan.sources.workload import parse_workload as parse_workload


def __getattr__(name: str) -> Any:
    """The workload's names, re-exported on first use: `plan --context` never reads one."""
    if name in ("RequestGroup", "Workload", "parse_workload"):
        from kvplan.sources import workload

        return getattr(workload, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

SCHEMA = "kvplan.plan/1"
COMPARE_SCHEMA = "kvplan.compare/1"


# --- the deployment, its pool and capacity (kvplan.engines.base) --------------------------


def capacity(dep: Deployment) -> Capacity:
    """The engine's start-up numbers and request pool for a deployment."""
    from kvplan.core.sizing import check_parallelism
    from kvplan.engines.base import check_settings

    engine = get_engine(dep.engine)  # an unknown name is a BadInputError naming the known
    check_settings(dep, engine)
    check_parallelism(dep.spec, dep.tp, dep.pp)
    _refuse_unmodelled_layout(dep, engine)
    if dep.kv_memory_bytes is None and dep.gpu_memory_bytes is None and engine.needs_memory:
        raise BadInputError("no memory to plan with",
                            "give --gpu (a catalog GPU), --gpu-memory 24GiB, or the KV budget "
                            "the engine logged with --kv-memory 57.65GiB")
    return engine.capacity(dep)


def _refuse_unmodelled_layout(dep: Deployment, engine: Engine) -> None:
    """DeepSeek-V4's compressed attention is sized exactly by `kvplan size`; an engine that
    models its pools says so (`models_compressed_attention`: vLLM) and plans it itself. For
    the others refuse rather than guess, naming what the engine allocates that kvplan lacks
    (the engine's own `compressed_attention_pools`)."""
    from kvplan.core.layers import CompressedAttention

    if getattr(engine, "models_compressed_attention", False):
        return
    if any(isinstance(layer, CompressedAttention) for layer in dep.spec.layers):
        pools = getattr(engine, "compressed_attention_pools", "")
        name = getattr(engine, "display_name", "") or dep.engine
        what = (f"kvplan does not model {name}'s KV-cache pools for it: {pools}" if pools
                else f"kvplan has no model of how {name} caches it")
        raise BadInputError(
            f"{dep.spec.name} has DeepSeek-V4 compressed attention (compress_ratios); {what}",
            "use `kvplan size` for its exact per-request bytes")


def engine_numbers(cap: Capacity) -> dict[str, Any]:
    """The engine's own log figures under the names it logs them with (raw ints)."""
    return cap.engine.numbers(cap)


def engine_log_lines(cap: Capacity) -> list[str]:
    return cap.engine.log_lines(cap)


# --- question 1: concurrency at a context -------------------------------------------------

@record
class ConcurrencyResult:
    context_tokens: int
    max_requests: int  # whole requests of context_tokens that fit at once
    limited_by: str  # the constraint (or "max_model_len" / "max requests") that binds
    units_per_request: tuple[int, ...]  # per constraint
    capacity_units: tuple[int, ...]
    engine_concurrency: float  # the engine's own float (vLLM: num_blocks / blocks)


def max_concurrency(cap: Capacity, context_tokens: int) -> ConcurrencyResult:
    pool = cap.pool
    if context_tokens <= 0:
        raise BadInputError(f"the context must be positive, got {context_tokens}")
    units = tuple(c.units(context_tokens) for c in pool.constraints)
    caps = tuple(c.capacity for c in pool.constraints)
    if context_tokens > pool.max_request_tokens:
        return ConcurrencyResult(context_tokens, 0, "max_model_len", units, caps, 0.0)
    best, why = None, ""
    for c, u in zip(pool.constraints, units, strict=True):
        n = c.capacity // u if u else 10**12
        if best is None or n < best:
            best, why = n, c.name
    assert best is not None
    if pool.max_requests is not None and pool.max_requests < best:
        best, why = pool.max_requests, pool.max_requests_setting
    best *= pool.replicas  # each data-parallel rank holds its own requests
    # the engine's own float (vLLM divides all num_blocks, the null block included)
    engine_x = cap.engine.max_concurrency(cap, context_tokens)
    return ConcurrencyResult(context_tokens, best, why, units, caps, engine_x)


# --- question 2: context at a concurrency --------------------------------------------------

@record
class ContextResult:
    concurrency: int
    max_context_tokens: int  # 0 when not even one token per request fits
    limited_by: str  # "memory" | "max_model_len" | the request cap (max_num_seqs, ...)
    units_per_request: tuple[int, ...]  # at max_context_tokens


def max_context(cap: Capacity, concurrency: int) -> ContextResult:
    """The largest L such that `concurrency` requests of L tokens fit and L + 1 does not
    (or L is the engine's maximum length)."""
    if concurrency <= 0:
        raise BadInputError(f"the concurrency must be positive, got {concurrency}")
    pool = cap.pool
    limit = pool.max_request_tokens
    if pool.max_requests is not None and \
            cdiv(concurrency, pool.replicas) > pool.max_requests:
        # the scheduler never runs that many at once, whatever their length
        return ContextResult(concurrency, 0, pool.max_requests_setting,
                             tuple(c.units(1) for c in pool.constraints))
    if not pool.fits(1, concurrency):
        return ContextResult(concurrency, 0, "memory",
                             tuple(c.units(1) for c in pool.constraints))
    if pool.fits(limit, concurrency):
        return ContextResult(concurrency, limit, "max_model_len",
                             tuple(c.units(limit) for c in pool.constraints))
    lo, hi = 1, limit  # fits(lo), not fits(hi): units never fall as L grows
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if pool.fits(mid, concurrency) else (lo, mid)
    return ContextResult(concurrency, lo, "memory", tuple(c.units(lo) for c in pool.constraints))


# --- question 3: a workload ----------------------------------------------------------------

# The workload itself (a histogram of request shapes, read once) is
# kvplan.sources.workload's; the planner sums over its distinct shapes.


@record
class ConstraintUse:
    name: str
    unit: str
    needed: int
    capacity: int
    shared_saving: int  # units saved by prefix sharing and parallel sampling


@record
class WorkloadResult:
    num_requests: int
    num_sequences: int
    longest_tokens: int
    fits: bool
    uses: tuple[ConstraintUse, ...]
    reason: str  # why not, when it does not fit ("" when it fits)
    max_scale: Fraction  # how many times this mix fits (e.g. 1.5 = 50% headroom)


def workload_units(constraint: Constraint, workload: Workload) -> tuple[int, int]:
    """(units needed, units saved by sharing) for a whole workload on one constraint.

    Closed form over the workload's histogram: sum over distinct lengths of count x units,
    each need's sum computed once per workload (the layouts `fewest_gpus` tries share
    their needs, so trying 30 layouts does not sum 30 times)."""
    needed = sum(workload.sum_over_sequences(need, need.units) for need in constraint.needs)
    # the n samples of one request share the prompt's whole blocks: only requests with
    # n > 1 and only shareable needs save anything
    saved = 0
    samples = workload.extra_samples_by_prompt
    if samples:
        for need in constraint.needs:
            if need.shareable:
                saved += sum(c * need.shared_units(p) for p, c in samples)
    needed -= saved
    if workload.shared_prefix_tokens and workload.num_requests > 1:
        prefix = constraint.shared_units(workload.shared_prefix_tokens)
        needed -= (workload.num_requests - 1) * prefix
        saved += (workload.num_requests - 1) * prefix
    return needed, saved


def check_workload(cap: Capacity, workload: Workload) -> WorkloadResult:
    pool = cap.pool
    uses = []
    reason = ""
    scale: Fraction | None = None
    for c in pool.constraints:
        needed, saved = workload_units(c, workload)
        # data-parallel ranks each bring a pool (requests spread evenly over them)
        have = c.capacity * pool.replicas
        uses.append(ConstraintUse(c.name, c.unit, needed, have, saved))
        if needed > have and not reason:
            reason = f"{c.name}: needs {needed:,} {c.unit}s, has {have:,}"
        ratio = Fraction(have, needed) if needed else None
        if ratio is not None and (scale is None or ratio < scale):
            scale = ratio
    if workload.longest > pool.max_request_tokens:
        reason = (f"a request of {workload.longest:,} tokens is longer than the maximum "
                  f"length {pool.max_request_tokens:,}")
        scale = Fraction(0)
    slots_total = None if pool.max_requests is None else pool.max_requests * pool.replicas
    if slots_total is not None and workload.num_sequences > slots_total:
        reason = reason or (f"{workload.num_sequences} sequences but only "
                            f"{slots_total} slots ({pool.max_requests_setting})")
        slots = Fraction(slots_total, workload.num_sequences)
        scale = slots if scale is None else min(scale, slots)
    return WorkloadResult(workload.num_requests, workload.num_sequences, workload.longest,
                          not reason, tuple(uses), reason,
                          scale if scale is not None else Fraction(10**9))


# --- question 4: the fewest GPUs -----------------------------------------------------------

@record
class Target:
    """What a deployment must do: `concurrency` requests of `context` tokens, or a workload."""

    context_tokens: int | None = None
    concurrency: int | None = None
    workload: Workload | None = None

    def met_by(self, cap: Capacity) -> bool:
        if self.workload is not None:
            return check_workload(cap, self.workload).fits
        if self.context_tokens is not None:
            return max_concurrency(cap, self.context_tokens).max_requests >= (
                self.concurrency or 1)
        if self.concurrency is not None:
            return max_context(cap, self.concurrency).max_context_tokens > 0
        return True

    def describe(self) -> str:
        if self.workload is not None:
            return f"the workload {self.workload.source}"
        if self.context_tokens is not None:
            return f"{self.concurrency or 1} request(s) of {self.context_tokens:,} tokens"
        return f"{self.concurrency or 1} request(s) of at least one token"


@record
class LayoutOption:
    tp: int
    pp: int
    num_gpus: int
    meets_target: bool
    max_requests: int | None  # at the target context (None without one)
    kv_budget_bytes: int | None  # the smallest stage's (None when the engine has none)
    error: str  # why the layout is impossible ("" when it is possible)
    dp: int = 1  # data-parallel ranks (vLLM --data-parallel-size, SGLang --dp)
    dcp: int = 1  # vLLM decode context parallel


@record
class LayoutResult:
    target: str
    best: LayoutOption | None  # None: no layout tried meets the target
    options: tuple[LayoutOption, ...]

    @property
    def closest(self) -> LayoutOption | None:
        """The layout to show when none meets the target: the most GPUs that the engine can
        start on (then the highest TP). None when it starts on none of them."""
        possible = [o for o in self.options if not o.error]
        return max(possible, key=lambda o: (o.num_gpus, o.tp)) if possible else None


def candidate_layouts(spec: ModelSpec, num_gpus: int) -> list[tuple[int, int]]:
    """(tp, pp) with tp x pp = num_gpus that the model can be split into, highest TP first
    (TP bounded by the attention and KV heads: sizing.check_parallelism)."""
    from kvplan.core.sizing import check_parallelism

    out = []
    for tp in range(num_gpus, 0, -1):
        if num_gpus % tp:
            continue
        pp = num_gpus // tp
        try:
            check_parallelism(spec, tp, pp)
        except BadInputError:
            continue
        out.append((tp, pp))
    return out


def candidate_deployments(dep: Deployment, num_gpus: int) -> list[Deployment]:
    """`dep` laid out over `num_gpus` GPUs in the parallel style it asks for:
    - data parallel (dp > 1): the same TP x PP group per DP rank, as many ranks as fit;
    - SGLang DP attention: TP over every GPU, DP so that attention keeps tp // dp ranks;
    - decode context parallel (dcp > 1): each TP layout with dcp = tp // (KV-head groups);
    - otherwise every TP x PP split (`candidate_layouts`)."""
    if dep.dp_attention and dep.dp > 1:
        attn_tp = max(1, dep.tp // dep.dp)
        if num_gpus % attn_tp:
            return []
        return [replace(dep, tp=num_gpus, pp=1, dp=num_gpus // attn_tp)]
    if dep.dp > 1:
        group = dep.tp * dep.pp
        return [replace(dep, dp=num_gpus // group)] if num_gpus % group == 0 else []
    out = []
    for tp, pp in candidate_layouts(dep.spec, num_gpus):
        if dep.dcp > 1:
            heads_groups = max(1, dep.tp // dep.dcp)
            if tp % heads_groups:
                continue
            out.append(replace(dep, tp=tp, pp=pp, dcp=tp // heads_groups))
        else:
            out.append(replace(dep, tp=tp, pp=pp))
    return out


def fewest_gpus(dep: Deployment, target: Target, max_gpus: int = 64,
                counts: Sequence[int] | None = None) -> LayoutResult:
    """The smallest number of GPUs (then the highest TP) whose capacity meets `target`.

    `counts` are the instance sizes tried, by default the powers of two up to `max_gpus`
    (1, 2, 4, 8 GPUs per node, then whole nodes); pass range(1, n) to try every size."""
    options: list[LayoutOption] = []
    best: LayoutOption | None = None
    if counts is None:
        counts = [2**i for i in range(max_gpus.bit_length()) if 2**i <= max_gpus]
    for count in counts:
        for trial in candidate_deployments(dep, count):
            tp, pp, dp, dcp = trial.tp, trial.pp, trial.dp, trial.dcp
            try:
                cap = capacity(trial)
            except BadInputError as exc:
                options.append(LayoutOption(tp, pp, count, False, None, None, exc.message,
                                            dp, dcp))
                continue
            ok = target.met_by(cap)
            reqs = (max_concurrency(cap, target.context_tokens).max_requests
                    if target.context_tokens else None)
            budget = cap.budget.available if cap.budget is not None else None
            option = LayoutOption(tp, pp, count, ok, reqs, budget, "", dp, dcp)
            options.append(option)
            if ok and best is None:
                best = option
        if best is not None:
            break
    return LayoutResult(target.describe(), best, tuple(options))


# --- question 5: the decode floor ----------------------------------------------------------

@record
class DecodeFloor:
    batch: int
    context_tokens: int
    # the weights one step reads on the fullest GPU: MoE only the experts the batch routes
    # to, never an untied input embedding table (less than the weights the GPU holds)
    weights_read_bytes_per_gpu: int
    kv_bytes_per_gpu: int  # the batch's KV read per step on the fullest GPU
    bytes_per_step: int
    hbm_bandwidth_bytes_per_s: int
    ms_per_token: float  # per output token of one request (a lower bound)
    tokens_per_s: float  # the whole batch (an upper bound)
    # weights a step reads from host memory (Capacity.host_weights_bytes): not in this floor,
    # whose time is the GPUs' alone; kvplan knows no host memory bandwidth
    host_weights_bytes: int = 0


def decode_floor(cap: Capacity, batch: int, context_tokens: int) -> DecodeFloor:
    """Memory-bound decode: every step reads the weights it uses on each GPU (MoE: the experts
    the batch routes to; not the input embedding table) and the batch's KV. With pipeline
    stages a token passes each stage in turn (pp x one stage's time). Weights kept in host
    memory (partial offload, tensor overrides, --cpu-offload-gb) are named, not timed: the
    floor stays a lower bound, that of the GPUs' reads alone."""
    from kvplan.core.sizing import pp_stages, request_bytes

    dep = cap.deployment
    bw = dep.gpu_bandwidth_bytes_per_s
    if not bw:
        raise BadInputError("the GPU's memory bandwidth is unknown",
                            "give a catalog GPU with --gpu (kvplan gpus lists them)")
    if batch <= 0 or context_tokens <= 0:
        raise BadInputError("the batch and context must be positive")
    fmt = format_for_sizing(cap)
    kv = 0
    for a, b in pp_stages(dep.spec.num_layers, dep.pp):
        kv = max(kv, batch * request_bytes(dep.spec.layers[a:b], context_tokens, fmt, dep.tp))
    weights = int(cap.weights_per_gpu_bytes * _read_fraction(dep.spec, batch))
    per_step = weights + kv
    seconds = Fraction(per_step * dep.pp, bw)
    return DecodeFloor(batch, context_tokens, weights, kv, per_step, bw,
                       float(seconds * 1000), float(batch / seconds) if seconds else 0.0,
                       cap.host_weights_bytes)


def _read_fraction(spec: ModelSpec, batch: int) -> Fraction:
    """The share of the weights a decode step reads: MoE layers only the experts the batch
    routes to, never an untied embedding table (kvplan.planning.compute.ParamSplit)."""
    from kvplan.planning.compute import param_split

    try:
        return param_split(spec).read_fraction(batch)
    except BadInputError:  # no parameter count, or a MoE whose expert shapes are unknown:
        # read everything
        return Fraction(1)


def format_for_sizing(cap: Capacity) -> KVFormat:
    """The format the engine stores, for kvplan.core.sizing's exact byte formulas."""
    return cap.engine.sizing_format(cap)


# --- question 6: KV offload to host memory -------------------------------------------------

@record
class OffloadResult:
    host_memory_bytes: int  # per GPU
    bytes_per_block: int
    num_cpu_blocks: int
    tokens: int
    requests_at_context: int | None


def offload_capacity(cap: Capacity, host_memory_bytes: int,
                     context_tokens: int | None = None) -> OffloadResult:
    """KV blocks that fit in host memory (vLLM swap space / CPU offload: whole blocks of the
    same layout, `host // bytes_per_block`, as V0 printed "# CPU blocks")."""
    if host_memory_bytes <= 0:
        raise BadInputError("the host memory must be positive")
    unit = cap.engine.host_blocks(cap, context_tokens)
    per_block, tokens_per_block = unit.bytes_per_unit, unit.tokens_per_unit
    blocks = host_memory_bytes // per_block if per_block else 0
    reqs = None
    if context_tokens:
        need = unit.units_per_request
        reqs = blocks // need if need else None
    return OffloadResult(host_memory_bytes, per_block, blocks, blocks * tokens_per_block, reqs)


# --- when something does not fit -----------------------------------------------------------

@record
class Suggestions:
    max_context_at_concurrency: int | None  # the largest context for the asked concurrency
    max_concurrency_at_context: int | None  # the largest batch at the asked context
    kv_dtype_that_fits: str | None  # the first smaller KV dtype that meets the target
    notes: tuple[str, ...] = field(default=())


def smaller_kv_dtypes(engine: str) -> tuple[str, ...]:
    return get_engine(engine).smaller_kv_dtypes


def suggestions(cap: Capacity, target: Target) -> Suggestions:
    ctx = conc = None
    # a workload: how many of its longest requests fit, and how long its sequences can be
    want_conc = target.workload.num_sequences if target.workload else target.concurrency
    want_ctx = target.workload.longest if target.workload else target.context_tokens
    if want_conc:
        ctx = max_context(cap, want_conc).max_context_tokens
    if want_ctx:
        conc = max_concurrency(cap, want_ctx).max_requests
    dtype = None
    current = cap.kv_format
    for name in smaller_kv_dtypes(cap.deployment.engine):
        if name.replace("fp8", "fp8_e4m3") == current or name == current:
            continue
        try:
            trial = capacity(replace(cap.deployment, kv_dtype=name))
        except BadInputError:
            continue
        if target.met_by(trial):
            dtype = name
            break
    return Suggestions(ctx, conc, dtype)


# --- what the engine gives the KV pool -------------------------------------------------

def kv_budget_bytes(cap: Capacity) -> int:
    """The bytes the engine gives its KV pool on one GPU."""
    return cap.engine.kv_budget_bytes(cap)


def token_capacity(cap: Capacity) -> int:
    """Token slots of the pool: vLLM num_blocks x block, SGLang tokens, TRT blocks x 32,
    llama.cpp cells, transformers budget / bytes per token (each engine says)."""
    return cap.engine.token_capacity(cap)


__all__ = [
    # the vocabulary shared with the engines (defined in kvplan.engines.base)
    "Deployment", "Need", "Constraint", "Pool", "Capacity", "weights_per_gpu",
    # the questions
    "capacity", "engine_numbers", "engine_log_lines", "max_concurrency", "max_context",
    "parse_workload", "check_workload", "workload_units", "fewest_gpus", "candidate_layouts",
    "decode_floor", "format_for_sizing", "offload_capacity", "suggestions",
    "smaller_kv_dtypes", "kv_budget_bytes", "token_capacity",
    # results
    "ConcurrencyResult", "ContextResult", "RequestGroup", "Workload", "ConstraintUse",
    "WorkloadResult", "Target", "LayoutOption", "LayoutResult", "DecodeFloor",
    "OffloadResult", "Suggestions", "SCHEMA", "COMPARE_SCHEMA",
]
