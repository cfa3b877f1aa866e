"""A checkpoint's KV cache request (spec.quantization.kv_cache, recorded engine-neutrally by
kvplan.sources.quant.kv_request) as each engine and release resolves `--kv-cache-dtype auto`
from it. The configs are Llama-3.1-8B-Instruct's real config.json (tests/fixtures) given a
quantization_config: Fp8Config / ModelOpt blocks written here, and poolside's
Laguna-XS.2-FP8 compressed-tensors block (a real static per-tensor FP8 kv_cache_scheme)
copied as it is.

Bytes per token by hand, Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K and V) =
65,536 elements a token: bf16 2 B each = 131,072; fp8 1 B = 65,536; NVFP4 (TensorRT-LLM: an
e2m1 nibble each and one fp8 scale per 16 elements) 65,536 / 2 + 65,536 / 16 = 36,864.

Rules read from the engines' source:
- SGLang (mem_cache/kv_cache_dtype.py configure_kv_cache_dtype, 0.5.23; model_runner.py
  before): "auto" -> fp8_e4m3 when quant_config.kv_cache_quant_algo upper-cased is "FP8".
  Fp8Config stores it from the 0.5.18 wheel (fp8.py from_config; not in 0.5.17's);
  CompressedTensorsConfig from 0.5.19 (a float, 8-bit, strategy "tensor", symmetric,
  non-dynamic kv_cache_scheme; not in 0.5.18's). A flat ModelOpt config reads a float 8-bit
  kv_cache_scheme as FP8 whatever `dynamic` says (modelopt_quant.py from_config).
- vLLM 0.14 (utils/torch_utils.py get_kv_cache_quant_algo_string): only quant_method
  modelopt*; a scheme mapping only with dynamic false; a name only "fp8".
- TensorRT-LLM: the ModelOpt request, FP8 or NVFP4, kept in every release.
"""

from __future__ import annotations

import json

import paths
import pytest

from kvplan.core.spec import ModelSpec
from kvplan.engines.base import Deployment
from kvplan.engines.registry import get
from kvplan.sources.hfconfig import spec_from_config

ELEMENTS = 32 * 8 * 128 * 2  # K and V elements of one token, all layers
BF16 = ELEMENTS * 2  # 131,072
FP8 = ELEMENTS * 1  # 65,536
NVFP4 = ELEMENTS // 2 + ELEMENTS // 16  # 36,864
KV_MEMORY = 8 * 2**30  # the KV budget given directly


def _llama(qc: dict) -> ModelSpec:
    raw = json.loads((paths.FIXTURES / "hf-configs" / "meta-llama--Llama-3.1-8B-Instruct.json")
                     .read_text())
    raw["quantization_config"] = qc
    return spec_from_config(raw, "config.json", "llama-3.1-8b-kvreq")


def _laguna_qc() -> dict:
    raw = json.loads((paths.FIXTURES / "hf-configs" / "families"
                      / "poolside--Laguna-XS.2-FP8.json").read_text())
    return raw["quantization_config"]


FP8_CONFIG = {"quant_method": "fp8", "activation_scheme": "dynamic",
              "weight_block_size": [128, 128], "kv_cache_quant_algo": "FP8"}


def _modelopt_flat(dynamic: bool) -> dict:
    return {"quant_method": "modelopt", "quant_algo": "FP8", "ignore": ["lm_head"],
            "kv_cache_scheme": {"dynamic": dynamic, "num_bits": 8, "type": "float"}}


def _cap(spec: ModelSpec, engine: str, version: str | None, kv_dtype: str = "auto"):
    dep = Deployment(spec, engine=engine, engine_version=version, kv_dtype=kv_dtype,
                     kv_memory_bytes=KV_MEMORY)
    return get(engine).capacity(dep)


def _sglang_cell(spec: ModelSpec, version: str | None) -> int:
    cap = _cap(spec, "sglang", version)
    # int(rest x 2^30 // cell) tokens, pages of 1
    assert cap.engine_profile.max_total_num_tokens == KV_MEMORY // cap.engine_profile \
        .cell_size_bytes
    return cap.engine_profile.cell_size_bytes


def _vllm_token_bytes(spec: ModelSpec, version: str) -> int:
    from kvplan.engines.vllm.engine import cache_dtype
    from kvplan.engines.vllm.formats import kv_format

    dep = Deployment(spec, engine="vllm", engine_version=version, kv_dtype="auto")
    fmt = kv_format(spec, cache_dtype(dep))
    return 32 * 2 * 8 * fmt.row_bytes(128)


def test_the_reader_records_each_config_kind_as_written():
    fp8 = _llama(FP8_CONFIG).quantization.kv_cache
    assert fp8 is not None and (fp8.config, fp8.quant_method, fp8.algo, fp8.format) == (
        "fp8", "fp8", "FP8", "FP8")
    ct = _llama(_laguna_qc()).quantization
    assert ct.kv_cache is not None and ct.kv_cache.config == "compressed-tensors"
    s = ct.kv_cache.scheme
    assert s is not None
    assert (s.type, s.num_bits, s.dynamic, s.strategy, s.symmetric) == (
        "float", 8, False, "tensor", True)
    assert ct.layout == "fp8-ct" and not ct.warnings
    flat = _llama(_modelopt_flat(dynamic=True)).quantization.kv_cache
    assert flat is not None and flat.format == "FP8" and not flat.nested
    assert _llama({"quant_method": "fp8"}).quantization.kv_cache is None


def test_a_format_no_engine_takes_is_named_without_an_engines_policy():
    q = _llama({**FP8_CONFIG, "kv_cache_quant_algo": "INT8"}).quantization
    assert q.kv_cache is not None and q.kv_cache.format == "INT8"
    (w,) = q.warnings
    assert "kv_cache_quant_algo 'INT8'" in w and "FP8, NVFP4" in w
    int_scheme = _llama({**_laguna_qc(), "kv_cache_scheme": {"type": "int", "num_bits": 8}})
    assert int_scheme.quantization.kv_cache is not None
    assert int_scheme.quantization.kv_cache.format is None
    assert any("kv_cache_scheme" in w for w in int_scheme.quantization.warnings)


def test_a_malformed_request_is_a_clear_error():
    from kvplan.core.errors import SpecError

    with pytest.raises(SpecError, match="kv_cache_quant_algo"):
        _llama({**FP8_CONFIG, "kv_cache_quant_algo": 8})
    with pytest.raises(SpecError, match=r"kv_cache_scheme\.num_bits"):
        _llama({**_laguna_qc(), "kv_cache_scheme": {"type": "float", "num_bits": "8"}})


@pytest.mark.parametrize("version, token_bytes", [
    ("0.5.17", BF16), ("0.5.18", FP8), ("0.5.23", FP8), (None, FP8)])
def test_sglang_takes_an_fp8_configs_request_from_0_5_18(version, token_bytes):
    assert _sglang_cell(_llama(FP8_CONFIG), version) == token_bytes


@pytest.mark.parametrize("version, token_bytes", [
    ("0.5.18", BF16), ("0.5.19", FP8), ("0.5.23", FP8)])
def test_sglang_takes_a_compressed_tensors_scheme_from_0_5_19(version, token_bytes):
    assert _sglang_cell(_llama(_laguna_qc()), version) == token_bytes


@pytest.mark.parametrize("change", [{"dynamic": True}, {"strategy": "attn_head"},
                                    {"symmetric": False}, {"num_bits": 4}])
def test_sglang_refuses_other_compressed_tensors_schemes(change):
    qc = _laguna_qc()
    qc = {**qc, "kv_cache_scheme": {**qc["kv_cache_scheme"], **change}}
    assert _sglang_cell(_llama(qc), "0.5.23") == BF16


def test_a_flat_modelopt_scheme_sglang_takes_whatever_dynamic_says_and_vllm_does_not():
    dynamic = _llama(_modelopt_flat(dynamic=True))
    static = _llama(_modelopt_flat(dynamic=False))
    assert _sglang_cell(dynamic, "0.5.23") == _sglang_cell(static, "0.5.23") == FP8
    assert _vllm_token_bytes(dynamic, "0.14.0") == BF16
    assert _vllm_token_bytes(static, "0.14.0") == FP8
    assert _vllm_token_bytes(static, "0.13.0") == BF16


@pytest.mark.parametrize("qc", [FP8_CONFIG, _laguna_qc()], ids=["fp8", "compressed-tensors"])
def test_vllm_reads_only_modelopt_requests(qc):
    assert _vllm_token_bytes(_llama(qc), "0.14.0") == BF16


@pytest.mark.parametrize("version", ["1.1.0", "1.3.0", None])
def test_trtllm_keeps_an_nvfp4_request_as_an_nvfp4_pool(version):
    qc = {"quant_method": "modelopt",
          "quantization": {"quant_algo": "NVFP4", "group_size": 16,
                           "exclude_modules": ["lm_head"], "kv_cache_quant_algo": "NVFP4"}}
    spec = _llama(qc)
    assert not spec.quantization.warnings
    cap = _cap(spec, "trtllm", version)
    assert cap.engine_profile.bytes_per_token == NVFP4
    assert cap.engine_profile.max_tokens == KV_MEMORY // NVFP4
    # vLLM 0.14 and SGLang keep the model dtype for it
    assert _vllm_token_bytes(spec, "0.14.0") == BF16
    assert _sglang_cell(spec, "0.5.23") == BF16


@pytest.mark.parametrize("qc", [FP8_CONFIG, _laguna_qc()], ids=["fp8", "compressed-tensors"])
def test_trtllm_reads_only_modelopt_requests(qc):
    assert _cap(_llama(qc), "trtllm", None).engine_profile.bytes_per_token == BF16


def test_each_engine_says_when_auto_does_not_take_the_request():
    from kvplan.engines.vllm.engine import checkpoint_kv_notes

    laguna = _llama(_laguna_qc())
    (sg,) = [n for n in _cap(laguna, "sglang", "0.5.18").notes if "asks for" in n]
    assert "an FP8 KV cache (compressed-tensors kv_cache_scheme)" in sg and "SGLang" in sg
    assert not [n for n in _cap(laguna, "sglang", "0.5.19").notes if "asks for" in n]
    (trt,) = [n for n in _cap(laguna, "trtllm", None).notes if "asks for" in n]
    assert "TensorRT-LLM" in trt
    dep = Deployment(laguna, engine="vllm", engine_version="0.14.0", kv_dtype="auto")
    (vl,) = checkpoint_kv_notes(dep)
    assert "vLLM" in vl and "ModelOpt FP8" in vl
    static = _llama(_modelopt_flat(dynamic=False))
    assert checkpoint_kv_notes(Deployment(static, engine="vllm", engine_version="0.14.0",
                                          kv_dtype="auto")) == ()
    assert "from 0.14" in checkpoint_kv_notes(Deployment(
        static, engine="vllm", engine_version="0.13.0", kv_dtype="auto"))[0]
    # a named dtype: no note
    assert not [n for n in _cap(laguna, "sglang", "0.5.18", "bf16").notes if "asks for" in n]


def test_a_request_beside_a_nested_modelopt_block():
    # vLLM reads kv_cache_quant_algo beside the nested block too (get_kv_cache_quant_algo_string
    # falls back to the outer mapping); SGLang's ModelOpt from_config reads only the nested
    # block's; TensorRT-LLM keeps the request
    qc = {"quant_method": "modelopt", "kv_cache_quant_algo": "FP8",
          "quantization": {"quant_algo": "FP8", "exclude_modules": ["lm_head"]}}
    spec = _llama(qc)
    req = spec.quantization.kv_cache
    assert req is not None and req.nested and req.beside_nested
    assert _vllm_token_bytes(spec, "0.14.0") == FP8
    assert _sglang_cell(spec, "0.5.23") == BF16
    assert _cap(spec, "trtllm", None).engine_profile.bytes_per_token == FP8
    inside = _llama({"quant_method": "modelopt", "quantization": {
        "quant_algo": "FP8", "exclude_modules": ["lm_head"], "kv_cache_quant_algo": "FP8"}})
    assert _sglang_cell(inside, "0.5.23") == FP8
