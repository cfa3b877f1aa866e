"""kvplan.sources.hfconfig: every real config.json parses into the spec its architecture has.

One test per file in tests/fixtures/hf-configs/, copied from the shared hf-configs collection
(origin in SOURCES.md). Expected numbers are written from the model card / paper / config and the
engines' formulas (docs/engine-kv-sizing.md), never copied from kvplan's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import paths
import pytest

from kvplan.core.dtypes import BF16, FP8_DS_MLA, parse_format
from kvplan.core.errors import KvplanError, SpecError
from kvplan.core.layers import (
    MLA,
    ChunkedLocal,
    CrossAttention,
    FullAttention,
    NoCache,
    RecurrentState,
    SlidingWindow,
)
from kvplan.core.sizing import per_token_bytes
from kvplan.core.spec import ModelSpec
from kvplan.sources.hfconfig import load_config_file, spec_from_config

FIXTURES = paths.FIXTURES / "hf-configs"


def load(stem: str) -> ModelSpec:
    return load_config_file(FIXTURES / f"{stem}.json")


def one(spec: ModelSpec, cls: type) -> object:
    """The single distinct layer of class `cls` (all such layers must be equal)."""
    found = {layer for layer in spec.layers if type(layer) is cls}
    assert len(found) == 1, found
    return found.pop()


def attn(layer: object, kv: int, head_dim: int, v_head_dim: int | None = None) -> None:
    assert (layer.num_kv_heads, layer.head_dim, layer.value_dim) == (
        kv, head_dim, v_head_dim or head_dim)


def from_dict(raw: dict, name: str = "synthetic") -> ModelSpec:
    return spec_from_config(raw, f"{name}.json", name=name)


# The 33 configs copied from the shared hf-configs collection (SOURCES.md); each has its own
# test below.
SHARED = (
    "CohereForAI--aya-23-8B",
    "HuggingFaceTB--SmolLM-1.7B-Instruct",
    "MiniMaxAI--MiniMax-M2.7",
    "Qwen--Qwen3-14B",
    "Qwen--Qwen3-235B-A22B",
    "THUDM--chatglm3-6b",
    "XiaomiMiMo--MiMo-V2-Flash",
    "allenai--OLMo-2-1124-7B",
    "codellama--CodeLlama-34b-Instruct-hf",
    "deepseek-ai--DeepSeek-V2-Lite",
    "deepseek-ai--DeepSeek-V3",
    "deepseek-ai--DeepSeek-V3.2",
    "google--gemma-2-27b",
    "google--gemma-2-9b",
    "google--gemma-3-1b-it",
    "google--gemma-4-26B-A4B",
    "llava-hf--llava-1.5-7b-hf",
    "meta-llama--Llama-2-70b-hf",
    "meta-llama--Llama-2-7b-hf",
    "meta-llama--Llama-4-Scout-17B-16E-Instruct",
    "meta-llama--Meta-Llama-3.1-405B",
    "microsoft--Phi-3.5-mini-instruct",
    "mistralai--Mistral-7B-v0.1",
    "mistralai--Mistral-Nemo-Instruct-2407",
    "mistralai--Mixtral-8x22B-v0.1",
    "mistralai--Mixtral-8x7B-v0.1",
    "moonshotai--Kimi-K2-Instruct",
    "nvidia--Llama-3_3-Nemotron-Super-49B-v1",
    "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "nvidia--Nemotron-H-56B-Base-8K",
    "openai--gpt-oss-20b",
    "openai-community--gpt2",
    "zai-org--GLM-5",
)


@pytest.mark.parametrize("stem", SHARED)
def test_every_shared_config_loads(stem):
    spec = load(stem)
    assert spec.num_layers > 0 and spec.source.sha256 is not None


# --- plain GQA / MHA ------------------------------------------------------------------


def test_llama_3_1_405b():
    spec = load("meta-llama--Meta-Llama-3.1-405B")
    assert spec.kind_counts() == {"full": 126}
    attn(one(spec, FullAttention), kv=8, head_dim=16384 // 128)
    assert spec.max_context_tokens == 131072 and spec.num_attention_heads == 128
    # 2 (K and V) x 8 KV heads x 128 x 2 bytes x 126 layers
    assert per_token_bytes(spec.layers, BF16) == 2 * 8 * 128 * 2 * 126


def test_llama_2_7b_mha():
    spec = load("meta-llama--Llama-2-7b-hf")
    assert spec.kind_counts() == {"full": 32}
    attn(one(spec, FullAttention), kv=32, head_dim=4096 // 32)
    assert spec.max_context_tokens == 4096 and spec.dtype == "fp16"


def test_llama_2_70b_gqa():
    spec = load("meta-llama--Llama-2-70b-hf")
    assert spec.kind_counts() == {"full": 80}
    attn(one(spec, FullAttention), kv=8, head_dim=8192 // 64)


def test_codellama_34b():
    spec = load("codellama--CodeLlama-34b-Instruct-hf")
    assert spec.kind_counts() == {"full": 48}
    attn(one(spec, FullAttention), kv=8, head_dim=8192 // 64)
    assert spec.max_context_tokens == 16384


def test_mixtral_8x7b_null_window_is_full():
    spec = load("mistralai--Mixtral-8x7B-v0.1")  # "sliding_window": null
    assert spec.kind_counts() == {"full": 32}
    attn(one(spec, FullAttention), kv=8, head_dim=4096 // 32)


def test_mixtral_8x22b():
    spec = load("mistralai--Mixtral-8x22B-v0.1")
    assert spec.kind_counts() == {"full": 56}
    attn(one(spec, FullAttention), kv=8, head_dim=6144 // 48)
    assert spec.max_context_tokens == 65536


def test_qwen3_235b_explicit_head_dim():
    spec = load("Qwen--Qwen3-235B-A22B")
    assert spec.kind_counts() == {"full": 94}
    attn(one(spec, FullAttention), kv=4, head_dim=128)  # not 4096 / 64 = 64


def test_qwen3_14b():
    spec = load("Qwen--Qwen3-14B")
    assert spec.kind_counts() == {"full": 40}
    attn(one(spec, FullAttention), kv=8, head_dim=128)


def test_mistral_nemo_explicit_head_dim_and_null_window():
    spec = load("mistralai--Mistral-Nemo-Instruct-2407")
    # sliding_window: null is not MistralConfig's default 4096: every layer is full
    assert spec.kind_counts() == {"full": 40}
    attn(one(spec, FullAttention), kv=8, head_dim=128)  # not 5120 / 32 = 160
    assert per_token_bytes(spec.layers, BF16) == 2 * 8 * 128 * 2 * 40


def test_minimax_m2_all_softmax_layers():
    spec = load("MiniMaxAI--MiniMax-M2.7")  # attn_type_list: 62 ones = softmax attention
    assert spec.kind_counts() == {"full": 62}
    attn(one(spec, FullAttention), kv=8, head_dim=128)  # not 3072 / 48 = 64
    assert spec.max_context_tokens == 204800


def test_aya_23_cohere():
    spec = load("CohereForAI--aya-23-8B")
    assert spec.kind_counts() == {"full": 32}
    attn(one(spec, FullAttention), kv=8, head_dim=4096 // 32)
    assert spec.max_context_tokens == 8192 and spec.dtype == "fp16"


def test_smollm_1_7b():
    spec = load("HuggingFaceTB--SmolLM-1.7B-Instruct")
    assert spec.kind_counts() == {"full": 24}
    attn(one(spec, FullAttention), kv=32, head_dim=2048 // 32)


def test_olmo2_trimmed_config():
    spec = load("allenai--OLMo-2-1124-7B")
    assert spec.kind_counts() == {"full": 32}
    attn(one(spec, FullAttention), kv=32, head_dim=4096 // 32)
    assert spec.max_context_tokens == 4096


def test_gpt2_legacy_names():
    spec = load("openai-community--gpt2")  # n_layer / n_head / n_embd / n_positions
    assert spec.kind_counts() == {"full": 12}
    attn(one(spec, FullAttention), kv=12, head_dim=768 // 12)
    assert spec.max_context_tokens == 1024 and spec.num_attention_heads == 12


def test_chatglm3_legacy_names():
    spec = load("THUDM--chatglm3-6b")  # num_layers, multi_query_group_num, kv_channels
    assert spec.kind_counts() == {"full": 28}
    attn(one(spec, FullAttention), kv=2, head_dim=128)
    assert spec.max_context_tokens == 8192 and spec.dtype == "fp16"


def test_phi_3_5_window_longer_than_context_is_full():
    spec = load("microsoft--Phi-3.5-mini-instruct")  # window 262,144 >= 131,072 positions
    assert spec.kind_counts() == {"full": 32}
    attn(one(spec, FullAttention), kv=32, head_dim=3072 // 32)


def test_llava_nested_text_config_llama_defaults():
    spec = load("llava-hf--llava-1.5-7b-hf")
    # text_config has only model_type llama (+ max_position_embeddings 4096): LlamaConfig
    # defaults give 32 layers, 32 heads, hidden 4096, and KV heads = heads
    assert spec.kind_counts() == {"full": 32}
    attn(one(spec, FullAttention), kv=32, head_dim=4096 // 32)
    assert spec.max_context_tokens == 4096 and spec.dtype == "fp16"


# --- sliding windows and chunks ---------------------------------------------------------


def test_mistral_7b_v01_every_layer_sliding():
    spec = load("mistralai--Mistral-7B-v0.1")
    assert spec.kind_counts() == {"sliding": 32}
    layer = one(spec, SlidingWindow)
    attn(layer, kv=8, head_dim=128)
    assert layer.window == 4096


def test_gemma2_9b_implicit_alternation():
    spec = load("google--gemma-2-9b")  # no layer_types: even layers local, odd global
    assert spec.kind_counts() == {"sliding": 21, "full": 21}
    assert [layer.kind for layer in spec.layers[:4]] == ["sliding", "full", "sliding", "full"]
    attn(one(spec, SlidingWindow), kv=8, head_dim=256)  # not 3584 / 16 = 224
    assert one(spec, SlidingWindow).window == 4096
    attn(one(spec, FullAttention), kv=8, head_dim=256)
    # docs/engine-kv-sizing.md §5: 2 x 8 x 256 x 2 = 8,192 B per token per layer
    assert per_token_bytes(spec.layers, BF16) == 8192 * 42


def test_gemma2_27b():
    spec = load("google--gemma-2-27b")
    assert spec.kind_counts() == {"sliding": 23, "full": 23}
    attn(one(spec, SlidingWindow), kv=16, head_dim=128)  # not 4608 / 32 = 144
    attn(one(spec, FullAttention), kv=16, head_dim=128)


def test_gemma3_1b_sliding_window_pattern():
    spec = load("google--gemma-3-1b-it")  # sliding_window_pattern 6: layer i full if (i+1)%6==0
    assert spec.kind_counts() == {"sliding": 22, "full": 4}
    assert [i for i, layer in enumerate(spec.layers) if layer.kind == "full"] == [5, 11, 17, 23]
    attn(one(spec, SlidingWindow), kv=1, head_dim=256)
    assert one(spec, SlidingWindow).window == 512


def test_gemma4_per_layer_type_head_dims():
    spec = load("google--gemma-4-26B-A4B")
    assert spec.kind_counts() == {"sliding": 25, "full": 5}
    sliding = one(spec, SlidingWindow)
    attn(sliding, kv=8, head_dim=256)
    assert sliding.window == 1024
    # full layers: global_head_dim 512, num_global_key_value_heads 2 (attention_k_eq_v);
    # K and V are both cached (k_eq_v shares the projection, not the cache)
    attn(one(spec, FullAttention), kv=2, head_dim=512)
    assert per_token_bytes(spec.layers, BF16) == 25 * 2 * 8 * 256 * 2 + 5 * 2 * 2 * 512 * 2
    assert spec.max_tp() == [2, 8]


def test_gpt_oss_20b_layer_types():
    spec = load("openai--gpt-oss-20b")
    assert spec.kind_counts() == {"sliding": 12, "full": 12}
    assert spec.layers[0].kind == "sliding" and spec.layers[1].kind == "full"
    attn(one(spec, SlidingWindow), kv=8, head_dim=64)  # not 2880 / 64 = 45
    assert one(spec, SlidingWindow).window == 128
    # docs/engine-kv-sizing.md §5: 2 x 8 x 64 x 2 = 2,048 B per token per layer
    assert per_token_bytes(spec.layers, BF16) == 2048 * 24


def test_mimo_v2_flash_hybrid_layer_pattern():
    spec = load("XiaomiMiMo--MiMo-V2-Flash")  # 0 = full, 1 = sliding; attention_chunk_size unused
    assert spec.kind_counts() == {"full": 9, "sliding": 39}
    assert [i for i, layer in enumerate(spec.layers) if layer.kind == "full"] == [
        0, 5, 11, 17, 23, 29, 35, 41, 47]
    attn(one(spec, FullAttention), kv=4, head_dim=192, v_head_dim=128)
    sliding = one(spec, SlidingWindow)
    attn(sliding, kv=8, head_dim=192, v_head_dim=128)  # swa_num_key_value_heads 8
    assert sliding.window == 128
    # K 192 + V 128 per head: full 4 x 320 x 2, sliding 8 x 320 x 2 bytes per token
    assert per_token_bytes(spec.layers, BF16) == 9 * 4 * (192 + 128) * 2 + 39 * 8 * 320 * 2


def test_llama4_scout_chunked_and_nope_layers():
    spec = load("meta-llama--Llama-4-Scout-17B-16E-Instruct")
    # no_rope_layers [] = default interval 4: every 4th layer global NoPE, the rest chunked
    assert spec.kind_counts() == {"chunked": 36, "full": 12}
    assert [layer.kind for layer in spec.layers[:4]] == ["chunked"] * 3 + ["full"]
    chunked = one(spec, ChunkedLocal)
    attn(chunked, kv=8, head_dim=128)
    assert chunked.chunk == 8192
    attn(one(spec, FullAttention), kv=8, head_dim=128)


# --- MLA --------------------------------------------------------------------------------


def test_deepseek_v3_mla_ignores_kv_heads():
    spec = load("deepseek-ai--DeepSeek-V3")  # num_key_value_heads 128 is not the cache
    assert spec.kind_counts() == {"mla": 61}
    layer = one(spec, MLA)
    assert (layer.kv_lora_rank, layer.qk_rope_head_dim, layer.index_head_dim) == (512, 64, None)
    # docs/engine-kv-sizing.md §1.1: 1,152 B/token/layer bf16, 70,272 B/token; fp8_ds_mla 40,016
    assert per_token_bytes(spec.layers, BF16) == 61 * (512 + 64) * 2 == 70272
    assert per_token_bytes(spec.layers, FP8_DS_MLA) == 61 * (512 + 4 * 4 + 64 * 2) == 40016


def test_deepseek_v2_lite():
    spec = load("deepseek-ai--DeepSeek-V2-Lite")
    assert spec.kind_counts() == {"mla": 27}
    layer = one(spec, MLA)
    assert (layer.kv_lora_rank, layer.qk_rope_head_dim, layer.index_head_dim) == (512, 64, None)
    assert spec.num_attention_heads == 16


def test_kimi_k2():
    spec = load("moonshotai--Kimi-K2-Instruct")  # model_type kimi_k2, DeepSeek-V3 shape
    assert spec.kind_counts() == {"mla": 61}
    layer = one(spec, MLA)
    assert (layer.kv_lora_rank, layer.qk_rope_head_dim, layer.index_head_dim) == (512, 64, None)
    assert spec.num_attention_heads == 64


def test_deepseek_v32_indexer_cache():
    spec = load("deepseek-ai--DeepSeek-V3.2")
    assert spec.kind_counts() == {"mla": 61}
    layer = one(spec, MLA)
    assert (layer.kv_lora_rank, layer.qk_rope_head_dim, layer.index_head_dim) == (512, 64, 128)
    # indexer: 128 fp8 values + one fp32 scale per 128 = 132 B/token/layer
    assert layer.index_token_bytes() == 128 + 4
    # docs/engine-kv-sizing.md §1.1: vLLM fp8_ds_mla 656 + 132 = 788 B; 48,068 B/token for 61
    assert per_token_bytes(spec.layers, FP8_DS_MLA) == 61 * (656 + 132) == 48068
    assert per_token_bytes(spec.layers, BF16) == 61 * ((512 + 64) * 2 + 132)


def test_glm5_mla_with_indexer_ignores_head_dim():
    spec = load("zai-org--GLM-5")  # "head_dim": 64 is the RoPE slice, not the cache
    assert spec.kind_counts() == {"mla": 78}
    layer = one(spec, MLA)
    assert (layer.kv_lora_rank, layer.qk_rope_head_dim, layer.index_head_dim) == (512, 64, 128)
    assert per_token_bytes(spec.layers, FP8_DS_MLA) == 78 * (656 + 132)


# --- hybrids and skipped layers -----------------------------------------------------------


def test_nemotron_super_49b_block_configs():
    spec = load("nvidia--Llama-3_3-Nemotron-Super-49B-v1")
    # 49 attention layers with n_heads_in_group 8 (64 / 8 = 8 KV heads), 31 no_op layers
    assert spec.kind_counts() == {"full": 49, "none": 31}
    attn(one(spec, FullAttention), kv=64 // 8, head_dim=8192 // 64)
    assert spec.num_layers == 80 and one(spec, NoCache).request_bytes(1000, BF16) == 0


def test_nemotron_h_56b_mamba2():
    spec = load("nvidia--Nemotron-H-56B-Base-8K")
    assert spec.kind_counts() == {"state": 54, "none": 54, "full": 10}
    attn(one(spec, FullAttention), kv=8, head_dim=128)  # attention_head_dim
    state = one(spec, RecurrentState)
    # Nemotron-H Mamba2: conv (k-1) x (heads*head_dim + 2*groups*state) bf16 + ssm fp32
    expected_state = (4 - 1) * (256 * 64 + 2 * 8 * 256) * 2 + 256 * 64 * 256 * 4
    assert state.state_bytes() == expected_state
    assert state.variant == "mamba2"
    assert [t.dtype_bytes for t in state.tensors] == [2, 4]  # conv bf16, ssm fp32
    assert spec.max_context_tokens == 8192


def test_nemotron_3_nano_mamba2_moe():
    spec = load("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    # 52 chars: 23 M (Mamba2), 23 E (MoE, no cache), 6 * (attention)
    assert spec.kind_counts() == {"state": 23, "none": 23, "full": 6}
    attn(one(spec, FullAttention), kv=2, head_dim=128)
    # conv bf16 + ssm in mamba_ssm_cache_dtype float32
    expected_state = (4 - 1) * (64 * 64 + 2 * 8 * 128) * 2 + 64 * 64 * 128 * 4
    assert one(spec, RecurrentState).state_bytes() == expected_state


# --- synthetic: the rules, one at a time -----------------------------------------------------

BASE = {"num_hidden_layers": 4, "num_attention_heads": 32, "hidden_size": 4096}


def test_explicit_head_dim_wins():
    attn(one(from_dict({**BASE, "head_dim": 64}), FullAttention), kv=32, head_dim=64)
    attn(one(from_dict(BASE), FullAttention), kv=32, head_dim=4096 // 32)


def test_null_head_dim_is_derived():
    attn(one(from_dict({**BASE, "head_dim": None}), FullAttention), kv=32, head_dim=128)


def test_missing_kv_heads_is_mha():
    spec = from_dict(BASE)
    assert one(spec, FullAttention).num_kv_heads == 32
    assert one(from_dict({**BASE, "num_key_value_heads": None}), FullAttention).num_kv_heads == 32


def test_use_sliding_window_false_means_no_window():
    spec = from_dict({**BASE, "sliding_window": 4096, "use_sliding_window": False})
    assert spec.kind_counts() == {"full": 4}
    spec = from_dict({**BASE, "sliding_window": 4096, "max_position_embeddings": 32768})
    assert spec.kind_counts() == {"sliding": 4}


def test_qwen2_max_window_layers():
    spec = from_dict({**BASE, "model_type": "qwen2", "sliding_window": 4096,
                      "use_sliding_window": True, "max_window_layers": 2})
    assert [layer.kind for layer in spec.layers] == ["full", "full", "sliding", "sliding"]
    # Qwen2Config: use_sliding_window defaults to False
    assert from_dict({**BASE, "model_type": "qwen2", "sliding_window": 4096}).kind_counts() == {
        "full": 4}


def test_unknown_layer_type_names_the_field():
    with pytest.raises(SpecError) as err:
        from_dict({**BASE, "layer_types": ["full_attention"] * 3 + ["hyper_attention"]})
    assert err.value.field == "layer_types"
    assert "hyper_attention" in str(err.value)


def test_layer_types_length_must_match():
    with pytest.raises(SpecError) as err:
        from_dict({**BASE, "layer_types": ["full_attention"] * 3})
    assert err.value.field == "layer_types"


def test_invalid_json_names_the_line(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{\n  "num_hidden_layers": 4,\n  "num_attention_heads": ,\n}\n')
    with pytest.raises(SpecError) as err:
        load_config_file(path)
    assert "line 3" in str(err.value)


def test_missing_field_is_named():
    with pytest.raises(SpecError) as err:
        from_dict({"num_attention_heads": 32, "hidden_size": 4096})
    assert err.value.field == "num_hidden_layers"
    with pytest.raises(SpecError) as err:
        from_dict({"num_hidden_layers": 2, "hidden_size": 4096})
    assert err.value.field == "num_attention_heads"


def test_null_required_number_is_named():
    with pytest.raises(SpecError) as err:
        from_dict({**BASE, "num_attention_heads": None})
    assert err.value.field == "num_attention_heads"
    with pytest.raises(SpecError) as err:
        from_dict({**BASE, "hidden_size": None})
    assert err.value.field == "hidden_size"


def test_heads_not_dividing_hidden_without_head_dim():
    with pytest.raises(SpecError) as err:
        from_dict({"num_hidden_layers": 2, "num_attention_heads": 48, "hidden_size": 4000})
    assert err.value.field == "hidden_size"


def test_kv_heads_must_divide_heads():
    with pytest.raises(SpecError) as err:
        from_dict({**BASE, "num_key_value_heads": 5})
    assert err.value.field == "num_key_value_heads"


def test_infinity_where_a_number_is_expected(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512,'
                    ' "max_position_embeddings": Infinity}')
    with pytest.raises(SpecError) as err:
        load_config_file(path)
    assert err.value.field == "max_position_embeddings"


def test_conflicting_aliases_are_an_error():
    with pytest.raises(SpecError) as err:
        from_dict({**BASE, "n_layer": 5})
    assert err.value.field == "n_layer"


def test_falcon_multi_query_and_new_decoder_architecture():
    falcon7b = {"model_type": "falcon", "num_hidden_layers": 32, "num_attention_heads": 71,
                "hidden_size": 4544}  # FalconConfig: multi_query defaults to true
    attn(one(from_dict(falcon7b), FullAttention), kv=1, head_dim=4544 // 71)
    falcon40b = {"model_type": "falcon", "num_hidden_layers": 60, "num_attention_heads": 128,
                 "hidden_size": 8192, "multi_query": True, "new_decoder_architecture": True,
                 "num_kv_heads": 8}
    attn(one(from_dict(falcon40b), FullAttention), kv=8, head_dim=8192 // 128)


def test_gpt_bigcode_multi_query():
    raw = {"model_type": "gpt_bigcode", "n_layer": 40, "n_head": 48, "n_embd": 6144,
           "multi_query": True}  # StarCoder
    attn(one(from_dict(raw), FullAttention), kv=1, head_dim=6144 // 48)


def test_gemma3_nested_text_config_defaults():
    # Gemma-3-4B's Hub config: text_config omits heads, KV heads and head_dim
    raw = {"model_type": "gemma3", "text_config": {
        "model_type": "gemma3_text", "hidden_size": 2560, "num_hidden_layers": 34,
        "sliding_window": 1024}}
    spec = from_dict(raw)
    assert spec.kind_counts() == {"sliding": 29, "full": 5}  # pattern 6 by default
    attn(one(spec, SlidingWindow), kv=4, head_dim=256)  # Gemma3TextConfig defaults
    assert spec.num_attention_heads == 8


def test_gemma4_k_eq_v_false_keeps_kv_heads():
    raw = {"model_type": "gemma4_text", "num_hidden_layers": 6, "num_attention_heads": 16,
           "num_key_value_heads": 8, "num_global_key_value_heads": 2, "head_dim": 256,
           "global_head_dim": 512, "sliding_window": 1024, "attention_k_eq_v": False}
    spec = from_dict(raw)  # no layer_types: 5 sliding then 1 full
    assert [layer.kind for layer in spec.layers] == ["sliding"] * 5 + ["full"]
    attn(one(spec, FullAttention), kv=8, head_dim=512)


def test_kv_shared_layers_cache_nothing():
    raw = {"model_type": "gemma3n_text", "num_hidden_layers": 10, "num_attention_heads": 8,
           "num_key_value_heads": 2, "head_dim": 256, "sliding_window": 512,
           "num_kv_shared_layers": 5}
    spec = from_dict(raw)  # Gemma 3n: layer i full if (i+1) % 5 == 0; last 5 reuse KV
    assert [layer.kind for layer in spec.layers] == (
        ["sliding"] * 4 + ["full"] + ["none"] * 5)


def test_qwen3_next_gated_delta_net_state():
    raw = {"model_type": "qwen3_next", "num_hidden_layers": 48, "num_attention_heads": 16,
           "num_key_value_heads": 2, "head_dim": 256, "hidden_size": 2048,
           "full_attention_interval": 4, "linear_num_key_heads": 16,
           "linear_num_value_heads": 32, "linear_key_head_dim": 128,
           "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
           "torch_dtype": "bfloat16"}
    spec = from_dict(raw)
    assert spec.kind_counts() == {"state": 36, "full": 12}
    attn(one(spec, FullAttention), kv=2, head_dim=256)
    state = one(spec, RecurrentState)
    # docs/engine-kv-sizing.md §1.1: conv (3, 2*16*128 + 32*128) + ssm (32, 128, 128), bf16
    assert state.state_bytes() == 3 * 8192 * 2 + 32 * 128 * 128 * 2 == 1_097_728
    assert state.state_bytes(tp=4) == 3 * (8192 // 4) * 2 + (32 // 4) * 128 * 128 * 2 == 274_432


def test_qwen3_next_layer_types_linear_attention():
    raw = {"model_type": "qwen3_next", "num_hidden_layers": 4, "num_attention_heads": 16,
           "num_key_value_heads": 2, "head_dim": 256,
           "layer_types": ["linear_attention"] * 3 + ["full_attention"],
           "mamba_ssm_dtype": "float32"}  # Qwen3.5 names the recurrent state dtype
    state = one(from_dict(raw), RecurrentState)  # linear_* sizes from Qwen3NextConfig
    assert [t.dtype_bytes for t in state.tensors] == [2, 4]
    assert state.state_bytes() == 3 * 8192 * 2 + 32 * 128 * 128 * 4


def test_jamba_mamba1_state():
    raw = {"model_type": "jamba", "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "hidden_size": 4096, "attn_layer_period": 8,
           "attn_layer_offset": 4, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2}
    spec = from_dict(raw)
    assert spec.kind_counts() == {"state": 28, "full": 4}
    assert spec.layers[4].kind == "full" and spec.layers[12].kind == "full"
    # docs/engine-kv-sizing.md §5: Jamba v0.1 Mamba1 state 311,296 B in bf16
    expected = (4 - 1) * (2 * 4096) * 2 + (2 * 4096) * 16 * 2
    assert one(spec, RecurrentState).state_bytes() == expected == 311_296


def test_minimax_lightning_attention_state():
    raw = {"model_type": "minimax", "num_hidden_layers": 8, "num_attention_heads": 64,
           "num_key_value_heads": 8, "hidden_size": 6144, "head_dim": 128,
           "attn_type_list": [0, 0, 0, 0, 0, 0, 0, 1]}
    spec = from_dict(raw)
    assert spec.kind_counts() == {"state": 7, "full": 1}
    # vLLM linear_attention_state_shape: (heads, head_dim, head_dim) in the model dtype
    assert one(spec, RecurrentState).state_bytes() == 64 * 128 * 128 * 2


def test_mamba2_pure():
    raw = {"model_type": "mamba2", "num_hidden_layers": 64, "num_heads": 128, "head_dim": 64,
           "hidden_size": 4096, "expand": 2, "state_size": 128, "n_groups": 8,
           "conv_kernel": 4, "torch_dtype": "bfloat16"}
    spec = from_dict(raw)
    assert spec.kind_counts() == {"state": 64} and spec.num_attention_heads is None
    # docs/engine-kv-sizing.md §5 (Codestral 7B): 61,440 + 2,097,152 B in bf16
    expected = (4 - 1) * (2 * 4096 + 2 * 8 * 128) * 2 + 128 * 64 * 128 * 2
    assert one(spec, RecurrentState).state_bytes() == expected == 61_440 + 2_097_152


def test_nemotron_h_layers_block_type_without_layer_count():
    raw = {"model_type": "nemotron_h", "num_attention_heads": 32, "num_key_value_heads": 2,
           "head_dim": 128, "mamba_num_heads": 64, "mamba_head_dim": 64,
           "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
           "layers_block_type": ["mamba", "moe", "attention", "mlp"]}
    assert from_dict(raw).kind_counts() == {"state": 1, "none": 2, "full": 1}


def test_mllama_cross_attention_from_vision_config():
    raw = {"model_type": "mllama", "vision_config": {"image_size": 560, "patch_size": 14,
                                                     "max_num_tiles": 4},
           "text_config": {"model_type": "mllama_text_model", "num_hidden_layers": 40}}
    spec = from_dict(raw)
    assert spec.kind_counts() == {"full": 32, "cross": 8}
    cross = one(spec, CrossAttention)
    attn(cross, kv=8, head_dim=4096 // 32)
    # docs/engine-kv-sizing.md §5: 4 tiles x ((560/14)^2 + 1) = 6,404 vision tokens per image
    assert cross.encoder_tokens == 4 * ((560 // 14) ** 2 + 1) == 6404


def test_glm_shared_indexer_layers_cache_no_index_keys():
    raw = {"model_type": "glm_moe_dsa", "num_hidden_layers": 4, "num_attention_heads": 64,
           "kv_lora_rank": 512, "qk_rope_head_dim": 64, "index_topk": 2048,
           "indexer_types": ["full", "shared", "shared", "full"]}
    spec = from_dict(raw)
    assert [layer.index_head_dim for layer in spec.layers] == [128, None, None, 128]


def test_mla_with_sliding_layer_is_an_error():
    raw = {**BASE, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "sliding_window": 128,
           "layer_types": ["sliding_attention"] + ["full_attention"] * 3}
    with pytest.raises(SpecError) as err:
        from_dict(raw)
    assert err.value.field == "layer_types"


def test_recurrent_layers_without_sizes_are_an_error():
    raw = {**BASE, "layer_types": ["linear_attention", "full_attention"] * 2}
    with pytest.raises(SpecError) as err:
        from_dict(raw)
    assert err.value.field == "layer_types"


def test_state_fields_without_a_schedule_are_an_error():
    with pytest.raises(SpecError) as err:
        from_dict({**BASE, "mamba_d_state": 16})
    assert err.value.field == "mamba_d_state"


@pytest.mark.parametrize("raw, field", [
    # FalconH1Config's defaults size the rest (tests/sources/test_class_defaults.py), but an
    # explicit null inner size with no mamba_expand leaves the Mamba2 width unknown
    ({**BASE, "model_type": "falcon_h1", "mamba_d_ssm": None, "mamba_expand": None},
     "mamba_d_ssm"),
    ({**BASE, "is_encoder_decoder": True}, "is_encoder_decoder"),
    ({**BASE, "hybrid_override_pattern": "M*-X"}, "hybrid_override_pattern"),
    ({**BASE, "text_config": [1, 2]}, "text_config"),
])
def test_architectures_not_understood_are_errors(raw, field):
    with pytest.raises(SpecError) as err:
        from_dict(raw)
    assert err.value.field == field


def test_errors_are_kvplan_errors_with_exit_code_2():
    with pytest.raises(KvplanError) as err:
        from_dict({"num_hidden_layers": "many"})
    assert err.value.exit_code == 2


def test_a_directory_with_config_json(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(BASE))
    spec = load_config_file(tmp_path)
    assert spec.kind_counts() == {"full": 4} and spec.name == tmp_path.name.lower()
    assert spec.source.sha256 is not None


def test_a_bare_relative_config_json_is_named_by_its_folder(tmp_path, monkeypatch):
    # `kvplan plan config.json` from the model's folder: Path("config.json").parent is ".",
    # whose name is empty; the model is the folder the file sits in
    folder = tmp_path / "My-Model-7B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(BASE))
    monkeypatch.chdir(folder)
    assert load_config_file(Path("config.json")).name == "my-model-7b"


def test_kv_dtype_auto_follows_config_dtype():
    spec = load("meta-llama--Llama-2-7b-hf")  # torch_dtype float16
    assert parse_format("auto", spec.dtype).name == "fp16"


def test_use_mla_false_is_plain_attention():
    raw = {**BASE, "model_type": "deepseek_v2", "kv_lora_rank": 512, "qk_rope_head_dim": 64,
           "use_mla": False, "num_key_value_heads": 32}  # DeepSeek-VL2-Tiny's language model
    attn(one(from_dict(raw), FullAttention), kv=32, head_dim=4096 // 32)


def test_qwen3_5_nested_text_config_with_ssm_dtype():
    raw = {"model_type": "qwen3_5", "text_config": {
        "model_type": "qwen3_5_text", "num_hidden_layers": 64, "full_attention_interval": 4,
        "num_attention_heads": 24, "num_key_value_heads": 4, "head_dim": 256,
        "hidden_size": 5120, "linear_num_key_heads": 16, "linear_num_value_heads": 48,
        "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4, "mamba_ssm_dtype": "float32"}}
    spec = from_dict(raw)
    assert spec.kind_counts() == {"state": 48, "full": 16}
    # conv (3, 2*16*128 + 48*128) bf16 + recurrent (48, 128, 128) fp32
    expected = 3 * (2 * 16 * 128 + 48 * 128) * 2 + 48 * 128 * 128 * 4
    assert one(spec, RecurrentState).state_bytes() == expected


def test_exaone4_string_pattern_and_cohere2_default_pattern():
    raw = {**BASE, "model_type": "exaone4", "sliding_window": 4096,
           "sliding_window_pattern": "LLLG", "num_hidden_layers": 8}
    assert [layer.kind for layer in from_dict(raw).layers] == (["sliding"] * 3 + ["full"]) * 2
    raw = {**BASE, "model_type": "cohere2", "sliding_window": 4096}  # Cohere2Config: 4
    assert [layer.kind for layer in from_dict(raw).layers] == ["sliding"] * 3 + ["full"]


def test_gpt_neo_attention_types():
    raw = {"model_type": "gpt_neo", "num_layers": 4, "num_heads": 16, "hidden_size": 2048,
           "attention_types": [[["global", "local"], 2]], "window_size": 256}
    spec = from_dict(raw)
    assert [layer.kind for layer in spec.layers] == ["full", "sliding"] * 2
    assert one(spec, SlidingWindow).window == 256


def test_lfm2_short_convolutions():
    raw = {"model_type": "lfm2", "num_hidden_layers": 4, "num_attention_heads": 32,
           "num_key_value_heads": 8, "hidden_size": 2048, "conv_L_cache": 3,
           "full_attn_idxs": [2]}
    spec = from_dict(raw)
    assert [layer.kind for layer in spec.layers] == ["state", "state", "full", "state"]
    # vLLM short_conv_state_shape: (conv_L_cache - 1, hidden) in the model dtype
    assert one(spec, RecurrentState).state_bytes() == (3 - 1) * 2048 * 2


def test_bamba_attention_indices_and_auto_head_dim():
    raw = {"model_type": "bamba", "num_hidden_layers": 4, "num_attention_heads": 32,
           "num_key_value_heads": 8, "hidden_size": 4096, "attn_layer_indices": [1],
           "mamba_n_heads": 128, "mamba_d_head": "auto", "mamba_n_groups": 1,
           "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2}
    spec = from_dict(raw)
    assert [layer.kind for layer in spec.layers] == ["state", "full", "state", "state"]
    # inner = 2 * 4096 = 8192 = 128 heads x 64 ("auto"); conv (3, 8192 + 2*1*128), ssm bf16
    expected = 3 * (8192 + 2 * 1 * 128) * 2 + 128 * 64 * 128 * 2
    assert one(spec, RecurrentState).state_bytes() == expected


def test_cohere2_sliding_layers_see_one_token_more_than_the_config_says():
    # vLLM 0.33.0 commandr.py: "cohere swa layer sees [pos - sliding_window, pos], i.e.
    # sliding_window + 1" tokens, and passes config.sliding_window + 1 (cohere2_moe.py too)
    for model_type in ("cohere2", "cohere2_moe"):
        raw = {**BASE, "model_type": model_type, "sliding_window": 4096,
               "layer_types": ["sliding_attention"] * 3 + ["full_attention"]}
        assert one(from_dict(raw), SlidingWindow).window == 4097
    raw = {**BASE, "model_type": "exaone4", "sliding_window": 4096,
           "layer_types": ["sliding_attention"] * 3 + ["full_attention"]}
    assert one(from_dict(raw), SlidingWindow).window == 4096  # exaone4.py: config's own


def test_a_vision_config_whose_model_type_is_not_a_string_names_no_tower():
    # found by tests/contracts/test_fuzz_hostile.py: a list in vision_config.model_type
    # reached a set lookup (TypeError, a traceback) instead of naming no tower
    path = FIXTURES / "google--gemma-4-26B-A4B.json"
    raw = json.loads(path.read_text())
    raw["vision_config"]["model_type"] = ["qwen3_vl"]
    spec = spec_from_config(raw, "c.json", name="m")
    assert spec.vision is None
    assert any("vision_config" in t for t in spec.uncounted_towers)
