"""The weights' format a start-up log states, applied by `kvplan explain`: the quantization
the engine prints (vLLM's engine config `quantization=fp8`, SGLang's weight loader
`quant=awq`) or a checkpoint name's suffix (`--model qwen3-30b-a3b-fp8`). Each weights row is
held to the weights the log itself prints (vLLM's "Model loading took X GiB", SGLang's "Load
weight end ... mem usage=X GB", GB being 2^30 there), read here from the log's text; sized in
the model's own 16-bit dtype they were 1.9x (FP8) to 2.9x (AWQ) that."""

from __future__ import annotations

import re

import paths

from kvplan.planning.explain import explain

CORPUS = paths.FIXTURES / "logs"
MODELS = paths.FIXTURES / "engines" / "models"
GIB = 2**30


def _logged_weights_bytes(text: str) -> int:
    """The weights the log prints, from its own line (not kvplan's reading of it)."""
    found = re.search(r"Model loading took ([\d.]+) GiB", text) or \
        re.search(r"Load weight end\..*?mem usage=([\d.]+) GB", text)
    assert found, "the log prints its weights"
    return int(float(found.group(1)) * GIB)


def _weights(log: str, **given) -> tuple[int, int, tuple[str, ...]]:
    text = (CORPUS / log).read_text(encoding="utf-8")
    result = explain(text, **given)
    row = next(r for r in result.rows if r.quantity == "weights")
    return _logged_weights_bytes(text), int(row.kvplan), result.notes


def test_vllm_fp8_weights_from_its_engine_config():
    logged, ours, notes = _weights("vllm/vllm-mlops-qwen3-30b-a3b-2507-fp8-0.22.1.log",
                                   model="qwen3-30b-a3b")
    # 29.08 GiB logged; 30.5B parameters at 2 bytes would be 57 GiB
    assert abs(ours - logged) <= 0.02 * logged
    assert any("quantization=fp8" in n for n in notes)


def test_vllm_awq_weights_from_its_engine_config():
    logged, ours, notes = _weights("vllm/vllm-duotalk-qwen25-14b-awq-0.13.log",
                                   model=str(MODELS / "qwen2.5-14b.yaml"))
    assert abs(ours - logged) <= 0.02 * logged  # 9.38 GiB logged, 27.5 GiB in bf16
    assert any("quantization=awq" in n for n in notes)


def test_sglang_awq_weights_from_its_weight_loader():
    logged, ours, notes = _weights("sglang/sglang-agentivium-qwen25-7b-awq-mf082.log",
                                   model=str(MODELS / "qwen2.5-7b.yaml"))
    assert abs(ours - logged) <= 0.03 * logged  # 5.25 GB (2^30) logged, 14.2 GiB in bf16
    assert any("quantization=awq" in n for n in notes)


def test_a_model_name_suffix_sets_the_weights():
    logged, ours, notes = _weights("sglang/sglang-h100-qwen3-30b-a3b-fp8-2026-08.log",
                                   model="qwen3-30b-a3b-fp8", gpu="H100")
    assert abs(ours - logged) <= 0.02 * logged  # 29.15 GB (2^30) logged
    assert any("with fp8 weights (its name's suffix)" in n for n in notes)


def test_a_model_whose_config_states_its_format_keeps_it():
    # gpt-oss: mxfp4 experts beside bf16 attention, as its config says; the log's
    # quantization=mxfp4 would size every tensor in mxfp4
    logged, ours, notes = _weights("vllm/dennislee22-gpt-oss-120b-4xa100-tp4-ray.log",
                                   model="gpt-oss-120b", gpu="A100 80GB")
    assert abs(ours - logged) <= 0.01 * logged
    assert not any("quantization=" in n for n in notes)


def test_quantization_none_keeps_the_models_dtype():
    logged, ours, notes = _weights("vllm/vllm-arno-qwen25-7b-fp16-0.17-mml4096.log",
                                   model="qwen2.5-7b")
    assert "quantization=None" in (CORPUS / "vllm/vllm-arno-qwen25-7b-fp16-0.17-mml4096.log"
                                   ).read_text(encoding="utf-8")
    assert abs(ours - logged) <= 0.02 * logged
    assert not any("quantization" in n for n in notes)
