"""Capacity planning: the questions `kvplan plan` answers, as library functions.

A `Deployment` (model, engine, GPU, parallelism, KV dtype, budget settings) becomes a
`Capacity`: the engine's own start-up numbers (kvplan.engines) and a `Pool` that says how
requests use the memory - vLLM blocks shared by layer groups, SGLang tokens, TRT-LLM blocks,
llama.cpp cells, transformers bytes. Each question is a pure function over a Capacity that
returns a frozen dataclass of ints:

- `max_concurrency(cap, context)`        requests of `context` tokens that fit at once
- `max_context(cap, concurrency)`        the longest context `concurrency` requests can have
- `check_workload(cap, workload)`        whether a mix of (prompt + output) requests fits
- `fewest_gpus(...)`                     the smallest TP x PP layout that meets a target
- `decode_floor(cap, batch, context)`    bytes read per decode step -> ms/token, tokens/s
- `offload_capacity(cap, host_bytes)`    KV blocks/tokens that fit in host memory
- `suggestions(...)`                     when something does not fit: what does

Every request is rounded up to whole blocks per group (vLLM's `cdiv(len, block_size)`, the
sliding window's extra block, Mamba's whole-state pages); vLLM keeps one block aside as the
null block.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.core.dtypes import cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.layers import ATTENTION_KINDS
from kvplan.core.spec import ModelSpec
from kvplan.engines import ENGINES
from kvplan.engines.budget import Budget, ModelDims

if TYPE_CHECKING:
    from kvplan.core.dtypes import KVFormat
    from kvplan.engines.vllm import VllmConfig
    from kvplan.sources.gpus import GPU

SCHEMA = "kvplan.plan/1"
COMPARE_SCHEMA = "kvplan.compare/1"


# --- the deployment -----------------------------------------------------------------------

@dataclass(frozen=True)
class Deployment:
    """Everything that decides the KV capacity of one serving instance."""

    spec: ModelSpec
    engine: str = "vllm"
    engine_version: str | None = None
    gpu_name: str | None = None
    gpu_memory_bytes: int | None = None  # what the GPU reports (kvplan.sources.gpus memory_bytes)
    gpu_bandwidth_bytes_per_s: int = 0
    gpu_arch: str = ""  # e.g. "hopper 9.0", picks vLLM's MLA block size
    tp: int = 1
    pp: int = 1
    kv_dtype: str = "auto"
    max_model_len: int | None = None  # None: the model's maximum context
    block_size: int | None = None
    kv_memory_bytes: int | None = None  # a measured KV budget (per GPU)
    memory_fraction: float | None = None  # vLLM gpu_memory_utilization / SGLang
    # mem_fraction_static / TRT-LLM free_gpu_memory_fraction
    weights_dtype: str = "auto"
    weights_bytes: int | None = None  # the whole model's measured weight size
    activation_bytes: int | None = None
    non_torch_bytes: int | None = None
    cudagraph_bytes: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    dims: ModelDims | None = None
    num_draft_layers: int = 0
    parallel: int = 1  # llama.cpp --parallel
    hf_cache: str = "dynamic"

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp

    def with_gpu(self, gpu: GPU) -> Deployment:
        """This deployment on `gpu` (a catalog or custom GPU): its name, the memory it
        reports, its bandwidth, and the architecture that picks vLLM's MLA block size."""
        arch = f"{gpu.architecture} sm{gpu.compute_capability}" if gpu.compute_capability \
            else ""
        return replace(self, gpu_name=gpu.name, gpu_memory_bytes=gpu.memory_bytes,
                       gpu_bandwidth_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s, gpu_arch=arch)

    def context_limit(self) -> int:
        return self.max_model_len or self.spec.max_context_tokens or 8192


# --- how requests use memory --------------------------------------------------------------

@dataclass(frozen=True)
class Need:
    """How one request of L tokens uses one pool.

    kind: full (every token), window (at most `cap` tokens), fixed (`fixed` blocks whatever
    L is: recurrent state, cross attention). A request holds `cdiv(held, block_size) +
    extra_blocks` blocks of `weight` units each.
    """

    kind: str
    block_size: int = 1
    cap: int = 0
    extra_blocks: int = 0
    fixed: int = 0
    weight: int = 1
    shareable: bool = False  # whole blocks of a common prefix can be shared (prefix caching)

    def units(self, tokens: int) -> int:
        if self.kind == "fixed":
            return self.fixed * self.weight
        held = min(tokens, self.cap) if self.kind == "window" else tokens
        return (cdiv(held, self.block_size) + self.extra_blocks) * self.weight

    def shared_units(self, prefix_tokens: int) -> int:
        """Units of a common prefix that requests can share: whole blocks only."""
        if not self.shareable:
            return 0
        return prefix_tokens // self.block_size * self.weight


@dataclass(frozen=True)
class Constraint:
    """One pool with a fixed capacity (blocks, tokens, cells, slots or bytes)."""

    name: str
    unit: str
    capacity: int
    needs: tuple[Need, ...]

    def units(self, tokens: int) -> int:
        return sum(n.units(tokens) for n in self.needs)

    def shared_units(self, prefix_tokens: int) -> int:
        return sum(n.shared_units(prefix_tokens) for n in self.needs)


@dataclass(frozen=True)
class Pool:
    engine: str
    constraints: tuple[Constraint, ...]
    max_request_tokens: int  # max_model_len, or llama.cpp's per-slot context
    max_requests: int | None = None  # llama.cpp --parallel
    tokens_per_unit: int = 1  # block size of the first constraint (for token figures)

    def fits(self, tokens: int, count: int) -> bool:
        if count <= 0:
            return True
        if tokens > self.max_request_tokens:
            return False
        if self.max_requests is not None and count > self.max_requests:
            return False
        return all(count * c.units(tokens) <= c.capacity for c in self.constraints)


@dataclass(frozen=True)
class Capacity:
    """A deployment's KV capacity: the engine's numbers and the pool they imply."""

    deployment: Deployment
    budget: Budget | None
    engine_profile: Any  # VllmProfile | SglangProfile | TrtllmProfile | LlamacppProfile | Hf
    pool: Pool
    kv_format: str
    weights_per_gpu_bytes: int  # the fullest GPU (0 when unknown)
    kv_bytes_per_token: int  # per GPU, every layer still growing (the fullest stage)
    notes: tuple[str, ...] = ()

    @property
    def engine_numbers(self) -> dict[str, Any]:
        return engine_numbers(self)


# --- building a Capacity ------------------------------------------------------------------

def _version(dep: Deployment) -> tuple[int, ...] | None:
    from kvplan.engines import parse_version

    return parse_version(dep.engine_version)


def capacity(dep: Deployment) -> Capacity:
    """The engine's start-up numbers and request pool for a deployment."""
    from kvplan.core.sizing import check_parallelism

    if dep.engine not in ENGINES:
        raise BadInputError(f"unknown engine {dep.engine!r}", "one of: " + ", ".join(ENGINES))
    check_parallelism(dep.spec, dep.tp, dep.pp)
    if dep.kv_memory_bytes is None and dep.gpu_memory_bytes is None \
            and dep.engine not in ("llamacpp",):
        raise BadInputError("no memory to plan with",
                            "give --gpu (a catalog GPU), --gpu-memory 24GiB, or the KV budget "
                            "the engine logged with --kv-memory 57.65GiB")
    build: dict[str, Callable[[Deployment], Capacity]] = {
        "vllm": _vllm, "sglang": _sglang, "trtllm": _trtllm, "llamacpp": _llamacpp, "hf": _hf}
    return build[dep.engine](dep)


def _vllm_config(dep: Deployment) -> VllmConfig:
    from kvplan.engines import vllm

    ver = _version(dep) or vllm.LATEST
    mbt = dep.max_num_batched_tokens or vllm.default_max_num_batched_tokens(
        dep.gpu_memory_bytes, dep.gpu_name, version=ver)
    return vllm.VllmConfig(
        max_model_len=dep.context_limit(), version=ver,
        kv_cache_dtype=_vllm_dtype(dep.kv_dtype), block_size=dep.block_size, tp=dep.tp,
        pp=dep.pp, max_num_batched_tokens=mbt, num_draft_layers=dep.num_draft_layers,
        gpu_name=f"{dep.gpu_name or ''} {dep.gpu_arch}".strip() or None)


def _vllm_dtype(name: str) -> str:
    # kvplan's names for the same formats
    return {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(name, name)


def _vllm(dep: Deployment) -> Capacity:
    from kvplan.engines import vllm
    from kvplan.engines.budget import measured_budget, vllm_budget

    config = _vllm_config(dep)
    if dep.kv_memory_bytes is not None:
        budget = measured_budget(dep.kv_memory_bytes, "vllm", ".".join(map(str, config.version)),
                                 dep.pp)
    else:
        assert dep.gpu_memory_bytes is not None
        budget = vllm_budget(
            dep.spec, dep.gpu_memory_bytes, version=config.version, tp=dep.tp, pp=dep.pp,
            gpu_memory_utilization=dep.memory_fraction, weights=dep.weights_dtype,
            weights_bytes=dep.weights_bytes, activation_bytes=dep.activation_bytes,
            non_torch_bytes=dep.non_torch_bytes, cudagraph_bytes=dep.cudagraph_bytes,
            max_num_batched_tokens=config.max_num_batched_tokens,
            max_num_seqs=dep.max_num_seqs, dims=dep.dims, gpu_name=dep.gpu_name)
    prof = vllm.profile(dep.spec, config, budget.available_kv_cache_bytes)
    constraints = []
    t = config.in_flight_tokens()
    for i, stage in enumerate(prof.stages):
        needs = []
        for g in stage.groups:
            if g.kind in ("full", "mla"):
                needs.append(Need("full", g.block_size, shareable=True))
            elif g.kind == "sliding":
                needs.append(Need("window", g.block_size, cap=g.window - 1 + t, extra_blocks=1))
            elif g.kind == "chunked":
                needs.append(Need("window", g.block_size, cap=g.window + t))
            else:  # mamba, cross: a fixed number of blocks per request
                needs.append(Need("fixed", g.block_size, fixed=g.blocks_per_request))
        name = "KV blocks" + (f" (stage {i})" if len(prof.stages) > 1 else "")
        # every worker allocates the min over workers; one block is the permanent null
        # block (block_pool.py)
        constraints.append(Constraint(name, "block", prof.usable_blocks, tuple(needs)))
    pool = Pool("vllm", tuple(constraints), config.max_model_len,
                tokens_per_unit=prof.block_size)
    return Capacity(dep, budget, prof, pool, prof.kv_cache_dtype,
                    max(budget.weights_bytes) or weights_per_gpu(dep), prof.per_token_bytes,
                    budget.notes)


def _sglang(dep: Deployment) -> Capacity:
    from kvplan.engines import sglang
    from kvplan.engines.budget import sglang_memory

    config = sglang.SglangConfig(tp=dep.tp, pp=dep.pp, kv_cache_dtype=dep.kv_dtype,
                                 page_size=dep.block_size or 1)
    ver = _version(dep)
    if dep.kv_memory_bytes is not None:
        # rest = after - before x (1 - f): with before = 0 the budget is used as given
        prof = sglang.profile(dep.spec, config, 0, dep.kv_memory_bytes, 0.5)
        weights, budget_notes = weights_per_gpu(dep), ("KV budget given directly",)
    else:
        assert dep.gpu_memory_bytes is not None
        mem = sglang_memory(dep.spec, dep.gpu_memory_bytes, tp=dep.tp, pp=dep.pp, version=ver,
                            mem_fraction_static=dep.memory_fraction,
                            weights=dep.weights_dtype, weights_bytes=dep.weights_bytes,
                            dims=dep.dims)
        prof = sglang.profile(dep.spec, config, mem.free_before_load_bytes,
                              mem.free_after_load_bytes, mem.mem_fraction_static)
        weights = mem.weights_bytes
        budget_notes = (f"mem_fraction_static {mem.mem_fraction_static}",)
    page = config.page_size
    constraints = [Constraint("tokens", "token", prof.max_total_num_tokens,
                              (Need("full", page, weight=page, shareable=True),))]
    if prof.swa_max_total_num_tokens is not None:
        window = max(x.window_tokens for x in dep.spec.layers if isinstance(x, ATTENTION_KINDS))
        constraints.append(Constraint("SWA tokens", "token", prof.swa_max_total_num_tokens,
                                      (Need("window", page, cap=window, weight=page),)))
    if prof.max_mamba_cache_size is not None:
        constraints.append(Constraint("Mamba state slots", "slot", prof.max_mamba_cache_size,
                                      (Need("fixed", fixed=1),)))
    pool = Pool("sglang", tuple(constraints), dep.context_limit())
    return Capacity(dep, None, prof, pool, prof.kv_cache_dtype, weights,
                    prof.cell_size_bytes, budget_notes)


def _trtllm(dep: Deployment) -> Capacity:
    from kvplan.engines import trtllm
    from kvplan.engines.budget import trtllm_free_bytes

    fraction = dep.memory_fraction if dep.memory_fraction is not None else \
        trtllm.FREE_GPU_MEMORY_FRACTION
    config = trtllm.TrtllmConfig(tp=dep.tp, pp=dep.pp, kv_cache_dtype=dep.kv_dtype,
                                 tokens_per_block=dep.block_size or trtllm.TOKENS_PER_BLOCK,
                                 free_gpu_memory_fraction=fraction)
    if dep.kv_memory_bytes is not None:
        prof = trtllm.profile(dep.spec, config, 0, kv_cache_bytes=dep.kv_memory_bytes)
    else:
        assert dep.gpu_memory_bytes is not None
        free = trtllm_free_bytes(dep.spec, dep.gpu_memory_bytes, tp=dep.tp, pp=dep.pp,
                                 weights=dep.weights_dtype, weights_bytes=dep.weights_bytes,
                                 activation_bytes=dep.activation_bytes,
                                 non_torch_bytes=dep.non_torch_bytes,
                                 max_num_tokens=dep.max_num_batched_tokens or 8192,
                                 dims=dep.dims)
        prof = trtllm.profile(dep.spec, config, free)
    bs = config.tokens_per_block
    pool = Pool("trtllm", (Constraint("KV blocks", "block", prof.num_blocks,
                                      (Need("full", bs, shareable=True),)),),
                dep.context_limit(), tokens_per_unit=bs)
    return Capacity(dep, None, prof, pool, prof.kv_cache_dtype, weights_per_gpu(dep),
                    prof.bytes_per_token, (f"free_gpu_memory_fraction {fraction}",))


def _llamacpp(dep: Deployment) -> Capacity:
    from kvplan.engines import llamacpp

    kv = "f16" if dep.kv_dtype in ("auto", "fp16", "bf16") else dep.kv_dtype
    ctx = dep.context_limit()
    config = llamacpp.LlamacppConfig(ctx=ctx, parallel=dep.parallel, cache_type_k=kv,
                                     cache_type_v=kv)
    prof = llamacpp.profile(dep.spec, config)
    pool = Pool("llamacpp", (Constraint("cells", "cell", prof.cells, (Need("full", 1),)),),
                prof.cells_per_seq, max_requests=dep.parallel)
    notes = [f"llama.cpp allocates all {prof.cells:,} cells (--ctx {ctx:,}) at start-up"]
    weights = weights_per_gpu(dep)
    memory = dep.gpu_memory_bytes
    if memory is not None and weights + prof.total_bytes > memory:
        from kvplan.output.render import human_bytes

        notes.append(f"weights {human_bytes(weights)} + KV {human_bytes(prof.total_bytes)} do "
                     f"not fit in {human_bytes(memory)}: offload layers (-ngl) or shrink --ctx")
        pool = replace(pool, constraints=(replace(pool.constraints[0], capacity=0),))
    per_token = prof.total_bytes // max(1, prof.cells)
    return Capacity(dep, None, prof, pool, prof.cache_type_k, weights, per_token, tuple(notes))


def _hf(dep: Deployment) -> Capacity:
    from kvplan.core.layers import CrossAttention, NoCache, RecurrentState
    from kvplan.engines import hf
    from kvplan.engines.budget import hf_free_bytes

    fmt = hf.kv_format(dep.spec, dep.kv_dtype)
    budget = dep.kv_memory_bytes
    if budget is None:
        assert dep.gpu_memory_bytes is not None
        budget = hf_free_bytes(dep.spec, dep.gpu_memory_bytes, weights=dep.weights_dtype,
                               weights_bytes=dep.weights_bytes,
                               activation_bytes=dep.activation_bytes, dims=dep.dims)
    max_len = dep.context_limit()
    needs: list[Need] = []
    growing = 0  # bytes per token of the layers that grow with the text
    for layer in dep.spec.layers:
        if isinstance(layer, NoCache):
            continue
        if isinstance(layer, RecurrentState):
            state = hf.profile(replace(dep.spec, layers=(layer,)), seq_len=1, tp=dep.tp)
            needs.append(Need("fixed", fixed=1, weight=state.state_bytes))
            continue
        per_token = layer.bytes_for_tokens(1, fmt, dep.tp)
        if isinstance(layer, CrossAttention):  # the encoder's tokens, whatever the length
            needs.append(Need("fixed", fixed=layer.encoder_tokens, weight=per_token))
            continue
        growing += per_token
        window = layer.window_tokens if isinstance(layer, ATTENTION_KINDS) else 0  # MLA: 0
        if dep.hf_cache == "static":
            slots = min(window, max_len) if window else max_len
            needs.append(Need("fixed", fixed=slots, weight=per_token))
        elif window:
            needs.append(Need("window", 1, cap=window - 1, weight=per_token))
        else:
            needs.append(Need("full", 1, weight=per_token))
    prof = hf.profile(dep.spec, cache=dep.hf_cache, seq_len=max_len, kv_dtype=dep.kv_dtype,
                      tp=dep.tp)
    pool = Pool("hf", (Constraint("bytes", "byte", budget, _merge(needs)),), max_len)
    return Capacity(dep, None, prof, pool, fmt.name, weights_per_gpu(dep), growing,
                    (f"transformers {dep.hf_cache} cache; nothing reserved up front",))


def _merge(needs: list[Need]) -> tuple[Need, ...]:
    """Needs that differ only in weight are one need (62 layers -> 2 needs for Gemma 3)."""
    merged: dict[Need, int] = {}
    for n in needs:
        key = replace(n, weight=1)
        merged[key] = merged.get(key, 0) + n.weight
    return tuple(replace(k, weight=w) for k, w in merged.items())


def weights_per_gpu(dep: Deployment) -> int:
    """Weight bytes on the fullest GPU (0 when the parameter count is unknown)."""
    from kvplan.engines.budget import stage_weight_bytes, weight_format, weight_split

    if dep.spec.num_params is None and dep.weights_bytes is None:
        return 0
    fmt = weight_format(dep.weights_dtype, dep.spec.dtype)
    split = weight_split(dep.spec, fmt, dep.dims, dep.weights_bytes)
    return max(stage_weight_bytes(dep.spec, split, dep.tp, dep.pp))


def engine_numbers(cap: Capacity) -> dict[str, Any]:
    """The engine's own log figures under the names it logs them with (raw ints)."""
    p = cap.engine_profile
    eng = cap.deployment.engine
    if eng == "vllm":
        return {"available_kv_cache_bytes": p.available_kv_cache_bytes,
                "num_blocks": p.num_blocks, "block_size": p.block_size,
                "kv_cache_tokens": p.kv_cache_tokens, "max_concurrency": p.max_concurrency,
                "max_concurrency_fraction": f"{p.max_concurrency_exact.numerator}/"
                                            f"{p.max_concurrency_exact.denominator}",
                "max_model_len": p.max_model_len, "blocks_per_request": p.blocks_per_request,
                "num_kv_cache_groups": p.num_kv_cache_groups,
                "num_padding_layers": p.num_padding_layers,
                "bytes_per_block": p.bytes_per_block,
                "fits_max_model_len": p.fits_max_model_len,
                "estimated_max_model_len": p.estimated_max_model_len}
    if eng == "sglang":
        return {"available_bytes": p.available_bytes, "cell_size_bytes": p.cell_size_bytes,
                "max_total_num_tokens": p.max_total_num_tokens,
                "swa_max_total_num_tokens": p.swa_max_total_num_tokens,
                "max_mamba_cache_size": p.max_mamba_cache_size,
                "k_size_bytes": p.k_size_bytes, "v_size_bytes": p.v_size_bytes}
    if eng == "trtllm":
        return {"free_bytes": p.free_bytes, "kv_cache_bytes": p.kv_cache_bytes,
                "bytes_per_token": p.bytes_per_token, "max_tokens": p.max_tokens,
                "num_blocks": p.num_blocks, "tokens_per_block": p.tokens_per_block,
                "kv_cache_tokens": p.kv_cache_tokens, "allocated_bytes": p.allocated_bytes}
    if eng == "llamacpp":
        return {"cells": p.cells, "cells_per_seq": p.cells_per_seq, "k_bytes": p.k_bytes,
                "v_bytes": p.v_bytes, "total_bytes": p.total_bytes,
                "k_mib": p.k_mib, "v_mib": p.v_mib, "kv_mib": p.kv_mib}
    return {"cache": p.cache, "cache_bytes": p.cache_bytes, "seq_len": p.seq_len,
            "budget_bytes": cap.pool.constraints[0].capacity}


def engine_log_lines(cap: Capacity) -> list[str]:
    p = cap.engine_profile
    if hasattr(p, "log_lines"):
        return list(p.log_lines())
    if hasattr(p, "log_line"):
        return [p.log_line()]
    return []


# --- question 1: concurrency at a context -------------------------------------------------

@dataclass(frozen=True)
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
        best, why = pool.max_requests, "max requests (--parallel)"
    # the engine's float: vLLM divides all num_blocks (the null block included)
    whole = caps[0] + (1 if pool.engine == "vllm" else 0)
    engine_x = whole / units[0] if units[0] else 0.0
    return ConcurrencyResult(context_tokens, best, why, units, caps, engine_x)


# --- question 2: context at a concurrency --------------------------------------------------

@dataclass(frozen=True)
class ContextResult:
    concurrency: int
    max_context_tokens: int  # 0 when not even one token per request fits
    limited_by: str  # "memory" | "max_model_len"
    units_per_request: tuple[int, ...]  # at max_context_tokens


def max_context(cap: Capacity, concurrency: int) -> ContextResult:
    """The largest L such that `concurrency` requests of L tokens fit and L + 1 does not
    (or L is the engine's maximum length)."""
    if concurrency <= 0:
        raise BadInputError(f"the concurrency must be positive, got {concurrency}")
    pool = cap.pool
    limit = pool.max_request_tokens
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

@dataclass(frozen=True)
class RequestGroup:
    count: int
    prompt_tokens: int
    output_tokens: int
    n: int = 1  # parallel samples sharing the prompt

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True)
class Workload:
    groups: tuple[RequestGroup, ...]
    shared_prefix_tokens: int = 0
    source: str = ""

    @property
    def num_requests(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def num_sequences(self) -> int:
        return sum(g.count * g.n for g in self.groups)

    @property
    def longest(self) -> int:
        return max(g.tokens for g in self.groups)


_MIX_RE = re.compile(r"^\s*(\d+)\s*[x*]\s*\(\s*([\w.,]+)\s*\+\s*([\w.,]+)\s*\)\s*$", re.I)
_ONE_RE = re.compile(r"^\s*\(?\s*([\w.,]+)\s*\+\s*([\w.,]+)\s*\)?\s*$")


def parse_workload(text: str, shared_prefix: int = 0, n: int = 1) -> Workload:
    """'64x(2k+512)', '64x(2k+512),8x(32k+1k)', '(4k+256)', or a .jsonl/.csv file of
    prompt/output lengths (one request per line)."""
    from kvplan.core.units import parse_tokens

    path = Path(text)
    if text.endswith((".jsonl", ".csv", ".json")) or (path.exists() and path.is_file()):
        return _read_workload_file(path, shared_prefix, n)
    parts = _split_mix(text)
    if not parts:
        raise BadInputError("the request mix is empty",
                            "write COUNTx(PROMPT+OUTPUT), e.g. 64x(2k+512),8x(32k+1k), "
                            "or give a .jsonl/.csv file")
    groups = []
    for part in parts:
        m = _MIX_RE.match(part) or _ONE_RE.match(part)
        if not m:
            raise BadInputError(f"cannot read the request mix {part!r}",
                                "write COUNTx(PROMPT+OUTPUT), e.g. 64x(2k+512),8x(32k+1k), "
                                "or give a .jsonl/.csv file")
        count = int(m.group(1)) if len(m.groups()) == 3 else 1
        prompt, output = m.groups()[-2:]
        if count <= 0:
            raise BadInputError(f"the request count in {part!r} must be positive")
        groups.append(RequestGroup(count, parse_tokens(prompt, "prompt tokens"),
                                   _tokens_or_zero(output), n))
    return _workload(tuple(groups), shared_prefix, text)


def _split_mix(text: str) -> list[str]:
    """Split on commas outside parentheses (8,192 inside a group stays one number)."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p for p in parts if p.strip()]


def _tokens_or_zero(text: str) -> int:
    from kvplan.core.units import parse_tokens

    return 0 if text.strip() == "0" else parse_tokens(text, "output tokens")


_PROMPT_KEYS = ("prompt_tokens", "prompt", "input_tokens", "input", "prompt_len", "input_len")
_OUTPUT_KEYS = ("output_tokens", "output", "max_tokens", "completion_tokens", "output_len")


def _read_workload_file(path: Path, shared_prefix: int, n: int) -> Workload:
    from kvplan.sources.reader import MAX_WORKLOAD_BYTES, read_text

    try:
        text = read_text(str(path), "the workload file", MAX_WORKLOAD_BYTES)
    except BadInputError as exc:
        raise BadInputError(exc.message, "give COUNTx(PROMPT+OUTPUT) or an existing "
                            ".jsonl/.csv file") from None
    rows: list[tuple[int, dict[str, Any]]] = []
    if path.suffix == ".csv":
        import csv

        reader = csv.DictReader(text.splitlines())
        for i, row in enumerate(reader, start=2):
            rows.append((i, dict(row)))
    else:
        for i, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BadInputError(f"{path} line {i}: not valid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise BadInputError(f"{path} line {i}: expected an object with prompt and "
                                    "output lengths")
            rows.append((i, obj))
    groups: dict[tuple[int, int, int], int] = {}
    for line_no, row in rows:
        prompt = _field(row, _PROMPT_KEYS, path, line_no, "prompt")
        output = _field(row, _OUTPUT_KEYS, path, line_no, "output")
        samples = _field(row, ("n",), path, line_no, "n", default=n)
        if prompt <= 0 or output < 0 or samples <= 0:
            raise BadInputError(f"{path} line {line_no}: lengths must be positive "
                                f"(prompt {prompt}, output {output}, n {samples})")
        key = (prompt, output, samples)
        groups[key] = groups.get(key, 0) + 1
    if not groups:
        raise BadInputError(f"{path} holds no requests")
    return _workload(tuple(RequestGroup(c, p, o, s) for (p, o, s), c in groups.items()),
                     shared_prefix, str(path))


def _field(row: dict[str, Any], keys: Sequence[str], path: Path, line: int, what: str,
           default: int | None = None) -> int:
    for key in keys:
        if key in row and row[key] not in (None, ""):
            value = row[key]
            try:
                if isinstance(value, bool):
                    raise ValueError
                if isinstance(value, str):
                    value = value.strip()
                    if not value.isdigit():
                        raise ValueError
                elif isinstance(value, float) and not value.is_integer():
                    raise ValueError
                return int(value)
            except (TypeError, ValueError):
                raise BadInputError(f"{path} line {line}: {key} must be a whole number of "
                                    f"tokens, got {row[key]!r}") from None
    if default is not None:
        return default
    raise BadInputError(f"{path} line {line}: no {what} length",
                        f"name it one of: {', '.join(keys)}")


def _workload(groups: tuple[RequestGroup, ...], shared_prefix: int, source: str) -> Workload:
    if shared_prefix < 0:
        raise BadInputError("--shared-prefix cannot be negative")
    shortest = min(g.prompt_tokens for g in groups)
    if shared_prefix > shortest:
        raise BadInputError(f"--shared-prefix {shared_prefix:,} is longer than the shortest "
                            f"prompt ({shortest:,} tokens)")
    return Workload(groups, shared_prefix, source)


@dataclass(frozen=True)
class ConstraintUse:
    name: str
    unit: str
    needed: int
    capacity: int
    shared_saving: int  # units saved by prefix sharing and parallel sampling


@dataclass(frozen=True)
class WorkloadResult:
    num_requests: int
    num_sequences: int
    longest_tokens: int
    fits: bool
    uses: tuple[ConstraintUse, ...]
    reason: str  # why not, when it does not fit ("" when it fits)
    max_scale: Fraction  # how many times this mix fits (e.g. 1.5 = 50% headroom)


def workload_units(constraint: Constraint, workload: Workload) -> tuple[int, int]:
    """(units needed, units saved by sharing) for a whole workload on one constraint."""
    needed = saved = 0
    for g in workload.groups:
        per_seq = constraint.units(g.tokens)
        # the n samples of one request share the prompt's whole blocks
        sample_saving = (g.n - 1) * constraint.shared_units(g.prompt_tokens)
        needed += g.count * (g.n * per_seq - sample_saving)
        saved += g.count * sample_saving
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
        uses.append(ConstraintUse(c.name, c.unit, needed, c.capacity, saved))
        if needed > c.capacity and not reason:
            reason = f"{c.name}: needs {needed:,} {c.unit}s, has {c.capacity:,}"
        ratio = Fraction(c.capacity, needed) if needed else None
        if ratio is not None and (scale is None or ratio < scale):
            scale = ratio
    if workload.longest > pool.max_request_tokens:
        reason = (f"a request of {workload.longest:,} tokens is longer than the maximum "
                  f"length {pool.max_request_tokens:,}")
        scale = Fraction(0)
    if pool.max_requests is not None and workload.num_sequences > pool.max_requests:
        reason = reason or (f"{workload.num_sequences} sequences but only "
                            f"{pool.max_requests} slots (--parallel)")
        slots = Fraction(pool.max_requests, workload.num_sequences)
        scale = slots if scale is None else min(scale, slots)
    return WorkloadResult(workload.num_requests, workload.num_sequences, workload.longest,
                          not reason, tuple(uses), reason,
                          scale if scale is not None else Fraction(10**9))


# --- question 4: the fewest GPUs -----------------------------------------------------------

@dataclass(frozen=True)
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


@dataclass(frozen=True)
class LayoutOption:
    tp: int
    pp: int
    num_gpus: int
    meets_target: bool
    max_requests: int | None  # at the target context (None without one)
    kv_budget_bytes: int | None  # the smallest stage's (None when the engine has none)
    error: str  # why the layout is impossible ("" when it is possible)


@dataclass(frozen=True)
class LayoutResult:
    target: str
    best: LayoutOption | None
    options: tuple[LayoutOption, ...]


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
        for tp, pp in candidate_layouts(dep.spec, count):
            trial = replace(dep, tp=tp, pp=pp)
            try:
                cap = capacity(trial)
            except BadInputError as exc:
                options.append(LayoutOption(tp, pp, count, False, None, None, exc.message))
                continue
            ok = target.met_by(cap)
            reqs = (max_concurrency(cap, target.context_tokens).max_requests
                    if target.context_tokens else None)
            budget = cap.budget.available if cap.budget is not None else None
            option = LayoutOption(tp, pp, count, ok, reqs, budget, "")
            options.append(option)
            if ok and best is None:
                best = option
        if best is not None:
            break
    return LayoutResult(target.describe(), best, tuple(options))


# --- question 5: the decode floor ----------------------------------------------------------

@dataclass(frozen=True)
class DecodeFloor:
    batch: int
    context_tokens: int
    weights_bytes_per_gpu: int
    kv_bytes_per_gpu: int  # the batch's KV read per step on the fullest GPU
    bytes_per_step: int
    hbm_bandwidth_bytes_per_s: int
    ms_per_token: float  # per output token of one request (a lower bound)
    tokens_per_s: float  # the whole batch (an upper bound)


def decode_floor(cap: Capacity, batch: int, context_tokens: int) -> DecodeFloor:
    """Memory-bound decode: every step reads the weights it uses on each GPU (MoE: the experts
    the batch routes to; not the input embedding table) and the batch's KV. With pipeline
    stages a token passes each stage in turn (pp x one stage's time)."""
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
                       float(seconds * 1000), float(batch / seconds) if seconds else 0.0)


def _read_fraction(spec: ModelSpec, batch: int) -> Fraction:
    """The share of the weights a decode step reads: MoE layers only the experts the batch
    routes to, never an untied embedding table (kvplan.planning.compute.ParamSplit)."""
    from kvplan.planning.compute import param_split

    if not spec.num_params:
        return Fraction(1)
    try:
        return param_split(spec).read_fraction(batch)
    except BadInputError:  # a MoE whose expert shapes are unknown: read everything
        return Fraction(1)


def format_for_sizing(cap: Capacity) -> KVFormat:
    from kvplan.core.dtypes import parse_format

    eng = cap.deployment.engine
    if eng == "vllm":
        from kvplan.engines import vllm

        return vllm.kv_format(cap.deployment.spec, _vllm_dtype(cap.deployment.kv_dtype))
    if eng == "llamacpp":
        from kvplan.engines import llamacpp

        return llamacpp.cache_type(cap.kv_format)
    return parse_format(cap.kv_format if cap.kv_format != "f16" else "fp16",
                        cap.deployment.spec.dtype)


# --- question 6: KV offload to host memory -------------------------------------------------

@dataclass(frozen=True)
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
    p = cap.engine_profile
    if cap.deployment.engine == "vllm":
        per_block, tokens_per_block = p.bytes_per_block, p.block_size
    else:
        per_block, tokens_per_block = max(1, cap.kv_bytes_per_token), 1
    blocks = host_memory_bytes // per_block if per_block else 0
    reqs = None
    if context_tokens:
        need = cap.pool.constraints[0].units(context_tokens) if cap.deployment.engine == \
            "vllm" else context_tokens
        reqs = blocks // need if need else None
    return OffloadResult(host_memory_bytes, per_block, blocks, blocks * tokens_per_block, reqs)


# --- when something does not fit -----------------------------------------------------------

@dataclass(frozen=True)
class Suggestions:
    max_context_at_concurrency: int | None  # the largest context for the asked concurrency
    max_concurrency_at_context: int | None  # the largest batch at the asked context
    kv_dtype_that_fits: str | None  # the first smaller KV dtype that meets the target
    notes: tuple[str, ...] = field(default=())


def smaller_kv_dtypes(engine: str) -> tuple[str, ...]:
    from kvplan.engines import hf, llamacpp, sglang, trtllm, vllm

    return {"vllm": vllm.SMALLER_KV_DTYPES, "sglang": sglang.SMALLER_KV_DTYPES,
            "trtllm": trtllm.SMALLER_KV_DTYPES, "llamacpp": llamacpp.SMALLER_KV_DTYPES,
            "hf": hf.SMALLER_KV_DTYPES}[engine]


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
    p = cap.engine_profile
    eng = cap.deployment.engine
    if eng == "vllm":
        return int(p.available_kv_cache_bytes)
    if eng == "sglang":
        return int(p.available_bytes)
    if eng == "trtllm":
        return int(p.kv_cache_bytes)
    if eng == "llamacpp":
        return int(p.total_bytes)
    return cap.pool.constraints[0].capacity


def token_capacity(cap: Capacity) -> int:
    """Token slots of the pool: vLLM num_blocks x block, SGLang tokens, TRT blocks x 32,
    llama.cpp cells, transformers budget / bytes per token."""
    n = engine_numbers(cap)
    eng = cap.deployment.engine
    if eng == "vllm":
        return n["num_blocks"] * n["block_size"]
    if eng == "sglang":
        return n["max_total_num_tokens"]
    if eng == "trtllm":
        return n["kv_cache_tokens"]
    if eng == "llamacpp":
        return n["cells"]
    return n["budget_bytes"] // max(1, cap.kv_bytes_per_token)
