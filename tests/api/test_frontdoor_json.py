"""Every result the front door (kvplan.api) returns has a JSON form: kvplan.as_dict(result)
is a dict json.dumps writes (strictly: no NaN), and json.loads gives the same dict back.
Figures are checked against hand calculations, not against kvplan's own output."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

import kvplan

# Llama-3.1-8B (config.json): 32 layers x 8 KV heads x head_dim 128, K and V.
FP8_TOKEN_BYTES = 32 * 8 * 128 * 2 * 1  # 65,536: one byte an element
BF16_TOKEN_BYTES = 32 * 8 * 128 * 2 * 2  # 131,072


@pytest.fixture(scope="module")
def results() -> dict[str, object]:
    m = kvplan.model("llama-3.1-8b")
    d = kvplan.deploy(m, gpu="h100", count=4)
    traffic = ("5/s", "2k+512")
    return {
        "Model": m,
        "SizeResult": m.size("8k", kv_dtype="fp8"),
        "SizeResult (lengths)": m.size(lengths="2k,4k,4k"),
        "KVFormat": kvplan.kv_format("fp8"),
        "Deployed": d,
        "Capacity": d.capacity,
        "ConcurrencyResult": d.max_concurrency("32k"),
        "ContextResult": d.max_context(64),
        "WorkloadResult": d.fits("64x(2k+512)"),
        "Workload": kvplan.workload("64x(2k+512),8x(32k+1k)"),
        "LayoutResult": d.fewest_gpus(context="32k", concurrency=64),
        "TrafficPlan": d.traffic(*traffic, ttft="500ms", itl="50ms"),
        "TrafficLayouts": d.traffic(*traffic, ttft="500ms", itl="50ms", find_gpus=True),
    }


TYPES = ["Model", "SizeResult", "SizeResult (lengths)", "KVFormat", "Deployed", "Capacity",
         "ConcurrencyResult", "ContextResult", "WorkloadResult", "Workload", "LayoutResult",
         "TrafficPlan", "TrafficLayouts"]


@pytest.mark.parametrize("name", TYPES)
def test_every_front_door_result_round_trips_through_json(results, name):
    result = results[name]
    assert type(result).__name__ == name.split(" ")[0]
    form = kvplan.as_dict(result)
    text = kvplan.to_json(result)
    assert json.loads(text) == form
    assert json.loads(json.dumps(form, allow_nan=False)) == form


def test_the_json_forms_carry_the_figures(results):
    size = kvplan.as_dict(results["SizeResult"])
    assert size["per_token_bytes"] == FP8_TOKEN_BYTES
    assert size["request_bytes"] == FP8_TOKEN_BYTES * 8192
    lengths = kvplan.as_dict(results["SizeResult (lengths)"])
    assert lengths["per_token_bytes"] == BF16_TOKEN_BYTES
    cap = kvplan.as_dict(results["Capacity"])
    assert cap["engine"] == "vllm"
    assert cap["kv_bytes_per_token"] == BF16_TOKEN_BYTES // 4  # TP 4: 2 KV heads a GPU
    # the engine's start-up numbers come along: blocks of 16 tokens
    assert cap["engine_numbers"]["num_blocks"] * 16 == cap["engine_numbers"]["kv_cache_tokens"]
    deployed = kvplan.as_dict(results["Deployed"])
    assert deployed["capacity"] == cap
    assert deployed["deployment"]["tp"] * deployed["deployment"]["pp"] == 4
    traffic = kvplan.as_dict(results["TrafficPlan"])
    assert traffic["rate_per_s"] == "5/1"  # a Fraction, exactly, as `-f json` writes it
    assert Fraction(traffic["rate_per_s"]) == 5
    mix = kvplan.as_dict(results["Workload"])
    assert mix["shapes"] == [[[2048, 512, 1], 64], [[32768, 1024, 1], 8]]
    assert not any(key.startswith("_") for key in mix)


def test_as_dict_refuses_what_is_not_a_result():
    with pytest.raises(TypeError, match="not dict"):
        kvplan.as_dict({"a": 1})
