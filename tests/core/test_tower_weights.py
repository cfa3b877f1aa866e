"""Vision and audio towers of multimodal checkpoints in the weight inventory
(kvplan.core.weights `vision_tower`): each tower's parameters as a hand sum written here from
the model file vLLM builds it from, never kvplan's own output."""

from __future__ import annotations

import json
from dataclasses import replace

import yaml
from paths import FIXTURES

from kvplan.core.weights import inventory, placement
from kvplan.sources.hfconfig import spec_from_config
from kvplan.sources.yamlspec import dump_yaml, spec_from_dict

CONFIGS = FIXTURES / "hf-configs"


def _config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def _tower_params(raw: dict) -> int:
    spec = spec_from_config(raw, "config.json", name="m")
    return sum(t.num_params for t in inventory(spec).tensors if t.place == "vision")


# Gemma-4-26B-A4B's vision tower (vision_config gemma4_vision: 27 layers, hidden 1152,
# intermediate 4304, 16 heads and 16 KV heads of 72, patch 16, position_embedding_size 10240,
# standardize true), from transformers modeling_gemma4.py Gemma4VisionModel, which vLLM
# gemma4_mm.py builds with AutoModel.from_config, and gemma4_mm.py Gemma4MultimodalEmbedder:
#   patch_embedder.input_proj 1152 x (3 x 16 x 16), no bias              884,736
#   patch_embedder.position_embedding_table 2 x 10240 x 1152         23,592,960
#   per layer: q / k / v / o 1152 x 1152 (16 x 72 = 1152), no biases   5,308,416
#              q_norm, k_norm 72 each (v_norm has no weight)                 144
#              gate / up 4304 x 1152, down 1152 x 4304               14,874,624
#              four RMSNorms of 1152                                      4,608
#   std_bias, std_scale 1152 each                                         2,304
#   embed_vision.embedding_projection 2816 x 1152 (text hidden 2816)  3,244,032
GEMMA4_LAYER = 4 * 1152 * 1152 + 2 * 72 + 3 * 4304 * 1152 + 4 * 1152
GEMMA4_26B_VISION = (1152 * 3 * 16 * 16 + 2 * 10240 * 1152 + 27 * GEMMA4_LAYER + 2 * 1152
                     + 2816 * 1152)


def test_gemma4_vision_tower_by_hand():
    raw = _config("google--gemma-4-26B-A4B")
    assert raw["text_config"]["hidden_size"] == 2816  # the projector's text side above
    assert GEMMA4_26B_VISION == 572_794_416
    assert _tower_params(raw) == GEMMA4_26B_VISION


def test_gemma4_vision_tower_is_bf16_and_on_the_first_stage():
    spec = spec_from_config(_config("google--gemma-4-26B-A4B"), "config.json", name="m")
    inv = inventory(spec)
    vision = [t for t in inv.tensors if t.place == "vision"]
    assert {t.dtype for t in vision} == {"BF16"}
    assert inv.bytes_where("vision") == 2 * GEMMA4_26B_VISION
    names = {t.name for t in vision}
    assert "model.vision_tower.encoder.layers.26.mlp.down_proj.linear.weight" in names
    assert "model.embed_vision.embedding_projection.weight" in names
    # the tower sits with the embedding on the first of two pipeline stages
    one = placement(spec, pp=2).stage_bytes
    two = placement(replace(spec, vision=None), pp=2).stage_bytes
    assert one[0] - two[0] == 2 * GEMMA4_26B_VISION and one[1] == two[1]


def test_gemma4_vision_tower_survives_a_yaml_round_trip():
    spec = spec_from_config(_config("google--gemma-4-26B-A4B"), "config.json", name="m")
    again = spec_from_dict(yaml.safe_load(dump_yaml(spec)), "m.yaml")
    assert again.vision == spec.vision


def test_gemma4_vision_tower_it_cannot_lay_out_is_not_counted():
    # clipped linears keep clamp buffers per linear, not laid out; a config that does not
    # state `standardize` leaves std_bias / std_scale open: the tower is left out, never guessed
    for change in ({"use_clipped_linears": True}, {"standardize": None},
                   {"position_embedding_size": None}):
        raw = _config("google--gemma-4-26B-A4B")
        raw["vision_config"].update(change)
        assert spec_from_config(raw, "config.json", name="m").vision is None
