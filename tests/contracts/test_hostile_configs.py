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
