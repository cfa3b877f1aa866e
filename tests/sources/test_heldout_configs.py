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
V4_FLASH = FAMILIES / "deepseek-ai--DeepSeek-V4-Flash.json"
OPT_125M = FAMILIES / "facebook--opt-125m.json"
OPT_350M = FAMILIES / "facebook--opt-350m.json"
MPT_30B = FAMILIES / "adamrb--mpt-30b-chat-safetensors.json"
CODEGEN_350M = FAMILIES / "Salesforce--codegen-350M-mono.json"
STABLELM_2_12B = FAMILIES / "stabilityai--stablelm-2-12b.json"
V4_FLASH_REDHAT = FAMILIES / "RedHatAI--DeepSeek-V4-Flash-NVFP4-FP8.json"
V4_PRO_NVFP4 = FAMILIES / "nvidia--DeepSeek-V4-Pro-NVFP4.json"
V4_PRO_NVFP4_QUANT = FAMILIES / "nvidia--DeepSeek-V4-Pro-NVFP4_hf_quant_config.json"


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


def test_opt_bytes_by_hand():
    # vLLM opt.py OPTAttention: multi-head, as many KV heads as heads; float16 checkpoints
    spec = load_config_file(OPT_125M)
    assert spec.layers == (FullAttention(12, 64),) * 12
    assert per_token_bytes(spec.layers, BF16) == 12 * (2 * 12 * 64 * 2) == 36_864
    spec = load_config_file(OPT_350M)
    assert spec.layers == (FullAttention(16, 64),) * 24
    assert per_token_bytes(spec.layers, BF16) == 24 * (2 * 16 * 64 * 2) == 98_304


def test_opt_125m_parameters_by_hand():
    # vLLM opt.py: a tied 50,272 x 768 embedding (OPTConfig ties by default), learned
    # positions of max_position_embeddings + 2 rows (OPTLearnedPositionalEmbedding's
    # offset); per layer q / k / v / out_proj 768 x 768 with biases (enable_bias), fc1
    # 768 -> 3,072 and fc2 back with biases, no gate, two LayerNorms (weight and bias); the
    # final LayerNorm (do_layer_norm_before). 125 million: the OPT paper's 125M
    h, ffn = 768, 3072
    layer = 4 * (h * h + h) + (h * ffn + ffn) + (ffn * h + h) + 2 * 2 * h
    hand = 50_272 * h + 2050 * h + 12 * layer + 2 * h
    assert hand == 125_239_296
    # kvplan once laid OPT out as a generic decoder (gated MLP, no biases, an untied head):
    # 190,483,200
    assert _params(OPT_125M) == hand


def test_opt_350m_projects_its_512_wide_embedding_and_has_no_final_norm():
    # OPT-350m: word_embed_proj_dim 512, so the embedding (tied head) is 50,272 x 512 with
    # project_in (512 -> 1,024) and project_out (1,024 -> 512), no biases; post-norm layers
    # (do_layer_norm_before false) and so no final LayerNorm (vLLM opt.py OPTDecoder).
    # 331 million, the count the model's Hub page gives for the 350M model
    h, ffn = 1024, 4096
    layer = 4 * (h * h + h) + (h * ffn + ffn) + (ffn * h + h) + 2 * 2 * h
    hand = 50_272 * 512 + 2050 * h + 2 * 512 * h + 24 * layer
    assert hand == 331_196_416
    assert _params(OPT_350M) == hand


def test_mpt_30b_bytes_and_parameters_by_hand():
    # MPT-30B (vLLM mpt.py, transformers modeling_mpt.py): 48 layers of 64 heads = 64 KV
    # heads of 7168 / 64 = 112 (ALiBi, no position table). Plan refused it once ("the spec
    # has no intermediate_size": MPT gives expansion_ratio instead)
    spec = load_config_file(MPT_30B)
    assert spec.layers == (FullAttention(64, 112),) * 48
    assert per_token_bytes(spec.layers, BF16) == 48 * (2 * 64 * 112 * 2) == 1_376_256
    # per layer a fused Wqkv 3 x 7168 x 7168 and out_proj, up 4 x 7168 wide (expansion_ratio
    # 4) and down, two LayerNorms without bias (no_bias removes every bias); the tied
    # 50,432 x 7,168 embedding; norm_f. 29.96 billion, MPT-30B's 30B
    d = 7168
    layer = 3 * d * d + d * d + 2 * 4 * d * d + 2 * d
    hand = 50_432 * d + 48 * layer + d
    assert hand == 29_957_200_896
    assert _params(MPT_30B) == hand


def test_codegen_350m_parameters_by_hand():
    # transformers modeling_codegen.py: per layer ln_1 (weight and bias) before the parallel
    # attention and MLP, qkv_proj 3 x 1024 x 1024 and out_proj without biases, fc_in to
    # n_inner (null: 4 x n_embd = 4,096) and fc_out back with biases; ln_f; an untied
    # 51,200-row embedding and lm_head, the head with a bias. Plan refused it once ("no
    # intermediate_size": n_inner is null)
    h, inner = 1024, 4096
    layer = 2 * h + 3 * h * h + h * h + (h * inner + inner) + (inner * h + h)
    hand = 51_200 * h + 20 * layer + 2 * h + (51_200 * h + 51_200)
    assert hand == 356_712_448
    assert _params(CODEGEN_350M) == hand


def test_stablelm_2_12b_bytes_and_parameters_by_hand():
    # transformers modeling_stablelm.py: 40 layers, 8 KV heads of 5120 / 32 = 160
    spec = load_config_file(STABLELM_2_12B)
    assert spec.layers == (FullAttention(8, 160),) * 40
    assert per_token_bytes(spec.layers, BF16) == 40 * (2 * 8 * 160 * 2) == 204_800
    # per layer one input_layernorm (use_parallel_residual; weight and bias), q / o
    # 5120 x 5120, k / v 1280 x 5120 without biases (use_qkv_bias unset), a bias-free
    # LayerNorm per query head and per KV head (qk_layernorm: 32 x 160 and 8 x 160), a gated
    # MLP 13,824 wide; the final LayerNorm; an untied 100,352-row vocabulary. 12.1 billion,
    # the model card's 12.1B (kvplan once counted two RMSNorm weights a layer and no q / k
    # norms: 261,120 fewer)
    h, inter = 5120, 13_824
    layer = 2 * h + 2 * h * h + 2 * 1280 * h + 32 * 160 + 8 * 160 + 3 * h * inter
    hand = 2 * 100_352 * h + 40 * layer + 2 * h
    assert hand == 12_143_185_920
    assert _params(STABLELM_2_12B) == hand


def test_deepseek_v4_config_saved_by_transformers_5_reads_as_the_official_one():
    # RedHatAI's re-quantized DeepSeek-V4-Flash config, written by transformers 5, spells
    # out kv_lora_rank: null and v_head_dim: null. DeepSeek-V4 attention is compressed,
    # not MLA, so the null latent rank must not be refused (it was: "kv_lora_rank is null
    # on an MLA model"); the cache is the official config's, layer for layer
    redhat, official = load_config_file(V4_FLASH_REDHAT), load_config_file(V4_FLASH)
    assert redhat.layers == official.layers
    assert per_token_bytes(redhat.layers, BF16) == per_token_bytes(official.layers, BF16)


def test_deepseek_v4_pro_mtp_layer_is_window_only_attention():
    # DeepSeek-V4-Pro compresses on every main layer (compress_ratios 128, 128, then 4 / 128;
    # the 62nd entry, 0, is the MTP layer's): the MTP layer's attention is the window-only
    # one, shaped like layer 0's without its compressor (kvplan once found no window-only
    # layer to copy and stopped with StopIteration)
    from kvplan.core.weights import inventory

    inv = inventory(load_config_file(V4_PRO_NVFP4))
    main = {t.name.removeprefix("model.layers.0.attn."): t.shape for t in inv.tensors
            if t.name.startswith("model.layers.0.attn.") and "compressor" not in t.name}
    mtp = {t.name.split(".attn.", 1)[1]: t.shape for t in inv.tensors
           if t.place == "mtp" and ".attn." in t.name}
    assert mtp == main
    # 1.6 trillion parameters without the MTP layer: the model card's "1.6T"
    assert round(sum(t.num_params for t in inv.tensors if t.place != "mtp") / 1e12, 1) == 1.6


def _checkpoint_bytes(spec) -> dict[str, int]:
    from kvplan.core.weights import inventory, load_format

    target, q, _ = load_format(spec, "auto")
    return inventory(target, q).bytes_by_dtype()


def test_deepseek_v4_nvfp4_targets_reach_the_experts():
    # RedHatAI's compressed-tensors groups target "re:.*ffn.*(gate|up|down)_proj$" (NVFP4)
    # and the attention projections (FP8 blocks): the checkpoint keeps the MoE under ffn.
    # Every routed and shared expert projection of the 43 layers and the MTP layer is
    # NVFP4, two e2m1 values a byte: 44 x (256 + 1) x 3 x 2048 x 4096 / 2 bytes. kvplan once
    # named the MoE mlp, matched nothing and weighed the experts in BF16
    by = _checkpoint_bytes(load_config_file(V4_FLASH_REDHAT))
    assert by["U8"] == 44 * 257 * 3 * 2048 * 4096 // 2 == 142_287_568_896


def test_deepseek_v4_pro_nvfp4_reads_hf_quant_config(tmp_path):
    # nvidia/DeepSeek-V4-Pro-NVFP4 keeps its quantization in hf_quant_config.json: NVFP4 on
    # layers.N.ffn.experts (61 layers), shared experts, attention, head and MTP excluded.
    # 61 x 384 x 3 x 3072 x 7168 / 2 bytes of packed experts
    folder = tmp_path / "DeepSeek-V4-Pro-NVFP4"
    folder.mkdir()
    (folder / "config.json").write_bytes(V4_PRO_NVFP4.read_bytes())
    (folder / "hf_quant_config.json").write_bytes(V4_PRO_NVFP4_QUANT.read_bytes())
    by = _checkpoint_bytes(load_config_file(folder))
    assert by["U8"] == 61 * 384 * 3 * 3072 * 7168 // 2 == 773_698_093_056


def test_hf_quant_config_beside_config_json_is_read(tmp_path):
    # ModelOpt up to 0.29 (NVIDIA's NVFP4 uploads, e.g. nvidia/DeepSeek-R1-FP4: producer
    # modelopt 0.23.0) wrote the quantization to hf_quant_config.json, not config.json;
    # vLLM's get_quantization_config reads that file when config.json has none. The
    # folder must read exactly as the same block written inline into config.json
    from kvplan.core.weights import load_format

    block = {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
             "exclude_modules": ["lm_head"]}
    base = json.loads((FIXTURES / "hf-configs" / "Qwen--Qwen3-8B.json").read_text())
    folder = tmp_path / "qwen3-8b-nvfp4"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(base))
    plain = load_config_file(folder)
    assert plain.quantization.method == "none"
    (folder / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt", "version": "0.23.0"}, "quantization": block}))
    inline = tmp_path / "inline.json"
    inline.write_text(json.dumps({**base, "quantization_config": block}))
    side, inl = load_config_file(folder), load_config_file(inline)
    assert side.quantization == inl.quantization
    assert (side.quantization.method, side.quantization.bits) == ("modelopt", 4)
    spec, q, _ = load_format(side, "auto")
    from kvplan.core.weights import inventory

    q_proj = [t for t in inventory(spec, q).tensors
              if t.name.startswith("model.layers.0.self_attn.q_proj.")]
    # vLLM modelopt.py ModelOptNvFp4LinearMethod: the 4096 x 4096 weight packed two e2m1
    # values a byte, one fp8 scale per 16 inputs, fp32 weight_scale_2 and input_scale
    assert sum(t.num_bytes for t in q_proj) == 4096 * 4096 // 2 + 4096 * 4096 // 16 + 4 + 4


@pytest.mark.parametrize("fixture", [PHI_2, QWEN1_5_MOE, STARCODER2_3B, GEMMA_4_31B, OPT_125M,
                                     OPT_350M, MPT_30B, CODEGEN_350M])
def test_heldout_configs_size_and_plan(fixture):
    runner = CliRunner()
    sized = runner.invoke(app, ["size", str(fixture), "-t", "2048", "-f", "json"])
    assert sized.exit_code == 0, sized.output
    planned = runner.invoke(app, ["plan", str(fixture), "--gpu", "h100",
                                  "--max-model-len", "2048", "-f", "json"])
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.output)["budget"]["weights_bytes"][0] > 0
