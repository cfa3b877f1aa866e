"""Which `config.json` architectures kvplan reads, and the keys that decide their cache.

The fail-closed table: every family lists the `model_type`s (and `architectures` names) it
reads and the keys its reader uses to lay out the KV cache. A config is refused (SpecError,
exit 2) when no reader knows its architecture, or when it carries a cache-deciding key its
reader does not model (another family's key, one of `UNMODELLED_KEYS`, or an unknown key whose
name says it shapes the cache, `_CACHE_WORDS`): a number would be a guess.
`--assume-standard-attention` turns each refusal into a warning. docs/architectures.md is
generated from FAMILIES (scripts/gen_architectures.py). The keys come from the engines' model
files: vLLM `vllm/model_executor/models/<family>.py` (`get_kv_cache_spec`,
`get_mamba_state_shape_from_config`) and SGLang `python/sglang/srt/models/<family>.py`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from kvplan.core.errors import SpecError
from kvplan.core.record import record

# Keys every attention reader reads: layer and head counts, head sizes, windows, chunks and
# the per-layer schedule (kvplan.sources.hfconfig._Reader).
_ATTENTION_KEYS = (
    "num_hidden_layers", "n_layer", "num_layers", "n_layers",
    "num_attention_heads", "n_head", "num_heads", "n_heads",
    "num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num",
    "num_attention_groups", "multi_query", "multi_query_attention", "new_decoder_architecture",
    "attn_config", "head_dim", "attention_head_dim", "kv_channels", "hidden_size_per_head",
    "hidden_size", "n_embd", "d_model", "v_head_dim",
    "sliding_window", "sliding_window_size", "use_sliding_window", "max_window_layers",
    "layer_types", "sliding_window_pattern", "_sliding_window_pattern",
    "attention_chunk_size", "no_rope_layers", "no_rope_layer_interval",
    "num_kv_shared_layers",
)
_MLA_KEYS = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "q_lora_rank", "use_mla",
             "index_topk", "index_head_dim", "index_n_heads", "indexer_types",
             "index_topk_pattern", "index_topk_freq", "index_skip_topk_offset", "qk_head_dim")
_MAMBA2_KEYS = ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups",
                "mamba_d_conv", "mamba_expand", "mamba_ssm_cache_dtype", "mamba_ssm_dtype",
                "mamba_d_ssm", "mamba_num_heads", "mamba_head_dim", "ssm_state_size",
                "n_groups", "conv_kernel", "attn_layer_indices", "layers_block_type",
                "hybrid_override_pattern", "attn_layer_period", "attn_layer_offset",
                "mamba_chunk_size", "chunk_size")


# vLLM 0.33.0 registry classes (vllm/model_executor/models/registry.py) read by the decoder
# attention reader: each model file builds one `Attention` per layer from num_key_value_heads
# (or its alias) and head_dim (else hidden_size / num_attention_heads), with
# per_layer_sliding_window=config.sliding_window on the layers layer_types calls sliding
# (afmoe.py, whose config builds layer_types from global_attn_every_n_layers when it has
# none; exaone4.py, exaone_moe.py, flint.py, beam/nvidia/attention.py, muse_glimmer.py,
# k2_horizon.py, hy_v3.py, hyperclovax.py, param2moe.py, step1.py; rnj1.py's chunked_attention
# layers too, whose window is sliding_window; vllm/models/muse_spark, whose per-cycle windows
# (global_attn_cfg) apply to its draft only ...). The multimodal
# wrappers build their language model from the nested text config
# (init_vllm_registered_model(hf_config=config.text_config)), so its own model_type picks
# the reader: aria.py, bagel.py, bee.py, blip2.py, cohere2_vision.py, cohere_compass.py,
# cosmos3.py, eagle2_5_vl.py, funaudiochat.py, glmasr.py, granite_speech.py, h2ovl.py,
# hyperclovax_vision_v2.py, internvl.py, interns1.py, isaac.py, kanana_v.py, keye.py,
# lightonocr.py, llava_onevision2.py, midashenglm.py, moss_audio.py, nvlm_d.py, opencua.py,
# openvla.py, ovis.py, ovis2_5.py, paddleocr_vl.py, phi4siglip.py, qianfan_ocr.py,
# qwen2_5_omni_thinker.py, qwen3_omni_moe_thinker.py, qwen3_asr.py, rvl.py, skyworkr1v.py,
# step_vl.py, ultravox.py, voxtral.py ...
_ATTENTION_ARCHITECTURES = (
    "AfmoeForCausalLM", "Alpamayo2Super", "ApertusForCausalLM", "ArceeForCausalLM",
    "AriaForConditionalGeneration", "AudioFlamingo3ForConditionalGeneration",
    "BagelForConditionalGeneration", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM",
    "BeamForCausalLM", "BeeForConditionalGeneration", "Blip2ForConditionalGeneration",
    "BloomForCausalLM", "ChatGLMForConditionalGeneration", "ChatGLMModel",
    "Cohere2ForCausalLM", "Cohere2MoeForCausalLM", "Cohere2VisionForConditionalGeneration",
    "CohereCompassForConditionalGeneration", "CohereForCausalLM",
    "Cosmos3ForConditionalGeneration", "CwmForCausalLM", "DbrxForCausalLM",
    "DotsOCRForCausalLM", "Eagle2_5_VLForConditionalGeneration", "Emu3ForConditionalGeneration",
    "Ernie4_5ForCausalLM", "Ernie4_5_MoeForCausalLM", "Ernie4_5_VLMoeForConditionalGeneration",
    "Exaone4ForCausalLM", "Exaone4_5_ForConditionalGeneration", "ExaoneForCausalLM",
    "ExaoneMoEForCausalLM", "ExaoneMoeForCausalLM", "FalconForCausalLM",
    "FireRedASR2ForConditionalGeneration", "FlexOlmoForCausalLM", "FlintForCausalLM",
    "FunASRForConditionalGeneration", "FunAudioChatForConditionalGeneration",
    "GLM4VForCausalLM", "GPT2LMHeadModel", "GPTBigCodeForCausalLM", "GPTJForCausalLM",
    "GPTNeoXForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM",
    "Gemma3ForConditionalGeneration", "GemmaForCausalLM", "Glm4ForCausalLM",
    "Glm4MoeForCausalLM", "Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration",
    "GlmAsrForConditionalGeneration", "GlmForCausalLM", "GlmOcrForConditionalGeneration",
    "GptOssForCausalLM", "Granite4VisionForConditionalGeneration", "GraniteForCausalLM",
    "GraniteMoeForCausalLM", "GraniteMoeSWAForCausalLM", "GraniteMoeSharedForCausalLM",
    "GraniteSWAForCausalLM", "GraniteSpeechForConditionalGeneration",
    "GraniteSpeechPlusForConditionalGeneration", "H2OVLChatModel", "HCXVisionV2ForCausalLM",
    "HYV3ForCausalLM", "HfMoondream", "HunYuanDenseV1ForCausalLM", "HunYuanMoEV1ForCausalLM",
    "HunYuanVLForConditionalGeneration", "HyperCLOVAXForCausalLM", "IQuestCoderForCausalLM",
    "Idefics3ForConditionalGeneration", "InternLM2ForCausalLM", "InternLM3ForCausalLM",
    "InternS1ForConditionalGeneration", "InternS1ProForConditionalGeneration",
    "InternVLChatModel", "InternVLForConditionalGeneration", "IsaacForConditionalGeneration",
    "Jais2ForCausalLM", "K2HorizonForCausalLM", "KananaVForConditionalGeneration",
    "KeyeForConditionalGeneration", "KeyeVL1_5ForConditionalGeneration", "Kolibri1ForCausalLM",
    "LLaMAForCausalLM", "LagunaForCausalLM", "LightOnOCRForConditionalGeneration",
    "Llama4ForCausalLM", "Llama4ForConditionalGeneration", "LlamaForCausalLM",
    "Llama_Nemotron_Nano_VL", "LlavaForConditionalGeneration",
    "LlavaNextForConditionalGeneration", "LlavaNextVideoForConditionalGeneration",
    "LlavaOnevision2ForConditionalGeneration", "LlavaOnevisionForConditionalGeneration",
    "MellumForCausalLM", "MiDashengLMModel", "MiMoForCausalLM", "MiniCPMForCausalLM",
    "MiniCPMO", "MiniCPMV", "Ministral3ForCausalLM", "Mistral3ForConditionalGeneration",
    "MistralForCausalLM", "MixtralForCausalLM", "Molmo2ForConditionalGeneration",
    "MolmoForCausalLM", "Moondream3ForCausalLM", "MoonshotKimiaForCausalLM", "MossAudioModel",
    "MossTranscribeDiarizeForConditionalGeneration", "MuseGlimmerForCausalLM",
    "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration", "NVLM_D",
    "NanbeigeForCausalLM",
    "NemotronForCausalLM", "OPTForCausalLM", "Olmo2ForCausalLM", "Olmo3ForCausalLM",
    "OlmoForCausalLM", "OlmoeForCausalLM", "OpenCUAForConditionalGeneration",
    "OpenPanguVLForConditionalGeneration", "OpenVLAForActionPrediction", "OrionForCausalLM",
    "Ovis", "Ovis2_5", "Ovis2_6ForCausalLM", "Ovis2_6_MoeForCausalLM",
    "PaddleOCRVLForConditionalGeneration", "PaliGemmaForConditionalGeneration",
    "PanguEmbeddedForCausalLM", "Param2MoEForCausalLM", "Phi3ForCausalLM", "Phi3VForCausalLM",
    "Phi4ForCausalLMV", "Phi4MMForCausalLM", "PhiForCausalLM", "PhiMoEForCausalLM",
    "PixtralForConditionalGeneration", "QianfanOCRForConditionalGeneration",
    "Qwen2AudioForConditionalGeneration", "Qwen2ForCausalLM", "Qwen2MoeForCausalLM",
    "Qwen2VLForConditionalGeneration", "Qwen2_5OmniForConditionalGeneration",
    "Qwen2_5OmniModel", "Qwen2_5_VLForConditionalGeneration",
    "Qwen3ASRForConditionalGeneration", "Qwen3ASRRealtimeGeneration", "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM", "Qwen3OmniMoeForConditionalGeneration",
    "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
    "RForConditionalGeneration", "Rnj1ForCausalLM", "SarvamMoEForCausalLM",
    "SeedOssForCausalLM",
    "SkyworkR1VChatModel", "SmolLM3ForCausalLM", "SmolVLMForConditionalGeneration",
    "SolarForCausalLM", "StableLmForCausalLM", "Starcoder2ForCausalLM", "Step1ForCausalLM",
    "Step3TextForCausalLM", "Step3VLForConditionalGeneration", "Step3p5ForCausalLM",
    "Step3p7ForConditionalGeneration", "StepVLForConditionalGeneration",
    "TeleChat2ForCausalLM", "TeleChat3ForCausalLM", "TeleFLMForCausalLM", "UltravoxModel",
    "VaultGemmaForCausalLM", "VibeVoiceAsrForConditionalGeneration",
    "VoxtralForConditionalGeneration", "VoxtralRealtimeGeneration",
)


@record
class Family:
    """One reader: the architectures it reads and the keys that decide their cache."""

    name: str
    model_types: tuple[str, ...]
    cache_keys: tuple[str, ...]
    engines: str  # where the layout is read in the engines (vLLM / SGLang model files)
    architectures: tuple[str, ...] = ()
    # key prefixes of the family's own non-cache settings (Mamba's dt limits, conv biases)
    benign_prefixes: tuple[str, ...] = ()


FAMILIES: tuple[Family, ...] = (
    Family(
        "Decoder attention (full, GQA/MQA, sliding window, chunked local)",
        ("llama", "mistral", "mixtral", "ministral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
         "gemma", "gemma2", "gemma3", "gemma3_text", "cohere", "cohere2", "phi", "phi3",
         "phimoe", "gpt2", "gpt_neox", "gptj", "gpt_neo", "gpt_bigcode", "starcoder2", "falcon",
         "mpt", "dbrx", "bloom", "opt", "olmo", "olmo2", "olmo3", "olmoe", "internlm",
         "internlm2", "internlm3", "baichuan", "chatglm", "glm", "glm4", "glm4_moe", "granite",
         "granitemoe", "granitemoeshared", "stablelm", "exaone", "exaone4", "ernie4_5",
         "ernie4_5_moe", "hunyuan_v1_dense", "hunyuan_v1_moe", "seed_oss", "apertus", "arcee",
         "smollm3", "minicpm", "nemotron", "gpt_oss", "llama4", "llama4_text", "mistral3",
         "llava", "llava_next", "llava_next_video", "llava_onevision", "vipllava", "idefics3",
         "internvl", "internvl_chat", "aya_vision", "qwen2_vl", "qwen2_5_vl", "qwen3_vl",
         "qwen3_vl_moe", "qwen2_vl_text", "qwen2_5_vl_text", "qwen3_vl_text",
         "qwen3_vl_moe_text", "bailing_moe", "RefinedWebModel", "RefinedWeb", "dots1",
         "laguna", "step3_text", "step3p5", "step3p7", "xverse", "orion", "solar",
         "persimmon", "codegen", "jais", "mimo", "qwen", "ministral3", "glm4v", "glm4v_text",
         "glm4v_moe", "glm4v_moe_text", "paligemma", "smolvlm", "idefics2", "pixtral",
         "kimi_vl", "phi-msft", "phi3_v", "phi4mm",
         # added from vLLM 0.33's registry (their model files under _ATTENTION_ARCHITECTURES)
         "afmoe", "aria", "aria_text", "bailing_moe_v2", "beam", "cohere2_moe",
         "cohere2_vision", "cwm", "dots_ocr", "emu3", "emu3_text", "exaone4_5",
         "exaone4_5_text", "exaone_moe", "flex_olmo", "flint", "glm_ocr", "glm_ocr_text",
         "hunyuan", "hy_v3", "hyperclovax", "jais2", "minicpmv", "minicpmo", "ultravox",
         "voxtral", "voxtral_text", "qwen2_audio", "qwen2_audio_encoder", "qwen2_5_omni",
         "qwen2_5_omni_thinker", "qwen2_5_omni_text", "qwen3_omni_moe",
         "qwen3_omni_moe_thinker", "qwen3_omni_moe_text", "qwen3_asr", "qwen3_asr_text",
         "vaultgemma", "granite_speech", "llava_onevision2", "molmo", "molmo2", "bagel",
         "blip-2", "ernie4_5_moe_vl", "telechat", "telechat2", "teleflm",
         "glm_asr", "audioflamingo3", "h2ovl_chat", "skywork_chat", "nvlm_d", "ovis",
         "step1", "param2moe", "k2_horizon", "muse_spark", "muse_spark_text",
         "musespark1x_text"),
        _ATTENTION_KEYS + ("attention_types", "window_size"),
        "vLLM `Attention` layers -> FullAttentionSpec / SlidingWindowSpec / "
        "ChunkedLocalAttentionSpec; SGLang MHATokenToKVPool / SWAKVPool",
        _ATTENTION_ARCHITECTURES,
    ),
    Family(
        "Gemma 3n / Gemma 4 (per-type head sizes, cross-layer KV sharing)",
        ("gemma3n", "gemma3n_text", "gemma4", "gemma4_text", "diffusion_gemma",
         "diffusion_gemma_text"),
        _ATTENTION_KEYS + ("global_head_dim", "attention_k_eq_v", "num_global_key_value_heads"),
        "vLLM gemma3n.py / gemma4.py: the last num_kv_shared_layers set "
        "kv_sharing_target_layer_name and allocate no cache",
        ("Gemma3nForConditionalGeneration", "Gemma3nForCausalLM", "Gemma4ForCausalLM",
         "Gemma4ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration",
         # diffusion_gemma.py: a Gemma4Model backbone writes the cache in its causal
         # (encoder) mode; the bidirectional decoder mode reads it and writes nothing
         "DiffusionGemmaForBlockDiffusion"),
        ("altup", "laurel"),
    ),
    Family(
        "MiMo-V2-Flash (hybrid full/sliding with per-kind shapes)",
        ("mimo_v2_flash", "mimo_v2"),
        _ATTENTION_KEYS + ("hybrid_layer_pattern", "swa_num_attention_heads",
                           "swa_num_key_value_heads", "swa_head_dim", "swa_v_head_dim"),
        "vLLM mimo_v2.py: SlidingWindowSpec with swa_* shapes (mimo_v2_omni.py wraps it)",
        ("MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM", "MiMoV2OmniForCausalLM"),
        benign_prefixes=("add_swa_attention_sink", "add_full_attention_sink", "swa_rope",
                         "sliding_window_attention"),
    ),
    Family(
        "Llama-Nemotron NAS (per-layer block_configs)",
        ("nemotron-nas", "deci", "decilm"),
        _ATTENTION_KEYS + ("block_configs",),
        "vLLM nemotron_nas.py: no_op / replace_with_linear layers have no attention",
        ("DeciLMForCausalLM",),
    ),
    Family(
        "Mllama (Llama 3.2 Vision: cross-attention to image tokens)",
        ("mllama", "mllama_text_model"),
        _ATTENTION_KEYS + ("cross_attention_layers",),
        "vLLM mllama.py: CrossAttentionSpec sized by the vision tokens (not in vLLM 0.33's "
        "registry: MllamaForConditionalGeneration is listed as previously supported)",
    ),
    Family(
        "MLA (DeepSeek V2/V3/R1, Kimi K2, MiniCPM3) and DSA indexers (DeepSeek-V3.2, GLM-5)",
        ("deepseek", "deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "kimi_k25",
         "glm_moe_dsa", "minicpm3", "deepseek_vl_v2", "mistral_large_3", "glm4_moe_lite",
         "deepseek_ocr", "sarvam_mla", "pangu_ultra_moe", "hy_v4"),
        _ATTENTION_KEYS + _MLA_KEYS,
        "vLLM MLAAttention -> MLAAttentionSpec, DeepseekV32IndexerCache; SGLang MLATokenToKVPool, "
        "DSATokenToKVPool",
        # AXK1.py, deepseek_v2.py, deepseek_v32, deepseek_vl2.py, deepseek_ocr(2).py,
        # glm4_moe_lite.py (Glm4MoeLiteMLAAttention(DeepseekV2MLAAttention)), kimi_k25.py,
        # kimi_vl.py (a deepseek_v3 text config), minicpm3.py, mistral_large_3.py, sarvam.py
        # (SarvamMLAAttention), openpangu.py (OpenPanguMLAAttention when kv_lora_rank is set)
        ("AXK1ForCausalLM", "DeepseekForCausalLM", "DeepseekV2ForCausalLM",
         "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekVLV2ForCausalLM",
         "DeepseekOCRForCausalLM", "DeepseekOCR2ForCausalLM", "UnlimitedOCRForCausalLM",
         "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "KimiK25ForConditionalGeneration",
         "KimiVLForConditionalGeneration", "MiniCPM3ForCausalLM", "MistralLarge3ForCausalLM",
         "SarvamMLAForCausalLM", "PanguUltraMoEForCausalLM", "PanguProMoEV2ForCausalLM",
         # vllm/models/hy_v4: MLAAttention, and a DeepseekV32IndexerCache on its sparse
         # layers (hyper-connections and the attention sink hold no cache)
         "HYV4ForCausalLM"),
        ("indexer_rope", "hc_", "enable_ihc"),
    ),
    Family(
        "LongCat-Flash (two MLA attentions per decoder layer)",
        ("longcat_flash",),
        _ATTENTION_KEYS + _MLA_KEYS,
        "vLLM longcat_flash.py FlashDecoderLayer: two DeepseekV2MLAAttention (two "
        "MLAAttentionSpec) per each of num_layers decoder layers; longcat_flash_ngram.py the "
        "same layers under an n-gram embedding",
        ("LongcatFlashForCausalLM", "LongcatFlashNgramForCausalLM"),
        ("mla_scale", "zero_expert", "emb_", "ngram"),
    ),
    Family(
        "DeepSeek-V4 compressed attention (sliding window + ratio-4/128 compressed KV, indexer)",
        ("deepseek_v4", "deepseek_ref"),
        _ATTENTION_KEYS + _MLA_KEYS + ("compress_ratios", "o_lora_rank", "o_groups",
                                       "compress_rope_theta"),
        "SGLang pool_configurator.py DSV4PoolConfigurator; vLLM models/deepseek_v4/attention.py "
        "(DeepseekV4SWACache, MLAAttentionSpec compress_ratio, DeepseekV4IndexerCache); "
        "vLLM 0.33's groups planned on SM 9.x/10.x (checked against vLLM's own planner, "
        "docs/engine-accuracy.md §6); SGLang's pools refused",
        ("DeepseekV4ForCausalLM", "DeepseekV4ForConditionalGeneration"),
        ("hc_",),
    ),
    Family(
        "Kimi-Linear (MLA full layers + KDA linear attention)",
        ("kimi_linear",),
        _ATTENTION_KEYS + _MLA_KEYS + ("linear_attn_config", "mla_use_nope"),
        "vLLM kimi_linear.py: MLAAttentionSpec on full_attn_layers, MambaSpec kda_state_shape "
        "on kda_layers",
        ("KimiLinearForCausalLM", "KimiK3ForConditionalGeneration"),
    ),
    Family(
        "IQuest-LoopCoder (looped layers: loop_num passes over the same weights)",
        ("iquest_loopcoder",),
        _ATTENTION_KEYS + ("loop_num", "loop_window_size"),
        "vLLM iquest_loopcoder.py LoopCoderAttention: one Attention per pass and layer, the "
        "first full, the later ones SlidingWindowSpec(loop_window_size)",
        ("IQuestLoopCoderForCausalLM",),
    ),
    Family(
        "HRM-Text (two stacks run H_cycles x (L_cycles + 1) steps, one cache per step)",
        ("hrm_text",),
        _ATTENTION_KEYS + ("H_cycles", "L_cycles", "num_layers_per_stack"),
        "vLLM hrm_text.py HrmTextAttention: a PrefillPrefixLMAttention (a decoder KV cache) per "
        "recurrence step and stack layer, multi-head (num_key_value_heads not read)",
        ("HrmTextForCausalLM",),
    ),
    Family(
        "Dory (recurrent layers looped n_recurrent_loops times, a cache per loop or shared)",
        ("dory",),
        _ATTENTION_KEYS + ("n_recurrent_loops", "n_recurrent_layers", "n_input_layers",
                           "recurrent_kv_cache_mode"),
        "vLLM dory.py DoryAttention: recurrent layers (n_input_layers <= i < n_input_layers + "
        "n_recurrent_layers) keep one Attention per loop when recurrent_kv_cache_mode is "
        "per_loop, else one; mlp layers none",
        ("DoryForCausalLM",),
    ),
    Family(
        "Domyn Edge (a head size and a window per layer)",
        ("domyn_edge", "domynedge"),
        _ATTENTION_KEYS + ("per_layer_config", "window_sizes", "position_layers"),
        "vLLM domyn_edge.py DomynEdgeAttention: head_dim per_layer_config[i].head_dim, "
        "per_layer_sliding_window window_sizes[i][0] + 1 where positive",
        ("DomynEdgeForCausalLM",),
    ),
    Family(
        "PLaMo 3 (a window per layer)",
        ("plamo3",),
        _ATTENTION_KEYS + ("interleaved_sliding_window",),
        "vLLM plamo3.py Plamo3AttentionMixer: num_key_value_heads heads of head_dim, "
        "per_layer_sliding_window interleaved_sliding_window[i] (null: full)",
        ("Plamo3ForCausalLM",),
    ),
    Family(
        "Ling 2.5 / Bailing V2.5 (lightning linear attention beside MLA)",
        ("bailing_moe_linear",),
        _ATTENTION_KEYS + _MLA_KEYS + ("layer_group_size",),
        "vLLM bailing_moe_linear.py: layer i is BailingMoELinearAttention (a MambaSpec of "
        "linear_attention_state_shape: heads x head_dim x head_dim) unless (i + 1) % "
        "layer_group_size == 0, then BailingMoeV25MLAAttention (MLAAttentionSpec)",
        ("BailingMoeV2_5ForCausalLM",),
    ),
    Family(
        "Alice AI (Kimi delta attention beside gated attention)",
        ("alice_ai",),
        _ATTENTION_KEYS + ("linear_num_key_heads", "linear_key_head_dim",
                           "linear_conv_kernel_dim", "linear_num_value_heads",
                           "linear_value_head_dim"),
        "vLLM alice_ai.py: linear_attention layers KimiGatedDeltaNetAttention (MambaSpec "
        "kda_state_shape of linear_num_key_heads x linear_key_head_dim), full_attention "
        "layers Qwen3NextAttention",
        ("AliceAIForCausalLM",),
    ),
    Family(
        "Ling 3 / Bailing V3 (Kimi delta attention beside MLA)",
        ("bailing_moe_v3",),
        _ATTENTION_KEYS + _MLA_KEYS + ("layer_group_size", "short_conv_kernel_size"),
        "vLLM bailing_moe_v3.py: _is_kda_layer layers BailingMoeV3KimiDeltaAttention (MambaSpec "
        "kda_state_shape of num_attention_heads x head_dim), the others BailingMoeV3MLAAttention "
        "(MLAAttentionSpec)",
        # bailing_moe_v3_vl.py sizes the state from its text_config the same way
        ("BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration"),
    ),
    Family(
        "Whisper (encoder-decoder: self-attention + cross-attention to 1,500 encoder frames)",
        ("whisper",),
        ("decoder_layers", "decoder_attention_heads", "d_model", "max_source_positions",
         "max_target_positions", "encoder_layers", "encoder_attention_heads",
         "is_encoder_decoder", "num_hidden_layers"),
        "vLLM whisper.py: Attention + CrossAttention (CrossAttentionSpec) per decoder layer",
        ("WhisperForConditionalGeneration",),
        ("encoder_", "decoder_", "num_mel_bins", "apply_spec_augment", "mask_", "median_"),
    ),
    Family(
        "Nemotron Parse (a RADIO encoder and an mBART decoder: self-attention and "
        "cross-attention to the image's encoder tokens; Parse 3.5 a causal image prefix)",
        ("nemotron_parse", "nemotron_parse3_5"),
        ("decoder_layers", "decoder_attention_heads", "d_model", "image_size",
         "self_attention_kv_heads", "add_cross_attention", "causal_vision_prefix",
         "is_encoder_decoder"),
        "vLLM nemotron_parse.py: WhisperAttention + WhisperCrossAttention (CrossAttentionSpec "
        "over get_num_image_tokens) per decoder layer; nemotron_parse3_5.py: "
        "NemotronParseSelfAttention only",
        ("NemotronParseForConditionalGeneration", "RadioMBartPrefixForCausalLM"),
        ("encoder_", "decoder_"),
    ),
    Family(
        "Mamba2 / Mamba hybrids (Jamba, Bamba, Granite-4.0-H, Nemotron-H; Falcon-H1 with "
        "attention and Mamba2 side by side in every layer)",
        ("jamba", "bamba", "granitemoehybrid", "nemotron_h", "falcon_h1"),
        _ATTENTION_KEYS + _MAMBA2_KEYS + ("attn_layer_indices",),
        "vLLM MambaSpec via get_mamba_state_shape_from_config (jamba.py, bamba.py, "
        "granitemoehybrid.py, nemotron_h.py, falcon_h1.py)",
        # nano_nemotron_vl.py and cosmos3_edge.py wrap a nemotron_h language model
        ("JambaForCausalLM", "BambaForCausalLM", "GraniteMoeHybridForCausalLM",
         "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "FalconH1ForCausalLM",
         "NemotronH_Nano_VL_V2", "NemotronH_Nano_Omni_Reasoning_V3",
         "NemotronH_Super_Omni_Reasoning_V3", "NemotronH_Omni_Reasoning_V3",
         "Cosmos3EdgeForConditionalGeneration"),
        ("mamba_", "ssm_", "time_step", "use_mamba", "mamba", "projectors_bias",
         "lm_head_multiplier", "key_multiplier", "attention_in_multiplier",
         "attention_out_multiplier", "ssm_multipliers", "ssm_in_multiplier",
         "ssm_out_multiplier", "mlp_multipliers"),
    ),
    Family(
        "Zamba2 (Mamba2 layers; hybrid ones add a shared attention block with its own K/V)",
        ("zamba2",),
        _ATTENTION_KEYS + ("layers_block_type", "hybrid_layer_ids", "num_mem_blocks",
                           "n_mamba_heads", "mamba_headdim", "mamba_d_state", "mamba_ngroups",
                           "mamba_d_conv", "mamba_expand", "attention_hidden_size",
                           "use_shared_attention_adapter", "use_shared_mlp_adapter",
                           "adapter_rank", "use_mem_rope"),
        "vLLM zamba2.py: MambaMixer2 per layer, an Attention per hybrid position",
        ("Zamba2ForCausalLM",),
        ("mamba_", "time_step", "use_", "chunk_size"),
    ),
    Family(
        "Gated delta-net hybrids (Qwen3-Next, Qwen3.5, OLMo-Hybrid)",
        ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text",
         "olmo_hybrid"),
        _ATTENTION_KEYS + ("full_attention_interval", "linear_conv_kernel_dim",
                           "linear_key_head_dim", "linear_value_head_dim",
                           "linear_num_key_heads", "linear_num_value_heads",
                           "mamba_ssm_dtype"),
        "vLLM qwen3_next.py / qwen3_5.py / olmo_hybrid.py: MambaSpec "
        "gated_delta_net_state_shape (interns2_preview.py, interns2_mobius.py, minicpmv4_6.py, "
        "minicpmv4_7.py, minicpm_ocr.py wrap a qwen3_5 language model)",
        ("Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM",
         "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
         "OlmoHybridForCausalLM", "InternS2PreviewForConditionalGeneration",
         "InternS2MobiusForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration",
         "MiniCPMV4_7ForConditionalGeneration", "MiniCPMOcrForConditionalGeneration"),
    ),
    Family(
        "MiniMax lightning-attention hybrids (MiniMax-Text-01, MiniMax-M1)",
        ("minimax", "minimax_text_01", "minimax_m1", "minimax_m2"),
        _ATTENTION_KEYS + ("attn_type_list", "layernorm_full_attention_alpha"),
        "vLLM minimax_text_01.py: MambaSpec linear_attention_state_shape",
        ("MiniMaxText01ForCausalLM", "MiniMaxM1ForCausalLM", "MiniMaxM2ForCausalLM"),
        ("layernorm_", "postnorm", "block_size"),
    ),
    Family(
        "LFM2 (short convolutions + attention)",
        ("lfm2", "lfm2_moe", "lfm2_vl"),
        _ATTENTION_KEYS + ("full_attn_idxs", "conv_L_cache", "conv_dim", "conv_bias",
                           "conv_use_xavier_init", "conv_dim_out"),
        "vLLM lfm2.py: MambaSpec short_conv_state_shape",
        ("Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "Lfm2VlForConditionalGeneration"),
    ),
    Family(
        "Attention-free state models (Mamba, Falcon-Mamba, Mamba-2)",
        ("mamba", "falcon_mamba", "mamba2"),
        ("num_hidden_layers", "n_layer", "hidden_size", "state_size", "conv_kernel", "expand",
         "intermediate_size", "num_heads", "head_dim", "n_groups", "chunk_size",
         "time_step_rank", "mamba_ssm_cache_dtype"),
        "vLLM mamba.py / mamba2.py: one MambaSpec per layer, no KV",
        ("MambaForCausalLM", "Mamba2ForCausalLM", "FalconMambaForCausalLM"),
        ("time_step", "use_", "rescale_prenorm", "residual_in_fp32"),
    ),
)

# Keys known to change the cache layout that no reader here models. The engines' model
# files show each one allocating something other than one K/V (or latent) row per token.
UNMODELLED_KEYS: dict[str, str] = {
    "compress_ratios": "DeepSeek-V4 compressed attention: per layer, one compressed entry per "
                       "4 or 128 tokens beside a sliding window, and indexer keys",
    "kv_source_layer_ids": "layers that read another layer's K/V (cross-layer KV sharing)",
    "kv_source_layers": "layers that read another layer's K/V (cross-layer KV sharing)",
    "index_source_layer_ids": "layers that reuse another layer's indexer keys",
    "yoco_cross_layer": "YOCO cross-decoder layers reuse one self-decoder layer's K/V",
    "yoco_kv": "YOCO cross-decoder layers reuse one self-decoder layer's K/V",
    "mb_per_layer": "Phi-4-mini-flash (SambaY): Mamba / sliding / GMU layers and a YOCO "
                    "cross-decoder",
    "sparse_attention_config": "MiniMax sparse attention: an indexer pool beside the K/V",
    "linear_attn_config": "Kimi-Linear KDA linear attention: a recurrent state per layer",
    "attention_window_size": "a per-layer attention window (Phi-4-mini-flash, Zamba)",
    "hybrid_layer_ids": "Zamba hybrid layers (a Mamba block plus a shared attention block)",
    "num_mem_blocks": "Zamba2 shared transformer blocks",
    "rwkv_version": "RWKV: a recurrent state, no KV",
    "attention_hidden_size": "RWKV: a recurrent state, no KV",
    "block_types": "per-layer block kinds kvplan does not read",
    # Hunyuan's remote code: cross-layer attention, every cla_share_factor layers share K/V
    "use_cla": "cross-layer attention (Hunyuan CLA): groups of layers share one K/V",
    # openpangu.py OpenPanguSinkAttention -> StaticSinkAttention: sink blocks per request
    "param_sink_number": "static sink tokens (openPangu): K/V blocks kept per request beside "
                         "the sequence's own",
    "interleaved_sliding_window": "a per-layer list of windows (PLaMo 3, openPangu)",
    "n_recurrent_loops": "looped layers, each pass with its own K/V (Dory)",
}

# Words in a key's name that say it shapes the cache. An unknown key with one (and a value
# that is set) is refused: kvplan cannot know what it does to the layout.
_CACHE_WORDS = re.compile(
    r"compress_ratio|compression_ratio|kv_compress|compressed_(kv|attention|cache)|kv_?shar|shared?_kv|share_kv|kv_source|kv_reuse|reuse_kv|yoco|cross_?decoder|"
    r"cross_?layer|kv_lora|mamba|ssm|linear_attn|linear_attention|lightning|kda|rwkv|"
    r"recurrent|d_state|state_size|sliding|(^|_)swa_|sparse|indexer_types|index_source|"
    r"layer_types|block_type|attn_type|attention_type|kv_cache|num_kv|kv_heads?$|"
    r"key_value_heads|kv_group|cross_attention|window|loop|cycles")

# Keys transformers' PretrainedConfig writes with defaults (older configs saved them all),
# and common keys that name a cache word but decide nothing about the layout.
_BENIGN_KEYS = frozenset({
    "use_cache", "chunk_size_feed_forward", "add_cross_attention",
    "cross_attention_hidden_size", "is_encoder_decoder", "tie_encoder_decoder",
    "mlp_layer_types", "num_attention_heads_per_layer", "rope_local_base_freq",
    "sliding_window_rope_theta", "rope_parameters", "partial_rotary_factor",
    "index_n_heads", "head_dim_scale", "qk_layernorm", "use_qk_norm", "attention_dropout",
    "attn_pdrop", "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers",
    "sliding_window_pattern_offset", "query_pre_attn_scalar", "cache_implementation",
    "kv_cache_quant_algo", "image_token_index", "video_token_index", "context_window_size",
})
# Prefixes of settings that never shape the cache (RoPE, the towers of multimodal wrappers,
# multi-token-prediction layers, which serve as a draft outside the model's own cache).
_BENIGN_PREFIXES = ("rope", "vision_", "audio_", "image_", "video_", "mtp_")

# Architectures refused by name: what their cache is and why kvplan does not size it.
REFUSED: dict[str, str] = {
    "zamba": "Zamba's hybrid layers add a shared attention block (its own K/V per use) to a "
             "Mamba layer",
    "rwkv": "RWKV keeps a recurrent state (no KV cache) that no engine kvplan models serves",
    "rwkv5": "RWKV keeps a recurrent state (no KV cache) that no engine kvplan models serves",
    "rwkv6": "RWKV keeps a recurrent state (no KV cache) that no engine kvplan models serves",
    "rwkv7": "RWKV keeps a recurrent state (no KV cache) that no engine kvplan models serves",
    "phi4flash": "Phi-4-mini-flash (SambaY) mixes Mamba, sliding-window and GMU layers and a "
                 "YOCO cross-decoder that reuses one layer's K/V",
    "bert": "an encoder-only model: no decoder, so no KV cache to plan",
    "roberta": "an encoder-only model: no decoder, so no KV cache to plan",
    "xlm-roberta": "an encoder-only model: no decoder, so no KV cache to plan",
    "modernbert": "an encoder-only model: no decoder, so no KV cache to plan",
    "minimax_m3": "MiniMax-M3's sparse attention keeps an indexer pool beside the K/V "
                  "(sparse_attention_config)",
    "minimax_m3_vl": "MiniMax-M3's sparse attention keeps an indexer pool beside the K/V "
                     "(sparse_attention_config)",
}


_ENC_DEC = ("an encoder-decoder: every decoder layer keeps a cross-attention cache as long as "
            "the encoder's output, which config.json does not fix")
# vLLM 0.33.0 registry classes refused by name, whatever their model_type says (vLLM picks
# the implementation by class): the cache each allocates that kvplan does not model, from
# its model file (vllm/model_executor/models/<module>.py or vllm/models/<package>).
REFUSED_ARCHITECTURES: dict[str, str] = {
    "CohereAsrForConditionalGeneration": _ENC_DEC + " (cohere_asr.py)",
    "DeepseekV41ForCausalLM": "DeepSeek-V4.1 compressed sparse attention (its own compressor "
                              "and sparse MLA caches, vllm/models/deepseek_v41)",
    "Dots3NoteForCausalLM": "cross-layer KV sharing and an indexer beside MLA "
                            "(vllm/models/dots3_note)",
    "Glm5NextForCausalLM": "recurrent-state mixers beside MLA with an indexer "
                           "(vllm/models/glm5next)",
    "Glm5NextForConditionalGeneration": "recurrent-state mixers beside MLA with an indexer "
                                        "(vllm/models/glm5next)",
    "InklingForCausalLM": "a short-convolution sliding-window cache that packs four streams "
                          "per head (vllm/models/inkling sconv_swa_attn.py)",
    "InklingForConditionalGeneration": "a short-convolution sliding-window cache that packs "
                                       "four streams per head (vllm/models/inkling)",
    "MiniMaxM3SparseForCausalLM": REFUSED["minimax_m3"],
    "MiniMaxM3SparseForConditionalGeneration": REFUSED["minimax_m3"],
    "Qwen4ExpForCausalLM": "recurrent-state mixers, cross-layer KV sharing and MLA "
                           "(vllm/models/qwen4_exp)",
    "Qwen4ExpForConditionalGeneration": "recurrent-state mixers, cross-layer KV sharing and "
                                        "MLA (vllm/models/qwen4_exp)",
    "Step5ForCausalLM": "cross-layer KV sharing and an indexer (vllm/models/step5)",
    "Step5ForConditionalGeneration": "cross-layer KV sharing and an indexer "
                                     "(vllm/models/step5)",
}


def family_of(model_type: str, architectures: list[str]) -> Family | None:
    for family in FAMILIES:
        if model_type and model_type in family.model_types:
            return family
    for family in FAMILIES:
        if any(a in family.architectures for a in architectures):
            return family
    return None


# Keys some family reads whose names are too common to mean anything elsewhere.
_GENERIC_KEYS = frozenset({"intermediate_size", "expand", "num_heads", "n_groups",
                           "conv_kernel", "chunk_size", "state_size", "time_step_rank",
                           "hidden_size", "head_dim", "block_size", "conv_bias"})


def _all_cache_keys() -> frozenset[str]:
    keys: set[str] = set(UNMODELLED_KEYS)
    for family in FAMILIES:
        keys.update(family.cache_keys)
    return frozenset(keys - _GENERIC_KEYS)


ALL_CACHE_KEYS = _all_cache_keys()


def _is_set(value: Any) -> bool:
    return value not in (None, False, 0, "", [], {})


def refusals(raw: Mapping[str, Any], model_type: str, architectures: list[str]
             ) -> list[tuple[str, str]]:
    """(field, problem) for everything that makes this config's cache layout unknown."""
    arch = model_type or (architectures[0] if architectures else "")
    refused = next((a for a in architectures if a in REFUSED_ARCHITECTURES), None)
    if refused is not None:
        return [("architectures", f"is {refused!r}: {REFUSED_ARCHITECTURES[refused]}; kvplan "
                 "does not model that cache")]
    if model_type in REFUSED:
        return [("model_type", f"is {model_type!r}: {REFUSED[model_type]}; kvplan does not "
                 "model that cache")]
    family = family_of(model_type, architectures)
    if family is None and (model_type or architectures):
        field = "model_type" if model_type else "architectures"
        return [(field, f"is {arch!r}, an architecture kvplan has no reader for (it does not "
                 "know which of its keys decide the KV cache); supported architectures are "
                 "listed in docs/architectures.md")]
    # No model_type nor architectures (a hand-written config): the reader goes by the keys
    # alone, so every key some reader knows is read; only unmodelled ones are refused.
    own = set(family.cache_keys) if family else set(ALL_CACHE_KEYS - set(UNMODELLED_KEYS))
    prefixes = _BENIGN_PREFIXES + (family.benign_prefixes if family else ())
    out = []
    for key, value in raw.items():
        if key in own or key in _BENIGN_KEYS or not _is_set(value):
            continue
        if key in UNMODELLED_KEYS:
            out.append((key, f"is set: {UNMODELLED_KEYS[key]}; kvplan does not model that "
                        f"cache on {arch or 'this architecture'}"))
        elif key in ALL_CACHE_KEYS:
            out.append((key, f"is set, a key that decides the cache of other architectures "
                        f"but not one {arch or 'this architecture'}'s reader knows"))
        elif _CACHE_WORDS.search(key) and not key.startswith(prefixes):
            out.append((key, f"is set and looks cache-deciding, but {arch or 'this config'}'s "
                        "reader does not know it"))
    return out


def check(raw: Mapping[str, Any], model_type: str, architectures: list[str], source: str,
          where: str, assume_standard: bool) -> list[str]:
    """Raise SpecError for the first refusal, or (assume_standard) return them as warnings."""
    found = refusals(raw, model_type, architectures)
    if not found:
        return []
    if not assume_standard:
        field, problem = found[0]
        name = f"{where}.{field}" if where else field
        raise SpecError(source, name, problem,
                        "kvplan refuses to guess; --assume-standard-attention sizes it as "
                        "plain attention anyway (with a warning), or write the model as a YAML "
                        "spec (docs/model-schema.md)")
    return [f"{source}: {field} {problem}; sized as standard attention "
            "(--assume-standard-attention)" for field, problem in found]


# vLLM's generation registry, as committed (kvplan/data/vllm-registry.txt): tests/oracle
# compares it with the registry of the wheel the oracle downloads.
REGISTRY_FILE = Path(__file__).resolve().parent.parent / "data" / "vllm-registry.txt"


@record
class RegistryEntry:
    """One architecture of vLLM's generation registry."""

    name: str  # the class name a config's `architectures` lists
    table: str  # text, multimodal or transformers (the Transformers-backend list)
    module: str  # the module vLLM loads it from


@cache
def vllm_registry() -> tuple[str, tuple[RegistryEntry, ...]]:
    """(vLLM version, the registry's generation architectures) from REGISTRY_FILE."""
    version, entries = "", []
    for line in REGISTRY_FILE.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if words[0] == "version":
            version = words[1]
        else:
            entries.append(RegistryEntry(*words))
    return version, tuple(entries)


def registry_status(architecture: str) -> tuple[str, str]:
    """How kvplan treats a config whose `architectures` names this class: ("read", the
    reader's family), ("refused", the cache it does not model) or ("none", "")."""
    if architecture in REFUSED_ARCHITECTURES:
        return "refused", REFUSED_ARCHITECTURES[architecture]
    family = family_of("", [architecture])
    if family is not None:
        return "read", family.name
    return "none", ""


def registry_counts(names: list[str]) -> dict[str, int]:
    """How many of `names` kvplan reads, refuses by name, or has no reader for."""
    counts = {"read": 0, "refused": 0, "none": 0}
    for name in names:
        counts[registry_status(name)[0]] += 1
    return counts


def registry_summary(names: list[str]) -> str:
    counts = registry_counts(names)
    return (f"{counts['read']} of {len(names)} architectures read, {counts['refused']} refused "
            f"by name, {counts['none']} without a reader")


def _registry_markdown() -> list[str]:
    version, entries = vllm_registry()
    names = [e.name for e in entries]
    lines = [f"## vLLM {version}'s generation registry", "",
             f"{registry_summary(names)}: the classes of `_TEXT_GENERATION_MODELS`, "
             "`_MULTIMODAL_MODELS` and the Transformers-backend list of "
             "`vllm/model_executor/models/registry.py` (kvplan/data/vllm-registry.txt; "
             "tests/oracle/registry.py checks it against the wheel). A config is matched by "
             "its `model_type` first, then by these class names in its `architectures`; a "
             "class refused here is refused whatever its `model_type`.", "",
             "| architecture | vLLM module | kvplan |", "|---|---|---|"]
    for e in sorted(entries, key=lambda e: e.name.lower()):
        status, why = registry_status(e.name)
        what = {"read": f"read: {why}", "refused": f"refused: {why}",
                "none": "no reader"}[status]
        lines.append(f"| `{e.name}` | `{e.module}` | {what} |")
    return lines + [""]


def _removed_markdown(removed: Sequence[tuple[str, str, str]]) -> list[str]:
    """The classes vLLM's registry listed once and no longer does: (class, the release that
    added it, "<=" the oldest read; the release that removed it)."""
    if not removed:
        return []
    version = vllm_registry()[0]
    lines = ["## Classes vLLM no longer serves", "",
             f"Listed by an earlier release's registry, not by {version}'s (hence not counted "
             "above): with a vLLM release at or after the one that removed a class, `plan`, "
             "`check`, `explain` and `--from-command` refuse a config naming it, and give the "
             "last release that served it (kvplan/data/vllm-served.txt, written by "
             "scripts/vllm_registry_history.py from registry.py of each release); `size` "
             "sizes it whatever the engine.", "",
             "| architecture | added | removed | kvplan |", "|---|---|---|---|"]
    for name, added, gone in removed:
        status, why = registry_status(name)
        what = {"read": f"read: {why}", "refused": "refused by name",
                "none": "no reader"}[status]
        lines.append(f"| `{name}` | {added.replace('<=', 'by ')} | {gone} | {what} |")
    return lines + [""]


def architectures_markdown(removed: Sequence[tuple[str, str, str]] = ()) -> str:
    """docs/architectures.md, generated from FAMILIES and UNMODELLED_KEYS; `removed`, the
    classes vLLM no longer serves (scripts/gen_architectures.py passes the vLLM engine's
    kvplan.engines.vllm.served.removed())."""
    lines = [
        "# Architectures kvplan reads from config.json",
        "",
        "Generated from `kvplan/sources/hfarch.py` by `scripts/gen_architectures.py`; a test",
        "fails when this page and the code disagree.",
        "",
        "A `config.json` whose `model_type` (or `architectures` class) is not listed here, or",
        "that sets a key that decides the KV-cache layout but that its family's reader does not",
        "model, is refused with exit code 2 and a message naming the key and the architecture.",
        "`--assume-standard-attention` sizes it as plain attention instead, with a warning.",
        "",
    ]
    lines += _registry_markdown()
    lines += _removed_markdown(removed)
    for family in FAMILIES:
        lines += [f"## {family.name}", "",
                  "- model_type: " + ", ".join(f"`{t}`" for t in family.model_types)]
        if family.architectures:
            lines.append("- architectures: " + ", ".join(
                f"`{a}`" for a in sorted(set(family.architectures))))
        lines.append("- cache-deciding keys read: " + ", ".join(
            f"`{k}`" for k in sorted(set(family.cache_keys))))
        lines += [f"- engines: {family.engines}", ""]
    lines += ["## Architectures refused by name", "", "| model_type | why |", "|---|---|"]
    lines += [f"| `{t}` | {why} |" for t, why in sorted(REFUSED.items())]
    lines += ["", "Encoder-decoder models other than Whisper and Nemotron Parse (T5, BART, ...) "
              "are refused too: their cross-attention cache is as long as the encoder's "
              "input, which config.json does not fix.", ""]
    lines += ["## Keys refused wherever no reader models them", "",
              "| key | what it does to the cache |", "|---|---|"]
    lines += [f"| `{key}` | {why} |" for key, why in sorted(UNMODELLED_KEYS.items())]
    lines += ["", "Any other key whose name says it shapes the cache (compression, sharing, "
              "windows, states, layer kinds, KV heads) and that the family's reader does not "
              "read is refused too.", ""]
    return "\n".join(lines)
