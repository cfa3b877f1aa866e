"""vLLM's KV-cache storage formats: `--kv-cache-dtype` names -> stored formats.

vLLM's names (`vllm/utils` STR_DTYPE_TO_TORCH_DTYPE) beside kvplan's formats
(kvplan.core.dtypes), the per-token-head formats of 0.33 (`KVQuantMode`,
`triton_attn.py::customize_spec`), and the model-driven overrides: DeepSeek-V3.2 and V4
store `fp8_ds_mla` records (`models/config.py::DeepseekV32ForCausalLM`,
`models/deepseek_v4/attention.py`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvplan.core.dtypes import (
    BF16,
    FP8_DS_MLA,
    FP8_E4M3,
    FP8_E5M2,
    FP16,
    FP32,
    NVFP4,
    NVFP4_DS_MLA,
    KVFormat,
)
from kvplan.core.errors import BadInputError
from kvplan.core.layers import CompressedAttention, indexer_key_bytes
from kvplan.core.spec import ModelSpec
from kvplan.engines import named_kv_format

# --- vLLM-only storage formats (kv_cache_dtype names) ------------------------------------
# Per-token-head quantization (0.33 KVQuantMode): 1-byte (or 4-bit) data plus one fp32 scale
# per token, per head, for K and for V (triton_attn.py::customize_spec). Expressed as one
# group spanning the whole row (group size larger than any head) with a 4-byte scale.
_WHOLE_ROW = 2**31
INT8_PER_TOKEN_HEAD = KVFormat(
    "int8_per_token_head", 8, group_size=_WHOLE_ROW, scale_bytes=4,
    description="vLLM int8 per token-head: 1 byte per element + fp32 scale per row")
FP8_PER_TOKEN_HEAD = replace(INT8_PER_TOKEN_HEAD, name="fp8_per_token_head",
                             description="vLLM fp8 per token-head: 1 byte + fp32 scale per row")
INT4_PER_TOKEN_HEAD = KVFormat(
    "int4_per_token_head", 4, group_size=_WHOLE_ROW, scale_bytes=4,
    description="vLLM int4 per token-head: half a byte per element + fp32 scale per row")

_KV_DTYPES: dict[str, KVFormat] = {
    "bfloat16": BF16, "bf16": BF16, "float16": FP16, "fp16": FP16, "half": FP16,
    "float32": FP32, "float": FP32, "fp32": FP32,
    "fp8": FP8_E4M3, "fp8_e4m3": FP8_E4M3, "fp8_inc": FP8_E4M3, "fp8_e5m2": FP8_E5M2,
    "nvfp4": NVFP4, "fp8_ds_mla": FP8_DS_MLA, "nvfp4_ds_mla": NVFP4_DS_MLA,
    "int8_per_token_head": INT8_PER_TOKEN_HEAD, "fp8_per_token_head": FP8_PER_TOKEN_HEAD,
    "int4_per_token_head": INT4_PER_TOKEN_HEAD,
}
KV_DTYPES = ("auto", "bfloat16", "float16", "float32", "fp8", "fp8_e4m3", "fp8_e5m2",
             "fp8_inc", "fp8_ds_mla", "nvfp4", "nvfp4_ds_mla", "int8_per_token_head",
             "fp8_per_token_head", "int4_per_token_head")
SMALLER_KV_DTYPES = ("fp8", "nvfp4")  # what to suggest when bf16 does not fit
INDEX_HEAD_DIM = 128  # the DSA indexer head when the spec names none (DeepSeek-V3.2)
INDEXER_BYTES_PER_TOKEN = indexer_key_bytes(INDEX_HEAD_DIM)  # fp8 key + fp32 scale


def is_sparse_mla(spec: ModelSpec) -> bool:
    """DeepSeek-V3.2 (DeepseekV32ForCausalLM in models/config.py MODELS_CONFIG_MAP;
    spec.traits.sparse_mla): FLASHMLA_SPARSE, fp8_ds_mla, indexer cache."""
    return spec.is_mla and spec.traits.sparse_mla


def has_compressed_attention(spec: ModelSpec) -> bool:
    """DeepSeek-V4 (compress_ratios): its own cache specs and grouping (dsv4_stage)."""
    return any(isinstance(x, CompressedAttention) for x in spec.layers)


def resolved_kv_cache_dtype(spec: ModelSpec, kv_cache_dtype: str, from_checkpoint: bool) -> str:
    """`--kv-cache-dtype` as vLLM resolves it when it builds its cache config: from 0.14
    (Rules.kv_dtype_from_checkpoint) "auto" becomes fp8_e4m3 when the checkpoint asks for an
    FP8 KV cache (checkpoint_kv_dtype), else it stays as given (lower-cased)."""
    name = flag_dtype(kv_cache_dtype).strip().lower()
    if from_checkpoint and name == "auto":
        return checkpoint_kv_dtype(spec) or name
    return name


def checkpoint_kv_dtype(spec: ModelSpec) -> str | None:
    """The KV cache dtype vLLM takes from the checkpoint's request
    (spec.quantization.kv_cache), as 0.14's utils/torch_utils.py
    get_kv_cache_quant_algo_string reads it: only a config whose quant_method starts with
    "modelopt" (or hf_quant_config.json's block); its kv_cache_scheme wins over
    kv_cache_quant_algo; a scheme mapping counts only as {dynamic: false, num_bits: 8,
    type: float}; a name maps through MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP, which holds only
    "fp8". Anything else: None (vLLM warns and keeps "auto"). A compressed-tensors
    kv_cache_scheme does not set the dtype (compressed_tensors.py
    CompressedTensorsKVCacheMethod only loads its scales when --kv-cache-dtype is fp8), nor
    does an Fp8Config's kv_cache_quant_algo. Not modelled: 0.33's map also takes "nvfp4"
    and a float 4-bit scheme (first release not read)."""
    req = spec.quantization.kv_cache
    if req is None or req.config != "modelopt":
        return None
    if req.scheme is not None:
        s = req.scheme
        fp8 = s.dynamic is False and s.num_bits == 8 and s.type == "float"
        return "fp8_e4m3" if fp8 else None
    name = req.scheme_name if req.scheme_name is not None else req.algo
    return "fp8_e4m3" if name is not None and name.strip().lower() == "fp8" else None


def kv_format(spec: ModelSpec, kv_cache_dtype: str = "auto",
              version: tuple[int, ...] | None = None) -> KVFormat:
    """`--kv-cache-dtype` -> the stored format (vllm/utils STR_DTYPE_TO_TORCH_DTYPE).

    `auto` is the model dtype, but `dtype=auto` itself serves float32 checkpoints in bf16
    (config/model.py::_resolve_auto_dtype); a ModelOpt checkpoint's own FP8 request is
    resolved before (resolved_kv_cache_dtype). A sparse MLA model stores any fp8 as
    `fp8_ds_mla` (model_executor/layers/attention/mla_attention.py
    _canonicalize_sparse_mla_kv_cache_dtype in 0.33); DeepSeek-V3.2 also auto in 0.11.0
    alone (models/config.py::DeepseekV32ForCausalLM, spec.traits.vllm_auto_fp8_ds_mla,
    Rules.v32_auto_fp8_ds_mla). `version`: the release (None: the newest kvplan knows).
    """
    from kvplan.engines.vllm.config import LATEST, rules_for

    name = kv_cache_dtype.strip().lower()
    v32_auto = spec.traits.vllm_auto_fp8_ds_mla and \
        rules_for(version or LATEST).v32_auto_fp8_ds_mla
    if is_sparse_mla(spec) and (name.startswith("fp8") or (name == "auto" and v32_auto)):
        return FP8_DS_MLA
    if has_compressed_attention(spec):
        # models/deepseek_v4/attention.py _resolve_dsv4_kv_cache_dtype, fp8_ds_mla layout (the
        # FlashMLA sparse backend): auto and any fp8 become fp8_ds_mla, anything else refused
        if name == "auto" or name.startswith("fp8"):
            return FP8_DS_MLA
        raise BadInputError(f"--kv-cache-dtype {name}: vLLM's DeepSeek-V4 fp8_ds_mla layout "
                            "only supports fp8 KV cache", "use auto or fp8")
    fmt = named_kv_format(spec, name, _KV_DTYPES, "vLLM", KV_DTYPES)
    if fmt.name in ("fp8_ds_mla", "nvfp4_ds_mla") and not spec.is_mla:
        raise BadInputError(f"--kv-cache-dtype {name} is an MLA-only record; "
                            f"{spec.name} has no MLA layers", "use fp8 instead")
    return fmt


def flag_dtype(name: str) -> str:
    """kvplan's KV dtype names -> vLLM's --kv-cache-dtype spelling of the same format."""
    return {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(name, name)


# --- the recurrent (SSM) state's dtype -------------------------------------------------------
# config/cache.py `MambaDType` (0.32 and 0.33): --mamba-ssm-cache-dtype
MAMBA_SSM_CACHE_DTYPES = {"auto": 0, "float32": 4, "bfloat16": 2, "float16": 2}
# the state tensors it sets: MambaStateDtypeCalculator._mamba_state_dtype's "temporal" state
# (model_executor/layers/mamba/mamba_utils.py: Mamba-1, Mamba-2, gated delta-net); the conv
# state, lightning attention and short convolutions follow mamba_cache_dtype instead
_SSM_STATE = {"mamba1": "ssm", "mamba2": "ssm", "gated_delta_net": "recurrent"}


def with_ssm_state_dtype(spec: ModelSpec, dtype: str) -> ModelSpec:
    """`spec` with its SSM states stored as --mamba-ssm-cache-dtype says; "auto" keeps the
    model's own (its config's mamba_ssm_cache_dtype, else the model dtype:
    kvplan.sources.hfconfig)."""
    from kvplan.core.layers import RecurrentState

    if dtype not in MAMBA_SSM_CACHE_DTYPES:
        raise BadInputError(f"--mamba-ssm-cache-dtype {dtype!r} is not one of vLLM's: "
                            f"{', '.join(MAMBA_SSM_CACHE_DTYPES)}")
    size = MAMBA_SSM_CACHE_DTYPES[dtype]
    if not size:
        return spec
    layers: list[Any] = []
    for layer in spec.layers:
        if isinstance(layer, RecurrentState) and layer.variant in _SSM_STATE:
            name = _SSM_STATE[layer.variant]
            layers.append(replace(layer, tensors=tuple(
                replace(t, dtype_bytes=size) if t.name == name else t for t in layer.tensors)))
        else:
            layers.append(layer)
    return replace(spec, layers=tuple(layers))
