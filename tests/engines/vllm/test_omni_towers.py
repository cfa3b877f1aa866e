"""vLLM's Omni thinkers under --limit-mm-per-prompt: which tower each modality's 0 drops, and
the multimodal profile kvplan names as not modelled.

vLLM 0.33.0's wheel: qwen3_omni_moe_thinker.py and qwen2_5_omni_thinker.py build
`audio_tower` inside `_mark_tower_model(vllm_config, "audio")` and `visual` inside
`_mark_tower_model(vllm_config, {"image", "video"})` (model_executor/models/interfaces.py: a
tower is built without weights when every one of its modalities is 0). Qwen2.5-Omni's 0.10.1
__init__ reads `get_limit_per_prompt("audio")` and image / video the same way, 0.10.0's does
not; Qwen3-Omni's class first ships in 0.11.1, which builds both towers whatever the limits,
and is read with `_mark_tower_model` in the 0.15.0 and 0.33.0 wheels.

The towers' bytes are the counts of tests/core/test_tower_weights.py (Qwen2.5-Omni, by hand)
and tests/sources/test_family_config_excerpts.py (Qwen3-Omni-30B-A3B, the checkpoint's
safetensors listing: thinker.audio_tower 647,927,168 values, thinker.visual 538,631,408), in
bf16, two bytes each."""

from __future__ import annotations

from pathlib import Path

import pytest
from core.test_tower_weights import QWEN2_5_OMNI, QWEN2_5_OMNI_AUDIO, QWEN2_5_OMNI_VISION

from kvplan.engines.shared.weights import stage_weights
from kvplan.engines.vllm.budget import multimodal_profile, text_only_towers
from kvplan.engines.vllm.memory import batch_settings
from kvplan.sources.hfconfig import load_config_file, spec_from_config

QWEN3_OMNI_FILE = (Path(__file__).parents[2] / "fixtures" / "hf-configs" / "families"
                   / "Qwen--Qwen3-Omni-30B-A3B-Instruct.json")
QWEN3_OMNI_AUDIO_BYTES = 2 * 647_927_168
QWEN3_OMNI_VISUAL_BYTES = 2 * 538_631_408


def _qwen3_omni():
    return load_config_file(QWEN3_OMNI_FILE)


def _qwen2_5_omni():
    return spec_from_config(QWEN2_5_OMNI, "config.json", name="m")


CASES = [(_qwen3_omni, "qwen3_omni", QWEN3_OMNI_AUDIO_BYTES, QWEN3_OMNI_VISUAL_BYTES),
         (_qwen2_5_omni, "qwen2_5_omni", 2 * QWEN2_5_OMNI_AUDIO, 2 * QWEN2_5_OMNI_VISION)]


def _weights(spec) -> int:
    (total,), _ = stage_weights(spec)
    return total


@pytest.mark.parametrize("load, kind, audio_bytes, visual_bytes", CASES)
def test_each_modality_drops_its_own_tower(load, kind, audio_bytes, visual_bytes):
    spec = load()
    assert (spec.vision.kind, spec.audio_encoder.kind) == (kind, kind)
    full = _weights(spec)
    no_audio, _, notes = text_only_towers(spec, "audio=0", (0, 33, 0))
    assert no_audio.audio_encoder is None and no_audio.vision == spec.vision
    assert full - _weights(no_audio) == audio_bytes
    assert f"builds no {kind} audio tower" in notes[0]
    no_visual, profiled, notes = text_only_towers(spec, "image=0,video=0", (0, 33, 0))
    assert no_visual.vision is None and no_visual.audio_encoder == spec.audio_encoder
    assert full - _weights(no_visual) == visual_bytes
    assert profiled is not None  # audio is still on: the profile run still encodes
    # video left out counts 999: the vision encoder stays
    kept, _, notes = text_only_towers(spec, "image=0", (0, 33, 0))
    assert kept == spec and notes == []
    text, profiled, _ = text_only_towers(spec, "audio=0,image=0,video=0", (0, 33, 0))
    assert (text.vision, text.audio_encoder, profiled) == (None, None, None)
    assert full - _weights(text) == audio_bytes + visual_bytes


@pytest.mark.parametrize("load, version, says", [
    (_qwen2_5_omni, (0, 10, 0), "kept"),  # no class read the limits before 0.10.1
    (_qwen2_5_omni, (0, 10, 1), "dropped"),  # qwen2_5_omni_thinker.py get_limit_per_prompt
    (_qwen3_omni, (0, 11, 1), "kept"),  # builds both towers whatever the limits
    (_qwen3_omni, (0, 12, 0), "unread"),  # between 0.11.1 and 0.15.0: not read
    (_qwen3_omni, (0, 15, 0), "dropped"),  # _mark_tower_model
])
def test_by_release(load, version, says):
    spec = load()
    out, _, notes = text_only_towers(spec, "audio=0", version)
    assert (out.audio_encoder is None) == (says == "dropped")
    assert any("kvplan has not read whether" in n for n in notes) == (says == "unread")


def _profile_note(spec, limits, version=(0, 33, 0)):
    reduced, profiled, _ = text_only_towers(spec, limits, version)
    batch = batch_settings(version, 80 * 2**30, "H100", 8192)
    return multimodal_profile(reduced, profiled, limits, version, batch, 8192)


@pytest.mark.parametrize("load, name", [(_qwen3_omni, "Qwen3-Omni"),
                                        (_qwen2_5_omni, "Qwen2.5-Omni")])
@pytest.mark.parametrize("limits", [None, "audio=0", "image=0,video=0"])
def test_the_profile_is_named_as_not_modelled(load, name, limits):
    mm, buffers, note = _profile_note(load(), limits)
    assert (mm, buffers) == (None, 0)
    assert note is not None and note.startswith(f"{name}'s multimodal profile under vLLM "
                                                "0.33.0 is not modelled")


@pytest.mark.parametrize("version", [(0, 12, 0), (0, 33, 0)])
def test_text_only_profiles_no_encoder_and_says_nothing_of_it(version):
    # every modality 0: no encoder is profiled, whether or not the towers are built
    assert _profile_note(_qwen3_omni(), "audio=0,image=0,video=0", version) == (None, 0, None)
