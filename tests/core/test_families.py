"""Architectures beyond one K/V row per token: each sized exactly, with the expected bytes
derived by hand here (per token, per request, the state, and where an engine is modelled its
page per layer kind), or refused by name.

Real configs are fixtures (tests/fixtures/hf-configs/SOURCES.md); the families no stored
config.json was found for are built here from their published values, said so in each test.
"""

from __future__ import annotations

import json

import pytest
from paths import FIXTURES
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.dtypes import BF16, FP8_E4M3
from kvplan.core.errors import BadInputError, SpecError
from kvplan.core.layers import (
    MLA,
    CompressedAttention,
    CrossAttention,
    FullAttention,
    NoCache,
    RecurrentState,
    SlidingWindow,
)
from kvplan.core.sizing import per_token_bytes, request_bytes
from kvplan.sources.hfconfig import load_config_file, spec_from_config

CONFIGS = FIXTURES / "hf-configs" / "families"


def load(stem: str):
    return load_config_file(CONFIGS / f"{stem}.json")


def from_dict(raw: dict):
    return spec_from_config(raw, "config.json", name="m")


# --- DeepSeek-V4: compressed attention ----------------------------------------------------

V4_WINDOW_ONLY, V4_C4, V4_C128 = 2, 21, 20  # compress_ratios[:43] = [0, 0] + [4, 128] * 20 + [4]


def test_deepseek_v4_layers_follow_compress_ratios():
    spec = load("deepseek-ai--DeepSeek-V4-Flash")
    assert spec.num_layers == 43
    ratios = [layer.compress_ratio for layer in spec.layers]
    assert ratios == [0, 0] + [4, 128] * 20 + [4]
    # only ratio-4 layers carry the indexer (vLLM: "Only C4A ... has indexer")
    assert {layer.index_head_dim for layer in spec.layers if layer.compress_ratio == 4} == {128}
    assert {layer.index_head_dim for layer in spec.layers if layer.compress_ratio != 4} == {None}
    assert all(isinstance(layer, CompressedAttention) and layer.window == 128
               for layer in spec.layers)


def _v4_request(tokens: int, entry: int) -> int:
    window = min(tokens, 128) * entry * 43
    c4 = (tokens // 4) * (entry + 128 + 4) * V4_C4  # entry + indexer key (fp8 + fp32 scale)
    c128 = (tokens // 128) * entry * V4_C128
    # compressor state, fp32 kv + score: ratio 4 overlaps (2 x 4 rows of 2 x head_dim),
    # ratio 128 does not (128 rows of head_dim); the ratio-4 indexer's too (index_head_dim)
    state = V4_C4 * (2 * 8 * 1024 * 4 + 2 * 8 * 256 * 4) + V4_C128 * (2 * 128 * 512 * 4)
    return window + c4 + c128 + state


@pytest.mark.parametrize("tokens", [1, 100, 128, 131_072, 1_000_003])
def test_deepseek_v4_request_bytes_bf16(tokens):
    spec = load("deepseek-ai--DeepSeek-V4-Flash")
    assert request_bytes(spec.layers, tokens, BF16) == _v4_request(tokens, 512 * 2)


def test_deepseek_v4_fp8_entry_is_the_584_byte_record():
    # vLLM MLAAttentionSpec: "448B NoPE + 128B RoPE + 8B fp8 scale = 584B per token"
    spec = load("deepseek-ai--DeepSeek-V4-Flash")
    assert request_bytes(spec.layers, 131_072, FP8_E4M3) == _v4_request(131_072, 448 + 128 + 8)


def test_deepseek_v4_is_far_above_a_sliding_window_reading():
    # issue 12: read as 43 sliding layers of one 512-wide head it printed ~11 MB at 128k
    spec = load("deepseek-ai--DeepSeek-V4-Flash")
    sliding = 43 * 128 * 2 * 512 * 2
    assert request_bytes(spec.layers, 131_072, BF16) > 64 * sliding


def test_deepseek_v4_per_token_is_window_plus_compressed_share():
    spec = load("deepseek-ai--DeepSeek-V4-Flash")
    entry = 1024
    expected = (43 * entry + V4_C4 * -(-(entry + 132) // 4) + V4_C128 * -(-entry // 128))
    assert per_token_bytes(spec.layers, BF16) == expected


def test_deepseek_v4_other_formats_are_refused():
    spec = load("deepseek-ai--DeepSeek-V4-Flash")
    from kvplan.core.dtypes import parse_format

    with pytest.raises(BadInputError):
        request_bytes(spec.layers, 1024, parse_format("int4"))


def test_deepseek_v4_engine_pools_are_refused_by_name():
    runner = CliRunner()
    path = str(CONFIGS / "deepseek-ai--DeepSeek-V4-Flash.json")
    result = runner.invoke(app, ["plan", path, "--gpu", "h200", "--count", "8",
                                 "--engine", "sglang"])
    assert result.exit_code == 2
    assert "compress" in result.output and "kvplan size" in result.output


@pytest.mark.parametrize(("engine", "named"), [
    # SGLang pool_configurator.py DSV4PoolConfigurator, swa_full_tokens_ratio 0.1 for V4
    ("sglang", ("SGLang's", "DSV4PoolConfigurator", "swa_full_tokens_ratio 0.1")),
    # no engine source read for these: the refusal says so instead of naming pools
    ("trtllm", ("no model of how TensorRT-LLM caches it",)),
])
def test_deepseek_v4_refusal_names_what_the_engine_allocates(engine, named):
    from kvplan.engines.base import Deployment
    from kvplan.planning.plan import capacity

    spec = load("deepseek-ai--DeepSeek-V4-Flash")
    with pytest.raises(BadInputError) as err:
        capacity(Deployment(spec, engine=engine, gpu_memory_bytes=141 * 10**9, tp=8))
    message = str(err.value)
    assert message.startswith(f"{spec.name} has DeepSeek-V4 compressed attention")
    for words in named:
        assert words in message, words


def test_a_compress_ratios_config_under_another_name_is_not_read_as_sliding():
    raw = json.loads((CONFIGS / "deepseek-ai--DeepSeek-V4-Flash.json").read_text())
    raw["model_type"] = "deepseek_ref"  # SGLang's copies of the V4 checkpoints
    spec = from_dict(raw)
    assert {layer.kind for layer in spec.layers} == {"compressed"}


# --- Kimi-Linear: MLA + KDA ---------------------------------------------------------------

def test_kimi_linear_layers_and_state():
    spec = load("moonshotai--Kimi-K3")
    assert spec.kind_counts() == {"state": 69, "mla": 24}
    # linear_attn_config lists layers 1-based: layer 4 (index 3) is the first MLA one
    assert isinstance(spec.layers[3], MLA) and isinstance(spec.layers[0], RecurrentState)
    state = spec.layers[0]
    assert isinstance(state, RecurrentState)
    # q, k, v short convolutions: (kernel 4 - 1) x 96 heads x 128 in bf16, and the
    # (96, 128, 128) recurrent state in fp32 (vLLM kda_state_shape / kda_state_dtype)
    conv = 3 * (3 * 96 * 128) * 2
    recurrent = 96 * 128 * 128 * 4
    assert state.state_bytes() == conv + recurrent
    assert state.state_bytes(tp=8) == conv // 8 + recurrent // 8
    latent = (512 + 64) * 2
    assert per_token_bytes(spec.layers, BF16) == 24 * latent
    assert request_bytes(spec.layers, 32_768, BF16) == (24 * latent * 32_768
                                                       + 69 * (conv + recurrent))


def test_kimi_linear_layers_must_cover_the_model():
    raw = json.loads((CONFIGS / "moonshotai--Kimi-K3.json").read_text())
    raw["text_config"]["linear_attn_config"]["kda_layers"] = [1, 2]
    with pytest.raises(SpecError) as err:
        from_dict(raw)
    assert "kda_layers" in str(err.value)


def test_kimi_linear_vllm_pages_align_attention_to_the_state():
    from kvplan.engines.vllm import VllmConfig, layer_page_specs

    spec = load("moonshotai--Kimi-K3")
    config = VllmConfig(max_model_len=32_768, kv_cache_dtype="auto", version=(0, 11, 0))
    pages = layer_page_specs(spec, spec.layers, config)
    state = 3 * (3 * 96 * 128) * 2 + 96 * 128 * 128 * 4
    latent = (512 + 64) * 2
    # hybrid attention + Mamba (docs/engine-kv-sizing.md 1.7): the attention block grows in
    # steps of 16 until one page holds a whole state; the state page is padded to it
    block = 16 * -(-state // (16 * latent))
    mla = {p.page_bytes for p in pages if p is not None and p.kind == "mla"}
    mamba = {(p.page_bytes, p.real_page_bytes) for p in pages if p is not None
             and p.kind == "mamba"}
    assert mla == {block * latent}
    assert mamba == {(block * latent, state)}


@pytest.mark.parametrize(("gpu", "cc", "checkpoint_pages"), [
    # FlashKDA prefill (SM 9.x/10.x/12.x, head dim 128, bf16, bounded gate): one
    # prefill-checkpoint page per KDA group (models/kimi_k3/nvidia/kda.py get_kv_cache_spec)
    ("H200 hopper sm9.0", "9.0", 1),
    ("B200 blackwell sm10.0", "10.0", 1),
    ("A100 ampere sm8.0", "8.0", 0),  # Triton prefill: no checkpoint page
])
def test_kimi_k3_vllm_blocks_and_concurrency(gpu, cc, checkpoint_pages):
    """vLLM 0.33 on Kimi-K3, fp8 KV, 4,096 tokens, 21 GiB, written from its source: a KDA
    state is 3 x (3 x 96 x 128) bf16 conv + 96 x 128 x 128 fp32; the MLA block grows in steps
    of 128 (_align_hybrid_block_size) until a page of 576-byte fp8 latents holds it. 24 MLA
    and 69 KDA layers make groups of 24 layers: 1 MLA group and 3 KDA groups sharing 24
    tensors, so a block costs 24 pages. In align mode a request holds cdiv(len, block) MLA
    blocks and, per KDA group, 2 + checkpoint pages (MambaSpec.max_memory_usage_bytes).
    vLLM's planner (oracle, H200/B200): 143 blocks, 58,572 tokens, 14.3x."""
    from kvplan.engines import vllm

    spec = load("moonshotai--Kimi-K3")
    config = vllm.VllmConfig(max_model_len=4096, version=(0, 33, 0), kv_cache_dtype="fp8",
                             gpu_name=gpu, compute_capability=cc)
    prof = vllm.profile(spec, config, 21 * 2**30)
    state = 3 * (3 * 96 * 128) * 2 + 96 * 128 * 128 * 4
    block = 128 * -(-state // (128 * 576))
    assert block == 11_392
    page = block * 576
    blocks = 21 * 2**30 // (24 * page)
    per_request = 1 + 3 * (2 + checkpoint_pages)
    assert prof.num_blocks == blocks == 143
    assert prof.blocks_per_request == per_request
    assert prof.max_concurrency == blocks / per_request
    assert prof.kv_cache_tokens == int(blocks / per_request * 4096)
    if checkpoint_pages:
        assert prof.kv_cache_tokens == 58_572


def test_kimi_k3_flashkda_needs_a_bounded_gate():
    # is_flashkda_supported: no gate_lower_bound -> the Triton prefill, no checkpoint page
    from kvplan.engines import vllm

    raw = json.loads((CONFIGS / "moonshotai--Kimi-K3.json").read_text())
    config = vllm.VllmConfig(max_model_len=4096, version=(0, 33, 0),
                             gpu_name="H200 hopper sm9.0", compute_capability="9.0")
    assert vllm.kda_prefill_backend(from_dict(raw), config) == "flashkda"
    del raw["text_config"]["linear_attn_config"]["gate_lower_bound"]
    assert vllm.kda_prefill_backend(from_dict(raw), config) == "triton"


# --- Falcon-H1: attention and Mamba2 side by side in every layer -------------------------

# Built from the published Falcon-H1-0.5B shape (transformers FalconH1Config docs table:
# 36 layers, hidden 1024, 8 heads / 2 KV heads, 24 Mamba heads of 64, d_state 128); no stored
# Falcon-H1 config.json was found to copy.
FALCON_H1 = {
    "architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1",
    "num_hidden_layers": 36, "hidden_size": 1024, "num_attention_heads": 8,
    "num_key_value_heads": 2, "head_dim": 64, "mamba_d_ssm": 1536, "mamba_n_heads": 24,
    "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4,
    "mamba_expand": 2, "max_position_embeddings": 16384, "torch_dtype": "bfloat16",
}


def test_falcon_h1_every_layer_holds_attention_and_a_state():
    spec = from_dict(FALCON_H1)
    assert spec.kind_counts() == {"full": 36, "state": 36}
    assert isinstance(spec.layers[0], FullAttention) and isinstance(spec.layers[1],
                                                                    RecurrentState)
    # K and V: 2 KV heads x 64 in bf16
    assert per_token_bytes(spec.layers, BF16) == 36 * 2 * 2 * 64 * 2
    # Mamba2 (vLLM mamba2_state_shape, inner = mamba_d_ssm): conv (4 - 1) x (1536 + 2 x 1 x
    # 128), ssm 24 x 64 x 128, both bf16 (mamba_ssm_cache_dtype auto)
    state = 3 * (1536 + 2 * 128) * 2 + 24 * 64 * 128 * 2
    assert spec.layers[1].state_bytes() == state
    assert request_bytes(spec.layers, 4096, BF16) == 36 * (4096 * 2 * 2 * 64 * 2 + state)


def test_falcon_h1_inner_size_is_mamba_d_ssm_not_expand_times_hidden():
    spec = from_dict({**FALCON_H1, "mamba_d_ssm": 768, "mamba_d_head": 32})
    conv = spec.layers[1].tensors[0]
    assert conv.shape == (3, 768 + 2 * 128)  # expand x hidden would be 2048


def test_falcon_h1_without_mamba_d_ssm_takes_the_transformers_default():
    # transformers FalconH1Config fills in mamba_d_ssm = 1024 when the key is absent, and
    # vLLM falcon_h1.py (get_mamba_state_shape_from_config) reads that value; only an
    # explicit null means mamba_expand x hidden_size (2 x 1024 = 2048 here)
    raw = {k: v for k, v in FALCON_H1.items() if k != "mamba_d_ssm"}
    spec = from_dict({**raw, "mamba_n_heads": 16})
    conv, ssm = spec.layers[1].tensors
    assert conv.shape == (3, 1024 + 2 * 128) and ssm.shape == (16, 64, 128)
    spec = from_dict({**raw, "mamba_d_ssm": None, "mamba_n_heads": 32})
    assert spec.layers[1].tensors[0].shape == (3, 2048 + 2 * 128)


def test_mamba2_heads_that_do_not_fill_the_inner_size_are_refused():
    # FalconH1Config / BambaConfig / GraniteMoeHybridConfig validate_architecture: heads x
    # head size must equal the inner size. A Falcon-H1 config without mamba_d_ssm whose
    # 24 heads of 64 make 1,536 channels cannot load (the default inner size is 1,024).
    raw = {k: v for k, v in FALCON_H1.items() if k != "mamba_d_ssm"}
    with pytest.raises(SpecError) as err:
        from_dict(raw)
    assert "mamba_d_head" in str(err.value) and "mamba_d_ssm" in str(err.value)
    assert "1536" in str(err.value) and "1024" in str(err.value)
    granite = {"architectures": ["GraniteMoeHybridForCausalLM"],
               "model_type": "granitemoehybrid", "num_hidden_layers": 4, "hidden_size": 1536,
               "num_attention_heads": 12, "num_key_value_heads": 4,
               "layer_types": ["mamba", "attention", "mamba", "mamba"],
               "mamba_n_heads": 48, "mamba_d_head": 64, "mamba_d_state": 128,
               "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2}
    # 48 x 64 = 3,072 = 2 x 1,536: read
    assert from_dict(granite).layers[0].tensors[1].shape == (48, 64, 128)
    with pytest.raises(SpecError) as err:
        from_dict({**granite, "mamba_d_head": 32})
    assert "mamba_d_head" in str(err.value) and "3072" in str(err.value)


# --- Qwen omni thinkers: the text model under thinker_config.text_config -----------------

# Qwen2.5-Omni-7B's and Qwen3-Omni-30B-A3B's thinker text shapes (the published models: 28
# layers of 28 heads / 4 KV heads, hidden 3,584; 48 layers of 32 heads / 4 KV heads of 128,
# 128 experts of 768, top 8); no stored config.json of either was found to copy.
QWEN2_5_OMNI = {
    "architectures": ["Qwen2_5OmniModel"], "model_type": "qwen2_5_omni",
    "thinker_config": {"model_type": "qwen2_5_omni_thinker", "text_config": {
        "model_type": "qwen2_5_omni_text", "hidden_size": 3584, "intermediate_size": 18944,
        "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28,
        "vocab_size": 152064, "max_position_embeddings": 32768, "torch_dtype": "bfloat16",
        "tie_word_embeddings": False}}}
QWEN3_OMNI = {
    "architectures": ["Qwen3OmniMoeForConditionalGeneration"], "model_type": "qwen3_omni_moe",
    "thinker_config": {"model_type": "qwen3_omni_moe_thinker", "dtype": "bfloat16",
                       "text_config": {
        "model_type": "qwen3_omni_moe_text", "hidden_size": 2048, "head_dim": 128,
        "num_attention_heads": 32, "num_key_value_heads": 4, "num_hidden_layers": 48,
        "intermediate_size": 768, "moe_intermediate_size": 768, "num_experts": 128,
        "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "shared_expert_intermediate_size": 0, "use_qk_norm": True, "vocab_size": 152064,
        "max_position_embeddings": 65536, "tie_word_embeddings": False}}}


def _text_params(spec) -> int:
    from kvplan.core.weights import inventory

    return sum(t.num_params for t in inventory(spec).tensors
               if t.place in ("embed", "layer", "final", "head"))


def _tensor_names(spec) -> set[str]:
    from kvplan.core.weights import inventory

    return {t.name for t in inventory(spec).tensors}


@pytest.mark.parametrize("nested_type", [True, False])
def test_qwen2_5_omni_thinker_is_qwen2_with_qkv_biases(nested_type):
    # vLLM qwen2_5_omni_thinker.py builds the language model as a Qwen2ForCausalLM: q / k / v
    # with biases, o_proj without (no config field says so); the same when the text config
    # names no model_type of its own
    raw = json.loads(json.dumps(QWEN2_5_OMNI))
    if not nested_type:
        del raw["thinker_config"]["text_config"]["model_type"]
    spec = from_dict(raw)
    assert per_token_bytes(spec.layers, BF16) == 28 * 2 * 4 * 128 * 2
    h, kv, inter, vocab = 3584, 512, 18944, 152064
    layer = 2 * h * h + 2 * kv * h + h + 2 * kv + 3 * h * inter + 2 * h
    assert _text_params(spec) == 2 * vocab * h + h + 28 * layer
    names = _tensor_names(spec)
    assert any(n.endswith("layers.0.self_attn.k_proj.bias") for n in names)
    assert not any(n.endswith("o_proj.bias") for n in names)


def test_qwen3_omni_thinker_is_qwen3_moe_with_qk_norms():
    # vLLM qwen3_omni_moe_thinker.py Qwen3MoeLLMForCausalLM -> qwen3_moe.py Qwen3MoeAttention:
    # q_norm and k_norm (RMSNorm over head_dim 128) in every layer; 128 experts of 768 and a
    # router, no shared expert; untied embedding and LM head
    spec = from_dict(QWEN3_OMNI)
    assert per_token_bytes(spec.layers, BF16) == 48 * 2 * 4 * 128 * 2 == 98_304
    h, vocab = 2048, 152064
    attention = 2 * h * 32 * 128 + 2 * h * 4 * 128 + 2 * 128
    moe = 128 * 3 * 768 * h + 128 * h
    assert _text_params(spec) == 2 * vocab * h + h + 48 * (attention + moe + 2 * h) \
        == 30_532_646_912


# --- Apertus: an ungated xIELU MLP and per-head q/k norms --------------------------------

# Apertus-8B's published shape (swiss-ai's model card and tech report: 32 layers, hidden
# 4,096, 32 heads / 8 KV heads, MLP 21,504, vocabulary 131,072, untied); no stored
# config.json of it was found to copy.
APERTUS_8B = {
    "architectures": ["ApertusForCausalLM"], "model_type": "apertus", "dtype": "bfloat16",
    "hidden_size": 4096, "intermediate_size": 21504, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 65536,
    "hidden_act": "xielu", "qk_norm": True, "post_norm": False, "attention_bias": False,
    "mlp_bias": False, "tie_word_embeddings": False, "vocab_size": 131072,
}


def test_apertus_8b_weights_by_hand_and_measured():
    # vLLM apertus.py: ApertusMLP up_proj 21,504 x 4,096 -> XIELU (two one-element
    # parameters, activation.py) -> down_proj, no gate_proj; ApertusAttention q / k / v / o
    # without biases and q_norm / k_norm over head_dim 128; two RMSNorms a layer, the final
    # norm, an untied embedding and LM head
    spec = from_dict(APERTUS_8B)
    assert per_token_bytes(spec.layers, BF16) == 32 * 2 * 8 * 128 * 2 == 131_072
    h, vocab = 4096, 131072
    layer = 2 * h * h + 2 * 1024 * h + 2 * 128 + 2 * 21504 * h + 2 + 2 * h
    hand = 2 * vocab * h + h + 32 * layer
    # thedatadudech/apertus-transparency-guide's complete_real_analysis_report.md (its docs
    # folder, commit b65eda7c845197aa9c98eb3f6b2159e3ccb0dbaa) prints
    # swiss-ai/Apertus-8B-Instruct-2509 loaded on an A40: "Parameters: 8,053,338,176"
    assert hand == 8_053_338_176
    assert _text_params(spec) == hand
    names = _tensor_names(spec)
    assert not any(".gate_proj." in n for n in names)
    assert any(n.endswith("layers.0.mlp.act_fn.alpha_p") for n in names)


# --- Step3: MFA attention (one KV head, a low-rank query) and experts by index -----------

# Step3's language model as its model card gives it (stepfun-ai/Step3 README.md, commit
# 094d0d3f114e455fd7322f5a3c577ed7becbf064: 61 layers of which 5 dense, hidden 7,168, MFA
# with a 2,048 low-rank query, 64 query heads of 256, 48 experts top 3 + 1 shared); the
# widths the card leaves out are the config's (dense MLP 18,432, experts and shared expert
# 5,120, vocabulary 128,815). No stored config.json of Step3 was found to copy.
STEP3 = {
    "architectures": ["Step3VLForConditionalGeneration"], "model_type": "step3_vl",
    "text_config": {
        "architectures": ["Step3TextForCausalLM"], "model_type": "step3_text",
        "hidden_size": 7168, "intermediate_size": 18432, "num_attention_heads": 64,
        "num_attention_groups": 1, "num_hidden_layers": 61, "max_seq_len": 65536,
        "vocab_size": 128815, "moe_intermediate_size": 5120, "moe_num_experts": 48,
        "moe_top_k": 3, "head_dim": 256, "share_expert_dim": 5120, "share_q_dim": 2048,
        "moe_layers_enum": ",".join(str(i) for i in range(4, 60)),
        "torch_dtype": "bfloat16"}}


def test_step3_mfa_cache_by_hand():
    # vLLM step3_text.py Step3TextAttention: num_kv_heads must be 1 (num_attention_groups),
    # head_dim 256: one K and one V row a layer
    spec = from_dict(STEP3)
    assert spec.kind_counts() == {"full": 61}
    assert per_token_bytes(spec.layers, BF16) == 61 * 2 * 256 * 2 == 62_464


def test_step3_weights_match_the_model_card():
    # vLLM step3_text.py: qkv_proj 7,168 -> 2,048 + 2 x 256 (the low-rank query, k and v),
    # inter_norm (2,048), wq 2,048 -> 64 x 256, o_proj back; layer i is MoE when
    # moe_layers_enum lists it (4..59: 56 layers; 0-3 and 60 keep a dense 18,432 MLP): a
    # router, 48 experts of 5,120 and share_expert (5,120); an untied LM head
    spec = from_dict(STEP3)
    h, vocab = 7168, 128815
    attention = h * (2048 + 2 * 256) + 2048 + 2048 * 64 * 256 + 64 * 256 * h
    dense = 3 * h * 18432
    moe = 48 * h + 48 * 3 * 5120 * h + 3 * 5120 * h
    hand = 2 * vocab * h + h + 61 * (attention + 2 * h) + 5 * dense + 56 * moe
    assert _text_params(spec) == hand == 316_294_538_240  # the card: 316B (LLM)
    assert sum(spec.is_moe_layer(i) if spec.blocks is None else spec.blocks[i].ffn == "moe"
               for i in range(61)) == 56


# --- OLMo-Hybrid: gated delta-nets and OLMo's whole-width q/k norms ----------------------

def test_olmo_hybrid_attention_layers_keep_q_and_k_norms():
    # vLLM olmo_hybrid.py OlmoHybridAttention: q_norm = RMSNorm(hidden_size), k_norm =
    # RMSNorm(num_kv_heads x head_dim) on every full-attention layer; none on the gated
    # delta-net layers (olmo_gdn_linear_attn.py)
    spec = from_dict({
        "architectures": ["OlmoHybridForCausalLM"], "model_type": "olmo_hybrid",
        "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 4,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 100352,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
        "max_position_embeddings": 65536, "tie_word_embeddings": False})
    from kvplan.core.weights import inventory

    norms = {(t.layer, t.name.rsplit(".", 2)[-2], t.shape) for t in inventory(spec).tensors
             if t.name.endswith(("q_norm.weight", "k_norm.weight"))}
    assert norms == {(3, "q_norm", (4096,)), (3, "k_norm", (8 * 128,))}


# --- Step-3.5: one layer type's own attention shape (attention_other_setting) ------------

def test_step3p5_attention_other_setting_sizes_its_layer_type():
    # vLLM step3p5.py Step3p5DecoderLayer: a layer whose layer_types entry is the setting's
    # attention_type takes its num_attention_groups KV heads of head_dim; the others the
    # config's num_attention_groups. Shapes chosen to tell the two apart.
    types = ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(8)]
    raw = {"architectures": ["Step3p5ForCausalLM"], "model_type": "step3p5",
           "hidden_size": 4096, "num_hidden_layers": 8, "num_attention_heads": 64,
           "num_attention_groups": 8, "head_dim": 128, "att_impl_type": "GQA",
           "attention_other_setting": {"attention_type": "sliding_attention",
                                       "num_attention_heads": 96, "num_attention_groups": 4,
                                       "head_dim": 64},
           "layer_types": types, "sliding_window": 512, "vocab_size": 1000,
           "max_position_embeddings": 65536}
    spec = from_dict(raw)
    assert spec.layers[0] == FullAttention(8, 128)
    assert spec.layers[1] == SlidingWindow(4, 64, window=512)
    assert per_token_bytes(spec.layers, BF16) == 2 * 2 * 8 * 128 * 2 + 6 * 2 * 4 * 64 * 2
    with pytest.raises(SpecError) as err:
        from_dict({**raw, "attention_other_setting": {"attention_type": "chunked"}})
    assert "attention_other_setting" in str(err.value)


# --- Whisper: self-attention + cross-attention to the encoder's frames --------------------

# The published whisper-large-v3 decoder shape (d_model 1280, 32 decoder layers of 20
# heads, 1,500 encoder positions, 448 target positions).
WHISPER = {
    "architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper",
    "is_encoder_decoder": True, "d_model": 1280, "decoder_layers": 32,
    "decoder_attention_heads": 20, "encoder_layers": 32, "encoder_attention_heads": 20,
    "max_source_positions": 1500, "max_target_positions": 448, "num_mel_bins": 128,
    "torch_dtype": "float16",
}


def test_whisper_caches_its_text_and_the_encoder_frames():
    spec = from_dict(WHISPER)
    assert spec.kind_counts() == {"full": 32, "cross": 32}
    assert spec.max_context_tokens == 448 and spec.dtype == "fp16"
    cross = spec.layers[1]
    assert isinstance(cross, CrossAttention) and cross.encoder_tokens == 1500
    row = 2 * 20 * 64 * 2  # K and V of 20 heads x 64, fp16
    assert per_token_bytes(spec.layers, BF16) == 32 * row
    assert request_bytes(spec.layers, 448, BF16) == 32 * (448 * row + 1500 * row)


def test_other_encoder_decoders_are_refused_naming_why():
    with pytest.raises(SpecError) as err:
        from_dict({"model_type": "t5", "is_encoder_decoder": True, "d_model": 512,
                   "num_layers": 6, "num_heads": 8})
    assert err.value.field == "is_encoder_decoder"
    assert "'t5'" in err.value.message and "encoder" in err.value.message


# --- Gemma 3n: the last num_kv_shared_layers reuse earlier K/V ---------------------------

# The published Gemma-3n-E4B text shape: 35 layers (4 sliding of 512 then 1 full), 2 KV heads
# x 256, the last 15 sharing K/V (vLLM gemma3n.py kv_sharing_target_layer_name).
GEMMA3N = {
    "architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n",
    "text_config": {"model_type": "gemma3n_text", "num_hidden_layers": 35,
                    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
                    "hidden_size": 2048, "sliding_window": 512, "num_kv_shared_layers": 15,
                    "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7,
                    "max_position_embeddings": 32768, "altup_num_inputs": 4,
                    "laurel_rank": 64},
}


def test_gemma3n_shared_layers_allocate_nothing():
    spec = from_dict(GEMMA3N)
    assert spec.layers[20:] == (NoCache(),) * 15
    own = spec.layers[:20]
    assert sum(isinstance(x, SlidingWindow) for x in own) == 16
    assert sum(isinstance(x, FullAttention) for x in own) == 4
    row = 2 * 2 * 256 * 2
    assert request_bytes(spec.layers, 8192, BF16) == 16 * 512 * row + 4 * 8192 * row


# --- Granite-4.0-H, MiniMax lightning, pure Mamba-2 ---------------------------------------

def test_granite_4_h_layer_types_mix_mamba2_and_attention():
    # the published granite-4.0-h-small shape: 40 layers, attention at 4 of them
    kinds = ["mamba"] * 40
    for i in (5, 15, 25, 35):
        kinds[i] = "attention"
    spec = from_dict({
        "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
        "num_hidden_layers": 40, "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 8, "layer_types": kinds, "mamba_n_heads": 128,
        "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4,
        "mamba_expand": 2, "max_position_embeddings": 131072})
    assert spec.kind_counts() == {"state": 36, "full": 4}
    state = 3 * (2 * 4096 + 2 * 128) * 2 + 128 * 64 * 128 * 2
    assert request_bytes(spec.layers, 1000, BF16) == 4 * 1000 * 2 * 8 * 128 * 2 + 36 * state


def test_minimax_lightning_layers_keep_one_state_each():
    # MiniMax-Text-01's pattern: softmax attention every 8th layer, lightning elsewhere
    flags = [1 if (i + 1) % 8 == 0 else 0 for i in range(80)]
    spec = from_dict({
        "architectures": ["MiniMaxText01ForCausalLM"], "model_type": "minimax",
        "num_hidden_layers": 80, "hidden_size": 6144, "num_attention_heads": 64,
        "num_key_value_heads": 8, "head_dim": 128, "attn_type_list": flags,
        "max_position_embeddings": 1_048_576})
    assert spec.kind_counts() == {"state": 70, "full": 10}
    state = 64 * 128 * 128 * 2  # (heads, head_dim, head_dim), model dtype
    assert request_bytes(spec.layers, 100, BF16) == 10 * 100 * 2 * 8 * 128 * 2 + 70 * state


def test_pure_mamba2_has_no_kv_only_state():
    spec = from_dict({"architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2",
                      "num_hidden_layers": 64, "hidden_size": 4096, "expand": 2,
                      "num_heads": 128, "head_dim": 64, "state_size": 128, "n_groups": 8,
                      "conv_kernel": 4})
    assert per_token_bytes(spec.layers, BF16) == 0
    state = 3 * (2 * 4096 + 2 * 8 * 128) * 2 + 128 * 64 * 128 * 2
    assert request_bytes(spec.layers, 1_000_000, BF16) == 64 * state


# --- refused by name ----------------------------------------------------------------------

@pytest.mark.parametrize("raw, field, word", [
    ({"model_type": "rwkv", "num_hidden_layers": 24, "hidden_size": 2048,
      "attention_hidden_size": 2048}, "model_type", "RWKV"),
    ({"model_type": "zamba", "num_hidden_layers": 76, "num_attention_heads": 16,
      "hidden_size": 3712}, "model_type", "shared attention"),
    ({"model_type": "phi4flash", "num_hidden_layers": 32, "num_attention_heads": 40,
      "hidden_size": 2560}, "model_type", "YOCO"),
])
def test_families_kvplan_does_not_model_are_refused_by_name(raw, field, word):
    with pytest.raises(SpecError) as err:
        from_dict(raw)
    assert err.value.field == field and word in err.value.message


def test_minimax_m3_sparse_attention_is_refused():
    with pytest.raises(SpecError) as err:
        load("MiniMaxAI--MiniMax-M3")
    assert "minimax_m3" in err.value.message and "sparse" in err.value.message


# --- Nemotron-H variants: layers_block_type, an MTP layer outside the model's cache ---------

def test_nemotron_3_ultra_layers_block_type():
    spec = load("nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16")
    assert spec.kind_counts() == {"state": 48, "none": 48, "full": 12}
    # Mamba2 (inner = 256 heads x 64): conv 3 x (16384 + 2 x 8 groups x 128) in bf16, SSM
    # (256, 64, 128) in fp32 (mamba_ssm_cache_dtype float32)
    state = 3 * (256 * 64 + 2 * 8 * 128) * 2 + 256 * 64 * 128 * 4
    row = 2 * 2 * 128 * 2  # K and V of 2 KV heads x 128, bf16
    assert per_token_bytes(spec.layers, BF16) == 12 * row
    assert request_bytes(spec.layers, 65_536, BF16) == 12 * row * 65_536 + 48 * state


# --- Zamba2: hybrid layers add a shared attention block with per-position K/V ---------------

def test_zamba2_hybrid_layers_hold_attention_and_a_state():
    # Zamba2-2.7B's published shape (hidden 2560, 32 heads, Mamba2 of 80 heads x 64, d_state
    # 64, 1 group); the mamba/hybrid schedule here is illustrative: 6 layers, 2 hybrid
    types = ["mamba", "mamba", "hybrid", "mamba", "mamba", "hybrid"]
    spec = from_dict({
        "architectures": ["Zamba2ForCausalLM"], "model_type": "zamba2",
        "num_hidden_layers": 6, "hidden_size": 2560, "num_attention_heads": 32,
        "layers_block_type": types, "n_mamba_heads": 80, "mamba_headdim": 64,
        "mamba_d_state": 64, "mamba_ngroups": 1, "mamba_d_conv": 4, "mamba_expand": 2,
        "num_mem_blocks": 2, "use_shared_attention_adapter": False, "adapter_rank": 128,
        "max_position_embeddings": 4096})
    assert spec.kind_counts() == {"state": 6, "full": 2}
    # attention over the hidden state concatenated with the embeddings: head_dim 2 x 2560 / 32
    row = 2 * 32 * 160 * 2
    state = 3 * (2 * 2560 + 2 * 64) * 2 + 80 * 64 * 64 * 2
    assert per_token_bytes(spec.layers, BF16) == 2 * row
    assert request_bytes(spec.layers, 2048, BF16) == 2 * 2048 * row + 6 * state


# --- DeepSeek-V4 in vLLM 0.33 (models/deepseek_v4, v1/core/kv_cache_planning.py) ------------

def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _v4_vllm_expected(max_model_len: int, budget_bytes: int, batched_tokens: int):
    """vLLM 0.33's plan of DeepSeek-V4-Flash on Hopper, written from its source: fp8_ds_mla
    rows of 448 fp8 NoPE + 128 bf16 RoPE + 8 scale bytes, every page rounded up to 576 B.
    Caches: a 64-token sliding window (128) on all 43 layers; on the 21 ratio-4 and 20
    ratio-128 layers a compressed MLA cache of 256-token blocks (256 / ratio entries) and an
    fp32 compressor state (kv + score rows of 2 * coff * 512, coff 2 for ratio 4; blocks of 4
    and 8 tokens, windows 8 and 128); on ratio-4 layers 132-byte indexer keys and the
    indexer's own state (rows 2 * 2 * 128). `_get_packed_kv_cache_groups` makes 5 groups
    sharing one block id: the 43 window caches split 22 + 21, the 62 compressed and indexer
    caches, the 42 ratio-4 states, the 20 ratio-128 states; a block is the widest group."""
    row = 448 + 128 + 8
    swa = _round_up(64 * row, 576)
    c4, c128 = _round_up(64 * row, 576), _round_up(2 * row, 576)
    index = _round_up(64 * (128 + 4), 576)
    c4_state = _round_up(4 * 2 * 2 * 512 * 4, 576)
    index_state = _round_up(4 * 2 * 2 * 128 * 4, 576)
    c128_state = _round_up(8 * 2 * 1 * 512 * 4, 576)
    pages = [22 * swa, 21 * swa, 21 * c4 + 21 * index + 20 * c128,
             21 * c4_state + 21 * index_state, 20 * c128_state]
    block_bytes = max(pages)
    t = 2 * batched_tokens  # async scheduling: two batches in flight
    n = max_model_len
    # a window keeps min(window - 1 + in flight, max_model_len) tokens and one block more
    per_request = (2 * (_cdiv(min(128 - 1 + t, n), 64) + 1) + _cdiv(n, 256)
                   + _cdiv(min(8 - 1 + t, n), 4) + 1 + _cdiv(min(128 - 1 + t, n), 8) + 1)
    blocks = budget_bytes // block_bytes
    return blocks, per_request, block_bytes


@pytest.mark.parametrize(("max_model_len", "budget_bytes"), [
    (1_048_576, 60 * 2**30),  # vLLM's planner: 64,280 blocks, 6,253,708 tokens, 5.964x
    (131_072, 40 * 2**30),  # vLLM's planner: 42,853 blocks, 780,765 tokens, 5.957x
    (10_001, 21 * 2**30),
])
def test_deepseek_v4_vllm_blocks_and_concurrency(max_model_len, budget_bytes):
    from kvplan.engines import vllm

    spec = load("deepseek-ai--DeepSeek-V4-Flash")
    config = vllm.VllmConfig(max_model_len=max_model_len, version=(0, 33, 0),
                             kv_cache_dtype="auto", max_num_batched_tokens=8192,
                             gpu_name="H200 hopper sm9.0", compute_capability="9.0")
    prof = vllm.profile(spec, config, budget_bytes)
    blocks, per_request, block_bytes = _v4_vllm_expected(max_model_len, budget_bytes, 8192)
    assert prof.bytes_per_block == block_bytes == 1_002_240
    assert prof.num_kv_cache_groups == 5
    assert (prof.num_blocks, prof.blocks_per_request) == (blocks, per_request)
    assert prof.max_concurrency == blocks / per_request
    assert prof.kv_cache_tokens == int(blocks / per_request * max_model_len)
    if max_model_len == 1_048_576:
        assert (blocks, prof.kv_cache_tokens) == (64_280, 6_253_708)


@pytest.mark.parametrize(("kv", "gpu", "words"), [
    ("bfloat16", "H200 hopper sm9.0", "only supports fp8"),  # _resolve_dsv4_kv_cache_dtype
    ("auto", "A100 SXM 80GB ampere sm8.0", "SM 8.0"),  # FlashMLA sparse: SM 9.x/10.x
])
def test_deepseek_v4_vllm_refuses_what_it_does_not_serve(kv, gpu, words):
    from kvplan.engines import vllm

    spec = load("deepseek-ai--DeepSeek-V4-Flash")
    config = vllm.VllmConfig(max_model_len=4096, version=(0, 33, 0), kv_cache_dtype=kv,
                             max_num_batched_tokens=8192, gpu_name=gpu,
                             compute_capability=gpu.rsplit("sm", 1)[1])
    with pytest.raises(BadInputError, match=words):
        vllm.profile(spec, config, 21 * 2**30)
