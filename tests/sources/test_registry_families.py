"""Families added to reach vLLM 0.33's generation registry (kvplan/data/vllm-registry.txt):
read by model_type or by the class vLLM picks, nested text configs followed, bytes derived by
hand from the engine's model file (per token, per request, the page per layer kind), or a
refusal naming the cache. Configs no stored config.json was found for are built here from
their published shapes, said so in each test."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.dtypes import BF16
from kvplan.core.errors import SpecError
from kvplan.core.layers import (
    MLA,
    CrossAttention,
    FullAttention,
    RecurrentState,
    SlidingWindow,
)
from kvplan.core.sizing import per_token_bytes, request_bytes
from kvplan.core.weights import inventory, supported
from kvplan.sources.hfconfig import spec_from_config


def from_dict(raw: dict):
    return spec_from_config(raw, "config.json", name="m")


def refusal(raw: dict) -> SpecError:
    with pytest.raises(SpecError) as err:
        from_dict(raw)
    return err.value


# --- GLM-4.7-Flash: MLA under glm4_moe_lite ---------------------------------------------

# GLM-4.7-Flash's published shape (zai-org/GLM-4.7-Flash config.json): 47 layers, 20 heads,
# q_lora_rank 768, kv_lora_rank 512, qk_nope 192 + qk_rope 64, v_head_dim 256, 64 routed
# experts (top 4) of 1,536 and one shared, the first layer dense, one MTP layer
GLM_47_FLASH = {
    "architectures": ["Glm4MoeLiteForCausalLM"], "model_type": "glm4_moe_lite",
    "vocab_size": 154880, "hidden_size": 2048, "intermediate_size": 10240,
    "moe_intermediate_size": 1536, "num_hidden_layers": 47, "num_attention_heads": 20,
    "num_key_value_heads": 20, "max_position_embeddings": 202752, "q_lora_rank": 768,
    "kv_lora_rank": 512, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256,
    "n_routed_experts": 64, "n_shared_experts": 1, "num_experts_per_tok": 4,
    "topk_method": "noaux_tc", "first_k_dense_replace": 1, "num_nextn_predict_layers": 1,
    "tie_word_embeddings": False, "dtype": "bfloat16", "attention_bias": False}


def test_glm_4_7_flash_caches_one_mla_latent_per_layer():
    # vLLM glm4_moe_lite.py: Glm4MoeLiteMLAAttention(DeepseekV2MLAAttention) -> MLAAttentionSpec
    # with head size kv_lora_rank + qk_rope_head_dim = 576 and one KV head
    spec = from_dict(GLM_47_FLASH)
    assert spec.layers == (MLA(kv_lora_rank=512, qk_rope_head_dim=64),) * 47
    assert per_token_bytes(spec.layers, BF16) == 47 * 576 * 2 == 54_144
    assert request_bytes(spec.layers, 8192, BF16) == 8192 * 54_144
    from kvplan.engines.vllm import VllmConfig, layer_page_specs

    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=8192))
    assert {(p.kind, p.page_bytes) for p in pages if p is not None} == {
        ("mla", pages[0].block_size * 576 * 2)}


def test_glm_4_7_flash_weights_are_deepseeks_layout():
    spec = from_dict(GLM_47_FLASH)
    assert supported(spec) is None
    h, heads = 2048, 20
    attention = (h * 768 + 768 + 768 * heads * (192 + 64)  # q_a, its norm, q_b
                 + h * (512 + 64) + 512 + 512 * heads * (192 + 256)  # kv_a, its norm, kv_b
                 + heads * 256 * h)  # o
    expert = 3 * h * 1536
    moe = h * 64 + 64 + 64 * expert + expert  # router, fp32 bias, experts, one shared
    layer_norms = 2 * h
    dense = attention + layer_norms + 3 * h * 10240
    sparse = attention + layer_norms + moe
    # the MTP layer: a MoE decoder layer, its embedding, enorm / hnorm / head norm, eh_proj
    # (2H -> H) and its own head
    mtp = sparse + 154880 * h + 3 * h + 2 * h * h + 154880 * h
    expected = 2 * 154880 * h + dense + 46 * sparse + h + mtp
    assert sum(t.num_params for t in inventory(spec).tensors) == expected


# --- EXAONE-4.5: a nested exaone4_5_text whose layer_types names its MTP layer too ------------

def test_exaone_4_5_reads_its_text_config_and_drops_the_mtp_layer_type():
    # EXAONE-4.5-33B's published text shape: 64 layers (3 sliding of 4,096 then 1 full), 40
    # heads, 8 KV heads of 128; its release lists layer_types for 64 + 1 layers, the last
    # one the MTP layer's (num_nextn_predict_layers 1)
    kinds = (["sliding_attention"] * 3 + ["full_attention"]) * 16 + ["full_attention"]
    raw = {"architectures": ["Exaone4_5_ForConditionalGeneration"], "model_type": "exaone4_5",
           "tie_word_embeddings": False, "vocab_size": 153600, "text_config": {
               "model_type": "exaone4_5_text", "hidden_size": 5120, "intermediate_size": 27392,
               "num_hidden_layers": 64, "num_attention_heads": 40, "num_key_value_heads": 8,
               "max_position_embeddings": 262144, "sliding_window": 4096,
               "sliding_window_pattern": "LLLG", "layer_types": kinds,
               "num_nextn_predict_layers": 1}}
    spec = from_dict(raw)
    assert spec.num_layers == 64
    assert spec.kind_counts() == {"sliding": 48, "full": 16}
    # exaone4.py: per_layer_sliding_window = config.sliding_window on sliding layers
    assert {x.window for x in spec.layers if isinstance(x, SlidingWindow)} == {4096}
    row = 2 * 8 * 128 * 2  # K and V, 8 heads of 128, bf16
    assert request_bytes(spec.layers, 10_000, BF16) == (16 * 10_000 + 48 * 4096) * row


# --- Hunyuan: model_type "hunyuan", per-layer expert lists, cross-layer attention ---------

# Hunyuan-A13B's published shape (tencent/Hunyuan-A13B-Instruct config.json): 32 layers, 32
# heads, 8 KV heads of 128, 64 experts of 3,072 listed per layer, top 8, one shared expert
HUNYUAN_A13B = {
    "architectures": ["HunYuanMoEV1ForCausalLM"], "model_type": "hunyuan",
    "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "attention_head_dim": 128, "intermediate_size": 3072,
    "vocab_size": 128167, "num_experts": 64, "moe_intermediate_size": [3072] * 32,
    "moe_topk": [8] * 32, "num_shared_expert": [1] * 32, "use_cla": False,
    "cla_share_factor": 2, "use_qk_norm": True, "tie_word_embeddings": True,
    "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}


def test_hunyuan_a13b_is_plain_gqa():
    spec = from_dict(HUNYUAN_A13B)
    assert spec.layers == (FullAttention(8, 128),) * 32
    assert per_token_bytes(spec.layers, BF16) == 32 * 2 * 8 * 128 * 2 == 131_072
    # the per-layer lists are one value each: the experts' width and count are read
    assert (spec.moe_intermediate_size, spec.num_experts_per_token,
            spec.num_shared_experts) == (3072, 8, 1)


def test_hunyuan_cross_layer_attention_is_refused_by_name():
    err = refusal({**HUNYUAN_A13B, "use_cla": True})
    assert err.field == "use_cla" and "cross-layer" in err.message


# --- Omni / ASR: the text model under thinker_config ------------------------------------------

def test_qwen2_5_omni_reads_the_thinkers_text_config():
    # Qwen2.5-Omni-7B's published thinker text shape: 28 layers, 28 heads, 4 KV heads,
    # hidden 3584 (head_dim 128)
    raw = {"architectures": ["Qwen2_5OmniModel"], "model_type": "qwen2_5_omni",
           "thinker_config": {"model_type": "qwen2_5_omni_thinker", "text_config": {
               "model_type": "qwen2_5_omni_text", "hidden_size": 3584,
               "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
               "max_position_embeddings": 32768, "sliding_window": 32768,
               "use_sliding_window": False, "vocab_size": 152064}},
           "talker_config": {"num_hidden_layers": 24, "num_key_value_heads": 4}}
    spec = from_dict(raw)
    assert spec.layers == (FullAttention(4, 128),) * 28
    assert per_token_bytes(spec.layers, BF16) == 28 * 2 * 4 * 128 * 2


# --- found by the class vLLM picks ---------------------------------------------------------

def test_a_wrapper_with_an_unknown_text_model_type_is_read_by_its_class():
    raw = {"architectures": ["AriaForConditionalGeneration"], "model_type": "aria_next",
           "text_config": {"model_type": "aria_text_next", "hidden_size": 2560,
                           "num_hidden_layers": 28, "num_attention_heads": 20,
                           "num_key_value_heads": 20, "max_position_embeddings": 65536}}
    spec = from_dict(raw)
    assert spec.layers == (FullAttention(20, 128),) * 28


def test_a_wrapper_around_a_hybrid_without_its_model_type_fails_closed():
    # MiniCPM-V 4.6 wraps a qwen3_5 text model; without that model_type the class's reader
    # is the gated delta-net one, which needs the linear_* sizes
    raw = {"architectures": ["MiniCPMV4_6ForConditionalGeneration"],
           "text_config": {"hidden_size": 2048, "num_hidden_layers": 4,
                           "num_attention_heads": 16, "num_key_value_heads": 2,
                           "head_dim": 256, "full_attention_interval": 4,
                           "linear_num_value_heads": 32, "linear_num_key_heads": 16,
                           "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                           "linear_conv_kernel_dim": 4}}
    spec = from_dict(raw)
    assert spec.kind_counts() == {"state": 3, "full": 1}
    # the same text config under a plain-attention wrapper is refused, naming a key of the
    # gated delta-net reader
    raw["architectures"] = ["LlavaForConditionalGeneration"]
    err = refusal(raw)
    assert err.field == "text_config.full_attention_interval"
    assert "other architectures" in err.message


def test_olmo_hybrid_keeps_a_gated_delta_net_state_per_linear_layer():
    # vLLM olmo_hybrid.py get_mamba_state_shape_from_config: gated_delta_net_state_shape
    # (conv: (k - 1) x (2 x key heads x key dim + value heads x value dim); temporal: value
    # heads x value dim x key dim); OLMo-Hybrid's shape as its config class defaults it
    raw = {"architectures": ["OlmoHybridForCausalLM"], "model_type": "olmo_hybrid",
           "hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16,
           "num_key_value_heads": 16, "layer_types": ["linear_attention"] * 3
           + ["full_attention"], "linear_num_key_heads": 16, "linear_num_value_heads": 32,
           "linear_key_head_dim": 96, "linear_value_head_dim": 64,
           "linear_conv_kernel_dim": 4, "max_position_embeddings": 65536}
    spec = from_dict(raw)
    assert spec.kind_counts() == {"state": 3, "full": 1}
    state = next(x for x in spec.layers if isinstance(x, RecurrentState))
    assert state.state_bytes() == 3 * (2 * 16 * 96 + 32 * 64) * 2 + 32 * 64 * 96 * 2


@pytest.mark.parametrize(("architecture", "words"), [
    ("Step5ForCausalLM", "cross-layer KV sharing"),
    ("CohereAsrForConditionalGeneration", "encoder-decoder"),
    ("Glm5NextForCausalLM", "recurrent-state mixers"),
])
def test_classes_vllm_serves_with_unmodelled_caches_are_refused_by_name(architecture, words):
    raw = {"architectures": [architecture], "model_type": "llama", "hidden_size": 4096,
           "num_hidden_layers": 4, "num_attention_heads": 32}
    err = refusal(raw)
    assert err.field == "architectures" and words in err.message


def test_the_cli_refuses_a_refused_class_with_exit_2(tmp_path):
    import json

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": ["InklingForCausalLM"], "model_type": "inkling",
                                "hidden_size": 2048, "num_hidden_layers": 4,
                                "num_attention_heads": 16}))
    out = CliRunner().invoke(app, ["size", str(path), "-t", "1024"])
    assert out.exit_code == 2 and "InklingForCausalLM" in out.output


def _plamo3(**extra) -> dict:
    # a PLaMo-3-shaped config (illustrative sizes): 4 layers, 8 KV heads of 128
    return {"architectures": ["Plamo3ForCausalLM"], "model_type": "plamo3",
            "hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16,
            "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 65536,
            **extra}


def test_plamo3_keeps_the_window_its_list_gives_each_layer():
    # vLLM plamo3.py Plamo3AttentionMixer: Attention(num_key_value_heads, head_dim,
    # per_layer_sliding_window=config.interleaved_sliding_window[layer_idx]); null is full
    spec = from_dict(_plamo3(interleaved_sliding_window=[2048, 2048, 2048, None]))
    assert spec.layers == (SlidingWindow(8, 128, window=2048),) * 3 + (FullAttention(8, 128),)
    row = 2 * 8 * 128 * 2
    assert request_bytes(spec.layers, 10_000, BF16) == (3 * 2048 + 10_000) * row
    # plamo3.py's note: a `sliding_window` list is that list under its original name
    again = from_dict(_plamo3(sliding_window=[2048, 2048, 2048, None]))
    assert again.layers == spec.layers


def test_plamo3_without_a_window_per_layer_is_refused_by_field(tmp_path):
    import json

    # one window and a pattern: PLaMo's own config code derives the list, kvplan does not
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_plamo3(sliding_window=2048, sliding_window_pattern=4)))
    out = CliRunner().invoke(app, ["size", str(path), "-t", "1024"])
    assert out.exit_code == 2 and "interleaved_sliding_window" in out.output
    err = refusal(_plamo3(interleaved_sliding_window=[2048, None]))
    assert err.field == "interleaved_sliding_window" and "4 layers" in err.message
    err = refusal(_plamo3(interleaved_sliding_window=[2048, 0, None, None]))
    assert err.field == "interleaved_sliding_window[1]"


def test_rnj1_chunked_layers_are_sliding_windows_of_sliding_window_tokens():
    # vLLM rnj1.py: a Gemma3TextConfig whose chunked_attention layers get
    # per_layer_sliding_window=config.sliding_window (and a one-chunk lookback in the kernel
    # only): a SlidingWindowSpec of 2,048 tokens; the full layers keep every token
    raw = {"architectures": ["Rnj1ForCausalLM"], "model_type": "gemma3_text",
           "hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 8,
           "num_key_value_heads": 4, "head_dim": 256, "sliding_window": 2048,
           "layer_types": ["chunked_attention"] * 3 + ["full_attention"],
           "max_position_embeddings": 32768}
    spec = from_dict(raw)
    assert spec.layers == (SlidingWindow(4, 256, window=2048),) * 3 + (FullAttention(4, 256),)
    row = 2 * 4 * 256 * 2
    assert request_bytes(spec.layers, 10_000, BF16) == (3 * 2048 + 10_000) * row


def test_a_text_model_kept_in_another_repository_is_refused_naming_it():
    # Ultravox: text_model_id names the language model whose config vLLM loads
    # (ultravox.py); the nested text_config holds no layer count to size from
    raw = {"architectures": ["UltravoxModel"], "model_type": "ultravox",
           "text_model_id": "meta-llama/Llama-3.3-70B-Instruct",
           "text_config": {"model_type": "llama", "vocab_size": 128256}}
    err = refusal(raw)
    assert err.field == "text_model_id" and "Llama-3.3-70B" in err.message


def test_iquest_loopcoder_keeps_a_full_and_a_windowed_cache_per_layer():
    # vLLM iquest_loopcoder.py LoopCoderAttention: per decoder layer one Attention per pass
    # (loop_num 2): the first full, the second with sliding_window = loop_window_size (64);
    # heads of hidden / num_attention_heads = 128; the passes share the layer's weights
    raw = {"architectures": ["IQuestLoopCoderForCausalLM"], "model_type": "iquest_loopcoder",
           "hidden_size": 5120, "num_hidden_layers": 4, "num_attention_heads": 40,
           "num_key_value_heads": 8, "intermediate_size": 27648, "vocab_size": 76800,
           "loop_num": 2, "loop_window_size": 64, "tie_word_embeddings": False,
           "max_position_embeddings": 131072}
    spec = from_dict(raw)
    assert spec.layers == (FullAttention(8, 128), SlidingWindow(8, 128, window=64)) * 4
    row = 2 * 8 * 128 * 2
    assert request_bytes(spec.layers, 10_000, BF16) == 4 * (10_000 + 64) * row
    # weights once per decoder layer: q / o 5120 x 5120, k / v 5120 x 1024, a gated MLP, norms
    layer = 2 * 5120 * 5120 + 2 * 5120 * 1024 + 3 * 5120 * 27648 + 2 * 5120
    params = sum(t.num_params for t in inventory(spec).tensors)
    assert params == 2 * 76800 * 5120 + 4 * layer + 5120


def test_afmoe_trinity_nano_windows_and_dense_prefix():
    # arcee-ai Trinity-Nano's config.json field for field (its layer_types cut to the first
    # 8 of 56 entries and num_hidden_layers with it, as the copy found has it). vLLM afmoe.py:
    # sliding layers (layer_types) get config.sliding_window; the first num_dense_layers
    # layers have a dense MLP
    raw = {"architectures": ["AfmoeForCausalLM"], "attention_dropout": 0.0, "dtype": "bfloat16",
           "global_attn_every_n_layers": 4, "head_dim": 128, "hidden_act": "silu",
           "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
           "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 2,
           "load_balance_coeff": 0.001, "max_position_embeddings": 131072,
           "model_type": "afmoe", "moe_intermediate_size": 256, "mup_enabled": True,
           "n_group": 1, "num_attention_heads": 8, "num_dense_layers": 2,
           "num_expert_groups": 1, "num_experts": 128, "num_experts_per_tok": 8,
           "num_hidden_layers": 8, "num_key_value_heads": 2, "num_limited_groups": 1,
           "num_shared_experts": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
           "rope_theta": 10000, "route_norm": True, "route_scale": 2.826,
           "score_func": "sigmoid", "sliding_window": 2048, "tie_word_embeddings": False,
           "topk_group": 1, "use_cache": True, "use_grouped_mm": True, "vocab_size": 200192}
    spec = from_dict(raw)
    assert spec.kind_counts() == {"sliding": 6, "full": 2}
    assert {x.window for x in spec.layers if isinstance(x, SlidingWindow)} == {2048}
    row = 2 * 2 * 128 * 2
    assert request_bytes(spec.layers, 65_536, BF16) == (6 * 2048 + 2 * 65_536) * row
    assert [spec.is_moe_layer(i) for i in range(8)] == [False] * 2 + [True] * 6
    assert (spec.shared_expert_intermediate_size, spec.num_experts) == (256, 128)


def test_per_layer_moe_flags_decide_which_layers_hold_experts():
    # K-EXAONE (vLLM exaone_moe.py: config.mlp_layer_types[i] == "sparse"): the layers the
    # list marks dense keep a dense MLP of intermediate_size, the others the experts
    base = {"architectures": ["ExaoneMoEForCausalLM"], "model_type": "exaone_moe",
            "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
            "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 4096,
            "moe_intermediate_size": 256, "num_experts": 8, "num_experts_per_tok": 2,
            "num_shared_experts": 1, "vocab_size": 1000, "tie_word_embeddings": False,
            "sliding_window": 128, "layer_types": ["sliding_attention"] * 3
            + ["full_attention"], "max_position_embeddings": 32768}
    h, attention, norms = 1024, 2 * 1024 * 1024 + 2 * 1024 * 256, 2 * 1024
    dense = 3 * h * 4096
    moe = h * 8 + 8 * 3 * h * 256 + 3 * h * 256  # router, experts, the shared expert
    embed = 2 * 1000 * h + h

    def params(raw):
        return sum(t.num_params for t in inventory(from_dict(raw)).tensors)

    prefix = {**base, "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"]}
    assert [from_dict(prefix).is_moe_layer(i) for i in range(4)] == [False, True, True, True]
    assert params(prefix) == embed + 4 * (attention + norms) + dense + 3 * moe
    # dense first and last: listed per layer (ModelSpec.blocks)
    ends = {**base, "is_moe_layer": [False, True, True, False]}
    assert params(ends) == embed + 4 * (attention + norms) + 2 * dense + 2 * moe


# a published LongCat-Flash configuration (the longcat_flash config.json a public MLX port
# tests against, field for field)
LONGCAT_FLASH = {
    "architectures": ["LongcatFlashForCausalLM"], "model_type": "longcat_flash",
    "attention_method": "mla", "zero_expert_type": "identity", "hidden_size": 6144,
    "ffn_hidden_size": 18432, "moe_topk": 8, "expert_ffn_hidden_size": 1536,
    "n_routed_experts": 128, "zero_expert_num": 1, "num_layers": 48, "vocab_size": 131072,
    "max_position_embeddings": 262144, "num_attention_heads": 48, "kv_lora_rank": 512,
    "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
    "routed_scaling_factor": 2.5, "rms_norm_eps": 1e-6, "rope_theta": 10000,
    "mla_scale_q_lora": True, "mla_scale_kv_lora": True, "attention_bias": False,
    "norm_topk_prob": True}


def test_longcat_flash_caches_two_mla_latents_per_decoder_layer():
    # vLLM longcat_flash.py FlashDecoderLayer: two DeepseekV2MLAAttention per each of
    # num_layers layers, each an MLAAttentionSpec of kv_lora_rank + qk_rope_head_dim
    spec = from_dict(LONGCAT_FLASH)
    assert spec.layers == (MLA(kv_lora_rank=512, qk_rope_head_dim=64),) * 96
    assert per_token_bytes(spec.layers, BF16) == 2 * 48 * 576 * 2


def test_longcat_flash_weights_by_hand():
    # per decoder layer: two (norm, MLA, norm, MLP 18,432 wide) and the experts (128 of
    # 1,536; the zero experts have no weights) with their router and bias (fp32)
    spec = from_dict(LONGCAT_FLASH)
    h, heads = 6144, 48
    mla = (h * 1536 + 1536 + 1536 * heads * (128 + 64) + h * (512 + 64) + 512
           + 512 * heads * (128 + 128) + heads * 128 * h)
    half = 2 * h + mla + 3 * h * 18432
    moe = h * 128 + 128 + 128 * 3 * h * 1536
    expected = 2 * 131072 * h + 48 * (2 * half + moe) + h
    assert sum(t.num_params for t in inventory(spec).tensors) == expected


def test_hrm_text_keeps_a_cache_per_recurrence_step_and_layer():
    # vLLM hrm_text.py: the L stack runs at H_cycles x L_cycles steps, the H stack at
    # H_cycles steps, each step's layer with its own multi-head Attention cache; 2 layers
    # per stack, H 2 x L 3: 2 x 2 x (3 + 1) = 16 cache layers of 16 heads x 64
    raw = {"architectures": ["HrmTextForCausalLM"], "model_type": "hrm_text",
           "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 4,
           "num_layers_per_stack": 2, "H_cycles": 2, "L_cycles": 3,
           "intermediate_size": 4096, "vocab_size": 1000, "tie_word_embeddings": False,
           "max_position_embeddings": 4096}
    spec = from_dict(raw)
    assert spec.layers == (FullAttention(16, 64),) * 16
    assert per_token_bytes(spec.layers, BF16) == 16 * 2 * 16 * 64 * 2
    # the weights are the two stacks' 2 + 2 layers, once: the other 12 cache layers (the
    # later steps) hold none
    layers = {t.layer for t in inventory(spec).tensors if t.layer is not None}
    assert layers == {0, 1, 2, 3}


@pytest.mark.parametrize(("mode", "sliding_caches"), [("per_loop", 4), ("shared", 2)])
def test_dory_loops_its_recurrent_layers_with_a_cache_per_loop_or_one(mode, sliding_caches):
    # vLLM dory.py: layers n_input_layers <= i < n_input_layers + n_recurrent_layers (1..3)
    # keep n_recurrent_loops (2) Attention caches each in "per_loop" mode, one otherwise; an
    # "mlp" layer none. Windows of sliding_window on the sliding layers
    raw = {"architectures": ["DoryForCausalLM"], "model_type": "dory", "hidden_size": 1024,
           "num_hidden_layers": 5, "num_attention_heads": 8, "num_key_value_heads": 2,
           "head_dim": 128, "layer_types": ["full_attention", "sliding_attention",
                                             "sliding_attention", "mlp", "full_attention"],
           "sliding_window": 128, "n_input_layers": 1, "n_recurrent_layers": 3,
           "n_recurrent_loops": 2, "recurrent_kv_cache_mode": mode,
           "intermediate_size": 4096, "vocab_size": 1000, "tie_word_embeddings": False,
           "max_position_embeddings": 8192}
    spec = from_dict(raw)
    assert spec.kind_counts() == {"full": 2, "sliding": sliding_caches, "none": 1}
    row = 2 * 2 * 128 * 2
    assert request_bytes(spec.layers, 4096, BF16) == (2 * 4096 + sliding_caches * 128) * row
    # the loops' extra caches hold no weights: 5 layers' MLPs, 4 layers' attention
    tensors = inventory(spec).tensors
    assert sum(1 for t in tensors if t.name.endswith("down_proj.weight")) == 5
    assert sum(1 for t in tensors if t.name.endswith("o_proj.weight")) == 4


def test_muse_spark_windows_come_from_layer_types_not_its_draft_cycle():
    # vllm/models/muse_spark/nvidia/model.py: the model's own layers take sliding_window on
    # the layers layer_types calls sliding; the per-cycle windows of global_attn_cfg apply to
    # its draft only
    raw = {"architectures": ["MuseSparkForConditionalGeneration"], "model_type": "muse_spark",
           "text_config": {"model_type": "muse_spark_text", "hidden_size": 2048,
                           "num_hidden_layers": 4, "num_attention_heads": 16,
                           "num_key_value_heads": 2, "head_dim": 128, "sliding_window": 512,
                           "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
                           "global_attn_cfg": "[512,512,512,0]",
                           "mlp_layer_types": ["dense"] * 4,
                           "max_position_embeddings": 65536}}
    spec = from_dict(raw)
    assert spec.layers == (SlidingWindow(2, 128, window=512),) * 3 + (FullAttention(2, 128),)


def test_diffusion_gemma_caches_its_gemma_4_backbone_with_k_eq_v_forced():
    # vLLM diffusion_gemma.py: a Gemma4Model backbone writes the cache in its causal mode
    # (the bidirectional decoder mode writes none), and __init__ sets attention_k_eq_v = True
    # whatever the config says: the full layers keep num_global_key_value_heads (2) heads of
    # global_head_dim (512), the sliding ones 8 of 256 within 1,024 tokens
    raw = {"architectures": ["DiffusionGemmaForBlockDiffusion"], "model_type": "diffusion_gemma",
           "text_config": {"model_type": "diffusion_gemma_text", "hidden_size": 2816,
                           "num_hidden_layers": 6, "num_attention_heads": 16,
                           "num_key_value_heads": 8, "head_dim": 256, "global_head_dim": 512,
                           "num_global_key_value_heads": 2, "attention_k_eq_v": False,
                           "sliding_window": 1024, "layer_types": ["sliding_attention"] * 5
                           + ["full_attention"], "max_position_embeddings": 131072}}
    spec = from_dict(raw)
    assert spec.layers == (SlidingWindow(8, 256, window=1024),) * 5 + (FullAttention(2, 512),)
    assert request_bytes(spec.layers, 8192, BF16) == (
        5 * 1024 * 2 * 8 * 256 * 2 + 8192 * 2 * 2 * 512 * 2)


def test_ling_2_5_mixes_lightning_states_and_mla():
    # vLLM bailing_moe_linear.py: layer i is linear attention unless (i + 1) %
    # layer_group_size == 0 (then MLA); the linear layers' state is
    # linear_attention_state_shape: heads x head_dim x head_dim in the model dtype
    raw = {"architectures": ["BailingMoeV2_5ForCausalLM"], "model_type": "bailing_hybrid",
           "hidden_size": 2048, "num_hidden_layers": 8, "num_attention_heads": 16,
           "head_dim": 128, "layer_group_size": 4, "kv_lora_rank": 512, "q_lora_rank": 768,
           "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
           "max_position_embeddings": 131072, "vocab_size": 1000}
    spec = from_dict(raw)
    assert spec.kind_counts() == {"state": 6, "mla": 2}
    assert [x.kind for x in spec.layers][3::4] == ["mla", "mla"]
    state = next(x for x in spec.layers if isinstance(x, RecurrentState))
    assert state.state_bytes() == 16 * 128 * 128 * 2
    assert request_bytes(spec.layers, 1000, BF16) == 6 * 16 * 128 * 128 * 2 + 2 * 1000 * 576 * 2


def test_alice_ai_keeps_a_kda_state_beside_its_attention_layers():
    # vLLM alice_ai.py: linear_attention layers hold kda_state_shape(linear_num_key_heads 16,
    # linear_key_head_dim 128, linear_conv_kernel_dim 4): conv (3, 3 x 16 x 128) in bf16 and
    # a (16, 128, 128) recurrent state in fp32 (kda_state_dtype); full_attention layers
    # 2 KV heads of 256
    raw = {"architectures": ["AliceAIForCausalLM"], "model_type": "alice_ai",
           "hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16,
           "num_key_value_heads": 2, "head_dim": 256, "layer_types": ["linear_attention"] * 3
           + ["full_attention"], "linear_num_key_heads": 16, "linear_key_head_dim": 128,
           "linear_num_value_heads": 32, "linear_value_head_dim": 128,
           "linear_conv_kernel_dim": 4, "max_position_embeddings": 131072,
           "vocab_size": 1000, "intermediate_size": 4096}
    spec = from_dict(raw)
    assert spec.kind_counts() == {"state": 3, "full": 1}
    state = next(x for x in spec.layers if isinstance(x, RecurrentState))
    assert state.state_bytes() == 3 * 3 * 16 * 128 * 2 + 16 * 128 * 128 * 4
    assert spec.layers[3] == FullAttention(2, 256)


def test_ling_3_mixes_kda_states_and_mla():
    # vLLM bailing_moe_v3.py _is_kda_layer: with layer_group_size 4 and 10 layers, layers 3
    # and 7 ((i + 1) % 4 == 0) and 8, 9 (past the last whole group) are MLA, the rest Kimi
    # delta attention: kda_state_shape(32 heads, head_dim 128, short_conv_kernel_size 4)
    raw = {"architectures": ["BailingMoeV3ForCausalLM"], "model_type": "bailing_moe_v3",
           "hidden_size": 4096, "num_hidden_layers": 10, "num_attention_heads": 32,
           "head_dim": 128, "layer_group_size": 4, "short_conv_kernel_size": 4,
           "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64,
           "qk_nope_head_dim": 128, "v_head_dim": 128, "max_position_embeddings": 131072,
           "vocab_size": 1000}
    spec = from_dict(raw)
    assert [i for i, x in enumerate(spec.layers) if isinstance(x, MLA)] == [3, 7, 8, 9]
    state = next(x for x in spec.layers if isinstance(x, RecurrentState))
    assert state.state_bytes() == 3 * 3 * 32 * 128 * 2 + 32 * 128 * 128 * 4


def test_ling_3_vl_reads_its_bailing_hybrid_text_config_by_class():
    # bailing_moe_v3_vl.py sizes the KDA state from hf_config.text_config, whose class
    # (BailingMoeV3TextConfig) says model_type "bailing_hybrid", as Ling 2.5's may: the
    # class decides which layout is read
    text = {"model_type": "bailing_hybrid", "hidden_size": 4096, "num_hidden_layers": 4,
            "num_attention_heads": 32, "head_dim": 128, "layer_group_size": 4,
            "short_conv_kernel_size": 4, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
            "qk_nope_head_dim": 128, "v_head_dim": 128, "vocab_size": 1000,
            "intermediate_size": 8192, "max_position_embeddings": 32768}
    spec = from_dict({"architectures": ["BailingMoeV3VLForConditionalGeneration"],
                      "model_type": "bailing_moe_v3_vl", "text_config": text})
    assert spec.kind_counts() == {"state": 3, "mla": 1}
    assert spec.ssm is not None and spec.ssm.kind == "kda"  # the weights know the mixer
    # without a class naming the layout, "bailing_hybrid" alone has no reader
    with pytest.raises(SpecError) as err:
        from_dict({**text, "architectures": []})
    assert "bailing_hybrid" in err.value.message


def test_hy_v4_builds_an_indexer_on_its_sparse_layers_only():
    # vllm/models/hy_v4 HYV4MLAAttention: every layer an MLA latent (512 + 64); an indexer
    # cache (DeepseekV32IndexerCache of index_head_dim + index_head_dim / 128 x 4 = 132
    # bytes a token) where layer_types says sparse and indexer_types does not say shared
    raw = {"architectures": ["HYV4ForCausalLM"], "model_type": "hy_v4", "hidden_size": 4096,
           "num_hidden_layers": 4, "num_attention_heads": 32, "kv_lora_rank": 512,
           "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
           "v_head_dim": 128, "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64,
           "layer_types": ["full_attention"] + ["sparse_attention"] * 3,
           "indexer_types": ["full", "full", "shared", "full"], "hc_mult": 4,
           "enable_ihc": True, "max_position_embeddings": 131072, "vocab_size": 1000}
    spec = from_dict(raw)
    assert [x.index_head_dim for x in spec.layers] == [None, 128, None, 128]
    assert per_token_bytes(spec.layers, BF16) == 4 * 576 * 2 + 2 * 132


# --- Nemotron Parse: an mBART decoder under "decoder", a RADIO encoder under "encoder" -----

# A Nemotron-Parse-shaped config (illustrative sizes): a 2048 x 1648 page, 16-pixel patches.
PARSE = {"architectures": ["NemotronParseForConditionalGeneration"],
         "model_type": "nemotron_parse", "is_encoder_decoder": True,
         "image_size": [2048, 1648], "encoder": {"patch_size": 16},
         "decoder": {"d_model": 1024, "decoder_layers": 10, "decoder_attention_heads": 16,
                     "max_position_embeddings": 9000}}


def test_nemotron_parse_caches_the_text_and_the_image_encoder_tokens():
    spec = from_dict(PARSE)
    assert spec.kind_counts() == {"full": 10, "cross": 10}
    cross = spec.layers[1]
    # vLLM nemotron_parse.py get_num_image_tokens: (2048 // 16) * ((1648 // 16) // 4) + 1
    # = 128 * (103 // 4) + 1 = 128 * 25 + 1
    assert isinstance(cross, CrossAttention) and cross.encoder_tokens == 3201
    row = 2 * 16 * 64 * 2  # K and V of 16 heads x (1024 / 16), bf16: WhisperAttention is MHA
    assert per_token_bytes(spec.layers, BF16) == 10 * row
    assert request_bytes(spec.layers, 1000, BF16) == 10 * (1000 * row + 3201 * row)
    assert spec.max_context_tokens == 9000


def test_nemotron_parse_without_a_fixed_image_size_is_refused_by_field():
    raw = {**PARSE, "image_size": None}
    err = refusal(raw)
    assert err.field == "image_size" and "encoder" in err.message


# RADIO's arguments as RadioConfig takes them (vLLM radio.py; illustrative: a ViT-H, three
# teachers with a class token each, registers to a multiple of 8) and the decoder's widths
PARSE_ENCODER = {"patch_size": 16, "args": {
    "model": "vit_huge_patch16_224", "cpe_max_size": 2048, "cls_token_per_teacher": True,
    "register_multiple": 8, "teachers": [{"name": "clip"}, {"name": "siglip"},
                                         {"name": "dino"}, {"name": "clip"}]}}


def _radio_h_by_hand(text: int) -> int:
    # vLLM radio.py / intern_vit.py with transformers_utils/configs/radio.py's ViT-H
    # (1280 wide, 32 blocks, MLP 5120): the patch embedder 3 x 16 x 16 -> 1280 without a
    # bias; positions for (2048 / 16)^2 patches; 3 distinct teachers' class tokens + 5
    # registers (to 8); per block two LayerNorms, qkv and proj with biases, fc1 / fc2 with
    # biases and the layer scales ls1 / ls2. nemotron_parse.py RadioWithNeck: conv1 1280 ->
    # text (1 x 1, biased), conv2 text -> text (1 x 4, no bias), sum_proj 3840 -> text
    # (biased), three LayerNorms
    h, inter = 1280, 5120
    block = 4 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * inter + inter) + (inter * h + h) \
        + 2 * h
    vit = 3 * 16 * 16 * h + (2048 // 16) ** 2 * h + 8 * h + 32 * block
    neck = (h * text + text) + text * text * 4 + (3840 * text + text) + 3 * 2 * text
    return vit + neck


def test_nemotron_parse_weights_by_hand_from_the_engine_model():
    # vLLM nemotron_parse.py MBartDecoderNoPos: the embedding (no positions) and its
    # LayerNorm; per layer LayerNorms before self-attention, cross-attention and the FFN;
    # WhisperAttention / WhisperCrossAttention with q / k / v / out biased; fc1 / fc2 of
    # config.decoder.encoder_ffn_dim with biases; the final LayerNorm; an untied lm_head
    raw = {**PARSE, "encoder": PARSE_ENCODER,
           "decoder": {**PARSE["decoder"], "encoder_ffn_dim": 4096, "vocab_size": 52_000}}
    spec = from_dict(raw)
    assert supported(spec) is None
    d, ffn, vocab = 1024, 4096, 52_000
    attention = 4 * (d * d + d)
    layer = 3 * 2 * d + 2 * attention + (d * ffn + ffn) + (ffn * d + d)
    decoder = vocab * d + 2 * d + 10 * layer + 2 * d + vocab * d
    inv = inventory(spec)
    assert inv.bytes_where("vision") == 2 * _radio_h_by_hand(d)  # bf16
    assert sum(t.num_params for t in inv.tensors) == decoder + _radio_h_by_hand(d)
    # tied (tie_word_embeddings in the decoder's config): one vocab x d matrix less
    tied = from_dict({**raw, "decoder": {**raw["decoder"], "tie_word_embeddings": True}})
    assert sum(t.num_params for t in inventory(tied).tensors) == (
        decoder - vocab * d + _radio_h_by_hand(d))


def test_parse_3_5_weights_keep_grouped_k_and_v():
    # nemotron_parse3_5.py: NemotronParseSelfAttention's qkv of 16 q and 4 KV heads of 64,
    # biased; no cross-attention; fc1 / fc2 of decoder_ffn_dim; the same RADIO encoder
    raw = {"architectures": ["RadioMBartPrefixForCausalLM"], "model_type": "nemotron_parse3_5",
           "image_size": [2048, 1648], "encoder": PARSE_ENCODER,
           "decoder": {"d_model": 1024, "decoder_layers": 12, "decoder_attention_heads": 16,
                       "self_attention_kv_heads": 4, "add_cross_attention": False,
                       "decoder_ffn_dim": 4096, "vocab_size": 52_000,
                       "tie_word_embeddings": True}}
    d, kv, ffn, vocab = 1024, 4 * 64, 4096, 52_000
    attention = (d * d + d) + 2 * (kv * d + kv) + (d * d + d)
    layer = 2 * 2 * d + attention + (d * ffn + ffn) + (ffn * d + d)
    decoder = vocab * d + 2 * d + 12 * layer + 2 * d
    params = sum(t.num_params for t in inventory(from_dict(raw)).tensors)
    assert params == decoder + _radio_h_by_hand(d)


def test_parse_without_the_encoder_arguments_has_no_weights_estimate():
    # no encoder.args (or a ViT name, a RadioConfig option kvplan does not lay out): the
    # weights are not guessed
    from kvplan.core.weights import estimable

    for encoder in ({"patch_size": 16}, {"patch_size": 16, "args": {"model": "vit_giant"}},
                    {**PARSE_ENCODER, "args": {**PARSE_ENCODER["args"],
                                               "qk_normalization": True}}):
        spec = from_dict({**PARSE, "encoder": encoder, "decoder": {
            **PARSE["decoder"], "encoder_ffn_dim": 4096, "vocab_size": 52_000}})
        assert "RADIO" in (estimable(spec) or "")


def test_parse_3_5_keeps_one_grouped_self_attention_cache_per_layer():
    # vLLM nemotron_parse3_5.py: the image is a causal prefix of the decoder's sequence (no
    # cross-attention); NemotronParseSelfAttention keeps self_attention_kv_heads K/V heads
    raw = {"architectures": ["RadioMBartPrefixForCausalLM"], "model_type": "nemotron_parse3_5",
           "image_size": [2048, 1648], "encoder": {"patch_size": 16},
           "decoder": {"d_model": 1024, "decoder_layers": 12, "decoder_attention_heads": 16,
                       "self_attention_kv_heads": 4, "add_cross_attention": False,
                       "causal_vision_prefix": True}}
    spec = from_dict(raw)
    assert spec.kind_counts() == {"full": 12}
    assert all(isinstance(x, FullAttention) for x in spec.layers)
    row = 2 * 4 * 64 * 2  # K and V of 4 heads x 64, bf16
    assert request_bytes(spec.layers, 5000, BF16) == 12 * 5000 * row
    raw["decoder"] = {**raw["decoder"], "add_cross_attention": True}
    assert refusal(raw).field == "decoder.add_cross_attention"


# --- Domyn Edge: a head size and a window per layer ----------------------------------------

def _domyn() -> dict:
    # The shape the reference DomynEdgeConfig defaults to (36 layers: 2 full, then 8 times
    # three windowed layers of 64-wide heads and a full one of 256, then 2 full), written
    # the way vLLM domyn_edge.py reads it: per_layer_config[i].head_dim, window_sizes[i][0]
    heads = [256, 256] + [64, 64, 64, 256] * 8 + [256, 256]
    windows = [-1, -1] + [1024, 1024, 1024, -1] * 8 + [-1, -1]
    return {"architectures": ["DomynEdgeForCausalLM"], "model_type": "domynedge",
            "hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36,
            "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 115269,
            "max_position_embeddings": 8192, "tie_word_embeddings": True,
            "position_layers": ["nope", "nope"] + ["rope", "rope", "rope", "nope"] * 8
            + ["nope", "nope"],
            "per_layer_config": [{"head_dim": h} for h in heads],
            "window_sizes": [[w, 0] for w in windows]}


def test_domyn_edge_sizes_each_layer_by_its_own_head_size_and_window():
    spec = from_dict(_domyn())
    assert spec.kind_counts() == {"full": 12, "sliding": 24}
    sliding = next(x for x in spec.layers if isinstance(x, SlidingWindow))
    # vLLM's per_layer_sliding_window is window_sizes[i][0] + 1 (the reference attends to
    # w + 1 keys)
    assert sliding.window == 1025 and sliding.head_dim == 64
    full_row, window_row = 2 * 8 * 256 * 2, 2 * 8 * 64 * 2  # K and V of 8 heads, bf16
    assert per_token_bytes(spec.layers, BF16) == 12 * full_row + 24 * window_row
    assert request_bytes(spec.layers, 4096, BF16) == (12 * 4096 * full_row
                                                      + 24 * 1025 * window_row)


def test_domyn_edge_without_a_per_layer_list_is_refused_by_field():
    raw = _domyn()
    raw["window_sizes"] = raw["window_sizes"][:-1]
    assert refusal(raw).field == "window_sizes"
    raw = _domyn()
    raw["per_layer_config"][3] = {"head_dim": None}
    assert refusal(raw).field == "per_layer_config[3].head_dim"


def test_domyn_edge_weights_by_hand():
    # vLLM domyn_edge.py: per layer q (32 heads) / k / v (8 heads) / o of that layer's head
    # size, no biases; a weighted k_norm over a head (q_norm has no weight); four RMSNorms
    # around attention and the Qwen2MLP (gate, up, down); a tied embedding and a final norm
    spec = from_dict(_domyn())
    d, inter = 2560, 9728
    heads = [256, 256] + [64, 64, 64, 256] * 8 + [256, 256]
    hand = 115269 * d + d + sum(d * 32 * hd + 2 * d * 8 * hd + 32 * hd * d + 3 * d * inter
                                + 4 * d + hd for hd in heads)
    assert sum(t.num_params for t in inventory(spec).tensors) == hand


# --- Zamba2's weights: shared blocks used in turn, an adapter per hybrid layer -------------

def test_zamba2_weights_by_hand_from_the_engine_model():
    # vLLM zamba2.py: the embedding (the LM head tied to it); per layer an RMSNorm and a
    # MambaMixer2 (in_proj to z, x, B, C and dt; a depthwise conv over x, B, C with its
    # bias; dt_bias, A_log, D per head; the gated norm over the inner width; out_proj); per
    # hybrid layer a hidden x hidden linear and a LoRA on the shared MLP's gate_up (A: rank x
    # hidden, B: 2 x inter x rank) and, with use_shared_attention_adapter, on q, k and v
    # (2 x hidden wide); num_mem_blocks shared blocks: RMSNorms of 2h and h, qkv 3 x 2h from
    # 2h, o_proj 2h -> h, gate_up 2 x inter and down; the final norm
    h, inter, vocab, rank = 2560, 10240, 32000, 128
    inner, heads, state, conv = 2 * h, 80, 64, 4
    types = ["mamba", "mamba", "hybrid", "mamba", "mamba", "hybrid"]
    raw = {"architectures": ["Zamba2ForCausalLM"], "model_type": "zamba2",
           "num_hidden_layers": 6, "hidden_size": h, "num_attention_heads": 32,
           "intermediate_size": inter, "vocab_size": vocab,
           "layers_block_type": types, "n_mamba_heads": heads, "mamba_headdim": 64,
           "mamba_d_state": state, "mamba_ngroups": 1, "mamba_d_conv": conv,
           "mamba_expand": 2, "num_mem_blocks": 2, "use_shared_attention_adapter": False,
           "adapter_rank": rank, "max_position_embeddings": 4096}
    conv_dim = inner + 2 * state
    mixer = (h * (2 * inner + 2 * state + heads) + conv_dim * conv + conv_dim + 3 * heads
             + inner + inner * h)
    block = 2 * h + h + 2 * h * 3 * 2 * h + 2 * h * h + h * 2 * inter + inter * h
    mlp_adapter = rank * h + 2 * inter * rank
    qkv_adapters = 3 * (rank * 2 * h + 2 * h * rank)
    base = vocab * h + 6 * (h + mixer) + 2 * h * h + 2 * block + h
    spec = from_dict(raw)
    assert supported(spec) is not None  # laid out by the Zamba2 path, not a checkpoint's names
    assert sum(t.num_params for t in inventory(spec).tensors) == base + 2 * mlp_adapter
    spec = from_dict({**raw, "use_shared_attention_adapter": True})
    assert sum(t.num_params for t in inventory(spec).tensors) == (
        base + 2 * (mlp_adapter + qkv_adapters))


@pytest.mark.parametrize("raw", [
    GLM_47_FLASH, HUNYUAN_A13B, LONGCAT_FLASH, _domyn(),
    {**PARSE, "encoder": PARSE_ENCODER,
     "decoder": {**PARSE["decoder"], "encoder_ffn_dim": 4096, "vocab_size": 52_000}},
], ids=lambda raw: raw["architectures"][0])
def test_the_shapes_typed_here_get_a_weights_figure_from_plan(tmp_path, raw):
    # the families above with no stored config.json: `size` sizes them and `plan` budgets
    # weights for them (never "no parameter count"; LongCat-Flash's 1.1 TB do not fit)
    import json

    from kvplan.sources.weights import estimate_weights

    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    runner = CliRunner()
    assert runner.invoke(app, ["size", str(path), "-t", "4096"]).exit_code == 0
    planned = runner.invoke(app, ["plan", str(path), "--gpu", "h200", "--tp", "4",
                                  "--max-model-len", "4096", "-f", "json"])
    assert planned.exit_code in (0, 1), planned.output
    assert "weights" in planned.output and "no parameter count" not in planned.output
    assert estimate_weights(raw, str(path)).total_params > 0
