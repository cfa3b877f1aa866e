"""An MLX checkpoint's `quantization` block in config.json (mlx-community's uploads): no
engine kvplan plans for loads that format, so its weights are counted as the unquantized
model and every command that figures weights from the config says so by name.

Fixture: tests/fixtures/hf-configs/families/mlx-community--granite-4.0-h-350m-4bit.json
(SOURCES.md): lablup/mlxcel's excerpt of mlx-community/granite-4.0-h-350m-4bit's config.json
with its `"quantization": {"group_size": 64, "bits": 4}` block kept.
Engine facts (vLLM 0.33.0's wheel): transformers_utils/model_arch_config_convertor.py
`_normalize_quantization_config` reads only `quantization_config` / `compression_config`
(and a missing quant_method becomes ""); config/model.py `_verify_quantization` turns "" into
no quantization; model_executor/layers/quantization has no MLX method."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import KvplanError
from kvplan.core.quant import NONE
from kvplan.core.weights import weight_plan
from kvplan.sources.hfconfig import load_config_file, spec_from_config
from kvplan.sources.quant import quantization_from_config

FAMILIES = Path(__file__).resolve().parents[1] / "fixtures" / "hf-configs" / "families"
MLX = FAMILIES / "mlx-community--granite-4.0-h-350m-4bit.json"
PLAIN = FAMILIES / "ibm-granite--granite-4.0-h-350m.json"

# GraniteMoeHybrid 350M by hand (SOURCES.md row of the unquantized excerpt): 340,332,224
# parameters; counted unquantized in bf16, 2 bytes each
PARAMS = 340_332_224
BF16_BYTES = 2 * PARAMS  # 680,664,448


def _raw(**extra):
    raw = json.loads(PLAIN.read_text())
    raw.update(extra)
    return raw


def test_the_fixture_is_the_unquantized_excerpt_plus_the_mlx_block():
    assert json.loads(MLX.read_text()) == _raw(quantization={"group_size": 64, "bits": 4})


def test_the_block_is_named_and_the_weights_counted_unquantized():
    spec = load_config_file(MLX)
    (warning,) = [w for w in spec.warnings if "MLX" in w]
    assert "MLX quantization (4-bit, group 64)" in warning
    for engine in ("vLLM", "SGLang", "TGI", "TensorRT-LLM", "llama.cpp"):
        assert engine in warning
    assert warning.endswith("weights are counted as the unquantized model (bf16)")
    assert spec.quantization.method == "mlx" and not spec.quantization.quantized
    plan = weight_plan(spec)
    plain = weight_plan(load_config_file(PLAIN))
    assert plan is not None and plain is not None
    assert plan.stage_bytes == plain.stage_bytes  # nothing quantized: the bf16 model
    assert "MLX" in plan.why


def test_no_block_no_word():
    assert not any("MLX" in w for w in load_config_file(PLAIN).warnings)


def test_mlx_lm_duplicate_quantization_config_is_not_refused():
    # mlx-lm writes the block twice: `quantization` and a `quantization_config` with no
    # quant_method (vLLM takes that as unquantized); kvplan neither refuses it nor reads
    # it as a format it knows
    block = {"group_size": 32, "bits": 8, "mode": "affine"}
    q = quantization_from_config(_raw(quantization=block, quantization_config=dict(block)),
                                 "c.json", "bf16")
    assert q.method == "mlx"
    assert "MLX quantization (8-bit, group 32)" in q.warnings[0]


def test_per_module_overrides_are_counted():
    block = {"group_size": 64, "bits": 4, "model.layers.0.mlp.gate": {"group_size": 64,
                                                                       "bits": 8},
             "lm_head": False}
    q = quantization_from_config(_raw(quantization=block), "c.json", "bf16")
    assert "(4-bit, group 64, 2 per-module overrides)" in q.warnings[0]


def test_a_quant_method_config_wins_over_the_block():
    fp8 = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    q = quantization_from_config(_raw(quantization={"group_size": 64, "bits": 4},
                                      quantization_config=fp8), "c.json")
    assert q.layout == "fp8" and q.block == (128, 128)
    assert quantization_from_config(_raw(), "c.json") is NONE


def test_a_block_without_bits_is_refused_by_field():
    with pytest.raises(KvplanError, match=r"quantization\.bits"):
        spec_from_config(_raw(quantization={"group_size": 64}), "c.json", "g")


@pytest.mark.parametrize("command", [["size", str(MLX)], ["show", str(MLX)],
                                     ["plan", str(MLX), "--gpu", "h100", "--context", "1k"]])
def test_every_command_says_so(command):
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 0, result.output
    assert "MLX quantization (4-bit, group 64)" in result.output


def test_check_says_so(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("schema: kvplan.capacity/1\ndeployments:\n  - name: g\n"
                    f"    model: {MLX}\n    gpu: h100\n    engine: vllm\n"
                    "    max_model_len: 16k\n    requires:\n"
                    "      min_context: {concurrency: 1, context: 8k}\n")
    result = CliRunner().invoke(app, ["check", str(plan)])
    assert result.exit_code == 0, result.output
    assert result.output.count("MLX quantization (4-bit, group 64)") == 1
