"""ModelOpt MIXED_PRECISION checkpoints (nvidia's NVFP4 releases of Qwen3.5/3.6 and others):
`quantized_layers` gives each module its own algorithm; every expected byte count below is
worked out by hand from the tensors vLLM's vllm/model_executor/layers/quantization/
modelopt.py create_weights makes for that algorithm:

    NVFP4 / W4A16_NVFP4  weight U8 [o, i/2] + weight_scale F8 [o, i/16] + weight_scale_2 F32
                         + input_scale F32 (4 + 4 bytes)
    FP8                  weight F8 [o, i] + weight_scale F32 + input_scale F32
    not named            weight BF16 [o, i]

The map's shape follows nvidia/Qwen3.6-35B-A3B-NVFP4's (routed experts keyed by their parent
`...mlp.experts`, shared-expert projections one by one, attention and GDN projections FP8,
`model.language_model.` names, lm_head NVFP4); the model is Qwen3.5-35B-A3B's real config
(tests/fixtures/hf-configs/families/Qwen--Qwen3.5-35B-A3B.json), the same shapes.
"""

from __future__ import annotations

import copy
import json

import pytest
from paths import FIXTURES

from kvplan.core.errors import BadInputError, SpecError
from kvplan.core.quant import linear_tensors
from kvplan.core.weights import inventory, weight_plan
from kvplan.engines.vllm.formats import kv_format
from kvplan.sources.hfconfig import spec_from_config
from kvplan.sources.quant import quantization_from_config, read_quantization

CONFIG = FIXTURES / "hf-configs" / "families" / "Qwen--Qwen3.5-35B-A3B.json"
P = "model.language_model."
NVFP4 = {"quant_algo": "W4A16_NVFP4", "group_size": 16}
FP8 = {"quant_algo": "FP8"}


def nvfp4(o: int, i: int) -> int:
    return o * i // 2 + o * i // 16 + 4 + 4


def fp8(o: int, i: int) -> int:
    return o * i + 4 + 4


def bf16(o: int, i: int) -> int:
    return 2 * o * i


def _layers() -> dict:
    layers: dict = {}
    for n in range(40):
        layers[f"{P}layers.{n}.mlp.experts"] = NVFP4
        for proj in ("gate_proj", "up_proj", "down_proj"):
            layers[f"{P}layers.{n}.mlp.shared_expert.{proj}"] = NVFP4
        if n % 4 == 3:  # full_attention_interval 4
            for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
                layers[f"{P}layers.{n}.self_attn.{proj}"] = FP8
        else:  # in_proj_b / in_proj_a left out: their fused in_proj_ba stays bf16
            for proj in ("in_proj_qkv", "in_proj_z", "out_proj"):
                layers[f"{P}layers.{n}.linear_attn.{proj}"] = FP8
    layers["lm_head"] = NVFP4
    return layers


def _config(**quant) -> dict:
    raw = json.loads(CONFIG.read_text())
    raw["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
                                  "ignore": ["mtp*"], "quantized_layers": _layers(), **quant}
    return raw


def test_each_module_is_sized_in_its_own_algorithm():
    raw = _config()
    spec = spec_from_config(raw, "nvfp4.json", "qwen3.5-nvfp4")
    bare = copy.deepcopy(raw)
    del bare["quantization_config"]
    plain = spec_from_config(bare, "bf16.json", "qwen3.5")
    # config.json: hidden 2048, 256 experts of width 512, shared expert 512, 16 heads of 256
    # with the output gate (q_proj 2 x 16 x 256), 2 KV heads, GDN key 16 x 128 and value
    # 32 x 128 heads (in_proj_qkvz: 2 x 2048 + 2 x 4096 rows), vocabulary 248320
    h, e, w = 2048, 256, 512
    saved = 0
    for n in range(40):
        saved += 3 * e * (bf16(w, h) - nvfp4(w, h))  # gate, up, down (down is h x w)
        saved += 3 * (bf16(w, h) - nvfp4(w, h))
        if n % 4 == 3:
            for o, i in ((8192, h), (512, h), (512, h), (h, 4096)):
                saved += bf16(o, i) - fp8(o, i)
        else:
            for o, i in ((12288, h), (h, 4096)):
                saved += bf16(o, i) - fp8(o, i)
    saved += bf16(248320, h) - nvfp4(248320, h)
    assert inventory(spec, spec.quantization).total_bytes == inventory(plain).total_bytes - saved
    names = {t.name: t for t in inventory(spec, spec.quantization).tensors}
    assert names["model.layers.0.linear_attn.in_proj_ba.weight"].dtype == "BF16"
    assert names["model.layers.0.mlp.shared_expert_gate.weight"].dtype == "BF16"
    assert names["model.layers.0.mlp.gate.weight"].dtype == "BF16"
    assert names["model.layers.3.self_attn.q_proj.weight"].dtype == "F8_E4M3"
    assert names["lm_head.weight"].shape == (248320, 1024)
    assert "MIXED_PRECISION" in weight_plan(spec).format


def test_hf_quant_config_json_block_reads_the_same():
    layers = _layers()
    nested = {"producer": {"name": "modelopt", "version": "0.44.0"},
              "quantization": {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": "FP8",
                               "exclude_modules": ["mtp*"], "quantized_layers": layers}}
    flat = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "ignore": ["mtp*"],
            "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"},
            "quantized_layers": layers}
    a = quantization_from_config(nested, "hf_quant_config.json")
    b = read_quantization(flat, "config.json")
    assert a.per_module == b.per_module and a.skip == b.skip == ("mtp*",)
    assert a.kv_cache is not None and b.kv_cache is not None
    assert a.kv_cache.format == b.kv_cache.format == "FP8"
    assert (a.kv_cache.config, a.kv_cache.algo, a.kv_cache.nested) == ("modelopt", "FP8", True)
    assert b.kv_cache.scheme is not None and b.kv_cache.scheme.dynamic is False
    assert not b.kv_cache.nested


def test_fp8_kv_request_makes_vllm_auto_fp8_from_0_14():
    from kvplan.engines.vllm.config import rules_for
    from kvplan.engines.vllm.formats import resolved_kv_cache_dtype

    spec = spec_from_config(_config(kv_cache_quant_algo="FP8"), "c.json", "m")
    # engine/arg_utils.py resolve_kv_cache_dtype_string: in the 0.14.0 wheel, not 0.13.0's
    assert not rules_for((0, 13, 0)).kv_dtype_from_checkpoint
    assert rules_for((0, 14, 0)).kv_dtype_from_checkpoint
    assert resolved_kv_cache_dtype(spec, "auto", True) == "fp8_e4m3"
    assert kv_format(spec, resolved_kv_cache_dtype(spec, "auto", True)).name == "fp8_e4m3"
    assert resolved_kv_cache_dtype(spec, "auto", False) == "auto"  # 0.13 and before
    assert kv_format(spec, resolved_kv_cache_dtype(spec, "auto", False)).name == "bf16"
    assert resolved_kv_cache_dtype(spec, "bf16", True) == "bfloat16"  # a named dtype wins
    plain = spec_from_config(_config(), "c.json", "m")
    assert resolved_kv_cache_dtype(plain, "auto", True) == "auto"


def test_kv_algo_vllm_does_not_take_is_named():
    from kvplan.engines.vllm.formats import resolved_kv_cache_dtype

    spec = spec_from_config(_config(kv_cache_quant_algo="NVFP4"), "c.json", "m")
    assert resolved_kv_cache_dtype(spec, "auto", True) == "auto"
    # NVFP4 is a KV format an engine takes (TensorRT-LLM): the reader records it, no warning
    assert spec.quantization.kv_cache is not None
    assert spec.quantization.kv_cache.format == "NVFP4"
    assert not spec.quantization.warnings


def test_one_nvfp4_group_size_for_the_whole_config():
    # vLLM's _from_config: the top-level group_size, else the first NVFP4 entry's
    q = read_quantization({"quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "model.layers.0.mlp.gate_proj": {"quant_algo": "NVFP4", "group_size": 32},
        "model.layers.0.mlp.up_proj": {"quant_algo": "NVFP4", "group_size": 16}}}, "c")
    assert {f.group_size for _, f in q.per_module} == {32}


def test_fused_layer_parts_must_agree():
    raw = _config()
    raw["quantization_config"]["quantized_layers"][f"{P}layers.0.linear_attn.in_proj_z"] = NVFP4
    spec = spec_from_config(raw, "c.json", "m")
    with pytest.raises(BadInputError, match="in_proj_qkvz"):
        inventory(spec, spec.quantization)


@pytest.mark.parametrize("bad", [{}, None, {"model.layers.0.mlp": "FP8"}])
def test_a_bad_map_is_refused_by_field(bad):
    with pytest.raises(SpecError, match="quantized_layers"):
        read_quantization({"quant_algo": "MIXED_PRECISION", "quantized_layers": bad}, "c")


def test_an_algo_outside_vllms_list_is_named():
    q = read_quantization({"quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "model.layers.0.mlp.gate_proj": {"quant_algo": "W4A8_AWQ"},
        "model.layers.0.mlp.up_proj": {"quant_algo": "FP8"}}}, "c")
    assert any("W4A8_AWQ" in w for w in q.warnings)
    assert [n for n, _ in q.per_module] == ["layers.0.mlp.up_proj"]
    top = read_quantization({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}, "c")
    assert not top.quantized and "W4A8_AWQ" in top.warnings[0]


def test_other_modelopt_algos_match_vllm_create_weights():
    def shapes(algo):
        q = read_quantization({"quant_method": "modelopt", "quant_algo": algo}, "c")
        return {t.suffix: (t.shape, t.dtype) for t in linear_tensors(q, 384, 512, "bf16")}
    # ModelOptFp8PcPtLinearMethod: weight_scale [out] fp32, no input_scale
    assert shapes("FP8_PER_CHANNEL_PER_TOKEN") == {"weight": ((384, 512), "F8_E4M3"),
                                                   "weight_scale": ((384,), "F32")}
    # ModelOptFp8PbWoLinearMethod: [out/128, 1, in/128, 1] fp32
    assert shapes("fp8_pb_wo") == {"weight": ((384, 512), "F8_E4M3"),
                                   "weight_scale": ((3, 1, 4, 1), "F32")}
    # MXFP8: one e8m0 exponent (a byte) per 32 values along the input
    assert shapes("MXFP8") == {"weight": ((384, 512), "F8_E4M3"),
                               "weight_scale": ((384, 16), "U8")}


def test_the_spellings_real_configs_use():
    # config.json nesting hf_quant_config.json's block, the KV algo beside it
    nested = read_quantization({"quant_method": "modelopt", "kv_cache_quant_algo": "FP8",
                                "quantization": {"quant_algo": "NVFP4", "group_size": 16,
                                                 "exclude_modules": ["lm_head"]}}, "c")
    assert (nested.layout, nested.group_size, nested.skip) == ("nvfp4", 16, ("lm_head",))
    assert nested.kv_cache is not None and nested.kv_cache.algo == "FP8"
    assert nested.kv_cache.nested and not nested.warnings
    # quant_method modelopt_mixed with the map and no quant_algo
    mixed = read_quantization({"quant_method": "modelopt_mixed", "quantized_layers": {
        "language_model.model.layers.1.self_attn.q_proj": {"quant_algo": "FP8_PB_WO"}}}, "c")
    assert [(n, q.block) for n, q in mixed.per_module] == [("layers.1.self_attn.q_proj",
                                                            (128, 128))]
    assert any("FP8_PB_WO" in w for w in mixed.warnings)  # vLLM's mixed path does not build it


# compressed-tensors with several config_groups (llm-compressor's mixed recipes, e.g. NVFP4
# routed experts beside FP8 attention and shared expert): each linear layer takes the group
# whose targets match it (vLLM compressed_tensors/utils.py find_matched_target). Tensors per
# layer as llm-compressor writes them (docs/formulas.md section 6, fp8-ct and nvfp4-ct):
# channel FP8 is a byte per value and a weight_scale [o, 1] in the model dtype (dynamic
# activations: no input scale); NVFP4 as in compressed_tensors_w4a4_nvfp4.py:
def ct_fp8_channel(o: int, i: int) -> int:
    return o * i + 2 * o


def ct_nvfp4(o: int, i: int) -> int:
    return o * i // 2 + o * i // 16 + 4 + 4  # weight_global_scale, input_global_scale


def _ct_config(groups: dict, ignore: list) -> dict:
    raw = json.loads(CONFIG.read_text())
    raw["quantization_config"] = {"quant_method": "compressed-tensors",
                                  "format": "mixed-precision", "config_groups": groups,
                                  "ignore": ignore}
    return raw


FP8_CHANNEL = {"weights": {"num_bits": 8, "type": "float", "strategy": "channel",
                           "dynamic": False, "symmetric": True},
               "input_activations": {"num_bits": 8, "type": "float", "strategy": "token",
                                     "dynamic": True}, "format": "float-quantized"}
NVFP4_GROUP = {"weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group",
                           "group_size": 16, "dynamic": False},
               "input_activations": {"num_bits": 4, "type": "float", "group_size": 16,
                                     "dynamic": "local"}, "format": "nvfp4-pack-quantized"}


def test_compressed_tensors_groups_by_target():
    groups = {
        "group_0": {**FP8_CHANNEL, "targets": [r"re:.*self_attn\.(q|k|v|o)_proj$",
                                               r"re:.*mlp\.shared_expert\.(gate|up|down)_proj$"]},
        "group_1": {**NVFP4_GROUP, "targets": [r"re:.*mlp\.experts\.\d+\.(gate|up|down)_proj$"]},
    }
    raw = _ct_config(groups, ["lm_head", "re:.*linear_attn.*", "re:.*mlp.gate$",
                              "re:.*shared_expert_gate$", "re:.*visual.*", "re:^mtp.*"])
    spec = spec_from_config(raw, "ct.json", "m")
    assert not spec.quantization.warnings
    bare = copy.deepcopy(raw)
    del bare["quantization_config"]
    h, e, w = 2048, 256, 512
    saved = 0
    for n in range(40):
        saved += 3 * e * (bf16(w, h) - ct_nvfp4(w, h))
        saved += 2 * (bf16(w, h) - ct_fp8_channel(w, h)) + bf16(h, w) - ct_fp8_channel(h, w)
        if n % 4 == 3:
            for o, i in ((8192, h), (512, h), (512, h), (h, 4096)):
                saved += bf16(o, i) - ct_fp8_channel(o, i)
    plain = spec_from_config(bare, "bf16.json", "m")
    assert inventory(spec, spec.quantization).total_bytes == inventory(plain).total_bytes - saved
    names = {t.name: t for t in inventory(spec, spec.quantization).tensors}
    assert names["model.layers.0.linear_attn.out_proj.weight"].dtype == "BF16"
    assert names["model.layers.0.mlp.experts.up_proj.weight_packed"].shape == (512, 1024)
    assert names["model.layers.0.mlp.shared_experts.down_proj.weight_scale"].shape == (h, 1)
    assert names["lm_head.weight"].dtype == "BF16"


def test_compressed_tensors_linear_target_is_the_fallback():
    groups = {"group_0": {**FP8_CHANNEL, "targets": ["Linear"]},
              "group_1": {**NVFP4_GROUP, "targets": ["re:.*mlp.experts.*"]}}
    spec = spec_from_config(_ct_config(groups, ["lm_head", "re:.*mlp.gate$"]), "ct.json", "m")
    names = {t.name: t.dtype for t in inventory(spec, spec.quantization).tensors}
    assert names["model.layers.0.mlp.experts.gate_proj.weight_packed"] == "U8"
    assert names["model.layers.0.linear_attn.in_proj_ba.weight"] == "F8_E4M3"
    assert names["model.layers.0.mlp.gate.weight"] == "BF16"
    groups["group_1"]["targets"] = ["Attention"]  # a class kvplan does not match: named
    q = read_quantization(_ct_config(groups, [])["quantization_config"], "ct.json")
    assert any("'Attention'" in x for x in q.warnings)


def test_gptq_dynamic_overrides_per_module():
    # GPTQModel's `dynamic` (vLLM gptq_utils.py get_dynamic_override): first match wins,
    # "-:" leaves a module unquantized, an override changes bits / group_size
    qc = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False,
          "dynamic": {r"-:.*mlp\.gate$": {}, r"+:.*self_attn\.o_proj": {"bits": 8},
                      r"-:.*linear_attn.*": {}}}
    raw = json.loads(CONFIG.read_text())
    raw["quantization_config"] = qc
    spec = spec_from_config(raw, "gptq.json", "m")
    names = {t.name: t for t in inventory(spec, spec.quantization).tensors}
    # int8 o_proj (2048 x 4096): qweight [4096 / 4, 2048], 32 groups of 128 along the input
    assert names["model.layers.3.self_attn.o_proj.qweight"].shape == (1024, 2048)
    assert names["model.layers.3.self_attn.o_proj.scales"].shape == (32, 2048)
    # int4 q_proj (8192 x 2048): qweight [2048 / 8, 8192]
    assert names["model.layers.3.self_attn.q_proj.qweight"].shape == (256, 8192)
    assert names["model.layers.0.linear_attn.out_proj.weight"].dtype == "BF16"
    assert names["model.layers.0.mlp.experts.up_proj.qweight"].shape == (256, 512)
    assert "lm_head.weight" in names  # the head is GPTQ's `lm_head` flag, not `dynamic`


def test_fbgemm_fp8_is_a_byte_and_a_row_scale():
    # vLLM fbgemm_fp8.py create_weights: weight e4m3 [o, i], weight_scale fp32 [o, 1]
    q = read_quantization({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
                           "modules_to_not_convert": ["lm_head"]}, "c")
    assert {t.suffix: (t.shape, t.dtype) for t in linear_tensors(q, 384, 512, "bf16")} == {
        "weight": ((384, 512), "F8_E4M3"), "weight_scale": ((384, 1), "F32")}
    assert q.skip == ("lm_head",) and not q.warnings


def test_fp8_kv_request_picks_vllms_fp8_mla_backend_on_hopper():
    # DeepSeek-R1 NVFP4 (nvidia's releases say kv_cache_quant_algo FP8): vLLM resolves auto
    # to fp8_e4m3 before choosing the MLA backend, so Hopper takes FlashMLA (blocks of 64)
    # instead of FA3 MLA (16) (v1/attention/backends/mla flashmla.py, flashattn_mla.py)
    from kvplan.engines import vllm
    raw = json.loads((FIXTURES / "hf-configs" / "deepseek-ai--DeepSeek-R1.json").read_text())
    raw["quantization_config"] = {"quant_method": "modelopt", "quantization": {
        "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16}}
    from kvplan.engines.vllm.formats import resolved_kv_cache_dtype

    spec = spec_from_config(raw, "r1.json", "r1")
    config = vllm.VllmConfig(max_model_len=8192, gpu_name="H100", compute_capability="9.0",
                             kv_cache_dtype=resolved_kv_cache_dtype(spec, "auto", True))
    (stage,) = vllm.layout(spec, config)
    assert stage.per_token_bytes == 61 * (512 + 64)  # one byte per latent value
    assert stage.bytes_per_block == 64 * stage.per_token_bytes  # 61 layers, blocks of 64
    del raw["quantization_config"]
    plain_spec = spec_from_config(raw, "r1.json", "r1")
    (plain,) = vllm.layout(plain_spec, vllm.VllmConfig(
        max_model_len=8192, gpu_name="H100",
        kv_cache_dtype=resolved_kv_cache_dtype(plain_spec, "auto", True)))
    assert plain.per_token_bytes == 61 * (512 + 64) * 2
    assert plain.bytes_per_block == 16 * plain.per_token_bytes
