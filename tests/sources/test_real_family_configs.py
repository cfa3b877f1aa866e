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


@pytest.mark.parametrize("fixture", [EXAONE_4_5])
def test_size_and_plan_accept_the_real_spelling(fixture):
    runner = CliRunner()
    sized = runner.invoke(app, ["size", str(fixture), "-t", "8192", "-f", "json"])
    assert sized.exit_code == 0, sized.output
    planned = runner.invoke(app, ["plan", str(fixture), "--gpu", "h200", "--max-model-len",
                                  "8192", "-f", "json"])
    assert planned.exit_code == 0, planned.output
    assert "no parameter count" not in planned.output
    assert json.loads(sized.output)
