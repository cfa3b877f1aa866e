"""vLLM's start-up log formats (kvplan.engines.vllm.text) on a real log: the settings read
from the echoed non-default args dict."""

from __future__ import annotations

from pathlib import Path

from kvplan.planning.explain import reading_formats
from kvplan.sources import startlog

# github.com/NnamdiOdozi/mlops-assignment logs/vllm.log (vLLM 0.22.1; tests/fixtures/logs/
# index.yaml, id vllm-mlops-qwen3-30b-a3b-2507-fp8-0.22.1): its lines up to the non-default
# args, which hold 'quantization': 'fp8' and no KV cache dtype
LOG = Path(__file__).parents[2] / "fixtures" / "logs" / "vllm" / \
    "vllm-mlops-qwen3-30b-a3b-2507-fp8-0.22.1.log"
NON_DEFAULT = "non-default args: {"


def head() -> str:
    lines = LOG.read_text().splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if NON_DEFAULT in line)
    return "".join(lines[:end + 1])


def settings(text: str) -> dict[str, object]:
    return startlog.read_log(text, reading_formats(), "vllm").settings


def test_the_real_non_default_args_are_read():
    got = settings(head())
    assert (got["quantization"], got["max_model_len"]) == ("fp8", 8192)
    assert "kv_dtype" not in got


def test_a_drafters_kv_dtype_and_quantization_are_not_the_servers():
    # --speculative-config as vLLM echoes it, placed first in the dict: the drafter's own
    # quantization and kv_cache_dtype (config/speculative.py SpeculativeConfig fields;
    # kv_cache_dtype from vllm#48787) are not the server's, and num_speculative_tokens is
    # only ever given there
    draft = ("'speculative_config': {'method': 'eagle3', 'model': 'd', 'quantization': "
             "'gptq', 'kv_cache_dtype': 'bfloat16', 'num_speculative_tokens': 3}, ")
    text = head().replace(NON_DEFAULT, NON_DEFAULT + draft)
    got = settings(text)
    assert got["quantization"] == "fp8"  # the top-level key, after the nested one
    assert "kv_dtype" not in got  # only the drafter names one
    assert (got["num_speculative_tokens"], got["speculative_method"]) == (3, "eagle3")
    # the server's own KV cache dtype, at the top level, is read
    served = text.replace("'max_model_len': 8192", "'max_model_len': 8192, "
                          "'kv_cache_dtype': 'fp8'")
    assert settings(served)["kv_dtype"] == "fp8"
