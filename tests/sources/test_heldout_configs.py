"""Real config.json files first met as held-out checks (configs no test here had seen): each
one's KV bytes and parameters derived by hand from the engine's model file, and checked
against the checkpoint's safetensors index total or the model card where one is published.
Sources: tests/fixtures/hf-configs/SOURCES.md."""

from __future__ import annotations

import json

import pytest
from paths import FIXTURES
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.dtypes import BF16
from kvplan.core.layers import FullAttention, SlidingWindow
from kvplan.core.sizing import per_token_bytes, request_bytes
from kvplan.sources.hfconfig import load_config_file

FAMILIES = FIXTURES / "hf-configs" / "families"
PHI_2 = FAMILIES / "microsoft--phi-2.json"
QWEN1_5_MOE = FAMILIES / "Qwen--Qwen1.5-MoE-A2.7B.json"
STARCODER2_3B = FAMILIES / "bigcode--starcoder2-3b.json"
GEMMA_4_31B = FAMILIES / "google--gemma-4-31B-it.json"


def _params(path) -> int:
    from kvplan.core.weights import inventory

    return sum(t.num_params for t in inventory(load_config_file(path)).tensors)


def test_phi_2_bytes_by_hand():
    # transformers modeling_phi.py PhiAttention (vLLM 0.33's Transformers backend): 32 layers
    # of 32 KV heads of 2560 / 32 = 80, the float16 checkpoint's 2-byte elements
    spec = load_config_file(PHI_2)
    assert spec.layers == (FullAttention(32, 80),) * 32
    assert per_token_bytes(spec.layers, BF16) == 32 * (2 * 32 * 80 * 2) == 327_680


def test_phi_2_parameters_match_the_safetensors_total():
    # vLLM phi.py / transformers modeling_phi.py: an untied 51,200 x 2,560 embedding; per
    # layer one LayerNorm (weight and bias), q / k / v / dense 2560 x 2560 each with a bias,
    # fc1 2560 -> 10,240 and fc2 back, both with biases; final_layernorm (weight and bias);
    # lm_head 51,200 x 2,560 with a bias (ParallelLMHead(bias=True))
    h, inter, vocab = 2560, 10_240, 51_200
    layer = 2 * h + 4 * (h * h + h) + (h * inter + inter) + (inter * h + h)
    hand = vocab * h + 32 * layer + 2 * h + (vocab * h + vocab)
    # the checkpoint's model.safetensors.index.json: total_size 5,559,367,680 bytes, float16
    assert hand == 5_559_367_680 // 2 == 2_779_683_840
    # kvplan once left out dense's bias (32 x 2,560) and lm_head's (51,200)
    assert _params(PHI_2) == hand


def test_qwen1_5_moe_bytes_by_hand():
    # vLLM qwen2_moe.py Qwen2MoeAttention: 24 layers of 16 KV heads of 2048 / 16 = 128
    spec = load_config_file(QWEN1_5_MOE)
    assert spec.layers == (FullAttention(16, 128),) * 24
    assert per_token_bytes(spec.layers, BF16) == 24 * (2 * 16 * 128 * 2) == 196_608


def test_qwen1_5_moe_parameters_match_the_safetensors_total():
    # vLLM qwen2_moe.py: untied 151,936 x 2,048 embedding and head; per layer two RMSNorms,
    # q / k / v 2048 x 2048 with biases (qkv_proj bias=True: no config field says so), o_proj
    # without; the router 60 x 2048, 60 experts of 3 x 2048 x 1408, a shared expert of
    # 3 x 2048 x 5632 and its sigmoid gate (shared_expert_gate, 1 x 2048); the final norm
    h, vocab = 2048, 151_936
    attention = 3 * (h * h + h) + h * h
    layer = 2 * h + attention + 60 * h + 60 * 3 * h * 1408 + 3 * h * 5632 + h
    hand = 2 * vocab * h + 24 * layer + h
    # the checkpoint's model.safetensors.index.json: total_size 28,631,568,384 bytes, bf16
    assert hand == 28_631_568_384 // 2 == 14_315_784_192
    # kvplan once left out the q / k / v biases (24 x 3 x 2,048)
    assert _params(QWEN1_5_MOE) == hand


def test_starcoder2_3b_sliding_bytes_by_hand():
    # vLLM starcoder2.py Starcoder2Attention: sliding_window 4,096 on each of 30 layers of
    # 2 KV heads of 3072 / 24 = 128
    spec = load_config_file(STARCODER2_3B)
    assert spec.layers == (SlidingWindow(2, 128, window=4096),) * 30
    row = 2 * 2 * 128 * 2
    assert per_token_bytes(spec.layers, BF16) == 30 * row == 30_720
    assert request_bytes(spec.layers, 32_768, BF16) == 30 * 4096 * row


def test_starcoder2_3b_parameters_by_hand():
    # vLLM starcoder2.py: the 49,152 x 3,072 embedding, tied (Starcoder2Config's default;
    # the config leaves tie_word_embeddings out); per layer two LayerNorms (weight and
    # bias), q 3072 x 3072, k / v 256 x 3072, o 3072 x 3072, all with biases (use_bias), an
    # ungated c_fc 3072 -> 12,288 and c_proj back, with biases; the final LayerNorm
    h, inter, kv = 3072, 12_288, 2 * 128
    layer = 4 * h + 2 * (h * h + h) + 2 * (kv * h + kv) + (h * inter + inter) + (inter * h + h)
    hand = 49_152 * h + 30 * layer + 2 * h
    # 3.03 billion: the model card's "3B" (kvplan once counted a gated MLP, no biases and an
    # untied head: 4.3 billion)
    assert hand == 3_030_371_328
    assert _params(STARCODER2_3B) == hand


def test_starcoder2_biases_follow_use_bias(tmp_path):
    # Starcoder2Attention and Starcoder2MLP take bias=config.use_bias: without it the 30
    # layers lose q / k / v / o's biases (3072 + 2 x 256 + 3072) and c_fc / c_proj's
    # (12,288 + 3,072)
    raw = json.loads(STARCODER2_3B.read_text())
    raw["use_bias"] = False
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    assert _params(STARCODER2_3B) - _params(path) == 30 * (3072 + 512 + 3072 + 12_288 + 3072)


def test_gemma_4_31b_bytes_by_hand():
    # vLLM gemma4.py Gemma4DecoderLayer: 50 sliding layers (window 1,024) of 16 KV heads of
    # 256, and 10 full-attention layers (every sixth) of global_head_dim 512 with
    # num_global_key_value_heads 4 (attention_k_eq_v: the KV head count of those layers)
    spec = load_config_file(GEMMA_4_31B)
    sliding, full = SlidingWindow(16, 256, window=1024), FullAttention(4, 512)
    assert spec.layers == ((sliding,) * 5 + (full,)) * 10
    per_token = 50 * (2 * 16 * 256 * 2) + 10 * (2 * 4 * 512 * 2)
    assert per_token_bytes(spec.layers, BF16) == per_token == 901_120
    assert request_bytes(spec.layers, 32_768, BF16) == (
        50 * 1024 * (2 * 16 * 256 * 2) + 10 * 32_768 * (2 * 4 * 512 * 2))


def test_gemma_4_31b_parameters_against_the_checkpoint_listing():
    # vLLM gemma4.py: the tied 262,144 x 5,376 embedding; per layer four RMSNorms (input,
    # post_attention, pre_ / post_feedforward), q_norm / k_norm over one head (v_norm has no
    # weight), a layer_scalar, a gated MLP 21,504 wide; sliding layers q 8192 / k, v 4096 /
    # o 8192 x 5,376, full layers q 16,384 / k 2,048 / o 16,384 x 5,376 and no v_proj
    # (attention_k_eq_v); the final norm. The 27-layer vision tower and its projection as
    # kvplan.core.weights lays them out (tests/core/test_tower_weights.py)
    h = 5376
    common = 4 * h + 1 + 3 * h * 21_504
    sliding = common + 8192 * h + 2 * 4096 * h + h * 8192 + 2 * 256
    full = common + 16_384 * h + 2048 * h + h * 16_384 + 2 * 512
    text = 262_144 * h + 50 * sliding + 10 * full + h
    v = 1152
    vision = (27 * (4 * v * v + 3 * v * 4304 + 4 * v + 2 * 72) + 768 * v
              + 2 * 10_240 * v + 2 * v + h * v)
    # the checkpoint listing of gemma-4-31B-it (SOURCES.md) totals 31,273,088,876 values
    assert text + vision == 31_273_088_876
    # vLLM's QKVParallelLinear keeps a V slot on the ten k_eq_v layers and loads K into it
    # ("K weights are loaded into both K and V slots"), so the GPU holds 10 x 2,048 x 5,376
    # more than the checkpoint: the count kvplan gives. It once left out the two extra norms
    # a layer, the q / k norms and layer_scalar (681,020 values)
    assert _params(GEMMA_4_31B) == 31_273_088_876 + 10 * 2048 * h


@pytest.mark.parametrize("fixture", [PHI_2, QWEN1_5_MOE, STARCODER2_3B, GEMMA_4_31B])
def test_heldout_configs_size_and_plan(fixture):
    runner = CliRunner()
    sized = runner.invoke(app, ["size", str(fixture), "-t", "2048", "-f", "json"])
    assert sized.exit_code == 0, sized.output
    planned = runner.invoke(app, ["plan", str(fixture), "--gpu", "h100",
                                  "--max-model-len", "2048", "-f", "json"])
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.output)["budget"]["weights_bytes"][0] > 0
