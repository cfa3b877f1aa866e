"""Real config.json files of the families added to reach vLLM 0.33's generation registry
(tests/fixtures/hf-configs/families, sources in tests/fixtures/hf-configs/SOURCES.md): the
reader takes each as published (nested text configs, extra keys), and its bytes per token,
per request and per page are derived here by hand from the engine's model file."""

from __future__ import annotations

import json

import pytest
from engine_cases import served_version_flags
from paths import FIXTURES, ROOT
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.dtypes import BF16
from kvplan.core.layers import MLA, FullAttention, RecurrentState, SlidingWindow
from kvplan.core.sizing import per_token_bytes, request_bytes
from kvplan.engines.vllm import VllmConfig, layer_page_specs
from kvplan.sources.hfconfig import load_config_file

FAMILIES = FIXTURES / "hf-configs" / "families"
EXAONE_4_5 = FAMILIES / "LGAI-EXAONE--EXAONE-4.5-33B.json"
HUNYUAN_A13B = FAMILIES / "tencent--Hunyuan-A13B.json"
EXAONE_4_0 = FAMILIES / "LGAI-EXAONE--EXAONE-4.0-32B.json"
GLM_4_5 = FAMILIES / "zai-org--GLM-4.5.json"
COMMAND_R = FAMILIES / "CohereForAI--c4ai-command-r-v01.json"
LFM2_5_VL = FAMILIES / "LiquidAI--LFM2.5-VL-1.6B.json"
QWEN3_VL_8B = FAMILIES / "Qwen--Qwen3-VL-8B-Instruct.json"
QWEN3_VL_30B = FAMILIES / "Qwen--Qwen3-VL-30B-A3B-Instruct.json"
QWEN3_5_27B = FAMILIES / "Qwen--Qwen3.5-27B.json"
QWEN3_5_35B = FAMILIES / "Qwen--Qwen3.5-35B-A3B.json"
KIMI_K2_5 = FAMILIES / "moonshotai--Kimi-K2.5.json"
VOXTRAL_MINI = FAMILIES / "mistralai--Voxtral-Mini-3B-2507.json"
DEVSTRAL_SMALL_2 = FAMILIES / "mistralai--Devstral-Small-2-24B-Instruct.json"
LAGUNA_XS_2 = FAMILIES / "poolside--Laguna-XS.2-FP8.json"
PHI_1 = FAMILIES / "microsoft--phi-1.json"
QWEN2_5_VL_7B = FAMILIES / "Qwen--Qwen2.5-VL-7B-Instruct.json"


def _params(path, places=("embed", "layer", "final", "head")):
    from kvplan.core.weights import inventory

    return sum(t.num_params for t in inventory(load_config_file(path)).tensors
               if t.place in places)


def test_exaone_4_5_33b_reads_its_nested_text_config():
    spec = load_config_file(EXAONE_4_5)
    # vLLM exaone4_5.py: Exaone4_5_ForConditionalGeneration builds Exaone4ForCausalLM from
    # config.get_text_config(); exaone4.py Exaone4Attention: head_dim = hidden_size /
    # num_attention_heads = 5120 / 40 = 128 (no head_dim key), 8 KV heads, and
    # per_layer_sliding_window = sliding_window (4,096) where layer_types[i] is
    # "sliding_attention": three sliding layers then a full one, 16 times
    assert spec.layers == ((SlidingWindow(8, 128, window=4096),) * 3
                           + (FullAttention(8, 128),)) * 16
    # the MTP layer (text_config.num_nextn_predict_layers 1) is a draft: exaone4_5_mtp.py,
    # loaded only for speculative decoding; the target keeps num_hidden_layers caches
    assert spec.max_context_tokens == 262_144


def test_exaone_4_5_33b_bytes_by_hand():
    spec = load_config_file(EXAONE_4_5)
    row = 2 * 8 * 128 * 2  # K and V, 8 KV heads of 128, bf16 (text_config.dtype)
    assert spec.dtype == "bf16"
    assert per_token_bytes(spec.layers, BF16) == 64 * row == 262_144
    # a 32,768-token request: 16 full layers hold every token, 48 sliding ones 4,096
    assert request_bytes(spec.layers, 32_768, BF16) == (16 * 32_768 + 48 * 4096) * row
    assert request_bytes(spec.layers, 32_768, BF16) == 2_952_790_016
    # under the window every layer holds the whole request
    assert request_bytes(spec.layers, 1000, BF16) == 64 * 1000 * row
    # vLLM's pages (block 16): FullAttentionSpec and SlidingWindowSpec of the same head
    # shape, 16 x 2 x 8 x 128 x 2 bytes each
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=32_768))
    assert {(p.kind, p.block_size, p.page_bytes) for p in pages if p is not None} == {
        ("sliding", 16, 16 * row), ("full", 16, 16 * row)}


def test_exaone_4_5_33b_text_weights_by_hand():
    # vLLM exaone4.py (the language model exaone4_5.py builds): an untied 153,600 x 5,120
    # embedding and LM head; per layer q / o 5120 x 5120, k / v 1024 x 5120, no biases,
    # q_norm / k_norm over a 128-wide head, post_attention_layernorm and
    # post_feedforward_layernorm, a gated MLP 27,392 wide; the final norm. Only the text
    # model: the MTP layer (exaone4_5_mtp.py) and the vision tower are left out here
    from kvplan.core.weights import inventory

    h, inter, vocab = 5120, 27392, 153_600
    layer = 2 * h * h + 2 * 1024 * h + 2 * 128 + 2 * h + 3 * h * inter
    hand = 2 * vocab * h + 64 * layer + h
    assert hand == 32_527_504_384  # the vision tower and MTP layer bring the rest of "33B"
    text = sum(t.num_params for t in inventory(load_config_file(EXAONE_4_5)).tensors
               if t.place in ("embed", "layer", "final", "head"))
    assert text == hand


def test_exaone_4_5_33b_mtp_layer_shares_the_embedding_and_head():
    # vLLM exaone4_5_mtp.py Exaone4_5MultiTokenPredictor: fc (2 x 5120 -> 5120, no bias),
    # pre_fc_norm_hidden, pre_fc_norm_embedding, norm and one Exaone4DecoderLayer;
    # load_weights takes embed_tokens and lm_head from the model's (the checkpoint's mtp.*
    # holds no copies)
    from kvplan.core.weights import inventory

    h, inter = 5120, 27392
    layer = 2 * h * h + 2 * 1024 * h + 2 * 128 + 2 * h + 3 * h * inter
    mtp = sum(t.num_params for t in inventory(load_config_file(EXAONE_4_5)).tensors
              if t.place == "mtp")
    assert mtp == 2 * h * h + 3 * h + layer


def test_hunyuan_a13b_official_config_is_plain_gqa():
    # the config Tencent ships beside its remote code: model_type "hunyuan", per-layer
    # lists for the experts, use_cla false, null MLA keys (use_mla false), no head_dim
    # (attention_head_dim 128). vLLM 0.33 serves HunYuanMoEV1ForCausalLM through the
    # Transformers backend (registry.py): transformers/base.py create_attention_instances
    # gives each of the 32 layers an Attention of num_key_value_heads (8) heads of
    # hidden_size / num_attention_heads = 4096 / 32 = 128
    spec = load_config_file(HUNYUAN_A13B)
    assert spec.layers == (FullAttention(8, 128),) * 32
    row = 2 * 8 * 128 * 2  # K and V, bf16 (torch_dtype)
    assert per_token_bytes(spec.layers, BF16) == 32 * row == 131_072
    assert request_bytes(spec.layers, 32_768, BF16) == 32_768 * 32 * row == 4 * 2**30
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=32_768))
    assert {(p.kind, p.block_size, p.page_bytes) for p in pages} == {("full", 16, 16 * row)}
    assert spec.max_context_tokens == 32_768


def test_hunyuan_a13b_weights_by_hand():
    # transformers modeling_hunyuan_v1_moe.py (the model vLLM's Transformers backend
    # builds): a tied 128,167 x 4,096 embedding; per layer two RMSNorms, q / o 4096 x 4096,
    # k / v 1024 x 4096, no biases (attention_bias false), q / k RMSNorms over a 128-wide
    # head (use_qk_norm), a 64-expert router, 64 experts and one shared MLP (use_mixed_mlp_moe,
    # num_shared_expert 1) of 3 x 4096 x 3072 each; the final norm. 80.4 billion: the
    # model card's "80B total parameters"
    from kvplan.core.weights import inventory

    h, inter = 4096, 3072
    attention = 2 * h * h + 2 * 1024 * h
    layer = 2 * h + attention + 2 * 128 + h * 64 + 65 * 3 * h * inter
    hand = 128_167 * h + 32 * layer + h
    assert hand == 80_393_183_232
    params = sum(t.num_params for t in inventory(load_config_file(HUNYUAN_A13B)).tensors)
    # the q / k norms follow use_qk_norm (kvplan.sources.families); they were left out once
    assert params == hand


# --- families with no config.json of their own before (SOURCES.md: their copies) -----------

def _row(kv_heads: int, head_dim: int) -> int:
    return 2 * kv_heads * head_dim * 2  # K and V rows, 2-byte (bf16 / fp16) elements


def test_exaone_4_0_32b_bytes_by_hand():
    # vLLM exaone4.py Exaone4Attention: 8 KV heads of head_dim 128, per_layer_sliding_window
    # = sliding_window (4,096) where layer_types[i] is "sliding_attention" (LLLG: three
    # sliding layers, then a full one)
    spec = load_config_file(EXAONE_4_0)
    assert spec.layers == ((SlidingWindow(8, 128, window=4096),) * 3
                           + (FullAttention(8, 128),)) * 16
    assert spec.max_context_tokens == 131_072
    row = _row(8, 128)
    assert per_token_bytes(spec.layers, BF16) == 64 * row == 262_144
    assert request_bytes(spec.layers, 32_768, BF16) == (16 * 32_768 + 48 * 4096) * row
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=32_768))
    assert {(p.kind, p.page_bytes) for p in pages if p is not None} == {
        ("sliding", 16 * row), ("full", 16 * row)}


def test_exaone_4_0_32b_parameters_match_the_model_card():
    # exaone4.py: per layer q / o 5120 x 5120, k / v 1024 x 5120, q_norm and k_norm over a
    # 128-wide head, post_attention_layernorm and post_feedforward_layernorm, a gated MLP
    # 27,392 wide; the final norm. The card: "Number of Parameters (without embeddings):
    # 30.95B", given to four figures, so within 0.005e9 of it
    h, inter = 5120, 27392
    layer = 2 * h * h + 2 * 1024 * h + 2 * 128 + 2 * h + 3 * h * inter
    hand = 64 * layer + h
    assert abs(hand - 30.95e9) <= 0.005e9
    assert _params(EXAONE_4_0, ("layer", "final")) == hand
    # and the untied 102,400 x 5,120 embedding and LM head beside them
    assert _params(EXAONE_4_0) == hand + 2 * 102_400 * h


def test_glm_4_5_bytes_by_hand():
    # vLLM glm4_moe.py Glm4MoeAttention: num_key_value_heads (8) heads of head_dim 128 on
    # every one of the 92 layers (partial_rotary_factor changes the rope, not the cache);
    # the MTP layer (glm4_moe_mtp.py) is a draft's, not the target's
    spec = load_config_file(GLM_4_5)
    assert spec.layers == (FullAttention(8, 128),) * 92
    row = _row(8, 128)
    assert per_token_bytes(spec.layers, BF16) == 92 * row == 376_832
    assert request_bytes(spec.layers, 131_072, BF16) == 131_072 * 92 * row
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=131_072))
    assert {(p.kind, p.block_size, p.page_bytes) for p in pages} == {("full", 16, 16 * row)}


def test_glm_4_5_parameters_by_hand_and_the_model_card():
    # glm4_moe.py: per layer q 5120 -> 96 x 128 and k / v 5120 -> 8 x 128, each with a bias
    # (attention_bias), o_proj without one, two norms; layers 0-2 a gated MLP 12,288 wide,
    # the other 89 a router (160 x 5120) with its fp32 e_score_correction_bias, 160 experts
    # and one shared expert of 3 x 5120 x 1536; an untied 151,552-row embedding and LM head
    h, q, kv, vocab = 5120, 96 * 128, 8 * 128, 151_552
    attention = h * q + q + 2 * (h * kv + kv) + q * h + 2 * h
    moe = 160 * h + 160 + 161 * 3 * h * 1536
    hand = 2 * vocab * h + 92 * attention + 3 * 3 * h * 12288 + 89 * moe + h
    # the generic layout leaves out only use_qk_norm's q_norm / k_norm (128 each a layer)
    assert _params(GLM_4_5) == hand
    # the card's "355 billion total parameters" is rounded to three figures and does not
    # say whether the MTP layer is in it: within 1% either way
    assert abs(hand - 355e9) <= 0.01 * 355e9
    assert abs(_params(GLM_4_5, ("embed", "layer", "final", "head", "mtp")) - 355e9) \
        <= 0.01 * 355e9


def test_command_r_bytes_and_parameters():
    # vLLM commandr.py CohereAttention: 64 KV heads (no GQA) of 8192 / 64 = 128, fp16
    # (torch_dtype); 40 layers, max_position_embeddings 8,192
    spec = load_config_file(COMMAND_R)
    assert spec.layers == (FullAttention(64, 128),) * 40
    assert spec.dtype == "fp16" and spec.max_context_tokens == 8192
    assert per_token_bytes(spec.layers, BF16) == 40 * _row(64, 128) == 1_310_720
    # CohereDecoderLayer: one input_layernorm (LayerNorm weight only) before the parallel
    # attention and MLP; q / k / v / o 8192 x 8192, a gated MLP 22,528 wide; the tied
    # 256,000-row embedding; the final norm. The card: "a 35 billion parameter" model, two
    # figures, so within half a billion
    h = 8192
    hand = 256_000 * h + 40 * (4 * h * h + 3 * h * 22528 + h) + h
    assert _params(COMMAND_R) == hand
    assert abs(hand - 35e9) <= 0.5e9


def test_lfm2_5_vl_reads_short_convolutions_from_its_text_config():
    # vLLM lfm2_vl.py builds Lfm2ForCausalLM from text_config; lfm2.py: "conv" layers keep
    # MambaStateShapeCalculator.short_conv_state_shape(intermediate_size=conv_dim,
    # conv_kernel=conv_L_cache): (conv_L_cache - 1) x conv_dim = 2 x 2048 in the model
    # dtype; attention layers 8 KV heads of 2048 / 32 = 64
    spec = load_config_file(LFM2_5_VL)
    kinds = "cc" + "a" + "cc" + "a" + "cc" + "a" + "c" + "a" + "c" + "a" + "c" + "a" + "c"
    assert [("a" if isinstance(x, FullAttention) else "c") for x in spec.layers] == list(kinds)
    assert all(x == FullAttention(8, 64) for x in spec.layers if isinstance(x, FullAttention))
    states = [x for x in spec.layers if isinstance(x, RecurrentState)]
    assert len(states) == 10 and all(x.state_bytes() == 2 * 2048 * 2 for x in states)
    assert per_token_bytes(spec.layers, BF16) == 6 * _row(8, 64) == 12_288
    # a request: 6 attention layers hold every token, 10 conv states whatever its length
    assert request_bytes(spec.layers, 4096, BF16) == 4096 * 6 * _row(8, 64) + 10 * 8192


def test_lfm2_5_vl_language_model_matches_lfm2_1_2b_published_count():
    # vLLM lfm2.py ties the LM head to embed_tokens whatever the config says (Lfm2Config's
    # default is True; this text_config leaves the key out); the LFM2-1.2B model card gives
    # 1,170,340,608 parameters for these shapes. The generic layout leaves out only the
    # attention layers' q_layernorm / k_layernorm (6 layers x 2 x 64)
    spec = load_config_file(LFM2_5_VL)
    assert spec.tie_word_embeddings is True
    assert _params(LFM2_5_VL) == 1_170_340_608 - 6 * 2 * 64


@pytest.mark.parametrize(("fixture", "layers", "kv_heads", "moe"), [
    (QWEN3_VL_8B, 36, 8, False), (QWEN3_VL_30B, 48, 4, True)])
def test_qwen3_vl_text_configs(fixture, layers, kv_heads, moe):
    # vLLM qwen3_vl.py / qwen3_vl_moe.py build Qwen3LLMForCausalLM / Qwen3MoeLLMForCausalLM
    # from text_config: num_key_value_heads heads of head_dim 128 on every layer
    spec = load_config_file(fixture)
    assert spec.layers == (FullAttention(kv_heads, 128),) * layers
    assert per_token_bytes(spec.layers, BF16) == layers * _row(kv_heads, 128)
    assert spec.max_context_tokens == 262_144
    # Qwen3 layers: q 4096 / 32 x 128 wide, k / v kv_heads x 128, o back, q_norm / k_norm
    # over one 128-wide head, two norms; a gated MLP (8B: 12,288 wide) or a router and 128
    # experts of 768 (30B-A3B); untied 151,936-row embedding and LM head; the final norm
    h = 4096 if not moe else 2048
    attention = 2 * h * 32 * 128 + 2 * h * kv_heads * 128 + 2 * 128 + 2 * h
    ffn = 128 * h + 128 * 3 * h * 768 if moe else 3 * h * 12288
    assert _params(fixture) == 2 * 151_936 * h + layers * (attention + ffn) + h


@pytest.mark.parametrize(("fixture", "full", "kv_heads", "gdn", "k_heads", "v_heads"), [
    (QWEN3_5_27B, 16, 4, 48, 16, 48), (QWEN3_5_35B, 10, 2, 30, 16, 32)])
def test_qwen3_5_gated_delta_net_state_by_hand(fixture, full, kv_heads, gdn, k_heads, v_heads):
    # vLLM qwen3_5.py (Qwen3NextDecoderLayer): every fourth layer (full_attention_interval)
    # is attention with num_key_value_heads heads of head_dim 256; the others gated
    # delta-nets whose state is MambaStateShapeCalculator.gated_delta_net_state_shape: a conv
    # state of (linear_conv_kernel_dim - 1) x (2 x k_heads x 128 + v_heads x 128) in the model
    # dtype and a recurrent state of v_heads x 128 x 128 in mamba_ssm_dtype (float32 here)
    spec = load_config_file(fixture)
    assert [isinstance(x, FullAttention) for x in spec.layers] == \
        [i % 4 == 3 for i in range(full + gdn)]
    assert all(x == FullAttention(kv_heads, 256) for x in spec.layers
               if isinstance(x, FullAttention))
    state = 3 * (2 * k_heads * 128 + v_heads * 128) * 2 + v_heads * 128 * 128 * 4
    assert all(x.state_bytes() == state for x in spec.layers if isinstance(x, RecurrentState))
    assert per_token_bytes(spec.layers, BF16) == full * _row(kv_heads, 256)
    assert request_bytes(spec.layers, 8192, BF16) == \
        8192 * full * _row(kv_heads, 256) + gdn * state


def test_kimi_k2_5_is_kimi_k2_inside_a_wrapper():
    # vLLM kimi_k25.py builds DeepseekV3ForCausalLM from text_config: 61 MLA layers caching
    # one kv_lora_rank + qk_rope_head_dim latent (512 + 64) per token, not split by heads
    spec = load_config_file(KIMI_K2_5)
    assert spec.layers == (MLA(512, 64),) * 61
    assert per_token_bytes(spec.layers, BF16) == 61 * (512 + 64) * 2 == 70_272
    # the language model has Kimi K2's shapes (SOURCES.md: the Kimi-K2-Instruct copy)
    assert _params(KIMI_K2_5) == _params(FIXTURES / "hf-configs" /
                                         "moonshotai--Kimi-K2-Instruct.json")


def test_voxtral_mini_reads_its_llama_text_config():
    # vLLM voxtral.py builds the language model from text_config (LlamaForCausalLM): 30
    # layers of 8 KV heads x 128; the Whisper-style audio encoder runs once per clip and
    # keeps no cache in the decoder's pool
    spec = load_config_file(VOXTRAL_MINI)
    assert spec.layers == (FullAttention(8, 128),) * 30
    assert per_token_bytes(spec.layers, BF16) == 30 * _row(8, 128) == 122_880
    # llama.py: q 3072 -> 4096, k / v 3072 -> 1024, o back, a gated MLP 8,192 wide, two
    # norms; untied (LlamaConfig's default) 131,072-row embedding and LM head; final norm.
    # The audio tower is not counted (kvplan.core.weights generic_note)
    h = 3072
    layer = 2 * h * 4096 + 2 * h * 1024 + 3 * h * 8192 + 2 * h
    assert _params(VOXTRAL_MINI) == 2 * 131_072 * h + 30 * layer + h


def test_devstral_small_2_reads_its_ministral3_text_config():
    # vLLM mistral3.py builds the language model from text_config (ministral3: Llama-style
    # attention), 40 layers of 8 KV heads x head_dim 128 (not 5120 / 32 = 160)
    spec = load_config_file(DEVSTRAL_SMALL_2)
    assert spec.layers == (FullAttention(8, 128),) * 40
    assert spec.max_context_tokens == 393_216
    assert per_token_bytes(spec.layers, BF16) == 40 * _row(8, 128) == 163_840


def test_laguna_xs_2_bytes_by_hand():
    # vLLM laguna.py LagunaDecoderLayer: every layer's LagunaAttention has
    # num_key_value_heads (8) KV heads of head_dim 128, whatever its own query head count
    # (num_attention_heads_per_layer: 48 on full layers, 64 on sliding ones), and
    # per_layer_sliding_window = sliding_window (512) where layer_types[i] is
    # "sliding_attention": one full layer then three sliding ones, ten times
    spec = load_config_file(LAGUNA_XS_2)
    assert spec.layers == ((FullAttention(8, 128),)
                           + (SlidingWindow(8, 128, window=512),) * 3) * 10
    row = _row(8, 128)
    assert per_token_bytes(spec.layers, BF16) == 40 * row == 163_840
    # a 65,536-token request: 10 full layers hold every token, 30 sliding ones 512
    assert request_bytes(spec.layers, 65_536, BF16) == (10 * 65_536 + 30 * 512) * row
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=65_536))
    assert {(p.kind, p.page_bytes) for p in pages} == {("full", 16 * row),
                                                       ("sliding", 16 * row)}


def test_phi_1_bytes_and_weights_by_hand():
    # vLLM 0.33 serves PhiForCausalLM through its Transformers backend (registry.py):
    # transformers modeling_phi.py PhiAttention, 32 KV heads of 2048 / 32 = 64 on each of
    # 24 layers; the float32 checkpoint is served in bf16 (vLLM config/model.py
    # _resolve_auto_dtype downcasts float32), so the cache is 2-byte too
    spec = load_config_file(PHI_1)
    assert spec.layers == (FullAttention(32, 64),) * 24
    assert spec.dtype == "fp32" and spec.max_context_tokens == 2048
    assert per_token_bytes(spec.layers, BF16) == 24 * _row(32, 64) == 196_608
    # modeling_phi.py: per layer one input_layernorm (LayerNorm, weight and bias) before the
    # parallel attention and MLP, q / k / v / dense 2048 x 2048 with biases, fc1 2048 -> 8192
    # and fc2 back, both with biases (no gate); final_layernorm; an untied embedding and an
    # lm_head with a bias. Not a gated MLP: counting one made phi-1 a third heavier
    h, vocab = 2048, 50_295
    layer = 2 * h + 4 * (h * h + h) + (h * 8192 + 8192) + (8192 * h + h)
    hand = vocab * h + 24 * layer + 2 * h + (vocab * h + vocab)
    assert hand == 1_414_562_935
    # dense's bias and lm_head's are counted (they were left out once: an o_proj kept
    # bias-free unless attention_bias, and a head without a bias)
    assert _params(PHI_1) == hand


def test_qwen2_5_vl_7b_bytes_and_checkpoint_total():
    # vLLM qwen2_5_vl.py builds Qwen2ForCausalLM from the flat text fields: 28 layers of 4 KV
    # heads x 3584 / 28 = 128; use_sliding_window false, so no window (qwen2.py)
    spec = load_config_file(QWEN2_5_VL_7B)
    assert spec.layers == (FullAttention(4, 128),) * 28
    assert per_token_bytes(spec.layers, BF16) == 28 * _row(4, 128) == 57_344
    assert spec.max_context_tokens == 128_000
    # the checkpoint's safetensors index: total_size 16,584,333,312 bytes, all bf16, so
    # 8,292,166,656 parameters, the vision tower and its merger included
    assert _params(QWEN2_5_VL_7B, ("embed", "layer", "final", "head", "vision")) \
        == 16_584_333_312 // 2


# --- issue 22: `plan` gives a weights figure for every config `size` accepts ---------------

# every config.json kept in the repository: the Hub copies, the families', the fake Hub's, the
# engine fixtures' and the oracle's, and the model library's YAML specs
_CONFIGS = sorted(
    [*(FIXTURES / "hf-configs").rglob("*.json"), *(FIXTURES / "hub").glob("*.json"),
     *(FIXTURES / "engines" / "models").glob("*.json"),
     *(ROOT / "tests" / "oracle" / "configs").glob("*/config.json"),
     *(ROOT / "model_configs").glob("*.yaml")])


def _weights_bytes(output: str) -> int | None:
    """The weights figure of `plan -f json`: its budget's, or, when the engine would not start,
    the budget terms'."""
    start = output.find("{")
    if start < 0:
        return None
    report = json.JSONDecoder().raw_decode(output[start:])[0]
    weights = (report.get("budget") or {}).get("weights_bytes") or \
        (report.get("budget_terms") or {}).get("weights_bytes")
    return sum(weights) if isinstance(weights, list) else weights


def test_the_config_list_is_not_empty():
    assert len(_CONFIGS) > 100
    assert FAMILIES / "LiquidAI--LFM2.5-VL-1.6B.json" in _CONFIGS


@pytest.mark.parametrize("config", _CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_plan_gives_weights_for_every_config_size_accepts(config):
    runner = CliRunner()
    sized = runner.invoke(app, ["size", str(config), "-t", "1024", "-f", "json"])
    if sized.exit_code != 0:
        assert sized.exit_code == 2, sized.output  # refused by name, never a crash
        return
    planned = runner.invoke(app, ["plan", str(config), "--gpu", "h100", "--context", "1k",
                                  "--max-model-len", "2048", "-f", "json",
                                  *served_version_flags(config)])
    assert "no parameter count" not in planned.output
    weights = _weights_bytes(planned.output)
    assert weights is not None and weights > 0, planned.output[-400:]


# --- GLM-4.7-Flash, Kimi-Linear, Qwen3-Next, MiMo, GLM-4.5V, DeepSeek-OCR (SOURCES.md): all
# but MiMo printed by a model-report script beside the checkpoint's safetensors total

GLM_4_7_FLASH = FAMILIES / "zai-org--GLM-4.7-Flash.json"
KIMI_LINEAR = FAMILIES / "moonshotai--Kimi-Linear-48B-A3B-Instruct.json"
QWEN3_NEXT = FAMILIES / "Qwen--Qwen3-Next-80B-A3B-Instruct.json"
MIMO_7B = FAMILIES / "XiaomiMiMo--MiMo-7B-Base.json"
GLM_4_5V = FAMILIES / "zai-org--GLM-4.5V.json"
DEEPSEEK_OCR = FAMILIES / "deepseek-ai--DeepSeek-OCR.json"
WHISPER_SMALL = FAMILIES / "openai--whisper-small.json"
LLAMA_3_2_90B_VISION = FAMILIES / "meta-llama--Llama-3.2-90B-Vision-Instruct.json"
STEP_3_7_FLASH = FAMILIES / "stepfun-ai--Step-3.7-Flash.json"
JAMBA_1_5_MINI = FAMILIES / "ai21labs--AI21-Jamba-1.5-Mini.json"


def test_glm_4_7_flash_is_mla_by_hand():
    # vLLM glm4_moe_lite.py (Glm4MoeLiteForCausalLM, built on deepseek_v2.py's MLA): each of
    # the 47 layers caches one latent of kv_lora_rank (512) + qk_rope_head_dim (64) per
    # token, not split by TP; the MTP layer (num_nextn_predict_layers 1) is a draft model
    spec = load_config_file(GLM_4_7_FLASH)
    assert spec.layers == (MLA(512, 64),) * 47
    assert spec.dtype == "bf16"
    assert per_token_bytes(spec.layers, BF16) == 47 * 576 * 2 == 54_144
    assert request_bytes(spec.layers, 202_752, BF16) == 202_752 * 54_144
    assert spec.max_context_tokens == 202_752


def test_glm_4_7_flash_parameters_match_the_safetensors_total():
    # the report's safetensors listing totals 31,221,488,576 parameters. By hand: an untied
    # 154,880 x 2,048 embedding and head; per layer MLA q_a 768 (+ norm), q_b 20 x (192 + 64),
    # kv_a 512 + 64 (+ norm of 512), kv_b 20 x (192 + 256), o 20 x 256 -> 2,048, two norms;
    # layer 0 a 10,240-wide MLP, the rest 64 experts of 1,536 + a router, its fp32
    # correction bias and one shared expert; the MTP layer (model.layers.47) one more MoE
    # decoder layer, eh_proj 2 x 2,048 -> 2,048, enorm / hnorm / shared_head.norm, and its
    # own stored copies of the embedding and head. Exact: no tolerance needed
    h, vocab = 2048, 154_880
    attn = 768 * h + 768 + 20 * 256 * 768 + 576 * h + 512 + 20 * 448 * 512 + h * 20 * 256
    moe = 64 * 3 * h * 1536 + 64 * h + 64 + 3 * h * 1536
    main = 2 * vocab * h + 47 * (attn + 2 * h) + 3 * h * 10_240 + 46 * moe + h
    mtp = attn + 2 * h + moe + 2 * h * h + 3 * h + 2 * vocab * h
    assert main + mtp == 31_221_488_576
    assert _params(GLM_4_7_FLASH, ("embed", "layer", "final", "head", "mtp")) == main + mtp


def test_kimi_linear_kda_state_and_mla_by_hand():
    # vLLM kimi_linear.py: linear_attn_config's 1-based full_attn_layers (4, 8, ..., 24, 27)
    # are MLA (kv_lora_rank 512 + qk_rope_head_dim 64), the 20 kda_layers Kimi delta
    # attention whose MambaSpec is kda_state_shape / kda_state_dtype: q, k and v short
    # convolutions of (short_conv_kernel_size - 1) x num_heads x head_dim = 3 x 32 x 128 in
    # bf16 and a num_heads x head_dim x head_dim recurrent state in fp32
    spec = load_config_file(KIMI_LINEAR)
    mla = [i for i, x in enumerate(spec.layers) if isinstance(x, MLA)]
    assert mla == [3, 7, 11, 15, 19, 23, 26]
    assert all(x == MLA(512, 64) for x in spec.layers if isinstance(x, MLA))
    state = 3 * 3 * 32 * 128 * 2 + 32 * 128 * 128 * 4
    assert state == 2_170_880
    kda = [x for x in spec.layers if isinstance(x, RecurrentState)]
    assert len(kda) == 20 and all(x.state_bytes() == state for x in kda)
    assert per_token_bytes(spec.layers, BF16) == 7 * 576 * 2
    assert request_bytes(spec.layers, 8192, BF16) == 8192 * 7 * 576 * 2 + 20 * state


def test_kimi_linear_parameters_against_the_safetensors_total():
    # the report's listing totals 49,122,681,728 parameters. By hand from that listing: an
    # untied 163,840 x 2,304 embedding and head; per KDA layer q / k / v 4,096 x 2,304 and
    # their 4,096 x 4 convolutions, f_a / g_a 128 x 2,304, f_b / g_b 4,096 x 128, b_proj
    # 32 x 2,304, A_log one per head ([1, 1, 32, 1]), dt_bias 4,096, o_norm 128, o_proj; per
    # MLA layer
    # q 32 x 192, kv_a 576 (+ norm of 512), kv_b 32 x 256, o_proj; layer 0 a 9,216-wide MLP,
    # the others 256 experts of 1,024, a router with its correction bias, a shared expert
    h, vocab = 2304, 163_840
    kda = (3 * 4096 * h + 3 * 4096 * 4 + 2 * 128 * h + 2 * 4096 * 128 + 32 * h
           + 32 + 4096 + 128 + h * 4096)
    mla = 6144 * h + 576 * h + 512 + 8192 * 512 + h * 4096
    moe = 256 * 3 * 1024 * h + 256 * h + 256 + 3 * 1024 * h
    hand = (2 * vocab * h + 20 * kda + 7 * mla + 27 * 2 * h + 3 * h * 9216 + 26 * moe + h)
    assert hand == 49_122_681_728
    # exact: vLLM's KimiDeltaAttention (model_executor/layers/kda.py) holds A_log as
    # (1, 1, num_heads, 1), as the listing stores it, not over a head's 128 dimensions as
    # Kimi-K3's checkpoint does
    assert _params(KIMI_LINEAR) == hand


def test_kimi_linear_checkpoint_dtypes_from_the_listing():
    # the listing's dtypes: A_log ([1, 1, 32, 1]) and dt_bias (4,096) fp32 in each of the 20
    # KDA layers, everything else bf16 (the q / k / v convolutions [4096, 1, 4] and o_norm
    # included): 98,245,528,576 bytes, the listing's "91.50 GB" (GiB) of tensors. One known
    # difference: kvplan keeps the 26 routers' e_score_correction_bias (256) in fp32, as the
    # DeepSeek-V3 and Kimi-K3 checkpoints store it and vLLM's KimiMoE holds it, where this
    # checkpoint stores it in bf16: 26 x 256 x 2 bytes more, nothing else
    from kvplan.core.weights import inventory

    f32, bias = 20 * (32 + 4096), 26 * 256
    inv = inventory(load_config_file(KIMI_LINEAR))
    by_dtype = inv.bytes_by_dtype()
    assert by_dtype == {"BF16": (49_122_681_728 - f32 - bias) * 2, "F32": (f32 + bias) * 4}
    assert sum(by_dtype.values()) == 98_245_528_576 + bias * 2
    # layer 0 (KDA, a dense MLP): A_log and dt_bias its only fp32 tensors
    assert sorted(t.name.rsplit(".", 1)[-1] for t in inv.tensors
                  if t.layer == 0 and t.dtype == "F32") == ["A_log", "dt_bias"]


def test_qwen3_next_state_and_parameters_by_hand():
    # vLLM qwen3_next.py: every fourth layer (full_attention_interval 4) is attention with
    # 2 KV heads of head_dim 256; the 36 others gated delta-nets whose state is
    # gated_delta_net_state_shape: a conv state of (linear_conv_kernel_dim - 1) x (2 x 16 key
    # heads x 128 + 32 value heads x 128) and a 32 x 128 x 128 recurrent state, both in the
    # model dtype (no mamba_ssm_dtype key: mamba_ssm_cache_dtype "auto")
    spec = load_config_file(QWEN3_NEXT)
    assert [isinstance(x, FullAttention) for x in spec.layers] == [i % 4 == 3 for i in range(48)]
    assert all(x == FullAttention(2, 256) for x in spec.layers if isinstance(x, FullAttention))
    state = 3 * (2 * 16 * 128 + 32 * 128) * 2 + 32 * 128 * 128 * 2
    assert state == 1_097_728
    assert all(x.state_bytes() == state for x in spec.layers if isinstance(x, RecurrentState))
    assert per_token_bytes(spec.layers, BF16) == 12 * _row(2, 256)
    assert request_bytes(spec.layers, 262_144, BF16) == 262_144 * 12 * _row(2, 256) \
        + 36 * state
    # the report's listing totals 81,324,862,720 parameters, an MTP block (mtp.*) included
    # that this config.json does not announce: no num_nextn_predict_layers, which vLLM
    # qwen3_next_mtp.py (Qwen3NextMultiTokenPredictor) then takes as 1. By hand, that block:
    # fc 2 x 2,048 -> 2,048, one attention layer (q 16 x 256 x 2 for the gate, k / v 2 x 256,
    # o, q / k norms of 256), 512 experts of 512, a router, a shared expert and its 1-wide
    # gate, two layer norms and three more; the model itself is the rest. Exact
    assert spec.num_nextn_predict_layers == 1
    h = 2048
    attn = 8192 * h + 2 * 512 * h + h * 4096 + 2 * 256
    moe = 512 * 3 * 512 * h + 512 * h + 3 * 512 * h + h
    mtp = 2 * h * h + attn + moe + 2 * h + 3 * h
    assert _params(QWEN3_NEXT) == 81_324_862_720 - mtp
    assert _params(QWEN3_NEXT, ("embed", "layer", "final", "head", "mtp")) == 81_324_862_720


def test_mimo_7b_bytes_by_hand():
    # vLLM mimo.py (MiMoForCausalLM, a Qwen2 model): 36 layers of 8 KV heads x head_dim 128;
    # use_sliding_window false, so no layer is sliding; the MTP layer (num_nextn_predict_
    # layers 1) is mimo_mtp.py's draft model, not a target cache
    spec = load_config_file(MIMO_7B)
    assert spec.layers == (FullAttention(8, 128),) * 36
    assert per_token_bytes(spec.layers, BF16) == 36 * _row(8, 128) == 147_456
    assert request_bytes(spec.layers, 32_768, BF16) == 32_768 * 147_456



def test_glm_4_5v_text_config_bytes_and_parameters_by_hand():
    # vLLM glm4_1v.py Glm4vMoeForConditionalGeneration builds Glm4MoeForCausalLM from
    # text_config (glm4_moe.py): 46 layers of 8 KV heads x head_dim 128, no sliding window
    spec = load_config_file(GLM_4_5V)
    assert spec.layers == (FullAttention(8, 128),) * 46
    assert per_token_bytes(spec.layers, BF16) == 46 * _row(8, 128) == 188_416
    assert spec.max_context_tokens == 65_536
    # the report's safetensors listing totals 107,710,933,120 parameters. By hand from it:
    # the text model (untied 151,552 x 4,096 embedding and head; q 96 x 128, k / v 8 x 128
    # with biases, o; two norms; layer 0 a 10,944-wide MLP, the others 128 experts of 1,408,
    # a router with its correction bias and one shared expert; the final norm) and a
    # 24-block vision tower with its patch embedding, downsample and merger
    h, vocab = 4096, 151_552
    attn = 12_288 * h + 12_288 + 2 * (1024 * h + 1024) + h * 12_288 + 2 * h
    moe = 128 * 3 * h * 1408 + 128 * h + 128 + 3 * h * 1408
    text = 2 * vocab * h + 46 * attn + 3 * h * 10_944 + 45 * moe + h
    v = 1536
    vision = (24 * (v * v + 3 * v * v + 3 * 4096 * v + 2 * v)       # attention, MLP, norms
              + 4096 * v * 2 * 2 + 4096 + 576 * v                 # downsample, positions
              + 3 * 10_944 * h + 2 * h + h * h                    # merger
              + v * 3 * 2 * 14 * 14 + v + 2 * v)                  # patch embedding, norms
    assert text + vision == 107_710_933_120
    # the glm4v vision tower is not among the towers kvplan.core.weights lists (it says
    # so in plan's notes); the text model is counted exactly
    assert _params(GLM_4_5V) == text



def test_deepseek_ocr_language_config_is_plain_attention():
    # vLLM deepseek_ocr.py (as deepseek_vl2.py): language_config has topk_method greedy and
    # use_mla false, so the language model is DeepseekForCausalLM (deepseek.py), whose
    # attention keeps num_key_value_heads (10) K and V heads of hidden_size /
    # num_attention_heads = 1280 / 10 = 128 on each of the 12 layers. The MLA keys it also
    # carries (kv_lora_rank null, v_head_dim 0) are not read
    spec = load_config_file(DEEPSEEK_OCR)
    assert spec.layers == (FullAttention(10, 128),) * 12
    assert per_token_bytes(spec.layers, BF16) == 12 * _row(10, 128) == 61_440
    assert request_bytes(spec.layers, 8192, BF16) == 8192 * 61_440


def test_deepseek_ocr_parameters_against_the_safetensors_total():
    # the report's listing totals 3,336,106,240 parameters. By hand from it, the language
    # model: a 129,280 x 1,280 embedding and lm_head; per layer q / k / v / o 1,280 x 1,280
    # and two norms; layer 0 a 6,848-wide MLP, the others 64 experts of 896, a router (no
    # correction bias: topk_method greedy) and 2 shared experts as one 1,792-wide MLP
    h, vocab = 1280, 129_280
    moe = 64 * 3 * h * 896 + 64 * h + 3 * h * 1792
    text = 2 * vocab * h + 12 * (4 * h * h + 2 * h) + 3 * h * 6848 + 11 * moe + h
    # ... and the towers kvplan.core.weights does not list: a 12-block SAM ViT-B (768 wide,
    # relative positions 27 or 127 long, neck and two downsampling convolutions), a 24-layer
    # CLIP-L/14 and the linear projector with its two learned 1,280 separators
    s, c = 768, 1024
    sam = (12 * (4 * s * s + 2 * s * 3072 + 2 * s + 2304 + 3072 + 4 * s)
           + 8 * 2 * 27 * 64 + 4 * 2 * 127 * 64
           + 256 * s + 2 * 2 * 256 + 256 * 256 * 9 + 512 * 256 * 9 + 1024 * 512 * 9
           + s * 3 * 16 * 16 + s + 64 * 64 * s)
    clip = (c + c * 3 * 14 * 14 + 257 * c + 2 * c
            + 24 * (4 * c + 2 * 4096 * c + 4096 + c + 4 * c * c + 3 * c + c))
    projector = 2048 * h + h + 2 * h
    assert text + sam + clip + projector == 3_336_106_240
    assert _params(DEEPSEEK_OCR) == text


def test_whisper_small_self_and_cross_attention_by_hand():
    # vLLM whisper.py: each of the 12 decoder layers has a self-attention cache (12 heads of
    # d_model / decoder_attention_heads = 768 / 12 = 64, over at most max_target_positions
    # 448 tokens) and a cross-attention cache over the encoder's max_source_positions (1,500)
    # frames, written once per request. The float32 checkpoint is served in bf16 (vLLM
    # config/model.py _resolve_auto_dtype), so 2-byte rows
    spec = load_config_file(WHISPER_SMALL)
    assert spec.kind_counts() == {"full": 12, "cross": 12}
    assert spec.max_context_tokens == 448 and spec.dtype == "fp32"
    row = _row(12, 64)
    assert per_token_bytes(spec.layers, BF16) == 12 * row == 36_864
    assert request_bytes(spec.layers, 448, BF16) == 12 * (448 + 1500) * row


def test_whisper_small_parameters_by_hand():
    # transformers modeling_whisper.py: the encoder's two convolutions (80 mel bins -> 768,
    # 768 -> 768, kernel 3, biased), 1,500 positions, 12 blocks (q, v, out biased, k not;
    # fc1 / fc2 3,072 wide; two LayerNorms) and a final LayerNorm; the decoder's 51,865-token
    # embedding (proj_out tied to it), 448 positions, 12 blocks with a cross-attention each,
    # a final LayerNorm. Exact against the tensor inventory; the Whisper paper's rounded
    # "244M" for small is within 1% (its figure, not a count of this checkpoint)
    d = 768
    ln, attention = 2 * d, 3 * (d * d + d) + d * d
    mlp = (d * 3072 + 3072) + (3072 * d + d)
    encoder = (d * 80 * 3 + d) + (d * d * 3 + d) + 1500 * d + 12 * (2 * ln + attention + mlp) + ln
    decoder = 51_865 * d + 448 * d + 12 * (2 * (ln + attention) + ln + mlp) + ln
    assert encoder + decoder == 241_734_912
    from kvplan.core.weights import inventory
    total = sum(t.num_params for t in inventory(load_config_file(WHISPER_SMALL)).tensors)
    assert total == encoder + decoder
    assert abs(total - 244_000_000) <= 0.01 * 244_000_000


def test_llama_3_2_90b_vision_self_and_cross_attention_by_hand():
    # vLLM mllama.py (MllamaForConditionalGeneration): the 100 decoder layers of text_config
    # are self-attention except the 20 listed in cross_attention_layers (3, 8, ..., 98),
    # which attend to the image; both kinds keep 8 KV heads of hidden_size /
    # num_attention_heads = 8192 / 64 = 128. A cross layer's cache is written once per
    # request for one image's vision tokens: max_num_tiles 4 tiles of (image_size 560 /
    # patch_size 14)^2 = 1,600 patches + 1 class token = 4 x 1,601 = 6,404
    spec = load_config_file(LLAMA_3_2_90B_VISION)
    assert spec.kind_counts() == {"full": 80, "cross": 20}
    assert spec.max_context_tokens == 131_072 and spec.dtype == "bf16"
    cross = [i for i, layer in enumerate(spec.layers) if layer.kind == "cross"]
    assert cross == list(range(3, 100, 5))
    row = _row(8, 128)
    assert per_token_bytes(spec.layers, BF16) == 80 * row == 327_680
    assert request_bytes(spec.layers, 8192, BF16) == 8192 * 80 * row + 20 * 6404 * row


def test_llama_3_2_90b_vision_parameters_near_the_model_card():
    # the model card's table gives "90B (88.8)" billion parameters for Llama 3.2-Vision
    # 90B (a rounded figure); the estimate from the config's shapes (text decoder with its
    # cross-attention layers, vision tower and projector) lands within 0.5% of it
    total = _params(LLAMA_3_2_90B_VISION, places=("embed", "layer", "final", "head", "vision"))
    assert abs(total - 88_800_000_000) <= 0.005 * 88_800_000_000


def test_step_3_7_flash_sliding_and_full_layers_by_hand():
    # the config's layer_types: a full-attention layer then three "sliding_attention"
    # layers (window sliding_window 512), 45 layers in all (12 full, 33 sliding), each with
    # num_key_value_heads 8 of head_dim 128; the three MTP layers (num_nextn_predict_layers)
    # are drafts loaded only for speculative decoding, not caches of the target
    spec = load_config_file(STEP_3_7_FLASH)
    assert spec.layers == ((FullAttention(8, 128),) + (SlidingWindow(8, 128, window=512),) * 3) \
        * 11 + (FullAttention(8, 128),)
    assert spec.max_context_tokens == 65_536
    row = _row(8, 128)
    assert per_token_bytes(spec.layers, BF16) == 45 * row == 184_320
    # at 8,192 tokens each sliding layer holds only its 512-token window
    assert request_bytes(spec.layers, 8192, BF16) == 12 * 8192 * row + 33 * 512 * row


def test_jamba_1_5_mini_attention_and_mamba_state_by_hand():
    # vLLM jamba.py: layer i is attention where i % attn_layer_period (8) ==
    # attn_layer_offset (4), so layers 4, 12, 20, 28 (8 KV heads of 4096 / 32 = 128); the
    # other 28 are Mamba-1 mixers whose per-request state (mamba_utils.py
    # MambaStateShapeCalculator.mamba1_state_shape) is a conv state of (mamba_d_conv - 1)
    # x d_inner and an SSM state of d_inner x mamba_d_state, d_inner = mamba_expand x
    # hidden_size = 8,192; both in the bf16 model dtype by default
    spec = load_config_file(JAMBA_1_5_MINI)
    assert spec.kind_counts() == {"state": 28, "full": 4}
    attention = [i for i, layer in enumerate(spec.layers) if layer.kind == "full"]
    assert attention == [4, 12, 20, 28]
    assert spec.max_context_tokens == 262_144
    state = (3 * 8192 + 8192 * 16) * 2
    assert per_token_bytes(spec.layers, BF16) == 4 * _row(8, 128) == 16_384
    assert request_bytes(spec.layers, 8192, BF16) == 8192 * 4 * _row(8, 128) + 28 * state


def test_jamba_1_5_mini_parameters_near_the_model_card():
    # AI21's model card: 52B total parameters (12B active); the estimate from the config's
    # shapes (16 experts of 14,336 on the 16 odd layers, dense MLPs elsewhere) is within 1%
    total = _params(JAMBA_1_5_MINI)
    assert abs(total - 52_000_000_000) <= 0.01 * 52_000_000_000


# --- Trinity (afmoe), ERNIE 4.5 (SOURCES.md) ---------------------------------------------------

TRINITY_NANO = FAMILIES / "arcee-ai--Trinity-Nano-Preview.json"
ERNIE_4_5_0_3B = FAMILIES / "baidu--ERNIE-4.5-0.3B-Base-PT.json"


def test_trinity_nano_without_layer_types_takes_the_implicit_schedule():
    # this copy has no layer_types: AfmoeConfig (vLLM transformers_utils/configs/afmoe.py,
    # transformers configuration_afmoe.py) then builds them from global_attn_every_n_layers
    # (4): layer i is "sliding_attention" unless (i + 1) % 4 == 0. vLLM afmoe.py gives a
    # sliding layer sliding_window (2,048) and a full layer none; every layer has
    # num_key_value_heads 2 of head_dim 128. Read as before, all 56 layers were sliding
    spec = load_config_file(TRINITY_NANO)
    assert spec.layers == ((SlidingWindow(2, 128, window=2048),) * 3
                           + (FullAttention(2, 128),)) * 14
    assert spec.max_context_tokens == 131_072
    row = _row(2, 128)
    assert per_token_bytes(spec.layers, BF16) == 56 * row == 57_344
    # a 32,768-token request: 14 full layers hold it all, 42 sliding ones 2,048 tokens
    assert request_bytes(spec.layers, 32_768, BF16) == (14 * 32_768 + 42 * 2048) * row
    assert request_bytes(spec.layers, 32_768, BF16) == 557_842_432
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=32_768))
    assert {(p.kind, p.block_size, p.page_bytes) for p in pages if p is not None} == {
        ("sliding", 16, 16 * row), ("full", 16, 16 * row)}


def test_trinity_nano_explicit_period_moves_the_full_layers():
    # the same config with global_attn_every_n_layers 2: every second layer is full
    raw = json.loads(TRINITY_NANO.read_text())
    raw["global_attn_every_n_layers"] = 2
    from kvplan.sources.hfconfig import spec_from_config

    spec = spec_from_config(raw, "trinity", name="trinity")
    assert spec.layers == ((SlidingWindow(2, 128, window=2048), FullAttention(2, 128)) * 28)


def test_trinity_nano_parameters_by_hand():
    # transformers modeling_afmoe.py (the model vLLM afmoe.py loads): an untied 200,192 x
    # 1,024 embedding and LM head; per layer q / o 1024 x 1024, k / v 256 x 1024, a sigmoid
    # output gate gate_proj 1024 x 1024, q_norm / k_norm over a 128-wide head, four norms
    # (input, post_attention, pre_mlp, post_mlp); layers 0-1 (num_dense_layers 2) a 3,072-wide
    # MLP, the other 54 a 128-expert router (router.gate), 128 experts and one shared expert
    # of 3 x 1024 x 256, and a per-expert expert_bias; the final norm. 6.12 billion: the
    # technical report's "6B total parameters" for Trinity Nano (public notes on the
    # Trinity-Nano-Preview checkpoint quote the same 6,120,003,328 from its safetensors index)
    from kvplan.core.weights import inventory

    h, vocab = 1024, 200_192
    attention = 2 * h * h + 2 * 256 * h + h * h + 2 * 128
    moe = 128 * h + 128 + 128 * 3 * h * 256 + 3 * h * 256
    hand = 2 * vocab * h + 56 * (attention + 4 * h) + 2 * 3 * h * 3072 + 54 * moe + h
    assert hand == 6_120_003_328
    inv = inventory(load_config_file(TRINITY_NANO))
    assert sum(t.num_params for t in inv.tensors) == hand
    # bf16 tensors, expert_bias in fp32: 54 x 128 x 2 bytes more than 2 bytes a parameter
    assert inv.total_bytes == 2 * hand + 54 * 128 * 2 == 12_240_020_480
    names = {t.name for t in inv.tensors}
    assert {"model.layers.3.self_attn.gate_proj.weight", "model.layers.3.pre_mlp_layernorm.weight",
            "model.layers.2.mlp.router.gate.weight", "model.layers.2.mlp.expert_bias"} <= names


def test_ernie_4_5_0_3b_bytes_by_hand():
    # vLLM ernie45.py: Ernie4_5ForCausalLM is LlamaForCausalLM; llama.py LlamaAttention takes
    # the config's head_dim (128, not hidden_size / num_attention_heads = 64) for
    # num_key_value_heads 2 on each of the 18 layers
    spec = load_config_file(ERNIE_4_5_0_3B)
    assert spec.layers == (FullAttention(2, 128),) * 18
    assert spec.dtype == "bf16" and spec.max_context_tokens == 131_072
    row = _row(2, 128)
    assert per_token_bytes(spec.layers, BF16) == 18 * row == 18_432
    assert request_bytes(spec.layers, 131_072, BF16) == 131_072 * 18_432 == 9 * 2**28
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=32_768))
    assert {(p.kind, p.block_size, p.page_bytes) for p in pages} == {("full", 16, 16 * row)}


def test_ernie_4_5_0_3b_parameters_match_the_model_card():
    # llama.py: a tied 103,424 x 1,024 embedding; per layer q 2048 x 1024, k / v 256 x 1024,
    # o 1024 x 2048, a 3,072-wide gated MLP, two norms; the final norm. The model card's
    # table: "Params 0.36B"
    h = 1024
    layer = 2048 * h + 2 * 256 * h + h * 2048 + 3 * h * 3072 + 2 * h
    hand = 103_424 * h + 18 * layer + h
    assert hand == 360_748_032
    assert round(hand / 1e9, 2) == 0.36
    assert _params(ERNIE_4_5_0_3B) == hand


# --- Ling (bailing_moe; SOURCES.md: the model owner's repository) ------------------------------

LING_LITE = FAMILIES / "inclusionAI--Ling-lite.json"
LING_PLUS = FAMILIES / "inclusionAI--Ling-plus.json"


@pytest.mark.parametrize(("fixture", "layers", "kv_heads", "head_dim"), [
    (LING_LITE, 28, 4, 128), (LING_PLUS, 88, 8, 96)])
def test_ling_bytes_by_hand(fixture, layers, kv_heads, head_dim):
    # vLLM bailing_moe.py BailingAttention: one Attention a layer of num_key_value_heads
    # heads of head_dim, here hidden_size / num_attention_heads (2048 / 16 = 128 for
    # Ling-lite, 5376 / 56 = 96 for Ling-plus: no head_dim key); no sliding window
    spec = load_config_file(fixture)
    assert spec.layers == (FullAttention(kv_heads, head_dim),) * layers
    assert spec.max_context_tokens == 16_384
    row = _row(kv_heads, head_dim)
    assert per_token_bytes(spec.layers, BF16) == layers * row
    assert request_bytes(spec.layers, 16_384, BF16) == 16_384 * layers * row
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=16_384))
    assert {(p.kind, p.block_size, p.page_bytes) for p in pages} == {("full", 16, 16 * row)}


def test_ling_lite_bytes_per_token():
    assert per_token_bytes(load_config_file(LING_LITE).layers, BF16) == 28 * 2 * 4 * 128 * 2 \
        == 57_344


@pytest.mark.parametrize(("fixture", "h", "heads", "kv_heads", "layers", "experts_width",
                          "shared", "published"), [
    (LING_LITE, 2048, 16, 4, 28, 1408, 2, 16.8e9),
    (LING_PLUS, 5376, 56, 8, 88, 3072, 1, 290e9)])
def test_ling_parameters_match_the_published_totals(fixture, h, heads, kv_heads, layers,
                                                    experts_width, shared, published):
    # vLLM bailing_moe.py: an untied 126,464-row embedding and LM head; per layer the fused
    # query_key_value (heads + 2 x kv_heads) x head_dim, dense (o) back to hidden, two norms;
    # first_k_dense_replace 0, so every layer is MoE: a 64-expert router (gate), 64 experts
    # of moe_intermediate_size and the shared experts as one MLP num_shared_experts x that
    # wide; the final norm. The Ling README: Ling-lite 16.8B, Ling-plus 290B total
    # parameters; the hand counts are 16.80B and 290.6B, within 0.25% of both
    hd = h // heads
    attention = (heads + 2 * kv_heads) * hd * h + h * heads * hd
    moe = 64 * h + 64 * 3 * h * experts_width + 3 * h * shared * experts_width
    hand = 2 * 126_464 * h + layers * (attention + 2 * h + moe) + h
    assert abs(hand - published) <= 0.0025 * published
    assert _params(fixture) == hand


# --- MiniCPM3 (minicpm3; SOURCES.md) --------------------------------------------------------

MINICPM3_4B = FAMILIES / "openbmb--MiniCPM3-4B.json"


def test_minicpm3_4b_is_mla_by_hand():
    # vLLM minicpm3.py MiniCPM3MLAAttention: MultiHeadLatentAttention, one latent of
    # kv_lora_rank (256) + qk_rope_head_dim (32) a token on each of the 62 layers (no x2, not
    # split by TP); vLLM's MLAAttentionSpec page is block 16 x 288 x 2 bytes
    spec = load_config_file(MINICPM3_4B)
    assert spec.layers == (MLA(256, 32),) * 62
    assert per_token_bytes(spec.layers, BF16) == 62 * 288 * 2 == 35_712
    assert request_bytes(spec.layers, 32_768, BF16) == 32_768 * 35_712
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=32_768))
    assert {(p.kind, p.block_size, p.page_bytes) for p in pages} == {("mla", 16, 16 * 288 * 2)}


def test_minicpm3_4b_parameters_by_hand():
    # the config has no v_head_dim and no tie_word_embeddings: MiniCPM3Config (the
    # checkpoint's configuration_minicpm.py) takes v_head_dim = qk_nope_head_dim (64) and
    # tie_word_embeddings True, which vLLM minicpm.py follows (lm_head = embed_tokens).
    # Per layer q_a 2560 -> 768 (+ norm), q_b 768 -> 40 x 96, kv_a 2560 -> 256 + 32 (+ norm of
    # 256), kv_b 256 -> 40 x (64 + 64), o 40 x 64 -> 2560, a 6,400-wide gated MLP, two norms;
    # a tied 73,448 x 2,560 embedding and the final norm. OpenBMB's MiniCPM 3.0 page: "a
    # language model with 4 billion parameters". Read before, plan refused the config ("no
    # parameter count": the MLA value width was missing)
    h = 2560
    attention = (h * 768 + 768 + 768 * 40 * 96 + h * 288 + 256 + 256 * 40 * 128
                 + 40 * 64 * h)
    layer = attention + 3 * h * 6400 + 2 * h
    hand = 73_448 * h + 62 * layer + h
    assert hand == 4_073_875_968 and round(hand / 1e9) == 4
    spec = load_config_file(MINICPM3_4B)
    assert spec.tie_word_embeddings is True and spec.mla_v_head_dim == 64
    assert _params(MINICPM3_4B) == hand
    runner = CliRunner()
    planned = runner.invoke(app, ["plan", str(MINICPM3_4B), "--gpu", "h100",
                                  "--max-model-len", "8192", "-f", "json"])
    assert planned.exit_code == 0, planned.output
    assert _weights_bytes(planned.output) > 0


# --- Falcon-H1 and Zamba2 (SOURCES.md): hybrids whose only copies found are Python dicts ------

FALCON_H1_0_5B = FAMILIES / "tiiuae--Falcon-H1-0.5B.json"
ZAMBA2_7B = FAMILIES / "Zyphra--Zamba2-7B.json"


def _falcon_h1_0_5b(**changes):
    from kvplan.sources.hfconfig import spec_from_config

    raw = json.loads(FALCON_H1_0_5B.read_text())
    return spec_from_config({**raw, **changes}, str(FALCON_H1_0_5B), name="falcon-h1-0.5b")


def test_falcon_h1_0_5b_as_found_is_refused_by_name():
    # the copy leaves mamba_d_ssm out: transformers' FalconH1Config then fills in 1,024, and
    # its validate_architecture refuses 24 heads x mamba_d_head 64 = 1,536 != 1,024, so no
    # engine loads this dict as it stands; kvplan says which fields disagree
    from kvplan.core.errors import SpecError

    with pytest.raises(SpecError) as err:
        load_config_file(FALCON_H1_0_5B)
    message = str(err.value)
    assert "mamba_d_head" in message and "mamba_d_ssm, 1024 when absent" in message
    result = CliRunner().invoke(app, ["size", str(FALCON_H1_0_5B), "-t", "1024"])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_falcon_h1_0_5b_bytes_by_hand():
    # with the inner size Megatron-Bridge's own export writes back for this dict (its
    # megatron_to_hf_config: mamba_d_ssm = mamba_num_heads x mamba_head_dim = 24 x 64):
    # vLLM falcon_h1.py FalconH1ParallelHybrid gives every one of the 36 decoder layers an
    # Attention (2 KV heads of head_dim 64) and a MambaMixer2 with its own state;
    # mamba_utils.py mamba2_state_shape: conv (d_conv - 1, d_ssm + 2 x n_groups x d_state) =
    # (3, 1536 + 256), ssm (heads, head_dim, d_state) = (24, 64, 128), both bf16
    spec = _falcon_h1_0_5b(mamba_d_ssm=24 * 64)
    assert spec.kind_counts() == {"full": 36, "state": 36}
    assert spec.layers[0] == FullAttention(2, 64)
    state = 3 * (1536 + 2 * 128) * 2 + 24 * 64 * 128 * 2
    assert state == 403_968 and spec.layers[1].state_bytes() == state
    assert per_token_bytes(spec.layers, BF16) == 36 * _row(2, 64) == 18_432
    assert request_bytes(spec.layers, 8192, BF16) == 36 * (8192 * _row(2, 64) + state)
    assert spec.max_context_tokens == 16_384
    # vLLM pages (docs/engine-kv-sizing.md 1.7): the attention block grows in steps of 16
    # until one page of 512-byte token rows holds a state (800 tokens); the state page is
    # padded to it
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=16_384))
    block = 16 * -(-state // (16 * _row(2, 64)))
    assert block == 800
    assert {(p.kind, p.page_bytes) for p in pages if p is not None} == {
        ("full", block * _row(2, 64)), ("mamba", block * _row(2, 64))}


def test_falcon_h1_0_5b_weights_by_hand():
    # vLLM falcon_h1.py, bf16: an untied 32,784 x 1,024 embedding and LM head, the final
    # RMSNorm; per layer input_layernorm and pre_ff_layernorm, qkv (8 + 2 + 2) x 64 x 1,024
    # and o 512 x 1,024 without biases, MambaMixer2 (mamba_mixer2.py): in_proj 1,024 ->
    # 2 x 1,536 + 2 x 128 + 24, conv1d 1,792 x 4 with its bias (mamba_conv_bias), A / D /
    # dt_bias per head, out_proj 1,536 -> 1,024, and no gated-norm weight (mamba_rms_norm
    # false: Mixer2RMSNormGated registers none); the MLP's gate_up 2 x 2,048 x 1,024 and down
    h, vocab = 1024, 32_784
    layer = (2 * h + 12 * 64 * h + 512 * h + h * (2 * 1536 + 2 * 128 + 24) + 1792 * 4 + 1792
             + 3 * 24 + 1536 * h + 3 * 2048 * h)
    hand = 2 * vocab * h + h + 36 * layer
    assert hand == 521_411_104
    from kvplan.core.weights import inventory

    assert sum(t.num_params for t in inventory(_falcon_h1_0_5b(mamba_d_ssm=1536)).tensors) \
        == hand
    # with mamba_rms_norm the mixer's gated RMSNorm adds one 1,536-wide weight per layer
    assert sum(t.num_params for t in inventory(
        _falcon_h1_0_5b(mamba_d_ssm=1536, mamba_rms_norm=True)).tensors) == hand + 36 * 1536


def test_zamba2_7b_pre_transformers_format_is_refused_by_name():
    # Zyphra's first Zamba2-7B config (transformers_version 4.43.0.dev0) spells the Mamba2
    # sizes its own way (state_size, mamba_headdim, mamba_ngroups) and names no n_mamba_heads:
    # transformers' Zamba2Config would take n_mamba_heads 8 and recompute mamba_headdim =
    # 2 x 3,584 / 8 = 896 (configuration_zamba2.py __post_init__), shapes the checkpoint does
    # not have. kvplan refuses the unknown cache key by name rather than guess
    spec_keys = json.loads(ZAMBA2_7B.read_text())
    assert spec_keys["num_hidden_layers"] == 81 and "n_mamba_heads" not in spec_keys
    result = CliRunner().invoke(app, ["size", str(ZAMBA2_7B), "-t", "1024"])
    assert result.exit_code == 2
    assert "state_size" in result.output and "Traceback" not in result.output


# --- OLMoE and Hunyuan dense (SOURCES.md: test fixtures of a Go inference engine, each naming
# the Hub file it copies) ------------------------------------------------------------------------

OLMOE_1B_7B = FAMILIES / "allenai--OLMoE-1B-7B-0924.json"
HUNYUAN_7B = FAMILIES / "tencent--Hunyuan-7B-Instruct.json"


def test_olmoe_1b_7b_bytes_by_hand():
    # vLLM olmoe.py OlmoeAttention: Attention(num_heads 16, head_dim = hidden_size /
    # num_attention_heads = 2048 / 16 = 128, num_kv_heads 16) on each of the 16 layers; no
    # sliding window, no recurrent state
    spec = load_config_file(OLMOE_1B_7B)
    assert spec.layers == (FullAttention(16, 128),) * 16
    assert spec.dtype == "bf16" and spec.max_context_tokens == 4096
    row = _row(16, 128)  # 2 x 16 x 128 x 2 = 8,192 bytes a layer and token
    assert per_token_bytes(spec.layers, BF16) == 16 * row == 131_072
    # a request at the full 4,096 tokens: 4,096 x 131,072 = 512 MiB
    assert request_bytes(spec.layers, 4096, BF16) == 4096 * 131_072 == 512 * 2**20
    # vLLM's FullAttentionSpec page (block 16): 16 x 2 x 16 x 128 x 2 bytes, one kind
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=4096))
    assert {(p.kind, p.block_size, p.page_bytes) for p in pages} == {("full", 16, 16 * row)}


def test_olmoe_1b_7b_parameters_match_the_safetensors_total():
    # vLLM olmoe.py: an untied 50,304 x 2,048 embedding and LM head; per layer q/k/v/o
    # 2048 x 2048 without biases, q_norm and k_norm over the 16 heads of 128 (2,048 each),
    # two RMSNorms, the router mlp.gate (64 x 2048) and OlmoeMoE's FusedMoE of 64 experts as
    # wide as intermediate_size (1,024), gated; the final norm. The checkpoint's
    # model.safetensors.index.json (the same fixture folder, SOURCES.md) states
    # metadata.total_size 13,838,323,712 bytes: bf16, 6,919,161,856 parameters
    h, experts, width = 2048, 64, 1024
    layer = 4 * h * h + 2 * h + 2 * h + experts * h + experts * 3 * h * width
    hand = 2 * 50_304 * h + 16 * layer + h
    assert hand == 13_838_323_712 // 2 == 6_919_161_856
    assert _params(OLMOE_1B_7B) == hand


def test_olmoe_experts_are_as_wide_as_intermediate_size():
    # OlmoeConfig has no moe_intermediate_size: intermediate_size is one expert's width and
    # every layer is MoE (vLLM olmoe.py OlmoeMoE). Before kvplan read it so, `plan` refused
    # the real config ("the spec does not give the experts' width")
    spec = load_config_file(OLMOE_1B_7B)
    assert (spec.num_experts, spec.num_experts_per_token) == (64, 8)
    assert spec.moe_intermediate_size == 1024
    assert not spec.num_shared_experts


def test_hunyuan_7b_dense_bytes_by_hand():
    # the test's excerpt of tencent/Hunyuan-7B-Instruct's config (13 keys, no
    # max_position_embeddings): model_type hunyuan_v1_dense. vLLM hunyuan_v1.py
    # HunYuanAttention: head_dim from the config (128), 8 KV heads, use_cla false so every one
    # of the 32 layers keeps its own K and V (cla_share_factor unused)
    spec = load_config_file(HUNYUAN_7B)
    assert spec.layers == (FullAttention(8, 128),) * 32
    assert spec.max_context_tokens is None  # the excerpt does not say; kvplan warns
    row = _row(8, 128)
    assert per_token_bytes(spec.layers, BF16) == 32 * row == 131_072
    assert request_bytes(spec.layers, 32_768, BF16) == 32_768 * 131_072 == 4 * 2**30
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=32_768))
    assert {(p.kind, p.block_size, p.page_bytes) for p in pages} == {("full", 16, 16 * row)}


def test_hunyuan_7b_dense_weights_by_hand():
    # vLLM hunyuan_v1.py (HunYuanDenseV1ForCausalLM): a tied 128,167 x 4,096 embedding; per
    # layer two RMSNorms, q / o 4096 x 4096, k / v 1024 x 4096 (8 KV heads of 128), no biases,
    # query_layernorm / key_layernorm over a 128-wide head (use_qk_norm), a gated MLP 14,336
    # wide; the final norm. No published total was found to check against
    h, inter = 4096, 14_336
    layer = 2 * h + 2 * h * h + 2 * 1024 * h + 2 * 128 + 3 * h * inter
    hand = 128_167 * h + 32 * layer + h
    assert hand == 7_504_568_320
    # the q / k norms follow use_qk_norm, as for Hunyuan-A13B above
    assert _params(HUNYUAN_7B) == hand


def test_hunyuan_without_use_qk_norm_has_no_q_k_norms(tmp_path):
    # vLLM hunyuan_v1.py builds query_layernorm / key_layernorm only when use_qk_norm is
    # set: the same config with it false weighs 32 layers x 2 x 128 less
    raw = json.loads(HUNYUAN_7B.read_text())
    raw["use_qk_norm"] = False
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    assert _params(HUNYUAN_7B) - _params(path) == 32 * 2 * 128


# --- Baichuan 2, InternLM 2.5, MiniCPM and MiniCPM-MoE (SOURCES.md: MLC LLM's model presets,
# converted to JSON) ------------------------------------------------------------------------------

BAICHUAN2_7B = FAMILIES / "baichuan-inc--Baichuan2-7B.json"
INTERNLM2_5_7B = FAMILIES / "internlm--internlm2_5-7b.json"
MINICPM_2B = FAMILIES / "openbmb--MiniCPM-2B-sft-bf16.json"
MINICPM_MOE_8X2B = FAMILIES / "openbmb--MiniCPM-MoE-8x2B.json"


def test_baichuan2_7b_bytes_and_weights_by_hand():
    # vLLM baichuan.py (served until vLLM 0.22; 0.23 moved BaichuanForCausalLM to the
    # removed-models list): BaiChuanAttention is multi-head, W_pack a QKVParallelLinear of 32
    # heads of head_dim = hidden_size / num_attention_heads = 4096 / 32 = 128 for Q, K and V
    spec = load_config_file(BAICHUAN2_7B)
    assert spec.layers == (FullAttention(32, 128),) * 32
    assert spec.dtype == "bf16" and spec.max_context_tokens == 4096
    row = _row(32, 128)
    assert per_token_bytes(spec.layers, BF16) == 32 * row == 524_288
    assert request_bytes(spec.layers, 4096, BF16) == 4096 * 524_288 == 2 * 2**30
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=4096))
    assert {(p.kind, p.block_size, p.page_bytes) for p in pages} == {("full", 16, 16 * row)}
    # an untied 125,696 x 4,096 embedding and LM head (NormHead: the same shape); per layer
    # W_pack 3 x 4096 x 4096, o_proj 4096 x 4096, a gated MLP 11,008 wide, two RMSNorms; the
    # final norm
    h = 4096
    hand = 2 * 125_696 * h + 32 * (4 * h * h + 3 * h * 11_008 + 2 * h) + h
    assert hand == 7_505_973_248
    assert _params(BAICHUAN2_7B) == hand


def test_internlm2_5_7b_bytes_and_weights_by_hand():
    # vLLM internlm2.py InternLM2Attention: head_dim = hidden_size / num_attention_heads =
    # 4096 / 32 = 128, num_kv_heads = num_key_value_heads (8); the dynamic rope_scaling
    # (factor 2) changes no cache shape
    spec = load_config_file(INTERNLM2_5_7B)
    assert spec.layers == (FullAttention(8, 128),) * 32
    assert spec.max_context_tokens == 32_768
    row = _row(8, 128)
    assert per_token_bytes(spec.layers, BF16) == 32 * row == 131_072
    assert request_bytes(spec.layers, 32_768, BF16) == 32_768 * 131_072 == 4 * 2**30
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=32_768))
    assert {(p.kind, p.block_size, p.page_bytes) for p in pages} == {("full", 16, 16 * row)}
    # tok_embeddings and output untied (92,544 x 4,096); per layer wqkv (32 + 2 x 8) x 128 rows
    # of 4,096, wo 4096 x 4096, feed_forward w1 / w3 / w2 14,336 wide, attention_norm and
    # ffn_norm; the final norm
    h = 4096
    hand = 2 * 92_544 * h + 32 * ((32 + 2 * 8) * 128 * h + h * h + 3 * h * 14_336 + 2 * h) + h
    assert hand == 7_737_708_544
    assert _params(INTERNLM2_5_7B) == hand


def test_minicpm_2b_bytes_and_weights_by_hand():
    # vLLM minicpm.py MiniCPMAttention: head_dim = hidden_size / num_attention_heads =
    # 2304 / 36 = 64, num_kv_heads = num_key_value_heads (36), 40 layers
    spec = load_config_file(MINICPM_2B)
    assert spec.layers == (FullAttention(36, 64),) * 40
    row = _row(36, 64)  # 9,216 bytes
    assert per_token_bytes(spec.layers, BF16) == 40 * row == 368_640
    assert request_bytes(spec.layers, 4096, BF16) == 4096 * 368_640 == 1_509_949_440
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=4096))
    assert {(p.kind, p.block_size, p.page_bytes) for p in pages} == {("full", 16, 16 * row)}
    # a tied 122,753 x 2,304 embedding (tie_word_embeddings true); per layer q/k/v/o
    # 2304 x 2304, MiniCPMMLP 5,760 wide (num_experts absent), two norms; the final norm.
    # Without the embedding 2,442,057,984: the MiniCPM paper's "2.4B" non-embedding model
    h = 2304
    body = 40 * (4 * h * h + 3 * h * 5760 + 2 * h) + h
    assert body == 2_442_057_984
    assert round(body / 1e9, 1) == 2.4
    assert _params(MINICPM_2B) == 122_753 * h + body


def test_minicpm_moe_8x2b_experts_as_wide_as_intermediate_size():
    # vLLM minicpm.py MiniCPMDecoderLayer: num_experts set, so MiniCPMMoE(num_experts 8,
    # top_k 2, intermediate_size=config.intermediate_size): every layer's eight experts are
    # 5,760 wide, the router (gate) 8 x 2304. Before kvplan read it so, `plan` refused the
    # config ("the spec does not give the experts' width")
    spec = load_config_file(MINICPM_MOE_8X2B)
    assert (spec.num_experts, spec.num_experts_per_token) == (8, 2)
    assert spec.moe_intermediate_size == 5760
    # the attention is MiniCPM-2B's: 368,640 bytes a token
    assert spec.layers == (FullAttention(36, 64),) * 40
    assert per_token_bytes(spec.layers, BF16) == 368_640
    h = 2304
    body = 40 * (4 * h * h + 8 * h + 8 * 3 * h * 5760 + 2 * h) + h
    # 13,590,468,864 without the tied embedding: the model card's 13.6B non-embedding
    # parameters (as datalearner.com quotes it, with a 27.7 GB bf16 checkpoint: 2 x
    # 13,873,291,776 bytes)
    assert body == 13_590_468_864
    assert round(body / 1e9, 1) == 13.6
    assert _params(MINICPM_MOE_8X2B) == 122_753 * h + body == 13_873_291_776


# every fixture above: `size` takes it and `plan` gives it a weights figure on every GPU
# (issue 22: "plan gives a weights figure for every config that size accepts")
@pytest.mark.parametrize(("fixture", "tokens", "gpu", "tp"), [
    (EXAONE_4_5, 8192, "h200", 2),
    (HUNYUAN_A13B, 8192, "h200", 2),
    (GLM_4_7_FLASH, 448, "h200", 2),
    (KIMI_LINEAR, 448, "h200", 2),
    (QWEN3_NEXT, 448, "h200", 2),
    (MIMO_7B, 448, "h200", 2),
    (GLM_4_5V, 448, "h200", 2),
    (DEEPSEEK_OCR, 448, "h200", 2),
    (WHISPER_SMALL, 448, "h200", 2),
    (TRINITY_NANO, 8192, "h100", 1),
    (ERNIE_4_5_0_3B, 8192, "h100", 1),
    (LING_LITE, 8192, "h200", 8),
    (LING_PLUS, 8192, "h200", 8),
    (OLMOE_1B_7B, 4096, "h100", 1),
    (HUNYUAN_7B, 4096, "h100", 1),
    (BAICHUAN2_7B, 4096, "h100", 1),
    (INTERNLM2_5_7B, 4096, "h100", 1),
    (MINICPM_2B, 4096, "h100", 1),
    (MINICPM_MOE_8X2B, 4096, "h100", 1),
    # the excerpts and IBM / MiniMax configs of tests/sources/test_family_config_excerpts.py
    (FAMILIES / "ByteDance-Seed--Seed-OSS-36B-Instruct.json", 32_768, "h100", 2),
    (FAMILIES / "swiss-ai--Apertus-8B-Instruct-2509.json", 32_768, "h100", 1),
    (FAMILIES / "rednote-hilab--dots.llm1.inst.json", 8192, "h200", 4),
    (FAMILIES / "Qwen--Qwen3-Omni-30B-A3B-Instruct.json", 32_768, "h100", 1),
    (FAMILIES / "ibm-granite--granite-4-8b-dense.json", 32_768, "h100", 1),
    (FAMILIES / "ibm-granite--granite-4.0-tiny-preview.json", 32_768, "h100", 1),
    (FAMILIES / "MiniMaxAI--MiniMax-M1.json", 32_768, "h200", 8),
])


def test_size_and_plan_take_each_real_config(fixture, tokens, gpu, tp):
    runner = CliRunner()
    sized = runner.invoke(app, ["size", str(fixture), "-t", str(tokens), "-f", "json"])
    assert sized.exit_code == 0, sized.output
    planned = runner.invoke(app, ["plan", str(fixture), "--gpu", gpu, "--tp", str(tp),
                                  "--max-model-len", str(tokens), "-f", "json",
                                  *served_version_flags(fixture)])
    assert planned.exit_code == 0, planned.output
    assert _weights_bytes(planned.output) > 0
