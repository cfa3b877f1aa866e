"""What every engine's log cases share: each log in tests/fixtures/engines/engine-logs.yaml (a
copy of the shared engine-logs.yaml) has a case in its engine's folder (tests/engines/vllm/
test_vllm_startup.py, sglang/test_sglang_pools.py, trtllm/test_trtllm_pool.py,
llamacpp/test_llamacpp_engine.py): the logged settings go in and the logged counts must come
out within 0.5%. Here: that no log is left without a case, and the release parser the engines
share (kvplan.engines.parse_version).
"""

from __future__ import annotations

import pytest
from engine_cases import BY_ID

from kvplan.core.errors import BadInputError
from kvplan.engines import parse_version


def test_every_log_is_covered():
    covered = {
        "vllm-i10517-llama31-8b-rtx3090-mml29000", "vllm-i19996-llama31-8b-eagle-h100",
        "vllm-pr20665-deepseek-v2-lite-4xl4-tp2-pp2", "lmcache-i1739-qwen3-14b-1gpu",
        "vllm-doc-qwen25-7b-awq-rtx4080", "vllm-doc-mistral7b-gptq-dgx-spark",
        "vllm-doc-llama2-7b-rocm-throughput", "vllm-doc-qwen3-4b-2507-rtx5090-bf16-mml131072",
        "sglang-i21348-qwen3-235b-fp8-4xh100-tp4", "sglang-doc-qwq-32b-tp4-24gb",
        "llamacpp-doc-llama32-3b-cpu-c4096-f16", "llamacpp-doc-llama32-3b-cpu-c4096-q8_0k",
        "ollama-doc-qwen3-8b-ctx40960", "trtllm-doc-llama31-8b-fp8-rtx5090",
    }
    assert set(BY_ID) == covered


def test_parse_version():
    assert parse_version("0.9.1.dev705+g01220ce89") == (0, 9, 1)
    assert parse_version("0.11.0+582e4e37.nv25.11") == (0, 11, 0)
    assert parse_version("b8247 (aaa18bb49)") == (8247,)
    assert parse_version(None) is None
    with pytest.raises(BadInputError):
        parse_version("latest")
