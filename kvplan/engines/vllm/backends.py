"""The attention and prefill kernels vLLM picks, and the block sizes they impose.

By compute capability and KV dtype: the MLA backend's block size (`platforms/cuda.py`,
0.11-0.17 `check_and_update_config`; 0.18-0.33 `_get_backend_priorities` and each backend's
`get_supported_kernel_block_sizes`), the gated-delta-net and Kimi-Delta-Attention prefill
kernels of 0.33 and the prefill-checkpoint pages they export, and how MXFP4 MoE experts are
laid out (`quantization/mxfp4.py`). No GPU given stands for Hopper, where most MLA models
are served.
"""

from __future__ import annotations

from kvplan.core.errors import BadInputError
from kvplan.core.layers import RecurrentState
from kvplan.core.spec import ModelSpec
from kvplan.core.weights import ExpertLoad
from kvplan.engines.shared.device import compute_capability as device_capability
from kvplan.engines.vllm.config import DEFAULT_BLOCK_SIZE, LATEST, VllmConfig, rules_for
from kvplan.engines.vllm.formats import is_sparse_mla


def default_block_size(spec: ModelSpec, gpu_name: str | None = None,
                       version: tuple[int, ...] = LATEST, kv_cache_dtype: str = "auto",
                       compute_capability: str | None = None) -> int:
    """16 on CUDA; MLA backends choose their own (platforms/cuda.py).

    Up to 0.17 (the 0.11 rule, platforms/cuda.py check_and_update_config): FlashMLA 64 on
    Hopper (and sparse MLA everywhere), CUTLASS MLA 128 on datacenter Blackwell (FlashInfer
    MLA's 64 from 0.15, `rules.blackwell_flashinfer_mla`), Triton MLA keeps 16 elsewhere (the
    4xL4 DeepSeek-V2-Lite log shows 807,792 tokens, a multiple of 16 but not of 64). From
    0.18 (`rules.mla_backend_priorities`) see `_mla_block_size_033`."""
    if not spec.is_mla:
        return DEFAULT_BLOCK_SIZE
    if is_sparse_mla(spec):
        return 64  # FLASHMLA_SPARSE (kernel blocks of 64, flashmla_sparse.py)
    cc = capability(compute_capability, gpu_name)
    rules = rules_for(version)
    if rules.mla_backend_priorities:
        return _mla_block_size_033(cc, kv_cache_dtype)
    if cc is None:
        return 64  # FlashMLA, the default on the Hopper GPUs most MLA models are served on
    if cc[0] == 10:
        # 0.15-0.17: FlashInfer MLA (qk_nope_head_dim 128, as every DeepSeek-style library
        # model has) turns the block of 16 into 64; before, CUTLASS MLA's 128
        return 64 if rules.blackwell_flashinfer_mla else 128
    if cc[0] == 9:
        return 64
    return DEFAULT_BLOCK_SIZE


# Dense MLA backends of vLLM 0.33.0 (the same choice from 0.18.0, whose
# Platform.update_block_size_for_backend first takes the backend's block size: the 0.18.0
# and 0.26.0 wheels), in the order platforms/cuda.py::_get_backend_priorities
# tries them; the first whose checks pass serves the model, and its kernel block sizes give
# the block size (Platform._preferred_block_size_for_backends: 16 when the backend accepts
# it, else its smallest size). (name, compute-capability majors, KV dtypes, block size), from
# each backend's supports_compute_capability / supported_kv_cache_dtypes /
# get_supported_kernel_block_sizes (v1/attention/backends/mla/*.py):
_MLA_BACKENDS_033: dict[int, tuple[tuple[str, frozenset[str], int], ...]] = {}
_AUTO_16 = frozenset({"auto", "float16", "bfloat16"})
_WITH_FP8 = _AUTO_16 | {"fp8", "fp8_e4m3"}
_TRITON_MLA = ("TRITON_MLA", _WITH_FP8, 16)  # any capability, MultipleOf(16)
_MLA_BACKENDS_033[9] = (
    ("FLASH_ATTN_MLA", _AUTO_16, 16),  # FA3 on SM 9.x (flashattn_mla.py), MultipleOf(16)
    ("FLASHMLA", _WITH_FP8, 64),  # SM 9.x/10.x (flashmla.py), [64]
    _TRITON_MLA,
)
_MLA_BACKENDS_033[10] = (
    # FlashInfer MLA (flashinfer_mla.py): SM 10.x, kernel blocks [32, 64]; it requires
    # qk_nope_head_dim in (64, 128, 192), which every DeepSeek-style library model has (128)
    ("FLASHINFER_MLA", _WITH_FP8, 32),
    ("CUTLASS_MLA", _WITH_FP8, 128),  # cutlass_mla.py, [128]
    ("FLASHMLA", _WITH_FP8, 64),
    _TRITON_MLA,
)


def _mla_block_size_033(cc: tuple[int, int] | None, kv_cache_dtype: str) -> int:
    """vLLM 0.33's MLA block size on a GPU of compute capability `cc`: Hopper FA3 MLA (16)
    for bf16/fp16 and FlashMLA (64) for fp8; Blackwell SM 10.x FlashInfer MLA (32); SM 12.x,
    Ampere and Ada Triton MLA (16). No GPU given: Hopper, where most MLA models are served."""
    name = kv_cache_dtype.strip().lower()
    if name in ("fp8_ds_mla", "nvfp4_ds_mla"):
        # records only the sparse FlashMLA kernels read (flashmla_sparse.py: [64] for
        # quantized specs)
        return 64
    major = 9 if cc is None else cc[0]
    for _backend, dtypes, block in _MLA_BACKENDS_033.get(major, (_TRITON_MLA,)):
        if name in dtypes:
            return block
    return DEFAULT_BLOCK_SIZE


def _kernel_capability(config: VllmConfig) -> tuple[int, int] | None:
    """The capability a kernel choice is made for: no GPU given at all stands for Hopper
    (9, 0), as the MLA block size does; otherwise `capability`."""
    if config.compute_capability is None and not config.gpu_name:
        return (9, 0)
    return capability(config.compute_capability, config.gpu_name)


def capability(compute_capability: str | None, gpu_name: str | None = None
               ) -> tuple[int, int] | None:
    """The GPU's compute capability as VllmConfig carries it, "9.0" -> (9, 0): the GPU
    catalog's field (kvplan/data/gpus.yaml, read through Deployment.compute_capability).
    A GPU named without one (a custom GPU known only by its memory, an AMD gfx target) stands
    for neither Hopper nor Blackwell, (8, 0); None when no GPU is named at all (the callers
    then take Hopper) or for a ROCm target given as the capability ("gfx942")."""
    text = (compute_capability or "").strip()
    if text:
        return device_capability(text)
    return (8, 0) if gpu_name else None


# get_mxfp4_backend's choices, as the expert layout each re-lays the checkpoint into
MXFP4_BACKENDS = ("triton", "flashinfer", "marlin")


def mxfp4_expert_load(gpu_arch: str = "", backend: str | None = None,
                      triton_kernels: bool = True) -> ExpertLoad | None:
    """How vLLM holds MXFP4 MoE experts on a GPU (quantization/mxfp4.py, default settings:
    `get_mxfp4_backend` picks the backend, `Mxfp4MoEMethod.create_weights` pads, and
    `process_weights_after_loading` re-lays them out). `gpu_arch` holds the compute capability
    ("hopper sm9.0"); None when it does not (the checkpoint's own layout is used). `backend`
    (Deployment.mxfp4_backend) names the backend instead of the GPU's default;
    `triton_kernels` whether the release installs the `triton_kernels` package
    (Rules.triton_kernels_installed: from 0.12.0). Hopper runs Triton (Marlin without
    triton_kernels or with VLLM_MXFP4_USE_MARLIN=1), datacenter Blackwell FlashInfer, other
    CUDA GPUs Marlin; each backend's padding and extra tensors: docs/engine-kv-sizing.md
    §7.10."""
    if backend is not None and backend not in MXFP4_BACKENDS:
        raise BadInputError(f"unknown MXFP4 MoE backend {backend!r} (mxfp4_backend)",
                            "one of: " + ", ".join(MXFP4_BACKENDS))
    if backend is None:
        found = device_capability(gpu_arch)
        if found is None:
            return None
        major, minor = found
        hopper = "triton" if triton_kernels else "marlin"
        backend = hopper if (major, minor) == (9, 0) else \
            "flashinfer" if major == 10 else "marlin"
    if backend == "triton":
        return ExpertLoad(width_align=64, scale_copies=2, bias_dtype="F32")
    if backend == "flashinfer":
        return ExpertLoad(width_align=256, hidden_align=256)
    return ExpertLoad(width_align=128, hidden_align=256)

FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64
# The default vLLM 0.33 wheel is a CUDA 13 build (it requires nvidia-cutlass-dsl[cu13]):
# torch.version.cuda, which the GDN prefill choice reads on Blackwell.
DEFAULT_CUDA_RUNTIME_MAJOR = 13


def gdn_prefill_backend(spec: ModelSpec, config: VllmConfig) -> str | None:
    """The gated-delta-net prefill kernel vLLM 0.33 picks ("flashinfer" | "triton"; None
    without GDN layers): FlashInfer on SM 9.0, and on SM 10.x/12.x when head_k_dim is 128
    and the CUDA runtime is 13 or newer; Triton elsewhere (ROCm, Ampere, Ada)
    (model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py::_resolve_gdn_prefill_backend).
    No GPU given: Hopper, like the MLA block size. Before 0.33, whose GDN layers export no
    prefill checkpoint, the kernel changes nothing kvplan sizes and it answers "triton"."""
    gdn = [x for x in spec.layers if isinstance(x, RecurrentState)
           and x.variant == "gated_delta_net"]
    if not gdn or not config.rules.gdn_prefill_checkpoints:
        return None if not gdn else "triton"
    cc = _kernel_capability(config)
    if cc is None:
        return "triton"  # ROCm targets take the Triton/FLA (or AITER) path
    head_k_dim = _gdn_head_k_dim(gdn[0])
    if cc == (9, 0):
        return "flashinfer"
    if cc[0] in (10, 12) and head_k_dim == 128 and DEFAULT_CUDA_RUNTIME_MAJOR >= 13:
        return "flashinfer"
    return "triton"


# vLLM 0.33.0 model_executor/layers/mamba/kda_checkpoint.py kda_prefill_checkpoint_alignment:
# the FlashKDA prefill exports checkpoints on a 16-token grid
FLASHKDA_CHECKPOINT_ALIGNMENT = 16


def kda_prefill_backend(spec: ModelSpec, config: VllmConfig) -> str | None:
    """The Kimi Delta Attention prefill kernel vLLM 0.33 picks with the default "auto"
    ("flashkda" | "triton"; None without KDA layers): FlashKDA on CUDA SM 9.x/10.x/12.x when
    the head dim is 128, activations are bf16, the recurrent state bf16 or fp32 and the
    forget gate has a lower bound; Triton elsewhere (FlashInfer only when asked for)
    (models/kimi_k3/nvidia/kda.py resolve_kda_prefill_backend / is_flashkda_supported).
    No GPU given: Hopper, like the MLA block size. Before 0.31, whose KDA layers export no
    prefill checkpoint, the kernel changes nothing kvplan sizes and it answers "triton"."""
    kda = [x for x in spec.layers if isinstance(x, RecurrentState) and x.variant == "kda"]
    if not kda or not config.rules.kda_prefill_checkpoints:
        return None if not kda else "triton"
    cc = _kernel_capability(config)
    # the (heads, head_dim, head_dim) recurrent state (kda_state_shape / kda_state_dtype)
    recurrent = [t for t in kda[0].tensors if len(t.shape) == 3]
    bounded = spec.ssm is not None and spec.ssm.kind == "kda" and spec.ssm.bounded_gate
    # dtype=auto serves fp32 checkpoints in bf16 (config/model.py _resolve_auto_dtype)
    if cc is not None and cc[0] in (9, 10, 12) and bounded and spec.dtype != "fp16" \
            and recurrent and recurrent[0].shape[1] == 128 \
            and recurrent[0].dtype_bytes in (2, 4):
        return "flashkda"
    return "triton"


def _gdn_head_k_dim(layer: RecurrentState) -> int | None:
    # the recurrent state is (num_v_heads, head_k_dim, head_v_dim) (gated_delta_net_state_shape)
    shapes = [t.shape for t in layer.tensors if len(t.shape) == 3]
    return shapes[0][1] if shapes else None


def prefill_checkpoint_alignment(spec: ModelSpec, config: VllmConfig) -> int | None:
    """get_mamba_prefill_checkpoint_alignment (0.33): 64 when every Mamba-like layer is a GDN
    layer with the FlashInfer prefill (it exports mid-prefill states); None otherwise (the
    other mixers declare none). None before 0.33: 0.32's qwen_gdn_linear_attn.py exports no
    checkpoint and its _align_hybrid_block_size (platforms/interface.py) takes no grid."""
    if not config.rules.gdn_prefill_checkpoints:
        return None
    states = [x for x in spec.layers if isinstance(x, RecurrentState)]
    if states and all(x.variant == "gated_delta_net" for x in states) and \
            gdn_prefill_backend(spec, config) == "flashinfer":
        return FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
    return None


def checkpoint_blocks(layer: RecurrentState, spec: ModelSpec, config: VllmConfig) -> int:
    """MambaSpec.num_prefill_checkpoint_blocks: from 0.32 1 for Mamba2 mixers
    (mamba_mixer2.py MambaMixer2.get_kv_cache_spec), from 0.31 1 for KDA layers on the
    FlashKDA prefill (models/kimi_k3/nvidia/kda.py KimiK3DeltaAttention.get_kv_cache_spec),
    from 0.33 1 for GDN layers that export FlashInfer prefill checkpoints (qwen_gdn_linear_attn.py
    get_kv_cache_spec; `prefill_checkpoint_alignment`), else 0. Counted only in align mode
    (MambaSpec.max_memory_usage_bytes)."""
    rules = config.rules
    if layer.variant == "mamba2":
        return int(rules.mamba2_prefill_checkpoints)
    if layer.variant == "kda":
        return int(kda_prefill_backend(spec, config) == "flashkda")
    if layer.variant == "gated_delta_net" and config.mamba_cache_mode_resolved() == "align" \
            and prefill_checkpoint_alignment(spec, config) is not None:
        return 1
    return 0
