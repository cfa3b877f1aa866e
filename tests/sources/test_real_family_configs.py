"""Real config.json files of the families added to reach vLLM 0.33's generation registry
(tests/fixtures/hf-configs/families, sources in tests/fixtures/hf-configs/SOURCES.md): the
reader takes each as published (nested text configs, extra keys), and its bytes per token,
per request and per page are derived here by hand from the engine's model file."""

from __future__ import annotations

import json

import pytest
from paths import FIXTURES
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.dtypes import BF16
from kvplan.core.layers import FullAttention, SlidingWindow
from kvplan.core.sizing import per_token_bytes, request_bytes
from kvplan.engines.vllm import VllmConfig, layer_page_specs
from kvplan.sources.hfconfig import load_config_file

FAMILIES = FIXTURES / "hf-configs" / "families"
EXAONE_4_5 = FAMILIES / "LGAI-EXAONE--EXAONE-4.5-33B.json"
HUNYUAN_A13B = FAMILIES / "tencent--Hunyuan-A13B.json"


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
    # the generic decoder layout leaves out only the q / k norms
    assert text == hand - 64 * 2 * 128


def test_exaone_4_5_33b_mtp_layer_shares_the_embedding_and_head():
    # vLLM exaone4_5_mtp.py Exaone4_5MultiTokenPredictor: fc (2 x 5120 -> 5120, no bias),
    # pre_fc_norm_hidden, pre_fc_norm_embedding, norm and one Exaone4DecoderLayer;
    # load_weights takes embed_tokens and lm_head from the model's (the checkpoint's mtp.*
    # holds no copies)
    from kvplan.core.weights import inventory

    h, inter = 5120, 27392
    layer = 2 * h * h + 2 * 1024 * h + 2 * h + 3 * h * inter  # q / k norms left out
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
    # the generic decoder layout leaves out only the q / k norms (kvplan.core.weights
    # generic_note: a family's own extra tensors are not counted)
    assert params == hand - 32 * 2 * 128


@pytest.mark.parametrize("fixture", [EXAONE_4_5, HUNYUAN_A13B])
def test_size_and_plan_accept_the_real_spelling(fixture):
    runner = CliRunner()
    sized = runner.invoke(app, ["size", str(fixture), "-t", "8192", "-f", "json"])
    assert sized.exit_code == 0, sized.output
    planned = runner.invoke(app, ["plan", str(fixture), "--gpu", "h200", "--tp", "2",
                                  "--max-model-len", "8192", "-f", "json"])
    assert planned.exit_code == 0, planned.output
    assert all(w > 0 for w in json.loads(planned.output)["budget"]["weights_bytes"])
