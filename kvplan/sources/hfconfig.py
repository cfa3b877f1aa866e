"""A Hugging Face `config.json` -> ModelSpec. The one place that knows HF field names.

In order: the language model's fields (a nested `text_config` or the top level; omitted nested
fields take the transformers class defaults, `_ARCH_DEFAULTS`, since `save_pretrained` drops
them); one *kind* per layer from the first schedule the config states (`_Reader.schedule`);
one Layer per kind (`_Reader.layer`: attention shapes, MLA, recurrent states). Each quirk is
handled once, with a comment naming the model that needs it; anything not understood is a
SpecError naming the field, never a guess. Engine facts used here (vLLM 0.11
`ModelConfig.get_head_size`/`get_total_num_kv_heads`, `MambaStateShapeCalculator`;
transformers 5.x config classes): docs/engine-kv-sizing.md §1.1, §1.10, §4.1 and §5.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from kvplan.core.layers import (
    MLA,
    ChunkedLocal,
    CompressedAttention,
    CrossAttention,
    FullAttention,
    Layer,
    NoCache,
    RecurrentState,
    SlidingWindow,
    StateTensor,
)
from kvplan.core.spec import (
    MAX_LAYERS,
    MAX_ROPE_FACTOR,
    MAX_ROPE_ORIGINAL_POSITIONS,
    AudioEncoder,
    Block,
    ModelSpec,
    PerLayerInputs,
    Rope,
    SharedBlocks,
    Source,
    SSMShapes,
    VisionTower,
)
from kvplan.sources import hfarch
from kvplan.sources.families import with_family_facts
from kvplan.sources.fields import Fields
from kvplan.sources.quant import (
    deepseek_v4_formats,
    find_quantization_config,
    quantization_from_config,
)
from kvplan.sources.reader import finite_number, parse_json, read_bytes

# No real model comes near these; they stop absurd numbers from building huge layer lists
# (or integers too long to print in an error message). MAX_LAYERS: kvplan.core.spec.
MAX_NUMBER = 2**53
# A width, head count, rank, layer period or expert count: real ones are below 2**18, and a
# config with hidden_size 1e9 is a mistake, not a model.
MAX_SHAPE = 2**24
# Lengths in tokens (contexts, windows, chunks) may be larger: some configs write 2**30 or more
# for "unbounded".
_LENGTH_FIELDS = {"max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                  "model_max_length", "max_sequence_length", "max_seq_length", "seq_len",
                  "sliding_window", "sliding_window_size", "window_size", "window_length",
                  "attention_chunk_size", "max_window_layers"}

_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "bf16": "bf16",
           "fp16": "fp16", "fp32": "fp32", "float": "fp32", "half": "fp16"}
_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}

# Defaults of the transformers config classes (5.x, `configuration_*.py`), for the fields this
# reader uses, applied only to fields a config leaves out (an explicit null stays null).
_LLAMA = {"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096,
          "max_position_embeddings": 2048, "intermediate_size": 11008}
_QWEN_WINDOW = {"use_sliding_window": False, "sliding_window": 4096}
_ARCH_DEFAULTS: dict[str, dict[str, Any]] = {
    # Llava-1.5 ships a text_config holding little more than model_type "llama".
    "llama": _LLAMA,
    "mistral": {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                "hidden_size": 4096, "max_position_embeddings": 131072, "sliding_window": 4096},
    "qwen2": {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
              "hidden_size": 4096, "max_position_embeddings": 32768, "max_window_layers": 28,
              **_QWEN_WINDOW},
    "qwen3": {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
              "head_dim": 128, "hidden_size": 4096, "max_position_embeddings": 32768,
              "max_window_layers": 28, **_QWEN_WINDOW},
    "qwen2_moe": {"use_sliding_window": False},
    "qwen3_moe": {"use_sliding_window": False},
    "qwen2_vl_text": {"num_hidden_layers": 80, "num_attention_heads": 64,
                      "num_key_value_heads": 8, "hidden_size": 8192,
                      "max_position_embeddings": 32768, "max_window_layers": 80, **_QWEN_WINDOW},
    "qwen2_5_vl_text": {"num_hidden_layers": 80, "num_attention_heads": 64,
                        "num_key_value_heads": 8, "hidden_size": 8192,
                        "max_position_embeddings": 32768, "max_window_layers": 80,
                        **_QWEN_WINDOW},
    "qwen3_vl_text": {"num_hidden_layers": 32, "num_attention_heads": 32,
                      "num_key_value_heads": 32, "head_dim": 128, "hidden_size": 4096,
                      "max_position_embeddings": 128000},
    "qwen3_vl_moe_text": {"num_hidden_layers": 24, "num_attention_heads": 16,
                          "num_key_value_heads": 16, "hidden_size": 2048,
                          "max_position_embeddings": 128000},
    "qwen3_next": {"num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2,
                   "head_dim": 256, "hidden_size": 2048, "max_position_embeddings": 32768,
                   "full_attention_interval": 4, "linear_conv_kernel_dim": 4,
                   "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                   "linear_num_key_heads": 16, "linear_num_value_heads": 32},
    "qwen3_5_text": {"num_hidden_layers": 32, "num_attention_heads": 16, "num_key_value_heads": 4,
                     "head_dim": 256, "hidden_size": 4096, "max_position_embeddings": 32768,
                     "full_attention_interval": 4, "linear_conv_kernel_dim": 4,
                     "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                     "linear_num_key_heads": 16, "linear_num_value_heads": 32},
    "qwen3_5_moe_text": {"num_hidden_layers": 40, "num_attention_heads": 16,
                         "num_key_value_heads": 2, "head_dim": 256, "hidden_size": 2048,
                         "max_position_embeddings": 32768, "full_attention_interval": 4,
                         "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
                         "linear_value_head_dim": 128, "linear_num_key_heads": 16,
                         "linear_num_value_heads": 32},
    "gemma": {"num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 16,
              "head_dim": 256, "hidden_size": 3072, "max_position_embeddings": 8192},
    "gemma2": {"num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
               "head_dim": 256, "hidden_size": 2304, "max_position_embeddings": 8192,
               "sliding_window": 4096},
    # Gemma-3-4B's text_config omits its head counts (8 heads, 4 KV heads, head_dim 256).
    "gemma3_text": {"num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
                    "head_dim": 256, "hidden_size": 2304, "max_position_embeddings": 131072,
                    "sliding_window": 4096, "intermediate_size": 9216, "vocab_size": 262208},
    "gemma3n_text": {"num_hidden_layers": 35, "num_attention_heads": 8, "num_key_value_heads": 2,
                     "head_dim": 256, "hidden_size": 2048, "max_position_embeddings": 32768,
                     "sliding_window": 512, "num_kv_shared_layers": 15},
    # Gemma4TextConfig pops global_head_dim with a default of 512.
    "gemma4_text": {"num_hidden_layers": 30, "num_attention_heads": 8, "num_key_value_heads": 4,
                    "head_dim": 256, "global_head_dim": 512, "hidden_size": 2304,
                    "max_position_embeddings": 131072, "sliding_window": 512,
                    "attention_k_eq_v": False, "num_kv_shared_layers": 0},
    "llama4_text": {"num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8,
                    "head_dim": 128, "hidden_size": 5120, "max_position_embeddings": 131072,
                    "attention_chunk_size": 8192, "no_rope_layer_interval": 4},
    # Llama 3.2 Vision's text model: cross-attention layers default to every 5th from 3.
    "mllama_text_model": {"num_hidden_layers": 40, "num_attention_heads": 32,
                          "num_key_value_heads": 8, "hidden_size": 4096,
                          "max_position_embeddings": 131072,
                          "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38]},
    "cohere2": {"num_hidden_layers": 40, "num_attention_heads": 64, "hidden_size": 8192,
                "max_position_embeddings": 8192, "sliding_window": 4096},
    "phi3": {"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 3072,
             "max_position_embeddings": 4096},
    "deepseek_v3": {"num_hidden_layers": 61, "num_attention_heads": 128, "hidden_size": 7168,
                    "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                    "max_position_embeddings": 4096},
    "deepseek_v32": {"index_head_dim": 128},
    "glm_moe_dsa": {"index_head_dim": 128},
    # The hybrids' classes default num_key_value_heads to 8 (JambaConfig, FalconH1Config,
    # NemotronHConfig, Lfm2Config, Lfm2MoeConfig, MiniMaxConfig), not to the head count, and
    # NemotronHConfig head_dim to 128 (vLLM nemotron_h.py reads config.head_dim)
    "jamba": {"attn_layer_period": 8, "attn_layer_offset": 4, "mamba_d_state": 16,
              "mamba_d_conv": 4, "mamba_expand": 2, "num_key_value_heads": 8},
    "minimax": {"num_key_value_heads": 8},
    # FalconConfig: multi_query defaults to True (Falcon-7B's single KV head).
    "falcon": {"multi_query": True, "max_position_embeddings": 2048},
    # The recurrent mixers' sizes below are their classes' defaults, which the config object
    # vLLM builds fills in and its model file then reads (vLLM 0.33.0 granitemoehybrid.py
    # mamba_expand x hidden_size, falcon_h1.py, nemotron_h.py, mamba.py, mamba2.py,
    # lfm2.py conv_L_cache, olmo_hybrid.py). FalconH1Config: mamba_d_ssm is 1,024 when absent
    # (only an explicit null means mamba_expand x hidden_size); mamba_d_head "auto" is the
    # inner size over mamba_n_heads (its __post_init__), as GraniteMoeHybridConfig's.
    "falcon_h1": {"mamba_d_ssm": 1024, "mamba_n_heads": 128, "mamba_d_head": "auto",
                  "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_conv": 4,
                  "mamba_expand": 2, "num_key_value_heads": 8},
    "granitemoehybrid": {"mamba_n_heads": 128, "mamba_d_head": "auto", "mamba_n_groups": 1,
                         "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2},
    # NemotronHConfig: n_groups and conv_kernel also arrive as mamba_n_groups / mamba_d_conv
    # (its __post_init__ renames them), so those two stay required here: a default could
    # shadow the renamed value
    "nemotron_h": {"ssm_state_size": 128, "mamba_num_heads": 128, "mamba_head_dim": 64,
                   "num_key_value_heads": 8, "head_dim": 128},
    **dict.fromkeys(("mamba", "falcon_mamba"), {"state_size": 16, "conv_kernel": 4,
                                                "expand": 2}),
    "mamba2": {"num_heads": 128, "head_dim": 64, "state_size": 128, "conv_kernel": 4,
               "n_groups": 8, "expand": 2},
    **dict.fromkeys(("lfm2", "lfm2_moe"), {"conv_L_cache": 3, "num_key_value_heads": 8}),
    "olmo_hybrid": {"linear_conv_kernel_dim": 4},
    "zamba2": {"mamba_d_state": 64, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_ngroups": 1,
               "n_mamba_heads": 8},
    # Ernie4_5_MoeConfig: its expert layout's defaults (vLLM ernie45_moe.py reads the
    # attributes the class sets); moe_layer_end_index -1 is the last layer. The expert
    # count and width stay required (_moe_layout, shapes)
    "ernie4_5_moe": {"moe_layer_start_index": 1, "moe_layer_end_index": -1,
                     "moe_layer_interval": 1, "moe_num_shared_experts": 2, "moe_k": 6},
}

# Gemma 4's text model, and DiffusionGemma's (vLLM diffusion_gemma.py runs a Gemma4Model
# backbone; its arch config convertor is Gemma 4's)
_GEMMA4_TEXT = {"gemma4_text", "diffusion_gemma_text"}

# DiffusionGemma's text model is a Gemma4TextConfig (its defaults too)
_ARCH_DEFAULTS["diffusion_gemma_text"] = _ARCH_DEFAULTS["gemma4_text"]

# The class each model type's defaults come from, named where a value is used
# (ModelSpec.class_defaults). Checked against transformers 5.19.0, the release in vLLM
# 0.33.0's supported range (5.16.1 to 5.20); where the class computes a value in
# __post_init__ (Qwen3-Next's layer_types every 4th, Gemma 4's global_head_dim, Mllama's
# cross_attention_layers) the number is the one it computes.
_DEFAULTS_CLASS = {
    "llama": "LlamaConfig", "mistral": "MistralConfig", "qwen2": "Qwen2Config",
    "qwen3": "Qwen3Config", "qwen2_moe": "Qwen2MoeConfig", "qwen3_moe": "Qwen3MoeConfig",
    "qwen2_vl_text": "Qwen2VLTextConfig", "qwen2_5_vl_text": "Qwen2_5_VLTextConfig",
    "qwen3_vl_text": "Qwen3VLTextConfig", "qwen3_vl_moe_text": "Qwen3VLMoeTextConfig",
    "qwen3_next": "Qwen3NextConfig", "qwen3_5_text": "Qwen3_5TextConfig",
    "qwen3_5_moe_text": "Qwen3_5MoeTextConfig", "gemma": "GemmaConfig",
    "gemma2": "Gemma2Config", "gemma3_text": "Gemma3TextConfig",
    "gemma3n_text": "Gemma3nTextConfig", "gemma4_text": "Gemma4TextConfig",
    "diffusion_gemma_text": "DiffusionGemmaTextConfig", "llama4_text": "Llama4TextConfig",
    "mllama_text_model": "MllamaTextConfig", "cohere2": "Cohere2Config", "phi3": "Phi3Config",
    "deepseek_v3": "DeepseekV3Config", "deepseek_v32": "DeepseekV32Config",
    "glm_moe_dsa": "GlmMoeDsaConfig", "jamba": "JambaConfig", "falcon": "FalconConfig",
    "falcon_h1": "FalconH1Config", "ernie4_5_moe": "Ernie4_5_MoeConfig",
    "granitemoehybrid": "GraniteMoeHybridConfig", "nemotron_h": "NemotronHConfig",
    "mamba": "MambaConfig", "falcon_mamba": "FalconMambaConfig", "mamba2": "Mamba2Config",
    "lfm2": "Lfm2Config", "lfm2_moe": "Lfm2MoeConfig", "olmo_hybrid": "OlmoHybridConfig",
    "zamba2": "Zamba2Config", "minimax": "MiniMaxConfig",
}
_DEFAULTS_RELEASE = "transformers 5.19.0"

# The text model type a wrapper's nested text_config has when it does not say
# (transformers `sub_configs` / `SubConfigSpec(model_type=...)`).
_TEXT_CONFIG_TYPES = {
    "gemma3": "gemma3_text", "gemma3n": "gemma3n_text", "gemma4": "gemma4_text",
    "diffusion_gemma": "diffusion_gemma_text",
    "llama4": "llama4_text", "mllama": "mllama_text_model",
    "llava": "llama", "llava_next": "llama", "llava_next_video": "llama", "vipllava": "llama",
    "idefics3": "llama", "llava_onevision": "qwen2", "internvl": "qwen2",
    "mistral3": "mistral", "aya_vision": "cohere2", "kimi_k25": "deepseek_v3",
    "qwen2_vl": "qwen2_vl_text", "qwen2_5_vl": "qwen2_5_vl_text", "qwen3_vl": "qwen3_vl_text",
    "qwen3_vl_moe": "qwen3_vl_moe_text", "qwen3_5": "qwen3_5_text",
    "qwen3_5_moe": "qwen3_5_moe_text", "exaone4_5": "exaone4",
}
# Where wrappers nest the language model: transformers' `text_config`; InternVL's remote code
# `llm_config`; DeepSeek-VL2 `language_config`; the Omni and ASR models (Qwen2.5-Omni,
# Qwen3-Omni, Qwen3-ASR) `thinker_config`, whose own `text_config` holds it (transformers
# PretrainedConfig.get_text_config, which vLLM's get_hf_text_config calls).
_TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config", "thinker_config")
# Model types whose attention is MLA (a kv_lora_rank latent), so a null rank is an error.
_MLA_TYPES = {"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "glm_moe_dsa"}

# Architectures whose layers hold two caches at once (attention *and* a recurrent state):
# one kind per layer cannot express them, so they are refused rather than half-counted.
_UNSUPPORTED_TYPES = {t: hfarch.REFUSED[t] for t in ("zamba",)}
# model_type spellings of a family kvplan reads under its own name: sgl-project's DeepSeek-V4
# uploads (DeepSeek-V4-Flash-FP8, architectures DeepseekV4ForCausalLM) write "deepseek_ref"
_SAME_FAMILY = {"deepseek_ref": "deepseek_v4"}

# Layer-type names (transformers `layer_types`, legacy names remapped as
# configuration_utils._LEGACY_LAYER_TYPE_REMAP does) -> this reader's kinds.
_LAYER_TYPE_KINDS = {
    "full_attention": "full", "attention": "full", "global": "full",
    "global_attention": "full", "full": "full",
    "sliding_attention": "sliding", "sliding_window": "sliding", "local": "sliding",
    "local_attention": "sliding", "sliding": "sliding",
    "chunked_attention": "chunked",
    # DeepSeek sparse attention (DSA): an MLA layer with an indexer (DeepSeek-V3.2, GLM-5).
    "indexed_attention": "indexed", "deepseek_sparse_attention": "indexed",
    # HY V4 (vllm/models/hy_v4 _SPARSE_LAYER_TYPES)
    "sparse_attention": "indexed", "sparse": "indexed",
    # A recurrent mixer; which one (Mamba, Mamba2, gated delta-net, lightning) the model's
    # own fields say (`_Reader.recurrent`).
    "linear_attention": "recurrent", "mamba": "recurrent", "mamba2": "recurrent",
    "conv": "conv",
    # Nemotron-H's MLP / MoE-only layers (`layers_block_type`): no cache.
    "mlp": "none", "moe": "none",
}

# Layer schedules implied by the model type when a config has no `layer_types` (the
# transformers config classes build them in __post_init__): layer i is full when
# (i + 1) % pattern == 0 and sliding otherwise, provided a window is set.
_IMPLICIT_SLIDING_PATTERN = {
    "gemma2": 2,        # Gemma 2: even layers local, odd layers global (2024 configs)
    "gpt_oss": 2,       # gpt-oss: alternating, starting with sliding
    "gemma3_text": 6,   # Gemma 3: 5 local then 1 global (`sliding_window_pattern` default 6)
    "gemma3": 6,
    "gemma3n_text": 5,  # Gemma 3n: 4 local then 1 global
    "gemma4_text": 6,   # Gemma 4: 5 local then 1 global (and the last layer global)
    "diffusion_gemma_text": 6,  # DiffusionGemma: a Gemma 4 backbone
    "cohere2": 4,       # Command R7B: 3 local then 1 global
    "exaone4": 4,
    "exaone4_5_text": 4,  # EXAONE-4.5's text model: an Exaone4Config
    "olmo3": 4,
    # AFMoE (Trinity): AfmoeConfig builds layer_types from global_attn_every_n_layers
    # (_PATTERN_FIELDS), sliding unless (i + 1) % n == 0 (vLLM transformers_utils/configs/
    # afmoe.py, transformers configuration_afmoe.py); vLLM afmoe.py gives the sliding layers
    # sliding_window
    "afmoe": 4,
}

# Where a model type keeps its implicit pattern's period under its own name.
_PATTERN_FIELDS = {"afmoe": "global_attn_every_n_layers"}

# Model types whose sliding layers attend to sliding_window + 1 tokens ([pos - W, pos], the
# training convention), so the engine's window is one more than the config's: vLLM 0.33.0
# commandr.py CohereAttention and cohere2_moe.py both pass config.sliding_window + 1.
_WINDOW_SEES_ONE_MORE = {"cohere2", "cohere2_moe"}

# Fields of recurrent or otherwise unusual caches: a config that has one but none of the
# schedules above is a layer mix this reader does not know.
_STATE_MARKERS = ("mamba_d_state", "ssm_state_size", "mamba_n_heads", "mamba_num_heads",
                  "mamba_d_ssm", "n_mamba_heads", "linear_num_value_heads",
                  "linear_num_key_heads", "linear_attn_config", "block_types",
                  "attention_window_size")

_STATE_DTYPE_KEYS = ("mamba_ssm_cache_dtype", "mamba_ssm_dtype")


def load_config_file(path: Path, assume_standard_attention: bool = False) -> ModelSpec:
    """Read a local config.json (or a directory holding one)."""
    if path.is_dir():
        path = path / "config.json"
    source = str(path)
    data = read_bytes(source)
    raw = parse_json(data, source)
    sidecar = path.parent / "hf_quant_config.json"
    if (path.name == "config.json" and isinstance(raw, dict)
            and find_quantization_config(raw) is None and sidecar.is_file()):
        # ModelOpt up to 0.29 wrote the quantization to hf_quant_config.json beside
        # config.json (NVIDIA's early FP8 / NVFP4 uploads); vLLM's get_quantization_config
        # (transformers_utils/config.py) reads that file when config.json states none
        found = find_quantization_config(parse_json(read_bytes(str(sidecar)), str(sidecar)))
        if found is not None:  # its "quantization" block (kvplan.sources.quant)
            raw = {**raw, "quantization_config": found[0]}
    # a bare `config.json` names the folder it sits in (its relative parent is ".", no name)
    name = path.absolute().parent.name if path.name == "config.json" else path.stem
    return spec_from_config(raw, source, name=name.lower(), source_info=Source(
        file=source, sha256=hashlib.sha256(data).hexdigest()),
        assume_standard_attention=assume_standard_attention)


def spec_from_config(raw: Any, source: str, name: str, source_info: Source | None = None,
                     assume_standard_attention: bool = False) -> ModelSpec:
    """The spec of a config.json (see `_spec_from_config`), with the classes its
    `architectures` names: an engine refuses a release that does not serve them."""
    spec = _spec_from_config(raw, source, name, source_info, assume_standard_attention)
    archs = raw.get("architectures") if isinstance(raw, Mapping) else None
    if isinstance(archs, list) and archs and all(isinstance(a, str) for a in archs):
        spec = replace(spec, architectures=tuple(archs))
    return spec


def _spec_from_config(raw: Any, source: str, name: str, source_info: Source | None = None,
                      assume_standard_attention: bool = False) -> ModelSpec:
    """`assume_standard_attention`: size an architecture kvplan has no reader for, or one
    carrying a cache-deciding key it does not model, as plain attention (with warnings)
    instead of refusing it (kvplan.sources.hfarch)."""
    top = Fields(raw, source)
    if top.raw.get("model_type") == "whisper":
        return _whisper_spec(top, name, source_info, assume_standard_attention)
    archs = top.raw.get("architectures")
    parse = next((a for a in archs if a in _PARSE_ARCHITECTURES), None) \
        if isinstance(archs, list) else None
    if parse is not None:
        return _parse_spec(top, parse, name, source_info, assume_standard_attention)
    if top.bool("is_encoder_decoder", False):
        model_type = top.raw.get("model_type")
        raise top.error("is_encoder_decoder", f"is true ({model_type!r}): the decoder's "
                        "cross-attention cache is as long as the encoder's input, which this "
                        "config.json does not fix (kvplan reads Whisper, whose encoder length "
                        "is max_source_positions, and Nemotron Parse, whose image_size "
                        "fixes it)",
                        "write the decoder as a YAML spec with its cross-attention layers "
                        "and encoder_tokens (docs/model-schema.md)")
    cfg = _text_config(top)
    warnings = _check_architecture(top, cfg, assume_standard_attention)
    reader = _Reader(top, cfg, generic=bool(warnings))
    layers = reader.layers()
    has_attention = any(not isinstance(layer, (RecurrentState, NoCache)) for layer in layers)
    found = shapes(reader)
    quant = quantization_from_config(raw, source, reader.dtype)
    if quant.method == "mlx":  # a format no engine loads: printed with every result
        warnings.extend(quant.warnings)
    if reader.model_type == "deepseek_v4":
        quant, found["expert_quantization"], assumed = deepseek_v4_formats(
            quant, cfg.raw.get("expert_dtype"), source)
        if assumed:  # printed with every result, as the reader's other assumptions are
            warnings.append(assumed)
    return with_family_facts(ModelSpec(
        name=name,
        layers=tuple(layers),
        source=source_info or Source(file=source),
        family=reader.model_type or "unknown",
        dtype=reader.dtype,
        max_context_tokens=reader.max_context(),
        num_attention_heads=reader.heads if has_attention else None,
        quantization=quant,
        warnings=tuple(warnings),
        class_defaults=cfg.filled,
        **found,
    ), cfg.raw)


def _whisper_spec(top: Fields, name: str, source_info: Source | None, assume: bool
                  ) -> ModelSpec:
    """Whisper: each decoder layer caches its self-attention K/V (up to max_target_positions
    tokens) and the cross-attention K/V of the encoder's output, max_source_positions (1,500)
    frames whatever the text length (vLLM whisper.py: an Attention and a CrossAttention per
    decoder layer; CrossAttentionSpec sized by max_num_encoder_input_tokens, "1500 for
    Whisper"). Multi-head: as many K/V heads as decoder_attention_heads."""
    warnings = hfarch.check(top.raw, "whisper", [], top.source, "", assume)
    n = _num(top, "decoder_layers")
    heads = _num(top, "decoder_attention_heads")
    d_model = _num(top, "d_model")
    if d_model % heads:
        raise top.error("d_model", f"is {d_model}, which the {heads} decoder heads do not "
                        "divide")
    encoder_tokens = _num(top, "max_source_positions", 1500)
    self_attention = FullAttention(heads, d_model // heads)
    cross = CrossAttention(heads, d_model // heads, encoder_tokens=encoder_tokens)
    dtype = next((_DTYPES[v] for v in (top.raw.get("torch_dtype"), top.raw.get("dtype"))
                  if isinstance(v, str) and v in _DTYPES), "bf16")
    # the weights' shapes (WhisperConfig: ffn dims default 1536, 80 mel bins; tied head)
    encoder = None
    ffn = _opt_int(top, "decoder_ffn_dim", minimum=1) or 1536
    enc = [_opt_int(top, k, minimum=1) for k in ("encoder_layers", "encoder_ffn_dim",
                                                 "num_mel_bins")]
    if None not in enc and enc[0] and enc[1] and enc[2]:
        encoder = AudioEncoder("whisper", enc[0], enc[1], enc[2], encoder_tokens)
    return with_family_facts(ModelSpec(
        name=name,
        layers=tuple(layer for _ in range(n) for layer in (self_attention, cross)),
        source=source_info or Source(file=top.source),
        family="whisper",
        dtype=dtype,
        max_context_tokens=_num(top, "max_target_positions", 448),
        num_attention_heads=heads,
        warnings=tuple(warnings),
        hidden_size=d_model,
        vocab_size=_opt_int(top, "vocab_size", minimum=1),
        intermediate_size=ffn,
        tie_word_embeddings=top.raw.get("tie_word_embeddings", True) is not False,
        attention_bias=True,
        audio_encoder=encoder,
    ))


# Nemotron Parse: a RADIO vision encoder and an mBART decoder under "encoder" / "decoder".
_PARSE_ARCHITECTURES = ("NemotronParseForConditionalGeneration", "RadioMBartPrefixForCausalLM")


def _parse_spec(top: Fields, arch: str, name: str, source_info: Source | None, assume: bool
                ) -> ModelSpec:
    """Nemotron Parse's mBART decoder (config.decoder: d_model, decoder_layers,
    decoder_attention_heads), head_dim = d_model / decoder_attention_heads.

    NemotronParseForConditionalGeneration (vLLM nemotron_parse.py MBartDecoderNoPos): per
    decoder layer a WhisperAttention (decoder self-attention) and a WhisperCrossAttention
    (CrossAttentionSpec), both multi-head, the cross one over the image's encoder tokens,
    which the config fixes: get_num_image_tokens = (H // p) * ((W // p) // 4) + 1 for
    image_size (H, W) and encoder.patch_size p.

    RadioMBartPrefixForCausalLM (vLLM nemotron_parse3_5.py): the image tokens are a causal
    prefix of the decoder's own sequence and add_cross_attention must be false, so each
    layer keeps one self-attention cache (NemotronParseSelfAttention) of
    decoder.self_attention_kv_heads K/V heads (all heads when unset)."""
    warnings = hfarch.check(top.raw, str(top.raw.get("model_type") or ""), [arch],
                            top.source, "", assume)
    if not isinstance(top.raw.get("decoder"), Mapping):
        raise top.error("decoder", "must be the mBART decoder's config (a mapping)")
    dec = Fields(top.raw["decoder"], top.source, "decoder")
    warnings += hfarch.check(dec.raw, str(dec.raw.get("model_type") or ""), [arch],
                             top.source, "decoder", assume)
    n = _num(dec, "decoder_layers")
    heads = _num(dec, "decoder_attention_heads")
    d_model = _num(dec, "d_model")
    if d_model % heads:
        raise dec.error("d_model", f"is {d_model}, which the {heads} decoder heads do not "
                        "divide")
    head_dim = d_model // heads
    layers: list[Layer]
    if arch == "RadioMBartPrefixForCausalLM":
        if dec.raw.get("add_cross_attention", True) is not False:
            raise dec.error("add_cross_attention", "must be false: vLLM's Parse 3.5 "
                            "decoder (nemotron_parse3_5.py) has no cross-attention")
        kv_heads = _opt_int(dec, "self_attention_kv_heads", minimum=1) or heads
        if heads % kv_heads:
            raise dec.error("self_attention_kv_heads", f"is {kv_heads}, which does not "
                            f"divide the {heads} decoder heads")
        layers = [FullAttention(kv_heads, head_dim)] * n
    else:
        size = top.raw.get("image_size")
        if not (isinstance(size, list) and len(size) == 2
                and all(type(v) is int and v > 0 for v in size)):
            raise top.error("image_size", "must be [height, width] in pixels (it fixes the "
                            "encoder's token count, vLLM nemotron_parse.py)")
        if not isinstance(top.raw.get("encoder"), Mapping):
            raise top.error("encoder", "must be the vision encoder's config (a mapping)")
        patch = _num(Fields(top.raw["encoder"], top.source, "encoder"), "patch_size")
        encoder_tokens = (size[0] // patch) * ((size[1] // patch) // 4) + 1
        self_attention = FullAttention(heads, head_dim)
        cross = CrossAttention(heads, head_dim, encoder_tokens=encoder_tokens)
        layers = [layer for _ in range(n) for layer in (self_attention, cross)]
    dtype = next((_DTYPES[v] for v in (top.raw.get("torch_dtype"), top.raw.get("dtype"),
                                       dec.raw.get("torch_dtype"))
                  if isinstance(v, str) and v in _DTYPES), "bf16")
    # the weights (kvplan.core.weights mbart): the decoder's FFN is config.decoder's
    # encoder_ffn_dim in nemotron_parse.py BartDecoderLayer, decoder_ffn_dim in
    # nemotron_parse3_5.py; the LM head is tied when either config says so
    ffn = _opt_int(dec, "decoder_ffn_dim" if arch == "RadioMBartPrefixForCausalLM"
                   else "encoder_ffn_dim", minimum=1)
    tied = any(f.get("tie_word_embeddings") is True for f in (top.raw, dec.raw))
    return with_family_facts(ModelSpec(
        name=name,
        layers=tuple(layers),
        source=source_info or Source(file=top.source),
        family=("nemotron_parse3_5" if arch == "RadioMBartPrefixForCausalLM"
                else "nemotron_parse"),
        dtype=dtype,
        max_context_tokens=_opt_int(dec, "max_position_embeddings", minimum=1),
        num_attention_heads=heads,
        warnings=tuple(warnings),
        hidden_size=d_model,
        vocab_size=_opt_int(dec, "vocab_size", minimum=1),
        intermediate_size=ffn,
        tie_word_embeddings=tied,
        attention_bias=True,
        vision=_radio_tower(top),
    ))


# vLLM transformers_utils/configs/radio.py VIT_TIMM_DIM_BY_NAME: a RADIO encoder's
# (hidden_size, num_hidden_layers, num_attention_heads, intermediate_size) by its timm name
_RADIO_VIT = {
    "vit_small_patch16_224": (384, 12, 6, 1536),
    "vit_base_patch16_224": (768, 12, 12, 3072),
    "vit_large_patch16_224": (1024, 24, 16, 4096),
    "vit_huge_patch16_224": (1280, 32, 16, 5120),
    "vit_so400m_patch16_224": (1152, 27, 16, 4304),
}


def _radio_tower(top: Fields) -> VisionTower | None:
    """Nemotron Parse's RADIO encoder and neck (vLLM nemotron_parse.py /
    nemotron_parse3_5.py RadioWithNeck) from config.encoder: `args` holds RadioConfig's
    arguments (radio.py), the ViT's widths named by args.model. The position table covers
    cpe_max_size (default 2048) in patch_size pixels a side; the class tokens are one per
    distinct teacher (cls_token_per_teacher) or one, padded to register_multiple with
    registers. The neck maps the ViT's width (vision_spatial_dim, 1280 in nemotron_parse.py)
    to the decoder's d_model and the summary (vision_summary_dim, 3840) through sum_proj.
    None when the encoder is not described (a ViT name kvplan does not know, a layout
    option below): the weights are then not estimated."""
    enc = top.raw.get("encoder")
    args: Any = enc.get("args") if isinstance(enc, Mapping) else None
    if not isinstance(args, Mapping) or args.get("model") not in _RADIO_VIT:
        return None
    # RadioConfig's other layouts (no qkv bias, q/k norms, RMSNorms, a video embedder) are
    # not laid out: the weights are then not estimated rather than guessed
    if (args.get("qkv_bias", True) is not True or args.get("qk_normalization", False)
            or args.get("norm_type", "layer_norm") != "layer_norm"
            or args.get("video_temporal_patch_size", 1) != 1):
        return None
    hidden, layers, _, inter = _RADIO_VIT[args["model"]]
    f = Fields(args, top.source, "encoder.args")
    patch = _num(f, "patch_size", 16)  # RadioConfig's default
    cpe = _num(f, "cpe_max_size", 2048)
    teachers: list[Any] = args["teachers"] if isinstance(args.get("teachers"), list) else []
    names = {t.get("name") for t in teachers if isinstance(t, Mapping)}
    cls = len(names) if args.get("cls_token_per_teacher") is True else 1
    multiple = _opt_int(f, "register_multiple", minimum=1)
    tokens = cls + (multiple - cls % multiple if multiple else 0)
    summary = _opt_int(Fields(top.raw, top.source, ""), "vision_summary_dim", minimum=1)
    return VisionTower("radio", hidden, inter, layers, patch, round(cpe / patch) * patch,
                       projector_input_dim=summary or 3840, num_cls_tokens=tokens)


def _check_architecture(top: Fields, cfg: Fields, assume: bool) -> list[str]:
    """The fail-closed table (kvplan.sources.hfarch): refuse an architecture without a
    reader or a cache-deciding key its reader does not model; warnings when assumed."""
    model_type = cfg.raw.get("model_type") or top.raw.get("model_type") or ""
    archs = top.raw.get("architectures")
    archs = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
    if not isinstance(model_type, str):
        return []  # _Reader reports a model_type that is not text
    return hfarch.check(cfg.raw, model_type, archs, cfg.source, cfg.path, assume)


# tie_word_embeddings when a config leaves it out: the default of its transformers config
# class (PretrainedConfig's own default is True; Llama, Mistral, Qwen, DeepSeek, gpt-oss,
# Llama 4 ... set False). LFM2: Lfm2Config defaults it to True, and vLLM lfm2.py /
# lfm2_moe.py tie the LM head to embed_tokens whatever the config says (LFM2.5-VL's
# text_config leaves the key out).
_TIED_DEFAULT = {"gpt2": True, "gemma": True, "gemma2": True, "gemma3_text": True,
                 "gemma3": True, "gemma3n_text": True, "gemma4_text": True,
                 "diffusion_gemma_text": True,
                 "cohere": True, "cohere2": True, "lfm2": True, "lfm2_moe": True,
                 "falcon": True, "RefinedWebModel": True, "RefinedWeb": True,
                 # OPTConfig defaults it to True; vLLM opt.py ties the LM head to embed_tokens
                 "opt": True,
                 # MptConfig defaults it to True; vLLM mpt.py's head is transformer.wte
                 "mpt": True,
                 "llama": False, "mistral": False, "mixtral": False, "qwen2": False,
                 "qwen3": False, "qwen3_moe": False, "qwen2_moe": False, "phi3": False,
                 "llama4_text": False, "deepseek_v2": False, "deepseek_v3": False,
                 "gpt_oss": False, "olmo2": False, "olmo3": False, "chatglm": False,
                 # MiniCPM3-4B's own configuration_minicpm.py (MiniCPM3Config) defaults it
                 # to True and its config.json leaves it out; vLLM minicpm.py ties the LM
                 # head to embed_tokens when it is set
                 "minicpm3": True,
                 # Ernie4_5_MoeConfig defaults it to True; vLLM ernie45_moe.py ties the LM
                 # head to embed_tokens when it is set
                 "ernie4_5_moe": True,
                 # Starcoder2Config defaults it to True; vLLM starcoder2.py ties the LM head
                 # to embed_tokens when it is set (StarCoder 2's configs leave it out)
                 "starcoder2": True}
# Families whose config's intermediate_size is the width of one routed expert and whose
# every layer is MoE (MixtralConfig, GptOssConfig, MiniMaxM2Config, Llama4TextConfig; Llama 4's
# dense layers use intermediate_size_mlp).
_EXPERT_WIDTH_IS_INTERMEDIATE = {"mixtral", "gpt_oss", "minimax_m2", "minimax", "llama4_text",
                                 # MiniMax-Text-01 / MiniMax-M1: MiniMaxText01MoE takes
                                 # intermediate_size=config.intermediate_size (vLLM 0.22
                                 # minimax_text_01.py; SGLang minimax_text_01.py alike)
                                 "minimax_text_01", "minimax_m1",
                                 # GraniteMoe*: intermediate_size is one expert's width, the
                                 # shared MLP shared_intermediate_size (GraniteMoeSharedMLP)
                                 "granitemoe", "granitemoeshared", "granitemoehybrid",
                                 # OLMoE, PhiMoE and MiniCPM's MoE models: vLLM olmoe.py
                                 # OlmoeMoE, phimoe.py PhiMoE and minicpm.py MiniCPMMoE take
                                 # intermediate_size=config.intermediate_size (MiniCPM: when
                                 # num_experts is set, else MiniCPMMLP of that width)
                                 "olmoe", "phimoe", "minicpm"}
# Families whose MLP width defaults to 4 x hidden when the config leaves it out or null
# (GPT2Config n_inner, FalconConfig ffn_hidden_size).
_FOUR_X_HIDDEN = {"gpt2", "falcon", "RefinedWebModel", "RefinedWeb",
                  # CodeGenBlock: inner_dim = n_inner or 4 * n_embd (modeling_codegen.py)
                  "codegen"}


# Step3 / Step-3.5's MoE (vLLM step3_text.py, step3p5.py): moe_num_experts, moe_top_k,
# share_expert_dim
_STEP_MOE = {"step3_text", "step3p5", "step3p7"}
# ERNIE 4.5's MoE model (vLLM ernie45_moe.py): moe_num_experts, moe_k, moe_num_shared_experts
# and its own layer keys (_moe_layout)
_ERNIE_MOE = {"ernie4_5_moe"}
# The keys read as a routed-expert count, and as the experts a token uses, for every family;
# then the ones read only for the families above. A config holding any of them whose experts
# were not read is not weighed as a dense model (shapes, _unread_experts)
_COMMON_EXPERT_COUNT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts")
_COMMON_EXPERTS_PER_TOKEN_KEYS = ("num_experts_per_tok", "experts_per_token",
                                  "num_experts_per_token", "top_k_experts", "moe_topk")
_EXPERT_COUNT_KEYS = (*_COMMON_EXPERT_COUNT_KEYS, "moe_num_experts")
_EXPERTS_PER_TOKEN_KEYS = (*_COMMON_EXPERTS_PER_TOKEN_KEYS, "moe_top_k", "moe_k")
# Families whose q/k/v projections carry biases (o_proj none) without a config field:
# Qwen2Attention, and the Qwen2-VL / Qwen2.5-VL text models built on it
_QKV_BIAS = {"qwen2", "qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text",
             # Qwen2.5-Omni's thinker: a Qwen2ForCausalLM (vLLM qwen2_5_omni_thinker.py)
             "qwen2_5_omni", "qwen2_5_omni_thinker", "qwen2_5_omni_text",
             # Qwen2MoeAttention (vLLM qwen2_moe.py): qkv_proj bias=True, o_proj bias=False
             "qwen2_moe"}


def _lfm2_ff_width(cfg: Fields, inter: int) -> int:
    """LFM2's MLP width (vLLM lfm2.py Lfm2MLP): with block_auto_adjust_ff_dim, 2/3 of
    intermediate_size, times block_ffn_dim_multiplier, rounded up to block_multiple_of."""
    if cfg.raw.get("block_auto_adjust_ff_dim") is not True:
        return inter
    width = int(2 * inter / 3)
    mult = cfg.raw.get("block_ffn_dim_multiplier")
    if finite_number(mult) and not isinstance(mult, bool) and 0 < mult < MAX_SHAPE:
        width = int(mult * width)
    step = _opt_int(cfg, "block_multiple_of", minimum=1) or 1
    return step * -(-width // step)


def _opt_int(cfg: Fields, *names: str, minimum: int = 0) -> int | None:
    """The first of `names` that holds a whole number >= minimum; None when none does (a
    shape this reader cannot use is unknown, never guessed). A per-layer list whose entries
    are all one number is that number (Hunyuan-A13B's moe_intermediate_size, moe_topk and
    num_shared_expert list one value per layer)."""
    for name in names:
        value = cfg.raw.get(name)
        if isinstance(value, list) and value and all(v == value[0] for v in value):
            value = value[0]
        if isinstance(value, bool) or not isinstance(value, int):
            continue
        if minimum <= value <= MAX_SHAPE:
            return value
    return None


# Gemma3TextConfig's rope_local_base_freq defaults to 10,000 (its sliding layers' own rope)
_LOCAL_ROPE_DEFAULT = {"gemma3", "gemma3_text"}


def _rope(cfg: Fields, model_type: str | None) -> Rope | None:
    """ModelSpec.rope from `rope_scaling` (or transformers 5's `rope_parameters`, per layer
    type where it is split: the full-attention entry; a sliding entry means a local rope);
    None for an unscaled rope shared by every layer. Values of the wrong type are ignored
    (the rotary caches then count as unscaled), never raised on."""
    raw = cfg.raw.get("rope_scaling")
    params = cfg.raw.get("rope_parameters")
    local = cfg.has("rope_local_base_freq") or model_type in _LOCAL_ROPE_DEFAULT
    if isinstance(params, dict) and isinstance(params.get("full_attention"), dict):
        raw = params["full_attention"]
        local = local or isinstance(params.get("sliding_attention"), dict)
    elif not isinstance(raw, dict) and isinstance(params, dict):
        raw = params
    kind, factor, original, mrope = "default", 1.0, None, False
    if isinstance(raw, dict):
        value = raw.get("rope_type", raw.get("type"))
        kind = value if isinstance(value, str) and len(value) <= 64 else kind
        # vLLM's get_rope (rotary_embedding/__init__.py) builds MRotaryEmbedding wherever
        # `mrope_section` is present; Qwen2-VL's "type": "mrope" is "default" with it
        # (transformers' rope_config_validation and vLLM's patch_rope_scaling rename it)
        mrope = "mrope_section" in raw or kind == "mrope"
        kind = "default" if kind == "mrope" else kind
        value = raw.get("factor")
        if finite_number(value) and 0 < value <= MAX_ROPE_FACTOR:
            factor = float(value)
        original = _opt_int(Fields(raw, cfg.source), "original_max_position_embeddings",
                            minimum=1)
    partial = (raw.get("partial_rotary_factor") if isinstance(raw, dict) else None) \
        or cfg.raw.get("partial_rotary_factor")
    partial = float(partial) if finite_number(partial) and 0 < partial < 1 else 1.0
    if original is None:
        original = _opt_int(cfg, "original_max_position_embeddings", minimum=1)
    if original is not None and original > MAX_ROPE_ORIGINAL_POSITIONS:
        original = None
    if kind == "default" and factor == 1.0 and not local and not mrope and partial == 1.0:
        return None
    return Rope(kind, factor, original, local, mrope, partial)


def shapes(reader: _Reader) -> dict[str, Any]:
    """The shapes beyond the KV cache (ModelSpec.hidden_size ... num_nextn_predict_layers),
    each None when the config does not give it."""
    cfg, top, mt = reader.cfg, reader.top, reader.model_type
    out: dict[str, Any] = {}
    out["hidden_size"] = _opt_int(cfg, "hidden_size", "n_embd", "d_model", minimum=1)
    out["vocab_size"] = _opt_int(cfg, "vocab_size", "padded_vocab_size", minimum=1) or \
        _opt_int(top, "vocab_size", minimum=1)
    tied = cfg.raw.get("tie_word_embeddings", top.raw.get("tie_word_embeddings"))
    out["tie_word_embeddings"] = tied if isinstance(tied, bool) else _TIED_DEFAULT.get(mt)
    inter = _opt_int(cfg, "intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size",
                     minimum=1)
    if inter is None and mt in _FOUR_X_HIDDEN and out["hidden_size"]:
        inter = 4 * out["hidden_size"]
    if inter is None and mt == "mpt" and out["hidden_size"]:
        # MPT's MLP (vLLM mpt.py MPTMLP): expansion_ratio x d_model (MptConfig: 4)
        ratio = cfg.raw.get("expansion_ratio", 4)
        if type(ratio) is int and 0 < ratio <= 64:
            inter = ratio * out["hidden_size"]
    if mt in ("mamba", "falcon_mamba", "mamba2"):
        inter = None  # the mixer's own width: a Mamba block has no MLP
    elif mt in ("lfm2", "lfm2_moe") and inter:
        inter = _lfm2_ff_width(cfg, inter)
    # Step3 / Step-3.5 (vLLM step3_text.py, step3p5.py): moe_num_experts, moe_top_k and
    # share_expert_dim; ERNIE 4.5 (vLLM ernie45_moe.py Ernie4_5_MoeMoE): moe_num_experts,
    # moe_k and moe_num_shared_experts. Each family's own names are read for it only
    step, ernie = mt in _STEP_MOE, mt in _ERNIE_MOE
    experts = _opt_int(cfg, *_COMMON_EXPERT_COUNT_KEYS,
                       *(("moe_num_experts",) if step or ernie else ()), minimum=1)
    if ernie and cfg.raw.get("use_moe") is False:
        experts = None  # Ernie4_5_MoeDecoderLayer: use_moe false builds no MoE layer
    if mt == "granitemoehybrid" and experts is None and cfg.has("shared_intermediate_size"):
        # vLLM granitemoehybrid.py: with num_local_experts 0 a layer's only MLP is
        # GraniteMoeSharedMLP, shared_intermediate_size wide (none at all when that is 0,
        # which leaves the width unknown here and the weights refused by name)
        inter = _opt_int(cfg, "shared_intermediate_size", minimum=1)
    out["num_experts"] = experts
    if experts:
        out["num_experts_per_token"] = _opt_int(
            cfg, *_COMMON_EXPERTS_PER_TOKEN_KEYS,
            *(("moe_top_k",) if step else ("moe_k",) if ernie else ()), minimum=1)
        if mt in _EXPERT_WIDTH_IS_INTERMEDIATE:
            out["moe_intermediate_size"] = _opt_int(cfg, "moe_intermediate_size", minimum=1) \
                or inter
            inter = _opt_int(cfg, "intermediate_size_mlp", minimum=1)
        elif mt == "jamba":  # JambaSparseMoeBlock experts as wide as the dense MLP
            out["moe_intermediate_size"] = inter
        else:  # LongCat-Flash: expert_ffn_hidden_size
            out["moe_intermediate_size"] = _opt_int(cfg, "moe_intermediate_size",
                                                    "expert_ffn_hidden_size", minimum=1)
        shared = _opt_int(cfg, "n_shared_experts", "num_shared_experts", "num_shared_expert",
                          *(("moe_num_shared_experts",) if ernie else ()), minimum=0)
        shared_width = _opt_int(cfg, "shared_expert_intermediate_size",
                                "moe_shared_expert_intermediate_size",
                                "shared_intermediate_size",
                                *(("share_expert_dim",) if step else ()), minimum=0)
        if mt == "llama4_text":  # Llama4TextMoe: one shared expert as wide as a routed one
            shared, shared_width = 1, out["moe_intermediate_size"]
        if shared_width is not None and shared is None:
            shared = 1 if shared_width else 0
        if shared and shared_width is None and out["moe_intermediate_size"]:
            # DeepseekV3MoE: the shared experts are one MLP n_shared_experts x wider (ERNIE
            # 4.5's Ernie4_5_MoeMoE alike: moe_intermediate_size x moe_num_shared_experts)
            shared_width = shared * out["moe_intermediate_size"]
        out["num_shared_experts"] = shared
        out["shared_expert_intermediate_size"] = shared_width
        out["first_dense_layers"], out["moe_layer_step"] = _moe_layout(cfg, reader)
        # LongcatRouter (vLLM longcat_flash.py), Glm4MoE (glm4_moe.py, GLM-4.5 / 4.6 and
        # GLM-4.5V's text model) and KimiMoE (kimi_linear.py: Kimi-Linear's config has no
        # topk_method, yet its checkpoint stores a gate.e_score_correction_bias per MoE
        # layer) always keep e_score_correction_bias; AFMoE's sparse block its expert_bias
        # (transformers modeling_afmoe.py AfmoeSparseMoeBlock)
        # ERNIE 4.5's Ernie4_5_MoeMoE gate.e_score_correction_bias, one per MoE layer
        # whatever the config says (the checkpoint's moe_statics)
        out["routing_bias"] = (cfg.raw.get("topk_method") == "noaux_tc"
                               or cfg.raw.get("use_routing_bias") is True
                               or reader.layers_are_dual_mla
                               or mt in ("glm4_moe", "glm4v_moe_text", "kimi_linear",
                                         "afmoe", *_ERNIE_MOE))
    else:
        out.update(_unread_experts(cfg))
    out["intermediate_size"] = inter
    if reader.mla:
        out["q_lora_rank"] = _opt_int(cfg, "q_lora_rank", minimum=1)
        out["qk_nope_head_dim"] = _opt_int(cfg, "qk_nope_head_dim", minimum=0)
        out["mla_v_head_dim"] = _opt_int(cfg, "v_head_dim", minimum=1)
        if out["mla_v_head_dim"] is None and mt == "minicpm3":
            # MiniCPM3Config (the checkpoint's configuration_minicpm.py): v_head_dim None
            # means qk_nope_head_dim; vLLM minicpm3.py passes config.v_head_dim to kv_b_proj
            # and o_proj
            out["mla_v_head_dim"] = out["qk_nope_head_dim"]
        if cfg.has("index_topk"):
            out["index_n_heads"] = _opt_int(cfg, "index_n_heads", minimum=1)
    # StarCoder 2 (vLLM starcoder2.py Starcoder2Attention): q/k/v/o biases follow use_bias
    bias = cfg.raw.get("attention_bias", cfg.raw.get("bias",
                       cfg.raw.get("use_bias", True) if mt == "starcoder2" else None))
    if isinstance(bias, bool):
        out["attention_bias"] = bias
    elif mt in _QKV_BIAS:  # Qwen2Attention: q/k/v carry biases, o does not; no config field
        out["attention_bias"] = True
    mtp = _opt_int(cfg, "num_nextn_predict_layers")
    if mtp is None and mt == "qwen3_next":
        # vLLM qwen3_next_mtp.py Qwen3NextMultiTokenPredictor: getattr(config,
        # "num_nextn_predict_layers", 1). Qwen3-Next's config.json has no such key, while its
        # checkpoint stores that one MTP layer (mtp.*)
        mtp = 1
    out["num_nextn_predict_layers"] = mtp
    out["rope"] = _rope(cfg, mt)
    if mt == "step3_text" and cfg.has("share_q_dim"):
        # Step3's MFA (vLLM step3_text.py Step3TextAttention): the query through a
        # share_q_dim-wide low rank (in the fused qkv_proj), inter_norm, then wq to the heads
        out["q_lora_rank"] = _opt_int(cfg, "share_q_dim", minimum=1)
    if mt == "deepseek_v4":
        # DeepSeek-V4: low-rank queries, a grouped low-rank output, hyper-connections, hash
        # routing on the first layers, the experts' own format (expert_dtype)
        out["q_lora_rank"] = _opt_int(cfg, "q_lora_rank", minimum=1)
        out["index_n_heads"] = _opt_int(cfg, "index_n_heads", minimum=1)
        out["hyper_connections"] = _opt_int(cfg, "hc_mult", minimum=1)
        out["o_groups"] = _opt_int(cfg, "o_groups", minimum=1)
        out["o_lora_rank"] = _opt_int(cfg, "o_lora_rank", minimum=1)
        out["num_hash_layers"] = _opt_int(cfg, "num_hash_layers")
        out["expert_quantization"] = None  # with quantization_config: deepseek_v4_formats
    if mt == "nemotron_h" and experts:
        out["routing_bias"] = True  # NemotronHTopkRouter (DeepseekV3TopkRouter): always one
    out["ssm"] = _ssm_shapes(cfg, mt, out["hidden_size"]) or _ssm_from_state(reader)
    out["blocks"] = _blocks(cfg, mt, out["hidden_size"])
    if mt == "zamba2":
        _zamba2_shapes(cfg, out)
    archs = top.raw.get("architectures")
    if isinstance(archs, list) and "DoryForCausalLM" in archs:
        out["blocks"] = tuple(block for _, block in reader._dory_layers())
    flags = _moe_flags(cfg) if experts else None
    layers = reader.layers()
    if (out["blocks"] is None and flags is not None and len(flags) == len(layers)
            and out["first_dense_layers"] is None):
        # MoE on some layers only, not a dense prefix: each layer's feed-forward as listed
        out["blocks"] = tuple(
            Block("ssm" if isinstance(x, RecurrentState) else None if isinstance(x, NoCache)
                  else "attention", "moe" if f else "mlp")
            for x, f in zip(layers, flags, strict=True))
    out["kv_shared"] = reader.kv_sharing()
    if mt == "gemma3n_text":
        per_layer = _sizes(cfg, "hidden_size_per_layer_input", "vocab_size_per_layer_input",
                           "altup_num_inputs", "laurel_rank")
        out["per_layer_inputs"] = PerLayerInputs(*per_layer) if per_layer else None
    out["vision"] = _vision_tower(top)
    out["audio_encoder"] = _audio_tower(top)
    out["uncounted_towers"] = _uncounted_towers(top, out["vision"], out["audio_encoder"])
    if mt == "gemma4_text" and cfg.raw.get("use_bidirectional_attention") == "vision":
        out["vision_prefix_lm"] = True  # Gemma 4: bidirectional over image / video tokens
    if reader.mla and cfg.raw.get("mla_use_output_gate") is True:
        out["mla_output_gate"] = True  # Kimi-K3: g_proj beside o_proj
    if _opt_int(cfg, "attn_res_block_size", minimum=1):
        out["attention_residuals"] = True  # Kimi-K3: *_res_norm / *_res_proj per layer
    latent = _opt_int(cfg, "routed_expert_hidden_size", "moe_latent_size", minimum=1)
    if experts and latent:
        out["moe_latent_size"] = latent
        out["moe_latent_norm"] = cfg.raw.get("latent_moe_use_norm") is True
    return out


def _unread_experts(cfg: Fields) -> dict[str, Any]:
    """The expert shapes of a config whose family's expert keys this reader does not take
    (an expert count or experts per token under any name in _EXPERT_COUNT_KEYS /
    _EXPERTS_PER_TOKEN_KEYS, yet none read for its model_type): the count and top-k as
    stated, and no MoE layer layout or width, so that kvplan.core.weights.estimable refuses
    the weights by name instead of weighing the model as a dense one. Empty when no such key
    says the model has experts (absent, null, 0, or an explicit use_moe false)."""
    if cfg.raw.get("use_moe") is False:
        return {}

    def says_experts(name: str) -> bool:
        value = cfg.raw.get(name)
        values = value if isinstance(value, list) else [value]
        return any(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)

    if not any(says_experts(k) for k in (*_EXPERT_COUNT_KEYS, *_EXPERTS_PER_TOKEN_KEYS)):
        return {}
    return {"num_experts": _opt_int(cfg, *_EXPERT_COUNT_KEYS, minimum=1),
            "num_experts_per_token": _opt_int(cfg, *_EXPERTS_PER_TOKEN_KEYS, minimum=1)}


def _zamba2_shapes(cfg: Fields, out: dict[str, Any]) -> None:
    """Zamba2's weights beyond the KV cache, as Zamba2Config defaults them: the MLP 4 x
    hidden_size wide, the LM head tied (vLLM zamba2.py ties it whatever the config says),
    biases on the MLP per add_bias_linear; the Mamba2 mixer of n_mamba_heads heads over
    mamba_expand x hidden_size channels (Zamba2MambaDecoderLayer's MambaMixer2, conv bias
    per use_conv_bias); num_mem_blocks shared blocks with adapters of adapter_rank."""
    hidden = out["hidden_size"]
    if out["intermediate_size"] is None and hidden:
        out["intermediate_size"] = 4 * hidden
    out["tie_word_embeddings"] = True
    out["attention_bias"] = cfg.raw.get("add_bias_linear") is True
    expand, heads = _opt_int(cfg, "mamba_expand", minimum=1), _opt_int(cfg, "n_mamba_heads",
                                                                       minimum=1)
    state, conv = _opt_int(cfg, "mamba_d_state", minimum=1), _opt_int(cfg, "mamba_d_conv",
                                                                      minimum=1)
    groups = _opt_int(cfg, "mamba_ngroups", minimum=1) or 1
    if hidden and expand and heads and state and conv:
        out["ssm"] = SSMShapes("mamba2", expand * hidden, state, conv, heads, groups,
                               conv_bias=cfg.raw.get("use_conv_bias", True) is not False,
                               proj_bias=out["attention_bias"])
    out["shared_blocks"] = SharedBlocks(
        _opt_int(cfg, "num_mem_blocks", minimum=1) or 1,
        _opt_int(cfg, "adapter_rank", minimum=1) or 128,
        cfg.raw.get("use_shared_attention_adapter") is True)


# vision_config model types and the tower each names (ModelSpec.vision)
_VISION_KINDS = {"clip_vision_model": "clip", "siglip_vision_model": "siglip",
                 "llama4_vision_model": "llama4", "mllama_vision_model": "mllama"}
# the outer model types whose vision_config leaves its model_type out, and the tower's kind
_VISION_BY_OUTER = {"llava": "clip", "gemma3": "siglip", "llama4": "llama4", "mllama": "mllama"}


def _sizes(f: Fields, *names: str) -> list[int] | None:
    """Each named size of `f` (at least 1), or None when any is missing: a tower is laid out
    only from a config that gives all its shapes, never guessed."""
    values = [_opt_int(f, n, minimum=1) for n in names]
    return None if None in values else [x for x in values if x is not None]


def _tower_config(top: Fields, key: str) -> tuple[Any, str]:
    """A tower's config (vision_config, audio_config) and where it sits: at the top, or under
    an omni model's thinker_config (Qwen3-Omni: vLLM qwen3_omni_moe_thinker.py builds
    audio_tower and visual from thinker_config's)."""
    thinker = top.raw.get("thinker_config")
    if key not in top.raw and isinstance(thinker, Mapping) and isinstance(thinker.get(key),
                                                                         dict):
        return thinker[key], f"thinker_config.{key}"
    return top.raw.get(key), key


def _vision_tower(top: Fields) -> VisionTower | None:
    """A multimodal config's vision encoder + projector shapes (ModelSpec.vision); None for a
    text model, an unknown tower, or a vision_config lacking a size (never guessed)."""
    raw, where = _tower_config(top, "vision_config")
    if not isinstance(raw, dict):
        return None
    if raw.get("model_type") == "qwen3_omni_moe_vision_encoder":
        return _qwen3_vit(Fields(raw, top.source, where), omni=True)
    if raw.get("model_type") == "qwen2_5_omni_vision_encoder":
        # vLLM 0.33.0 qwen2_5_omni_thinker.py: qwen2_5_vl.py's Qwen2_5_VisionTransformer
        return _qwen2_5_vit(Fields(raw, top.source, where), omni=True)
    if "vt_hidden_size" in raw:
        return _moonvit(top, Fields(raw, top.source, "vision_config"))
    # a model type that is not a string names no tower (a hostile or broken file)
    inner = raw.get("model_type") if isinstance(raw.get("model_type"), str) else None
    if inner == "gemma4_vision":
        return _gemma4_vision(Fields(raw, top.source, "vision_config"))
    if inner in _QWEN3_VIT:
        return _qwen3_vit(Fields(raw, top.source, "vision_config"))
    if inner == "exaone4_5_vision":
        return _exaone4_5_vit(Fields(raw, top.source, "vision_config"))
    outer = top.raw.get("model_type")
    if outer == "qwen2_vl" and raw.get("model_type") in (None, "qwen2_vl"):
        return _qwen2_vit(Fields(raw, top.source, "vision_config"))
    if outer == "qwen2_5_vl" and raw.get("model_type") in (None, "qwen2_5_vl"):
        return _qwen2_5_vit(Fields(raw, top.source, "vision_config"))
    if outer == "lfm2_vl" and inner == "siglip2_vision_model":
        return _lfm2_vl_siglip2(top, Fields(raw, top.source, "vision_config"))
    if outer == "mistral3" and inner == "pixtral":
        return _pixtral(top, Fields(raw, top.source, "vision_config"))
    # the outer model type names the tower only where vision_config leaves its own out (a
    # llava with a Pixtral encoder is not CLIP)
    kind = (_VISION_KINDS.get(inner) if isinstance(inner, str) and inner
            else _VISION_BY_OUTER.get(outer if isinstance(outer, str) else ""))
    if kind is None:
        return None
    v = Fields(raw, top.source, "vision_config")

    common = _sizes(v, "hidden_size", "intermediate_size", "num_hidden_layers", "patch_size",
                    "image_size")
    if common is None:
        return None
    hidden, inter, layers, patch, image = common
    channels = _opt_int(v, "num_channels", minimum=1) or 3
    if kind == "mllama":
        ratios = raw.get("supported_aspect_ratios")
        extra = _sizes(v, "num_global_layers", "max_num_tiles", "vision_output_dim")
        if not isinstance(ratios, list) or not ratios or extra is None:
            return None
        return VisionTower(kind, hidden, inter, layers, patch, image, channels,
                           num_global_layers=extra[0], max_num_tiles=extra[1],
                           num_aspect_ratios=len(ratios), output_dim=extra[2])
    if kind == "llama4":
        extra = _sizes(v, "vision_output_dim", "projector_input_dim", "projector_output_dim")
        if extra is None or raw.get("multi_modal_projector_bias") is True:
            return None  # a projector bias: not in the released checkpoints, not modelled
        return VisionTower(kind, hidden, inter, layers, patch, image, channels,
                           output_dim=extra[0], projector_input_dim=extra[1],
                           projector_output_dim=extra[2])
    if kind == "siglip" and raw.get("vision_use_head") is not False:
        return None  # SigLIP's attention-pooling head: Gemma 3 has none; not modelled
    return VisionTower(kind, hidden, inter, layers, patch, image, channels)


def _uncounted_towers(top: Fields, vision: VisionTower | None,
                      audio: AudioEncoder | None) -> tuple[str, ...]:
    """The towers a config describes (vision_config, audio_config, at the top or under an
    omni model's thinker_config) that the weights do not count: each named by its key and
    model_type, for the estimate's note (ModelSpec.uncounted_towers)."""
    out = []
    thinker = top.raw.get("thinker_config")
    for where, holder in (("", top.raw), ("thinker_config.", thinker)):
        if not isinstance(holder, Mapping):
            continue
        for key, counted in (("vision_config", vision), ("audio_config", audio)):
            raw = holder.get(key)
            if isinstance(raw, Mapping) and counted is None:
                kind = raw.get("model_type")
                out.append(f"{where}{key}" + (f" ({kind})" if isinstance(kind, str) and kind
                                                else ""))
    return tuple(out)


def _audio_tower(top: Fields) -> AudioEncoder | None:
    """A decoder's audio tower (ModelSpec.audio_encoder): Voxtral's (audio_config.model_type
    voxtral_encoder; transformers configuration_voxtral.py VoxtralEncoderConfig, a Whisper
    encoder hidden_size wide with intermediate_size-wide MLPs, num_mel_bins and
    max_source_positions frames; the projector takes intermediate_size inputs, four frames
    stacked: modeling_voxtral.py VoxtralMultiModalProjector). None for a text model, another
    tower, or an audio_config lacking a size or with grouped heads (never guessed)."""
    raw, where = _tower_config(top, "audio_config")
    if isinstance(raw, dict) and raw.get("model_type") == "qwen3_omni_moe_audio_encoder":
        return _qwen3_omni_audio(Fields(raw, top.source, where))
    if isinstance(raw, dict) and raw.get("model_type") == "qwen2_5_omni_audio_encoder":
        return _qwen2_5_omni_audio(Fields(raw, top.source, where))
    if isinstance(raw, dict) and raw.get("model_type") == "gemma4_audio":
        return _gemma4_audio(Fields(raw, top.source, "audio_config"))
    if isinstance(raw, dict) and raw.get("model_type") == "gemma3n_audio":
        return _gemma3n_audio(Fields(raw, top.source, "audio_config"))
    if not isinstance(raw, dict) or raw.get("model_type") != "voxtral_encoder":
        return None
    a = Fields(raw, top.source, "audio_config")
    values = _sizes(a, "hidden_size", "intermediate_size", "num_hidden_layers", "num_mel_bins",
                    "max_source_positions", "num_attention_heads")
    if values is None:
        return None
    hidden, inter, layers, mels, positions, heads = values
    kv = _opt_int(a, "num_key_value_heads", minimum=1) or heads
    head_dim = _opt_int(a, "head_dim", minimum=1) or hidden // heads
    if kv != heads or heads * head_dim != hidden:
        return None  # Whisper's attention is hidden_size wide, one K/V head per head
    return AudioEncoder("voxtral", layers, inter, mels, positions, hidden_size=hidden,
                        projector_input_dim=inter)


def _qwen3_omni_audio(a: Fields) -> AudioEncoder | None:
    """Qwen3-Omni's audio tower (thinker_config.audio_config, model_type
    qwen3_omni_moe_audio_encoder; vLLM 0.33.0 qwen3_omni_moe_thinker.py
    Qwen3OmniMoeAudioEncoder): three 3 x 3 stride-2 Conv2d of downsample_hidden_size
    channels over the mel bins, conv_out from the flattened channels to d_model (no bias),
    encoder_layers blocks (LayerNorms, q / k / v / out all biased, fc1 / fc2 encoder_ffn_dim
    wide), ln_post, proj1 (d_model -> d_model) and proj2 (-> output_dim), both biased. The
    sinusoidal positions are a buffer, not weights. None when a size is missing."""
    values = _sizes(a, "d_model", "encoder_layers", "encoder_ffn_dim", "num_mel_bins",
                    "downsample_hidden_size", "output_dim", "encoder_attention_heads")
    if values is None:
        return None
    d, layers, ffn, mels, channels, output, heads = values
    if d % heads:
        return None  # Qwen3OmniMoeAudioAttention: head_dim = d_model // heads
    return AudioEncoder("qwen3_omni", layers, ffn, mels, 0, hidden_size=d,
                        projector_input_dim=output, num_heads=heads,
                        conv_channels=(channels,))


def _qwen2_5_omni_audio(a: Fields) -> AudioEncoder | None:
    """Qwen2.5-Omni's audio tower (thinker_config.audio_config, model_type
    qwen2_5_omni_audio_encoder): transformers 5.19.0 modeling_qwen2_5_omni.py
    Qwen2_5OmniAudioEncoder, which vLLM 0.33.0 qwen2_5_omni_thinker.py builds as is. Two
    biased Conv1d (mel bins -> d_model, kernel 3; d_model -> d_model), audio_bos_eos_token
    (2 x output_dim), encoder_layers Whisper blocks (q / v / out biased, k without),
    ln_post and proj (d_model -> output_dim, biased); sinusoidal positions, a buffer. None
    when a size is missing."""
    values = _sizes(a, "d_model", "encoder_layers", "encoder_ffn_dim", "num_mel_bins",
                    "output_dim", "encoder_attention_heads")
    if values is None:
        return None
    d, layers, ffn, mels, output, heads = values
    if d % heads:
        return None
    return AudioEncoder("qwen2_5_omni", layers, ffn, mels, 0, hidden_size=d,
                        projector_input_dim=output, num_heads=heads)


def _gemma4_audio(a: Fields) -> AudioEncoder | None:
    """Gemma 4's audio tower (audio_config.model_type gemma4_audio; transformers
    configuration_gemma4.py Gemma4AudioConfig, modeling_gemma4.py Gemma4AudioModel, which
    vLLM gemma4_mm.py Gemma4ForConditionalGeneration builds with AutoModel.from_config):
    hidden_size wide, feed-forward halves 4 x hidden_size wide (Gemma4AudioFeedForward),
    num_attention_heads dividing hidden_size, two subsampling_conv_channels, a light
    convolution of conv_kernel_size taps, output_proj_dims out; use_clipped_linears defaults
    to True as Gemma4AudioConfig sets it. None when a size is missing (never guessed)."""
    values = _sizes(a, "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "output_proj_dims", "conv_kernel_size")
    channels = _two_channels(a.raw.get("subsampling_conv_channels"))
    if values is None or channels is None:
        return None
    hidden, layers, heads, output, kernel = values
    if hidden % heads:
        return None  # Gemma4AudioAttention: head_dim = hidden_size // num_attention_heads
    return AudioEncoder("gemma4", layers, 4 * hidden, 0, 0, hidden_size=hidden,
                        projector_input_dim=output, num_heads=heads,
                        conv_channels=channels, conv_kernel=kernel,
                        clipped_linears=a.raw.get("use_clipped_linears", True) is not False)


def _two_channels(raw: object) -> tuple[int, ...] | None:
    """A conformer's two subsampling channel counts, or None."""
    if (isinstance(raw, list) and len(raw) == 2
            and all(isinstance(c, int) and not isinstance(c, bool) and 1 <= c <= MAX_SHAPE
                    for c in raw)):
        return tuple(raw)
    return None


def _gemma3n_audio(a: Fields) -> AudioEncoder | None:
    """Gemma 3n's audio tower (audio_config.model_type gemma3n_audio; transformers
    configuration_gemma3n.py Gemma3nAudioConfig, modeling_gemma3n.py Gemma3nAudioEncoder,
    which vLLM gemma3n_mm.py Gemma3nForConditionalGeneration builds with
    AutoModel.from_config): hidden_size wide, conf_num_hidden_layers blocks of
    conf_num_attention_heads, feed-forward halves 4 x hidden_size wide, two
    sscp_conv_channel_size convolutions over input_feat_size mel bins, a light convolution
    of conf_conv_kernel_size taps, vocab_size hard-token rows in embed_audio. Only the
    released subsampling (3 x 3 kernels, stride 2 both ways) is laid out; None otherwise or
    when a size is missing (never guessed)."""
    values = _sizes(a, "hidden_size", "conf_num_hidden_layers", "conf_num_attention_heads",
                    "input_feat_size", "conf_conv_kernel_size", "vocab_size")
    channels = _two_channels(a.raw.get("sscp_conv_channel_size"))
    if (values is None or channels is None
            or a.raw.get("sscp_conv_kernel_size") != [[3, 3], [3, 3]]
            or a.raw.get("sscp_conv_stride_size") != [[2, 2], [2, 2]]):
        return None
    hidden, layers, heads, mels, kernel, vocab = values
    if hidden % heads:
        return None  # Gemma3nAudioAttention: head_dim = hidden_size // heads
    return AudioEncoder("gemma3n", layers, 4 * hidden, mels, 0, hidden_size=hidden,
                        num_heads=heads, conv_channels=channels, conv_kernel=kernel,
                        vocab_size=vocab)


# vision_config model types of Qwen3-VL's encoder (vLLM qwen3_vl.py Qwen3_VisionTransformer,
# which qwen3_vl_moe.py and qwen3_5.py build too); transformers 5 saves Qwen3.5's as
# qwen3_5_vision / qwen3_5_moe_vision (Qwen3_5VisionConfig, Qwen3_5MoeVisionConfig)
_QWEN3_VIT = {"qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "qwen3_5_vision",
              "qwen3_5_moe_vision"}


def _qwen3_vit(v: Fields, omni: bool = False) -> VisionTower | None:
    """Qwen3-VL's vision encoder (vLLM qwen3_vl.py Qwen3_VisionTransformer; transformers
    modeling_qwen3_vl.py): a biased Conv3d patch embedding, a learned position table of
    num_position_embeddings rows, `depth` LayerNorm blocks with a fused qkv, proj and a
    two-linear MLP intermediate_size wide (all biased), the patch merger (LayerNorm, then
    spatial_merge_size^2 x hidden -> itself -> out_hidden_size, biased) and one more merger
    per deepstack_visual_indexes entry with its LayerNorm after the merge. `omni`: Qwen3-Omni's
    (vLLM 0.33.0 qwen3_omni_moe_thinker.py Qwen3Omni_VisionTransformer), the same shapes
    with a position table of (image_size // patch_size)^2 rows, as it builds it."""
    table_key = "image_size" if omni else "num_position_embeddings"
    values = _sizes(v, "hidden_size", "intermediate_size", "depth", "patch_size",
                    "temporal_patch_size", "spatial_merge_size", "out_hidden_size", table_key)
    deepstack = v.raw.get("deepstack_visual_indexes", [])
    if values is None or not isinstance(deepstack, list):
        return None
    dim, inter, depth, patch, frames, merge, out, table = values
    if omni:
        table = (table // patch) ** 2
    channels = _opt_int(v, "in_channels", "in_chans", minimum=1) or 3
    return VisionTower("qwen3_omni" if omni else "qwen3_vl", dim, inter, depth, patch, patch,
                       channels, output_dim=out,
                       projector_input_dim=merge * merge * dim, temporal_patch_size=frames,
                       position_table_size=table, num_deepstack=len(deepstack))


def _gemma4_vision(v: Fields) -> VisionTower | None:
    """Gemma 4's vision encoder (vision_config.model_type gemma4_vision; transformers
    modeling_gemma4.py Gemma4VisionModel, which vLLM gemma4_mm.py builds with
    AutoModel.from_config): a linear patch embedder over 3 x patch_size^2 pixels, two learned
    position tables (x and y) of position_embedding_size rows, per layer q / k / v / o of
    num_attention_heads / num_key_value_heads x head_dim with q / k norms, four RMSNorms and
    a gated MLP, no biases; std_bias / std_scale when `standardize`. None when a size is
    missing, `standardize` is not stated, or with `use_clipped_linears` (per-linear clamp
    buffers kvplan does not lay out): the tower is then not counted rather than guessed."""
    standardize = v.raw.get("standardize")
    if (v.raw.get("use_clipped_linears") is not False or v.raw.get("attention_bias")
            or not isinstance(standardize, bool)):
        return None  # clamp buffers, biases, or std vectors the config does not settle
    values = _sizes(v, "hidden_size", "intermediate_size", "num_hidden_layers", "patch_size",
                    "num_attention_heads", "num_key_value_heads", "head_dim",
                    "position_embedding_size")
    if values is None:
        return None
    hidden, inter, layers, patch, heads, kv_heads, head_dim, table = values
    return VisionTower("gemma4", hidden, inter, layers, patch, patch, num_heads=heads,
                       num_kv_heads=kv_heads, head_dim=head_dim, position_table_size=table,
                       standardize=int(standardize))


def _qwen2_vit(v: Fields) -> VisionTower | None:
    """Qwen2-VL's vision encoder (transformers Qwen2VisionTransformerPretrainedModel; vLLM
    qwen2_vl.py Qwen2VisionTransformer): a Conv3d patch embedding over temporal_patch_size
    frames without bias, `depth` blocks of embed_dim with LayerNorms, a fused qkv and an
    mlp_ratio x wide MLP (all with biases), and the patch merger (a LayerNorm, then two
    linears from spatial_merge_size^2 x embed_dim to the text's hidden_size)."""
    values = _sizes(v, "embed_dim", "mlp_ratio", "depth", "patch_size", "temporal_patch_size",
                    "spatial_merge_size", "hidden_size")
    if values is None:
        return None
    dim, ratio, depth, patch, frames, merge, out = values
    return VisionTower("qwen2_vl", dim, ratio * dim, depth, patch, patch,
                       _opt_int(v, "in_chans", minimum=1) or 3, output_dim=out,
                       projector_input_dim=merge * merge * dim, temporal_patch_size=frames)


# Ling 2.5's model type (vLLM bailing_moe_linear.py), Ling 3's (bailing_moe_v3.py); both
# checkpoints also say "bailing_hybrid" (Ling 3's text config class does), read by class
_BAILING_HYBRID = {"bailing_moe_linear"}
_BAILING_V3 = {"bailing_moe_v3"}
_BAILING_V3_CLASSES = ("BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration")

_GATED_DELTANET = {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text",
                   "olmo_hybrid"}


def _qwen2_5_vit(v: Fields, omni: bool = False) -> VisionTower | None:
    """Qwen2.5-VL's vision encoder (transformers Qwen2_5_VisionTransformerPretrainedModel;
    vLLM qwen2_5_vl.py): Qwen2-VL's Conv3d patches and patch merger, its blocks with RMSNorms
    and a gated MLP intermediate_size wide (biased), the merger's norm an RMSNorm, out to
    out_hidden_size. `omni`: Qwen2.5-Omni's thinker.visual, the same encoder. The width is
    hidden_size, which vLLM reads (not embed_dim), and is never a class default here."""
    values = _sizes(v, "hidden_size", "intermediate_size", "depth", "patch_size",
                    "temporal_patch_size", "spatial_merge_size", "out_hidden_size")
    if values is None:
        return None
    dim, inter, depth, patch, frames, merge, out = values
    channels = _opt_int(v, "in_chans", "in_channels", minimum=1) or 3
    return VisionTower("qwen2_5_omni" if omni else "qwen2_5_vl", dim, inter, depth, patch,
                       patch, channels,
                       output_dim=out, projector_input_dim=merge * merge * dim,
                       temporal_patch_size=frames)


def _lfm2_vl_siglip2(top: Fields, v: Fields) -> VisionTower | None:
    """LFM2-VL's SigLIP2 NaFlex encoder and projector (vLLM lfm2_vl.py with siglip2.py
    Siglip2Model; transformers modeling_siglip2.py / modeling_lfm2_vl.py): a linear patch
    embedding over 3 x patch_size^2 pixels with a bias, a position table of num_patches
    rows, SigLIP's biased LayerNorm blocks, the post LayerNorm; Lfm2VLMultiModalProjector's
    linear_1 (downsample_factor^2 x hidden -> projector_hidden_size) and linear_2 (-> the
    text width), biased. None when a size is missing, with the projector's LayerNorm
    (projector_use_layernorm), without its biases, or with an attention-pooling head: not
    laid out, never guessed."""
    names = ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size",
             "num_patches")
    values = _sizes(v, *names)
    factor = _opt_int(top, "downsample_factor", minimum=1)
    width = _opt_int(top, "projector_hidden_size", minimum=1)
    if (values is None or factor is None or width is None
            or top.raw.get("projector_use_layernorm") is not False
            or top.raw.get("projector_bias") is not True
            or v.raw.get("vision_use_head") is not False):
        return None
    hidden, inter, layers, patch, table = values
    return VisionTower("siglip2", hidden, inter, layers, patch, patch,
                       _opt_int(v, "num_channels", minimum=1) or 3,
                       projector_input_dim=factor * factor * hidden,
                       projector_output_dim=width, position_table_size=table)


def _pixtral(top: Fields, v: Fields) -> VisionTower | None:
    """Mistral 3's Pixtral encoder and projector (vLLM mistral3.py with pixtral.py
    PixtralHFVisionModel; transformers modeling_pixtral.py / modeling_mistral3.py): a patch
    convolution without bias, ln_pre, per layer RMSNorms attention_norm / ffn_norm, q / k /
    v / o and a gated MLP, no biases; Mistral3MultiModalProjector's RMSNorm, patch merger
    (spatial_merge_size^2 x hidden -> hidden, no bias) and linear_1 / linear_2 into the
    text width. None when a size is missing, with projector biases
    (multimodal_projector_bias) or several feature layers: not laid out, never guessed."""
    names = ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size",
             "image_size")
    values = _sizes(v, *names)
    merge = _opt_int(top, "spatial_merge_size", minimum=1)
    if (values is None or merge is None
            or top.raw.get("multimodal_projector_bias") is not False
            or not isinstance(top.raw.get("vision_feature_layer", -1), int)):
        return None
    hidden, inter, layers, patch, image = values
    return VisionTower("pixtral", hidden, inter, layers, patch, image,
                       _opt_int(v, "num_channels", minimum=1) or 3,
                       projector_input_dim=merge * merge * hidden)


def _exaone4_5_vit(v: Fields) -> VisionTower | None:
    """EXAONE 4.5's vision encoder (vLLM exaone4_5.py EXAONE4_5_VisionTransformer):
    Qwen2.5-VL's encoder (patches, RMSNorm blocks, gated biased MLP, the merger) whose
    attention has num_key_value_heads K/V heads: a fused qkv of (num_heads + 2 x
    num_key_value_heads) x hidden_size / num_heads, biased."""
    tower = _qwen2_5_vit(v)
    heads = _opt_int(v, "num_heads", minimum=1)
    kv = _opt_int(v, "num_key_value_heads", minimum=1) or heads
    if tower is None or heads is None or kv is None or tower.hidden_size % heads:
        return None
    return replace(tower, kind="exaone4_5", num_heads=heads, num_kv_heads=kv,
                   head_dim=tower.hidden_size // heads)


def _ssm_from_state(reader: _Reader) -> SSMShapes | None:
    """The mixer's weight shapes from the state its layers keep, where the config's own
    fields are not read for them (Ling 2.5's lightning layers, Ling 3's and Alice AI's
    Kimi delta attention): heads x head_dim from the recurrent (heads, dim, dim) tensor, the
    convolution's kernel from its conv tensor. None for other states."""
    state = next((x for x in reader.layers() if isinstance(x, RecurrentState)
                  and x.variant in ("lightning", "kda")), None)
    if state is None:
        return None
    tensors = {t.name: t.shape for t in state.tensors}
    shape = tensors.get("kv") or tensors.get("recurrent")
    if shape is None or len(shape) != 3:
        return None
    heads, dim = shape[0], shape[1]
    if state.variant == "lightning":
        return SSMShapes("lightning", heads * dim, dim, 0, heads, conv_bias=False)
    conv = tensors.get("conv")
    return SSMShapes("kda", heads * dim, dim, (conv[0] + 1) if conv else 4, heads, heads,
                     conv_bias=False)


def _falcon_h1_d_ssm(cfg: Fields) -> int | None:
    """Falcon-H1's Mamba2 inner size: mamba_d_ssm (its class default when absent,
    _ARCH_DEFAULTS), mamba_expand x hidden_size when null (vLLM falcon_h1.py
    FalconH1SSMDecoderLayer, get_mamba_state_shape_from_config); None when unusable."""
    if cfg.raw.get("mamba_d_ssm") is None:
        expand, hidden = (_opt_int(cfg, "mamba_expand", minimum=1),
                          _opt_int(cfg, "hidden_size", minimum=1))
        return expand * hidden if expand and hidden else None
    return _opt_int(cfg, "mamba_d_ssm", minimum=1)


def _ssm_shapes(cfg: Fields, mt: str, hidden: int | None) -> SSMShapes | None:
    """The recurrent mixer's weight shapes of a hybrid (ModelSpec.ssm); None when the family
    has none or the config lacks a size (never guessed)."""
    def need(*names: str) -> int | None:
        return _opt_int(cfg, *names, minimum=1)

    def flag(name: str, default: bool) -> bool:
        value = cfg.raw.get(name, default)
        return value if isinstance(value, bool) else default

    if mt == "jamba" and hidden:
        # JambaMambaMixer: inner = mamba_expand x hidden; mamba_dt_rank "auto" =
        # ceil(hidden / 16) (JambaConfig); dt / B / C RMSNorms inside the mixer
        expand, state, conv = need("mamba_expand"), need("mamba_d_state"), need("mamba_d_conv")
        rank = cfg.raw.get("mamba_dt_rank", "auto")
        rank = -(-hidden // 16) if rank == "auto" else _opt_int(cfg, "mamba_dt_rank", minimum=1)
        if None in (expand, state, conv, rank):
            return None
        return SSMShapes("mamba1", expand * hidden, state, conv, dt_rank=rank,  # type: ignore
                         conv_bias=flag("mamba_conv_bias", True),
                         proj_bias=flag("mamba_proj_bias", False), inner_norms=True)
    if mt == "nemotron_h":
        # NemotronHMamba2Mixer: inner = mamba_num_heads x mamba_head_dim
        heads, head_dim = need("mamba_num_heads"), need("mamba_head_dim")
        state, conv, groups = need("ssm_state_size"), need("conv_kernel"), need("n_groups")
        if None in (heads, head_dim, state, conv, groups):
            return None
        return SSMShapes("mamba2", heads * head_dim, state, conv, heads, groups,  # type: ignore
                         conv_bias=flag("use_conv_bias", True),
                         proj_bias=flag("use_bias", False))
    if mt == "kimi_linear" and isinstance(cfg.raw.get("linear_attn_config"), dict):
        # Kimi Delta Attention (linear_attn_config): heads x head_dim for q, k and v
        lin = cfg.sub("linear_attn_config")
        heads, head_dim = _opt_int(lin, "num_heads", minimum=1), _opt_int(lin, "head_dim",
                                                                           minimum=1)
        conv = _opt_int(lin, "short_conv_kernel_size", minimum=1) or 4
        if heads is None or head_dim is None:
            return None
        return SSMShapes("kda", heads * head_dim, head_dim, conv, heads, heads,
                         conv_bias=False,
                         full_rank_gate=lin.raw.get("use_full_rank_gate") is True,
                         bounded_gate=lin.raw.get("gate_lower_bound") is not None)
    if mt in ("mamba", "falcon_mamba") and hidden:
        # MambaMixer (vLLM mamba.py): inner = intermediate_size (expand x hidden), a
        # time_step_rank ("auto": ceil(hidden / 16)) for dt; use_conv_bias / use_bias
        inner = need("intermediate_size") or (need("expand") or 0) * hidden
        state, conv = need("state_size"), need("conv_kernel")
        rank = cfg.raw.get("time_step_rank", "auto")
        rank = -(-hidden // 16) if rank == "auto" else _opt_int(cfg, "time_step_rank",
                                                                minimum=1)
        if not inner or None in (state, conv, rank):
            return None
        return SSMShapes("mamba1", inner, state, conv, dt_rank=rank,  # type: ignore[arg-type]
                         conv_bias=flag("use_conv_bias", True), proj_bias=flag("use_bias", False))
    if mt == "mamba2":
        # Mamba2Mixer (vLLM mamba2.py): num_heads heads of head_dim, n_groups B/C groups
        heads, head_dim = need("num_heads"), need("head_dim")
        state, conv, groups = need("state_size"), need("conv_kernel"), need("n_groups")
        if None in (heads, head_dim, state, conv, groups):
            return None
        return SSMShapes("mamba2", heads * head_dim, state, conv, heads, groups,  # type: ignore
                         conv_bias=flag("use_conv_bias", True), proj_bias=flag("use_bias", False))
    if mt == "falcon_h1" and hidden:
        # FalconH1's MambaMixer2 (vLLM falcon_h1.py): _falcon_h1_d_ssm channels in
        # mamba_n_heads heads, mamba_n_groups B/C groups
        heads, state = need("mamba_n_heads"), need("mamba_d_state")
        conv, groups = need("mamba_d_conv"), need("mamba_n_groups")
        d_ssm = _falcon_h1_d_ssm(cfg)
        if not d_ssm or None in (heads, state, conv, groups):
            return None
        return SSMShapes("mamba2", d_ssm, state, conv, heads, groups,  # type: ignore[arg-type]
                         conv_bias=flag("mamba_conv_bias", True),
                         proj_bias=flag("mamba_proj_bias", False),
                         # FalconH1Config: mamba_rms_norm defaults to false, and vLLM's
                         # MambaMixer2(use_rms_norm=...) then registers no norm weight
                         gated_norm=flag("mamba_rms_norm", False))
    if mt in ("lfm2", "lfm2_moe") and hidden:
        # Lfm2ShortConv (vLLM lfm2.py ShortConv): in_proj hidden -> 3 x conv_dim, a depthwise
        # conv_L_cache-wide convolution, out_proj; conv_bias on all three
        dim, kernel = need("conv_dim") or hidden, need("conv_L_cache")
        if kernel is None:
            return None
        return SSMShapes("short_conv", dim, 0, kernel, conv_bias=flag("conv_bias", False))
    if mt in ("minimax", "minimax_text_01", "minimax_m1") and hidden:
        # MiniMaxText01LinearAttention: qkv_proj to 3 x heads x head_dim, an output_gate,
        # out_proj and an RMSNorm over heads x head_dim (SGLang / vLLM minimax_text_01.py)
        heads = need("num_attention_heads")
        head_dim = need("head_dim") or (hidden // heads if heads else None)
        if heads is None or head_dim is None:
            return None
        return SSMShapes("lightning", heads * head_dim, head_dim, 0, heads, conv_bias=False)
    if mt in ("granitemoehybrid", "bamba") and hidden:
        # GraniteMoeHybridMambaLayer / BambaMixer (Mamba2): mamba_n_heads heads of
        # mamba_d_head ("auto": mamba_expand x hidden / heads), mamba_n_groups B/C groups
        heads, state = need("mamba_n_heads"), need("mamba_d_state")
        conv, groups = need("mamba_d_conv"), need("mamba_n_groups")
        head_dim = need("mamba_d_head")
        expand = need("mamba_expand")
        if head_dim is None and expand and heads and expand * hidden % heads == 0:
            head_dim = expand * hidden // heads
        if None in (heads, head_dim, state, conv, groups):
            return None
        return SSMShapes("mamba2", heads * head_dim, state, conv, heads, groups,  # type: ignore
                         conv_bias=flag("mamba_conv_bias", True),
                         proj_bias=flag("mamba_proj_bias", False))
    if mt in _GATED_DELTANET:
        # Qwen3NextGatedDeltaNet: value heads x value dim, key heads x key dim; no conv bias
        # (Qwen3.5's in_proj_qkv / in_proj_z / in_proj_b / in_proj_a hold the same values:
        # vLLM qwen3_5.py packs them into in_proj_qkvz / in_proj_ba; OLMo-Hybrid's too)
        vh, vd = need("linear_num_value_heads"), need("linear_value_head_dim")
        kh, kd = need("linear_num_key_heads"), need("linear_key_head_dim")
        conv = need("linear_conv_kernel_dim")
        if None in (vh, vd, kh, kd, conv):
            return None
        return SSMShapes("gated_deltanet", vh * vd, kd, conv, vh, kh,  # type: ignore
                         conv_bias=False)
    return None


# Nemotron-H's one sub-layer per layer: hybrid_override_pattern's letters and
# layers_block_type's names (transformers 5)
_NEMOTRON_H_BLOCKS = {"M": Block("ssm", None), "*": Block("attention", None),
                      "-": Block(None, "mlp"), "E": Block(None, "moe"),
                      "mamba": Block("ssm", None), "attention": Block("attention", None),
                      "mlp": Block(None, "mlp"), "moe": Block(None, "moe")}



def _moonvit(top: Fields, v: Fields) -> VisionTower | None:
    """Kimi's MoonViT (vt_* fields) as vLLM builds it (kimi_k25_vit.py
    MoonViT3dPretrainedModel and KimiK25MultiModalProjector, whose getattr defaults apply to
    the keys a config leaves out: attn_bias, linear_bias and patch_embed_proj_bias True,
    norm_type "layernorm", mm_projector_type "patchmerger"): a learned init_pos_emb_height x
    _width position grid (read as image_size = patch x grid width; the temporal table is a
    fixed sin-cos buffer, not stored), fused wqkv of qkv_hidden_size per q/k/v, a
    merge_kernel_size patch merger. Two layouts, each all of a piece: Kimi-K3's "moonvit"
    (RMSNorms, no biases, patchmergerv2: two linears then an RMSNorm in the text width) and
    Kimi-K2.5's "kimi_k25" (LayerNorms, every linear biased, patchmerger: a LayerNorm over
    the tower's width, then two biased linears into mm_hidden_size, which KimiK25Config sets
    to the text width when it equals the tower's). Any other mix, pooling or position type:
    None (named as a tower kvplan does not lay out)."""
    names = ("vt_hidden_size", "vt_intermediate_size", "vt_num_hidden_layers", "patch_size",
             "init_pos_emb_height", "init_pos_emb_width")
    values = [_opt_int(v, n, minimum=1) for n in names]
    merge = v.raw.get("merge_kernel_size")
    if None in values or not (isinstance(merge, list) and len(merge) == 2 and all(
            isinstance(m, int) and not isinstance(m, bool) and 0 < m <= 64 for m in merge)):
        return None
    hidden, inter, layers, patch, height, width = (x for x in values if x is not None)
    raw = v.raw
    if height != width or raw.get("pos_emb_type", "divided_fixed") != "divided_fixed" or \
            raw.get("merge_type", "sd2_tpool") != "sd2_tpool" or \
            raw.get("mlp_type", "mlp2") != "mlp2":
        return None  # a non-square grid or another embedding / merge / MLP: not modelled
    qkv = _opt_int(v, "qkv_hidden_size", minimum=1) if "qkv_hidden_size" in raw else hidden
    biases = {raw.get(k, True) for k in ("attn_bias", "linear_bias", "patch_embed_proj_bias")}
    norm, projector = raw.get("norm_type", "layernorm"), raw.get("mm_projector_type",
                                                                 "patchmerger")
    merged = merge[0] * merge[1] * hidden
    if qkv is None:
        return None
    if biases == {False} and norm == "rmsnorm" and projector == "patchmergerv2":
        return VisionTower("moonvit", hidden, inter, layers, patch, patch * height,
                           projector_input_dim=merged, attention_size=qkv)
    if biases == {True} and norm == "layernorm" and projector == "patchmerger" and \
            qkv == hidden and raw.get("mm_hidden_size", hidden) == hidden:
        return VisionTower("kimi_k25", hidden, inter, layers, patch, patch * height,
                           projector_input_dim=merged)
    return None


def _blocks(cfg: Fields, mt: str, hidden: int | None) -> tuple[Block, ...] | None:
    """ModelSpec.blocks for the families whose layers differ beyond their cache kind; None
    for the others or when the config does not say (the layer reader has already refused a
    malformed pattern or block list)."""
    n = _opt_int(cfg, "num_hidden_layers", "n_layer", "num_layers", minimum=1)
    if mt in ("mamba", "falcon_mamba", "mamba2") and n:
        return (Block("ssm", None),) * n  # a Mamba block is its mixer alone
    archs = cfg.raw.get("architectures")
    loops = _opt_int(cfg, "loop_num", minimum=1) or 2
    if n and isinstance(archs, list) and "IQuestLoopCoderForCausalLM" in archs:
        # the looped passes reuse the decoder layer's weights: only the first has tensors
        return ((Block("attention", "mlp"),) + (Block(None, None),) * (loops - 1)) * n
    if isinstance(archs, list) and "HrmTextForCausalLM" in archs:
        # two stacks of weights (L, H) under every step's cache layer
        per_stack = _opt_int(cfg, "num_layers_per_stack", minimum=1)
        h, low = _opt_int(cfg, "H_cycles", minimum=1), _opt_int(cfg, "L_cycles", minimum=1)
        if per_stack and h and low:
            total = per_stack * h * (low + 1)
            return ((Block("attention", "mlp"),) * (2 * per_stack)
                    + (Block(None, None),) * (total - 2 * per_stack))
        return None
    if mt == "longcat_flash" or (isinstance(archs, list) and any(
            a in ("LongcatFlashForCausalLM", "LongcatFlashNgramForCausalLM") for a in archs)):
        # each decoder layer: attention + MLP, the experts, attention + MLP (the two cache
        # layers per decoder layer carry them)
        pairs = _opt_int(cfg, "num_layers", minimum=1)
        return ((Block("attention", "mlp+moe"), Block("attention", "mlp")) * pairs
                if pairs else None)
    if mt in _GEMMA4_TEXT and n and _opt_int(cfg, "num_experts", minimum=1):
        # vLLM gemma4.py Gemma4DecoderLayer: self.mlp on every layer, and with num_experts
        # the router and experts beside it ("parallel to MLP")
        return (Block("attention", "mlp+moe"),) * n
    if mt == "falcon_h1" and n:
        # FalconH1ParallelHybrid: attention and the Mamba2 mixer read the same normed input,
        # then one feed-forward; kvplan's two cache layers per decoder layer hold them
        return (Block("attention", "mlp"), Block("parallel_ssm", None)) * n
    if mt == "nemotron_h":
        for name in ("layers_block_type", "hybrid_override_pattern"):
            value = cfg.raw.get(name)
            if isinstance(value, (str, list)) and all(
                    isinstance(c, str) and c in _NEMOTRON_H_BLOCKS for c in value):
                return tuple(_NEMOTRON_H_BLOCKS[c] for c in value)
        return None
    if not cfg.has("block_configs") or not hidden:
        return None
    out = []
    for raw in cfg.list("block_configs"):
        attn = raw.get("attention") if isinstance(raw, dict) else None
        ffn = raw.get("ffn") if isinstance(raw, dict) else None
        if not isinstance(attn, dict) or not isinstance(ffn, dict):
            return None
        mixer = (None if attn.get("no_op") else "linear" if attn.get("replace_with_linear")
                 else "attention")
        width = None
        if ffn.get("no_op"):
            kind = None
        elif ffn.get("replace_with_linear"):
            kind = "linear"
        else:
            mult = ffn.get("ffn_mult")
            if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not (
                    0 < mult < MAX_SHAPE):
                return None
            # DeciLM _ffn_mult_to_intermediate_size: int(2 x mult x hidden / 3) rounded up
            # to a multiple of 256 (vLLM nemotron_nas.py, the checkpoint's modeling_decilm.py)
            width = -(-int(2 * mult * hidden / 3) // 256) * 256
            if width > MAX_SHAPE:
                return None
            kind = "mlp"
        out.append(Block(mixer, kind, width))
    return tuple(out)


def _moe_flags(cfg: Fields) -> list[bool] | None:
    """Which layers are MoE when the config lists it per layer: mlp_layer_types ("dense" /
    "sparse": Cohere2-MoE, K-EXAONE, Step-3.5; vLLM cohere2_moe.py / exaone_moe.py),
    moe_layers_enum (the MoE layers' indices, comma-separated: Step3, Step-3.5; vLLM
    step3_text.py / step3p5.py) or is_moe_layer (booleans); None otherwise or when the list
    is malformed; ERNIE 4.5's from its layer keys (_ernie_moe_flags)."""
    if cfg.raw.get("model_type") in tuple(_ERNIE_MOE):  # a hostile model_type may be a list
        return _ernie_moe_flags(cfg)
    kinds = cfg.raw.get("mlp_layer_types")
    if isinstance(kinds, list) and kinds and all(k in ("dense", "sparse") for k in kinds):
        return [k == "sparse" for k in kinds]
    enum, n = cfg.raw.get("moe_layers_enum"), _opt_int(cfg, "num_hidden_layers", minimum=1)
    if isinstance(enum, str) and n:
        parts = [x.strip() for x in enum.split(",") if x.strip()]
        if parts and all(x.isdigit() and int(x) < n for x in parts):
            moe = {int(x) for x in parts}
            return [i in moe for i in range(n)]
        return None
    flags = cfg.raw.get("is_moe_layer")
    if isinstance(flags, list) and flags and all(isinstance(f, bool) for f in flags):
        return list(flags)
    return None


def _moe_layout(cfg: Fields, reader: _Reader) -> tuple[int | None, int | None]:
    """(first_dense_layers, moe_layer_step) of an MoE config; None where it does not fit
    the rule 'MoE when i >= first and (i + 1) % step == 0'."""
    if reader.model_type == "nemotron_h":
        return None, None  # which layers are MoE, hybrid_override_pattern says ('E')
    flags = _moe_flags(cfg)
    if reader.model_type in _ERNIE_MOE:
        # its rule (moe_layer_start_index, moe_layer_interval) is ModelSpec's when the MoE
        # layers run to the last one the interval reaches; other ends are listed per layer
        start = _opt_int(cfg, "moe_layer_start_index")
        interval = _opt_int(cfg, "moe_layer_interval", minimum=1) or 1
        if flags and any(flags) and start is not None and flags == [
                i >= start and (i + 1) % interval == 0 for i in range(len(flags))]:
            return start, interval
        return None, None
    if flags is not None:
        # one flag per layer: a dense prefix then MoE fits the rule; other mixes are listed
        # per layer (_blocks)
        k = next((i for i, f in enumerate(flags) if f), len(flags))
        return (k, 1) if all(flags[k:]) else (None, None)
    first = _opt_int(cfg, "first_k_dense_replace", "num_dense_layers")  # AFMoE: the latter
    step = _opt_int(cfg, "interleave_moe_layer_step", "decoder_sparse_step", minimum=1)
    freq = cfg.raw.get("moe_layer_freq")
    if isinstance(freq, list):
        # MiMo-V2-Flash: one flag per layer; dense layers first, then MoE
        k = next((i for i, f in enumerate(freq) if f), len(freq))
        if all(f == 0 for f in freq[:k]) and all(f == 1 for f in freq[k:]):
            return k, 1
        return None, None
    if isinstance(freq, int) and not isinstance(freq, bool) and freq > 1:
        return None, None  # DeepSeek's i % freq == 0 is another rule; no real model uses it
    if cfg.has("mlp_only_layers") and cfg.raw.get("mlp_only_layers"):
        return None, None  # Qwen-MoE with dense layers listed by index
    if cfg.has("expert_layer_period"):  # Jamba: MoE where i % period == offset
        period = _opt_int(cfg, "expert_layer_period", minimum=1)
        offset = _opt_int(cfg, "expert_layer_offset")
        if period and offset == period - 1:
            return 0, period
        return None, None
    return first or 0, step or 1


def _ernie_moe_flags(cfg: Fields) -> list[bool] | None:
    """ERNIE 4.5's MoE layers (vLLM ernie45_moe.py Ernie4_5_MoeDecoderLayer): layer i is MoE
    when (i + 1) % moe_layer_interval == 0 and moe_layer_start_index <= i <=
    moe_layer_end_index (-1: the last layer, as Ernie4_5_MoeConfig sets it); None when a key
    is not a whole number."""
    n = _opt_int(cfg, "num_hidden_layers", minimum=1)
    start = _opt_int(cfg, "moe_layer_start_index")
    step = _opt_int(cfg, "moe_layer_interval", minimum=1)
    end = cfg.raw.get("moe_layer_end_index")
    if n is None or start is None or step is None or isinstance(end, bool) \
            or not isinstance(end, int) or end < -1:
        return None
    end = n - 1 if end == -1 else end
    return [start <= i <= end and (i + 1) % step == 0 for i in range(n)]


def _text_config(top: Fields) -> Fields:
    """The language model's fields: a nested text config (Llava, Gemma 3/4, Llama 4, Mllama,
    Qwen-VL) or the top level; fields the nested config omits take its class's defaults."""
    key = next((k for k in _TEXT_CONFIG_KEYS if top.has(k)), None)
    outer_type = top.raw.get("model_type")
    outer_type = outer_type if isinstance(outer_type, str) else ""
    if key is None:
        # a top-level config that omits its layer count is damaged (every real one sets
        # it): do not size it with the class default of 32
        return _with_defaults(top, outer_type, keep_missing=("num_hidden_layers",))
    nested = top.sub(key)
    if top.has("text_model_id") and not nested.has("num_hidden_layers"):
        # Ultravox: the language model is another repository's (vLLM ultravox.py loads its
        # config from text_model_id); the class defaults here would be a guess
        raise top.error("text_model_id", f"is {top.raw['text_model_id']!r}: the language "
                        f"model's config is that repository's, not this {key}'s",
                        f"size {top.raw['text_model_id']} (its config.json) instead")
    if key == "thinker_config" and nested.has("text_config"):
        outer_type = nested.raw.get("model_type")
        outer_type = outer_type if isinstance(outer_type, str) else ""
        nested = nested.sub("text_config")
    inner_type = nested.raw.get("model_type")
    if not isinstance(inner_type, str) or not inner_type:
        inner_type = _TEXT_CONFIG_TYPES.get(outer_type, "")
    return _with_defaults(nested, inner_type)


def _with_defaults(cfg: Fields, model_type: str, keep_missing: tuple[str, ...] = ()
                   ) -> Fields:
    """cfg with the fields it leaves out (absent, not null) taken from its class's defaults;
    `filled` names each one taken, for ModelSpec.class_defaults."""
    defaults = _ARCH_DEFAULTS.get(model_type, {})
    merged = {k: v for k, v in defaults.items() if k not in keep_missing}
    merged.update(cfg.raw)
    if model_type:
        merged.setdefault("model_type", model_type)
    out = Fields(merged, cfg.source, cfg.path)
    taken = sorted(k for k in merged if k in defaults and k not in cfg.raw)
    out.defaulted = frozenset(taken)
    if taken:
        cls = f"{_DEFAULTS_CLASS[model_type]}, {_DEFAULTS_RELEASE}"
        out.filled = tuple(f"{cfg.where(k)} = {merged[k]!r} (absent: {cls} default)"
                           for k in taken)
    return out


def _num(f: Fields, name: str, default: Any = ..., minimum: int = 1) -> Any:
    """A whole number field (Fields.int), saying "is null" for an explicit null of a required
    field and refusing numbers no real model has: above MAX_SHAPE for a width, head count,
    rank or period, above MAX_NUMBER for a length in tokens."""
    if default is ...:
        if name in f.raw and f.raw[name] is None:
            raise f.error(name, "is null but must be a whole number")
        value = f.int(name, minimum=minimum)
    else:
        value = f.int(name, default, minimum=minimum)
    limit = MAX_NUMBER if name in _LENGTH_FIELDS else MAX_SHAPE
    if isinstance(value, int) and value > limit:
        raise f.error(name, f"is {value:,}, larger than any real model's")
    return value


class _Reader:
    """Reads one (text) config; each quantity is read once, when first needed."""

    def __init__(self, top: Fields, cfg: Fields, generic: bool = False) -> None:
        self.top = top
        self.cfg = cfg
        model_type = cfg.raw.get("model_type") or top.raw.get("model_type") or ""
        if not isinstance(model_type, str):
            raise cfg.error("model_type", f"must be text, got {model_type!r}")
        # a family saved under another model_type: the same layers and tensors (vLLM picks the
        # class by `architectures`)
        self.model_type = _SAME_FAMILY.get(model_type, model_type)
        # --assume-standard-attention on a refused config: read the plain attention shape only
        self.generic = generic
        if model_type in _UNSUPPORTED_TYPES and not generic:
            raise cfg.error("model_type", f"is {model_type!r}: "
                            f"{_UNSUPPORTED_TYPES[model_type]}, which kvplan cannot express "
                            "as one cache kind per layer",
                            "write the model as a YAML spec (docs/model-schema.md)")
        self._cache: dict[str, Any] = {}
        self._layer_cache: dict[str, Layer] = {}

    # --- small typed reads ------------------------------------------------------------

    def _int(self, name: str, default: Any = ..., minimum: int = 1) -> Any:
        return _num(self.cfg, name, default, minimum)

    def _pick(self, *names: str) -> str | None:
        """The first of `names` (aliases of one quantity) that is set; an error if a later
        alias disagrees with it."""
        present = [n for n in names if self.cfg.has(n)]
        for other in present[1:]:
            if self.cfg.raw[other] != self.cfg.raw[present[0]]:
                raise self.cfg.error(other, f"is {self.cfg.raw[other]!r} but {present[0]} is "
                                     f"{self.cfg.raw[present[0]]!r}; both name the same number")
        return present[0] if present else None

    def _int_list(self, name: str, minimum: int = 0, maximum: int | None = None) -> list[int]:
        values = self.cfg.list(name)
        for i, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, int) or v < minimum or (
                    maximum is not None and v > maximum):
                bound = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
                raise self.cfg.error(name, f"entry {i} is {v!r}; expected a whole number "
                                     f"{bound}")
        return values

    # --- model-wide numbers -----------------------------------------------------------

    @property
    def dtype(self) -> str:
        for f in (self.cfg, self.top):
            name = f.first("torch_dtype", "dtype")
            if name is None:
                continue
            value = f.raw[name]
            if not isinstance(value, str) or value not in _DTYPES:
                # --kv-dtype auto follows this: a typo must not quietly become bf16
                raise f.error(name, f"is {value!r}, not a dtype kvplan knows",
                              "one of: " + ", ".join(_DTYPES))
            return _DTYPES[value]
        return "bf16"  # the usual serving dtype when a config does not say

    def max_context(self) -> int | None:
        # vLLM `_get_and_verify_max_len`: the smallest of the length keys a config sets
        # (GPT-2 n_positions, ChatGLM seq_length, MPT/DBRX max_seq_len, ...).
        names = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                 "model_max_length", "max_sequence_length", "max_seq_length", "seq_len")
        values = [_num(self.cfg, n) for n in names if self.cfg.has(n)]
        return min(values) if values else None

    def num_layers(self) -> int:
        if "layers" not in self._cache:
            name = self._pick("num_hidden_layers", "n_layer", "num_layers", "n_layers")
            if name is not None:
                n = self._int(name)
            else:
                # Nemotron-H (transformers 5): the per-layer list alone gives the count.
                listed = next((k for k in ("layers_block_type", "layer_types")
                               if isinstance(self.cfg.raw.get(k), list)), None)
                if listed is None:
                    raise self.cfg.error("num_hidden_layers", "is missing",
                                         "add the number of decoder layers")
                n = len(self.cfg.raw[listed])
                if n < 1:
                    raise self.cfg.error(listed, "is empty")
            if n > MAX_LAYERS:
                raise self.cfg.error(name or "num_hidden_layers",
                                     f"is {n:,}, more than the {MAX_LAYERS:,} layers kvplan "
                                     "accepts")
            self._cache["layers"] = n
        return self._cache["layers"]

    @property
    def heads(self) -> int:
        if "heads" not in self._cache:
            name = self._pick("num_attention_heads", "n_head", "num_heads", "n_heads")
            if name is None:
                raise self.cfg.error("num_attention_heads", "is missing",
                                     "add the number of attention (query) heads")
            self._cache["heads"] = self._int(name)
        return self._cache["heads"]

    @property
    def kv_heads(self) -> int:
        if "kv" not in self._cache:
            self._cache["kv"] = self._read_kv_heads()
        return self._cache["kv"]

    def _read_kv_heads(self) -> int:
        cfg, heads = self.cfg, self.heads
        # Falcon-7B and GPT-BigCode (StarCoder): multi_query means one KV head, unless
        # Falcon's new_decoder_architecture (Falcon-40B) gives num_kv_heads (vLLM's rule).
        if cfg.bool("multi_query", False) and not cfg.bool("new_decoder_architecture", False):
            return 1
        # ChatGLM: multi_query_group_num counts only when multi_query_attention is on.
        if cfg.raw.get("multi_query_attention") is False:
            return heads
        # MPT and DBRX keep it in attn_config.kv_n_heads.
        attn_config = cfg.raw.get("attn_config")
        if isinstance(attn_config, dict) and attn_config.get("kv_n_heads") is not None:
            sub = cfg.sub("attn_config")
            return self._check_kv(sub, "kv_n_heads", _num(sub, "kv_n_heads"), heads)
        # n_head_kv / num_kv_heads: Falcon; multi_query_group_num: ChatGLM; else HF's name.
        name = self._pick("num_key_value_heads", "n_head_kv", "num_kv_heads",
                          "multi_query_group_num", "num_attention_groups")
        if name is None:
            return heads  # no KV-head count (or null): plain multi-head attention
        return self._check_kv(cfg, name, self._int(name), heads)

    @staticmethod
    def _check_kv(f: Fields, name: str, kv: int, heads: int) -> int:
        if heads % kv:
            raise f.error(name, f"is {kv}, which does not divide the {heads} attention heads")
        return kv

    @property
    def head_dim(self) -> int:
        if "head_dim" not in self._cache:
            self._cache["head_dim"] = self._read_head_dim()
        return self._cache["head_dim"]

    def _read_head_dim(self) -> int:
        cfg, heads = self.cfg, self.heads
        # An explicit head_dim always wins (Gemma 2/3, Qwen3, Mistral-Nemo, MiniMax-M2: it
        # differs from hidden_size // heads); Nemotron-H spells it attention_head_dim, ChatGLM
        # kv_channels, PLaMo hidden_size_per_head. A null head_dim (Mistral) means "derive".
        name = cfg.first("head_dim", "attention_head_dim", "kv_channels", "hidden_size_per_head")
        if name is not None:
            return self._int(name)
        hidden_name = self._pick("hidden_size", "n_embd", "d_model")
        if hidden_name is None:
            raise cfg.error("hidden_size", "is missing and so is head_dim",
                            "add head_dim (or hidden_size)")
        hidden = self._int(hidden_name)
        if hidden % heads:
            raise cfg.error(hidden_name, f"is {hidden}, which the {heads} attention heads do "
                            "not divide, and there is no head_dim", "add the real head_dim")
        return hidden // heads

    @property
    def window(self) -> int | None:
        """The sliding window, or None when the config has none or switches it off."""
        if "window" not in self._cache:
            self._cache["window"] = self._read_window()
        return self._cache["window"]

    def _read_window(self) -> int | None:
        cfg = self.cfg
        # GPT-Neo names its local-attention window window_size.
        names = ("window_size",) if cfg.has("attention_types") else (
            "sliding_window", "sliding_window_size")
        name = self._pick(*names)
        if name is None:
            return None
        # Qwen2/Qwen3: sliding_window is set but use_sliding_window: false turns it off.
        if cfg.raw.get("use_sliding_window") is False:
            return None
        window: int = self._int(name)
        if self.model_type in _WINDOW_SEES_ONE_MORE:
            window += 1
        return window

    @property
    def mla(self) -> bool:
        # MLA (DeepSeek V2/V3/R1, Kimi K2, GLM-5): kv_lora_rank decides, whatever
        # num_key_value_heads says (DeepSeek-V3 lists 128, which is not the cache shape).
        # DeepSeek-VL2-Tiny's language model turns it off with use_mla: false (plain MHA).
        cfg = self.cfg
        if self.model_type == "deepseek_v4":
            # DeepSeek-V4's attention is compressed, not MLA (_compressed_layers); configs
            # saved by transformers 5 write its unused kv_lora_rank as null
            return False
        if ("kv_lora_rank" in cfg.raw and cfg.raw["kv_lora_rank"] is None
                and cfg.bool("use_mla", True)
                and (cfg.has("qk_rope_head_dim") or self.model_type in _MLA_TYPES)):
            # read as plain attention it would be ~40x too large (DeepSeek-V3: 128 KV heads
            # of 192+128 against one 512+64 latent)
            raise cfg.error("kv_lora_rank", "is null on an MLA (DeepSeek-style) model, so "
                            "the cache shape is unknown",
                            "give the latent rank (512 for DeepSeek-V2/V3), or set "
                            "use_mla: false if the model really has plain attention")
        return cfg.has("kv_lora_rank") and cfg.bool("use_mla", True)

    # --- the schedule -----------------------------------------------------------------

    def schedule(self) -> tuple[list[str], str]:
        """One kind per layer and the field that decided it. Kinds: full, sliding, chunked,
        cross, indexed, none, recurrent, conv."""
        kinds, field = self._own_schedule()
        n = self.num_layers()
        # Gemma 3n / Gemma 4: the last num_kv_shared_layers reuse an earlier layer's K and V
        # and allocate no cache of their own (vLLM kv_sharing_target_layer_name).
        shared = self._kv_shared_layers()
        if shared:
            kinds[n - shared:] = ["none"] * shared
        return kinds, field

    def _kv_shared_layers(self) -> int:
        shared = self._int("num_kv_shared_layers", 0, minimum=0)
        if shared and shared > (n := self.num_layers()):
            raise self.cfg.error("num_kv_shared_layers", f"is {shared} but the model has only "
                                 f"{n} layers")
        return shared

    def kv_sharing(self) -> tuple[tuple[int, int], ...]:
        """(layer, the layer whose K and V it reuses) for each of the last
        num_kv_shared_layers (Gemma 3n, Gemma 4): vLLM gemma3n.py Gemma3nAttention's
        kv_sharing_target_layer_name, the last layer before the shared ones of the same kind
        (full: first shared - 1, sliding: first shared - 2 in Gemma 3n's pattern). Such a
        layer caches nothing (schedule: "none") but keeps its own q / k / v / o projections,
        of its target's shapes (kvplan.core.weights)."""
        shared = self._kv_shared_layers()
        if not shared or self.generic:
            return ()
        kinds, _ = self._own_schedule()
        first, out = self.num_layers() - shared, []
        for i in range(first, first + shared):
            same = [j for j in range(first) if kinds[j] == kinds[i]]
            if same:
                out.append((i, same[-1]))
        return tuple(out)

    def _own_schedule(self) -> tuple[list[str], str]:
        """The schedule before the KV-shared layers are marked (each layer's own kind)."""
        kinds, field = self._schedule()
        n = self.num_layers()
        mtp = self._int("num_nextn_predict_layers", 0, minimum=0)
        if field == "layer_types" and mtp and len(kinds) == n + mtp:
            # EXAONE-4.5 lists its MTP layer's type after the model's own layers; the MTP
            # layer is a draft with a cache of its own, not one of the model's layers
            kinds = kinds[:n]
        if len(kinds) != n:
            raise self.cfg.error(field, f"describes {len(kinds)} layers but the model has {n}",
                                 "num_hidden_layers and the layer list must agree")
        # Gemma 4 forces its last layer to global attention (Gemma4TextConfig.__post_init__).
        if self.model_type in _GEMMA4_TEXT and kinds and kinds[-1] == "sliding":
            kinds[-1] = "full"
        return kinds, field

    def _schedule(self) -> tuple[list[str], str]:
        cfg, mt = self.cfg, self.model_type
        n = self.num_layers()
        for name in ("layer_types", "layers_block_type"):  # Nemotron-H (transformers 5)
            if cfg.has(name):
                return [self._named_kind(name, i, t) for i, t in
                        enumerate(cfg.list(name))], name
        # Nemotron-H: one character per layer; M = Mamba2, * = attention, - = MLP, E = MoE.
        if cfg.has("hybrid_override_pattern"):
            table = {"M": "recurrent", "*": "full", "-": "none", "E": "none"}
            pattern = cfg.str("hybrid_override_pattern")
            bad = sorted(set(pattern) - set(table))
            if bad:
                raise cfg.error("hybrid_override_pattern", f"has unknown layer symbol {bad[0]!r}",
                                "known: M (Mamba2), * (attention), - (MLP), E (MoE)")
            return [table[c] for c in pattern], "hybrid_override_pattern"
        # MiMo-V2-Flash: 0 = full attention, 1 = sliding window (with its own swa_* shape).
        if cfg.has("hybrid_layer_pattern"):
            flags = self._int_list("hybrid_layer_pattern", 0, 1)
            return ["sliding" if f else "full" for f in flags], "hybrid_layer_pattern"
        # MiniMax-Text-01 / MiniMax-M2: 1 = softmax attention, 0 = lightning (linear) attention.
        if cfg.has("attn_type_list"):
            flags = self._int_list("attn_type_list", 0, 1)
            return ["full" if f else "recurrent" for f in flags], "attn_type_list"
        # Jamba: attention where i % attn_layer_period == attn_layer_offset, Mamba elsewhere.
        if cfg.has("attn_layer_period"):
            period = self._int("attn_layer_period")
            offset = self._int("attn_layer_offset", minimum=0)
            if offset >= min(period, n):
                raise self.cfg.error("attn_layer_offset", f"is {offset} but "
                                     f"attn_layer_period is {period} and the model has {n} "
                                     "layers, so no layer would have attention")
            return (["full" if i % period == offset else "recurrent" for i in range(n)],
                    "attn_layer_period")
        # Bamba: attention at the listed layers, Mamba2 elsewhere.
        if cfg.has("attn_layer_indices"):
            at = set(self._int_list("attn_layer_indices", 0, n - 1))
            return (["full" if i in at else "recurrent" for i in range(n)],
                    "attn_layer_indices")
        # Qwen3-Next / Qwen3.5: full attention every full_attention_interval-th layer, gated
        # delta-net elsewhere.
        if cfg.has("full_attention_interval"):
            k = self._int("full_attention_interval")
            if k > n:
                raise self.cfg.error("full_attention_interval", f"is {k:,} but the model has "
                                     f"{n} layers, so no layer would have attention")
            return (["full" if (i + 1) % k == 0 else "recurrent" for i in range(n)],
                    "full_attention_interval")
        # Mllama (Llama 3.2 Vision): cross-attention layers listed by index.
        if cfg.has("cross_attention_layers"):
            cross = set(self._int_list("cross_attention_layers", 0, n - 1))
            return (["cross" if i in cross else "full" for i in range(n)],
                    "cross_attention_layers")
        # LFM2: attention at full_attn_idxs, short convolutions elsewhere.
        if cfg.has("full_attn_idxs"):
            at = set(self._int_list("full_attn_idxs", 0, n - 1))
            return ["full" if i in at else "conv" for i in range(n)], "full_attn_idxs"
        if cfg.has("attention_types"):
            return self._gpt_neo_types(), "attention_types"
        # Attention-free Mamba (Mamba-1, Falcon-Mamba) and Mamba2 (Codestral-Mamba).
        if mt in ("mamba", "falcon_mamba", "mamba2"):
            return ["recurrent"] * n, "model_type"
        for marker in _STATE_MARKERS:
            if cfg.has(marker) and marker in cfg.defaulted:
                # a hybrid whose state sizes are its class defaults and whose schedule is
                # absent: its class would schedule the layers itself (GraniteMoeHybridConfig:
                # every layer Mamba), which this reader does not reproduce
                raise cfg.error("layer_types", f"is missing: {mt} mixes attention and "
                                "recurrent layers, and the config does not say which layers "
                                "are which", "write the layer schedule out as the "
                                "checkpoint's config.json does (layer_types, or the "
                                "family's hybrid_override_pattern)")
            if cfg.has(marker):
                raise cfg.error(marker, "describes layers this reader does not know how to "
                                "schedule (no layer_types or hybrid pattern says which layers "
                                "carry it)", "write the model as a YAML spec "
                                "(docs/model-schema.md)")
        if mt == "olmo_hybrid":
            # OlmoHybridConfig.__post_init__ then makes every 4th layer full attention (the
            # last one when there are fewer) and derives the delta-net sizes from the heads
            raise cfg.error("layer_types", "is missing: OLMo-Hybrid's class would schedule "
                            "its gated delta-net and attention layers itself, which this "
                            "reader does not reproduce", "write layer_types out, as the "
                            "checkpoint's config.json does")
        pattern = self._sliding_pattern()
        if pattern is not None:
            if self.window is None:
                return ["full"] * n, "sliding_window_pattern"
            return [pattern(i) for i in range(n)], "sliding_window_pattern"
        # Llama 4: chunked local layers; every no_rope_layer_interval-th (4th) layer is a
        # global NoPE layer. no_rope_layers lists 1 for chunked (RoPE) layers; empty means
        # the default interval.
        if cfg.has("attention_chunk_size"):
            if mt in ("llama4", "llama4_text") or cfg.has("no_rope_layers"):
                flags = self._int_list("no_rope_layers", 0, 1) if cfg.has("no_rope_layers") \
                    else []
                if not flags:
                    interval = self._int("no_rope_layer_interval", 4)
                    flags = [int((i + 1) % interval != 0) for i in range(n)]
                return ["chunked" if f else "full" for f in flags], "no_rope_layers"
            # transformers' generic rule: attention_chunk_size alone chunks every layer.
            return ["chunked"] * n, "attention_chunk_size"
        window = self.window
        # Qwen2-style: with use_sliding_window, layers from max_window_layers on are sliding.
        if window is not None and cfg.has("max_window_layers"):
            first = self._int("max_window_layers", minimum=0)
            return ["sliding" if i >= first else "full" for i in range(n)], "max_window_layers"
        if window is not None:
            max_pos = cfg.raw.get("max_position_embeddings")
            # A window at least as long as the context never slides (Phi-3.5: 262,144 vs
            # 131,072).
            if isinstance(max_pos, int) and not isinstance(max_pos, bool) and window >= max_pos:
                return ["full"] * n, "sliding_window"
            # Mistral 7B v0.1, Phi-3-mini: one window on every layer.
            return ["sliding"] * n, "sliding_window"
        return ["full"] * n, "num_hidden_layers"

    def _sliding_pattern(self) -> Callable[[int], str] | None:
        """`sliding_window_pattern` (Gemma 3, Cohere2, EXAONE 4), or the model type's implicit
        one: layer index -> kind."""
        cfg = self.cfg
        name = cfg.first("sliding_window_pattern", "_sliding_window_pattern")
        own = _PATTERN_FIELDS.get(self.model_type)
        if name is None and own is not None and cfg.has(own):
            name = own
        if name is not None and isinstance(cfg.raw[name], str):
            # EXAONE 4: a string such as "LLLG" (L = local/sliding, G = global), repeated.
            text = cfg.raw[name]
            bad = sorted(set(text) - {"L", "G"})
            if not text or bad:
                raise cfg.error(name, f"is {text!r}; expected a whole number or a string of "
                                "L (local) and G (global)")
            return lambda i: "sliding" if text[i % len(text)] == "L" else "full"
        p = self._int(name) if name is not None else _IMPLICIT_SLIDING_PATTERN.get(
            self.model_type)
        if p is None:
            return None
        return lambda i: "full" if (i + 1) % p == 0 else "sliding"

    def _gpt_neo_types(self) -> list[str]:
        # GPT-Neo: attention_types [[["global", "local"], 12]] = the pair repeated 12 times.
        kinds: list[str] = []
        for i, item in enumerate(self.cfg.list("attention_types")):
            if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], list)
                    or isinstance(item[1], bool) or not isinstance(item[1], int)
                    or item[1] < 0 or len(kinds) + len(item[0]) * item[1] > MAX_LAYERS):
                raise self.cfg.error("attention_types", f"entry {i} is {item!r}; expected "
                                     "[[type, ...], repeat]")
            names = [self._named_kind("attention_types", i, t) for t in item[0]]
            kinds.extend(names * item[1])
        return kinds

    def _named_kind(self, field: str, i: int, name: Any) -> str:
        kind = _LAYER_TYPE_KINDS.get(name) if isinstance(name, str) else None
        archs = self.top.raw.get("architectures")
        if kind == "chunked" and isinstance(archs, list) and "Rnj1ForCausalLM" in archs:
            # RNJ-1 (a Gemma3TextConfig): vLLM rnj1.py gives its chunked_attention layers
            # per_layer_sliding_window=config.sliding_window and a one-chunk lookback in the
            # kernel, so the cache is a SlidingWindowSpec of sliding_window tokens
            kind = "sliding"
        if kind is None:
            raise self.cfg.error(field, f"layer {i} has unknown type {name!r}",
                                 "kvplan will not guess the cache of a layer type it does not "
                                 "know; write the model as a YAML spec (docs/model-schema.md)")
        return kind

    # --- layers -----------------------------------------------------------------------

    def layers(self) -> list[Layer]:
        if self.generic:
            # Standard attention, as asked: every layer keeps every token (an MLA latent
            # when kv_lora_rank is set), whatever schedule or state the config describes.
            one: Layer = (self._mla(None) if self.mla else
                          FullAttention(self.kv_heads, self.head_dim, self._plain_v_head_dim()))
            return [one] * self.num_layers()
        if self.cfg.has("block_configs"):
            return self._block_config_layers()
        # by the keys themselves, so a config naming its model_type differently (SGLang's
        # "deepseek_ref" copies of DeepSeek-V4) is never read as plain attention
        if self.cfg.has("compress_ratios"):
            return self._compressed_layers()
        if self.model_type == "kimi_linear" or (
                isinstance(self.cfg.raw.get("linear_attn_config"), dict)
                and "kda_layers" in self.cfg.raw["linear_attn_config"]):
            return self._kimi_linear_layers()
        if self.model_type == "zamba2":
            return self._zamba2_layers()
        archs = self.top.raw.get("architectures")
        if self.model_type == "falcon_h1" or (
                isinstance(archs, list) and "FalconH1ForCausalLM" in archs):
            return self._parallel_hybrid_layers()
        if isinstance(archs, list) and "IQuestLoopCoderForCausalLM" in archs:
            return self._looped_layers()
        if self.layers_are_dual_mla:
            return self._dual_mla_layers()
        if isinstance(archs, list) and "HrmTextForCausalLM" in archs:
            return self._hrm_layers()
        if self.model_type in ("domyn_edge", "domynedge") or (
                isinstance(archs, list) and "DomynEdgeForCausalLM" in archs):
            return self._domyn_layers()
        if self.model_type == "plamo3" or (
                isinstance(archs, list) and "Plamo3ForCausalLM" in archs):
            return self._plamo3_layers()
        if self.model_type in _BAILING_V3 or (
                isinstance(archs, list) and any(a in _BAILING_V3_CLASSES for a in archs)):
            return self._bailing_v3_layers()
        if self.model_type == "alice_ai" or (
                isinstance(archs, list) and "AliceAIForCausalLM" in archs):
            return self._alice_layers()
        if self.model_type in _BAILING_HYBRID or (
                isinstance(archs, list) and "BailingMoeV2_5ForCausalLM" in archs):
            return self._bailing_hybrid_layers()
        if isinstance(archs, list) and "DoryForCausalLM" in archs:
            return [layer for layer, _ in self._dory_layers()]
        kinds, field = self.schedule()
        indexers = self._indexer_layers(kinds) if self.mla else None
        if indexers is not None and isinstance(archs, list) and "HYV4ForCausalLM" in archs:
            # HY V4 (vllm/models/hy_v4 HYV4MLAAttention): only the layers layer_types calls
            # sparse build an indexer (requested_sparse); its full_attention layers are MLA
            # alone
            indexers = [d if kind == "indexed" else None for d, kind in zip(indexers, kinds,
                                                                            strict=True)]
        out = []
        for i, kind in enumerate(kinds):
            if indexers is not None and kind in ("full", "indexed"):
                key = f"mla:{indexers[i]}"
                if key not in self._layer_cache:
                    self._layer_cache[key] = self._mla(indexers[i])
                out.append(self._layer_cache[key])
                continue
            if kind not in self._layer_cache:
                self._layer_cache[kind] = self._layer(kind, field, i)
            out.append(self._layer_cache[kind])
        return out

    def _compressed_layers(self) -> list[Layer]:
        """DeepSeek-V4: compress_ratios[i] per layer (0 = the sliding window alone, 4 or 128 =
        one compressed entry per that many tokens beside it). The list is one longer than the
        layers when it covers the MTP layer (vLLM reads compress_ratios[layer_id] only for
        layer_id < num_hidden_layers). Ratio-4 layers carry the indexer (vLLM
        DeepseekV4Attention: "Only C4A uses sparse attention and hence has indexer")."""
        cfg, n = self.cfg, self.num_layers()
        ratios = self._int_list("compress_ratios")
        if len(ratios) < n:
            raise cfg.error("compress_ratios", f"lists {len(ratios)} layers but the model has "
                            f"{n}")
        for i, r in enumerate(ratios[:n]):
            if r not in (0, 1, 4, 128):
                raise cfg.error("compress_ratios", f"layer {i} has ratio {r}; kvplan models "
                                "0/1 (window only), 4 and 128 (the engines' c4 and c128 pools)")
        window = self._int("sliding_window")
        head_dim, rope = self._int("head_dim"), self._int("qk_rope_head_dim")
        index = self._int("index_head_dim", None)
        kv = self.kv_heads
        if kv != 1:
            raise cfg.error("num_key_value_heads", f"is {kv}; DeepSeek-V4 attention keeps one "
                            "shared K=V head")
        cache: dict[int, Layer] = {}
        for r in ratios[:n]:
            if r not in cache:
                cache[r] = CompressedAttention(head_dim, rope, window, r,
                                               index if r == 4 else None)
        return [cache[r] for r in ratios[:n]]

    def _kimi_linear_layers(self) -> list[Layer]:
        """Kimi-Linear: linear_attn_config lists, 1-based, the KDA layers and the full (MLA)
        ones (KimiLinearConfig.is_kda_layer: layer_idx + 1 in kda_layers). A KDA layer keeps,
        per request, the short convolutions of q, k and v ((kernel - 1) x heads * head_dim each,
        model dtype) and a (heads, head_dim, head_dim) recurrent state in fp32 (vLLM
        MambaStateShapeCalculator.kda_state_shape / kda_state_dtype)."""
        cfg, n = self.cfg, self.num_layers()
        lin = cfg.sub("linear_attn_config")
        kda = lin.list("kda_layers")
        full = lin.list("full_attn_layers")
        index: dict[int, str] = {}
        for name, values in (("kda_layers", kda), ("full_attn_layers", full)):
            for v in values:
                if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= n:
                    raise lin.error(name, f"has {v!r}; expected layer numbers 1..{n}")
                if v in index:
                    raise lin.error(name, f"lists layer {v}, which {index[v]} lists too")
                index[v] = name
        if len(index) != n:
            missing = min(set(range(1, n + 1)) - set(index))
            raise lin.error("kda_layers", f"and full_attn_layers leave layer {missing} out")
        heads = _num(lin, "num_heads")
        head_dim = _num(lin, "head_dim")
        kernel = _num(lin, "short_conv_kernel_size", 4, minimum=2)
        state = RecurrentState("kda", (
            StateTensor("conv", (kernel - 1, 3 * heads * head_dim), self._dtype_bytes(),
                        tp_axis=1),
            StateTensor("recurrent", (heads, head_dim, head_dim), 4, tp_axis=0),
        ))
        mla = self._mla(None)
        return [state if index[i + 1] == "kda_layers" else mla for i in range(n)]

    def _parallel_hybrid_layers(self) -> list[Layer]:
        """Falcon-H1: every decoder layer runs attention and a Mamba2 mixer side by side, so
        each holds a K/V cache and a state: two cache layers per decoder layer, as vLLM
        registers them (FalconH1ParallelHybrid: self_attn's Attention and mamba's
        MambaMixer2, each its own KV-cache spec)."""
        attention = self._layer("full", "num_hidden_layers", 0)
        state = self._recurrent("model_type", 0)
        return [layer for _ in range(self.num_layers()) for layer in (attention, state)]

    @property
    def layers_are_dual_mla(self) -> bool:
        """LongCat-Flash, by model_type or by class (configs without a model_type name it
        by class only; vLLM's _ARCHITECTURE_TO_MODEL_TYPE maps it back)."""
        archs = self.top.raw.get("architectures")
        return self.model_type == "longcat_flash" or (isinstance(archs, list) and any(
            a in ("LongcatFlashForCausalLM", "LongcatFlashNgramForCausalLM") for a in archs))

    def _dual_mla_layers(self) -> list[Layer]:
        """LongCat-Flash (vLLM longcat_flash.py FlashDecoderLayer): each of num_layers
        decoder layers runs two MLA attentions, each its own MLAAttentionSpec (vLLM's arch
        config counts num_layers as the layers; its num_hidden_layers, where a config sets
        it, counts the attention sub-layers). Listed two per decoder layer."""
        if not self.mla:
            raise self.cfg.error("kv_lora_rank", "is missing on a LongCat-Flash config",
                                 "its attentions are MLA: give kv_lora_rank")
        n = self._int("num_layers")
        latent = self._mla(None)
        return [latent] * (2 * n)

    def _dory_layers(self) -> list[tuple[Layer, Block]]:
        """Dory (vLLM dory.py): each layer's cache by its layer_types entry ("mlp": none);
        a recurrent layer (n_input_layers <= i < n_input_layers + n_recurrent_layers) keeps
        one per loop when recurrent_kv_cache_mode is "per_loop" (its later copies without
        weights of their own), else one shared by the loops. With each cache layer, its
        block."""
        kinds, field = self.schedule()
        loops = self._int("n_recurrent_loops")
        first = self._int("n_input_layers", minimum=0)
        recurrent = range(first, first + self._int("n_recurrent_layers", minimum=0))
        per_loop = self.cfg.raw.get("recurrent_kv_cache_mode") == "per_loop"
        out: list[tuple[Layer, Block]] = []
        for i, kind in enumerate(kinds):
            layer = self._layer(kind, field, i)
            if isinstance(layer, NoCache):
                out.append((layer, Block(None, "mlp")))
                continue
            copies = loops if per_loop and i in recurrent else 1
            out += [(layer, Block("attention", "mlp"))]
            out += [(layer, Block(None, None))] * (copies - 1)
        return out

    def _bailing_hybrid_layers(self) -> list[Layer]:
        """Ling 2.5 (vLLM bailing_moe_linear.py): layer i is lightning linear attention
        (one heads x head_dim x head_dim state, head_dim else hidden_size / heads, in the
        model dtype) unless (i + 1) % layer_group_size == 0 (layer_group_size 0: none is),
        then MLA (kv_lora_rank + qk_rope_head_dim, 64 when the config leaves it out)."""
        if not self.mla:
            raise self.cfg.error("kv_lora_rank", "is missing", "its full layers are MLA: give "
                                 "kv_lora_rank")
        group = self._int("layer_group_size", 1, minimum=0)
        latent = MLA(self._int("kv_lora_rank"), self._int("qk_rope_head_dim", 64))
        state = self._lightning_state()
        return [state if group > 0 and (i + 1) % group else latent
                for i in range(self.num_layers())]

    def _kda_state(self, heads: int, head_dim: int, kernel: int) -> RecurrentState:
        """A Kimi delta attention state (vLLM kda_state_shape / kda_state_dtype): the q / k / v
        short convolutions ((kernel - 1) x 3 x heads x head_dim, model dtype) and a heads x
        head_dim x head_dim recurrent state in fp32."""
        return RecurrentState("kda", (
            StateTensor("conv", (kernel - 1, 3 * heads * head_dim), self._dtype_bytes(),
                        tp_axis=1),
            StateTensor("recurrent", (heads, head_dim, head_dim), 4, tp_axis=0),
        ))

    def _bailing_v3_layers(self) -> list[Layer]:
        """Ling 3 (vLLM bailing_moe_v3.py _is_kda_layer): layer i is Kimi delta attention
        (kda_state_shape of num_attention_heads x head_dim, short_conv_kernel_size) unless
        (i + 1) % layer_group_size == 0 or i is past the last whole group, which are MLA
        (kv_lora_rank 512 and qk_rope_head_dim 64 when the config leaves them out)."""
        n, group = self.num_layers(), self._int("layer_group_size")
        state = self._kda_state(self.heads, self._int("head_dim"),
                                self._int("short_conv_kernel_size", 4, minimum=2))
        latent = MLA(self._int("kv_lora_rank", 512), self._int("qk_rope_head_dim", 64))
        return [latent if (i + 1) % group == 0 or i >= n // group * group else state
                for i in range(n)]

    def _alice_layers(self) -> list[Layer]:
        """Alice AI (vLLM alice_ai.py): layer_types' linear_attention layers are Kimi delta
        attention, whose state is kda_state_shape(linear_num_key_heads,
        linear_key_head_dim, linear_conv_kernel_dim): the q / k / v short convolutions
        ((kernel - 1) x 3 x heads x head_dim, model dtype) and a heads x head_dim x head_dim
        recurrent state in fp32 (kda_state_dtype); the full_attention layers are
        Qwen3NextAttention over num_key_value_heads x head_dim."""
        kinds, field = self.schedule()
        state = self._kda_state(self._int("linear_num_key_heads"),
                                self._int("linear_key_head_dim"),
                                self._int("linear_conv_kernel_dim", 4, minimum=2))
        out: list[Layer] = []
        for i, kind in enumerate(kinds):
            if kind not in ("recurrent", "full"):
                raise self.cfg.error(field, f"layer {i} is {kind}, which Alice AI does not "
                                     "have (linear_attention or full_attention)")
            out.append(state if kind == "recurrent" else self._layer("full", field, i))
        return out

    def _hrm_layers(self) -> list[Layer]:
        """HRM-Text (vLLM hrm_text.py): an L stack and an H stack of num_layers_per_stack
        layers run H_cycles x L_cycles and H_cycles steps; each step's layer registers its
        own Attention (PrefillPrefixLMAttention, a decoder KV cache), multi-head as the
        reference implementation hardcodes it (num_key_value_heads is not read), heads of
        head_dim (else hidden_size / num_attention_heads). Listed step by step."""
        per_stack = self._int("num_layers_per_stack")
        steps = self._int("H_cycles") * (self._int("L_cycles") + 1)
        heads = self.heads
        if self.cfg.has("head_dim"):
            head_dim = self._int("head_dim")
        else:
            hidden = self._int("hidden_size")
            if hidden % heads:
                raise self.cfg.error("hidden_size", f"is {hidden}, which the {heads} heads "
                                     "do not divide")
            head_dim = hidden // heads
        if per_stack * steps > MAX_LAYERS:
            raise self.cfg.error("H_cycles", f"gives {per_stack * steps:,} cache layers, more "
                                 f"than the {MAX_LAYERS:,} kvplan accepts")
        return [FullAttention(heads, head_dim)] * (per_stack * steps)

    def _plamo3_layers(self) -> list[Layer]:
        """PLaMo 3 (vLLM plamo3.py Plamo3AttentionMixer): layer i's Attention keeps
        num_key_value_heads heads of head_dim within per_layer_sliding_window =
        config.interleaved_sliding_window[i] tokens (null: every token). vLLM reads that list
        as the config holds it; plamo3.py notes that a `sliding_window` list is the same list
        under its original name. A config with a single window (and a pattern) leaves the
        per-layer list to PLaMo's own config code, which kvplan does not run: refused by
        name."""
        n, kv, head_dim = self.num_layers(), self.kv_heads, self.head_dim
        key = "interleaved_sliding_window"
        if not self.cfg.has(key) and isinstance(self.cfg.raw.get("sliding_window"), list):
            key = "sliding_window"
        windows = self.cfg.raw.get(key)
        if not isinstance(windows, list) or len(windows) != n:
            raise self.cfg.error(key, f"must list one window (or null) for each of the {n} "
                                 "layers: vLLM plamo3.py reads interleaved_sliding_window per "
                                 "layer, which PLaMo's own config code derives otherwise")
        out: list[Layer] = []
        for i, w in enumerate(windows):
            if w is None:
                out.append(FullAttention(kv, head_dim))
                continue
            if type(w) is not int or not 0 < w <= MAX_NUMBER:
                raise self.cfg.error(f"{key}[{i}]", "must be a window in tokens "
                                     f"(1 to {MAX_NUMBER:,}) or null for full attention")
            out.append(SlidingWindow(kv, head_dim, window=w))
        return out

    def _domyn_layers(self) -> list[Layer]:
        """Domyn Edge (vLLM domyn_edge.py DomynEdgeDecoderLayer): layer i keeps
        num_key_value_heads heads of per_layer_config[i].head_dim, and a window of
        window_sizes[i][0] + 1 tokens when that is positive (the reference's window (w, 0)
        attends to w + 1 keys), else every token."""
        n, kv = self.num_layers(), self.kv_heads
        lists = {}
        for key in ("per_layer_config", "window_sizes"):
            value = self.cfg.raw.get(key)
            if not isinstance(value, list) or len(value) != n:
                raise self.cfg.error(key, f"must list one entry for each of the {n} layers "
                                     "(vLLM domyn_edge.py reads it per layer)")
            lists[key] = value
        out: list[Layer] = []
        for i, (per, window) in enumerate(zip(lists["per_layer_config"],
                                              lists["window_sizes"], strict=True)):
            if not isinstance(per, dict):
                raise self.cfg.error(f"per_layer_config[{i}]", "must be a mapping with head_dim")
            head_dim = _num(Fields(per, self.cfg.source, self.cfg.where(
                f"per_layer_config[{i}]")), "head_dim")
            if not (isinstance(window, list) and window and type(window[0]) is int):
                raise self.cfg.error(f"window_sizes[{i}]", "must be [window, 0] with a whole "
                                     "number window (-1 or 0 for full attention)")
            w = window[0]
            if w > MAX_NUMBER:
                raise self.cfg.error(f"window_sizes[{i}]", f"is {w:,} tokens, more than "
                                     f"the {MAX_NUMBER:,} kvplan accepts")
            out.append(SlidingWindow(kv, head_dim, window=w + 1) if w > 0
                       else FullAttention(kv, head_dim))
        return out

    def _looped_layers(self) -> list[Layer]:
        """IQuest-LoopCoder (vLLM iquest_loopcoder.py LoopCoderAttention): the decoder runs
        loop_num (default 2) times over the same weights, and each layer builds one Attention
        per pass: the first keeps every token, the others a window of loop_window_size
        (default 64) tokens (its cache_config copy sets sliding_window). Heads of
        hidden_size / num_attention_heads, whatever head_dim says. Listed per decoder layer
        (its full cache, then its windowed ones), so pipeline stages split decoder layers."""
        loops = self._int("loop_num", 2)
        window = self._int("loop_window_size", 64)
        hidden, heads = self._int("hidden_size"), self.heads
        if hidden % heads:
            raise self.cfg.error("hidden_size", f"is {hidden}, which the {heads} heads do not "
                                 "divide")
        head_dim = hidden // heads
        full = FullAttention(self.kv_heads, head_dim)
        windowed = SlidingWindow(self.kv_heads, head_dim, window=window)
        return [x for _ in range(self.num_layers()) for x in [full] + [windowed] * (loops - 1)]

    def _zamba2_layers(self) -> list[Layer]:
        """Zamba2: layers_block_type says "mamba" (a Mamba2 layer) or "hybrid" (the same Mamba2
        layer plus a shared transformer block). The shared block's weights are shared, but
        vLLM gives each hybrid position its own Attention and so its own K/V (zamba2.py
        Zamba2Attention: "KV cache ... per-position"): num_attention_heads heads (no GQA) of
        attention_head_dim = 2 x hidden_size / heads (the block reads the hidden state
        concatenated with the embeddings). Mamba2 state: vLLM's
        get_mamba_state_shape_from_config with inner = mamba_expand x hidden_size."""
        cfg, n = self.cfg, self.num_layers()
        types = cfg.list("layers_block_type")
        if len(types) != n:
            raise cfg.error("layers_block_type", f"lists {len(types)} layers but the model "
                            f"has {n}")
        state = self._mamba2_state("n_mamba_heads", "mamba_headdim", "mamba_d_state",
                                   "mamba_ngroups", "mamba_d_conv",
                                   inner=("mamba_expand", "hidden_size"))
        heads = self.heads
        head_dim = (self._int("attention_head_dim") if cfg.has("attention_head_dim")
                    else 2 * self._int("hidden_size") // heads)
        attention = FullAttention(heads, head_dim)
        out: list[Layer] = []
        for i, kind in enumerate(types):
            if kind == "mamba":
                out.append(state)
            elif kind == "hybrid":
                out += [attention, state]
            else:
                raise cfg.error("layers_block_type", f"layer {i} is {kind!r}; Zamba2 layers "
                                "are mamba or hybrid")
        return out

    def _layer(self, kind: str, field: str, i: int) -> Layer:
        if kind == "none":
            return NoCache()
        if kind == "recurrent":
            return self._recurrent(field, i)
        if kind == "conv":
            return self._short_conv()
        if kind == "indexed":
            raise self.cfg.error(field, f"layer {i} is an indexed (DeepSeek sparse) attention "
                                 "layer but kv_lora_rank is missing",
                                 "kvplan reads DSA indexers only on MLA models")
        if self.mla:
            raise self.cfg.error(field, f"layer {i} is {kind} attention on an MLA model "
                                 "(kv_lora_rank), a combination kvplan does not read")
        kv, head_dim, v_head_dim = self._attention_shape(kind)
        if kind == "full":
            return FullAttention(kv, head_dim, v_head_dim)
        if kind == "sliding":
            if self.window is None:
                raise self.cfg.error("sliding_window", f"is missing but layer {i} is sliding",
                                     "add the window size")
            return SlidingWindow(kv, head_dim, v_head_dim, window=self.window)
        if kind == "chunked":
            return ChunkedLocal(kv, head_dim, v_head_dim,
                                chunk=self._int("attention_chunk_size"))
        return CrossAttention(kv, head_dim, v_head_dim, encoder_tokens=self._vision_tokens())

    def _plain_v_head_dim(self) -> int | None:
        """The V head size of plain attention when it differs from K's (MiMo-V2-Flash), else
        None. With use_mla: false a DeepSeek-style config's v_head_dim is an MLA key that
        plain attention does not read: vLLM deepseek_vl2.py / deepseek_ocr.py then build
        DeepseekForCausalLM (deepseek.py), whose K and V heads are both head_dim wide
        (DeepSeek-OCR's language_config says v_head_dim 0)."""
        if self.cfg.raw.get("use_mla") is False:
            return None
        return self._int("v_head_dim", None)

    def _attention_shape(self, kind: str) -> tuple[int, int, int | None]:
        """(KV heads, K head size, V head size or None) of one attention kind."""
        cfg = self.cfg
        kv, head_dim = self.kv_heads, self.head_dim
        v_head_dim = self._plain_v_head_dim()
        # MiMo-V2-Flash: sliding layers have their own head counts and sizes (swa_*:
        # 8 KV heads x K 192 / V 128, against 4 KV heads on its full layers).
        if kind == "sliding" and any(cfg.has(f"swa_{n}") for n in (
                "num_key_value_heads", "head_dim", "v_head_dim")):
            heads = self._int("swa_num_attention_heads", self.heads)
            if cfg.has("swa_num_key_value_heads"):
                kv = self._check_kv(cfg, "swa_num_key_value_heads",
                                    self._int("swa_num_key_value_heads"), heads)
            head_dim = self._int("swa_head_dim", head_dim)
            v_head_dim = self._int("swa_v_head_dim", v_head_dim)
        # Step-3.5: attention_other_setting gives the layers of one type their own heads,
        # KV groups and head size (vLLM step3p5.py Step3p5DecoderLayer: where layer_types[i]
        # is its attention_type, num_attention_groups KV heads of head_dim)
        other = cfg.raw.get("attention_other_setting")
        if other is not None:
            where = "attention_other_setting"
            if not isinstance(other, dict) or other.get("attention_type") not in (
                    "sliding_attention", "full_attention"):
                raise cfg.error(where, f"is {other!r}; expected a mapping whose "
                                "attention_type is sliding_attention or full_attention")
            if other["attention_type"] == f"{kind}_attention":
                sub = cfg.sub(where)
                heads = _num(sub, "num_attention_heads")
                kv = self._check_kv(sub, "num_attention_groups",
                                    _num(sub, "num_attention_groups"), heads)
                head_dim = _num(sub, "head_dim")
        # Gemma 4: full-attention layers use global_head_dim (512), and with attention_k_eq_v
        # num_global_key_value_heads (2) (Gemma4TextConfig.per_layer_config). attention_k_eq_v
        # shares the K and V *projection* only: K is then RMS-normed and rotated, V only
        # RMS-normed, and both are passed to past_key_values.update (Gemma4TextAttention), so
        # the cache still stores K and V: 2 x heads x 512 per token, no discount.
        if kind == "full" and cfg.has("global_head_dim"):
            head_dim, v_head_dim = self._int("global_head_dim"), None
            # DiffusionGemma (vLLM diffusion_gemma.py) sets attention_k_eq_v = True whatever
            # its config says: its full layers have no v_proj
            k_eq_v = cfg.bool("attention_k_eq_v", False) or self.model_type == \
                "diffusion_gemma_text"
            if k_eq_v and cfg.has("num_global_key_value_heads"):
                kv = self._check_kv(cfg, "num_global_key_value_heads",
                                    self._int("num_global_key_value_heads"), self.heads)
        return kv, head_dim, v_head_dim

    def _mla(self, index_head_dim: int | None) -> MLA:
        return MLA(self._int("kv_lora_rank"), self._int("qk_rope_head_dim"), index_head_dim)

    def _indexer_layers(self, kinds: list[str]) -> list[int | None]:
        """Per layer, the DSA indexer key size (None: no indexer cache on that layer).

        DeepSeek-V3.2 and GLM-5 mark DSA with index_topk (vLLM's test) or, in transformers 5
        configs, "indexed_attention" layer types; each indexer layer caches index_head_dim
        keys. GLM's indexer_types (or index_topk_pattern, or index_topk_freq /
        index_skip_topk_offset) mark "shared" layers that reuse the previous layer's top-k
        and build no indexer (GlmMoeDsaConfig)."""
        cfg, n = self.cfg, len(kinds)
        if not cfg.has("index_topk") and "indexed" not in kinds:
            return [None] * n
        dim = self._int("index_head_dim")
        if cfg.has("indexer_types"):
            modes = cfg.list("indexer_types")
            field = "indexer_types"
        elif cfg.has("index_topk_pattern"):
            pattern = cfg.raw["index_topk_pattern"]
            if not isinstance(pattern, str):
                raise cfg.error("index_topk_pattern", f"must be a string of F and S, got "
                                f"{pattern!r}")
            modes = [{"F": "full", "S": "shared"}.get(c, c) for c in pattern]
            field = "index_topk_pattern"
        else:
            freq = self._int("index_topk_freq", 1)
            offset = self._int("index_skip_topk_offset", 2, minimum=0)
            modes = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared"
                     for i in range(n)]
            field = "index_topk_freq"
        if len(modes) != n:
            raise cfg.error(field, f"describes {len(modes)} layers but the model has {n}")
        out: list[int | None] = []
        for i, mode in enumerate(modes):
            if mode not in ("full", "shared"):
                raise cfg.error(field, f"layer {i} has unknown indexer mode {mode!r}",
                                "known: full, shared")
            out.append(dim if mode == "full" else None)
        return out

    def _block_config_layers(self) -> list[Layer]:
        """Nemotron-NAS / DeciLM (Llama-3.3-Nemotron-Super-49B): each layer's attention in
        block_configs[i].attention: no_op (skipped: no cache), replace_with_linear (a plain
        linear layer: no cache), else n_heads_in_group query heads per KV head and an
        optional window_length (vLLM get_total_num_kv_heads reads the same fields)."""
        cfg = self.cfg
        blocks = cfg.list("block_configs")
        n = self.num_layers()
        if len(blocks) != n:
            raise cfg.error("block_configs", f"lists {len(blocks)} layers but the model has {n}")
        out: list[Layer] = []
        for i, raw in enumerate(blocks):
            block = Fields(raw, cfg.source, f"{cfg.where('block_configs')}[{i}]")
            attn = block.sub("attention")
            if attn.bool("no_op", False) or attn.bool("replace_with_linear", False):
                out.append(NoCache())
                continue
            for unknown in ("sparsify", "num_sink_tokens"):
                if attn.has(unknown):
                    raise attn.error(unknown, "is set; kvplan does not know the cache of that "
                                     "attention variant")
            group = _num(attn, "n_heads_in_group")
            if self.heads % group:
                raise attn.error("n_heads_in_group", f"is {group}, which does not divide the "
                                 f"{self.heads} attention heads")
            kv = self.heads // group
            window = _num(attn, "window_length", None)
            head_dim = self.head_dim
            out.append(SlidingWindow(kv, head_dim, window=window) if window is not None
                       else FullAttention(kv, head_dim))
        return out

    def _vision_tokens(self) -> int:
        """Mllama (Llama 3.2 Vision) cross-attention layers cache the vision tokens of one
        image: max_num_tiles tiles of (image_size / patch_size)^2 patches + 1 class token
        (560 / 14 and 4 tiles: 6,404). Defaults: MllamaVisionConfig (448, 14, 4)."""
        vision = self.top.sub("vision_config") if self.top.has("vision_config") else \
            Fields({}, self.top.source, "vision_config")
        tiles = _num(vision, "max_num_tiles", 4)
        sides = []
        for name, default in (("image_size", 448), ("patch_size", 14)):
            value = vision.raw.get(name, default)
            if isinstance(value, list) and len(value) == 2:
                pair = value
            else:
                pair = [value, value]
            for v in pair:
                if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_NUMBER:
                    raise vision.error(name, f"must be a positive whole number, got {value!r}")
            sides.append(pair)
        (height, width), (patch_h, patch_w) = sides
        return tiles * ((height // patch_h) * (width // patch_w) + 1)

    # --- recurrent states ---------------------------------------------------------------

    def _dtype_bytes(self) -> int:
        return _DTYPE_BYTES[self.dtype]

    def _ssm_dtype_bytes(self) -> int:
        """Bytes of a recurrent (SSM / delta-net) state element. The config's
        mamba_ssm_cache_dtype (Nemotron-3-Nano) or mamba_ssm_dtype (Qwen3.5) when set; else
        fp32 for Nemotron-H (vLLM NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE);
        else the model dtype (vLLM's mamba_ssm_cache_dtype "auto")."""
        name = self.cfg.first(*_STATE_DTYPE_KEYS)
        if name is not None:
            value = self.cfg.raw[name]
            if value == "auto":
                return self._dtype_bytes()
            if not isinstance(value, str) or value not in _DTYPES:
                raise self.cfg.error(name, f"is {value!r}; expected float32, bfloat16, "
                                     "float16 or auto")
            return _DTYPE_BYTES[_DTYPES[value]]
        if self.model_type == "nemotron_h":
            return 4
        return self._dtype_bytes()

    def _recurrent(self, field: str, i: int) -> RecurrentState:
        """The state of a recurrent layer; which mixer it is, its fields say."""
        cfg, mt = self.cfg, self.model_type
        if cfg.has("linear_num_value_heads") or cfg.has("linear_num_key_heads"):
            return self._gdn_state()          # Qwen3-Next / Qwen3.5 gated delta-net
        if cfg.has("mamba_num_heads"):
            return self._mamba2_state(         # Nemotron-H
                "mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups",
                "conv_kernel", inner=None)
        if cfg.has("mamba_n_heads"):
            # Bamba, Granite 4.0-H: inner = mamba_expand x hidden_size (vLLM bamba.py,
            # granitemoehybrid.py); Falcon-H1: mamba_d_ssm (_falcon_h1_d_ssm). Their
            # transformers configs refuse heads x head size != inner (validate_architecture).
            archs = self.top.raw.get("architectures")
            falcon = mt == "falcon_h1" or (isinstance(archs, list)
                                           and "FalconH1ForCausalLM" in archs)
            d_ssm = _falcon_h1_d_ssm(cfg) if falcon else None
            if falcon and d_ssm is None:
                raise cfg.error("mamba_d_ssm", f"is {cfg.raw.get('mamba_d_ssm')!r}; expected "
                                "a whole number (or null with mamba_expand and hidden_size)")
            return self._mamba2_state(
                "mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups",
                "mamba_d_conv", inner=None if falcon else ("mamba_expand", "hidden_size"),
                inner_size=d_ssm, inner_name="mamba_d_ssm, 1024 when absent (FalconH1Config)"
                if falcon else "mamba_expand x hidden_size")
        if mt == "mamba2":
            return self._mamba2_state(         # Mamba2 / Codestral-Mamba
                "num_heads", "head_dim", "state_size", "n_groups", "conv_kernel",
                inner=("expand", "hidden_size"))
        if mt in ("mamba", "falcon_mamba"):
            return self._mamba1_state("state_size", "conv_kernel", "expand", "hidden_size",
                                      "intermediate_size")
        if mt == "jamba" or cfg.has("mamba_d_state"):
            return self._mamba1_state("mamba_d_state", "mamba_d_conv", "mamba_expand",
                                      "hidden_size", None)
        if mt.startswith("minimax") or cfg.has("attn_type_list"):
            return self._lightning_state()
        raise cfg.error(field, f"layer {i} is a linear-attention / recurrent layer but the "
                        "config gives no state sizes kvplan knows (Mamba mamba_*/ssm_*, "
                        "gated delta-net linear_*)",
                        "write the model as a YAML spec (docs/model-schema.md)")

    def _mamba1_state(self, state: str, conv: str, expand: str, hidden: str,
                      inner_name: str | None) -> RecurrentState:
        # Mamba-1 (Jamba, Falcon-Mamba; vLLM mamba1_state_shape): conv (d_conv - 1, inner),
        # ssm (inner, d_state), inner = expand * hidden_size (pure Mamba: intermediate_size).
        # Both in the model dtype (vLLM "auto").
        cfg = self.cfg
        if inner_name is not None and cfg.has(inner_name):
            inner = self._int(inner_name)
        else:
            inner = self._int(expand) * self._int(hidden)
        b = self._dtype_bytes()
        return RecurrentState("mamba1", (
            StateTensor("conv", (self._int(conv, minimum=2) - 1, inner), b, tp_axis=1),
            StateTensor("ssm", (inner, self._int(state)), self._ssm_dtype_bytes(), tp_axis=0),
        ))

    def _mamba2_state(self, heads: str, head_dim: str, state: str, groups: str, conv: str,
                      inner: tuple[str, str] | None, inner_size: int | None = None,
                      inner_name: str | None = None) -> RecurrentState:
        # Mamba2 (vLLM mamba2_state_shape): conv (k - 1, inner + 2 * n_groups * state) in the
        # model dtype; ssm (heads, head_dim, state) in the SSM state dtype. inner is
        # heads * head_dim for Nemotron-H (vLLM nemotron_h.py), expand * hidden_size for
        # Mamba2 and Bamba/Granite (their own files), inner_size when given (Falcon-H1).
        # With inner_name, heads x head_dim must equal the inner size, as the family's
        # transformers config requires.
        cfg = self.cfg
        num_heads, d_state = self._int(heads), self._int(state)
        n_groups = self._int(groups)
        d_inner = (self._int(inner[0]) * self._int(inner[1]) if inner is not None
                   else inner_size)
        raw_dim = cfg.raw.get(head_dim)
        if raw_dim == "auto" and d_inner is not None:
            # Bamba / Granite: mamba_d_head "auto" = the inner size split over the heads.
            if d_inner % num_heads:
                raise cfg.error(head_dim, f"is 'auto' but {num_heads} heads do not divide the "
                                f"inner size {d_inner}")
            d_head = d_inner // num_heads
        else:
            d_head = self._int(head_dim)
        if d_inner is None:
            d_inner = num_heads * d_head
        elif inner_name is not None and num_heads * d_head != d_inner:
            raise cfg.error(head_dim, f"is {d_head}: {num_heads} heads x {d_head} = "
                            f"{num_heads * d_head}, but the Mamba2 inner size ({inner_name}) is "
                            f"{d_inner}; the model's transformers config refuses this",
                            "set the inner size the checkpoint was trained with")
        k = self._int(conv, minimum=2)
        return RecurrentState("mamba2", (
            StateTensor("conv", (k - 1, d_inner + 2 * n_groups * d_state),
                        self._dtype_bytes(), tp_axis=1),
            StateTensor("ssm", (num_heads, d_head, d_state), self._ssm_dtype_bytes(),
                        tp_axis=0),
        ))

    def _gdn_state(self) -> RecurrentState:
        # Qwen3-Next gated delta-net (vLLM gated_delta_net_state_shape): conv
        # (kernel - 1, 2 * Hk * dk + Hv * dv) in the model dtype, recurrent (Hv, dk, dv) in the
        # SSM state dtype (vLLM: the model dtype unless the config names one).
        hk, dk = self._int("linear_num_key_heads"), self._int("linear_key_head_dim")
        hv, dv = self._int("linear_num_value_heads"), self._int("linear_value_head_dim")
        kernel = self._int("linear_conv_kernel_dim", minimum=2)
        return RecurrentState("gated_delta_net", (
            StateTensor("conv", (kernel - 1, 2 * hk * dk + hv * dv),
                        self._dtype_bytes(), tp_axis=1),
            StateTensor("recurrent", (hv, dk, dv), self._ssm_dtype_bytes(), tp_axis=0),
        ))

    def _lightning_state(self) -> RecurrentState:
        # MiniMax-Text-01 lightning attention (vLLM linear_attention_state_shape): one
        # (heads, head_dim, head_dim) state per layer in the model dtype.
        heads, head_dim = self.heads, self.head_dim
        return RecurrentState("lightning", (
            StateTensor("kv", (heads, head_dim, head_dim), self._dtype_bytes(), tp_axis=0),
        ))

    def _short_conv(self) -> RecurrentState:
        # LFM2 short convolutions (vLLM short_conv_state_shape): (conv_L_cache - 1, conv_dim)
        # in the model dtype; conv_dim defaults to hidden_size.
        kernel = self._int("conv_L_cache", minimum=2)
        dim = self._int("conv_dim") if self.cfg.has("conv_dim") else self._int("hidden_size")
        return RecurrentState("short_conv", (
            StateTensor("conv", (kernel - 1, dim), self._dtype_bytes(), tp_axis=1),
        ))
