"""The SGLang plugin: a Deployment -> Capacity from the budget (`memory`) and the token
pools it sizes (`pools`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kvplan.core.dtypes import KVFormat
from kvplan.core.errors import BadInputError
from kvplan.core.layers import ATTENTION_KINDS
from kvplan.core.spec import ModelSpec
from kvplan.core.units import human_bytes
from kvplan.engines import parse_version
from kvplan.engines.base import (
    BaseEngine,
    Capacity,
    Constraint,
    Deployment,
    Need,
    Pool,
    weights_per_gpu,
)
from kvplan.engines.cache import CacheLayout
from kvplan.engines.sglang.memory import (
    SGLANG_INIT_BYTES,
    prefill_graphs_on,
    rules_for,
    sglang_default_mem_fraction,
    sglang_memory,
    sglang_vit,
    vlm_unread_note,
)
from kvplan.engines.sglang.pools import (
    DEFAULT_PAGE_SIZE,
    KV_DTYPES,
    NSA_INDEXER_IN_KV_SIZE,
    SMALLER_KV_DTYPES,
    SglangConfig,
    SglangProfile,
    cache_layout,
    kv_cache_dtype_from_checkpoint,
    max_running_requests,
    profile,
)
from kvplan.engines.sglang.served import check_served
from kvplan.engines.sglang.text import LOG_FORMAT, launch_flags
from kvplan.engines.shared.device import is_rocm
from kvplan.engines.shared.releases import release


class SglangEngine(BaseEngine):
    name = "sglang"
    display_name = "SGLang"
    start_log = LOG_FORMAT
    launch_table = launch_flags
    budget_figure = "available_bytes"
    tokens_figure = "max_total_num_tokens"
    kv_dtypes = KV_DTYPES
    smaller_kv_dtypes = SMALLER_KV_DTYPES
    cache_variants = ("",)  # `validate --layout sglang` allocates cache_layout()
    # srt/configs/model_config.py `ModelConfig._derive_context_length`: a --context-length
    # above the model's derived context length raises a ValueError unless this is set
    longer_context_env = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
    # SGLang pool_configurator.py DSV4PoolConfigurator
    compressed_attention_pools = (
        "DSV4PoolConfigurator's split of the memory between a sliding-window pool for every "
        "layer (swa_full_tokens_ratio 0.1) and c4/c128 pools of full_tokens // 4 and // 128, "
        "the c4 indexer pool and the compressor-state rings")

    # the free-memory readings its start-up log prints and its pool is sized by
    # (text.LOG_FORMAT: "Load weight begin/end. ... avail mem=X GB"; memory.rest_gb):
    # kvplan.planning.explain sizes the pool from them with capacity_from_readings
    log_readings = ("free_before_load_bytes", "free_after_load_bytes")

    def capacity(self, dep: Deployment) -> Capacity:
        check_served(dep.spec.architectures, parse_version(dep.engine_version))  # EntryClass
        config = self._config(dep)
        if dep.kv_memory_bytes is not None:
            # rest = after - before x (1 - f): with before = 0 the budget is used as given;
            # a budget given is the pool's bytes (a log's "KV size"), so a DSA pool is
            # divided by its own record whatever the release's profile counts
            # (before sglang#11309 the NSA pool's line leaves its indexer keys out of it)
            ver = parse_version(dep.engine_version)
            config = replace(config, dsa_profile_record=True, profile_counts_indexer=True,
                             kv_size_without_indexer=(
                                 ver is not None and release(ver) < NSA_INDEXER_IN_KV_SIZE))
            prof = profile(dep.spec, config, 0, dep.kv_memory_bytes, 0.5)
            return self._pooled(dep, prof, weights_per_gpu(dep), ("KV budget given directly",))
        assert dep.gpu_memory_bytes is not None
        mem = sglang_memory(dep.spec, dep.gpu_memory_bytes, tp=dep.tp, pp=dep.pp,
                            version=parse_version(dep.engine_version),
                            mem_fraction_static=dep.memory_fraction,
                            weights=dep.weights_dtype, weights_bytes=dep.weights_bytes,
                            dims=dep.dims, dp=dep.dp, dp_attention=self._dp_attention(dep),
                            nvswitch_hopper=dep.nvswitch_hopper,
                            rocm=is_rocm(dep.gpu_arch))
        prof = profile(dep.spec, config, mem.free_before_load_bytes,
                       mem.free_after_load_bytes, mem.mem_fraction_static)
        notes: tuple[str, ...] = (f"mem_fraction_static {mem.mem_fraction_static}",
                                  *vlm_unread_note(dep.spec, dep.memory_fraction))
        nccl = mem.held_before_load_bytes - SGLANG_INIT_BYTES
        if nccl > 0:
            notes += (f"NCCL's buffers, connected at init (NCCL_CUMEM_ENABLE=0), and the custom "
                      f"all-reduce's hold {human_bytes(nccl)} a GPU before the load",)
        return self._pooled(dep, prof, mem.weights_bytes, notes)

    def capacity_from_readings(self, dep: Deployment, readings: Mapping[str, int]) -> Capacity:
        """The pool as SGLang sizes it from the free memory it measured before and after the
        weight load (`readings`, by the names of `log_readings`; the least over the ranks) and
        mem_fraction_static: the deployment's, else SGLang's default for the release (by TP
        alone up to 0.4.5, from the GPU's total memory from 0.4.6 on, which `dep` must then
        give)."""
        before, after = (readings[name] for name in self.log_readings)
        fraction = dep.memory_fraction
        how = "mem_fraction_static {}"
        if fraction is None:
            version = parse_version(dep.engine_version)
            if rules_for(version).mem_fraction_by_memory and dep.gpu_memory_bytes is None:
                raise BadInputError(
                    "the log prints no mem_fraction_static, and SGLang's default from 0.4.6 on "
                    "follows the GPU's total memory, which the log does not print either",
                    "give --gpu, or the log's server_args line (mem_fraction_static=...)")
            rocm = is_rocm(dep.gpu_arch)
            fraction = sglang_default_mem_fraction(
                dep.gpu_memory_bytes or 0, dep.tp, dep.pp, version, dep.dp,
                self._dp_attention(dep), mla=dep.spec.is_mla, vit=sglang_vit(dep.spec, version),
                rocm=rocm, prefill_cuda_graph=prefill_graphs_on(
                    dep.spec, version, dep.pp, self._dp_attention(dep), rocm))
            how = "mem_fraction_static {} (SGLang's default: the log prints none)"
        prof = profile(dep.spec, self._config(dep), before, after, fraction)
        return self._pooled(dep, prof, max(0, before - after),
                            (how.format(fraction), *vlm_unread_note(dep.spec, dep.memory_fraction)))

    @staticmethod
    def _dp_attention(dep: Deployment) -> bool:
        return dep.dp_attention and dep.dp > 1

    def _config(self, dep: Deployment) -> SglangConfig:
        if self._dp_attention(dep) and dep.tp % dep.dp:
            raise BadInputError(f"--dp {dep.dp} must divide --tp {dep.tp} with "
                                "--enable-dp-attention", "server_args.py: tp_size % dp_size == 0")
        # DP attention: each DP group runs attention over tp // dp ranks (attn_tp_size), so
        # the KV heads per rank follow attn_tp (configs/model_config.py get_num_kv_heads)
        attn_tp = dep.tp // dep.dp if self._dp_attention(dep) else dep.tp
        version = parse_version(dep.engine_version)
        rules = rules_for(version)
        return SglangConfig(tp=attn_tp, pp=dep.pp, kv_cache_dtype=cache_dtype(dep),
                            page_size=dsa_page_size(dep) or dep.block_size or
                            DEFAULT_PAGE_SIZE,
                            dsa_profile_record=rules.dsa_profile_record,
                            profile_counts_indexer=(version is None or
                                                    release(version) >= NSA_INDEXER_IN_KV_SIZE))

    def _pooled(self, dep: Deployment, prof: SglangProfile, weights: int,
                budget_notes: tuple[str, ...]) -> Capacity:
        """The request pool the profile's token (and SWA, Mamba) slots make."""
        page = prof.page_size
        # every token takes one slot; requests hold whole pages
        constraints = [Constraint("tokens", "token", prof.max_total_num_tokens,
                                  (Need("full", page, weight=page, shareable=True),))]
        if prof.swa_max_total_num_tokens is not None:
            window = max(x.window_tokens for x in dep.spec.layers
                         if isinstance(x, ATTENTION_KINDS))
            constraints.append(Constraint("SWA tokens", "token", prof.swa_max_total_num_tokens,
                                          (Need("window", page, cap=window, weight=page),)))
        if prof.max_mamba_cache_size is not None:
            constraints.append(Constraint("Mamba state slots", "slot",
                                          prof.max_mamba_cache_size, (Need("fixed", fixed=1),)))
        # each DP-attention rank schedules its own requests with its own KV pool
        dp_attention = self._dp_attention(dep)
        pool = Pool(self.name, tuple(constraints), dep.context_limit(),
                    max_requests=max_running_requests(
                        prof.max_total_num_tokens, dep.context_limit(), dep.max_num_seqs,
                        dep.dp if dp_attention else 1),
                    max_requests_setting="max_running_requests", replicas=dep.dp)
        return Capacity(dep, self, None, prof, pool, prof.kv_cache_dtype, weights,
                        prof.cell_size_bytes,
                        budget_notes + checkpoint_kv_notes(dep) + dsa_cache_notes(dep))

    def concurrency_limit(self, dep: Deployment) -> tuple[int, str] | None:
        return (dep.max_num_seqs, "max_running_requests") if dep.max_num_seqs else None

    def numbers(self, cap: Capacity) -> dict[str, Any]:
        p: SglangProfile = cap.engine_profile
        return {"available_bytes": p.available_bytes, "cell_size_bytes": p.cell_size_bytes,
                "max_total_num_tokens": p.max_total_num_tokens,
                "swa_max_total_num_tokens": p.swa_max_total_num_tokens,
                "max_mamba_cache_size": p.max_mamba_cache_size,
                "k_size_bytes": p.k_size_bytes, "v_size_bytes": p.v_size_bytes}

    def defaults(self, spec: ModelSpec, gpu_name: str | None = None,
                 gpu_memory_bytes: int | None = None,
                 version: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"page_size": DEFAULT_PAGE_SIZE}
        if gpu_memory_bytes is not None:
            ver = parse_version(version)
            out["mem_fraction_static"] = sglang_default_mem_fraction(
                gpu_memory_bytes, version=ver, mla=spec.is_mla, vit=sglang_vit(spec, ver),
                prefill_cuda_graph=prefill_graphs_on(spec, ver))
        return out

    def cache_layout(self, spec: ModelSpec, fmt: KVFormat, tokens: int, batch: int, *,
                     tp: int = 1, block_size: int | None = None, max_len: int | None = None,
                     variant: str = "") -> CacheLayout:
        return cache_layout(spec, fmt, tokens, batch, tp=tp, page_size=block_size)


# server_args.py `_handle_model_specific_adjustments` sets page_size = 64 for a DeepSeek
# NSA/DSA model whatever --page-size asks (read in 0.5.3, 0.5.4 and 0.5.9); 0.5.9 sets 1 on
# ROCm, as a 0.5.8.post1 MI355X log shows (sglang-glm5-fp8-mi355x-tp8-0.5.8.post1: 3,262,823
# tokens), where 0.5.3 and 0.5.4 set 64 for every platform but NPUs; kvplan keeps 1 on ROCm
DSA_PAGE_SIZE = 64


def dsa_page_size(dep: Deployment) -> int | None:
    """The page size SGLang forces for a sparse-MLA model on a CUDA GPU (DSA_PAGE_SIZE, in
    the releases that serve one: `Rules.dsa_kv_dtype` set); None otherwise."""
    rules = rules_for(parse_version(dep.engine_version))
    if dep.spec.traits.sparse_mla and rules.dsa_kv_dtype and not is_rocm(dep.gpu_arch):
        return DSA_PAGE_SIZE
    return None


def cache_dtype(dep: Deployment) -> str:
    """The deployment's --kv-cache-dtype as its release resolves it: a DSA model's by the GPU's
    compute capability (`dsa_cache_dtype`), else a checkpoint's FP8 KV request, from the
    config kinds memory.Rules.kv_dtype_from_checkpoint names."""
    rules = rules_for(parse_version(dep.engine_version))
    requested = dsa_cache_dtype(dep, rules.dsa_kv_dtype)
    return kv_cache_dtype_from_checkpoint(dep.spec, requested, rules.kv_dtype_from_checkpoint)


def dsa_cache_dtype(dep: Deployment, rule: str) -> str:
    """SGLang's KV cache dtype for a DSA model (DeepSeek-V3.2, GLM-5; `Rules.dsa_kv_dtype`),
    from `torch.cuda.get_device_capability()`'s major: "forced" (0.5.3-0.5.4 server_args.py
    `_handle_model_specific_adjustments`) fp8_e4m3 on SM 10 or newer whatever was asked;
    "auto" (0.5.5 on: `_set_default_nsa_kv_cache_dtype`, arg_groups/overrides.py from 0.5.16)
    --kv-cache-dtype auto becomes fp8_e4m3 on SM 10 or newer (Blackwell: SM100, SM103, SM120)
    and bfloat16 before (Hopper, Ampere, and ROCm, where torch reports the gfx target's major,
    9). On a GPU whose capability kvplan does not know the request is kept and
    `dsa_cache_notes` says so. Any other model's request is returned as given."""
    requested = dep.kv_dtype
    if not _dsa_rule_applies(dep, rule):
        return requested
    capability = dep.compute_capability
    if capability is None and not is_rocm(dep.gpu_arch):
        return requested
    blackwell = capability is not None and capability[0] >= 10
    if rule == "forced":
        return "fp8_e4m3" if blackwell else requested
    return "fp8_e4m3" if blackwell else "bfloat16"


def _dsa_rule_applies(dep: Deployment, rule: str) -> bool:
    auto = dep.kv_dtype.strip().lower() == "auto"
    return bool(rule) and dep.spec.is_mla and dep.spec.traits.sparse_mla and \
        (rule == "forced" or auto)


def dsa_cache_notes(dep: Deployment) -> tuple[str, ...]:
    """A note where SGLang would pick a DSA model's KV cache dtype by a compute capability
    kvplan does not know (a GPU outside the catalog, or none given)."""
    rule = rules_for(parse_version(dep.engine_version)).dsa_kv_dtype
    if not _dsa_rule_applies(dep, rule) or dep.compute_capability is not None or \
            is_rocm(dep.gpu_arch):
        return ()
    return ("SGLang picks a DSA model's KV cache dtype by the GPU's compute capability "
            "(fp8_e4m3 on SM 10 or newer, bfloat16 before), which kvplan does not know for "
            f"{dep.gpu_name or 'this GPU'}: sized as {dep.kv_dtype}; give --gpu with a catalog "
            "GPU, or --kv-cache-dtype",)


def checkpoint_kv_notes(dep: Deployment) -> tuple[str, ...]:
    """A note when the checkpoint asks for a KV cache format and this release's
    --kv-cache-dtype auto does not take it (pools.checkpoint_kv_algo says which it takes)."""
    req = dep.spec.quantization.kv_cache
    if req is None or dep.kv_dtype.strip().lower() != "auto" or cache_dtype(dep) != "auto":
        return ()
    configs = rules_for(parse_version(dep.engine_version)).kv_dtype_from_checkpoint
    return (f"the checkpoint asks for {req.describe()}; SGLang's --kv-cache-dtype auto does "
            "not take it (it takes FP8 only, from the configs this release reads: "
            + (", ".join(configs) or "none") + "): give --kv-cache-dtype to choose the KV "
            "format",)


ENGINE = SglangEngine()
