"""Differential test: kvplan's vLLM engine against vLLM 0.33.0's own KV-cache planner.

Runs in its own environment (tests/oracle/setup.sh builds it; never in the default pytest run):
vLLM's wheel is downloaded at CI time and only its *.py files are put on PYTHONPATH, beside
torch and the pure-Python packages its imports need (tests/oracle/requirements.txt).

For every library model vLLM serves x GPU classes x KV dtypes x max_model_len x KV budgets:

vLLM side (its own code, called the way `EngineCore._initialize_kv_caches` does,
vllm/v1/engine/core.py @ 0.33.0):
  - a real `ModelConfig` from the model's real config.json (tests/fixtures/hf-configs, or
    tests/oracle/configs for the two library models without a fixture), a real `VllmConfig`
    (so vLLM's own per-model config hooks run: Mamba "align" mode, NemotronH fp32 SSM state...);
  - the block size from vLLM's `Platform.update_block_size_for_backend` for the attention
    backend vLLM 0.33 picks on that GPU (`attention_backend` below), including the hybrid
    attention/Mamba alignment (`_align_hybrid_block_size`);
  - per-layer specs built the way each layer's `get_kv_cache_spec` builds them, with the model
    class's own `get_mamba_state_shape_from_config` / `get_mamba_state_dtype_from_config`;
  - `get_global_kv_cache_groups` -> `get_kv_cache_configs` -> `generate_scheduler_kv_cache_config`
    -> `get_kv_cache_capacity`.
kvplan side: the library spec and `kvplan.engines.vllm.profile` with the same GPU and settings.

Compared exactly: num_blocks, "GPU KV cache size" tokens, max concurrency (the float), and
vLLM's refusal ("not enough KV cache memory") against kvplan's `fits_max_model_len`.
Prints the count of equal cases; exits 1 on any difference not listed in KNOWN_DIFFERENCES
(each of which is explained in docs/engine-accuracy.md).

Usage: .oracle-venv/bin/python tests/oracle/run_oracle.py [--quick] [--model NAME] [-v]
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
import types
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared harness
import oracle_harness as harness  # noqa: E402

harness.setup(VLLM_LOGGING_LEVEL="ERROR")
GiB = 2**30

# --- the GPU classes: what vLLM 0.33 sees on each ------------------------------------------
# cc: the device capability (platforms/cuda.py picks backends by it); catalog: kvplan's GPU
# catalog entry, whose memory decides vLLM's batch defaults (engine/arg_utils.py
# get_batch_defaults) and whose display name is what get_device_name() returns.


@dataclass(frozen=True)
class GPUClass:
    key: str
    catalog: str
    cc: tuple[int, int]
    # The default CUDA wheel of vLLM 0.33.0 is a CUDA 13 build (it requires
    # nvidia-cutlass-dsl[cu13]); torch.version.cuda is read by the GDN prefill choice.
    cuda_runtime_major: int = 13


GPU_CLASSES = (
    GPUClass("h100", "H100 SXM", (9, 0)),
    GPUClass("h200", "H200", (9, 0)),
    GPUClass("b200", "B200", (10, 0)),
    GPUClass("a100", "A100 SXM 80GB", (8, 0)),
    GPUClass("l40s", "L40S", (8, 9)),
)

# --- library models and the config.json behind each -------------------------------------------
# Library models vLLM 0.33 does not serve from these configs (not compared):
#   falcon-7b: RWForCausalLM, "supported in vLLM until v0.28.0" (ModelConfig refuses it);
#   llama-3.3-nemotron-super-49b: DeciLM needs the checkpoint's remote code (not offline);
#   gpt-3-175b: no public checkpoint; gemma-3-27b: no config.json copy;
#   the vision-language models (gemma-3-4b, llava-1.5-7b, llama-4-*, llama-3.2-90b-vision):
#   vLLM's registry inspects them with torchvision, whose CPU build does not load here.
SKIPPED = {
    "falcon-7b", "llama-3.3-nemotron-super-49b", "gpt-3-175b", "gemma-3-27b", "gemma-3-4b",
    "llava-1.5-7b", "llama-4-scout", "llama-4-maverick", "llama-3.2-90b-vision",
}

# DeepSeek-V4 (vllm/models/deepseek_v4): nvidia/model.py serves it with DeepseekV4FlashMLAAttention
# (FlashMLA sparse, fp8_ds_mla rows) unless the GPU is SM 12.x or a FlashInfer DSV4 backend is
# asked for; FlashMLA's kernels need SM 9.x/10.x, so kvplan plans it on Hopper and Blackwell
# (SM 10.x) only and the oracle compares those.
DSV4_ARCHITECTURES = {"DeepseekV4ForCausalLM"}
# Differences that are understood and documented in docs/engine-accuracy.md: (model, reason).
KNOWN_DIFFERENCES: dict[str, str] = {}


# --- vLLM ----------------------------------------------------------------------------------

class _Platform:
    """What the CUDA platform answers on the GPU class (the rest stays the CPU platform's)."""

    def __init__(self, gpu: GPUClass, memory_bytes: int, device_name: str):
        self.gpu, self.memory_bytes, self.device_name = gpu, memory_bytes, device_name

    def is_cuda(self): return True
    def is_cuda_alike(self): return True
    def is_rocm(self): return False
    def is_xpu(self): return False
    def is_cpu(self): return False
    def is_tpu(self): return False
    def get_device_total_memory(self, device_id=0): return self.memory_bytes
    def get_device_name(self, device_id=0): return self.device_name
    def is_device_capability(self, cap, device_id=0):
        if isinstance(cap, int):
            return self.gpu.cc[0] * 10 + self.gpu.cc[1] == cap
        return tuple(cap) == self.gpu.cc
    def is_device_capability_family(self, cap, device_id=0):
        return self.gpu.cc[0] * 10 // 10 == cap // 10
    def get_cuda_runtime_major(self): return self.gpu.cuda_runtime_major
    def get_device_capability(self, device_id=0):
        from vllm.platforms.interface import DeviceCapability
        return DeviceCapability(*self.gpu.cc)


def attention_backend(vllm, gpu: GPUClass, use_mla: bool, kv_cache_dtype: str, head_size: int,
                      hf_text_config, vc):
    """The backend vLLM 0.33 picks (platforms/cuda.py CudaPlatform.get_valid_backends): the
    first of `_get_backend_priorities` whose checks pass. Checks that need compiled kernels
    are answered as the CUDA wheel does on that GPU: FA3 MLA (`flash_attn_supports_mla`:
    FA3 on SM 9.x, `_vllm_fa3_C` ships in the wheel) and dense FlashMLA
    (`is_flashmla_dense_supported`: SM 9.x/10.x, `_flashmla_C` ships)."""
    from vllm.config import set_current_vllm_config
    from vllm.platforms.interface import DeviceCapability

    cap = DeviceCapability(*gpu.cc)
    priorities = vllm.cuda_priorities(use_mla=use_mla, device_capability=cap,
                                      kv_cache_dtype=kv_cache_dtype, head_size=head_size,
                                      num_heads=getattr(hf_text_config, "num_attention_heads",
                                                        None))
    tried = []
    for backend in priorities:
        name = backend.name
        if "SPARSE" in name or name in ("TURBOQUANT", "TRITON_FLASHINFER",
                                        "TRITON_FLASH_ATTN"):
            continue  # dense models only; sparse/mm-prefix/TurboQuant paths are not asked for
        try:
            cls = backend.get_class()
        except Exception as exc:  # a module that needs CUDA at import time
            if name in IMPORT_NEEDS_CUDA:
                tried.append(f"{name}: import {type(exc).__name__}")
                continue
            raise RuntimeError(f"{name} does not import: {type(exc).__name__}: {exc}") from exc
        ok = (cls.supports_compute_capability(cap) and cls.supports_kv_cache_dtype(kv_cache_dtype)
              and cls.supports_head_size(head_size) and cls.is_mla() == use_mla)
        if not ok:
            tried.append(f"{name}: unsupported")
            continue
        if name in ("FLASH_ATTN_MLA", "FLASHMLA"):
            return cls
        if name == "TOKENSPEED_MLA":
            tried.append(f"{name}: R1 dims with fp8 only")
            if not (kv_cache_dtype.startswith("fp8")):
                continue
        with set_current_vllm_config(vc):
            try:
                reason = cls.supports_combination(
                    head_size=head_size, dtype=vc.model_config.dtype,
                    kv_cache_dtype=kv_cache_dtype, block_size=None, use_mla=use_mla,
                    has_sink=False, use_sparse=False, use_mm_prefix=False,
                    device_capability=cap)
            except Exception as exc:
                reason = f"{type(exc).__name__}"
        if reason is None:
            return cls
        tried.append(f"{name}: {reason}")
    raise RuntimeError(f"no attention backend for {gpu.key}: {tried}")


# Backends whose module allocates CUDA memory at import (cutlass_mla.py: a 128 MiB workspace);
# they come after a backend that serves every dense MLA model of the library on SM 10.x
# (FLASHINFER_MLA: qk_nope_head_dim 128), so they are never the first valid one here.
IMPORT_NEEDS_CUDA = {"CUTLASS_MLA"}


class Vllm:
    """vLLM 0.33.0's planner, imported once."""

    def __init__(self):
        # platforms/cuda.py imports the compiled ops module first; only its priority list
        # (`_get_backend_priorities`, plain Python) is used here
        sys.modules.setdefault("vllm._C_stable_libtorch", types.ModuleType("_C_stub"))
        import vllm  # noqa: F401
        import vllm.v1.attention.backends.fa_utils as fa_utils

        # fa_utils binds the FA kernels only on a CUDA platform; the FA-MLA backend module
        # imports the name (never calls it here)
        for missing in ("flash_attn_varlen_func", "get_scheduler_metadata"):
            if not hasattr(fa_utils, missing):
                setattr(fa_utils, missing, None)
        from vllm.config import (
            CacheConfig,
            DeviceConfig,
            ModelConfig,
            ParallelConfig,
            SchedulerConfig,
            VllmConfig,
        )
        from vllm.platforms import current_platform
        from vllm.platforms.cuda import _get_backend_priorities

        self.CacheConfig, self.DeviceConfig, self.ModelConfig = CacheConfig, DeviceConfig, \
            ModelConfig
        self.ParallelConfig, self.SchedulerConfig, self.VllmConfig = ParallelConfig, \
            SchedulerConfig, VllmConfig
        self.cuda_priorities = _get_backend_priorities
        self.current_platform = current_platform
        # The hybrid KV-cache manager is on for CUDA (config/vllm.py: only platforms without
        # support_hybrid_kv_cache force it off); VllmConfig's own rules (chunked local
        # attention, KV transfer) still apply.
        type(current_platform).support_hybrid_kv_cache = classmethod(lambda cls: True)
        logging.getLogger("vllm").setLevel(logging.ERROR)

    def model_config(self, path: Path, max_model_len: int | None):
        # a fresh one per case: VllmConfig and the layer hooks update it in place
        return self.ModelConfig(model=str(path), skip_tokenizer_init=True, dtype="auto",
                                max_model_len=max_model_len)

    def batch_defaults(self, platform: _Platform) -> tuple[int, int]:
        """max_num_batched_tokens / max_num_seqs for `vllm serve` on that GPU
        (engine/arg_utils.py EngineArgs.get_batch_defaults)."""
        import vllm.engine.arg_utils as arg_utils
        from vllm.usage.usage_lib import UsageContext

        with _patched(arg_utils, "current_platform", platform):
            tokens, seqs = arg_utils.EngineArgs.get_batch_defaults(world_size=1)
        return tokens[UsageContext.OPENAI_API_SERVER], seqs[UsageContext.OPENAI_API_SERVER]

    def layout(self, path: Path, gpu: GPUClass, platform: _Platform, kv_cache_dtype: str,
               max_model_len: int, max_num_batched_tokens: int):
        """The VllmConfig and per-layer specs of one worker (TP=1, PP=1)."""
        import vllm.model_executor.layers.mamba.abstract as mamba_abstract
        import vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn as gdn
        from vllm.config import set_current_vllm_config
        from vllm.model_executor.layers.attention.attention import _largest_kernel_block_within
        from vllm.model_executor.models import ModelRegistry
        from vllm.platforms.interface import Platform
        from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
        from vllm.v1.kv_cache_interface import (
            FullAttentionSpec,
            MambaSpec,
            MLAAttentionSpec,
            SlidingWindowSpec,
            get_kv_quant_mode,
        )

        mc = self.model_config(path, max_model_len)
        cc = self.CacheConfig(cache_dtype=kv_cache_dtype, enable_prefix_caching=True)
        sc = self.SchedulerConfig(max_model_len=mc.max_model_len, is_encoder_decoder=False,
                                  max_num_batched_tokens=max_num_batched_tokens)
        vc = self.VllmConfig(model_config=mc, cache_config=cc, scheduler_config=sc,
                             device_config=self.DeviceConfig(device="cuda"),
                             parallel_config=self.ParallelConfig())
        # the CPU platform's defaults are not the CUDA ones: start from an unset block size
        cc.block_size = cc.DEFAULT_BLOCK_SIZE
        cc.user_specified_block_size = False
        if mc.architecture in DSV4_ARCHITECTURES:
            return self.dsv4_layout(vc, mc)
        hf = mc.hf_text_config
        model_cls, _ = ModelRegistry.resolve_model_cls(mc.architecture, model_config=mc)
        head_size = mc.get_head_size()
        backend = attention_backend(self, gpu, mc.use_mla, kv_cache_dtype, head_size, hf, vc)

        # GDN prefill kernel (qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend): FlashInfer
        # exports prefill checkpoints aligned to FLASHINFER_GDN_CHECKPOINT_ALIGNMENT in align mode
        mixer = MIXERS.get(mc.architecture)
        with _patched(gdn, "current_platform", platform):
            gdn_prefill = gdn._resolve_gdn_prefill_backend(vc)[1] if mixer == "gdn" else None
        checkpoint_alignment = None
        if mixer == "gdn" and cc.mamba_cache_mode == "align" and gdn_prefill == "flashinfer":
            from vllm.v1.attention.backends.gdn_attn import FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
            checkpoint_alignment = FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
        if mixer == "kda":
            # models/kimi_k3/nvidia/kda.py: the KDA prefill kernel (resolve_kda_prefill_backend,
            # "auto") decides whether the layer's spec counts a prefill-checkpoint block
            # (KimiK3DeltaAttention.get_kv_cache_spec, kda_prefill_checkpoint_alignment). The
            # layer keeps MambaBase.get_prefill_checkpoint_alignment (None), so the block size
            # is not aligned to it: `checkpoint_alignment` stays None for the block size.
            import vllm.models.kimi_k3.nvidia.kda as kda
            from vllm.model_executor.layers.mamba.kda_checkpoint import (
                kda_prefill_checkpoint_alignment,
            )
            lin = hf.linear_attn_config
            with _patched(kda, "current_platform", platform):
                gdn_prefill = kda.resolve_kda_prefill_backend(
                    "auto", lin["head_dim"], mc.dtype,
                    model_cls.get_mamba_state_dtype_from_config(vc)[1],
                    lin.get("gate_lower_bound"))
            kda_alignment = kda_prefill_checkpoint_alignment(gdn_prefill)
        # block size: the backend's preferred size, then the hybrid alignment
        # (platforms/interface.py Platform.update_block_size_for_backend)
        with _patched(Platform, "_find_non_ssm_backends", classmethod(lambda cls, v: [backend])), \
                _patched(mamba_abstract, "get_mamba_prefill_checkpoint_alignment",
                         lambda v: checkpoint_alignment):
            Platform.update_block_size_for_backend(vc)
        if mixer and cc.mamba_cache_mode == "align":
            cc.mamba_block_size = cc.block_size  # MambaModelConfig / _align_hybrid_block_size

        kv_dtype = kv_cache_dtype_str_to_dtype(kv_cache_dtype, mc)
        quant = get_kv_quant_mode(kv_cache_dtype)
        kv_heads = mc.get_num_kv_heads(vc.parallel_config)
        specs: dict = {}
        for i, kind in enumerate(layer_kinds(mc, hf)):
            name = f"model.layers.{i}"
            if kind == "none":
                continue
            if kind == "mamba":
                spec = MambaSpec(
                    shapes=tuple(model_cls.get_mamba_state_shape_from_config(vc)),
                    dtypes=tuple(model_cls.get_mamba_state_dtype_from_config(vc)),
                    block_size=cc.mamba_block_size,
                    page_size_padded=cc.mamba_page_size_padded,
                    mamba_cache_mode=cc.mamba_cache_mode, num_speculative_blocks=0)
                if mixer == "mamba2":
                    # mamba_mixer2.py MambaMixer2.get_kv_cache_spec
                    spec = replace(spec, num_prefill_checkpoint_blocks=1,
                                   prefill_checkpoint_alignment=1)
                elif mixer == "kda":
                    spec = replace(spec, num_prefill_checkpoint_blocks=int(
                        kda_alignment is not None),
                        prefill_checkpoint_alignment=kda_alignment)
                elif mixer == "gdn" and checkpoint_alignment is not None:
                    # qwen_gdn_linear_attn.py get_kv_cache_spec (_exports_checkpoints)
                    spec = replace(spec, num_prefill_checkpoint_blocks=1,
                                   prefill_checkpoint_alignment=cc.mamba_block_size)
                specs[f"{name}.mixer"] = spec
            elif mc.use_mla:
                # mla_attention.py MLAAttention.get_kv_cache_spec
                specs[f"{name}.attn"] = MLAAttentionSpec(
                    block_size=cc.block_size, num_kv_heads=1, max_tp_shards=1,
                    head_size=head_size, dtype=kv_dtype, cache_dtype_str=kv_cache_dtype,
                    kv_quant_mode=quant,
                    state_content_bytes={"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}.get(
                        kv_cache_dtype))
            elif kind == "sliding":
                # attention.py Attention.get_kv_cache_spec, sliding branch
                probe = backend.customize_spec(SlidingWindowSpec(
                    block_size=1, num_kv_heads=kv_heads, head_size=head_size,
                    head_size_v=head_size, dtype=kv_dtype, kv_quant_mode=quant,
                    sliding_window=hf.sliding_window))
                per_token = probe.real_page_size_bytes
                with set_current_vllm_config(vc):
                    sw_block = _largest_kernel_block_within(
                        backend, per_token, per_token * cc.block_size, cc.block_size, probe)
                specs[f"{name}.attn"] = SlidingWindowSpec(
                    block_size=sw_block, num_kv_heads=kv_heads, head_size=head_size,
                    head_size_v=head_size, dtype=kv_dtype, kv_quant_mode=quant,
                    sliding_window=hf.sliding_window)
            else:
                specs[f"{name}.attn"] = FullAttentionSpec(
                    block_size=cc.block_size, num_kv_heads=kv_heads, head_size=head_size,
                    head_size_v=head_size, dtype=kv_dtype, kv_quant_mode=quant)
        # the KV cache layout, resolved once by the engine core from what the backends
        # support (v1/engine/core.py -> v1/attention/backends/utils.py resolve_kv_cache_layout)
        from vllm.v1.attention.backends.utils import (
            get_supported_kv_cache_layouts,
            resolve_kv_cache_layout,
        )
        supported = [x.name for x in get_supported_kv_cache_layouts([backend])]
        resolve_kv_cache_layout(vc, [supported], specs.values())
        return vc, specs, backend.get_name(), gdn_prefill

    def dsv4_layout(self, vc, mc):
        """DeepSeek-V4 as nvidia/model.py picks its attention on every CUDA GPU but SM 12.x
        without an explicit backend: DeepseekV4FlashMLAAttention (FlashMLA sparse,
        fp8_ds_mla). The sliding-window, compressor-state and indexer-key caches are vLLM's own
        modules asked for their specs; the compressed MLA spec is built as
        DeepseekV4Attention.get_kv_cache_spec builds it (that module needs the checkpoint)."""
        import torch
        from vllm.config import set_current_vllm_config
        from vllm.models.deepseek_v4.attention import (
            DeepseekV4IndexerBackend,
            DeepseekV4IndexerCache,
            _resolve_dsv4_kv_cache_dtype,
        )
        from vllm.models.deepseek_v4.compressor import CompressorBackend, CompressorStateCache
        from vllm.models.deepseek_v4.nvidia.flashmla import DeepseekV4FlashMLAAttention
        from vllm.models.deepseek_v4.sparse_mla import DeepseekV4SparseMLABackend
        from vllm.v1.attention.backends.mla.indexer import dsa_indexer_uses_fp4
        from vllm.v1.attention.backends.mla.sparse_swa import (
            DeepseekSparseSWABackend,
            DeepseekV4SWACache,
        )
        from vllm.v1.attention.backends.utils import (
            get_supported_kv_cache_layouts,
            resolve_kv_cache_layout,
        )
        from vllm.v1.kv_cache_interface import MLAAttentionSpec, get_kv_quant_mode

        cc, hf = vc.cache_config, mc.hf_text_config
        # the sparse MLA backend's only kernel block size (update_block_size_for_backend)
        cc.block_size = DeepseekV4SparseMLABackend.get_supported_kernel_block_sizes()[0]
        kv_str, kv_torch = _resolve_dsv4_kv_cache_dtype(
            DeepseekV4FlashMLAAttention.use_fp8_ds_mla_layout, cc.cache_dtype, cc)
        fp8_ds_mla = kv_str == "fp8_ds_mla"
        specs: dict = {}
        with set_current_vllm_config(vc):
            assert not dsa_indexer_uses_fp4(vc)
            index_dim = hf.index_head_dim + hf.index_head_dim // 128 * 4  # fp8 + fp32 scale
            for i in range(hf.num_hidden_layers):
                # DeepseekV4Attention.__init__: the layer type's rate, 1 without one
                ratio = max(1, hf.compress_rates.get(hf.layer_types[i], 0))
                prefix = f"model.layers.{i}.attn"
                swa = DeepseekV4SWACache(head_dim=hf.head_dim, window_size=hf.sliding_window,
                                         dtype=kv_torch, prefix=f"{prefix}.swa_cache",
                                         cache_config=cc)
                specs[swa.prefix] = swa.get_kv_cache_spec(vc)
                if ratio <= 1:
                    continue
                specs[prefix] = MLAAttentionSpec(
                    block_size=cc.block_size, num_kv_heads=1, max_tp_shards=1,
                    head_size=hf.head_dim, dtype=torch.uint8 if fp8_ds_mla else kv_torch,
                    tokens_per_state=ratio, cache_dtype_str=kv_str,
                    alignment=576 if fp8_ds_mla else 512, model_version="deepseek_v4",
                    kv_quant_mode=get_kv_quant_mode(kv_str),
                    state_content_bytes=584 if fp8_ds_mla else None)
                coff = 1 + (ratio == 4)
                caches = [CompressorStateCache(
                    state_dim=2 * coff * hf.head_dim, dtype=torch.float32, compress_ratio=ratio,
                    prefix=f"{prefix}.compressor.state_cache")]
                if ratio == 4:  # "Only C4A uses sparse attention and hence has indexer"
                    caches.append(DeepseekV4IndexerCache(
                        head_dim=index_dim, dtype=torch.uint8, prefix=f"{prefix}.indexer.k_cache",
                        cache_config=cc, compress_ratio=ratio))
                    caches.append(CompressorStateCache(
                        state_dim=2 * coff * hf.index_head_dim, dtype=torch.float32,
                        compress_ratio=ratio, prefix=f"{prefix}.indexer.compressor.state_cache"))
                for cache in caches:
                    specs[cache.prefix] = cache.get_kv_cache_spec(vc)
        backends = [DeepseekV4SparseMLABackend, DeepseekSparseSWABackend, CompressorBackend,
                    DeepseekV4IndexerBackend]
        supported = [x.name for x in get_supported_kv_cache_layouts(backends)]
        resolve_kv_cache_layout(vc, [supported], specs.values())
        return vc, specs, "DEEPSEEK_V4_FLASHMLA_SPARSE", None

    def plan(self, vc, specs: dict, budget: int):
        """(num_blocks, tokens, concurrency) or None when vLLM refuses to start."""
        from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs
        from vllm.v1.core.kv_cache_utils import (
            generate_scheduler_kv_cache_config,
            get_kv_cache_capacity,
        )

        groups = get_global_kv_cache_groups(vc, [specs])
        try:
            configs = get_kv_cache_configs(vc, [specs], [budget], groups)
        except ValueError as exc:  # _check_enough_kv_cache_memory refuses to start
            if "max seq len" in str(exc) or "No available memory" in str(exc):
                return None
            raise
        sched = generate_scheduler_kv_cache_config(configs)
        tokens, concurrency = get_kv_cache_capacity(vc, sched)
        return sched.num_blocks, tokens, concurrency


# Which Mamba-like mixer each hybrid model class builds (vllm/model_executor/models/*.py):
# NemotronH -> MambaMixer2, Jamba -> MambaMixer, Qwen3-Next -> Qwen gated delta net.
MIXERS = {"NemotronHForCausalLM": "mamba2", "JambaForCausalLM": "mamba1",
          "Qwen3NextForCausalLM": "gdn", "KimiK3ForConditionalGeneration": "kda"}


def layer_kinds(mc, hf) -> list[str]:
    """Per decoder layer: full | sliding | mamba | none, as vLLM 0.33's model classes decide.
    Attention layers read `layer_types` (llama.py, gemma2.py, gemma3.py, olmo2.py...); without
    it a layer has no window (Attention falls back to cache_config.sliding_window, None), so
    a config-wide `sliding_window` with no `layer_types` (Mistral-7B-v0.1, Phi-3-mini) does
    not make vLLM 0.33 keep a window. gpt-oss windows every even layer (gpt_oss.py)."""
    n = mc.get_total_num_hidden_layers() if hasattr(mc, "get_total_num_hidden_layers") \
        else hf.num_hidden_layers
    types_ = getattr(hf, "layer_types", None)
    lin = getattr(hf, "linear_attn_config", None)
    if isinstance(lin, dict) and "kda_layers" in lin:
        # Kimi-Linear / Kimi-K3 (KimiLinearConfig.is_kda_layer): 1-based KDA layer numbers;
        # the others are MLA layers
        return ["mamba" if i + 1 in lin["kda_layers"] else "full" for i in range(n)]
    out = []
    for i in range(n):
        t = types_[i] if types_ else "full_attention"
        if mc.architecture == "GptOssForCausalLM":
            t = "sliding_attention" if i % 2 == 0 else "full_attention"
        if t in ("sliding_attention",) and getattr(hf, "sliding_window", None):
            out.append("sliding")
        elif t in ("full_attention", "attention", "sliding_attention", "chunked_attention"):
            out.append("full")
        elif t in ("linear_attention", "mamba"):
            out.append("mamba")
        elif t in ("mlp", "moe"):
            out.append("none")
        else:
            raise RuntimeError(f"layer type {t!r} not handled")
    return out


@contextlib.contextmanager
def _patched(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


# --- kvplan ----------------------------------------------------------------------------------

def kvplan_profile(spec, gpu_entry, kv_cache_dtype: str, max_model_len: int, budget: int):
    from kvplan.engines import vllm as kv_vllm

    version = kv_vllm.LATEST
    mbt = kv_vllm.default_max_num_batched_tokens(gpu_entry.memory_bytes, gpu_entry.name,
                                                 version=version)
    config = kv_vllm.VllmConfig(
        max_model_len=max_model_len, version=version, kv_cache_dtype=kv_cache_dtype,
        max_num_batched_tokens=mbt,
        gpu_name=f"{gpu_entry.name} {gpu_entry.architecture} sm{gpu_entry.compute_capability}",
        compute_capability=gpu_entry.compute_capability)
    return kv_vllm.profile(spec, config, budget), mbt


# --- cases -----------------------------------------------------------------------------------

def lengths(native: int, quick: bool) -> list[int]:
    out = [min(native, 4096), native]
    if not quick and native > 10001:
        out.insert(1, 10001)  # not a multiple of any block size
    return sorted(set(out))


BUDGETS = (3 * GiB + 123_456_789, 21 * GiB, 61 * GiB + 7)
KV_DTYPES = ("auto", "fp8")


def main(argv: list[str] | None = None) -> int:
    args = harness.parser(__doc__, "fewer lengths and GPU classes").parse_args(argv)

    import tempfile

    from kvplan.sources.gpus import find_gpu

    t0 = time.time()
    v = harness.imported("vLLM", Vllm)
    tmp = Path(tempfile.mkdtemp(prefix="kvplan-oracle-"))
    specs = harness.library_specs(SKIPPED, args.model)
    gpus = GPU_CLASSES[:3] if args.quick else GPU_CLASSES
    tally = harness.Tally(args.verbose)
    models_compared = set()
    for spec in specs:
        path = harness.config_dir(spec, tmp)
        if path is None:
            print(f"SKIP {spec.name}: no config.json", flush=True)
            continue
        try:
            native = v.model_config(path, None).max_model_len
        except Exception as exc:
            tally.error(f"{spec.name}: vLLM ModelConfig", exc)
            continue
        for gpu in gpus:
            if spec.name == "deepseek-v4-flash" and gpu.cc[0] not in (9, 10):
                print(f"SKIP {spec.name} {gpu.key}: FlashMLA sparse needs SM 9.x/10.x",
                      flush=True)
                continue
            entry = find_gpu(gpu.catalog)
            platform = _Platform(gpu, entry.memory_bytes, entry.display_name or entry.name)
            vllm_mbt, _ = v.batch_defaults(platform)
            for kv in KV_DTYPES:
                for length in lengths(native, args.quick):
                    try:
                        vc, layer_specs, backend, gdn_prefill = v.layout(
                            path, gpu, platform, kv, length, vllm_mbt)
                    except Exception as exc:
                        tally.error(f"{spec.name} {gpu.key} {kv} {length}: vLLM layout",
                                    exc)
                        continue
                    for budget in BUDGETS:
                        try:
                            want = v.plan(vc, layer_specs, budget)
                        except Exception as exc:
                            tally.error(f"{spec.name} {gpu.key} {kv} {length} {budget}: "
                                        "vLLM plan", exc)
                            continue
                        try:
                            prof, kv_mbt = kvplan_profile(spec, entry, kv, length, budget)
                            got = (prof.num_blocks, prof.kv_cache_tokens, prof.max_concurrency) \
                                if prof.fits_max_model_len else None
                            got_err = ""
                        except Exception as exc:
                            got, kv_mbt, got_err = None, None, f"{type(exc).__name__}: {exc}"
                        same = (got == want and not got_err and kv_mbt == vllm_mbt)
                        case = dict(model=spec.name, gpu=gpu.key, kv_cache_dtype=kv,
                                    max_model_len=length, budget_bytes=budget, backend=backend,
                                    block_size=vc.cache_config.block_size,
                                    gdn_prefill=gdn_prefill, vllm=want, kvplan=got,
                                    vllm_max_num_batched_tokens=vllm_mbt,
                                    kvplan_max_num_batched_tokens=kv_mbt, error=got_err,
                                    equal=same)
                        models_compared.add(spec.name)
                        tally.add(case, [] if same else ["vLLM and kvplan differ"],
                                  KNOWN_DIFFERENCES.get(spec.name))
    return tally.finish("vLLM 0.33.0 oracle",
                        f"{len(models_compared)} library models, {len(gpus)} GPU classes, "
                        f"KV dtypes {', '.join(KV_DTYPES)}", time.time() - t0, args.json)


if __name__ == "__main__":
    sys.exit(main())
