"""SGLang's memory budget: the two free-memory readings and mem_fraction_static.

    rest = free_after_load - free_before_load x (1 - mem_fraction_static)

`model_runner.py::profile_max_num_token` reads free memory before and after loading the
weights (`get_available_gpu_memory`: empty_cache, then mem_get_info), so the weights it
subtracts are the caching allocator's segments (`loaded_weight_bytes`, the replay of
kvplan.engines.shared.loading read as segments, rotary caches in fp32 on CUDA). The default
mem_fraction_static follows `server_args.py` by release (classic <= 0.4, 0.5.x, 0.5.23's
prefill CUDA graphs).
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.core.errors import NoKVMemoryError
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec
from kvplan.core.units import GIB, MIB, human_bytes
from kvplan.engines.shared.device import nccl_init_bytes
from kvplan.engines.shared.loading import loaded_weight_bytes as replay
from kvplan.engines.shared.releases import row_for
from kvplan.engines.shared.weights import ModelDims, from_inventory, load_name, stage_weights

# what a GPU holds before SGLang's reading of free memory before the load, beside the NCCL
# buffers `sglang_init_bytes` adds where it models them: the CUDA context and the process's own
# (the single-GPU H100 logs read 0.38 GiB under 0.4.1 and 0.71 GiB under 0.5.23)
SGLANG_INIT_BYTES = int(0.5 * GIB)
# The custom all-reduce each TP rank sets up in init_torch_distributed, before that reading,
# at TP 2, 4, 6 or 8 (distributed/device_communicators/custom_all_reduce.py
# CustomAllreduce.__init__, 0.4.7-0.4.10.post2): two cudaMalloc'd IPC buffers,
# meta_size() + 8 MiB (rounded up to the driver's 2 MiB pages: 10 MiB) and 8 MiB, and an
# 8 MiB torch tensor of rank_data
SGLANG_CUSTOM_ALLREDUCE_BYTES = (10 + 8 + 8) * MIB
CUSTOM_ALLREDUCE_WORLD_SIZES = (2, 4, 6, 8)  # CustomAllreduce._SUPPORTED_WORLD_SIZES


def prefill_graph_sizes(max_tokens: int) -> int:
    """How many prefill CUDA graphs SGLang captures up to `max_tokens` (its chunked prefill
    size): `generate_prefill_cuda_graph_batch_sizes` (0.5.23), 4..32 step 4, 48..256 step
    16, 288..512 step 32, 576..1024 step 64, 1280..4096 step 256, then step 512. 58 for
    8,192 (the 2026-08 H100 log lists them)."""
    steps = (range(4, 33, 4), range(48, 257, 16), range(288, 513, 32), range(576, 1025, 64),
             range(1280, 4097, 256), range(4608, max_tokens + 1, 512))
    return sum(1 for r in steps for size in r if size <= max_tokens)


@record
class Rules:
    """SGLang's behaviour switches one release has (`server_args.py`), one row per release
    whose source showed a change (`RULES`; kvplan.engines.shared.releases.row_for)."""

    # how server_args.py picks mem_fraction_static when unset (`default_by_memory`):
    # "tp" -- by tp_size alone (read in the 0.4.0, 0.4.3 and 0.4.5 wheels); "tp-13gib" -- that
    # table on a GPU of at most 81,920 MiB, else (gpu - 13 GiB) / gpu (0.4.6); "parallel" -- by
    # tp x pp on a GPU of at most 81,920 MiB, then the large-GPU branches (0.4.7); "reserved" --
    # round((gpu - reserved) / gpu, 3), reserved from a table by GPU memory and tp x pp (0.4.8 to
    # 0.5.2); "activations" -- reserved from chunked_prefill_size and cuda_graph_max_bs, which
    # follow the GPU's memory (0.5.3 on)
    mem_fraction_rule: str
    # prefill CUDA graphs captured by default, with memory reserved for them in the default
    # mem_fraction_static (8 MB a captured size, 1.5 GiB with MLA): piecewise CUDA graphs on
    # unless --disable-piecewise-cuda-graph from 0.5.10 (server_args.py
    # _handle_gpu_memory_settings; off by default in 0.5.9's), reserve_for_graph_mb later
    prefill_cuda_graphs: bool
    # the config kinds whose FP8 KV cache request turns --kv-cache-dtype auto into fp8_e4m3
    # (pools.kv_cache_dtype_from_checkpoint): "modelopt-nvfp4" (ModelOpt's NVFP4 config
    # only), "modelopt" (every ModelOpt config), "fp8" (Fp8Config), "compressed-tensors"
    kv_dtype_from_checkpoint: tuple[str, ...]
    # NCCL connects every algorithm when init_torch_distributed makes a group's pynccl
    # communicator (PyNcclCommunicator: ncclCommInitRank and a warm-up all-reduce), before
    # the reading taken as the free memory before the load (`min_per_gpu_memory`):
    # entrypoints/engine.py _set_envs_and_config sets NCCL_CUMEM_ENABLE=0 and
    # NCCL_NVLS_ENABLE=0 (enable_nccl_nvls off by default), and the release pins torch 2.7.1,
    # whose NCCL 2.26.2 then connects at init (kvplan.engines.shared.device.nccl_init_bytes).
    # Read in the 0.4.7, 0.4.8, 0.4.9.post2, 0.4.10 and 0.4.10.post2 wheels; 0.4.6.post5 pins
    # torch 2.6.0 (NCCL 2.21) and 0.5.0 torch 2.8.0 (NCCL 2.27), whose buffers were not read
    nccl_connects_at_init: bool
    # distributed/parallel_state.py initialize_model_parallel also builds the MoE groups,
    # _MOE_EP over ep ranks and _MOE_TP over tp // ep, each with a pynccl communicator, for
    # every model (the 0.4.10 wheel; 0.4.9.post2 builds TP and PP only)
    moe_groups: bool
    # a DSA model's profile cell (the tokens the rest holds) counts the pool's own record,
    # kv_cache_dim = 656 B at fp8 (pool_configurator.py calculate_mla_kv_cache_dim, from the
    # 0.5.17 wheel); before (model_runner_kv_cache_mixin.py get_cell_size_per_token in the
    # 0.5.8.post1 and 0.5.9 wheels, pool_configurator.py in 0.5.12 and 0.5.16) it counts
    # kv_lora_rank + qk_rope_head_dim at the cache dtype (576 B at fp8) while the NSA pool
    # still allocates the 656 B record (pools.profile)
    dsa_profile_record: bool = False
    # ServerArgs.adjust_mem_fraction_for_vlm scales the default mem_fraction_static down for a
    # multimodal model by its vision tower's size (first in the 0.4.10 wheel, not in 0.4.9's;
    # in 0.5.23's arg_groups/memory_hook.py too)
    vlm_fraction: bool = True
    # a DSA model's KV cache dtype by the GPU's compute capability (engine.dsa_cache_dtype):
    # "" none (before 0.5.3, no DSA model ran), "forced" (0.5.3-0.5.4), "auto" (0.5.5 on);
    # 0.5.20 on keep bfloat16 for a config with learnable_sink, which kvplan does not read
    dsa_kv_dtype: str = "auto"
    # "activations": the defaults of a GPU of 20 to 35 GiB, (chunked_prefill_size,
    # cuda_graph_max_bs below TP 4, at TP 4 or more): (2048, 16, 80) in the 0.5.3 and 0.5.4
    # wheels, (2048, 24, 80) in 0.5.5-0.5.19's, (4096, 48, 160) from 0.5.20's memory_hook.py
    under_35gib: tuple[int, int, int] = (4096, 48, 160)
    # the cases kvplan sees that switch the default prefill CUDA graphs off on an NVIDIA GPU,
    # and with them their reserve (prefill_graphs_on): "dp-attention" (--enable-dp-attention),
    # "pp" (pp_size > 1), "multimodal" (ModelConfig.is_multimodal: VLM_LISTED_FROM, less
    # `prefill_graph_multimodal_ok`), "mla" (use_mla_backend), "mla-non-dsa" (an MLA model
    # without DeepSeek sparse attention), "dsa" (DeepseekV32ForCausalLM, GlmMoeDsaForCausalLM)
    # and "family:<model_type>" (an architecture left out by name:
    # piecewise_cuda_graph_disabled_model_archs, is_deepseek_v4, is_nemotron_h,
    # uses_kda_attention). An AMD GPU has them off in every release (is_hip among the
    # piecewise rules; from 0.5.22 default_prefill_backend is DISABLED off CUDA). Read per
    # wheel in PREFILL_GRAPHS_OFF's comments.
    prefill_graph_off: tuple[str, ...] = ()
    # multimodal architectures that keep them (configs/model_config.py
    # multimodal_piecewise_cuda_graph_supported_model_archs, and from 0.5.16
    # multimodal_breakable_cuda_graph_supported_model_archs)
    prefill_graph_multimodal_ok: tuple[str, ...] = ()

    @property
    def mem_fraction_by_memory(self) -> bool:
        """Whether the default follows the GPU's total memory (every rule but "tp")."""
        return self.mem_fraction_rule != "tp"


_CLASSIC = Rules(mem_fraction_rule="tp", prefill_cuda_graphs=False, kv_dtype_from_checkpoint=(),
                 nccl_connects_at_init=False, moe_groups=False, vlm_fraction=False,
                 dsa_kv_dtype="")
_V047 = replace(_CLASSIC, mem_fraction_rule="parallel", nccl_connects_at_init=True)
_V0410 = replace(_V047, mem_fraction_rule="reserved", moe_groups=True, vlm_fraction=True)
_V050 = replace(_V0410, nccl_connects_at_init=False)
# 0.5.3: model_executor/model_runner.py: with --kv-cache-dtype auto the KV cache is
# torch.float8_e4m3fn when the model's quant_config has kv_cache_quant_algo "FP8" (first in the
# 0.5.3 wheel, not in 0.5.2's); in 0.5.3 only ModelOptFp4Config
# (layers/quantization/modelopt_quant.py) stores that attribute, ModelOptFp8Config keeps
# kv_cache_quant_method, so a ModelOpt FP8 checkpoint still gets the model dtype
_V053 = replace(_V050, mem_fraction_rule="activations",
                kv_dtype_from_checkpoint=("modelopt-nvfp4",), under_35gib=(2048, 16, 80),
                dsa_kv_dtype="forced")
# 0.5.4: every ModelOpt config inherits ModelOptQuantConfig.kv_cache_quant_algo
_V054 = replace(_V053, kv_dtype_from_checkpoint=("modelopt",))
_V055 = replace(_V054, under_35gib=(2048, 24, 80), dsa_kv_dtype="auto")
# 0.5.10: server_args.py _handle_piecewise_cuda_graph (torch.compile piecewise graphs, on by
# default): off for the model archs listed (Qwen3-Next, the DSA models), speculative decoding
# (0.5.10 only; its reserves are not modelled), DP attention, pp_size > 1, is_hip, a multimodal
# model, and cases kvplan has no setting for (LoRA, GGUF, an MoE all-to-all backend, CPU
# offload, PD disaggregation, context parallelism...)
_V0510 = replace(_V055, prefill_cuda_graphs=True, prefill_graph_off=(
    "dp-attention", "pp", "multimodal", "dsa", "family:qwen3_next"))
# 0.5.12 lists DeepseekV4ForCausalLM; 0.5.13 no longer lists the DSA models
_V0512 = replace(_V0510, prefill_graph_off=(*_V0510.prefill_graph_off, "family:deepseek_v4"))
_V0513 = replace(_V0512, prefill_graph_off=(
    "dp-attention", "pp", "multimodal", "family:qwen3_next", "family:deepseek_v4"))
# 0.5.14: _disable_tc_piecewise_cudagraph_if_incompatible keeps the multimodal models of
# multimodal_piecewise_cuda_graph_supported_model_archs
_V0514 = replace(_V0513, prefill_graph_multimodal_ok=("Cohere2VisionForConditionalGeneration",))
# 0.5.15: model_executor/cuda_graph_config.py default_prefill_backend: breakable graphs on CUDA,
# whose _disable_breakable_cudagraph_if_incompatible leaves out MLA, DeepSeek-V4, DP attention
# and every multimodal model (but not pp_size > 1 or Qwen3-Next)
_V0515 = replace(_V0514, prefill_graph_off=(
    "dp-attention", "multimodal", "mla", "family:deepseek_v4"), prefill_graph_multimodal_ok=())
# 0.5.16: a multimodal model of either allowlist keeps them
_V0516 = replace(_V0515, prefill_graph_multimodal_ok=(
    "Cohere2VisionForConditionalGeneration", "KimiK25ForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"))
# 0.5.17: MLA without DSA, NemotronH, DeepSeek-V4, multimodal (DP attention no longer)
_V0517 = replace(_V0516, dsa_profile_record=True, prefill_graph_off=(
    "multimodal", "mla-non-dsa", "family:nemotron_h", "family:deepseek_v4"))
# 0.5.18: layers/quantization/fp8.py Fp8Config.from_config keeps the config's
# kv_cache_quant_algo (not in 0.5.17's wheel)
_V0518 = replace(_V0517, kv_dtype_from_checkpoint=("modelopt", "fp8"),
                # 0.5.18's breakable rules: DeepSeek-V4 and multimodal among these
                prefill_graph_off=("multimodal", "family:deepseek_v4"))
# 0.5.19: compressed_tensors.py CompressedTensorsConfig.kv_cache_quant_algo is "FP8" for a
# kv_cache_scheme CompressedTensorsKVCacheMethod.is_supported_scheme takes (not in 0.5.18)
_V0519 = replace(_V0518, kv_dtype_from_checkpoint=("modelopt", "fp8", "compressed-tensors"),
                # 0.5.19 arg_groups/cuda_graph_hook.py apply_cuda_graph_compatibility: off
                # by default with pp_size > 1
                prefill_graph_off=("pp", "multimodal", "family:deepseek_v4"))
_V0520 = replace(_V0519, under_35gib=(4096, 48, 160))

RULES: dict[tuple[int, ...], Rules] = {
    (0, 4, 0): _CLASSIC,
    (0, 4, 6): replace(_CLASSIC, mem_fraction_rule="tp-13gib"),
    (0, 4, 7): _V047,
    (0, 4, 8): replace(_V047, mem_fraction_rule="reserved"),
    (0, 4, 10): _V0410,
    (0, 5, 0): _V050,
    (0, 5, 3): _V053,
    (0, 5, 4): _V054,
    (0, 5, 5): _V055,
    (0, 5, 10): _V0510,
    (0, 5, 12): _V0512,
    (0, 5, 13): _V0513,
    (0, 5, 14): _V0514,
    (0, 5, 15): _V0515,
    (0, 5, 16): _V0516,
    (0, 5, 17): _V0517,
    (0, 5, 18): _V0518,
    (0, 5, 19): _V0519,
    (0, 5, 20): _V0520,
    # 0.5.21: uses_kda_attention (Kimi Linear) joins the breakable rules
    (0, 5, 21): replace(_V0520, prefill_graph_off=(*_V0520.prefill_graph_off,
                                                   "family:kimi_linear")),
    # 0.5.23 keeps the kv_cache_quant_algo rule in mem_cache/kv_cache_dtype.py
    # configure_kv_cache_dtype
}
"""release -> its rules; a deployment that names no version has the newest, max(RULES)."""


# configs/model_config.py multimodal_model_archs (ModelConfig.is_multimodal; only those get
# adjust_mem_fraction_for_vlm): the first release whose list names the architecture
# (EngineTraits.sglang_vlm_arch), read in the 0.4.10, 0.5.0rc0, 0.5.0rc2, 0.5.1-0.5.3,
# 0.5.5-0.5.12, 0.5.16-0.5.19, 0.5.21 and 0.5.23 wheels. Those listed in 0.4.10 date from the
# rule's own first release. Exaone4_5_ForConditionalGeneration, KimiK3ForConditionalGeneration
# (and Nemotron Parse's class) are in none through 0.5.23. A model whose vision tower kvplan
# does not read (ModelSpec.uncounted_towers: GLM-4.5V, DeepSeek-OCR) gets no factor here;
# `vlm_unread_note` says so.
VLM_LISTED_FROM: dict[str, tuple[int, ...]] = {
    "LlavaForConditionalGeneration": (0, 4, 10),
    "Gemma3ForConditionalGeneration": (0, 4, 10),
    "Mistral3ForConditionalGeneration": (0, 4, 10),
    "Llama4ForConditionalGeneration": (0, 4, 10),
    "MllamaForConditionalGeneration": (0, 4, 10),
    "Qwen2VLForConditionalGeneration": (0, 4, 10),
    "Qwen2_5_VLForConditionalGeneration": (0, 4, 10),
    "Qwen3VLForConditionalGeneration": (0, 5, 3),  # not in 0.5.2's list
    "Qwen3VLMoeForConditionalGeneration": (0, 5, 3),
    "Qwen3_5ForConditionalGeneration": (0, 5, 9),  # not in 0.5.8.post1's
    "Qwen3_5MoeForConditionalGeneration": (0, 5, 9),
    "KimiK25ForConditionalGeneration": (0, 5, 9),
    "Lfm2VlForConditionalGeneration": (0, 5, 10),  # not in 0.5.9's
    "Gemma4ForConditionalGeneration": (0, 5, 11),  # not in 0.5.10's
}


def sglang_vit(spec: ModelSpec, version: tuple[int, ...] | None) -> tuple[int, ...]:
    """The vision tower's (num_hidden_layers, hidden_size) SGLang `version` scales its default
    mem_fraction_static by (EngineTraits.sglang_vit, as it reads them), or () where that
    release does not list the architecture as multimodal (VLM_LISTED_FROM; None: the newest)."""
    since = VLM_LISTED_FROM.get(spec.traits.sglang_vlm_arch)
    if since is None or (version is not None and version < since):
        return ()
    return spec.traits.sglang_vit


def vlm_unread_note(spec: ModelSpec, mem_fraction_static: float | None) -> tuple[str, ...]:
    """A note where SGLang's default mem_fraction_static would be scaled for a vision tower
    kvplan does not read (its vision_config is one of spec.uncounted_towers), so the default
    kvplan takes is not SGLang's; none when the fraction is given."""
    if mem_fraction_static is not None or spec.vision is not None or not any(
            name.startswith("vision_config") for name in spec.uncounted_towers):
        return ()
    return ("SGLang scales its default mem_fraction_static down for a multimodal model by its "
            "vision_config (adjust_mem_fraction_for_vlm); kvplan does not read this model's "
            "vision tower, so its default here is the text model's: give "
            "--mem-fraction-static for SGLang's",)


def prefill_graphs_on(spec: ModelSpec, version: tuple[int, ...] | None, pp: int = 1,
                      dp_attention: bool = False, rocm: bool = False) -> bool:
    """Whether SGLang `version` captures prefill CUDA graphs by default, and so reserves
    memory for them in its default mem_fraction_static: `Rules.prefill_cuda_graphs`, on an
    NVIDIA GPU (`rocm`: off), less the cases of `Rules.prefill_graph_off`."""
    rules = rules_for(version)
    if not rules.prefill_cuda_graphs or rocm:
        return False
    arch = spec.traits.sglang_vlm_arch
    since = VLM_LISTED_FROM.get(arch)
    multimodal = since is not None and (version is None or version >= since) and \
        arch not in rules.prefill_graph_multimodal_ok
    cases = {"dp-attention": dp_attention, "pp": pp > 1, "multimodal": multimodal,
             "mla": spec.is_mla, "mla-non-dsa": spec.is_mla and not spec.traits.sparse_mla,
             "dsa": spec.traits.sparse_mla, f"family:{spec.family}": True}
    return not any(cases.get(case, False) for case in rules.prefill_graph_off)


def rules_for(version: tuple[int, ...] | None) -> Rules:
    """The rules of `version` (None: the newest release read)."""
    return RULES[max(RULES)] if version is None else row_for(RULES, version)


def sglang_init_bytes(version: tuple[int, ...] | None = None, tp: int = 1, pp: int = 1, ep: int = 1,
               nvswitch_hopper: bool = False) -> int:
    """What a GPU holds when SGLang reads its free memory before the load
    (`init_torch_distributed`'s `min_per_gpu_memory`, the least over the ranks):
    SGLANG_INIT_BYTES, and where the release makes NCCL connect at init
    (`Rules.nccl_connects_at_init`) on an HGX Hopper board (`Deployment.nvswitch_hopper`), each
    pynccl communicator's buffers without NVLink SHARP (`device.nccl_init_bytes`) -- TP's, PP's
    and, with `Rules.moe_groups`, _MOE_EP's (ep ranks) and _MOE_TP's (tp // ep) -- and the
    custom all-reduce's (SGLANG_CUSTOM_ALLREDUCE_BYTES). Elsewhere NCCL's buffers are not
    modelled (docs/engine-accuracy.md section 9)."""
    rules = rules_for(version)
    if not (rules.nccl_connects_at_init and nvswitch_hopper):
        return SGLANG_INIT_BYTES
    groups = [tp, pp] + ([ep, tp // ep] if rules.moe_groups else [])
    held = SGLANG_INIT_BYTES + sum(nccl_init_bytes(ranks, nvls=False) for ranks in groups)
    if tp in CUSTOM_ALLREDUCE_WORLD_SIZES:
        held += SGLANG_CUSTOM_ALLREDUCE_BYTES
    return held


# Not modelled in the default mem_fraction_static: the speculative-decoding reserves
# (--speculative-algorithm is read from a launch line and named as not modelled): 6 GiB for
# STANDALONE and 2 GiB for any other algorithm in the 0.5.2 wheel, the same after the floor
# but none for NGRAM in the 0.5.3-0.5.9 wheels, 6 and 4 GiB in 0.5.10-0.5.13, no fixed term
# from 0.5.14. The draft worker's own KV pool, sized to the target's max_total_num_tokens
# (model_runner_kv_cache_mixin.py draft_runner_cache_size) after the target's profile, and
# its weights come out of the memory mem_fraction_static leaves, not the target's tokens.
def sglang_default_mem_fraction(gpu_memory_bytes: int, tp: int = 1, pp: int = 1,
                                version: tuple[int, ...] | None = None, dp: int = 1,
                                dp_attention: bool = False, mla: bool = False,
                                prefill_cuda_graph: bool | None = None,
                                vit: tuple[int, ...] = (), rocm: bool = False) -> float:
    """mem_fraction_static when unset (`server_args.py::_handle_gpu_memory_settings`), by the
    release's `Rules.mem_fraction_rule` (`default_by_memory`).

    Up to 0.4.7 fixed tables by TP (`_classic_fraction`); 0.4.8-0.5.2 a reserve by GPU size
    (`default_by_memory`). From 0.5.3: `round((gpu_MB - reserved_MB) / gpu_MB, 3)` with
    `reserved_MB = 512 + max(chunked_prefill, 2048) x 1.5 + tp x pp / 8 x 1024 + 2 x max_bs`
    (`_activation_defaults` by release), at least 10 GiB on GPUs > 60 GiB. With
    --enable-dp-attention ("DP attention needs more padding") `+ max_bs x dp x 3`, and
    `+ max_bs x dp x 1.5` more when max_bs > 300 (before the floor).
    From 0.5.10 (`Rules.prefill_cuda_graphs`; `reserve_for_graph_mb` later) the prefill CUDA
    graphs add `8 MB x len(prefill graph sizes)` (`prefill_graph_sizes`; MLA backends
    1.5 GiB) before the floor; `prefill_cuda_graph=False` (--disable-piecewise-cuda-graph, or
    a case `prefill_graphs_on` finds them off in) drops it, None takes the release's default.
    A multimodal model (`vit`, `sglang_vit`) then gets `vlm_fraction`'s factor. Not
    modelled: the speculative-decoding reserves (the comment above).
    """
    rules = rules_for(version)
    fraction = default_by_memory(gpu_memory_bytes, tp, pp, rules, dp, dp_attention, mla,
                                 prefill_cuda_graph, rocm)
    return vlm_fraction(fraction, vit) if vit and rules.vlm_fraction else fraction


def vlm_fraction(fraction: float, vit: tuple[int, ...]) -> float:
    """`ServerArgs.adjust_mem_fraction_for_vlm` (server_args.py, 0.4.10 on;
    arg_groups/memory_hook.py in 0.5.23): the default
    times `0.95 x clamp(1 - 0.1 x (ratio - 1), 0.8, 1.05)`, ratio the tower's
    `layers x hidden^2` over ViT-L/14's `24 x 1024^2`; not rounded."""
    layers, hidden = vit
    ratio = layers * hidden**2 / (24 * 1024**2)
    return fraction * (0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0))))


def default_by_memory(gpu_memory_bytes: int, tp: int, pp: int, rules: Rules, dp: int,
                      dp_attention: bool, mla: bool, prefill_cuda_graph: bool | None,
                      rocm: bool = False) -> float:
    """`sglang_default_mem_fraction` before the multimodal factor, by `rules.mem_fraction_rule`
    (`rocm`: an AMD GPU, which 0.4.7's is_cuda() branch leaves out)."""
    rule = rules.mem_fraction_rule
    gpu_mb = gpu_memory_bytes / 2**20  # get_device_memory_capacity: MiB
    if rule in ("tp", "tp-13gib", "parallel"):
        return _classic_fraction(gpu_mb, tp, pp, rule, rocm)
    if rule == "reserved":
        # 0.4.8-0.5.2: round((gpu - reserved) / gpu, 3), reserved (2.8 + tp x pp / 10) GiB
        # below 35 GiB, (9.5 + tp x pp / 2) below 90, (12 + tp x pp / 2) below 160, else 32 GiB;
        # +4 GiB with DP attention
        size = tp * pp
        reserved_gib = (2.8 + size / 10 if gpu_mb < 35 * 1024 else
                        9.5 + size / 2 if gpu_mb < 90 * 1024 else
                        12 + size / 2 if gpu_mb < 160 * 1024 else 32)
        reserved = reserved_gib * 1024 + (4 * 1024 if dp_attention and dp > 1 else 0)
        return round((gpu_mb - reserved) / gpu_mb, 3)
    chunked, max_bs = _activation_defaults(gpu_mb, tp, rules.under_35gib)
    reserved = 512 + max(chunked, 2048) * 1.5 + tp * pp / 8 * 1024 + 2 * max_bs
    if dp_attention and dp > 1:
        reserved += max_bs * dp * 3 + (max_bs * dp * 1.5 if max_bs > 300 else 0)
    if prefill_cuda_graph is None:
        prefill_cuda_graph = rules.prefill_cuda_graphs
    if prefill_cuda_graph:
        reserved += 1.5 * 1024 if mla else prefill_graph_sizes(chunked) * 8
    if gpu_mb > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mb - reserved) / gpu_mb, 3)


def _activation_defaults(gpu_mb: float, tp: int,
                         under_35gib: tuple[int, int, int]) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) SGLang picks by the GPU's memory from 0.5.3
    (server_args.py `_handle_gpu_memory_settings`; arg_groups/memory_hook.py from 0.5.19):
    below 20 GiB 2048 and 8; below 35 GiB the release's `Rules.under_35gib`; below 60 GiB 4096
    and 32 (160 at TP 4 or more); below 160 GiB 8192 and 256 (512 at TP 4 or more); above,
    16384 and 512. Read in the 0.5.3-0.5.12, 0.5.16-0.5.21 and 0.5.23 wheels."""
    if gpu_mb < 20 * 1024:
        return 2048, 8
    if gpu_mb < 35 * 1024:
        chunked, small, large = under_35gib
        return chunked, small if tp < 4 else large
    if gpu_mb < 60 * 1024:
        return 4096, 32 if tp < 4 else 160
    if gpu_mb < 160 * 1024:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def _classic_fraction(gpu_mb: float, tp: int, pp: int, rule: str, rocm: bool) -> float:
    """The fixed tables before 0.4.8 (`Rules.mem_fraction_rule` "tp", "tp-13gib",
    "parallel"): 0.79 from 16 ranks, 0.81 from 8, 0.85 from 4, 0.87 from 2, else 0.88 -- by
    tp_size up to 0.4.6, by tp x pp in 0.4.7. 0.4.6 takes (gpu - 13 GiB) / gpu above 81,920
    MiB. 0.4.7 takes 0.88 there, then 0.79 above 180,000 MiB on CUDA, and else above 96 GiB
    min(f + 48 GiB x (1 - f) / gpu, (gpu - 18 GiB) / gpu); neither is rounded."""
    ranks = tp * pp if rule == "parallel" else tp
    by_ranks = next((f for limit, f in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87))
                     if ranks >= limit), 0.88)
    if rule == "tp" or gpu_mb <= 81920:
        fraction = by_ranks
    elif rule == "tp-13gib":
        return (gpu_mb - 13 * 1024) / gpu_mb
    else:
        fraction = 0.88
    if rule == "parallel":
        if gpu_mb > 180 * 1000 and not rocm:
            return 0.79
        if gpu_mb > 96 * 1024:
            return min(fraction + 48 * 1024 * (1 - fraction) / gpu_mb,
                       (gpu_mb - 18 * 1024) / gpu_mb)
    return fraction


def rest_gb(free_before_load_bytes: int, free_after_load_bytes: int,
            mem_fraction_static: float) -> float:
    """SGLang's KV budget on the limiting GPU, in its GB floats (2^30 bytes):

        rest = free_after_load - free_before_load x (1 - mem_fraction_static)

    `model_runner.py::profile_max_num_token` (0.4-0.5.x: `available_gpu_memory -
    total_gpu_memory * (1 - mem_fraction_static)`) and 0.5.23
    `KVCacheConfigurator._profile_available_bytes` (`available_gpu_memory - slack_gb`, the slack
    being `pre_model_load_memory * (1 - mem_fraction_static)`). Both readings are
    `get_available_gpu_memory(distributed=True)`: free bytes / (1 << 30), the least over the
    ranks; the one before the load is taken as the ranks initialise, the one after as the
    pool is sized. The start-up log prints each rank's at "Load weight begin. avail mem=" and
    "Load weight end. ... avail mem=" (text.LOG_FORMAT). Not modelled: 0.5.23's reservation
    for multimodal models (`mm_runtime_reservation_gb`, SGLANG_VLM_CACHE_SIZE_MB) and its
    opt-in post-capture resize (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING)."""
    return free_after_load_bytes / GIB - free_before_load_bytes / GIB * (1 - mem_fraction_static)


@record
class SglangMemory:
    """The two free-memory readings SGLang's profile_max_num_token uses (per GPU)."""

    free_before_load_bytes: int  # "Load weight begin. avail mem=..."
    free_after_load_bytes: int  # "Load weight end. ... avail mem=..."
    mem_fraction_static: float
    weights_bytes: int
    held_before_load_bytes: int = SGLANG_INIT_BYTES  # sglang_init_bytes: context, NCCL


def sglang_memory(spec: ModelSpec, gpu_memory_bytes: int, *, tp: int = 1, pp: int = 1,
                  version: tuple[int, ...] | None = None,
                  mem_fraction_static: float | None = None, weights: str = "auto",
                  weights_bytes: int | None = None, init_bytes: int | None = None,
                  dims: ModelDims | None = None, dp: int = 1,
                  dp_attention: bool = False, nvswitch_hopper: bool = False,
                  rocm: bool = False) -> SglangMemory:
    """Predicted free memory before and after loading the weights on the fullest GPU. With
    DP attention the attention weights are split over tp // dp ranks only (replicated across
    the DP groups) while the MoE layers still span all tp ranks. What the GPU holds before
    the load is `sglang_init_bytes` (by release and GPU) unless `init_bytes` is given."""
    attn_tp = tp // dp if dp_attention and dp > 1 else tp
    ep = tp if attn_tp != tp and spec.num_experts else 1
    stages, weights_how = stage_weights(spec, weights, weights_bytes, attn_tp, pp, dims, ep=ep)
    if from_inventory(weights_how):
        # what SGLang subtracts: profile_max_num_token reads free memory after the load
        # (get_available_gpu_memory: empty_cache, then mem_get_info), so the allocator's
        # segments holding the weights and the fp32 rotary caches, not the tensors' bytes
        stages = loaded_weight_bytes(spec, attn_tp, pp, load_name(spec, weights), ep)
    per_gpu = max(stages)
    held = sglang_init_bytes(version, tp, pp, ep, nvswitch_hopper) if init_bytes is None \
        else init_bytes
    before = gpu_memory_bytes - held
    fraction = mem_fraction_static if mem_fraction_static is not None else \
        sglang_default_mem_fraction(gpu_memory_bytes, tp, pp, version, dp, dp_attention,
                                    mla=spec.is_mla, vit=sglang_vit(spec, version), rocm=rocm,
                                    prefill_cuda_graph=prefill_graphs_on(
                                        spec, version, pp, dp_attention and dp > 1, rocm))
    after = before - per_gpu
    left = after - before * (1 - fraction)  # rest_gb's rule, in bytes
    if before <= 0 or (mem_fraction_static is None and fraction <= 0):
        # a GPU smaller than SGLang's own reserves: its default mem_fraction_static leaves
        # nothing (it would refuse to start, not take a negative fraction)
        raise NoKVMemoryError(
            f"no memory is left for the KV cache: SGLang's reserves (mem_fraction_static "
            f"{fraction:.2f} by default) leave nothing of a {human_bytes(gpu_memory_bytes)} "
            "GPU", "use a larger GPU", engine="SGLang",
            left_bytes=min(0, int(left)), weights_bytes=per_gpu,
            memory_bytes=max(0, before))
    if left <= 0:
        # SGLang keeps 1 - mem_fraction_static of the free memory back; the weights take
        # the rest
        raise NoKVMemoryError(
            f"no memory is left for the KV cache: SGLang keeps {1 - fraction:.0%} of "
            f"{human_bytes(before)} free and the weights take {human_bytes(per_gpu)} per GPU",
            "use more GPUs (--tp/--pp), a smaller weight format, or a larger "
            "--mem-fraction-static", engine="SGLang",
            left_bytes=int(left), weights_bytes=per_gpu,
            memory_bytes=before)
    return SglangMemory(before, after, fraction, per_gpu, held)


def loaded_weight_bytes(spec: ModelSpec, tp: int = 1, pp: int = 1, weights: str = "auto",
                        ep: int = 1) -> tuple[int, ...]:
    """What SGLang logs as "Load weight end ... mem usage" per GPU of each stage: the drop in
    free device memory across `ModelRunner.load_model` (`get_available_gpu_memory`), so the
    caching allocator's segments that hold a weight, not the weights' own bytes. SGLang's model
    classes create their parameters as vLLM's do, so the replay is vLLM's
    (kvplan.engines.shared.loading), except that on CUDA each cos/sin cache stays fp32
    (`RotaryEmbedding.__init__`). `weights`: the checkpoint's own format ("auto"), one quantized
    at load or a model dtype; `ep`: experts split over `ep` ranks. The KV pool is sized from the
    same drop (`ModelRunner.profile_max_num_token`), so `sglang_memory` subtracts this figure
    too. Details: docs/engine-kv-sizing.md §7.6.
    """
    from kvplan.core.weights import load_format

    target, q, _ = load_format(spec, weights)
    return replay(target, q, tp, pp, ep, reserved=True, rope_fp32=True)
