"""What every engine plugin provides, and the data it shares with the planner.

An engine turns a `Deployment` (model, GPU memory, parallelism, KV dtype, engine settings)
into a `Capacity`: its own start-up numbers, the memory budget it computed, and a `Pool` of
`Constraint`s (one pool each, with the `Need`s of a request of L tokens from it) that says how
requests use that memory. `Engine` is the protocol a plugin implements (`BaseEngine` gives
the defaults); planning, `check`, `sweep`, the reports, `validate` and the CLI only ask an
`Engine` found with `kvplan.engines.registry.get(name)`, never test its name. Every integer
is a count of whole units; the engine modules own the rules that make them (vLLM's
`cdiv(len, block_size)` and null block, llama.cpp's 256-cell padding, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kvplan.core.dtypes import cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec
from kvplan.engines.shared.device import compute_capability, on_nvswitch_hopper

if TYPE_CHECKING:
    from kvplan.core.dtypes import KVFormat
    from kvplan.core.launch import EngineLaunch, EngineLog
    from kvplan.core.weights import VocabSplit
    from kvplan.engines.cache import CacheLayout
    from kvplan.engines.shared.budget import Budget
    from kvplan.engines.shared.weights import ModelDims


# --- the deployment -----------------------------------------------------------------------

class GPULike(Protocol):
    """What a deployment reads from a GPU (kvplan.sources.gpus.GPU has these)."""

    @property
    def name(self) -> str: ...
    @property
    def memory_bytes(self) -> int: ...
    @property
    def hbm_bandwidth_bytes_per_s(self) -> int: ...
    @property
    def architecture(self) -> str: ...
    @property
    def compute_capability(self) -> Any: ...
    @property
    def interconnect(self) -> str: ...


@record
class Deployment:
    """Everything that decides the KV capacity of one serving instance."""

    spec: ModelSpec
    engine: str = "vllm"  # a name the engine registry knows
    engine_version: str | None = None
    gpu_name: str | None = None
    gpu_memory_bytes: int | None = None  # what the GPU reports (kvplan.sources.gpus memory_bytes)
    gpu_bandwidth_bytes_per_s: int = 0
    gpu_arch: str = ""  # e.g. "hopper sm9.0" (with_gpu); read by compute_capability()
    # how the GPU's board joins GPUs: the catalog's `interconnect` (kvplan.sources.gpus
    # INTERCONNECTS; "" for a custom GPU), read by kvplan.engines.shared.device.on_nvswitch_hopper
    gpu_interconnect: str = ""
    tp: int = 1
    pp: int = 1
    # vLLM's VLLM_PP_LAYER_PARTITION: the layer count of each pipeline stage (None: the
    # even split of get_pp_indices, kvplan.core.sizing.pp_stages)
    pp_layers: tuple[int, ...] | None = None
    # a GPU per pipeline stage (--gpu a,b): what each stage's GPU reports; gpu_name,
    # gpu_memory_bytes and gpu_arch are the first stage's. None: every stage on the same GPU
    stage_gpu_memory_bytes: tuple[int, ...] | None = None
    stage_gpu_names: tuple[str, ...] | None = None
    # data parallel: `dp` engine ranks, each with its own scheduler, requests and KV cache
    # (vLLM --data-parallel-size; SGLang --dp with --enable-dp-attention, inside the TP group)
    dp: int = 1
    dcp: int = 1  # vLLM --decode-context-parallel-size: TP ranks split each request's tokens
    expert_parallel: bool = False  # vLLM --enable-expert-parallel: whole experts per GPU
    dp_attention: bool = False  # SGLang --enable-dp-attention (attention TP = tp // dp)
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
    enforce_eager: bool = False  # vLLM --enforce-eager: no CUDA graphs (none reserved)
    # vLLM --async-scheduling / --no-async-scheduling; None: the release's and platform's own
    async_scheduling: bool | None = None
    # vLLM's FlashInfer top-k/top-p sampler (flashinfer installed, as in the vllm/vllm-openai
    # image; the default sampler of 0.8-0.11 then). None: as a pip install, without it
    flashinfer_sampler: bool | None = None
    # vLLM's MoE backend for MXFP4 experts (triton | flashinfer | marlin), which sets how they
    # are re-laid out in memory; None: the GPU's default (kvplan.engines.vllm.backends)
    mxfp4_backend: str | None = None
    # vLLM's VLLM_USE_V1 where a launch sets it: True runs the opt-in V1 engine of a release
    # whose default is V0 (0.7: kvplan.engines.vllm.config.V1_OPT_IN); None: the release's own
    vllm_v1: bool | None = None
    # vLLM --mamba-ssm-cache-dtype: the SSM (temporal) state's dtype, auto|float32|bfloat16|
    # float16 (auto: the model's own; vLLM's CPU build resets auto to float32)
    mamba_ssm_cache_dtype: str = "auto"
    dims: ModelDims | None = None
    num_draft_layers: int = 0
    # vLLM speculative decoding: draft tokens proposed per step (--speculative-config's
    # num_speculative_tokens); the CUDA-graph sizes and Mamba pages grow with it
    num_speculative_tokens: int = 0
    parallel: int = 1  # llama.cpp --parallel
    n_ubatch: int | None = None  # llama.cpp -ub: tokens of the reserved micro-batch (512)
    flash_attn: str | None = None  # llama.cpp -fa on/off/auto (None: auto, on for CUDA)
    n_gpu_layers: str | None = None  # llama.cpp -ngl N/all/auto (None: every layer)
    no_kv_offload: bool = False  # llama.cpp -nkvo: the KV cache in host memory
    # llama.cpp --override-tensor PATTERN=BUFT[,...] (every -ot of a launch, in order),
    # --cpu-moe and --n-cpu-moe N: weights kept in host memory (kvplan.engines.llamacpp.overrides)
    tensor_overrides: str | None = None
    cpu_moe: bool = False
    n_cpu_moe: int | None = None
    # ik_llama.cpp -mla N: its MLA cache (None: the latent alone, as llama.cpp keeps it)
    mla_attn: int | None = None
    # vLLM --cpu-offload-gb, in bytes: decoder-layer weights per GPU kept in CPU memory
    cpu_offload_bytes: int = 0
    # vLLM --limit-mm-per-prompt, items per prompt by modality as the key=value list
    # kvplan.engines.settings.parse_mm_limits holds (image=0,video=0); None: vLLM's 999 each
    mm_limits: str | None = None
    # vLLM --language-model-only (0.17 on): every modality's limit at 0
    language_model_only: bool = False
    # vLLM's runner (--runner, --convert, --task; kvplan.engines.settings.parse_runner):
    # "pooling" profiles a pooler and no sampler; None or "auto"/"generate": a generating model
    runner: str | None = None
    # vLLM --enable-lora with --max-loras adapter slots of --max-lora-rank (None: vLLM's 1 and
    # 16); the slots count with the weights (kvplan.engines.vllm.memory.lora_slots)
    enable_lora: bool = False
    max_loras: int | None = None
    max_lora_rank: int | None = None
    # llama.cpp -ctv when it differs from -ctk (kv_dtype); None: V in kv_dtype
    kv_dtype_v: str | None = None
    # llama.cpp --kv-unified: one cache for every sequence; None: llama.cpp's default (a
    # cache per sequence with -np N, common/common.h kv_unified = false)
    kv_unified: bool | None = None
    # TGI --max-batch-total-tokens: checked by its launcher, not the batch on flash models
    max_batch_total_tokens: int | None = None
    hf_cache: str = "dynamic"

    @property
    def num_gpus(self) -> int:
        # SGLang's DP attention splits the TP group; vLLM's DP ranks each have their own GPUs
        return self.tp * self.pp * (1 if self.dp_attention else self.dp)

    @property
    def compute_capability(self) -> tuple[int, int] | None:
        """(major, minor) of the GPU's compute capability (from gpu_arch); None for ROCm
        targets and GPUs the catalog does not describe."""
        return compute_capability(self.gpu_arch)

    @property
    def nvswitch_hopper(self) -> bool:
        """Whether the GPU sits on an HGX Hopper board's NVSwitch, where NCCL of some releases
        holds its buffers from init (kvplan.engines.shared.device.on_nvswitch_hopper)."""
        return on_nvswitch_hopper(self.gpu_interconnect, self.gpu_arch)

    def with_gpu(self, gpu: GPULike) -> Deployment:
        """This deployment on `gpu` (a catalog or custom GPU): its name, the memory it
        reports, its bandwidth, the architecture that picks vLLM's MLA block size, and the
        board's interconnect."""
        arch = f"{gpu.architecture} sm{gpu.compute_capability}" if gpu.compute_capability \
            else ""
        return replace(self, gpu_name=gpu.name, gpu_memory_bytes=gpu.memory_bytes,
                       gpu_bandwidth_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s, gpu_arch=arch,
                       gpu_interconnect=gpu.interconnect)

    def gpus_shown(self) -> str | None:
        """The GPU as output names it: its name, or each stage's joined by ' + '."""
        return " + ".join(self.stage_gpu_names) if self.stage_gpu_names else self.gpu_name

    def context_limit(self) -> int:
        return self.spec.context_tokens(self.max_model_len)


# --- how requests use memory --------------------------------------------------------------

@record
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


@record
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


@record
class Pool:
    engine: str
    constraints: tuple[Constraint, ...]
    max_request_tokens: int  # max_model_len, or llama.cpp's per-slot context
    max_requests: int | None = None  # a slot limit (llama.cpp --parallel, vLLM max_num_seqs)
    tokens_per_unit: int = 1  # block size of the first constraint (for token figures)
    # units the engine owns but never gives a request (vLLM's null block); the engine's own
    # concurrency figure divides capacity + reserved_units
    reserved_units: int = 0
    max_requests_setting: str = "parallel"  # the setting that sets max_requests
    # data-parallel ranks with a pool like this one each, serving their own requests
    # (max_requests is per rank)
    replicas: int = 1

    @classmethod
    def of_blocks(cls, engine: str, blocks: int, block_size: int, max_request_tokens: int,
                  **more: Any) -> Pool:
        """One paged pool of `blocks` blocks of `block_size` tokens, each request holding
        whole blocks of the tokens it has, shared with a request whose prefix it repeats (the
        TensorRT-LLM and TGI pools); `more`: Pool's other fields."""
        need = Need("full", block_size, shareable=True)
        return cls(engine, (Constraint("KV blocks", "block", blocks, (need,)),),
                   max_request_tokens, tokens_per_unit=block_size, **more)

    def fits(self, tokens: int, count: int) -> bool:
        if count <= 0:
            return True
        count = cdiv(count, self.replicas)  # the busiest data-parallel rank
        if tokens > self.max_request_tokens:
            return False
        if self.max_requests is not None and count > self.max_requests:
            return False
        return all(count * c.units(tokens) <= c.capacity for c in self.constraints)


@record
class Capacity:
    """A deployment's KV capacity: the engine's numbers and the pool they imply."""

    deployment: Deployment
    engine: Engine  # the engine that computed it (asked for its numbers, lines, checks)
    budget: Budget | None
    engine_profile: Any  # the engine's own profile (VllmProfile, SglangProfile, ...)
    pool: Pool
    kv_format: str
    weights_per_gpu_bytes: int  # the fullest GPU (0 when unknown)
    kv_bytes_per_token: int  # per GPU, every layer still growing (the fullest stage)
    notes: tuple[str, ...] = ()
    # weights the engine keeps in host memory and computes with from there every step
    # (llama.cpp's -ngl / -ot / --cpu-moe, vLLM's --cpu-offload-gb), all GPUs of one model
    # replica together; not
    # an input embedding table, of which a step reads only its tokens' rows; 0: none
    host_weights_bytes: int = 0

    @property
    def engine_numbers(self) -> dict[str, Any]:
        return self.engine.numbers(self)


@record
class StartCheck:
    """Whether the engine starts at all with this capacity (vLLM refuses to start when one
    request of max_model_len does not fit) and the longest request it would accept."""

    starts: bool
    max_request_tokens: int
    reason: str = ""  # why it would not start, in the engine's terms ("": vLLM's rule's words)
    hint: str = ""  # what to change


@record
class HostBlocks:
    """The unit a host-memory (offload) pool is counted in: bytes and tokens per unit."""

    bytes_per_unit: int
    tokens_per_unit: int
    units_per_request: int = 0  # for one request of the asked context (0: none asked)


# --- the protocol -------------------------------------------------------------------------

@runtime_checkable
class Engine(Protocol):
    """A serving engine as the planner sees it. Implement it (or subclass BaseEngine) and
    `kvplan.engines.registry.register` it; nothing else in kvplan needs to change.

    Optional members, asked for with getattr so that a minimal plugin need not define them
    (BaseEngine answers "none" for the first three): `launch()` (its launch flag table,
    core.launch.EngineLaunch), `log_format()` (its start-up log's markers and figure
    patterns, core.launch.EngineLog), `cache_variants` + `cache_layout(...)` (its cache as
    allocated, engines.cache.CacheLayout, for `kvplan validate`), `memory_rows(cap)` (what
    one GPU holds when the engine sizes no budget, llama.cpp), `log_readings` +
    `capacity_from_readings(dep, readings)` (the pool from the free-memory readings its
    start-up log prints, SGLang), `model_max_len(spec)` (the context it derives from the
    config when none is given; BaseEngine: the model's own maximum)."""

    name: str  # the --engine value and the registry key
    display_name: str  # how the engine names itself in messages ("vLLM")
    needs_memory: bool  # False: plans without a GPU memory or budget (llama.cpp)

    # read-only members (a class attribute meets them; any tuple of names, however long)
    @property
    def kv_dtypes(self) -> tuple[str, ...]:
        """The KV dtype names it accepts (option choices)."""
        ...

    @property
    def smaller_kv_dtypes(self) -> tuple[str, ...]:
        """What to suggest when the default does not fit."""
        ...

    def capacity(self, dep: Deployment) -> Capacity:
        """The engine's budget, start-up numbers and request pool for `dep`."""
        ...

    def numbers(self, cap: Capacity) -> dict[str, Any]:
        """Its start-up figures under the names it logs them with (raw ints)."""
        ...

    def log_lines(self, cap: Capacity) -> list[str]:
        """The lines it prints at start-up."""
        ...

    def kv_budget_bytes(self, cap: Capacity) -> int:
        """The bytes it gives its KV pool on one GPU."""
        ...

    def token_capacity(self, cap: Capacity) -> int:
        """Token slots of its pool."""
        ...

    def blocks_per_request(self, cap: Capacity, tokens: int) -> tuple[int, ...]:
        """Units one request of `tokens` tokens holds in each pool constraint."""
        ...

    def max_concurrency(self, cap: Capacity, tokens: int) -> float:
        """The engine's own concurrency figure for requests of `tokens` tokens."""
        ...

    def sizing_format(self, cap: Capacity) -> KVFormat:
        """The stored KV format, for the exact byte formulas of kvplan.core.sizing."""
        ...

    def start_check(self, cap: Capacity) -> StartCheck:
        """Whether it starts at all, and the longest request it admits."""
        ...

    def concurrency_limit(self, dep: Deployment) -> tuple[int, str] | None:
        """A hard limit on requests at once and the setting that sets it, or None."""
        ...

    def host_blocks(self, cap: Capacity, context_tokens: int | None = None) -> HostBlocks:
        """The unit KV offload to host memory is counted in, and how many one request of
        `context_tokens` needs."""
        ...

    def defaults(self, spec: ModelSpec, gpu_name: str | None = None,
                 gpu_memory_bytes: int | None = None,
                 version: str | None = None) -> dict[str, Any]:
        """Its defaults for this model, GPU and version (block size, memory fraction, ...)."""
        ...


class BaseEngine:
    """Defaults an engine can inherit: a profile with `log_lines()` or `log_line()`, a pool
    whose first constraint is the KV pool, every format parsed by kvplan's names."""

    name = ""
    display_name = ""
    # the block sizes it accepts (None: any positive number of tokens)
    block_sizes: tuple[int, ...] | None = None
    # the newest version whose rules kvplan implements (None: it has no version rules)
    latest_version: tuple[int, ...] | None = None
    kv_dtypes: tuple[str, ...] = ("auto",)
    smaller_kv_dtypes: tuple[str, ...] = ()
    needs_memory = True
    # the cache layouts `kvplan validate` can allocate for it: "" names the layout after the
    # engine (--layout vllm), a variant after a dash (--layout hf-static); () for none
    cache_variants: tuple[str, ...] = ()
    # What the engine allocates for DeepSeek-V4's compressed attention (core.layers
    # CompressedAttention) that kvplan does not model, as one clause for the planner's refusal;
    # "" when kvplan knows nothing of how the engine caches it.
    compressed_attention_pools = ""
    models_compressed_attention = False  # True: capacity() plans it (or refuses it itself)
    # True: capacity() sizes each pipeline stage on its own GPU (Deployment
    # stage_gpu_memory_bytes) and with its own layer count (Deployment.pp_layers)
    plans_unequal_stages = False
    # The environment variable without which the engine refuses to start with a max_model_len
    # beyond the model's maximum context; None: it starts (llama.cpp only warns). Read by
    # kvplan.planning.verdict, the one place the rule is applied.
    longer_context_env: str | None = None
    # its start-up log's markers and figures, and the function that builds its launch-flag
    # table (kvplan.core.launch; each engine keeps both in its `text`), as `log_format()` and
    # `launch()` answer them; None: kvplan reads no log / no launch line of it
    start_log: EngineLog | None = None
    # the figures of its profile (Capacity.engine_profile) that are the KV pool's bytes on one
    # GPU and its token slots, as it logs them; None: the pool's first constraint answers
    budget_figure: str | None = None
    tokens_figure: str | None = None
    launch_table: Callable[[], EngineLaunch] | None = None
    # the memory readings its start-up log prints that its KV pool is sized from (figures of
    # its log format, read into LogFacts.terms): kvplan.planning.explain sizes the pool from
    # them with capacity_from_readings where the log prints them all; () for none
    log_readings: tuple[str, ...] = ()

    def capacity(self, dep: Deployment) -> Capacity:
        raise NotImplementedError

    def capacity_from_readings(self, dep: Deployment, readings: Mapping[str, int]) -> Capacity:
        """The capacity as the engine sizes it from `readings` (bytes, by the names of
        `log_readings`) instead of predicting them from the GPU."""
        raise NotImplementedError

    def numbers(self, cap: Capacity) -> dict[str, Any]:
        return {}

    def log_lines(self, cap: Capacity) -> list[str]:
        p = cap.engine_profile
        if hasattr(p, "log_lines"):
            return list(p.log_lines())
        if hasattr(p, "log_line"):
            return [p.log_line()]
        return []

    def kv_budget_bytes(self, cap: Capacity) -> int:
        if self.budget_figure is not None:
            return int(getattr(cap.engine_profile, self.budget_figure))
        return cap.pool.constraints[0].capacity

    def token_capacity(self, cap: Capacity) -> int:
        if self.tokens_figure is not None:
            return int(getattr(cap.engine_profile, self.tokens_figure))
        return cap.pool.constraints[0].capacity * cap.pool.tokens_per_unit

    def blocks_per_request(self, cap: Capacity, tokens: int) -> tuple[int, ...]:
        return tuple(c.units(tokens) for c in cap.pool.constraints)

    def max_concurrency(self, cap: Capacity, tokens: int) -> float:
        first = cap.pool.constraints[0]
        units = first.units(tokens)
        return (first.capacity + cap.pool.reserved_units) / units if units else 0.0

    def sizing_format(self, cap: Capacity) -> KVFormat:
        from kvplan.core.dtypes import parse_format

        return parse_format(cap.kv_format, cap.deployment.spec.dtype)

    def start_check(self, cap: Capacity) -> StartCheck:
        return StartCheck(True, cap.pool.max_request_tokens)

    def concurrency_limit(self, dep: Deployment) -> tuple[int, str] | None:
        return None

    def model_max_len(self, spec: ModelSpec) -> int | None:
        """The longest context the engine derives from the model's config: its max_model_len
        when none is given, and the limit beyond which `longer_context_env` is needed. The
        model's own maximum unless the engine reads the config otherwise (vLLM scales it by
        the rope scaling factor). Read by kvplan.planning.deployment and .verdict."""
        return spec.max_context_tokens

    def host_blocks(self, cap: Capacity, context_tokens: int | None = None) -> HostBlocks:
        return HostBlocks(max(1, cap.kv_bytes_per_token), 1, context_tokens or 0)

    def defaults(self, spec: ModelSpec, gpu_name: str | None = None,
                 gpu_memory_bytes: int | None = None,
                 version: str | None = None) -> dict[str, Any]:
        return {}

    def cache_layout(self, spec: ModelSpec, fmt: KVFormat, tokens: int, batch: int, *,
                     tp: int = 1, block_size: int | None = None, max_len: int | None = None,
                     variant: str = "") -> CacheLayout:
        """How it lays out the cache of `batch` requests of `tokens` tokens on one rank
        (kvplan.engines.cache), for `kvplan validate` to allocate. Optional: validate asks
        only engines that list `cache_variants`."""
        raise BadInputError(f"kvplan validate cannot allocate {self.display_name or self.name}"
                            "'s cache layout")

    def log_format(self) -> EngineLog | None:
        """Its start-up log's markers and figure patterns (kvplan.sources.startlog reads a
        log with them; kvplan.planning.explain passes every engine's), or None when kvplan
        reads no log of it: the class's `start_log`."""
        return self.start_log

    def launch(self) -> EngineLaunch | None:
        """Its launch program and flag table (kvplan.sources.launch reads a command line
        with it), or None when kvplan reads no launch command for it: what the class's
        `launch_table` builds. Optional: the launch reader asks for it with getattr, so a
        minimal plugin need not define it."""
        build = type(self).launch_table  # through the class: a plain function, not bound
        return build() if build is not None else None


def check_settings(dep: Deployment, engine: Any) -> None:
    """Settings no engine starts with are bad input, the same from flags and plan files: a
    zero or negative count, a setting outside its declared bounds (kvplan.engines.settings),
    a block size the engine refuses, a version newer than kvplan's rules (it would be planned
    with older rules without a word)."""
    from kvplan.engines import parse_version
    from kvplan.engines.settings import check_bounds

    label = getattr(engine, "display_name", "") or dep.engine
    check_bounds(dep)  # every declared setting (tp, pp, ..., block_size, ...) by its row
    sizes = getattr(engine, "block_sizes", None)
    if dep.block_size is not None and sizes and dep.block_size not in sizes:
        raise BadInputError(f"{label} has no block size {dep.block_size} (--block-size)",
                            "valid: " + ", ".join(map(str, sizes)))
    latest = getattr(engine, "latest_version", None)
    version = parse_version(dep.engine_version)
    if version is not None and latest is not None and version[:2] > latest[:2]:
        newest = ".".join(map(str, latest[:2]))
        raise BadInputError(f"kvplan's {label} rules go up to version {newest}; "
                            f"--engine-version {dep.engine_version} is newer than any it knows",
                            f"give a version up to {newest}, or leave it out for the newest "
                            "rules")


def merge_needs(needs: Sequence[Need]) -> tuple[Need, ...]:
    """Needs that differ only in weight are one need (62 layers -> 2 needs for Gemma 3)."""
    merged: dict[Need, int] = {}
    for n in needs:
        key = replace(n, weight=1)
        merged[key] = merged.get(key, 0) + n.weight
    return tuple(replace(k, weight=w) for k, w in merged.items())


def weights_per_gpu(dep: Deployment, vocab: VocabSplit | None = None) -> int:
    """Weight bytes on the fullest GPU (kvplan.engines.shared.weights.stage_weights; `vocab` the
    engine's vocabulary split, None: vLLM's); 0 when neither the tensor inventory nor a
    parameter count can size them."""
    from kvplan.core.errors import BadInputError
    from kvplan.engines.shared.weights import stage_weights

    try:
        return max(stage_weights(dep.spec, dep.weights_dtype, dep.weights_bytes, dep.tp,
                                 dep.pp, dep.dims, vocab=vocab)[0])
    except BadInputError:
        if dep.spec.num_params is None and dep.weights_bytes is None:
            return 0
        raise
