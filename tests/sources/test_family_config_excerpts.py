"""Seed-OSS, Apertus, dots.llm1 and Qwen3-Omni: families kvplan reads that had no real
config.json here. For the first three the only public copies found are excerpts of the Hub
files (an inference engine's test constants, each "mirroring the real checkpoint's
config.json"; SOURCES.md), so each test also checks the excerpt against the model card's
published shapes and parameter total; Qwen3-Omni's is whole, printed by transformers from a
local checkpoint beside its safetensors listing. The bytes per token, per request and per
page are derived by hand from vLLM's model files."""

from __future__ import annotations

import json

from paths import FIXTURES

from kvplan.core.dtypes import BF16
from kvplan.core.layers import FullAttention
from kvplan.core.sizing import per_token_bytes, request_bytes
from kvplan.engines.vllm import VllmConfig, layer_page_specs
from kvplan.sources.hfconfig import load_config_file

FAMILIES = FIXTURES / "hf-configs" / "families"
SEED_OSS_36B = FAMILIES / "ByteDance-Seed--Seed-OSS-36B-Instruct.json"
APERTUS_8B = FAMILIES / "swiss-ai--Apertus-8B-Instruct-2509.json"
DOTS_LLM1 = FAMILIES / "rednote-hilab--dots.llm1.inst.json"


def _params(path):
    from kvplan.core.weights import inventory

    return sum(t.num_params for t in inventory(load_config_file(path)).tensors)


def _pages(spec, max_model_len):
    pages = layer_page_specs(spec, spec.layers, VllmConfig(max_model_len=max_model_len))
    return {(p.kind, p.block_size, p.page_bytes) for p in pages}


# --- Seed-OSS-36B (seed_oss) ----------------------------------------------------------------

def test_seed_oss_36b_excerpt_matches_the_model_card():
    raw = json.loads(SEED_OSS_36B.read_text())
    # the model card's table: 64 layers, QKV heads 80 / 8 / 8, head size 128, hidden 5,120,
    # vocabulary 155K, context 512K, RoPE base 1e7
    assert (raw["num_hidden_layers"], raw["num_attention_heads"], raw["num_key_value_heads"],
            raw["head_dim"], raw["hidden_size"]) == (64, 80, 8, 128, 5120)
    assert raw["max_position_embeddings"] == 512 * 1024
    assert raw["rope_theta"] == 1e7


def test_seed_oss_36b_bytes_by_hand():
    # vLLM seed_oss.py SeedOssAttention: an Attention of num_key_value_heads (8) heads of
    # config.head_dim (128, explicit: not hidden_size / heads = 64) on each of the 64 layers
    spec = load_config_file(SEED_OSS_36B)
    assert spec.layers == (FullAttention(8, 128),) * 64
    row = 2 * 8 * 128 * 2  # K and V, bf16
    assert per_token_bytes(spec.layers, BF16) == 64 * row == 262_144
    assert request_bytes(spec.layers, 32_768, BF16) == 32_768 * 64 * row == 8 * 2**30
    # vLLM's FullAttentionSpec page: block 16 x K and V x 8 heads x 128 x 2 bytes
    assert _pages(spec, 32_768) == {("full", 16, 16 * row)}
    assert spec.max_context_tokens == 524_288


def test_seed_oss_36b_weights_by_hand():
    # transformers modeling_seed_oss.py (the checkpoint vLLM seed_oss.py loads): an untied
    # 155,136 x 5,120 embedding and LM head; per layer q 5,120 -> 80 x 128 and k / v 5,120 ->
    # 8 x 128 with biases (attention_bias), o 10,240 -> 5,120 without (attention_out_bias
    # false), a gated MLP 27,648 wide, two RMSNorms; the final norm
    h, q, kv, inter, vocab = 5120, 80 * 128, 8 * 128, 27_648, 155_136
    layer = (h * q + q) + 2 * (h * kv + kv) + q * h + 3 * h * inter + 2 * h
    hand = 2 * vocab * h + 64 * layer + h
    assert hand == 36_151_104_512
    assert _params(SEED_OSS_36B) == hand
    assert abs(hand - 36e9) / 36e9 < 0.01  # the model card's "36B"


def test_seed_oss_o_proj_bias_follows_attention_out_bias(tmp_path):
    # SeedOssAttention: o_proj = Linear(..., bias=config.attention_out_bias), q/k/v's bias
    # config.attention_bias: the two flags are independent
    from kvplan.core.weights import inventory

    raw = json.loads(SEED_OSS_36B.read_text())
    with_out_bias = tmp_path / "config.json"
    with_out_bias.write_text(json.dumps({**raw, "attention_out_bias": True}))
    names = {t.name for t in inventory(load_config_file(with_out_bias)).tensors}
    assert "model.layers.0.self_attn.o_proj.bias" in names
    names = {t.name for t in inventory(load_config_file(SEED_OSS_36B)).tensors}
    assert "model.layers.0.self_attn.o_proj.bias" not in names
    assert "model.layers.0.self_attn.q_proj.bias" in names
    assert _params(with_out_bias) - _params(SEED_OSS_36B) == 64 * 5120


# --- Apertus-8B (apertus) ---------------------------------------------------------------------

def test_apertus_8b_bytes_by_hand():
    # vLLM apertus.py ApertusAttention: num_key_value_heads (8) KV heads of hidden_size /
    # num_attention_heads = 4,096 / 32 = 128 (no head_dim key) on each of the 32 layers
    spec = load_config_file(APERTUS_8B)
    assert spec.layers == (FullAttention(8, 128),) * 32
    row = 2 * 8 * 128 * 2
    assert per_token_bytes(spec.layers, BF16) == 32 * row == 131_072
    assert request_bytes(spec.layers, 65_536, BF16) == 65_536 * 32 * row == 8 * 2**30
    assert _pages(spec, 65_536) == {("full", 16, 16 * row)}
    assert spec.max_context_tokens == 65_536


def test_apertus_8b_weights_by_hand():
    # vLLM apertus.py: an untied 131,072 x 4,096 embedding and LM head; per layer q / o
    # 4,096 x 4,096, k / v 1,024 x 4,096, q_norm / k_norm over a 128-wide head, an ungated
    # up_proj / down_proj MLP 21,504 wide whose XIELU keeps alpha_p and alpha_n (one value
    # each), attention_layernorm and feedforward_layernorm; the final norm
    h, kv, inter, vocab = 4096, 1024, 21_504, 131_072
    layer = 2 * h * h + 2 * kv * h + 2 * 128 + 2 * h * inter + 2 + 2 * h
    hand = 2 * vocab * h + 32 * layer + h
    assert hand == 8_053_338_176
    assert _params(APERTUS_8B) == hand
    assert abs(hand - 8e9) / 8e9 < 0.01  # "Apertus-8B"


# --- dots.llm1 (dots1) ------------------------------------------------------------------------

def test_dots_llm1_bytes_by_hand():
    # vLLM dots1.py Dots1Attention: num_key_value_heads (32, as many as query heads) of
    # hidden_size / num_attention_heads = 128 on each of the 62 layers
    spec = load_config_file(DOTS_LLM1)
    assert spec.layers == (FullAttention(32, 128),) * 62
    row = 2 * 32 * 128 * 2
    assert per_token_bytes(spec.layers, BF16) == 62 * row == 1_015_808
    assert request_bytes(spec.layers, 32_768, BF16) == 32_768 * 62 * row
    assert request_bytes(spec.layers, 32_768, BF16) == 33_285_996_544
    assert _pages(spec, 32_768) == {("full", 16, 16 * row)}


def test_dots_llm1_weights_by_hand():
    # vLLM dots1.py: an untied 152,064 x 4,096 embedding and LM head; per layer q / k / v / o
    # 4,096 x 4,096 (no biases), q_norm / k_norm over a 128-wide head, two RMSNorms; layer 0
    # (first_k_dense_replace 1) a gated MLP 10,944 wide; layers 1-61 a 128-expert router
    # (mlp.gate), 128 gated experts of 1,408 and one shared MLP of 2 x 1,408 (Dots1MoE:
    # n_shared_experts x moe_intermediate_size); the final norm. The excerpt has no
    # topk_method, so no router score-correction bias is counted (61 x 128 values at most)
    h, vocab, experts = 4096, 152_064, 128
    attention = 4 * h * h + 2 * 128 + 2 * h
    moe = h * experts + experts * 3 * h * 1408 + 3 * h * 2 * 1408
    hand = 2 * vocab * h + 62 * attention + 3 * h * 10_944 + 61 * moe + h
    assert hand == 142_774_373_888
    assert _params(DOTS_LLM1) == hand
    assert abs(hand - 142e9) / 142e9 < 0.01  # the technical report's 142B total
    # 6 routed experts and the shared MLP a token: the report's 14B activated
    active = 2 * vocab * h + 62 * attention + 3 * h * 10_944 + h + 61 * (
        h * experts + 6 * 3 * h * 1408 + 3 * h * 2 * 1408)
    assert abs(active - 14e9) / 14e9 < 0.01


# --- Qwen3-Omni-30B-A3B (qwen3_omni_moe): a whole config, printed by transformers ------------

QWEN3_OMNI = FAMILIES / "Qwen--Qwen3-Omni-30B-A3B-Instruct.json"


def test_qwen3_omni_reads_the_thinker_text_config():
    # vLLM qwen3_omni_moe_thinker.py: the thinker's language model is a
    # Qwen3MoeLLMForCausalLM built from thinker_config.text_config; Qwen3MoeAttention keeps
    # num_key_value_heads (4) heads of head_dim 128 on each of the 48 layers. The talker and
    # code2wav are not served by vLLM's thinker model, so they hold no cache here
    spec = load_config_file(QWEN3_OMNI)
    assert spec.layers == (FullAttention(4, 128),) * 48
    row = 2 * 4 * 128 * 2  # K and V, bf16 (the thinker's dtype)
    assert spec.dtype == "bf16"
    assert per_token_bytes(spec.layers, BF16) == 48 * row == 98_304
    assert request_bytes(spec.layers, 65_536, BF16) == 65_536 * 48 * row == 6 * 2**30
    assert _pages(spec, 65_536) == {("full", 16, 16 * row)}
    assert spec.max_context_tokens == 65_536


def test_qwen3_omni_text_weights_match_the_checkpoint_listing():
    # the report's safetensors listing (SOURCES.md): thinker.model.embed_tokens and
    # thinker.lm_head [152064, 2048]; per layer q_proj [4096, 2048], k_proj / v_proj
    # [512, 2048], o_proj [2048, 4096], q_norm / k_norm [128], two [2048] norms, mlp.gate
    # [128, 2048] and 128 experts of gate / up [768, 2048] and down [2048, 768]; the final
    # norm [2048]
    h, vocab = 2048, 152_064
    layer = (2 * 4096 * h + 2 * 512 * h + 2 * 128 + 2 * h + 128 * h
             + 128 * 3 * 768 * h)
    hand = 2 * vocab * h + 48 * layer + h
    assert hand == 30_532_646_912
    from kvplan.core.weights import inventory

    spec = load_config_file(QWEN3_OMNI)
    text = sum(t.num_params for t in inventory(spec).tensors
               if not t.name.startswith(("thinker.audio_tower.", "thinker.visual.")))
    assert text == hand


# The report's listing of thinker.audio_tower.* and thinker.visual.* (SOURCES.md): each
# tensor's shape and how many the listing collapses into its row (x32 layers, x27 blocks,
# x3 merger_list), transcribed from the report
OMNI_AUDIO_LISTING = {
    "conv2d1.weight": ([480, 1, 3, 3], 1), "conv2d1.bias": ([480], 1),
    "conv2d2.weight": ([480, 480, 3, 3], 1), "conv2d2.bias": ([480], 1),
    "conv2d3.weight": ([480, 480, 3, 3], 1), "conv2d3.bias": ([480], 1),
    "conv_out.weight": ([1280, 7680], 1),
    **{f"layers.*.{n}": (shape, 32) for n, shape in (
        ("fc1.weight", [5120, 1280]), ("fc1.bias", [5120]),
        ("fc2.weight", [1280, 5120]), ("fc2.bias", [1280]),
        ("final_layer_norm.weight", [1280]), ("final_layer_norm.bias", [1280]),
        ("self_attn.q_proj.weight", [1280, 1280]), ("self_attn.q_proj.bias", [1280]),
        ("self_attn.k_proj.weight", [1280, 1280]), ("self_attn.k_proj.bias", [1280]),
        ("self_attn.v_proj.weight", [1280, 1280]), ("self_attn.v_proj.bias", [1280]),
        ("self_attn.out_proj.weight", [1280, 1280]), ("self_attn.out_proj.bias", [1280]),
        ("self_attn_layer_norm.weight", [1280]), ("self_attn_layer_norm.bias", [1280]))},
    "ln_post.weight": ([1280], 1), "ln_post.bias": ([1280], 1),
    "proj1.weight": ([1280, 1280], 1), "proj1.bias": ([1280], 1),
    "proj2.weight": ([2048, 1280], 1), "proj2.bias": ([2048], 1),
}
OMNI_VISUAL_LISTING = {
    **{f"blocks.*.{n}": (shape, 27) for n, shape in (
        ("attn.proj.weight", [1152, 1152]), ("attn.proj.bias", [1152]),
        ("attn.qkv.weight", [3456, 1152]), ("attn.qkv.bias", [3456]),
        ("mlp.linear_fc1.weight", [4304, 1152]), ("mlp.linear_fc1.bias", [4304]),
        ("mlp.linear_fc2.weight", [1152, 4304]), ("mlp.linear_fc2.bias", [1152]),
        ("norm1.weight", [1152]), ("norm1.bias", [1152]),
        ("norm2.weight", [1152]), ("norm2.bias", [1152]))},
    "merger.ln_q.weight": ([1152], 1), "merger.ln_q.bias": ([1152], 1),
    "merger.mlp.0.weight": ([4608, 4608], 1), "merger.mlp.0.bias": ([4608], 1),
    "merger.mlp.2.weight": ([2048, 4608], 1), "merger.mlp.2.bias": ([2048], 1),
    **{f"merger_list.*.{n}": (shape, 3) for n, shape in (
        ("ln_q.weight", [4608]), ("ln_q.bias", [4608]),
        ("mlp.0.weight", [4608, 4608]), ("mlp.0.bias", [4608]),
        ("mlp.2.weight", [2048, 4608]), ("mlp.2.bias", [2048]))},
    "patch_embed.proj.weight": ([1152, 3, 2, 16, 16], 1), "patch_embed.proj.bias": ([1152], 1),
    "pos_embed.weight": ([2304, 1152], 1),
}


def _listed_params(listing):
    total = 0
    for shape, count in listing.values():
        n = 1
        for x in shape:
            n *= x
        total += n * count
    return total


def test_qwen3_omni_towers_match_the_checkpoint_listing():
    # vLLM 0.33.0 qwen3_omni_moe_thinker.py Qwen3OmniMoeThinkerForConditionalGeneration builds
    # audio_tower (Qwen3OmniMoeAudioEncoder) and visual (Qwen3Omni_VisionTransformer) from
    # thinker_config beside the language model; its hf_to_vllm_mapper maps "talker." and
    # "code2wav." to None, so those weights are never loaded
    import re

    from kvplan.core.weights import inventory

    audio, visual = _listed_params(OMNI_AUDIO_LISTING), _listed_params(OMNI_VISUAL_LISTING)
    assert (audio, visual) == (647_927_168, 538_631_408)
    spec = load_config_file(QWEN3_OMNI)
    assert spec.uncounted_towers == ()
    for prefix, listing in (("thinker.audio_tower.", OMNI_AUDIO_LISTING),
                            ("thinker.visual.", OMNI_VISUAL_LISTING)):
        rows: dict[str, tuple[list[int], int]] = {}
        for t in inventory(spec).tensors:
            if t.name.startswith(prefix):
                key = re.sub(r"^(layers|blocks|merger_list)\.\d+\.", r"\1.*.",
                             t.name[len(prefix):])
                shape, n = rows.get(key, (list(t.shape), 0))
                assert shape == list(t.shape), key
                rows[key] = (shape, n + 1)
        assert rows == listing
    # thinker: the text model (30,532,646,912) and the two towers; the listing's other
    # 3,540,613,057 values are the talker and code2wav, which vLLM does not load
    assert _params(QWEN3_OMNI) == 30_532_646_912 + audio + visual == 31_719_205_488
    assert 35_259_818_545 - 31_719_205_488 == 3_540_613_057


# --- Granite 4 8B dense (granitemoehybrid): IBM's own test fixture, all attention ----------

GRANITE_4_8B_DENSE = FAMILIES / "ibm-granite--granite-4-8b-dense.json"


def test_granite_4_8b_dense_bytes_by_hand():
    # vLLM granitemoehybrid.py GraniteMoeHybridModel builds one decoder layer per
    # config.layer_types entry: 40 "attention" layers, each a GraniteMoeHybridAttention of
    # num_key_value_heads (8) heads of hidden_size / num_attention_heads = 4,096 / 32 = 128
    spec = load_config_file(GRANITE_4_8B_DENSE)
    assert spec.layers == (FullAttention(8, 128),) * 40
    row = 2 * 8 * 128 * 2  # K and V, bf16
    assert per_token_bytes(spec.layers, BF16) == 40 * row == 163_840
    assert request_bytes(spec.layers, 32_768, BF16) == 32_768 * 40 * row == 5 * 2**30
    # vLLM config/model.py ModelConfig.is_hybrid is False when every layer_types entry is
    # attention (its granite-4.0-micro case), so no Mamba page alignment: FullAttentionSpec's
    # block of 16 tokens
    assert _pages(spec, 32_768) == {("full", 16, 16 * row)}
    assert spec.max_context_tokens == 131_072


def test_granite_4_8b_dense_weights_by_hand():
    # vLLM granitemoehybrid.py: num_local_experts 0 builds no block_sparse_moe, so the
    # layer's MLP is GraniteMoeSharedMLP (granitemoeshared.py): input_linear 4,096 -> 2 x
    # shared_intermediate_size (12,800), output_linear back, no biases; q / o 4,096 x 4,096
    # and k / v 4,096 -> 8 x 128 without biases (attention_bias false); two RMSNorms a layer,
    # the final norm, and a tied 100,352-row embedding
    h, kv, shared, vocab = 4096, 8 * 128, 12_800, 100_352
    layer = 2 * h * h + 2 * h * kv + 3 * h * shared + 2 * h
    hand = vocab * h + 40 * layer + h
    assert hand == 8_380_551_168
    assert _params(GRANITE_4_8B_DENSE) == hand  # the checkpoint's name: "8b"


def test_granite_dense_mlp_is_as_wide_as_shared_intermediate_size(tmp_path):
    # the fixture has intermediate_size == shared_intermediate_size; vLLM sizes the dense
    # layer's only MLP from shared_intermediate_size (GraniteMoeSharedMLP.hidden_size), so
    # changing intermediate_size alone must leave the count alone
    raw = json.loads(GRANITE_4_8B_DENSE.read_text())
    baseline = _params(GRANITE_4_8B_DENSE)
    raw["intermediate_size"] = 1000
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    assert _params(path) == baseline
    raw["shared_intermediate_size"] = 6400
    path.write_text(json.dumps(raw))
    assert _params(path) == baseline - 40 * 3 * 4096 * 6400


# --- Granite 4.0 Tiny Preview (granitemoehybrid with Mamba-2 layers and experts) ---------

GRANITE_4_TINY = FAMILIES / "ibm-granite--granite-4.0-tiny-preview.json"


def test_granite_4_tiny_preview_attention_and_mamba_state_by_hand():
    # vLLM granitemoehybrid.py: layer_types puts attention at 5, 15, 25, 35 (4 KV heads of
    # hidden_size / num_attention_heads = 1,536 / 12 = 128) and a MambaMixer2 on the other
    # 36. get_mamba_state_shape_from_config -> mamba_utils.py mamba2_state_shape: a conv
    # state of (mamba_d_conv - 1) x (intermediate + 2 x n_groups x d_state) with
    # intermediate = mamba_expand x hidden_size = 3,072, and an SSM state of heads x head_dim
    # x d_state = 48 x 64 x 128; both in the bf16 model dtype (mamba cache dtype "auto")
    spec = load_config_file(GRANITE_4_TINY)
    assert spec.kind_counts() == {"state": 36, "full": 4}
    assert [i for i, layer in enumerate(spec.layers) if layer.kind == "full"] == [5, 15, 25, 35]
    assert spec.layers[5] == FullAttention(4, 128)
    state = 3 * (3072 + 2 * 128) * 2 + 48 * 64 * 128 * 2
    assert state == 806_400 and spec.layers[0].state_bytes() == state
    row = 2 * 4 * 128 * 2  # K and V, bf16
    assert per_token_bytes(spec.layers, BF16) == 4 * row == 8192
    assert request_bytes(spec.layers, 32_768, BF16) == 32_768 * 4 * row + 36 * state
    assert spec.max_context_tokens == 131_072
    # vLLM's hybrid alignment (platforms/interface.py _align_hybrid_block_size): the attention
    # block grows in steps of 16 tokens until a page of 2,048-byte rows holds one Mamba
    # state; the state page is padded to the same size
    block = 16 * -(-state // (16 * row))
    assert block == 400
    assert _pages(spec, 32_768) == {("full", block, block * row), ("mamba", block, block * row)}


def test_granite_4_tiny_preview_weights_by_hand():
    # vLLM granitemoehybrid.py, bf16: a tied 49,160 x 1,536 embedding and the final norm;
    # every layer two RMSNorms, a router 1,536 -> 62, 62 experts (input_linear 1,536 -> 2 x
    # 512, output_linear 512 -> 1,536) and a shared MLP of shared_intermediate_size 1,024;
    # a Mamba layer's MambaMixer2 (mamba_mixer2.py): in_proj 1,536 -> 2 x 3,072 + 2 x 128 +
    # 48, conv1d 3,328 x 4 with its bias, dt_bias / A / D per head, the gated norm over
    # 3,072, out_proj 3,072 -> 1,536 without bias; an attention layer q / o 1,536 x 1,536
    # and k / v 1,536 -> 4 x 128 without biases
    h, vocab = 1536, 49_160
    mamba = h * (2 * 3072 + 2 * 128 + 48) + 3328 * 4 + 3328 + 3 * 48 + 3072 + 3072 * h
    attention = 2 * h * h + 2 * h * 512
    ffn = h * 62 + 62 * 3 * h * 512 + 3 * h * 1024 + 2 * h
    hand = vocab * h + 36 * (mamba + ffn) + 4 * (attention + ffn) + h
    assert hand == 6_671_539_776
    assert _params(GRANITE_4_TINY) == hand
    assert round(hand / 1e9) == 7  # IBM's model card: a 7B-parameter hybrid MoE


# --- MiniMax-M1 (minimax_m1: MiniMax-Text-01's lightning-attention architecture) ----------

MINIMAX_M1 = FAMILIES / "MiniMaxAI--MiniMax-M1.json"


def test_minimax_m1_lightning_state_and_attention_by_hand():
    # vLLM 0.22 minimax_text_01.py (MiniMaxM1ForCausalLM runs MiniMaxText01ForCausalLM; vLLM
    # 0.23 dropped both): attn_type_list marks layer i softmax attention where it is 1 (7,
    # 15, ..., 79: 10 layers, 8 KV heads of head_dim 128) and lightning attention where it
    # is 0. A lightning layer keeps one state per request, mamba_utils.py
    # linear_attention_state_shape: heads x head_dim x head_dim = 64 x 128 x 128, in the
    # model dtype (linear_attention_state_dtype); this config names no torch_dtype, so bf16
    spec = load_config_file(MINIMAX_M1)
    assert spec.kind_counts() == {"state": 70, "full": 10}
    assert [i for i, layer in enumerate(spec.layers) if layer.kind == "full"] == \
        list(range(7, 80, 8))
    assert spec.layers[7] == FullAttention(8, 128)
    state = 64 * 128 * 128 * 2
    assert state == 2 * 2**20 and spec.layers[0].state_bytes() == state
    row = 2 * 8 * 128 * 2
    assert per_token_bytes(spec.layers, BF16) == 10 * row == 40_960
    assert request_bytes(spec.layers, 32_768, BF16) == 32_768 * 10 * row + 70 * state
    assert request_bytes(spec.layers, 32_768, BF16) == 1_488_977_920
    assert spec.max_context_tokens == 10_240_000


def test_minimax_m1_weights_by_hand():
    # vLLM 0.22 minimax_text_01.py, bf16: an untied 200,064 x 6,144 embedding and LM head,
    # the final norm; every layer two RMSNorms and MiniMaxText01MoE: a router 6,144 -> 32
    # and 32 experts as wide as intermediate_size (9,216), no shared MLP
    # (shared_intermediate_size 0); a lightning layer qkv_proj 6,144 -> 3 x 64 x 128,
    # output_gate 6,144 -> 8,192, out_proj 8,192 -> 6,144 and an RMSNorm over 8,192; a
    # softmax layer q / o 6,144 x 8,192 and k / v 6,144 -> 8 x 128, no biases
    h, vocab, expert = 6144, 200_064, 3 * 6144 * 9216
    lightning = h * 3 * 8192 + 2 * h * 8192 + 8192
    softmax = 2 * h * 8192 + 2 * h * 1024
    moe = h * 32 + 32 * expert + 2 * h
    hand = 2 * vocab * h + 70 * lightning + 10 * softmax + 80 * moe + h
    assert hand == 456_089_655_296
    assert _params(MINIMAX_M1) == hand
    assert round(hand / 1e9) == 456  # MiniMax's model card: 456 billion in total
    # and 45.9 billion activated per token: two of the 32 experts a token, the embedding and
    # the LM head left out
    active = hand - 80 * 30 * expert - 2 * vocab * h
    assert round(active / 1e8) == 459
