"""The vLLM engine plugin: a deployment -> vLLM's settings, budget, start-up numbers and pool.

`config_for` fills in the settings a deployment implies (defaults by release and GPU);
`VllmEngine.capacity` runs the budget (kvplan.engines.vllm.memory), the start-up numbers
(kvplan.engines.vllm.startup) and turns each stage's groups into block constraints (one
block is the permanent null block, `block_pool.py`; the scheduler never runs more than
max_num_seqs requests, `core/sched/scheduler.py`). `cache_layout` describes the block pools
as `kvplan validate` allocates them with torch.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kvplan.core.dtypes import KVFormat
from kvplan.core.errors import BadInputError
from kvplan.core.layers import (
    ATTENTION_KINDS,
    MLA,
    CrossAttention,
    FullAttention,
    Layer,
    RecurrentState,
)
from kvplan.core.spec import ModelSpec
from kvplan.engines.base import (
    BaseEngine,
    Capacity,
    Constraint,
    Deployment,
    HostBlocks,
    Pool,
    StartCheck,
    weights_per_gpu,
)
from kvplan.engines.cache import CacheGroup, CacheLayer, CacheLayout, spec_state
from kvplan.engines.shared.budget import measured_budget
from kvplan.engines.shared.releases import release
from kvplan.engines.vllm.backends import default_block_size
from kvplan.engines.vllm.budget import vllm_budget
from kvplan.engines.vllm.config import (
    LATEST,
    VllmConfig,
    check_block_size,
    default_gpu_memory_utilization,
    derived_max_model_len,
    rules_for,
    use_v1_setting,
)
from kvplan.engines.vllm.formats import (
    INDEX_HEAD_DIM,
    KV_DTYPES,
    SMALLER_KV_DTYPES,
    flag_dtype,
    kv_format,
    resolved_kv_cache_dtype,
    with_ssm_state_dtype,
)
from kvplan.engines.vllm.memory import (
    DEFAULT_MAX_LORA_RANK,
    DEFAULT_MAX_LORAS,
    LANGUAGE_MODEL_ONLY_FROM,
    BatchSettings,
    batch_settings,
    uses_v2_runner,
)
from kvplan.engines.vllm.pages import FullPage, PageSpec
from kvplan.engines.vllm.served import check_served
from kvplan.engines.vllm.startup import VllmProfile, layout, profile

if TYPE_CHECKING:
    from kvplan.core.launch import EngineLaunch, EngineLog


def batch_for(dep: Deployment) -> BatchSettings:
    """The scheduler's batch limits for a deployment (flags, else the version's defaults by
    GPU: kvplan.engines.vllm.memory.batch_settings)."""
    from kvplan.engines import parse_version

    ver = parse_version(dep.engine_version) or LATEST
    return batch_settings(ver, dep.gpu_memory_bytes, dep.gpu_name, dep.context_limit(),
                          max_num_batched_tokens=dep.max_num_batched_tokens,
                          max_num_seqs=dep.max_num_seqs, v1=dep.vllm_v1,
                          spec=dep.spec)


def expert_parallel_size(dep: Deployment) -> int:
    """GPUs the routed experts are spread over: with --enable-expert-parallel the EP group is
    the TP x DP ranks, each holding whole experts (config/parallel.py, fused_moe/config.py
    FusedMoEParallelConfig.make: ep_size = tp_size x dp_size); without it the experts are
    tensor-parallel over the same tp x dp ranks, the same bytes per GPU up to rounding."""
    if dep.spec.num_experts and (dep.expert_parallel or dep.dp > 1):
        return dep.tp * dep.dp
    return 1


def config_for(dep: Deployment) -> VllmConfig:
    """The vLLM settings a deployment implies (defaults by version and GPU filled in)."""
    from kvplan.engines import parse_version

    ver = parse_version(dep.engine_version) or LATEST
    check_block_size(dep.block_size, ver)
    check_language_model_only(dep, ver)
    if dep.num_speculative_tokens < 0:
        raise BadInputError(f"--num-speculative-tokens must be at least 0, got "
                            f"{dep.num_speculative_tokens}")
    return VllmConfig(
        max_model_len=dep.context_limit(), version=ver, v1=dep.vllm_v1,
        kv_cache_dtype=cache_dtype(dep), block_size=dep.block_size, tp=dep.tp,
        pp=dep.pp, pp_layers=dep.pp_layers,
        max_num_batched_tokens=batch_for(dep).max_num_batched_tokens,
        async_scheduling=dep.async_scheduling, v2_runner=uses_v2_runner(dep.spec, ver, dep.vllm_v1),
        num_draft_layers=dep.num_draft_layers,
        num_speculative_tokens=dep.num_speculative_tokens, dcp=dep.dcp,
        gpu_name=dep.gpu_name, compute_capability=_capability_text(dep))


def mm_limits(dep: Deployment) -> str | None:
    """--limit-mm-per-prompt as the release reads it: --language-model-only (0.17 on,
    config/multimodal.py MultiModalConfig.get_limit_per_prompt) puts every modality at 0."""
    if not dep.language_model_only:
        return dep.mm_limits
    from kvplan.engines.settings import MM_MODALITIES

    return ",".join(f"{m}=0" for m in sorted(MM_MODALITIES))


def check_language_model_only(dep: Deployment, ver: tuple[int, ...]) -> None:
    if dep.language_model_only and release(ver) < LANGUAGE_MODEL_ONLY_FROM:
        raise BadInputError(f"--language-model-only: vLLM {'.'.join(map(str, ver))} has no "
                            "such flag (it came in 0.17.0)",
                            "give --limit-mm-per-prompt with each modality at 0 instead")


def cache_dtype(dep: Deployment) -> str:
    """The deployment's --kv-cache-dtype as its release resolves it (a ModelOpt checkpoint's
    FP8 request from 0.14 on: Rules.kv_dtype_from_checkpoint)."""
    from kvplan.engines import parse_version

    rules = rules_for(parse_version(dep.engine_version) or LATEST, dep.vllm_v1)
    return resolved_kv_cache_dtype(dep.spec, dep.kv_dtype, rules.kv_dtype_from_checkpoint)


def checkpoint_kv_notes(dep: Deployment) -> tuple[str, ...]:
    """A note when the checkpoint asks for a KV cache format and this release's
    --kv-cache-dtype auto does not take it (checkpoint_kv_dtype says which it takes)."""
    from kvplan.engines import parse_version

    req = dep.spec.quantization.kv_cache
    if req is None or flag_dtype(dep.kv_dtype).strip().lower() != "auto" \
            or cache_dtype(dep) != "auto":
        return ()
    rules = rules_for(parse_version(dep.engine_version) or LATEST, dep.vllm_v1)
    why = ("it reads a checkpoint's KV request from 0.14 on" if not
           rules.kv_dtype_from_checkpoint else "it takes only a ModelOpt FP8 request, a "
           "kv_cache_scheme only with dynamic false (utils/torch_utils.py "
           "get_kv_cache_quant_algo_string)")
    return (f"the checkpoint asks for {req.describe()}; vLLM's --kv-cache-dtype auto does "
            f"not take it ({why}): give --kv-cache-dtype to choose the KV format",)


def _capability_text(dep: Deployment) -> str | None:
    """The catalog's compute capability (Deployment.compute_capability) as VllmConfig keeps
    it, (9, 0) -> '9.0'; None for ROCm targets ('cdna3 smgfx942') and custom GPUs."""
    found = dep.compute_capability
    return f"{found[0]}.{found[1]}" if found else None


# --- the cache as allocated (what `kvplan validate` builds with torch) ---------------------

CACHE_NOTE = ("vLLM: raw int8 block pools per layer group, block {block_size} (raised for "
              "attention + Mamba hybrids until a page holds a state), block 0 the null "
              "block; K and V planes per attention layer, one latent plane for MLA; each "
              "request holds the blocks it peaks at growing one token per step.")


def _stored(layer: Layer, page: PageSpec) -> Layer:
    """The layer as a group of `page`'s kind stores it: a sliding or chunked layer in a full
    group (vLLM turns the hybrid manager off for chunked attention) keeps every token."""

    if isinstance(page, FullPage) and isinstance(layer, ATTENTION_KINDS) \
            and not isinstance(layer, (FullAttention, CrossAttention)):
        return FullAttention(layer.num_kv_heads, layer.head_dim, layer.v_head_dim)
    return layer


def cache_layout(spec: ModelSpec, fmt: KVFormat, tokens: int, batch: int, *, tp: int = 1,
                 block_size: int | None = None) -> CacheLayout:
    """The block pools of one stage for `batch` requests of `tokens` tokens: the newest
    version's groups (`layout`), no prefix caching (a Mamba request holds one state page),
    max_model_len the requests' length, the blocks each request holds at its peak."""

    config = VllmConfig(max_model_len=max(1, tokens), block_size=block_size, tp=tp,
                        mamba_cache_mode="none")
    (stage,) = layout(spec, config, fmt)
    groups = []
    for g in stage.groups:
        members = []
        for name in g.layer_names:
            index, _, part = name.partition(".")
            original = spec.layers[int(index)]
            stored = _stored(original, g.page)
            indexer = part == "indexer"
            if indexer and isinstance(stored, MLA) and stored.index_head_dim is None:
                stored = replace(stored, index_head_dim=INDEX_HEAD_DIM)
            members.append(CacheLayer(
                int(index), name, stored, original.kind, indexer,
                state=spec_state(stored, tp) if isinstance(stored, RecurrentState) else ()))
        groups.append(CacheGroup(tuple(members), g.block_size, g.held_blocks(tokens, config)))
    return CacheLayout(paged=True, block_tokens=block_size or default_block_size(spec),
                       batch=batch, groups=tuple(groups),
                       shared_tensors=stage.group_size if len(groups) > 1 else 0,
                       reserved_blocks=1, whole_tokens=True, note=CACHE_NOTE)


class VllmEngine(BaseEngine):
    name = "vllm"
    display_name = "vLLM"
    budget_figure = "available_kv_cache_bytes"
    # vllm/config/cache.py `BlockSize` (256 from 0.11.1: config.check_block_size)
    block_sizes = (1, 8, 16, 32, 64, 128, 256)
    latest_version = LATEST
    kv_dtypes = KV_DTYPES
    smaller_kv_dtypes = SMALLER_KV_DTYPES
    cache_variants = ("",)  # `validate --layout vllm` allocates cache_layout()
    # vllm/config/model.py `_get_and_verify_max_len`: a max_model_len above the model's derived
    # maximum raises unless this is set (0.6 onwards; vllm/config.py before 0.11)
    longer_context_env = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
    models_compressed_attention = True  # DeepSeek-V4 on Hopper (dsv4_stage)
    # VLLM_PP_LAYER_PARTITION and a GPU per stage: each worker its own budget (budget.py)
    plans_unequal_stages = True

    # its flag table and log lines (`text`) are imported when asked for: a plan reads neither
    def log_format(self) -> EngineLog:
        from kvplan.engines.vllm.text import LOG_FORMAT

        return LOG_FORMAT

    def launch(self) -> EngineLaunch:
        from kvplan.engines.vllm.text import launch_flags

        return launch_flags()

    def model_max_len(self, spec: ModelSpec) -> int | None:
        return derived_max_model_len(spec)

    def capacity(self, dep: Deployment) -> Capacity:
        if dep.mamba_ssm_cache_dtype != "auto":
            dep = replace(dep, spec=with_ssm_state_dtype(dep.spec, dep.mamba_ssm_cache_dtype))
        config = config_for(dep)
        check_served(dep.spec.architectures, config.version)  # the release's registry
        if dep.kv_memory_bytes is not None:
            budget = measured_budget(dep.kv_memory_bytes, self.name,
                                     ".".join(map(str, config.version)), dep.pp)
        else:
            assert dep.gpu_memory_bytes is not None
            budget = vllm_budget(
                dep.spec, dep.gpu_memory_bytes, version=config.version, tp=dep.tp, pp=dep.pp,
                gpu_memory_utilization=dep.memory_fraction, weights=dep.weights_dtype,
                weights_bytes=dep.weights_bytes, activation_bytes=dep.activation_bytes,
                non_torch_bytes=dep.non_torch_bytes, cudagraph_bytes=dep.cudagraph_bytes,
                max_num_batched_tokens=config.max_num_batched_tokens,
                max_num_seqs=dep.max_num_seqs, dims=dep.dims, gpu_name=dep.gpu_name,
                gpu_arch=dep.gpu_arch, mxfp4_backend=dep.mxfp4_backend,
                max_model_len=config.max_model_len,
                enforce_eager=dep.enforce_eager, ep=expert_parallel_size(dep), dp=dep.dp,
                flashinfer_sampler=bool(dep.flashinfer_sampler),
                num_draft_layers=dep.num_draft_layers,
                num_speculative_tokens=dep.num_speculative_tokens,
                pp_layers=dep.pp_layers, stage_gpu_memory_bytes=dep.stage_gpu_memory_bytes,
                cpu_offload_bytes=dep.cpu_offload_bytes, v1=dep.vllm_v1,
                mm_limits=mm_limits(dep), pooling=dep.runner == "pooling",
                max_loras=(dep.max_loras or DEFAULT_MAX_LORAS) if dep.enable_lora else 0,
                max_lora_rank=dep.max_lora_rank or DEFAULT_MAX_LORA_RANK,
                nvswitch_hopper=dep.nvswitch_hopper)
        prof = profile(dep.spec, config, budget.available_kv_cache_bytes)
        constraints = []
        for i, stage in enumerate(prof.stages):
            needs = tuple(g.need(config) for g in stage.groups)
            name = "KV blocks" + (f" (stage {i})" if len(prof.stages) > 1 else "")
            # every worker allocates the min over workers; one block is the permanent null
            # block (block_pool.py)
            constraints.append(Constraint(name, "block", prof.usable_blocks, needs))
        # the scheduler never runs more than max_num_seqs requests at once
        # (core/sched/scheduler.py: `len(self.running) == self.max_num_running_reqs`)
        pool = Pool(self.name, tuple(constraints), config.max_model_len,
                    max_requests=batch_for(dep).max_num_seqs, tokens_per_unit=prof.block_size,
                    reserved_units=1, max_requests_setting="max_num_seqs", replicas=dep.dp)
        return Capacity(dep, self, budget, prof, pool, prof.kv_cache_dtype,
                        max(budget.weights_bytes) or weights_per_gpu(dep), prof.per_token_bytes,
                        budget.notes + checkpoint_kv_notes(dep),
                        host_weights_bytes=sum(budget.offloaded_weights_bytes) * dep.tp)

    def numbers(self, cap: Capacity) -> dict[str, Any]:
        p: VllmProfile = cap.engine_profile
        stages = {"stage_available_kv_cache_bytes": list(p.stage_available_bytes)} \
            if len(p.stages) > 1 else {}  # each stage's worker logs its own figure
        return {"available_kv_cache_bytes": p.available_kv_cache_bytes, **stages,
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

    def token_capacity(self, cap: Capacity) -> int:
        p: VllmProfile = cap.engine_profile
        return p.num_blocks * p.block_size

    def sizing_format(self, cap: Capacity) -> KVFormat:
        from kvplan.engines import parse_version

        dep = cap.deployment
        return kv_format(dep.spec, cache_dtype(dep), parse_version(dep.engine_version))

    def start_check(self, cap: Capacity) -> StartCheck:
        # the start-up check: one request of max_model_len must fit, else vLLM exits
        p: VllmProfile = cap.engine_profile
        return StartCheck(p.fits_max_model_len, p.estimated_max_model_len)

    def concurrency_limit(self, dep: Deployment) -> tuple[int, str] | None:
        return batch_for(dep).max_num_seqs, "max_num_seqs"

    def launch_overrides(self, image: str | None, image_version: str | None,
                         env: dict[str, str]) -> dict[str, Any]:
        """What a launch's environment and image imply: the engine (VLLM_USE_V1 where set:
        V1 on 0.7, config.V1_OPT_IN), the MXFP4 MoE backend
        (VLLM_MXFP4_USE_MARLIN=1: Marlin), and the sampler: VLLM_USE_FLASHINFER_SAMPLER when
        set; else the
        vllm/vllm-openai image (it installs flashinfer: docker/Dockerfile) of 0.8-0.11.0, whose
        V1 sampler takes FlashInfer whenever it is importable (topk_topp_sampler.py:
        `VLLM_USE_FLASHINFER_SAMPLER is not False`)."""
        from kvplan.engines import parse_version

        found: dict[str, Any] = {}
        # envs.py VLLM_USE_V1: `bool(int(...))`, V0 the default before 0.8
        if "VLLM_USE_V1" in env:
            found["vllm_v1"] = use_v1_setting(env["VLLM_USE_V1"])
        # envs.py VLLM_MXFP4_USE_MARLIN: get_mxfp4_backend takes Marlin for MXFP4 experts
        if env.get("VLLM_MXFP4_USE_MARLIN", "").lower() in ("1", "true"):
            found["mxfp4_backend"] = "marlin"
        flag = env.get("VLLM_USE_FLASHINFER_SAMPLER")
        ver = parse_version(image_version) if image_version else None
        if flag in ("0", "1"):
            found["flashinfer_sampler"] = flag == "1"
        elif image and "vllm-openai" in image and ver is not None and \
                rules_for(ver).flashinfer_sampler_default:
            found["flashinfer_sampler"] = True
        return found

    def host_blocks(self, cap: Capacity, context_tokens: int | None = None) -> HostBlocks:
        # swap space / CPU offload: whole blocks of the same layout ("# CPU blocks")
        p: VllmProfile = cap.engine_profile
        need = cap.pool.constraints[0].units(context_tokens) if context_tokens else 0
        return HostBlocks(p.bytes_per_block, p.block_size, need)

    def defaults(self, spec: ModelSpec, gpu_name: str | None = None,
                 gpu_memory_bytes: int | None = None,
                 version: str | None = None) -> dict[str, Any]:
        from kvplan.engines import parse_version

        ver = parse_version(version) or LATEST
        # the batch as a deployment with no flags gets it (batch_for's rule: the release, the
        # GPU, the model's longest context and its multimodal floor)
        batch = batch_settings(ver, gpu_memory_bytes, gpu_name, spec.context_tokens(None),
                               spec=spec)
        return {"block_size": default_block_size(spec, gpu_name),
                "gpu_memory_utilization": default_gpu_memory_utilization(ver),
                "max_num_batched_tokens": batch.max_num_batched_tokens,
                "max_num_seqs": batch.max_num_seqs}

    def cache_layout(self, spec: ModelSpec, fmt: KVFormat, tokens: int, batch: int, *,
                     tp: int = 1, block_size: int | None = None, max_len: int | None = None,
                     variant: str = "") -> CacheLayout:
        return cache_layout(spec, fmt, tokens, batch, tp=tp, block_size=block_size)

ENGINE = VllmEngine()
