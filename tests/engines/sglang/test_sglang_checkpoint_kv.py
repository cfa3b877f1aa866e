"""SGLang's `--kv-cache-dtype auto` for a ModelOpt checkpoint that asks for an FP8 KV cache
(engine_cases.modelopt_llama8b): fp8_e4m3 when the model's quant_config has
kv_cache_quant_algo "FP8" (model_executor/model_runner.py from the 0.5.3 wheel, absent from
0.5.2's; mem_cache/kv_cache_dtype.py configure_kv_cache_dtype in 0.5.23). In 0.5.3 only
ModelOptFp4Config stores that attribute (ModelOptFp8Config keeps kv_cache_quant_method);
from 0.5.4 every ModelOpt config inherits it from ModelOptQuantConfig."""

from __future__ import annotations

import pytest
from engine_cases import LLAMA8B_BF16_TOKEN_BYTES as BF16
from engine_cases import LLAMA8B_FP8_TOKEN_BYTES as FP8
from engine_cases import modelopt_llama8b

from kvplan.engines.base import Deployment
from kvplan.engines.registry import get
from kvplan.engines.sglang.memory import rules_for

KV_MEMORY = 8 * 2**30  # a KV budget given directly: rest = the budget (before = 0)


def _sglang(spec, version: str | None, kv_dtype: str = "auto"):
    dep = Deployment(spec, engine="sglang", engine_version=version, kv_dtype=kv_dtype,
                     kv_memory_bytes=KV_MEMORY)
    return get("sglang").capacity(dep)


@pytest.mark.parametrize("version, token_bytes, fmt", [
    ("0.5.2", BF16, "bf16"),  # auto: the model dtype
    ("0.5.3", FP8, "fp8_e4m3"),  # kv_cache_quant_algo "FP8" -> torch.float8_e4m3fn
    ("0.5.4", FP8, "fp8_e4m3"),
    ("0.5.23", FP8, "fp8_e4m3"),
    (None, FP8, "fp8_e4m3"),  # no release: the newest
])
def test_auto_takes_an_nvfp4_checkpoints_fp8_kv_from_0_5_3(version, token_bytes, fmt):
    cap = _sglang(modelopt_llama8b("NVFP4"), version)
    assert cap.engine_profile.cell_size_bytes == token_bytes
    assert cap.kv_format == fmt
    # int(rest x 2^30 // cell), pages of 1
    assert cap.engine_profile.max_total_num_tokens == KV_MEMORY // token_bytes


@pytest.mark.parametrize("version, token_bytes", [("0.5.3", BF16), ("0.5.4", FP8)])
def test_auto_takes_an_fp8_checkpoints_fp8_kv_from_0_5_4(version, token_bytes):
    cap = _sglang(modelopt_llama8b("FP8"), version)
    assert cap.engine_profile.cell_size_bytes == token_bytes


def test_named_dtype_and_other_checkpoints_keep_their_dtype():
    assert _sglang(modelopt_llama8b("NVFP4"), "0.5.23", "bf16").engine_profile \
        .cell_size_bytes == BF16
    no_request = modelopt_llama8b("NVFP4", kv_cache_quant_algo=None)
    assert _sglang(no_request, "0.5.23").engine_profile.cell_size_bytes == BF16
    # configure_kv_cache_dtype takes only "FP8"
    nvfp4_kv = modelopt_llama8b("NVFP4", kv_cache_quant_algo="NVFP4")
    assert _sglang(nvfp4_kv, "0.5.23").engine_profile.cell_size_bytes == BF16


def test_rows_resolve_the_checkpoint_request_by_release():
    assert rules_for((0, 5, 2)).kv_dtype_from_checkpoint == ()
    assert rules_for((0, 5, 3)).kv_dtype_from_checkpoint == ("modelopt-nvfp4",)
    assert rules_for((0, 5, 4)).kv_dtype_from_checkpoint == ("modelopt",)
    assert rules_for((0, 5, 17)).kv_dtype_from_checkpoint == ("modelopt",)
    assert rules_for((0, 5, 18)).kv_dtype_from_checkpoint == ("modelopt", "fp8")
    assert rules_for((0, 5, 22)).kv_dtype_from_checkpoint == ("modelopt", "fp8",
                                                              "compressed-tensors")
