"""TensorRT-LLM's KvCacheConfig.dtype "auto" for a ModelOpt checkpoint that asks for an FP8
KV cache (engine_cases.modelopt_llama8b): the PyTorch flow keeps the checkpoint's KV
quantization (_torch/pyexecutor/model_loader.py validate_and_set_kv_cache_quant, model_engine.py
in earlier releases), so the pool is FP8 in every release kvplan models (1.1-1.3)."""

from __future__ import annotations

import pytest
from engine_cases import LLAMA8B_BF16_TOKEN_BYTES as BF16
from engine_cases import LLAMA8B_FP8_TOKEN_BYTES as FP8
from engine_cases import modelopt_llama8b

from kvplan.engines.base import Deployment
from kvplan.engines.registry import get

KV_MEMORY = 8 * 2**30  # the pool's bytes given directly (the fraction already applied)


def _trtllm(spec, version: str | None = None, kv_dtype: str = "auto"):
    dep = Deployment(spec, engine="trtllm", engine_version=version, kv_dtype=kv_dtype,
                     kv_memory_bytes=KV_MEMORY)
    return get("trtllm").capacity(dep)


@pytest.mark.parametrize("quant_algo", ["NVFP4", "FP8"])
@pytest.mark.parametrize("version", ["1.1.0", "1.3.0", None])
def test_auto_keeps_the_checkpoints_fp8_kv(quant_algo, version):
    cap = _trtllm(modelopt_llama8b(quant_algo), version)
    assert cap.engine_profile.bytes_per_token == FP8
    assert cap.kv_format == "fp8_e4m3"
    # int(kv_cache_bytes // bytes_per_token) tokens in whole blocks of 32
    assert cap.engine_profile.max_tokens == KV_MEMORY // FP8 == 131_072
    assert cap.engine_profile.num_blocks == 131_072 // 32


def test_named_dtype_and_a_checkpoint_without_a_request_keep_their_dtype():
    assert _trtllm(modelopt_llama8b("NVFP4"), kv_dtype="bf16").engine_profile \
        .bytes_per_token == BF16
    no_request = modelopt_llama8b("NVFP4", kv_cache_quant_algo=None)
    assert _trtllm(no_request).engine_profile.bytes_per_token == BF16
