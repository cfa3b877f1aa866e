"""DeepSeek-V4-Flash's weights from its config.json alone, against its published checkpoint.

The independent figure: the tensor listing of a local deepseek-ai/DeepSeek-V4-Flash read from
its 46 safetensors headers (gogongxt/python@cbff706dc959707a9944e38e8164783122dfa32a
scripts/models/deepseek_v4_flash.md: 69,187 tensors, 158,069,433,298 values, 148.65 GiB),
summed per dtype into model_configs/deepseek-v4-flash.yaml's checkpoint block. The test below
writes that listing out again tensor by tensor (`_listing_bytes`, shapes as the listing prints
them) so that the per-dtype totals are derived here, not copied from kvplan.

Format: config.json's quantization_config says only FP8 with 128x128 blocks (scale_fmt ue8m0);
the routed experts are FP4 (int8 holding two e2m1 values, an e8m0 scale per 32) because the
config's top-level `expert_dtype` is "fp4" (vLLM models/deepseek_v4/quant_config.py
DeepseekV4FP8Config reads the field there and takes "fp4" when it is missing, as kvplan does,
with a warning).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from paths import FIXTURES

from kvplan.core.errors import BadInputError
from kvplan.core.weights import inventory, placement, weight_plan
from kvplan.sources.hfconfig import load_config_file, spec_from_config
from kvplan.sources.library import resolve

FIXTURE = FIXTURES / "hf-configs/families/deepseek-ai--DeepSeek-V4-Flash.json"

# model_configs/deepseek-v4-flash.yaml checkpoint.bytes (the listing above, per dtype)
PUBLISHED = {"I8": 141_733_920_768, "F8_E8M0": 8_858_737_664, "F8_E4M3": 6_023_020_544,
             "BF16": 2_830_518_528, "F32": 144_672_072, "I64": 18_616_320}

H, V, LAYERS, HEADS, HD, QL, OG, OL, HC = 4096, 129280, 43, 64, 512, 1024, 8, 1024, 4
E, INTER, TOPK, IHD, INH = 256, 2048, 6, 128, 64
RATIOS = [0, 0] + [4, 128] * 20 + [4]  # compress_ratios of the 43 layers (the 44th: MTP, 0)
SIZE = {"BF16": 2, "F32": 4, "I8": 1, "F8_E8M0": 1, "F8_E4M3": 1, "I64": 8, "I32": 4}


def _listing_bytes(tp: int = 1, loaded: bool = False, mtp: bool = True) -> dict[str, int]:
    """The listing's tensors, per dtype; with tp > 1 one rank's share as vLLM's
    models/deepseek_v4 splits them (wq_b / wo_a / shared w1 w3 column, wo_b / shared w2 row,
    routed experts' width, vocabulary rows; the hash tables int32 when `loaded`; everything
    else whole)."""
    out: dict[str, int] = {}

    def t(dtype: str, *shape: int) -> None:
        n = 1
        for d in shape:
            n *= d
        out[dtype] = out.get(dtype, 0) + n * SIZE[dtype]

    def fp8(o: int, i: int) -> None:  # e4m3 weight + e8m0 scale per 128 x 128 block
        t("F8_E4M3", o, i)
        t("F8_E8M0", -(-o // 128), -(-i // 128))

    def fp4(o: int, i: int) -> None:  # two e2m1 a byte + e8m0 scale per 32
        t("I8", o, i // 2)
        t("F8_E8M0", o, i // 32)

    def layer(i: int, ratio: int, is_mtp: bool) -> None:
        # attn.attn_sink: vLLM pads a rank's heads to what the kernel takes (FlashMLA's FP8
        # decode: 64 or 128 heads, models/deepseek_v4/nvidia/flashmla.py
        # get_padded_num_q_heads): 64 on every rank here
        t("F32", 64 if HEADS // tp <= 64 else 128)
        t("BF16", HD)  # attn.kv_norm
        t("BF16", QL)  # attn.q_norm
        fp8(HD, H)  # attn.wkv [512, 4096], scale [4, 32]
        fp8(OG * OL // tp, HEADS * HD // OG)  # attn.wo_a [8192, 4096], scale [64, 32]
        fp8(H, OG * OL // tp)  # attn.wo_b [4096, 8192], scale [32, 64]
        fp8(QL, H)  # attn.wq_a [1024, 4096], scale [8, 32]
        fp8(HEADS * HD // tp, QL)  # attn.wq_b [32768, 1024], scale [256, 8]
        t("BF16", H)  # attn_norm
        t("BF16", H)  # ffn_norm
        for _ in range(E):  # ffn.experts.{0-255}.w1 / w2 / w3
            fp4(INTER // tp, H)  # w1 [2048, 2048] int8, scale [2048, 128]
            fp4(H, INTER // tp)  # w2 [4096, 1024] int8, scale [4096, 64]
            fp4(INTER // tp, H)  # w3
        t("BF16", E, H)  # ffn.gate.weight [256, 4096]
        fp8(INTER // tp, H)  # shared_experts.w1 [2048, 4096], scale [16, 32]
        fp8(H, INTER // tp)  # shared_experts.w2 [4096, 2048], scale [32, 16]
        fp8(INTER // tp, H)  # shared_experts.w3
        for _ in ("attn", "ffn"):  # hc_{attn,ffn}_base [24], _fn [24, 16384], _scale [3]
            t("F32", 24)
            t("F32", 24, 4 * H)
            t("F32", 3)
        if i < 3 and not is_mtp:
            t("I32" if loaded else "I64", V, TOPK)  # ffn.gate.tid2eid [129280, 6]
        else:
            t("F32", E)  # ffn.gate.bias [256]
        if ratio:  # attn.compressor: ape [4, 1024] / [128, 512], wgate / wkv, norm [512]
            coff = 2 if ratio == 4 else 1
            t("F32", ratio, coff * HD)
            t("BF16", coff * HD, H)
            t("BF16", coff * HD, H)
            t("BF16", HD)
        if ratio == 4:  # attn.indexer: compressor ape [4, 256], norm [128], wgate / wkv
            t("F32", 4, 2 * IHD)  # [256, 4096]; weights_proj [64, 4096]; wq_b [8192, 1024]
            t("BF16", IHD)
            t("BF16", 2 * IHD, H)
            t("BF16", 2 * IHD, H)
            t("BF16", INH, H)
            fp8(INH * IHD, QL)

    rows = -(-V // 64) * 64 // tp
    t("BF16", rows, H)  # embed.weight [129280, 4096]
    t("BF16", rows, H)  # head.weight
    t("BF16", H)  # norm.weight
    t("F32", 4)  # hc_head_base [4]
    t("F32", 4, 4 * H)  # hc_head_fn [4, 16384]
    t("F32", 1)  # hc_head_scale [1]
    for i, ratio in enumerate(RATIOS):
        layer(i, ratio, False)
    if mtp:  # mtp.0: a window-only block, e_proj / h_proj, three norms, its own hc_head
        layer(LAYERS, 0, True)
        fp8(H, H)  # e_proj [4096, 4096], scale [32, 32]
        fp8(H, H)  # h_proj
        for _ in ("enorm", "hnorm", "norm"):
            t("BF16", H)
        t("F32", 4)
        t("F32", 4, 4 * H)
        t("F32", 1)
    return out


def test_the_listing_written_out_sums_to_the_published_bytes():
    assert _listing_bytes() == PUBLISHED
    # 158,069,433,298 values as the listing's header says (int8 and e8m0 counted one a byte)
    assert sum(b // SIZE[d] for d, b in PUBLISHED.items()) == 158_069_433_298


def test_config_alone_gives_the_checkpoint_bytes_exactly():
    spec = load_config_file(FIXTURE)
    assert spec.expert_quantization is not None and not spec.quantization.warnings
    assert not spec.warnings
    assert inventory(spec, spec.quantization).bytes_by_dtype() == PUBLISHED


def test_library_spec_gives_the_checkpoint_bytes_exactly():
    spec = resolve("deepseek-v4-flash")
    assert dict(spec.checkpoint.bytes_by_dtype) == PUBLISHED
    assert inventory(spec, spec.quantization).bytes_by_dtype() == PUBLISHED


def test_parameter_count_is_the_published_284b_without_mtp():
    # DeepSeek's model card: 284B total parameters. From the listing without the MTP layer:
    # FP4 experts hold two parameters a byte, e8m0 scales are no parameters, every other
    # tensor one per element (the hash tables' int64 entries included)
    by = _listing_bytes(mtp=False)
    hand = 2 * by["I8"] + by["F8_E4M3"] + by["BF16"] // 2 + by["F32"] // 4 + by["I64"] // 8
    spec = resolve("deepseek-v4-flash")
    inv = inventory(spec, spec.quantization, include_mtp=False)
    assert inv.total_params == hand == spec.num_params
    assert round(hand / 1e9) == 284
    routed = sum(t.num_params for t in inv.tensors if ".experts." in t.name)
    assert routed == 43 * 256 * 3 * INTER * H


def test_missing_expert_dtype_is_taken_as_fp4_and_said():
    raw = json.loads(FIXTURE.read_text())
    del raw["expert_dtype"]  # as in the older copy of config.json the listing prints
    spec = spec_from_config(raw, "config.json", "v4")
    (warning,) = spec.quantization.warnings
    assert "no expert_dtype" in warning and "FP4" in warning
    assert spec.warnings == (warning,)  # printed with every result
    assert inventory(spec, spec.quantization).bytes_by_dtype() == PUBLISHED
    plan = weight_plan(spec)
    assert plan is not None and "no expert_dtype" in plan.why


def test_fp8_experts_are_block_quantized_with_fp32_scales():
    # expert_dtype "fp8" (DeepSeek-V4-Flash-Base): experts FP8 128 x 128 like the rest, and
    # vLLM's scales are float32 (DeepseekV4FP8Config.is_scale_e8m0 is False)
    raw = json.loads(FIXTURE.read_text())
    raw["expert_dtype"] = "fp8"
    spec = spec_from_config(raw, "config.json", "v4-base")
    by = inventory(spec, spec.quantization).bytes_by_dtype()
    assert "I8" not in by and "F8_E8M0" not in by
    experts = 44 * E * 3 * INTER * H  # every routed expert weight, one byte a value
    assert by["F8_E4M3"] == PUBLISHED["F8_E4M3"] + experts
    expert_scales = 44 * E * 3 * (INTER // 128) * (H // 128) * 4
    fp8_scales = PUBLISHED["F8_E8M0"] - 44 * E * 3 * INTER * H // 32  # the non-expert ones
    assert by["F32"] == PUBLISHED["F32"] + expert_scales + fp8_scales * 4


def test_unknown_expert_dtype_is_refused():
    raw = json.loads(FIXTURE.read_text())
    raw["expert_dtype"] = "int3"
    with pytest.raises(BadInputError, match="expert_dtype"):
        spec_from_config(raw, "config.json", "v4")


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_per_rank_bytes_as_vllm_splits_them(tp):
    spec = resolve("deepseek-v4-flash")
    inv = inventory(spec, spec.quantization, tp=tp, padded_vocab=True)
    assert inv.bytes_by_dtype() == {k: v for k, v in sorted(
        _listing_bytes(tp, loaded=True).items(), key=lambda kv: (-kv[1], kv[0]))}
    # placement leaves the MTP layer out (loaded only for MTP speculative decoding)
    no_mtp = sum(_listing_bytes(tp, loaded=True, mtp=False).values())
    assert placement(spec, spec.quantization, tp=tp).stage_bytes == (no_mtp,)


def test_yaml_round_trip_keeps_the_v4_shapes():
    from kvplan.sources.yamlspec import spec_from_dict, spec_to_dict

    spec = replace(load_config_file(FIXTURE), name="v4")
    again = spec_from_dict(spec_to_dict(spec), "v4.yaml")
    assert again.expert_quantization == spec.expert_quantization
    assert again.quantization == spec.quantization
    assert inventory(again, again.quantization).bytes_by_dtype() == PUBLISHED


def test_yaml_expert_dtype_outside_deepseek_v4_is_refused_not_dropped():
    # only DeepSeek-V4's reader uses shapes.expert_dtype; another family would lose it silently
    from kvplan.core.errors import SpecError
    from kvplan.sources.yamlspec import spec_from_dict, spec_to_dict

    raw = spec_to_dict(replace(load_config_file(FIXTURE), name="v4"))
    assert spec_from_dict(raw, "v4.yaml").expert_quantization is not None
    raw["family"] = "deepseek_v3"
    with pytest.raises(SpecError, match="expert_dtype"):
        spec_from_dict(raw, "v4.yaml")
