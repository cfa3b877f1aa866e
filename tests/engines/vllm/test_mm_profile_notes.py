"""Every multimodal model under vLLM names the encoder profile kvplan does not model.

vLLM 0.33.0 v1/worker/gpu_model_runner.py `profile_run`: with any modality above 0 it asks
the processor for the modality with the most tokens per item, builds a dummy batch of it
(`_get_mm_dummy_batch`, the model's `get_dummy_mm_data`), runs it through the model's encoder
and keeps the outputs in the encoder cache through the dummy forward. V0's
worker/model_runner.py `profile_run` puts the dummy multimodal data into its dummy sequences.
kvplan models that pass for Gemma 3's SigLIP, LLaVA's CLIP and Llama 4
(kvplan.engines.vllm.memory.encoder_profile) and Qwen3-VL's dummy video in 0.11-0.14
(kvplan.engines.vllm.mm_profile); every other tower is named in the budget's notes, and a
text-only run (every modality 0, from 0.10.1: multimodal/registry.py
supports_multimodal_inputs) says nothing of it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.engines.vllm.budget import multimodal_profile, text_only_towers, vllm_budget
from kvplan.engines.vllm.memory import batch_settings
from kvplan.sources.hfconfig import load_config_file

CONFIGS = Path(__file__).parents[2] / "fixtures" / "hf-configs"
FAMILIES = CONFIGS / "families"


def _note(path, limits=None, version=(0, 33, 0)):
    spec = load_config_file(path)
    reduced, profiled, _ = text_only_towers(spec, limits, version)
    batch = batch_settings(version, 80 * 2**30, "H100", 8192)
    mm, buffers, note = multimodal_profile(reduced, profiled, limits, version, batch, 8192)
    assert (mm, buffers) == (None, 0)
    return note


@pytest.mark.parametrize("path, tower", [
    (CONFIGS / "Qwen--Qwen2-VL-7B-Instruct.json", "qwen2_vl vision tower"),
    (FAMILIES / "Qwen--Qwen2.5-VL-7B-Instruct.json", "qwen2_5_vl vision tower"),
    (FAMILIES / "google--gemma-4-31B-it.json", "gemma4 vision tower"),
    (FAMILIES / "LGAI-EXAONE--EXAONE-4.5-33B.json", "exaone4_5 vision tower"),
    (FAMILIES / "moonshotai--Kimi-K2.5.json", "kimi_k25 vision tower"),
    (FAMILIES / "mistralai--Voxtral-Mini-3B-2507.json", "audio tower"),
])
def test_unmodelled_towers_are_named(path, tower):
    note = _note(path)
    assert note is not None and tower in note
    assert "under vLLM 0.33.0 is not modelled" in note
    assert "encodes a dummy batch of the modality with the most tokens per item" in note


def test_a_tower_the_weights_leave_out_is_named_by_its_config_key():
    # GLM-4.5V's vision_config is one kvplan does not lay out (ModelSpec.uncounted_towers)
    spec = load_config_file(FAMILIES / "zai-org--GLM-4.5V.json")
    assert spec.vision is None
    assert any(t.startswith("vision_config") for t in spec.uncounted_towers)
    note = _note(FAMILIES / "zai-org--GLM-4.5V.json")
    assert note is not None and "vision_config" in note and "not modelled" in note
    # image and video at 0: text-only, no encoder profiled, nothing said
    assert _note(FAMILIES / "zai-org--GLM-4.5V.json", "image=0,video=0") is None


@pytest.mark.parametrize("path", [CONFIGS / "google--gemma-3-4b-it.json",
                                  CONFIGS / "llava-hf--llava-1.5-7b-hf.json",
                                  CONFIGS / "meta-llama--Llama-4-Scout-17B-16E-Instruct.json"])
def test_modelled_towers_under_v1_say_nothing_more(path):
    # memory.encoder_profile counts their dummy images (its own "VLM encoder profile" note)
    assert _note(path) is None


def test_v0_names_the_encoder_inside_the_dummy_sequences():
    # 0.6.5 runs V0; even Gemma 3's SigLIP, modelled under V1, is named there
    for path in (CONFIGS / "Qwen--Qwen2-VL-7B-Instruct.json",
                 CONFIGS / "llava-hf--llava-1.5-7b-hf.json"):
        note = _note(path, version=(0, 6, 5))
        assert note is not None and "under vLLM 0.6.5 is not modelled" in note
        assert "dummy multimodal data into its dummy sequences" in note


def test_text_only_says_nothing():
    path = FAMILIES / "Qwen--Qwen2.5-VL-7B-Instruct.json"
    assert _note(path, "image=0,video=0") is None
    # one modality still on: the encoder is profiled
    assert _note(path, "image=0") is not None


def test_text_models_say_nothing():
    assert _note(FAMILIES / "zai-org--GLM-4.5.json") is None


def test_the_note_reaches_the_budget_and_not_with_a_given_activation():
    spec = load_config_file(FAMILIES / "Qwen--Qwen2.5-VL-7B-Instruct.json")
    kw = dict(gpu_memory_bytes=80 * 2**30, gpu_name="H100", max_model_len=8192,
              version=(0, 33, 0))
    notes = vllm_budget(spec, **kw).notes
    assert sum("multimodal encoder profile" in n for n in notes) == 1
    given = vllm_budget(spec, activation_bytes=2 * 2**30, **kw).notes
    assert not any("multimodal encoder profile" in n for n in given)


def test_audio_tower_of_an_encoder_decoder_is_its_own_encoder():
    spec = load_config_file(FAMILIES / "mistralai--Voxtral-Mini-3B-2507.json")
    assert spec.audio_encoder is not None
    whisper_like = replace(spec, layout=replace(spec.layout, encoder_decoder=True))
    batch = batch_settings((0, 33, 0), 80 * 2**30, "H100", 8192)
    assert multimodal_profile(whisper_like, None, None, (0, 33, 0), batch, 8192) \
        == (None, 0, None)


@pytest.mark.parametrize("version, named", [((0, 10, 0), False), ((0, 10, 1), True),
                                            ((0, 33, 0), True)])
def test_skip_mm_profiling_is_named_from_the_release_that_has_it(version, named):
    # config skip_mm_profiling: absent from the 0.10.0 wheel, in 0.10.1's config/__init__.py
    note = _note(CONFIGS / "Qwen--Qwen2-VL-7B-Instruct.json", version=version)
    assert note is not None and ("--skip-mm-profiling" in note) == named
