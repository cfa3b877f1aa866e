"""The embedded model library: every file loads and every model's KV size matches a hand formula.

Expected values are written as the formula from the model's published shapes (config.json,
model card or paper, named in each comment), never copied from kvplan's output.
Attention layers cost 2 (K and V) x KV heads x head_dim x 2 bytes (bf16) per token; MLA layers
cache one latent of kv_lora_rank + qk_rope_head_dim elements (no factor 2); recurrent-state layers
cost a fixed state per request; a sliding window or chunk caps the tokens a layer holds.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import ROOT
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.dtypes import BF16, FP16
from kvplan.core.sizing import batch_bytes, per_token_bytes, request_bytes
from kvplan.sources.library import library_files, load_library, load_named

GIB = 2**30
LIBRARY_DIR = ROOT / "model_configs"
NAME_RE = re.compile(r"^[a-z0-9]+(?:[.-][a-z0-9]+)*$")


def _kv(layers: int, kv_heads: int, head_dim: int, tokens: int = 1) -> int:
    """bf16 K+V bytes of `layers` attention layers holding `tokens` tokens."""
    return 2 * layers * kv_heads * head_dim * 2 * tokens  # K and V, 2 bytes each


def _mla(layers: int, tokens: int = 1) -> int:
    """bf16 MLA latent bytes: kv_lora_rank 512 + qk_rope_head_dim 64, one latent, no factor 2."""
    return layers * (512 + 64) * 2 * tokens


def _full(layers: int, kv_heads: int, head_dim: int, tokens: int) -> tuple[int, int, int]:
    """An EXPECTED row of a model whose every layer holds every token: (bytes per token,
    tokens, one request of that many tokens)."""
    return _kv(layers, kv_heads, head_dim), tokens, _kv(layers, kv_heads, head_dim, tokens)


def _full_mla(layers: int, tokens: int) -> tuple[int, int, int]:
    """_full for MLA layers (_mla)."""
    return _mla(layers), tokens, _mla(layers, tokens)


def _mamba2(heads: int, head_dim: int, state: int, groups: int, kernel: int = 4) -> int:
    """One Mamba-2 layer's state: conv (kernel-1, heads*head_dim + 2*groups*state) in bf16,
    ssm (heads, head_dim, state) in fp32 (vLLM keeps NemotronH's ssm state in fp32)."""
    return (kernel - 1) * (heads * head_dim + 2 * groups * state) * 2 + heads * head_dim * state * 4


# name: (bf16 bytes per token, tokens, bf16 bytes of one request of that many tokens)
EXPECTED: dict[str, tuple[int, int, int]] = {
    # Llama 2 (config.json; 70B: GQA with 8 KV heads)
    "llama-2-7b": _full(32, 32, 128, 4096),
    "llama-2-13b": _full(40, 40, 128, 4096),
    "llama-2-70b": _full(80, 8, 128, 4096),
    # Llama 3 / 3.1 / 3.2 (config.json; head_dim 4096/32, 8192/64, 16384/128 = 128; 3.2-1B: 64)
    "llama-3-8b": _full(32, 8, 128, 8192),
    "llama-3-70b": _full(80, 8, 128, 8192),
    "llama-3.1-8b": _full(32, 8, 128, 8192),
    "llama-3.1-70b": _full(80, 8, 128, 32768),
    "llama-3.1-405b": _full(126, 8, 128, 8192),
    "llama-3.2-1b": _full(16, 8, 64, 131072),
    "llama-3.2-3b": _full(28, 8, 128, 131072),
    # Llama 3.2 90B Vision (config.json): 80 self-attention layers grow; the 20 cross-attention
    # layers hold the image tokens once: 4 tiles x ((560/14)^2 + 1) = 6,404 tokens.
    "llama-3.2-90b-vision": (_kv(80, 8, 128), 8192,
                             _kv(80, 8, 128, 8192) + _kv(20, 8, 128, 4 * ((560 // 14) ** 2 + 1))),
    # Llama 4 (config.json): 36 chunked layers (chunk 8192) + 12 global layers, 8 KV heads x 128
    "llama-4-scout": (_kv(48, 8, 128), 131072, _kv(12, 8, 128, 131072) + _kv(36, 8, 128, 8192)),
    "llama-4-maverick": (_kv(48, 8, 128), 131072,
                         _kv(12, 8, 128, 131072) + _kv(36, 8, 128, 8192)),
    "codellama-34b": _full(48, 8, 128, 16384),
    "llama-3.3-nemotron-super-49b": (  # block_configs: 49 attention layers, 31 no-op
        _kv(49, 8, 128), 8192, _kv(49, 8, 128, 8192)),
    "smollm-1.7b": _full(24, 32, 64, 2048),
    "llava-1.5-7b": _full(32, 32, 128, 4096),  # LlamaConfig defaults
    # Mistral (config.json): v0.1 slides a 4096 window on every layer; v0.3 and NeMo do not
    "mistral-7b-v0.1": (_kv(32, 8, 128), 32768, _kv(32, 8, 128, 4096)),
    "mistral-7b-v0.3": _full(32, 8, 128, 32768),
    "mistral-nemo": _full(40, 8, 128, 131072),  # head_dim 128, not 160
    "mixtral-8x7b": _full(32, 8, 128, 32768),
    "mixtral-8x22b": _full(56, 8, 128, 65536),
    # Qwen (config.json; Qwen2.5-72B from the Qwen2.5 report, Table 1)
    "qwen2.5-7b": _full(28, 4, 128, 32768),
    "qwen2.5-72b": _full(80, 8, 128, 32768),
    "qwen3-8b": _full(36, 8, 128, 40960),
    "qwen3-14b": _full(40, 8, 128, 40960),
    "qwen3-32b": _full(64, 8, 128, 40960),  # head_dim 128, not 5120/64
    "qwen3-30b-a3b": _full(48, 4, 128, 40960),
    "qwen3-235b-a22b": _full(94, 4, 128, 40960),
    # Qwen3-Next (model card): 12 gated-attention layers (2 KV heads x 256) grow; 36 gated
    # delta-net layers keep conv (3, 2*16*128 + 32*128) + recurrent (32, 128, 128), bf16
    "qwen3-next-80b-a3b": (_kv(12, 2, 256), 262144,
                           _kv(12, 2, 256, 262144)
                           + 36 * (3 * (2 * 16 * 128 + 32 * 128) * 2 + 32 * 128 * 128 * 2)),
    # Gemma 2 (config.json): even layers slide a 4096 window, odd layers are global
    "gemma-2-9b": (_kv(42, 8, 256), 8192, _kv(21, 8, 256, 8192) + _kv(21, 8, 256, 4096)),
    "gemma-2-27b": (_kv(46, 16, 128), 8192, _kv(23, 16, 128, 8192) + _kv(23, 16, 128, 4096)),
    # Gemma 3: sliding unless (i+1) % 6 == 0 (1B: window 512, 4B/27B: window 1024)
    "gemma-3-1b": (_kv(26, 1, 256), 32768, _kv(4, 1, 256, 32768) + _kv(22, 1, 256, 512)),
    "gemma-3-4b": (_kv(34, 4, 256), 131072, _kv(5, 4, 256, 131072) + _kv(29, 4, 256, 1024)),
    "gemma-3-27b": (_kv(62, 16, 128), 131072,
                    _kv(10, 16, 128, 131072) + _kv(52, 16, 128, 1024)),
    # MLA (config.json / DeepSeek-V2 paper): latent 512 + 64 per token per layer
    "deepseek-v2": _full_mla(60, 131072),
    "deepseek-v2-lite": _full_mla(27, 32768),
    "deepseek-v3": _full_mla(61, 8192),
    "deepseek-r1": _full_mla(61, 131072),
    "kimi-k2": _full_mla(61, 131072),
    # gpt-oss (config.json): sliding (window 128) / full alternate, 8 KV heads x 64
    "gpt-oss-20b": (_kv(24, 8, 64), 131072, _kv(12, 8, 64, 131072) + _kv(12, 8, 64, 128)),
    "gpt-oss-120b": (_kv(36, 8, 64), 131072, _kv(18, 8, 64, 131072) + _kv(18, 8, 64, 128)),
    # Phi (config.json): Phi-3-mini-4k slides 2047 on every layer, head_dim 3072/32 = 96
    "phi-3-mini-4k": (_kv(32, 32, 96), 4096, _kv(32, 32, 96, 2047)),
    "phi-3.5-mini": _full(32, 32, 96, 131072),
    "phi-4": _full(40, 10, 128, 16384),
    # Falcon (config.json): 7B is MQA (1 KV head), 40B has 8 KV groups; head_dim 64
    "falcon-7b": _full(32, 1, 64, 2048),
    "falcon-40b": _full(60, 8, 64, 2048),
    # GPT-2 (config.json) and GPT-3 175B (Brown et al. 2020, Table 2.1): plain MHA
    "gpt2": _full(12, 12, 64, 1024),
    "gpt-3-175b": _full(96, 96, 128, 2048),
    # Jamba 1.5 Mini (config.json): attention where i % 8 == 4 (4 layers); 28 Mamba-1 layers keep
    # conv (d_conv-1, expand*hidden) = (3, 8192) and ssm (8192, d_state 16) in bf16
    "jamba-1.5-mini": (_kv(4, 8, 128), 262144,
                       _kv(4, 8, 128, 262144) + 28 * (3 * 8192 * 2 + 8192 * 16 * 2)),
    # Nemotron-H (config.json): attention layers grow; Mamba-2 layers keep a fixed state
    "nemotron-h-56b": (_kv(10, 8, 128), 8192,
                       _kv(10, 8, 128, 8192) + 54 * _mamba2(256, 64, 256, 8)),
    "nemotron-3-nano-30b-a3b": (_kv(6, 2, 128), 262144,
                                _kv(6, 2, 128, 262144) + 23 * _mamba2(64, 64, 128, 8)),
    # OLMo (config.json): OLMo 3.1 slides a 4096 window on 3 of every 4 layers
    "olmo-2-7b": _full(32, 32, 128, 4096),
    "olmo-3.1-32b": (_kv(64, 8, 128), 65536, _kv(16, 8, 128, 65536) + _kv(48, 8, 128, 4096)),
    # Others (config.json)
    "aya-23-8b": _full(32, 8, 128, 8192),
    "chatglm3-6b": _full(28, 2, 128, 8192),  # multi_query_group_num 2
    # DeepSeek-V4-Flash (config.json): 43 layers keep a 128-token window of 512 bf16 values;
    # 21 ratio-4 layers add one entry + a 132-byte indexer key per 4 tokens, 20 ratio-128
    # layers one entry per 128; compressor states fp32: ratio 4 2 x (8 x 1024 + 8 x 256) x 4,
    # ratio 128 2 x 128 x 512 x 4. Per token: the window entry + the ratio share rounded up.
    "deepseek-v4-flash": (43 * 1024 + 21 * 289 + 20 * 8, 131072,
                          43 * 128 * 1024 + 21 * (32768 * (1024 + 132) + 2 * (8192 + 2048) * 4)
                          + 20 * (1024 * 1024 + 2 * 128 * 512 * 4)),
    # Kimi K3 (config.json): 24 MLA layers; 69 KDA layers keep q/k/v convolutions (3 x 3 x 96 x
    # 128, bf16) and a 96 x 128 x 128 fp32 state (vLLM kda_state_shape)
    "kimi-k3": (_mla(24), 131072,
                _mla(24, 131072) + 69 * (3 * 3 * 96 * 128 * 2 + 96 * 128 * 128 * 4)),
}

REQUIRED = {
    "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "llama-3.1-8b",
    "llama-3.1-70b", "llama-3.1-405b", "llama-3.2-1b", "llama-3.2-3b", "llama-4-scout",
    "llama-4-maverick", "mistral-7b-v0.1", "mistral-7b-v0.3", "mistral-nemo", "mixtral-8x7b",
    "mixtral-8x22b", "qwen2.5-7b", "qwen2.5-72b", "qwen3-8b", "qwen3-14b", "qwen3-32b",
    "qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-next-80b-a3b", "gemma-2-9b", "gemma-2-27b",
    "gemma-3-1b", "gemma-3-4b", "gemma-3-27b", "deepseek-v2", "deepseek-v2-lite", "deepseek-v3",
    "deepseek-r1", "kimi-k2", "gpt-oss-20b", "gpt-oss-120b", "phi-3-mini-4k", "phi-4",
    "falcon-7b", "falcon-40b", "gpt2", "gpt-3-175b", "jamba-1.5-mini", "nemotron-h-56b",
    "olmo-2-7b",
}


@pytest.fixture(scope="module")
def library():
    return {spec.name: spec for spec in load_library()}


def test_every_file_loads_with_a_unique_name_matching_its_stem(library) -> None:
    paths = sorted(LIBRARY_DIR.glob("*.yaml"))
    assert len(paths) >= 46
    specs = load_library()
    names = [s.name for s in specs]
    assert len(names) == len(set(names)), "duplicate model names"
    files = library_files()
    for path in paths:
        assert path.stem in files
    for name, path in files.items():
        if path.parent == LIBRARY_DIR:
            assert library[name].name == path.stem
            assert NAME_RE.match(name), f"{name}: lowercase with dashes"


def test_every_model_names_its_source(library) -> None:
    for spec in library.values():
        src = spec.source
        assert src.repo or src.paper, f"{spec.name}: no source repo or paper"
        assert src.describe() != "unknown"


def test_required_models_are_present(library) -> None:
    assert REQUIRED <= set(library), sorted(REQUIRED - set(library))


def test_every_library_model_has_an_expected_size(library) -> None:
    assert set(library) == set(EXPECTED), (
        sorted(set(library) ^ set(EXPECTED)))


def test_aliases_do_not_collide(library) -> None:
    seen: dict[str, str] = {}
    for spec in library.values():
        for alias in (*spec.aliases, spec.name):
            key = alias.lower().replace("_", "-")
            owner = seen.setdefault(key, spec.name)
            assert owner == spec.name, f"{alias}: claimed by {owner} and {spec.name}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_library_model_kv_bytes(name: str, library) -> None:
    per_token, tokens, request = EXPECTED[name]
    spec = library[name]
    assert per_token_bytes(spec.layers, BF16) == per_token
    assert request_bytes(spec.layers, tokens, BF16) == request


# --- golden figures from the issue ------------------------------------------------------------

def test_llama_2_7b_4096_tokens_fp16_is_2_gib() -> None:
    spec = load_named("llama-2-7b")
    # 32 layers x 32 KV heads x 128 x 2 (K, V) x 2 bytes x 4,096 tokens
    assert request_bytes(spec.layers, 4096, FP16) == 2 * 32 * 32 * 128 * 2 * 4096 == 2_147_483_648


def test_llama_2_13b_per_token() -> None:
    # 40 layers x 40 heads x 128 x 2 (K, V) x 2 bytes
    assert per_token_bytes(load_named("llama-2-13b").layers, BF16) == 819_200


def test_gpt_3_per_token() -> None:
    # Brown et al. 2020, Table 2.1: 96 layers, 96 heads, d_head 128; K and V, 2 bytes
    assert per_token_bytes(load_named("gpt-3-175b").layers, FP16) == 4_718_592


def test_llama_3_1_405b_per_token() -> None:
    # 126 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes
    assert per_token_bytes(load_named("llama-3.1-405b").layers, BF16) == 516_096


def test_llama_3_1_70b_request_and_batch() -> None:
    layers = load_named("llama-3.1-70b").layers
    # 80 layers x 8 KV heads x 128 x 2 x 2 bytes = 327,680 B/token
    assert request_bytes(layers, 32768, BF16) == 10 * GIB
    assert batch_bytes(layers, [8192] * 32, BF16) == 80 * GIB


def test_deepseek_v3_per_token_has_no_factor_2() -> None:
    # 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 bytes
    assert per_token_bytes(load_named("deepseek-v3").layers, BF16) == 61 * (512 + 64) * 2 == 70_272


def test_gemma_2_9b_caps_its_sliding_layers() -> None:
    # 21 global layers hold 8,192 tokens, 21 local ones their 4,096 window; 8 KV x 256 x 2 x 2 B
    expected = 21 * 8192 * 8192 + 21 * 4096 * 8192
    assert expected == 2_113_929_216
    assert request_bytes(load_named("gemma-2-9b").layers, 8192, BF16) == expected


def test_aliases_resolve_to_library_models() -> None:
    assert load_named("meta-llama/Llama-3.1-70B-Instruct").name == "llama-3.1-70b"
    assert load_named("deepseek-ai/DeepSeek-V3").name == "deepseek-v3"
    assert load_named("openai/gpt-oss-120b").name == "gpt-oss-120b"


# --- the same figures through the CLI ---------------------------------------------------------

def _size_json(*args: str) -> dict:
    result = CliRunner().invoke(app, ["size", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_cli_llama_2_7b_fp16() -> None:
    out = _size_json("llama-2-7b", "--tokens", "4096", "--kv-dtype", "fp16")
    assert out["request_bytes"] == 2_147_483_648  # 2 x 32 x 32 x 128 x 2 x 4,096


def test_cli_gemma_2_9b() -> None:
    out = _size_json("gemma-2-9b", "--tokens", "8192", "--kv-dtype", "bf16")
    assert out["request_bytes"] == 21 * 8192 * 8192 + 21 * 4096 * 8192


def test_cli_llama_3_1_70b_batch() -> None:
    out = _size_json("llama-3.1-70b", "--tokens", "8192", "--batch", "32", "--kv-dtype", "bf16")
    assert out["batch_bytes"] == 80 * GIB  # 32 x 8,192 tokens x 327,680 B


def test_cli_deepseek_v3_per_token() -> None:
    out = _size_json("deepseek-v3", "--tokens", "8192", "--kv-dtype", "bf16")
    assert out["per_token_bytes"] == 70_272  # 61 x (512 + 64) x 2
    assert out["request_bytes"] == 70_272 * 8192


# --- parameter counts (num_params) --------------------------------------------------------------
# Each figure is written as its source gives it: a Hub safetensors total, a checkpoint index
# total_size in bytes divided by the bytes per parameter, or a published exact count; the
# source is named in the comment (and in the YAML's source.note). Counts include what the named
# checkpoint holds (MTP modules, vision towers) but not non-parameter buffers.
NUM_PARAMS: dict[str, int] = {
    # Llama 2: 32/40/80 layers x 64 fp32 rotary inv_freq buffers sit beside the fp16 weights;
    # togethercomputer/together-python finetune.py model_param_count gives the parameters
    "llama-2-7b": (13_476_839_424 - 4 * 32 * 64) // 2,  # index total_size; = KerasHub llama2_7b_en
    "llama-2-13b": 13_015_866_880 - 40 * 64,  # Hub safetensors total (debaditc/kvfit)
    "llama-2-70b": (137_953_316_864 - 4 * 80 * 64) // 2,  # index total_size, fp16
    "llama-3-8b": 16_060_522_496 // 2,  # index total_size, bf16; = KerasHub llama3_8b_en
    "llama-3-70b": 141_107_412_992 // 2,  # index total_size, bf16 (Llama 3 / 3.1 70B)
    "llama-3.1-8b": 16_060_522_496 // 2,  # index total_size, bf16 (already in the library)
    "llama-3.1-70b": 141_107_412_992 // 2,  # index total_size of Llama-3.1-70B@349b2ddb, bf16
    "llama-3.1-405b": 405_853_388_800,  # Hub safetensors total of Llama-3.1-405B@b906e4dc
    "llama-3.2-1b": 1_235_814_400,  # Hub safetensors total (tied lm_head not stored)
    "llama-3.2-3b": 3_212_749_824,  # Hub safetensors total of -Instruct (debaditc/kvfit)
    "llama-4-scout": 108_641_793_536,  # Hub safetensors total, with vision encoder
    "llama-4-maverick": 401_583_781_376,  # Fireworks docs / checkpoint graph, with vision encoder
    "llava-1.5-7b": 7_063_427_072,  # sum(p.numel()) of llava-hf/llava-1.5-7b-hf, with CLIP tower
    "mistral-7b-v0.1": 7_241_732_096,  # Hub safetensors total; = KerasHub mistral_7b_en
    "mistral-7b-v0.3": 7_248_023_552,  # Hub safetensors total; = KerasHub mistral_0.3_7b_en
    "mistral-nemo": 24_495_564_800 // 2,  # index total_size of Mistral-Nemo-Instruct-2407, bf16
    "mixtral-8x7b": 46_702_792_704,  # KerasHub mixtral_8_7b_en = Hub safetensors total
    "mixtral-8x22b": 281_241_268_224 // 2,  # tensor payload bytes of the 59 shards, bf16
    "qwen2.5-7b": 7_615_616_512,  # Hub safetensors total of Qwen2.5-7B-Instruct
    "qwen2.5-72b": 72_706_203_648,  # Hub safetensors total; = KerasHub qwen2.5_instruct_72b_en
    "qwen3-8b": 8_190_735_360,  # Hub safetensors total; = KerasHub qwen3_8b_en
    "qwen3-14b": 14_768_307_200,  # KerasHub qwen3_14b_en
    "qwen3-32b": 32_762_123_264,  # Hub safetensors total; = KerasHub qwen3_32b_en
    "qwen3-30b-a3b": 30_532_122_624,  # Hub safetensors total; = KerasHub qwen3_moe_30b_a3b_en
    "qwen3-235b-a22b": 470_187_269_120 // 2,  # index total_size, bf16
    "qwen3-next-80b-a3b": 81_324_862_720,  # Hub safetensors total of -Instruct
    "gemma-2-9b": 9_241_705_984,  # Hub safetensors total; = KerasHub gemma2_9b_en
    "gemma-2-27b": 27_227_128_320,  # KerasHub gemma2_27b_en = Hub safetensors total
    "gemma-3-1b": 999_885_952,  # Hub safetensors total of gemma-3-1b-it (text only)
    "gemma-3-4b": 4_300_079_472,  # Hub safetensors total of gemma-3-4b-it, with SigLIP tower
    "gemma-3-27b": 27_432_406_640,  # Hub safetensors total of gemma-3-27b-it, with SigLIP tower
    "deepseek-v2": 235_741_434_880,  # Hub safetensors total (one public copy)
    "deepseek-v2-lite": 15_706_484_224,  # Hub safetensors total
    # DeepSeek V3 / R1 (FP8): BF16 + F8_E4M3 + F32 elements of the Hub safetensors metadata;
    # includes the MTP module (671B main + 14B MTP), so not total_size / 2
    "deepseek-v3": 3_918_786_560 + 680_571_043_840 + 41_555_600,
    "deepseek-r1": 3_918_786_560 + 680_571_043_840 + 41_555_600,  # DeepSeek-R1@56d4cbbb
    "kimi-k2": 1_026_408_235_864,  # Hub safetensors total of Kimi-K2-Instruct (block FP8)
    "gpt-oss-20b": 20_914_757_184,  # Hub safetensors total; = KerasHub gpt_oss_20b_en (MXFP4)
    "gpt-oss-120b": 116_829_156_672,  # Hub safetensors total; = KerasHub gpt_oss_120b_en (MXFP4)
    # GPT-2: model.safetensors holds 137,022,720 F32 elements (safetensors docs, Metadata
    # Parsing), 12 x 1024 x 1024 of them attn.bias causal masks; = KerasHub gpt2_base_en
    "gpt2": 137_022_720 - 12 * 1024 * 1024,
    "phi-3-mini-4k": 3_821_079_552,  # Hub safetensors total; = KerasHub phi3_mini_4k_instruct_en
    "phi-3.5-mini": 3_821_079_552,  # Hub safetensors parameter count
    "phi-4": 14_659_507_200,  # Hub safetensors total
    "olmo-2-7b": 7_298_617_344,  # Hub safetensors total of OLMo-2-1124-7B@7df9a825 (F32)
    "nemotron-3-nano-30b-a3b": 31_577_937_344,  # Hub safetensors total of the -BF16 repo
    "chatglm3-6b": 6_243_584_000,  # model.num_parameters() of THUDM/chatglm3-6b
}


@pytest.mark.parametrize("name", sorted(NUM_PARAMS))
def test_num_params(name: str) -> None:
    spec = load_named(name)
    assert spec.num_params == NUM_PARAMS[name]
    if name != "llama-3.1-8b":  # its source is a bare {repo, file}
        note = spec.source.note or ""
        assert f"num_params {NUM_PARAMS[name]:,}" in note, "the note names the count's source"


def test_num_params_cross_checks() -> None:
    # the same counts from a second source, where one was found
    assert NUM_PARAMS["llama-2-7b"] == 6_738_415_616  # KerasHub llama2_7b_en, together-python
    assert NUM_PARAMS["llama-2-7b"] == 6_738_417_664 - 32 * 64  # Hub safetensors total
    assert NUM_PARAMS["llama-2-13b"] == 13_015_864_320  # together-python
    assert NUM_PARAMS["llama-2-70b"] == 68_976_648_192  # together-python
    assert NUM_PARAMS["llama-3-70b"] == NUM_PARAMS["llama-3.1-70b"] == 70_553_706_496
    assert NUM_PARAMS["llama-3.1-405b"] * 2 == 811_706_777_600  # bf16 weight bytes
    assert NUM_PARAMS["gpt2"] == 124_439_808  # KerasHub gpt2_base_en
    assert NUM_PARAMS["qwen3-235b-a22b"] == 235_093_634_560  # Hub safetensors total
    assert NUM_PARAMS["mistral-nemo"] == 12_247_782_400  # Hub safetensors total
    assert NUM_PARAMS["mixtral-8x22b"] == 140_620_634_112  # Hub safetensors total
    assert NUM_PARAMS["deepseek-v3"] == 684_531_386_000  # Hub safetensors total


def test_num_params_is_shown() -> None:
    result = CliRunner().invoke(app, ["show", "gpt2"])
    assert result.exit_code == 0, result.output
    assert "Parameters: 124,439,808." in result.output


# --- the alias index's line reads -----------------------------------------------------------

_PIECES = st.sampled_from(["name:", "aliases:", " [a", ", b", "]", "\n", " ", "x", "\t", "\r",
                           "\r\n", "[", "name: a\n", "aliases: [c, d]\n",
                           # white space that is not a line end, nor [ \t]
                           "\x0c", "\x85", "\u3000", "\x1c"])


@settings(max_examples=3000, deadline=None)
@given(st.lists(_PIECES, max_size=14).map("".join))
def test_index_line_reads_find_what_the_patterns_find_anywhere(text):
    # the index tries its two MULTILINE patterns only where a line starts with the key; that
    # must find exactly what findall over the whole text finds (matches that do not overlap,
    # an aliases list wrapped over lines)
    from kvplan.sources import library

    for pattern, match, key in (
            (r"^name:[ \t]*(\S+)[ \t]*$", library._name_line, "name:"),
            # a flow list, on one line or wrapped over several
            (r"^aliases:[ \t]*\[([^\]]*)\][ \t]*$", library._aliases_line, "aliases:")):
        declared = re.search("^" + key, text, re.M) is not None
        assert library._line_matches(match, key, text) == (re.findall(pattern, text, re.M),
                                                            declared)


def test_index_reads_a_file_with_windows_line_ends_as_a_text_mode_read_does(tmp_path):
    from kvplan.sources import library

    path = tmp_path / "m.yaml"
    path.write_bytes(b"schema: kvplan.model/1\r\nname: m\r\naliases: [org/M-1,\r\n  org/m-2]\r\n")
    index = library.LibraryIndex({"m": path})
    assert index.names == ["m"]
    assert index.aliases["org/m-1"] == [path] and index.aliases["org/m-2"] == [path]
