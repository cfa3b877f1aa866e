"""vLLM --limit-mm-per-prompt: one declaration (kvplan.engines.settings, parse_mm_limits) plus
its use in the budget (kvplan.engines.vllm.budget.text_only_towers, the rule in
kvplan.engines.vllm.memory.TOWER_SKIPS).

vLLM's rule, read in its wheels: from 0.10.1, every modality the model takes at 0 makes
`supports_multimodal_inputs` False and profile_run profiles no encoder; a model class builds
no tower when all of its modalities are 0 (0.10.1-0.14 each class reads
`get_limit_per_prompt` in its __init__: llava.py, qwen2_5_vl.py, ...; from 0.15
interfaces.py `_mark_tower_model`, which gemma3_mm.py uses too). A modality left out counts
999 (config/multimodal.py `get_limit_per_prompt`)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import BadInputError, KvplanError
from kvplan.engines.settings import parse_mm_limits
from kvplan.sources.hfconfig import load_config_file

runner = CliRunner()
CONFIGS = Path(__file__).parents[2] / "fixtures" / "hf-configs"
QWEN25_VL = CONFIGS / "families" / "Qwen--Qwen2.5-VL-7B-Instruct.json"
GEMMA3 = CONFIGS / "google--gemma-3-4b-it.json"
H100 = 80 * 2**30

# Qwen2.5-VL-7B's vision tower (config.json vision_config: depth 32, hidden 1280,
# intermediate 3420, patch 14, temporal patch 2, 3 channels, spatial merge 2, out_hidden
# 3584), by hand: per block two RMSNorm weights, qkv 1280 -> 3840 and proj 1280 -> 1280
# with biases, gate/up 1280 -> 3420 and down 3420 -> 1280 with biases; the Conv3d patch
# embedding without a bias; the merger's RMSNorm and its MLP 5120 -> 5120 -> 3584 with biases
QWEN_BLOCK = (2 * 1280 + (1280 * 3840 + 3840) + (1280 * 1280 + 1280)
              + 2 * (1280 * 3420 + 3420) + (3420 * 1280 + 1280))
QWEN_TOWER_PARAMS = (32 * QWEN_BLOCK + 1280 * 3 * 2 * 14 * 14
                     + 1280 + (5120 * 5120 + 5120) + (5120 * 3584 + 3584))
QWEN_TOWER_BYTES = 2 * QWEN_TOWER_PARAMS  # bf16
# Gemma 3 4B's SigLIP (hidden 1152, intermediate 4304, 27 layers, 896 px / 14 px patches, so
# 64 x 64 = 4,096 positions) and its projector into the 2,560-wide text model, by hand: per
# layer two LayerNorms (weight + bias), q/k/v/out 1152 -> 1152 with biases, fc1 and fc2 with
# biases; the patch convolution with its bias, the position table, the post LayerNorm; the
# projector's 1152 x 2560 matrix and its RMSNorm weight
SIGLIP_LAYER = (4 * 1152 + 4 * (1152 * 1152 + 1152) + (1152 * 4304 + 4304)
                + (4304 * 1152 + 1152))
GEMMA3_TOWER_PARAMS = (27 * SIGLIP_LAYER + (1152 * 3 * 14 * 14 + 1152) + 4096 * 1152
                       + 2 * 1152 + 1152 * 2560 + 1152)
GEMMA3_TOWER_BYTES = 2 * GEMMA3_TOWER_PARAMS


def test_kvplan_counts_each_tower_as_the_hand_count():
    """The vision tensors of kvplan's inventory (place "vision") are the hand counts above:
    Qwen2.5-VL-7B's ~0.68B and Gemma 3 4B's ~0.42B vision parameters."""
    from kvplan.core.weights import inventory

    for path, hand in ((QWEN25_VL, QWEN_TOWER_PARAMS), (GEMMA3, GEMMA3_TOWER_PARAMS)):
        tensors = inventory(load_config_file(path)).tensors
        assert sum(t.num_params * t.count for t in tensors if t.place == "vision") == hand
    assert (QWEN_TOWER_PARAMS, GEMMA3_TOWER_PARAMS) == (676_550_144, 419_816_304)


# --- the flag's forms and bounds -----------------------------------------------------------

@pytest.mark.parametrize("given", [
    '{"image": 0, "video": 0}', '{"video":0,"image":0}', "image=0,video=0", " video=0 , image=0",
    "{'image': 0, 'video': 0}",  # a log's non-default args echo the Python dict
    '{"image": {"count": 0}, "video": 0}',  # 0.12 on: a modality's options with its count
    {"image": 0, "video": 0},  # a plan file's mapping
])
def test_every_form_is_one_value(given):
    assert parse_mm_limits(given) == "image=0,video=0"


@pytest.mark.parametrize("given, says", [
    ('{"image": -1}', "image must be a whole number of items, at least 0, got -1"),
    ("image=x", "image must be a whole number"),
    ('{"image": 1.5}', "got 1.5"),
    ('{"image": true}', "got True"),
    ("speech=0", "no modality 'speech'"),
    ('{"image": 0', "not a JSON object"),
    ("[0]", "takes modality=count pairs"),
    ("image", "takes modality=count pairs"),
    ("{}", "names no modality"),
    ("image=" + "9" * 5000, "image must be a whole number"),  # no int() of 5,000 digits
])
def test_a_bad_value_names_the_flag(given, says):
    with pytest.raises(BadInputError, match="^--limit-mm-per-prompt: ") as err:
        parse_mm_limits(given)
    assert says in str(err.value.message)


def test_the_cli_and_a_launch_line_refuse_it_naming_the_flag():
    res = runner.invoke(app, ["plan", str(GEMMA3), "--engine", "vllm", "--gpu", "h100",
                              "--limit-mm-per-prompt", '{"image": -1}'])
    assert res.exit_code == 2 and "--limit-mm-per-prompt" in res.stderr, res.output
    assert "Traceback" not in res.output
    res = runner.invoke(app, ["plan", str(GEMMA3), "--engine", "sglang", "--gpu", "h100",
                              "--limit-mm-per-prompt", "image=0"])
    assert res.exit_code == 2 and "vllm only" in res.stderr, res.output
    from kvplan.planning.launch import from_command

    with pytest.raises(KvplanError, match="--limit-mm-per-prompt in the command: no modality"):
        from_command("vllm serve Qwen/Qwen2.5-VL-7B-Instruct --limit-mm-per-prompt speech=0")


@pytest.mark.parametrize("words", [
    """--limit-mm-per-prompt '{"image": 0, "video": 0}'""",
    """--limit-mm-per-prompt='{"video":0,"image":0}'""",
    "--limit-mm-per-prompt image=0,video=0",
])
def test_a_launch_line_gives_it(words):
    from kvplan.planning.launch import from_command

    lp = from_command(f"vllm serve Qwen/Qwen2.5-VL-7B-Instruct {words}")
    assert lp.overrides["mm_limits"] == "image=0,video=0"


# --- the budget ---------------------------------------------------------------------------

def budget(config: Path, version: str, *flags: str) -> dict:
    res = runner.invoke(app, ["plan", str(config), "--engine", "vllm", "--engine-version",
                              version, "--gpu", "h100", "--max-model-len", "8k", *flags,
                              "-f", "json"])
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.stdout)["budget"]


def test_the_towers_spec_leaves_out_the_hand_counted_bytes():
    """The spec vLLM 0.12 builds for Qwen2.5-VL with image and video at 0 weighs the tower's
    hand-counted bytes less, tensor by tensor (before the allocator's rounding)."""
    from kvplan.engines.shared.weights import stage_weights
    from kvplan.engines.vllm.budget import text_only_towers

    spec = load_config_file(QWEN25_VL)
    text, profiled, notes = text_only_towers(spec, "image=0,video=0", (0, 12, 0))
    assert text.vision is None and profiled is None
    (full,), _ = stage_weights(spec)
    (less,), _ = stage_weights(text)
    assert full - less == QWEN_TOWER_BYTES
    assert "builds no qwen2_5_vl vision tower" in notes[0]
    # at TP 2 the tower's linears split as vLLM splits them: about half each
    (full2,), _ = stage_weights(spec, tp=2)
    (less2,), _ = stage_weights(text, tp=2)
    assert QWEN_TOWER_BYTES // 2 <= full2 - less2 < QWEN_TOWER_BYTES


@pytest.mark.parametrize("version, limits, dropped", [
    ("0.10.0", "image=0,video=0", False),  # no class read the limits before 0.10.1
    ("0.10.1", "image=0,video=0", True),  # qwen2_5_vl.py: `if get_limit_per_prompt(...)`
    ("0.12.0", '{"image": 0, "video": 0}', True),
    ("0.12.0", "image=0", False),  # video left out counts 999: the tower is built
    ("0.12.0", "image=0,video=1", False),
    ("0.15.0", "image=0,video=0", True),  # _mark_tower_model(vllm_config, {"image", "video"})
    ("0.33.0", "image=0,video=0", True),
])
def test_qwen25_vl_budget_by_release(version, limits, dropped):
    base = budget(QWEN25_VL, version)
    given = budget(QWEN25_VL, version, "--limit-mm-per-prompt", limits)
    less = base["weights_bytes"][0] - given["weights_bytes"][0]
    more = given["available_kv_cache_bytes"][0] - base["available_kv_cache_bytes"][0]
    if not dropped:
        assert less == 0 and more == 0
        return
    # as memory_allocated counts them: the tensors' bytes and at most the allocator's
    # rounding of them (well under 1%)
    assert QWEN_TOWER_BYTES <= less < QWEN_TOWER_BYTES * 1.01
    assert more == less  # the KV cache gets what the tower no longer takes
    assert any("--limit-mm-per-prompt image=0,video=0" in n for n in given["notes"])


def test_gemma3_profiles_no_encoder_from_0_10_1_and_skips_its_tower_from_0_15():
    """Gemma 3's processor takes images only: image=0 is text-only mode from 0.10.1 (no
    encoder profile: the activation peak is the text model's), but gemma3_mm.py builds the
    SigLIP tower anyway until 0.15's _mark_tower_model."""
    from kvplan.engines.vllm.budget import vllm_budget

    spec = load_config_file(GEMMA3)
    text_model = replace(spec, vision=None)
    for version, tower_dropped in (((0, 14, 0), False), ((0, 15, 0), True)):
        full = vllm_budget(spec, H100, version=version)
        zero = vllm_budget(spec, H100, version=version, mm_limits="image=0")
        bare = vllm_budget(text_model, H100, version=version)
        assert zero.activation_bytes == bare.activation_bytes < full.activation_bytes
        less = full.weights_bytes[0] - zero.weights_bytes[0]
        if tower_dropped:
            # the text model's weights, as memory_allocated counts them: the tensors and
            # the allocator's rounding (SigLIP's many small tensors: under 2%)
            assert zero.weights_bytes == bare.weights_bytes
            assert GEMMA3_TOWER_BYTES <= less < GEMMA3_TOWER_BYTES * 1.02
        else:
            assert less == 0
    # 0.10.0 has no text-only mode: the encoder profile and the tower stay
    old = vllm_budget(spec, H100, version=(0, 10, 0), mm_limits="image=0")
    assert old == vllm_budget(spec, H100, version=(0, 10, 0))


def test_gemma3_text_spec_leaves_out_the_hand_counted_bytes():
    from kvplan.engines.shared.weights import stage_weights
    from kvplan.engines.vllm.budget import text_only_towers

    spec = load_config_file(GEMMA3)
    text, _, _ = text_only_towers(spec, '{"image": 0}', (0, 15, 0))
    assert stage_weights(spec)[0][0] - stage_weights(text)[0][0] == GEMMA3_TOWER_BYTES
    kept, _, notes = text_only_towers(spec, '{"image": 0}', (0, 14, 0))
    assert kept == spec
    assert notes == ["--limit-mm-per-prompt image=0: every modality at 0, vLLM 0.14.0 runs "
                     "text-only and profiles no encoder (multimodal/registry.py "
                     "supports_multimodal_inputs)"]


def test_a_tower_kvplan_has_not_read_is_counted_and_named():
    """Gemma 4's gemma4_mm.py skips its tower in the 0.24 and 0.33 wheels; for a release in
    between that was not read, kvplan keeps the weights and names the flag."""
    from kvplan.engines.vllm.budget import text_only_towers

    spec = load_config_file(CONFIGS / "google--gemma-4-26B-A4B.json")
    assert spec.vision is not None and spec.vision.kind == "gemma4"
    kept, _, notes = text_only_towers(spec, "image=0,video=0", (0, 20, 0))
    assert kept.vision == spec.vision
    assert notes and notes[0].startswith("--limit-mm-per-prompt image=0,video=0: kvplan has "
                                         "not read whether vLLM 0.20.0 builds the gemma4")
    dropped, _, _ = text_only_towers(spec, "image=0,video=0", (0, 24, 0))
    assert dropped.vision is None


def test_explain_reads_the_limits_a_log_echoes():
    from kvplan.planning.explain import explain

    text = ("INFO 01-01 00:00:00 [utils.py:233] non-default args: {'model': "
            "'Qwen/Qwen2.5-VL-7B-Instruct', 'max_model_len': 8192, 'limit_mm_per_prompt': "
            "{'image': 0, 'video': 0}}\n"
            "INFO 01-01 00:00:05 [gpu_worker.py:276] Available KV cache memory: 51.37 GiB\n")
    result = explain(text, model=str(QWEN25_VL), gpu="h100", engine_version="0.12.0")
    assert result.settings["mm_limits"] == "{'image': 0, 'video': 0}"
    # the prediction is the budget without the tower, as `plan` gives it with the flag
    with_flag = budget(QWEN25_VL, "0.12.0", "--limit-mm-per-prompt", "image=0,video=0")
    without = budget(QWEN25_VL, "0.12.0")
    (row,) = [r for r in result.rows if r.quantity == "KV budget"]
    assert row.kvplan == with_flag["available_kv_cache_bytes"][0] \
        != without["available_kv_cache_bytes"][0]
    shell = ("vllm serve Qwen/Qwen2.5-VL-7B-Instruct --limit-mm-per-prompt "
             """'{"image":0,"video":0}'\n"""
             "INFO 01-01 00:00:05 [gpu_worker.py:276] Available KV cache memory: 51.37 GiB\n")
    result = explain(shell, model=str(QWEN25_VL), gpu="h100", engine_version="0.12.0")
    assert result.settings["mm_limits"] == '{"image":0,"video":0}'


def test_a_short_release_is_its_dot_0():
    """"0.17" is 0.17.0 and "0.15" is 0.15.0, as every release table reads them
    (kvplan.engines.shared.releases): the flag exists, the tower rule applies."""
    from kvplan.engines.vllm.memory import TOWER_SKIPS, tower_skipped

    assert tower_skipped(TOWER_SKIPS["siglip"], {"image": 0}, (0, 15)) is True
    short = budget(QWEN25_VL, "0.17", "--language-model-only")
    assert short["weights_bytes"] == budget(QWEN25_VL, "0.17.0", "--language-model-only")[
        "weights_bytes"]


def test_language_model_only_is_every_limit_at_0_from_0_17():
    """config/multimodal.py MultiModalConfig.get_limit_per_prompt returns 0 for every
    modality under --language-model-only (the 0.17.0 wheel on; 0.16.0's has no such flag)."""
    flag = budget(QWEN25_VL, "0.17.0", "--language-model-only")
    limits = budget(QWEN25_VL, "0.17.0", "--limit-mm-per-prompt", "image=0,video=0")
    full = budget(QWEN25_VL, "0.17.0")
    assert flag["weights_bytes"] == limits["weights_bytes"]
    assert QWEN_TOWER_BYTES <= full["weights_bytes"][0] - flag["weights_bytes"][0] \
        < QWEN_TOWER_BYTES * 1.01
    res = runner.invoke(app, ["plan", str(QWEN25_VL), "--engine", "vllm", "--engine-version",
                              "0.16.0", "--gpu", "h100", "--kv-memory", "10GiB",
                              "--language-model-only"])
    assert res.exit_code == 2 and "--language-model-only: vLLM 0.16.0 has no such flag" \
        in res.stderr, res.output
