"""config.json inputs that a mutation fuzzer over the real fixtures (every depth, every type,
quantization_config variants) found crashing or hanging kvplan: each is now one message with
exit 2 through `size`, `plan` and `import`, in bounded time."""

from __future__ import annotations

import json

import pytest
from hostile import alarm, invoke, one_message
from paths import FIXTURES

CONFIG = FIXTURES / "hf-configs" / "Qwen--Qwen3-8B.json"


def _with_quantization(tmp_path, qc: dict) -> str:
    raw = json.loads(CONFIG.read_text())
    raw["quantization_config"] = qc
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return str(path)


def _ct(ignore: list[str]) -> dict:
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ignore,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}}}}


COMMANDS = [("size",), ("plan", "--gpu", "h100"), ("import",)]


@pytest.mark.parametrize("qc, needle", [
    # GPTQ packs 32 // bits values into each int32: 64 bits packed none, a ZeroDivisionError
    ({"quant_method": "gptq", "bits": 64, "group_size": 128}, "'quantization_config.bits'"),
    ({"quant_method": "awq", "bits": 33, "group_size": 128}, "'quantization_config.bits'"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128,
      "dynamic": {"+:.*mlp.*": {"bits": 0}}}, "dynamic.+:.*mlp.*.bits"),
])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_packed_width_that_packs_nothing_is_one_message(tmp_path, qc, needle, command):
    path = _with_quantization(tmp_path, qc)
    one_message(invoke(command[0], path, *command[1:]), needle)


@pytest.mark.parametrize("pattern, needle", [
    # exponential in Python's backtracking matcher on a name it does not match: these hung
    ("re:(.*.*)*x", "repeats a group that itself repeats"),
    (r"re:(\w+\.?)+x", "repeats a group that itself repeats"),
    ("re:(.|.)*x", "repeats a group that branches"),
    # a name's length to the power of the repeats: 0.6 s a name at five, seconds a model
    ("re:.*.*.*.*.*x", "has 5 unbounded repeats"),
    # not a regular expression at all: re.error escaped as a traceback
    ("re:(", "is not a regular expression"),
    ("re:" + "a" * 300, "is longer than 256 characters"),
])
def test_a_module_pattern_that_cannot_be_matched_in_bounded_time_is_one_message(
        tmp_path, pattern, needle):
    path = _with_quantization(tmp_path, _ct(["lm_head", pattern]))
    with alarm(60):
        for command in COMMANDS:
            one_message(invoke(command[0], path, *command[1:]), needle)


def test_a_gptq_dynamic_pattern_is_checked_as_well(tmp_path):
    path = _with_quantization(tmp_path, {"quant_method": "gptq", "bits": 4, "group_size": 128,
                                         "dynamic": {"-:(.*.*)*x": {}}})
    with alarm(60):
        one_message(invoke("size", path), "repeats a group that itself repeats")


@pytest.mark.parametrize("ignore", [
    # published spellings: compressed-tensors `ignore` of Llama checkpoints, a GPTQModel
    # `dynamic` rule, and a bounded alternative
    ["lm_head", "re:.*lm_head"],
    ["re:model.layers.*.self_attn.*", "re:.*mlp.gate$"],
    [r"re:.*layers\.(0|1|2)\..*(q|k|v)_proj"],
])
def test_real_module_patterns_still_read(tmp_path, ignore):
    path = _with_quantization(tmp_path, _ct(ignore))
    res = invoke("size", path)
    assert res.exit_code == 0, res.output


def test_import_groups_100000_layers_in_linear_time():
    """`import` writes a spec's layers as repeat groups. Finding the period tried every period
    in turn, comparing the whole layer list each time: a config of 100,000 layers (then the most
    a config could state) took minutes. Each sequence here is 100,000 layers."""
    from kvplan.core.layers import FullAttention, SlidingWindow
    from kvplan.sources.yamlspec import layers_to_groups

    full = FullAttention(num_kv_heads=8, head_dim=128)
    other = FullAttention(num_kv_heads=4, head_dim=128)
    window = SlidingWindow(num_kv_heads=8, head_dim=128, window=4096)
    with alarm(30):
        assert layers_to_groups((full,) * 100_000) == [
            {"kind": "full", "count": 100_000, "num_kv_heads": 8, "head_dim": 128}]
        # almost periodic: every even period matched up to the last layers
        groups = layers_to_groups((full, window) * 49_999 + (other, other))
        assert len(groups) == 99_999
        # five sliding layers and one full, 16,666 times (99,996 layers), then four sliding
        groups = layers_to_groups((window,) * 5 + ((full,) + (window,) * 5) * 16_665
                                  + (full,) + (window,) * 4)
        assert groups[0]["repeat"] == 16_666 and [g["kind"] for g in groups[0]["layers"]] \
            == ["sliding", "full"] and groups[0]["layers"][0]["count"] == 5
        assert groups[1:] == [{"kind": "sliding", "count": 4, "num_kv_heads": 8,
                               "head_dim": 128, "window": 4096}]


@pytest.mark.parametrize("block", [["128", "128"], [128, 0], [128, None], [True, 128]])
def test_a_compressed_tensors_block_that_is_not_two_sizes_is_one_message(tmp_path, block):
    # scale rows and columns are the weight's sides divided by these: '128' divided an int
    qc = {"quant_method": "compressed-tensors", "format": "float-quantized",
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
              "num_bits": 8, "type": "float", "strategy": "block",
              "block_structure": block}}}}
    path = _with_quantization(tmp_path, qc)
    one_message(invoke("plan", path, "--gpu", "h100"), "block_structure")
