"""Where each of vLLM's release rows (kvplan.engines.vllm.config.RULES) begins, read from the
release before the boundary and the release at it (the 0.2.0-0.5.0 wheels, the 0.5.5-0.11.1
source distributions); docs/engine-kv-sizing.md §7.8 has the table. Every figure here is
worked out by hand from vLLM's source and the constants of kvplan.engines.shared.device (the
CUDA context 296 MiB, the lazily loaded kernels 64 MiB)."""

from __future__ import annotations

import pytest

from kvplan.core.errors import BadInputError
from kvplan.engines import vllm
from kvplan.engines.shared.activations import Shapes
from kvplan.engines.vllm.config import (
    default_max_num_batched_tokens,
    default_max_num_seqs,
    rules_for,
)
from kvplan.engines.vllm.memory import (
    BatchSettings,
    batch_settings,
    non_torch_bytes,
    runner_buffers_bytes,
)

MIB = 2**20
GIB = 2**30
CONTEXT_AND_KERNELS = (296 + 64) * MIB  # counted absolutely: the context is in it
KERNELS = 64 * MIB  # counted as growth since a snapshot taken once the context exists


def test_v0_non_torch_memory_release_by_release():
    # worker.py profile_num_available_blocks, 0.3.0 wheel: `peak_memory = total_gpu_memory -
    # free_gpu_memory` after profile_run: the CUDA context counts
    assert non_torch_bytes((0, 3, 0)) == CONTEXT_AND_KERNELS
    # 0.3.1 wheel to the 0.6.3 sdist: `peak_memory = self.init_gpu_memory - free_gpu_memory`,
    # init_gpu_memory = torch.cuda.mem_get_info()[0] taken in init_model / init_device after
    # torch.cuda.set_device: the context is outside, NCCL (set up after it) inside
    for version in ((0, 3, 1), (0, 4, 1), (0, 5, 5), (0, 6, 3)):
        assert non_torch_bytes(version) == KERNELS, version
    # 0.6.4 and 0.6.4.post1 (vllm#9352) determine_num_available_blocks: the allocated peak
    # plus `mem_get_info()[1] - mem_get_info()[0] - allocated_bytes.all.current`, absolute.
    # vllm#10517's 0.6.4 RTX 3090 log prints "non_torch_memory=0.35GiB": 360 MiB is 0.3516
    assert non_torch_bytes((0, 6, 4)) == non_torch_bytes((0, 6, 4, 1)) == CONTEXT_AND_KERNELS
    assert round(360 / 1024, 2) == 0.35
    # 0.6.5 (vllm#10511): utils.py memory_profiling against `total - init_gpu_memory`
    assert non_torch_bytes((0, 6, 5)) == KERNELS


def test_v0_chunked_prefill_batch_is_2048_tokens_from_0_6_5():
    # config.py SchedulerConfig: `max_num_batched_tokens = 512` with chunked prefill in 0.6.4,
    # `self.max_num_batched_tokens = 2048` in 0.6.5's __post_init__; a 40,000-token context
    # turns chunked prefill on by default (engine/arg_utils.py: max_model_len > 32768)
    h100 = 80 * GIB
    assert batch_settings((0, 6, 4), h100, "H100", 40_000).max_num_batched_tokens == 512
    assert batch_settings((0, 6, 5), h100, "H100", 40_000).max_num_batched_tokens == 2048
    # without chunked prefill: max(max_model_len, 2048) in both
    assert batch_settings((0, 6, 4), h100, "H100", 8192).max_num_batched_tokens == 8192


def test_v1_batch_defaults_by_device_name_up_to_0_8_4():
    # engine/arg_utils.py _set_default_args_v1, 0.8.0-0.8.3: 8,192 server tokens when "h100"
    # or "h200" is in current_platform.get_device_name(), else 2,048; max_num_seqs 1,024
    mi300x, rtx4090, h100 = 192 * GIB, 24 * GIB, 80 * GIB
    for version in ((0, 8, 0), (0, 8, 3)):
        assert default_max_num_batched_tokens(h100, "H100 SXM", version=version) == 8192
        assert default_max_num_batched_tokens(mi300x, "MI300X", version=version) == 2048
        assert default_max_num_seqs(rtx4090, "RTX 4090", version) == 1024
        assert default_max_num_seqs(mi300x, "MI300X", version) == 1024
    # 0.8.4: `default_max_num_seqs = 1024` under the same name test, 256 otherwise
    assert default_max_num_seqs(h100, "H100 SXM", (0, 8, 4)) == 1024
    assert default_max_num_seqs(rtx4090, "RTX 4090", (0, 8, 4)) == 256
    assert default_max_num_seqs(mi300x, "MI300X", (0, 8, 4)) == 256
    # 0.8.5: `device_memory >= 70 * GiB_bytes` (get_device_total_memory), an A100 80GB too
    a100 = 81920 * MIB  # what NVML reports for an A100-SXM4-80GB
    assert default_max_num_batched_tokens(mi300x, "MI300X", version=(0, 8, 5)) == 8192
    assert default_max_num_batched_tokens(a100, "A100 SXM 80GB", version=(0, 8, 5)) == 8192
    assert default_max_num_seqs(a100, "A100 SXM 80GB", (0, 8, 5)) == 1024
    # 0.9.0: `... and "a100" not in device_name`
    assert default_max_num_batched_tokens(a100, "A100 SXM 80GB", version=(0, 9, 0)) == 2048
    assert default_max_num_seqs(a100, "A100 SXM 80GB", (0, 9, 0)) == 256


def test_v1_counts_absolutely_up_to_0_9_0_1():
    # v1/worker/gpu_worker.py determine_available_memory in the 0.9.0 and 0.9.0.1 sdists is
    # 0.8's: reset_peak_memory_stats, profile_run, `allocated_bytes.all.peak` plus
    # `total - free - allocated_bytes.all.current`; 0.9.1's runs memory_profiling against
    # init_snapshot (the peak's increase, the non-torch growth)
    for version in ((0, 8, 5), (0, 9, 0), (0, 9, 0, 1)):
        assert non_torch_bytes(version) == CONTEXT_AND_KERNELS, version
    assert non_torch_bytes((0, 9, 1)) == KERNELS
    # the absolute peak holds GPUModelRunner.__init__'s inputs_embeds (max_num_batched_tokens
    # x hidden x 2 B: 8,192 x 4,096 x 2 = 64 MiB for Llama-3.1-8B); the increase does not
    shapes = Shapes(4096, 128256, 14336)
    batch = BatchSettings(8192, 256, True, "V1")
    assert runner_buffers_bytes(shapes, batch, (0, 9, 0)) == 8192 * 4096 * 2 == 64 * MIB
    assert runner_buffers_bytes(shapes, batch, (0, 9, 1)) == 0


def test_nccl_connects_at_init_from_torch_2_7():
    # requirements/cuda.txt: torch==2.6.0 in 0.8.5, 2.7.0 in 0.9.0-0.9.2, 2.7.1 in 0.10.0-0.10.1,
    # 2.8.0 in 0.10.2; env_override.py sets NCCL_CUMEM_ENABLE=0 in 0.8.5-0.10.1 (not 0.10.2)
    assert not rules_for((0, 8, 5)).nccl_connects_at_init
    assert rules_for((0, 9, 0)).nccl_connects_at_init
    assert rules_for((0, 10, 1)).nccl_connects_at_init
    assert not rules_for((0, 10, 2)).nccl_connects_at_init


def test_flashinfer_sampler_is_opt_in_from_0_11_1():
    # v1/sample/ops/topk_topp_sampler.py TopKTopPSampler.__init__: 0.11.0 takes FlashInfer when
    # `VLLM_USE_FLASHINFER_SAMPLER is not False`; 0.11.1 only `if
    # envs.VLLM_USE_FLASHINFER_SAMPLER` ("Users must opt in explicitly")
    engine = vllm.ENGINE
    image = "vllm/vllm-openai"
    assert engine.launch_overrides(image, "v0.11.0", {}).get("flashinfer_sampler") is True
    assert "flashinfer_sampler" not in engine.launch_overrides(image, "v0.11.1", {})
    assert engine.launch_overrides(image, "v0.11.1", {"VLLM_USE_FLASHINFER_SAMPLER": "1"}) \
        == {"flashinfer_sampler": True}


def test_opt_in_v1_from_0_7_0():
    # the 0.7.0 sdist: envs.py VLLM_USE_V1 defaults to "0"; v1/worker/gpu_worker.py
    # determine_available_memory and gpu_model_runner.py profile_run as 0.7.1's;
    # _override_v1_engine_args picks the batch by "h100"/"h200" in the device's name
    assert not rules_for((0, 7, 0)).v1
    rules = rules_for((0, 7, 0), v1=True)
    assert rules.v1 and rules.profile_logits_all_tokens and rules.batch_tier_by_device_name
    with pytest.raises(BadInputError, match="from vLLM 0.7.0"):
        rules_for((0, 6, 6), v1=True)


def test_triton_top_k_top_p_from_0_17_0():
    # v1/sample/ops/topk_topp_sampler.py apply_top_k_top_p: the 0.16.0 wheel sorts the logits
    # (2 model-dtype + 4 fp32 + sorted values and int64 indices 4 + 8 + the int64 iota 8 and
    # cub's alternate buffers 4 + 8 = 38 B a logit); the 0.17.0 wheel sends 8 rows or more to
    # apply_top_k_top_p_triton (2 + 4 + softmax 4 + exponential noise 4 = 14 B a logit)
    from kvplan.engines.vllm.memory import sampler_bytes_per_logit

    assert sampler_bytes_per_logit((0, 16, 0)) == 2 + 4 + 4 + 8 + 8 + 4 + 8 == 38
    assert sampler_bytes_per_logit((0, 17, 0)) == 2 + 4 + 4 + 4 == 14
    # the grouping by the largest bucket is 0.18.0's ("min_num_layers * 1.5" in neither the
    # 0.17.0 wheel nor the 0.17.1 sdist)
    assert not rules_for((0, 17, 1)).largest_bucket_grouping
    assert rules_for((0, 18, 0)).largest_bucket_grouping


def test_kv_token_line_and_native_warmup_dates():
    # v1/core/kv_cache_utils.py: "GPU KV cache size" is `int(max_concurrency * max_model_len)`
    # in the 0.20.1 sdist, num_blocks // groups x block size in 0.20.0's
    assert not rules_for((0, 20, 0)).token_line_from_concurrency
    assert rules_for((0, 20, 1)).token_line_from_concurrency
    # gpu_model_runner.py _dummy_sampler_run warms forward_native too from the 0.21.0 sdist
    assert not rules_for((0, 20, 2)).native_sampler_warmup
    assert rules_for((0, 21, 0)).native_sampler_warmup


# --- the rows of 0.14-0.27, re-read from the wheels (0.13.0-0.18.0, 0.22.0-0.33.0) and the
# 0.19.0-0.21.0 source distributions --------------------------------------------------------

def test_requested_memory_is_rounded_up_from_0_14_0():
    # v1/worker/utils.py request_memory, 0.14.0 wheel: `math.ceil(init_snapshot.total_memory *
    # cache_config.gpu_memory_utilization)`; 0.13.0's gpu_worker.py init_device keeps the
    # float product and determine_available_memory int()s the difference at the end.
    # 24 GiB x 0.9 = 23,192,823,398.4 bytes
    from kvplan.engines.vllm.budget import vllm_budget
    from kvplan.sources.library import resolve

    total = 24 * GIB
    assert total * 9 % 10 == 4  # the product is not whole: .4 of a byte
    kw = dict(gpu_memory_utilization=0.9, weights_bytes=10 * GIB, activation_bytes=GIB // 4,
              non_torch_bytes=64 * MIB, cudagraph_bytes=0)
    spec = resolve("qwen3-8b")
    used = 10 * GIB + GIB // 4 + 64 * MIB
    old = vllm_budget(spec, total, version=(0, 13, 0), **kw)
    new = vllm_budget(spec, total, version=(0, 14, 0), **kw)
    assert old.available_kv_cache_bytes == (23_192_823_398 - used,)
    assert new.available_kv_cache_bytes == (23_192_823_399 - used,)


def test_mamba_cache_mode_none_from_0_15_0():
    # kv_cache_interface.py MambaSpec.max_memory_usage_bytes: 0.14.0's wheel `cdiv(
    # max_model_len, block_size) * page_size_bytes` with the Mamba block max_model_len (one
    # page, speculative blocks or not); 0.15.0's config/cache.py mamba_cache_mode "none" and
    # `page_size_bytes * (1 + num_speculative_blocks)`: 3 pages at 2 speculative tokens
    def pages(version):
        return vllm.VllmConfig(max_model_len=8192, version=version,
                               num_speculative_tokens=2).mamba_pages_per_request()

    assert pages((0, 14, 1)) == 1
    assert pages((0, 15, 0)) == 1 + 2
    # hybrids keep prefix caching off by default up to 0.27 (config/model.py
    # is_prefix_caching_supported returns False for "hybrid" in 0.15-0.25; 0.26-0.27
    # engine/arg_utils.py "keep it opt-in for now"): "align", two pages, from 0.28
    assert rules_for((0, 27, 0)).mamba_cache_mode == "none"
    assert rules_for((0, 28, 0)).mamba_cache_mode == "align"


def test_mla_block_size_by_release():
    # platforms/cuda.py check_and_update_config: on Blackwell (SM 10.x) 0.14.0 falls back to
    # CUTLASS MLA ("block_size % 128 != 0" -> 128); 0.15.0-0.17.0 force FlashInfer MLA for
    # qk_nope_head_dim 128 ("block_size != 32 and block_size % 64 != 0" -> 64). From 0.18.0
    # Platform.update_block_size_for_backend takes the first backend of
    # _get_backend_priorities: FlashInfer MLA on SM 10.x (kernel blocks [32, 64]: 16 not
    # taken, the smallest 32), FlashAttention MLA on Hopper for bf16 (MultipleOf(16): 16);
    # 0.17.0 forces FlashMLA's 64 on Hopper
    from factories import mla

    from kvplan.engines.vllm.backends import default_block_size

    def block(version, cc):
        return default_block_size(mla(), None, version, "auto", cc)

    assert block((0, 14, 0), "10.0") == 128
    assert block((0, 15, 0), "10.0") == block((0, 17, 0), "10.0") == 64
    assert block((0, 18, 0), "10.0") == 32
    assert block((0, 17, 0), "9.0") == 64
    assert block((0, 18, 0), "9.0") == 16
    # fused_moe.py fused_experts_impl: 0.17.0's chunks by VLLM_FUSED_MOE_CHUNK_SIZE, 0.18.0's
    # sizes its caches for every row (`M = num_tokens`)
    assert not rules_for((0, 17, 1)).moe_unchunked
    assert rules_for((0, 18, 0)).moe_unchunked


def test_hybrid_block_base_by_release():
    # The attention block of an attention + Mamba hybrid grows in multiples of a base until
    # its page holds a Mamba state. Qwen3-Next-like (factories.hybrid): state 3 x 8,192 x 2 +
    # 32 x 128 x 128 x 2 = 1,097,728 B, attention 2 x 2 x 256 x 2 = 2,048 B a token. With
    # --block-size 64: 0.19.0's models/config.py aligns to 16 whatever the flag, 16 x
    # cdiv(1,097,728, 32,768) = 16 x 34 = 544; 0.20.0's Platform._align_hybrid_block_size to
    # max(16, 64) = 64: 64 x cdiv(1,097,728, 131,072) = 64 x 9 = 576
    from factories import MLA, ModelSpec, RecurrentState, StateTensor, hybrid

    def block(spec, version, **kw):
        (stage,) = vllm.layout(spec, vllm.VllmConfig(max_model_len=8192, version=version, **kw))
        return {g.block_size for g in stage.groups}

    assert block(hybrid(), (0, 19, 1), block_size=64) == {16 * 34} == {544}
    assert block(hybrid(), (0, 20, 0), block_size=64) == {64 * 9} == {576}
    # An MLA hybrid (latent 512 + 64, bf16: 1,152 B a token, one copy per rank) with the same
    # state at TP 4 (3 x 2,048 x 2 + 8 x 128 x 128 x 2 = 274,432 B): 0.11.0 aligns to 16,
    # 16 x cdiv(274,432, 18,432) = 16 x 15 = 240; 0.11.1-0.19 to 64 ("Other MLA backends:
    # kernel_block_size 64"), 64 x cdiv(274,432, 73,728) = 64 x 4 = 256; 0.20-0.26 to the
    # backend's smallest kernel block, FlashAttention MLA's 16 on Hopper (no GPU given): 240;
    # 0.27 to multiples of 128: 128 x cdiv(274,432, 147,456) = 128 x 2 = 256
    gdn = RecurrentState("gated_delta_net", (
        StateTensor("conv", (3, 8192), 2, tp_axis=1),
        StateTensor("recurrent", (32, 128, 128), 2, tp_axis=0)))
    mla_hybrid = ModelSpec("mla-hybrid", (gdn, gdn, gdn, MLA(512, 64)) * 4,
                           num_attention_heads=32)
    assert gdn.state_bytes(4) == 3 * 2048 * 2 + 8 * 128 * 128 * 2 == 274432
    assert block(mla_hybrid, (0, 11, 0), tp=4) == {240}
    assert block(mla_hybrid, (0, 11, 1), tp=4) == block(mla_hybrid, (0, 19, 1), tp=4) == {256}
    assert block(mla_hybrid, (0, 20, 0), tp=4) == block(mla_hybrid, (0, 26, 0), tp=4) == {240}
    assert block(mla_hybrid, (0, 27, 0), tp=4) == {256}


def test_rows_of_0_27_to_0_33_where_their_wheels_show_them():
    # utils/mem_utils.py memory_profiling `total_consumed`: in the 0.27.0 wheel, not 0.26.0's
    assert not rules_for((0, 26, 0)).runner_buffers_consumed
    assert rules_for((0, 27, 0)).runner_buffers_consumed
    # kv_cache_utils.py: tokens and concurrency on one line, and get_batch_defaults' >= 160 GiB
    # tier, in the 0.28.0 wheel (0.27.0's prints two lines and has no such tier)
    assert not rules_for((0, 27, 0)).one_line_kv_log and not rules_for((0, 27, 0)).big_gpu_tier
    assert rules_for((0, 28, 0)).one_line_kv_log and rules_for((0, 28, 0)).big_gpu_tier
    # check_enough_kv_cache_memory "available_memory - _pool_bytes_per_block", the uniform
    # decode capture sizes and use_v2_model_runner without DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES:
    # the 0.29.0 wheel, not 0.28.0's
    for switch in ("null_block_in_fit_check", "decode_capture_sizes", "v2_runner_for_all"):
        assert not getattr(rules_for((0, 28, 0)), switch)
        assert getattr(rules_for((0, 29, 0)), switch)
    # kda_prefill_checkpoint_alignment: the 0.31.0 wheel, not 0.30.0's; MambaMixer2's
    # num_prefill_checkpoint_blocks: 0.32.0's, not 0.31.0's
    assert not rules_for((0, 30, 0)).kda_prefill_checkpoints
    assert rules_for((0, 31, 0)).kda_prefill_checkpoints
    assert not rules_for((0, 31, 0)).mamba2_prefill_checkpoints
    assert rules_for((0, 32, 0)).mamba2_prefill_checkpoints


def test_v0_long_context_chunking_leaves_multimodal_models_out_from_0_6_2():
    # engine/arg_utils.py create_engine_config: `use_long_context = max_model_len > 32768`
    # turns chunked prefill on whatever the usage context (no UsageContext test in the
    # 0.5.5-0.7.3 sdists, the LLM class included); from the 0.6.2 sdist "and not
    # model_config.is_multimodal_model" (0.6.5-0.7: bool(VLLM_USE_V1), off under V0), whose
    # profile batch is then max(max_model_len, 2048) = 128,000 tokens
    from dataclasses import replace

    from factories import dense

    text = dense()
    vlm = replace(text, uncounted_towers=("vision_config (qwen2_5_vl)",))
    h100 = 80 * GIB

    def tokens(version, spec, usage="server"):
        return batch_settings(version, h100, "H100", 128_000, spec=spec,
                              usage=usage).max_num_batched_tokens

    assert tokens((0, 6, 1), vlm) == tokens((0, 6, 1), text) == 512
    assert tokens((0, 6, 2), vlm) == tokens((0, 7, 3), vlm) == 128_000
    assert tokens((0, 6, 2), text) == 512 and tokens((0, 7, 3), text) == 2048
    assert tokens((0, 6, 4), text, usage="llm") == 512  # the LLM class too


def test_moe_chunk_is_16384_rows_in_0_12_to_0_17():
    # envs.py VLLM_FUSED_MOE_CHUNK_SIZE: "32768" in 0.11.2, str(16 * 1024) in the 0.12.0
    # wheel (to 0.17.1's sdist); fused_experts_impl sizes its caches `M = min(num_tokens,
    # CHUNK_SIZE)`. DeepSeek-V2-Lite-like experts (6 of 1,408, 2 shared of 2,816) at DP 16 /
    # EP 16: 2,048 tokens a rank, 32,768 gathered rows, chunked to 32,768 in 0.11 and to
    # 16,384 in 0.12
    from kvplan.engines.shared import activations as act

    shapes = Shapes(2048, 102400, 10944, 1408, 6, 2816)
    whole = (6 * (max(2 * 1408, 2048) + 1408) + 3 * 2816) * 2  # one row's MoE buffers
    gathered = 2048 * 16

    def fwd(version):
        r = rules_for(version)
        return act.forward_bytes(shapes, 2048, tp=1, ep=16, dp=16, moe_unchunked=r.moe_unchunked,
                                 moe_chunk_tokens=r.moe_chunk_tokens)

    base = 2048 * 3 * 2048 * 2 + gathered * 2048 * 2  # own hidden buffers + the gather
    assert fwd((0, 11, 2)) == base + 32768 * whole
    assert fwd((0, 12, 0)) == fwd((0, 17, 1)) == base + 16384 * whole
    assert fwd((0, 18, 0)) == base + gathered * whole
