"""What a model's family implies: the one place kvplan turns a family name (config.json
`model_type`, a YAML spec's `family`) into facts, `ModelSpec.layout` (how its checkpoint lays
out tensors, read by kvplan.core.weights) and `ModelSpec.traits` (what engines decide by the
architecture, read by the engine modules). Every reader calls `with_family_facts` on the spec
it builds; nothing outside kvplan/sources compares a family name (tests/contracts/
test_no_family_names.py).

Weight layouts match the family exactly, as the model_type is written; engine traits match
it lower-cased with `-` read as `_`, as the engines' own tables did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kvplan.core.layers import MLA
from kvplan.core.spec import GENERIC_LAYOUT, EngineTraits, ModelSpec, TensorLayout

_KNOWN = TensorLayout(known=True)
# Qwen3-Next's layout (gated attention with per-head q/k norms, gated delta-net mixers under
# linear_attn, a shared-expert gate), which Qwen3.5 reuses (vLLM qwen3_5.py
# Qwen3_5DecoderLayer(Qwen3NextDecoderLayer)); Qwen3.5 is not listed tensor by tensor
_QWEN3_NEXT = TensorLayout(attention_output_gate=True, qk_norm="head", shared_expert_gate=True,
                           mixer_module="linear_attn")
# GPT-2's layout: learned positions, fused qkv (c_attn), LayerNorms and linears with biases,
# a 4x MLP (GPT-3 is "the same model and architecture as GPT-2", Brown et al. 2020 section 2.1)
_GPT2 = TensorLayout(known=True, norm_bias=True, learned_positions=True, fused_qkv=True,
                     gated_mlp=False, mlp_bias=True, mlp_names=("c_fc", "c_proj"))
# Qwen2Attention (and the Qwen2-VL text models built on it): attention_bias covers q/k/v only
_QWEN2 = TensorLayout(known=True, o_proj_bias=False)
_QWEN2_TEXT = TensorLayout(o_proj_bias=False)
# Llama 3.2 Vision's text model: nn.Embedding(vocab_size + 8, hidden), gated cross-attention
_MLLAMA = TensorLayout(known=True, extra_embedding_rows=8, cross_attention_gates=True)
# Domyn Edge (vLLM domyn_edge.py): pre/post norms around attention and MLP, a weighted k_norm
# (q_norm has_weight=False)
_DOMYN = TensorLayout(norms="sandwich", qk_norm="k_head")
_NEEDS_BLOCKS = TensorLayout(known=True, requires=("blocks",))

LAYOUTS: dict[str, TensorLayout] = {
    **dict.fromkeys(
        ("llama", "mistral", "mixtral", "phi3", "deepseek", "deepseek_v2", "deepseek_v3",
         "deepseek_v32", "kimi_k2", "llama4", "llama4_text", "glm_moe_dsa", "llava",
         "mimo_v2_flash",
         # GLM-4.7-Flash: DeepSeek-V2/V3's MLA + MoE layout (vLLM glm4_moe_lite.py builds it
         # from DeepseekV2MLAAttention; the checkpoint keeps DeepSeek's tensor names)
         "glm4_moe_lite"), _KNOWN),
    "qwen2": _QWEN2,
    "qwen2_vl": _QWEN2,
    "qwen2_5_vl": _QWEN2,
    "qwen2_vl_text": _QWEN2_TEXT,
    "qwen2_5_vl_text": _QWEN2_TEXT,
    # Qwen2.5-Omni's thinker runs a Qwen2ForCausalLM (vLLM qwen2_5_omni_thinker.py), named by
    # the text config's model_type or, when it has none, the wrapper's
    **dict.fromkeys(("qwen2_5_omni", "qwen2_5_omni_thinker", "qwen2_5_omni_text"),
                    _QWEN2_TEXT),
    "qwen3": TensorLayout(known=True, qk_norm="head"),
    "qwen3_moe": TensorLayout(known=True, qk_norm="head"),
    # Qwen3-VL's language models are Qwen3 / Qwen3-MoE layers (vLLM qwen3_vl.py
    # Qwen3LLMModel, qwen3_vl_moe.py Qwen3MoeLLMModel), under the wrapper's own names
    **dict.fromkeys(("qwen3_vl_text", "qwen3_vl_moe_text"), TensorLayout(qk_norm="head")),
    # so are the omni and ASR thinkers' (vLLM qwen3_omni_moe_thinker.py Qwen3MoeLLMForCausalLM,
    # qwen3_asr.py Qwen3ForCausalLM): q_norm / k_norm over each head
    **dict.fromkeys(("qwen3_omni_moe", "qwen3_omni_moe_thinker", "qwen3_omni_moe_text",
                     "qwen3_asr", "qwen3_asr_text"), TensorLayout(qk_norm="head")),
    # vLLM qwen2_moe.py Qwen2MoeAttention: qkv_proj with a bias (no config field), o_proj none
    "qwen2_moe": TensorLayout(known=True, shared_expert_gate=True, o_proj_bias=False),
    "qwen3_next": replace(_QWEN3_NEXT, known=True, mtp="qwen3_next"),
    **dict.fromkeys(("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"),
                    _QWEN3_NEXT),
    "gemma2": TensorLayout(known=True, norms="sandwich"),
    **dict.fromkeys(("gemma3", "gemma3_text"),
                    TensorLayout(known=True, norms="sandwich", qk_norm="head")),
    # Gemma 3n (vLLM gemma3n.py): Gemma 3's sandwich norms and q / k norms over a head (v_norm
    # has no weight), and its per-layer inputs, AltUp and LAuReL (ModelSpec.per_layer_inputs)
    **dict.fromkeys(("gemma3n", "gemma3n_text"),
                    TensorLayout(known=True, norms="sandwich", qk_norm="head",
                                 requires=("per_layer_inputs",))),
    # Gemma 4's text model (vLLM gemma4.py Gemma4DecoderLayer): Gemma 3's sandwich norms,
    # q_norm / k_norm over one head (v_norm has no weight) and a layer_scalar a layer. A
    # k_eq_v full-attention layer has no v_proj in the checkpoint, yet QKVParallelLinear
    # keeps a V slot that the loader fills with K, so the V projection stays counted. The
    # MoE block (enable_moe_block: router scale, per_expert_scale, three more norms) is not
    # listed, so the layout is known only without it (_from_config)
    "gemma4_text": TensorLayout(norms="sandwich", qk_norm="head", layer_scalar=True),
    **dict.fromkeys(("domyn_edge", "domynedge"), _DOMYN),
    **dict.fromkeys(("olmo2", "olmo3"), TensorLayout(known=True, norms="post", qk_norm="heads")),
    # vLLM olmo_hybrid.py OlmoHybridAttention: q_norm over all heads (hidden_size) and k_norm
    # over the KV heads, as OLMo 2 / 3; its gated delta-net (olmo_gdn_linear_attn.py) holds
    # the same tensors as Qwen3-Next's, two norms a layer either way
    "olmo_hybrid": TensorLayout(qk_norm="heads"),
    "minimax_m2": TensorLayout(known=True, qk_norm="heads"),
    # OLMoE (vLLM olmoe.py OlmoeAttention, transformers modeling_olmoe.py): q_norm over the
    # query heads and k_norm over the KV heads, as OLMo 2; every layer routed experts under
    # mlp.experts and the router mlp.gate, no shared expert
    "olmoe": TensorLayout(known=True, qk_norm="heads"),
    # vLLM apertus.py: ApertusMLP is up_proj -> XIELU -> down_proj, no gate; the activation
    # keeps two learned one-element parameters (activation.py XIELU alpha_p / alpha_n);
    # ApertusAttention builds q_norm / k_norm over each head unconditionally. The layer norms
    # are attention_layernorm / feedforward_layernorm: the pre-norm pair, renamed
    "apertus": TensorLayout(gated_mlp=False, qk_norm="head", mlp_act_params=("alpha_p",
                                                                              "alpha_n")),
    "cohere": TensorLayout(known=True, norms="parallel"),
    "chatglm": TensorLayout(known=True, qkv_bias=True, o_proj_bias=False),
    # Falcon: LayerNorms with biases, dense_h_to_4h / dense_4h_to_h without a gate or biases;
    # the multi-query models (one KV head) one norm before the parallel attention + MLP
    "falcon": TensorLayout(known=True, norm_bias=True, gated_mlp=False,
                           mlp_names=("dense_h_to_4h", "dense_4h_to_h")),
    # Phi-1 / 1.5 / 2 (transformers modeling_phi.py, which vLLM 0.33 serves through its
    # Transformers backend): one biased LayerNorm before the parallel attention and MLP,
    # q/k/v and dense (o_proj) with biases whatever attention_bias says, an ungated fc1 / fc2
    # MLP with biases, an LM head with a bias (PhiForCausalLM: nn.Linear(bias=True); vLLM
    # phi.py ParallelLMHead(bias=True))
    "phi": TensorLayout(norms="parallel", norm_bias=True, qkv_bias=True, dense_bias=True,
                        lm_head_bias=True, gated_mlp=False, mlp_bias=True,
                        mlp_names=("fc1", "fc2")),
    # StarCoder 2 (vLLM starcoder2.py): LayerNorms with biases, an ungated c_fc / c_proj MLP
    # whose biases, like q/k/v/o's, follow use_bias (_from_config)
    "starcoder2": TensorLayout(known=True, norm_bias=True, gated_mlp=False,
                               mlp_names=("c_fc", "c_proj")),
    # OPT (vLLM opt.py): learned positions with 2 extra rows (OPTLearnedPositionalEmbedding's
    # offset), LayerNorms with biases, q/k/v/out and fc1 / fc2 with biases per enable_bias,
    # no gate; word_embed_proj_dim and do_layer_norm_before from the config (_from_config)
    "opt": TensorLayout(known=True, norm_bias=True, qkv_bias=True, dense_bias=True,
                        gated_mlp=False, mlp_bias=True, mlp_names=("fc1", "fc2"),
                        learned_positions=True, position_offset=2),
    # MPT (vLLM mpt.py, transformers modeling_mpt.py): a fused Wqkv and out_proj, LayerNorms,
    # an ungated up / down MLP; no_bias drops every bias, the norms' included (_from_config)
    "mpt": TensorLayout(known=True, fused_qkv=True, norm_bias=True, gated_mlp=False,
                        mlp_bias=True),
    # CodeGen (transformers modeling_codegen.py): one LayerNorm (ln_1) before the parallel
    # attention and MLP, a bias-free fused qkv_proj and out_proj, fc_in / fc_out with biases,
    # an untied lm_head with a bias
    "codegen": TensorLayout(known=True, norms="parallel", norm_bias=True, fused_qkv=True,
                            fused_qkv_bias=False, gated_mlp=False, mlp_bias=True,
                            mlp_names=("fc_in", "fc_out"), lm_head_bias=True),
    # StableLM (transformers modeling_stablelm.py, vLLM stablelm.py): LayerNorms with biases;
    # parallel residual, q/k/v biases and per-head q/k LayerNorms per the config
    # (_from_config)
    "stablelm": TensorLayout(known=True, norm_bias=True, o_proj_bias=False),
    "gpt2": _GPT2,
    "gpt3": _GPT2,
    "gpt_oss": TensorLayout(known=True, attention_sinks=True, router="router",
                            expert_bias=True),
    **dict.fromkeys(("mllama", "mllama_text_model"), _MLLAMA),
    # hybrids and per-layer blocks (ModelSpec.ssm / ModelSpec.blocks)
    "jamba": TensorLayout(known=True, mixer_module="mamba"),
    # Nemotron-H: one sub-layer a layer behind one `norm`, whatever its kind under
    # `layers.N.mixer` (vLLM nemotron_h.py NemotronH*DecoderLayer.mixer); relu2 MLPs without
    # a gate
    "nemotron_h": TensorLayout(known=True, norms="single", gated_mlp=False,
                               sublayer_module="mixer", requires=("blocks",)),
    "nemotron-nas": _NEEDS_BLOCKS,
    "deci": _NEEDS_BLOCKS,
    "falcon_h1": TensorLayout(mixer_module="mamba"),
    **dict.fromkeys(("lfm2", "lfm2_moe"), TensorLayout(mixer_module="conv")),
    "zamba2": TensorLayout(requires=("shared_blocks",)),
    # Whisper: the audio encoder and the decoder with cross-attention (ModelSpec.audio_encoder)
    "whisper": TensorLayout(known=True, encoder_decoder="whisper", requires=("audio_encoder",)),
    # Nemotron Parse: a RADIO encoder (ModelSpec.vision) and an mBART decoder
    **dict.fromkeys(("nemotron_parse", "nemotron_parse3_5"),
                    TensorLayout(known=True, encoder_decoder="mbart", requires=("vision",))),
    # EXAONE 4.5 and K-EXAONE: generic decoders whose MTP layers are Qwen3-Next's (mtp.fc,
    # pre-fc norms, one decoder layer) sharing the model's embedding and LM head
    # (vLLM exaone4_5_mtp.py, exaone_moe_mtp.py)
    "exaone_moe": TensorLayout(mtp="qwen3_next"),
    # EXAONE 4.0 / 4.5's language model (vLLM exaone4.py Exaone4Attention): q_norm and
    # k_norm over one head_dim-wide head
    "exaone4": TensorLayout(qk_norm="head"),
    **dict.fromkeys(("exaone4_5", "exaone4_5_text"),
                    TensorLayout(mtp="qwen3_next", qk_norm="head")),
    # GLM-4.5 / 4.6 and GLM-4.5V's text model (vLLM glm4_moe.py Glm4MoeAttention): q/k/v
    # biases per attention_bias, o_proj none
    **dict.fromkeys(("glm4_moe", "glm4v_moe_text"), TensorLayout(o_proj_bias=False)),
    # AFMoE (Arcee Trinity; transformers modeling_afmoe.py, which vLLM afmoe.py loads): q/k
    # norms over a head, a sigmoid output gate (self_attn.gate_proj), pre and post norms
    # around attention and MLP, the router under mlp.router.gate and its fp32 expert_bias
    "afmoe": TensorLayout(known=True, norms="dual", qk_norm="head", attention_gate_proj=True,
                          router="router.gate", routing_bias="expert_bias"),
    # ERNIE 4.5's MoE model: the router's score correction bias is the checkpoint's
    # mlp.moe_statics.e_score_correction_bias (vLLM ernie45_moe.py load_weights maps it
    # onto gate.e_score_correction_bias)
    "ernie4_5_moe": TensorLayout(routing_bias="moe_statics.e_score_correction_bias"),
    # Seed-OSS (transformers modeling_seed_oss.py SeedOssAttention, the checkpoint vLLM
    # seed_oss.py loads): q/k/v biases per attention_bias, o_proj's per attention_out_bias
    # (_from_config)
    "seed_oss": TensorLayout(o_proj_bias=False),
    # dots.llm1 (vLLM dots1.py Dots1Attention, Qwen3's attention): q_norm and k_norm over
    # one head_dim-wide head
    "dots1": TensorLayout(qk_norm="head"),
    # Kimi-K3: Kimi Delta Attention + MLA with output gates, attention residuals, latent MoE
    "kimi_linear": TensorLayout(known=True, mixer_module="self_attn"),
    # DeepSeek-V4: compressed attention, hyper-connections, hash routing, FP4 experts
    # the MoE under ffn (ffn.gate, ffn.experts, ffn.shared_experts), as the checkpoint and
    # the re-quantized uploads' quantization targets name it
    "deepseek_v4": TensorLayout(known=True, compressed_blocks=True, mtp="deepseek_v4",
                                mlp_module="ffn"),
}

# llama.cpp: the architectures whose `load_arch_hparams` sets `swa_type`, so sliding/chunked
# layers keep their own cache (src/models/gemma2.cpp, gemma3.cpp, gemma3n.cpp, gemma4.cpp,
# openai-moe.cpp, llama4.cpp (chunked), cohere2.cpp, exaone4.cpp, olmo2.cpp (OLMo 3),
# mimo2.cpp; llama.cpp at 0c1e57098bba). Every other architecture attends over the whole
# context whatever the config's sliding_window says: Mistral 7B converts to LLM_ARCH_LLAMA,
# whose loader never reads the key, and phi3.cpp reads it and turns SWA off ("Phi SWA is
# currently disabled").
LLAMACPP_SWA = frozenset({
    "gemma2", "gemma3", "gemma3_text", "gemma3n", "gemma3n_text", "gemma4", "gemma4_text",
    "gpt_oss", "llama4", "llama4_text", "cohere2", "exaone4", "olmo3", "mimo_v2",
    "mimo_v2_flash"})
# SGLang configs/model_config.py::is_hybrid_swa_model (by architecture class): only these get a
# separate SWA pool; other sliding-window models (Gemma 2/3) give their sliding layers
# full-length KV.
SGLANG_HYBRID_SWA = frozenset({"gpt_oss", "llama4", "llama4_text", "gemma4", "gemma4_text",
                               "mimo_v2", "mimo_v2_flash", "step3p5", "deepseek_v4"})
# vLLM's _get_and_verify_max_len skips the rope factor where "gemma3" is in the model_type
# (Gemma 3's max_position_embeddings is already scaled; config.py from 0.8.0, config/model.py)
VLLM_LENGTH_PRESCALED = "gemma3"
# DeepSeek sparse attention (DSA): vLLM 0.33 builds the indexer and the sparse MLA backend
# (FLASHMLA_SPARSE, the fp8_ds_mla record) whenever the config has `index_topk`
# (model_executor/models/deepseek_v2.py, glm4_moe_lite.py, deepseek_mtp.py and the
# vllm/models/deepseek_v32, glm5next, hy_v4, kimi_k3 packages: `is_v32 = hasattr(config,
# "index_topk")`), and SGLang likewise by the config's indexer keys (configs/model_config.py
# is_deepseek_nsa). kvplan's config reader turns that key into MLA layers with an
# index_head_dim (hfconfig `_indexer_layers`), so such a spec is sparse whatever its family
# (traits_of); these families are sparse even when a hand-written spec names no indexer:
# DeepSeek-V3.2 and GLM-5 (GlmMoeDsaForCausalLM, the same vllm/models/deepseek_v32 package).
SPARSE_MLA = frozenset({"deepseek_v32", "glm_moe_dsa"})
# vLLM 0.11.0 model_executor/models/config.py DeepseekV32ForCausalLM: "auto" (and any fp8)
# becomes fp8_ds_mla; the hook is keyed by that class alone
VLLM_AUTO_FP8_DS_MLA = frozenset({"deepseek_v32"})
# What SGLang's ServerArgs.adjust_mem_fraction_for_vlm (server_args.py 0.4.10-0.5.18,
# arg_groups/memory_hook.py from 0.5.19) reads from a multimodal config's vision_config object,
# `getattr(vision_config, "num_hidden_layers", 24)` and `getattr(..., "hidden_size", 1024)`, by
# the tower's kind (VisionTower.kind), as transformers' config classes expose those attributes
# (read in the 4.57.6 source and loaded with SGLang 0.5.23's get_config under transformers
# 5.19.0): "tower" -- the class stores both keys, the tower's own (CLIP, SigLIP, SigLIP2,
# Pixtral, Llama 4, Mllama, Gemma 4; Kimi-K2.5's MoonViT through SGLang's KimiK25VisionConfig,
# which maps vt_num_hidden_layers / vt_hidden_size); "depth" -- the class keeps the layer count
# as `depth` and has no num_hidden_layers, so SGLang takes its 24, while hidden_size is the
# ViT's width (Qwen2.5-VL, Qwen3-VL / Qwen3.5, EXAONE 4.5); "merger" -- Qwen2-VL's class keeps
# depth / embed_dim and its hidden_size is the patch merger's output, the text model's width
# (Qwen2VLVisionConfig), so 24 layers of the spec's hidden_size. Whether a release applies it
# (its multimodal_model_archs) is the engine's rule: kvplan.engines.sglang.memory.
SGLANG_VIT_READ = {"clip": "tower", "siglip": "tower", "siglip2": "tower", "pixtral": "tower",
                   "llama4": "tower", "mllama": "tower", "gemma4": "tower", "kimi_k25": "tower",
                   "qwen2_5_vl": "depth", "qwen3_vl": "depth", "exaone4_5": "depth",
                   "qwen2_vl": "merger"}
SGLANG_VIT_DEFAULT_LAYERS = 24  # adjust_mem_fraction_for_vlm's default num_hidden_layers
# The architecture class SGLang's configs/model_config.py multimodal_model_archs would name, by
# the tower's kind and, where one kind serves several, the text family ("" any): which releases
# list each is the engine's rule (kvplan.engines.sglang.memory.VLM_LISTED_FROM). A CLIP tower
# over a Llama text model is taken as LLaVA (LlavaForConditionalGeneration); LLaVA-NeXT's class,
# which SGLang does not serve, is read the same way. SigLIP over anything but Gemma 3 (LLaVA-
# OneVision, Aya Vision: not listed) and a tower kind absent here name no listed class.
SGLANG_VLM_ARCH = {
    ("clip", "llama"): "LlavaForConditionalGeneration",
    ("siglip", "gemma3_text"): "Gemma3ForConditionalGeneration",
    ("pixtral", ""): "Mistral3ForConditionalGeneration",
    ("llama4", ""): "Llama4ForConditionalGeneration",
    ("mllama", ""): "MllamaForConditionalGeneration",
    ("qwen2_vl", ""): "Qwen2VLForConditionalGeneration",
    ("qwen2_5_vl", ""): "Qwen2_5_VLForConditionalGeneration",
    ("qwen3_vl", "qwen3_vl_text"): "Qwen3VLForConditionalGeneration",
    ("qwen3_vl", "qwen3_vl_moe_text"): "Qwen3VLMoeForConditionalGeneration",
    ("qwen3_vl", "qwen3_5_text"): "Qwen3_5ForConditionalGeneration",
    ("qwen3_vl", "qwen3_5_moe_text"): "Qwen3_5MoeForConditionalGeneration",
    ("exaone4_5", ""): "Exaone4_5_ForConditionalGeneration",
    ("siglip2", ""): "Lfm2VlForConditionalGeneration",
    ("kimi_k25", ""): "KimiK25ForConditionalGeneration",
    ("moonvit", ""): "KimiK3ForConditionalGeneration",
    ("gemma4", ""): "Gemma4ForConditionalGeneration",
}
# TGI launcher/src/main.rs::resolve_attention: `Some("falcon") | Some("deepseek_v2")` force
# the fallback attention (the model_type as written, not normalised)
TGI_FALLBACK_ATTENTION = frozenset({"falcon", "deepseek_v2"})
# vLLM: the model classes whose __init__ builds embed_tokens, the final norm and lm_head on
# every pipeline rank, with no get_pp_group().is_first_rank / is_last_rank guard (read in the
# 0.15.1, 0.19.0 and 0.24.0 wheels: qwen2_moe.py, qwen3_moe.py, mixtral.py, gpt_oss.py;
# qwen2_moe.py and mixtral.py in 0.7.1's too; llama.py, qwen2.py, qwen3.py and deepseek_v2.py
# guard them in each), by model_type
VLLM_PP_EVERY_STAGE_ENDS = frozenset({"qwen2_moe", "qwen3_moe", "mixtral", "gpt_oss"})
# the library names some MoE models by their dense family: the MoE model_type they load as
MOE_MODEL_TYPE = {"qwen2": "qwen2_moe", "qwen3": "qwen3_moe"}


# Hunyuan's families (vLLM hunyuan_v1.py serves HunYuanDenseV1 / HunYuanMoEV1; the official
# A13B config says model_type "hunyuan")
_HUNYUAN = frozenset({"hunyuan", "hunyuan_v1_dense", "hunyuan_v1_moe"})


def _from_config(layout: TensorLayout, family: str, config: Mapping[str, Any]) -> TensorLayout:
    """What a family's layout takes from its config's own flags rather than its name."""
    if family in _HUNYUAN and config.get("use_qk_norm") is True:
        # vLLM hunyuan_v1.py HunYuanAttention: with use_qk_norm, query_layernorm and
        # key_layernorm, RMSNorms over one head_dim-wide head
        layout = replace(layout, qk_norm="head")
    if family == "seed_oss":
        layout = replace(layout, dense_bias=config.get("attention_out_bias") is True)
    if family == "gemma4_text" and config.get("enable_moe_block") is not True:
        layout = replace(layout, known=True)
    if family == "opt":
        # vLLM opt.py OPTDecoder: biases per enable_bias (default True); an embedding of
        # word_embed_proj_dim with project_in / project_out where that is not hidden_size;
        # final_layer_norm only with do_layer_norm_before and not _remove_final_layer_norm
        bias = config.get("enable_bias", True) is not False
        width, hidden = config.get("word_embed_proj_dim"), config.get("hidden_size")
        layout = replace(
            layout, qkv_bias=bias, dense_bias=bias, mlp_bias=bias,
            embed_width=width if type(width) is int and width > 0 and width != hidden else 0,
            final_norm=config.get("do_layer_norm_before", True) is not False
            and config.get("_remove_final_layer_norm", False) is not True)
    if family == "stablelm":
        # StableLmDecoderLayer: with use_parallel_residual one input_layernorm before the
        # parallel attention and MLP; q/k/v biases per use_qkv_bias; with qk_layernorm a
        # bias-free LayerNorm per query head and per KV head (StableLmLayerNormPerHead)
        layout = replace(
            layout, qkv_bias=config.get("use_qkv_bias") is True,
            norms="parallel" if config.get("use_parallel_residual") is True else "pre",
            qk_norm="heads" if config.get("qk_layernorm") is True else None)
    if family == "mpt" and config.get("no_bias") is True:
        # MPTModel: with no_bias every module's bias is removed (vLLM mpt.py, transformers
        # modeling_mpt.py)
        layout = replace(layout, fused_qkv_bias=False, norm_bias=False, mlp_bias=False)
    if family == "starcoder2":
        # vLLM starcoder2.py Starcoder2MLP: c_fc / c_proj with bias=config.use_bias
        # (Starcoder2Config defaults it to True)
        layout = replace(layout, mlp_bias=config.get("use_bias", True) is not False)
    return layout


def layout_of(spec: ModelSpec, config: Mapping[str, Any] | None = None) -> TensorLayout:
    """The tensor layout of `spec.family` (the generic decoder's when kvplan has none), with
    what the family's config flags decide (`config`: the text model's config.json keys)."""
    layout = LAYOUTS.get(spec.family or "", GENERIC_LAYOUT)
    if config is not None:
        layout = _from_config(layout, spec.family or "", config)
    if spec.family == "falcon" and spec.layers and all(
            getattr(x, "num_kv_heads", 0) == 1 for x in spec.layers):
        # Falcon-7B (multi-query, parallel_attn): one input_layernorm before the parallel
        # attention and MLP; Falcon-40B/180B keep two
        layout = replace(layout, norms="parallel")
    return layout


def traits_of(spec: ModelSpec) -> EngineTraits:
    """What engines decide by `spec.family` and its vision tower's kind (see the tables above)."""
    raw = spec.family or ""
    name = raw.lower().replace("-", "_")
    model_type = MOE_MODEL_TYPE.get(name, name) if spec.is_moe else name
    return EngineTraits(sparse_mla=raw.replace("-", "_") in SPARSE_MLA or _has_indexer(spec),
                        vllm_auto_fp8_ds_mla=raw.replace("-", "_") in VLLM_AUTO_FP8_DS_MLA,
                        llamacpp_swa=name in LLAMACPP_SWA,
                        sglang_hybrid_swa=name in SGLANG_HYBRID_SWA,
                        tgi_fallback_attention=raw in TGI_FALLBACK_ATTENTION,
                        vllm_pp_every_stage_ends=model_type in VLLM_PP_EVERY_STAGE_ENDS,
                        vllm_length_prescaled=VLLM_LENGTH_PRESCALED in raw,
                        sglang_vit=_sglang_vit(spec),
                        sglang_vlm_arch=_sglang_vlm_arch(spec))


def _sglang_vlm_arch(spec: ModelSpec) -> str:
    """The class SGLang's multimodal_model_archs would name for `spec` (SGLANG_VLM_ARCH); ""
    for a text model or a tower kvplan does not tie to one."""
    if spec.vision is None:
        return ""
    kind = spec.vision.kind
    return SGLANG_VLM_ARCH.get((kind, spec.family or ""), SGLANG_VLM_ARCH.get((kind, ""), ""))


def _sglang_vit(spec: ModelSpec) -> tuple[int, ...]:
    """(num_hidden_layers, hidden_size) as SGLang reads them from `spec`'s vision_config
    (SGLANG_VIT_READ); () for a text model or a tower kind not listed there."""
    v = spec.vision
    read = SGLANG_VIT_READ.get(v.kind) if v is not None else None
    if v is None or read is None:
        return ()
    if read == "tower":
        return (v.num_layers, v.hidden_size)
    hidden = spec.hidden_size if read == "merger" else v.hidden_size
    return (SGLANG_VIT_DEFAULT_LAYERS, hidden) if hidden else ()


def _has_indexer(spec: ModelSpec) -> bool:
    """Whether an MLA layer of `spec` keeps DSA indexer keys (see SPARSE_MLA): the engines then
    run the whole model sparse, its layers without an indexer (IndexCache's shared top-k)
    included (vLLM deepseek_v2.py passes is_sparse=is_v32 to every layer)."""
    return any(isinstance(x, MLA) and x.index_head_dim is not None for x in spec.layers)


def with_family_facts(spec: ModelSpec, config: Mapping[str, Any] | None = None) -> ModelSpec:
    """`spec` with the layout and engine traits its family implies (every reader's last step);
    `config`, where the reader has one, the text model's config.json keys the layout follows."""
    return replace(spec, layout=layout_of(spec, config), traits=traits_of(spec))
