"""llama.cpp's KV cache cells (kvplan.engines.llamacpp.engine) against the real logs of
tests/fixtures/engines/engine-logs.yaml: the logged settings go in, and the K, V and total MiB
must come out as llama.cpp prints them.
"""

from __future__ import annotations

import pytest
from engine_cases import BY_ID, model

from kvplan.core.errors import BadInputError
from kvplan.engines import llamacpp


@pytest.mark.parametrize("log_id,k_type,v_type", [
    ("llamacpp-doc-llama32-3b-cpu-c4096-f16", "f16", "f16"),
    ("llamacpp-doc-llama32-3b-cpu-c4096-q8_0k", "q8_0", "f16"),
])
def test_llamacpp_llama32_3b(log_id, k_type, v_type):
    e = BY_ID[log_id]["reported"]
    p = llamacpp.profile(model("llama-3.2-3b"), llamacpp.LlamacppConfig(
        ctx=e["n_ctx"], cache_type_k=k_type, cache_type_v=v_type))
    assert p.k_mib == e["llama_cpp_k_mib"]
    assert p.v_mib == e["llama_cpp_v_mib"]
    assert p.kv_mib == e["llama_cpp_kv_mib"]
    # 4,096 cells x 28 layers x 8 KV heads x 128: f16 2 B, q8_0 34 B per 32 values
    per_value = {"f16": 2, "q8_0": 34 / 32}
    assert p.k_mib == 4096 * 28 * 8 * 128 * per_value[k_type] / 2**20


def test_llamacpp_qwen3_8b_ollama():
    e = BY_ID["ollama-doc-qwen3-8b-ctx40960"]["reported"]
    p = llamacpp.profile(model("qwen3-8b"), llamacpp.LlamacppConfig(ctx=e["n_ctx"]))
    assert p.kv_mib == e["llama_cpp_kv_mib"] == 40960 * 36 * 2 * 8 * 128 * 2 / 2**20 == 5760


def test_llamacpp_q4_padding_parallel_and_log_line():
    spec = model("llama-3.2-3b")
    q4 = llamacpp.profile(spec, llamacpp.LlamacppConfig(ctx=4096, cache_type_k="q4_0"))
    assert q4.k_mib == 4096 * 28 * 8 * 128 // 32 * 18 / 2**20 == 63.0  # 18 B per 32 values
    padded = llamacpp.profile(spec, llamacpp.LlamacppConfig(ctx=4000))
    assert padded.cells == 4096  # padded to 256
    split = llamacpp.profile(spec, llamacpp.LlamacppConfig(ctx=8192, parallel=4,
                                                           kv_unified=False))
    assert split.cells == 8192 and split.cells_per_seq == 2048
    line = llamacpp.profile(spec, llamacpp.LlamacppConfig(ctx=4096)).log_line()
    # src/llama-kv-cache.cpp prints "K (%s): %7.2f MiB"
    assert "4096 cells" in line and "K (f16):  224.00 MiB" in line
    with pytest.raises(BadInputError):
        llamacpp.cache_type("q3_k")
