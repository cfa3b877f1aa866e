"""A held-out round on real config.json files no other test had seen
(tests/fixtures/hf-configs/heldout/index.yaml: each file's source, the publisher's parameter
count and the KV bytes per token derived by hand). Every config `size` accepts gets a weights
figure from `plan`, a parameter count that agrees with the publisher's, and per-token KV
bytes equal to the hand derivation; a config kvplan cannot read is refused by name."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
import yaml
from paths import FIXTURES
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.sources.hfconfig import load_config_file

HELDOUT = FIXTURES / "hf-configs" / "heldout"
ENTRIES = yaml.safe_load((HELDOUT / "index.yaml").read_text(encoding="utf-8"))
UNITS = {"B": Decimal(10) ** 9, "T": Decimal(10) ** 12}


def _ids(entry: dict) -> str:
    return str(entry["file"]).removesuffix(".json")


def test_the_round_is_large_and_unseen():
    assert len(ENTRIES) >= 30
    assert len({e["file"] for e in ENTRIES}) == len(ENTRIES)
    seen = {p.name for p in (FIXTURES / "hf-configs").glob("*.json")}
    seen |= {p.name for p in (FIXTURES / "hf-configs" / "families").glob("*.json")}
    assert not seen & {e["file"] for e in ENTRIES}
    listed = {e["file"] for e in ENTRIES} | {"index.yaml"}
    assert {p.name for p in HELDOUT.iterdir()} == listed


@pytest.mark.parametrize("entry", ENTRIES, ids=_ids)
def test_size_reads_or_refuses_by_name(entry):
    result = CliRunner().invoke(app, ["size", str(HELDOUT / entry["file"]), "--tokens", "8k",
                                      "-f", "json"])
    if entry.get("refused"):
        assert result.exit_code == 2
        assert entry["refused"] in result.output
        return
    assert result.exit_code == 0, result.output
    if "kv_bytes_per_token" in entry:
        assert json.loads(result.stdout)["per_token_bytes"] == entry["kv_bytes_per_token"]


@pytest.mark.parametrize("entry", [e for e in ENTRIES if not e.get("refused")], ids=_ids)
def test_plan_gives_a_weights_figure(entry):
    gpus = entry.get("gpus", 1)
    split = ["-n", str(gpus)] + (["--tp", "8", "--pp", str(gpus // 8)] if gpus > 8 else [])
    result = CliRunner().invoke(app, ["plan", str(HELDOUT / entry["file"]), "--gpu", "h200",
                                      *split, "--max-model-len", "4096", "-f", "json"])
    assert result.exit_code == 0, result.output
    weights = json.loads(result.stdout)["budget"]["weights_bytes"]
    assert len(weights) == (gpus // 8 if gpus > 8 else 1) and all(w > 0 for w in weights)


def _count(path, what: str) -> int:
    from kvplan.core.weights import inventory

    tensors = [t for t in inventory(load_config_file(path)).tensors if t.place != "mtp"]
    if what == "text":
        tensors = [t for t in tensors if t.place != "vision"]
    if what == "non_embedding":
        tensors = [t for t in tensors
                   if "embed_tokens" not in t.name and not t.name.startswith("lm_head")]
    return sum(t.num_params for t in tensors)


def _bounds(value: str, kind: str) -> tuple[Decimal, Decimal]:
    """The counts that round to a stated figure ("235B": 234.5B to 235.5B; a whole number's
    trailing zeros are not significant, so "230B" is 225B to 235B); a name's figure within 2%."""
    number, unit = Decimal(value[:-1]), UNITS[value[-1]]
    if kind == "name":
        return number * unit * Decimal("0.98"), number * unit * Decimal("1.02")
    digits = value[:-1]
    if "." in digits:
        half = Decimal(5) * Decimal(10) ** (-len(digits.split(".")[1]) - 1)
    else:
        half = Decimal(5) * Decimal(10) ** (len(digits) - len(digits.rstrip("0")) - 1)
    return (number - half) * unit, (number + half) * unit


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["published"] and not e.get("refused")],
                         ids=_ids)
def test_parameters_agree_with_the_publisher(entry):
    published = entry["published"]
    got = _count(HELDOUT / entry["file"], published["count"])
    if published["kind"] == "index":  # a checkpoint's total_size: exact
        assert got * published["bytes_per_value"] == published["value"]
        return
    low, high = _bounds(str(published["value"]), published["kind"])
    assert low <= got <= high, (got, published)


# --- what the round found wrong, each on its real config ------------------------------------

NANO_NVFP4 = HELDOUT / "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"


def _stored(path):
    from kvplan.core.weights import inventory, load_format

    target, q, _ = load_format(load_config_file(path), "auto")
    return {t.name: t for t in inventory(target, q).tensors}


def test_deepseek_ref_model_type_reads_as_deepseek_v4():
    # sgl-project/DeepSeek-V4-Flash-FP8 writes model_type "deepseek_ref" beside
    # architectures DeepseekV4ForCausalLM (the class vLLM builds); its shapes are the
    # official Flash config's. kvplan once sized its cache as V4's but laid its weights out as
    # a generic decoder's: 302.3B parameters against the model card's 284B
    from kvplan.core.weights import inventory

    ref = load_config_file(HELDOUT / "sgl-project--DeepSeek-V4-Flash-FP8.json")
    official = load_config_file(FIXTURES / "hf-configs" / "families"
                                / "deepseek-ai--DeepSeek-V4-Flash.json")
    assert ref.family == "deepseek_v4"
    shapes = [{t.name: t.shape for t in inventory(s).tensors} for s in (ref, official)]
    assert shapes[0] == shapes[1]
    # no expert_dtype: the routed experts are read as vLLM's DeepseekV4FP8Config reads them
    # (FP4), and kvplan says so
    assert any("no expert_dtype" in w for w in ref.quantization.warnings)


def test_qwen3_5_vision_tower_saved_by_transformers_5_is_counted():
    # transformers 5 saves Qwen3.5's tower as model_type qwen3_5_vision (Qwen3.6-27B-NVFP4,
    # transformers_version 5.7.0); vLLM qwen3_5.py builds Qwen3-VL's Qwen3_VisionTransformer
    # for it. By hand: Conv3d patch embedding 1152 x 3 x 2 x 16 x 16 with a bias, a
    # 2,304-row position table, 27 blocks of two LayerNorms, a biased fused qkv, proj and an
    # MLP 4,304 wide, then the merger (LayerNorm over 1,152, 4 x 1152 -> itself -> 5,120,
    # biased); no deepstack mergers (deepstack_visual_indexes is empty). kvplan once left
    # the tower out ("a tower kvplan does not lay out")
    from kvplan.core.weights import inventory

    h, inter, m, out = 1152, 4304, 4 * 1152, 5120
    block = 4 * h + (3 * h * h + 3 * h) + (h * h + h) + (inter * h + inter) + (h * inter + h)
    hand = (h * 3 * 2 * 16 * 16 + h + 2304 * h + 27 * block + 2 * h + (m * m + m)
            + (out * m + out))
    spec = load_config_file(NANO_NVFP4.parent / "nvidia--Qwen3.6-27B-NVFP4")
    assert spec.vision is not None
    assert sum(t.num_params for t in inventory(spec).tensors if t.place == "vision") == hand
    assert hand == 460_730_096


def test_nemotron_h_exclude_list_names_backbone_mixer_modules():
    # nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4's hf_quant_config.json keeps some layers
    # out of NVFP4 by their checkpoint names: `backbone.layers.N.mixer.q_proj` (every
    # attention layer: Nemotron-H puts attention, MLP and MoE, like the Mamba mixer, under
    # `mixer`; vLLM nemotron_h.py maps backbone -> model). kvplan once matched none of them
    # and stored those layers in NVFP4
    excluded = json.loads((NANO_NVFP4 / "hf_quant_config.json").read_text())[
        "quantization"]["exclude_modules"]
    stored = _stored(NANO_NVFP4)
    checked = 0
    for module in excluded:
        parts = module.split(".")
        if parts[0] != "backbone" or parts[-1] not in (
                "q_proj", "k_proj", "v_proj", "o_proj", "in_proj", "out_proj"):
            continue  # lm_head, conv1d: never quantized
        sub = "self_attn" if parts[-1].endswith(("q_proj", "k_proj", "v_proj", "o_proj")) \
            else "mixer"
        weight = stored[f"model.layers.{parts[2]}.{sub}.{parts[-1]}.weight"]
        assert weight.dtype == "BF16", module
        checked += 1
    assert checked == 6 * 4 + 6 * 2  # six attention layers, six Mamba layers' in / out
    # a Mamba layer the list leaves alone stays NVFP4: layer 0's in_proj, 2,688 inputs
    # packed two a byte
    assert stored["model.layers.0.mixer.in_proj.weight"].shape == (10_304, 2688 // 2)


def test_nemotron_h_mixed_precision_reaches_experts_and_attention(tmp_path):
    # ModelOpt MIXED_PRECISION names each module as the checkpoint does
    # (NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4: "backbone.layers.1.mixer.experts.0.
    # up_proj": W4A16_NVFP4). Three entries written the same way on the Nano config (same
    # shapes): layer 1's routed experts in NVFP4 (128 experts of up 1,856 x 2,688 and down
    # 2,688 x 1,856, two e2m1 values a byte) and layer 5's q_proj in FP8 (4,096 x 2,688, one
    # byte a value). kvplan once matched none of them and weighed all in BF16
    folder = tmp_path / "nano-mixed"
    folder.mkdir()
    (folder / "config.json").write_bytes((NANO_NVFP4 / "config.json").read_bytes())
    nvfp4 = {"quant_algo": "W4A16_NVFP4", "group_size": 16}
    (folder / "hf_quant_config.json").write_text(json.dumps({
        "producer": {"name": "modelopt", "version": "0.44.0rc5"},
        "quantization": {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": None,
                         "quantized_layers": {
                             "backbone.layers.1.mixer.experts.0.up_proj": nvfp4,
                             "backbone.layers.1.mixer.experts.0.down_proj": nvfp4,
                             "backbone.layers.5.mixer.q_proj": {"quant_algo": "FP8"}}}}))
    stored = _stored(folder)
    up = stored["model.layers.1.mlp.experts.up_proj.weight"]
    down = stored["model.layers.1.mlp.experts.down_proj.weight"]
    assert up.dtype == down.dtype == "U8"
    assert up.num_bytes + down.num_bytes == 128 * 2 * 1856 * 2688 // 2 == 638_582_784
    q = stored["model.layers.5.self_attn.q_proj.weight"]
    assert (q.dtype, q.num_bytes) == ("F8_E4M3", 4096 * 2688)
    assert stored["model.layers.5.self_attn.k_proj.weight"].dtype == "BF16"
