"""Vision and audio towers of multimodal checkpoints in the weight inventory
(kvplan.core.weights `vision_tower`): each tower's parameters as a hand sum written here from
the model file vLLM builds it from, never kvplan's own output."""

from __future__ import annotations

import json
from dataclasses import replace

import yaml
from paths import FIXTURES

from kvplan.core.weights import inventory, placement, weight_plan
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


# Voxtral-Mini-3B-2507's audio tower (audio_config voxtral_encoder: 32 layers, hidden 1280,
# intermediate 5120, 20 heads of 64, 128 mel bins, 1500 positions), from transformers
# modeling_voxtral.py (VoxtralEncoder = Qwen2AudioEncoder, a Whisper encoder;
# VoxtralMultiModalProjector) and vLLM voxtral.py (VoxtralEncoderModel over whisper.py's
# WhisperEncoder, AudioLanguageAdapter from d_model x downsample_factor 4 = 5120):
#   conv1 1280 x 128 x 3 + bias, conv2 1280 x 1280 x 3 + bias          5,409,280
#   embed_positions 1500 x 1280                                         1,920,000
#   per layer: q / v / out 1280 x 1280 + bias, k 1280 x 1280          6,557,440
#              two LayerNorms (weight + bias)                              5,120
#              fc1 5120 x 1280 + bias, fc2 1280 x 5120 + bias        13,113,600
#   final LayerNorm                                                         2,560
#   multi_modal_projector linear_1 3072 x 5120, linear_2 3072 x 3072 25,165,824
VOXTRAL_LAYER = 4 * 1280 * 1280 + 3 * 1280 + 2 * 2 * 1280 + 2 * 5120 * 1280 + 5120 + 1280
VOXTRAL_MINI_AUDIO = (1280 * 128 * 3 + 1280 + 1280 * 1280 * 3 + 1280 + 1500 * 1280
                      + 32 * VOXTRAL_LAYER + 2 * 1280 + 3072 * 5120 + 3072 * 3072)


def test_voxtral_audio_tower_by_hand():
    raw = _config("families/mistralai--Voxtral-Mini-3B-2507")
    assert raw["text_config"]["hidden_size"] == 3072
    assert VOXTRAL_MINI_AUDIO == 662_134_784
    assert _tower_params(raw) == VOXTRAL_MINI_AUDIO
    spec = spec_from_config(raw, "config.json", name="m")
    names = {t.name for t in inventory(spec).tensors if t.place == "vision"}
    assert "audio_tower.layers.31.self_attn.k_proj.bias" not in names
    assert "audio_tower.layers.31.self_attn.q_proj.bias" in names
    assert "multi_modal_projector.linear_1.weight" in names


def test_voxtral_audio_tower_splits_over_tp_like_the_text_layers():
    # vLLM's WhisperEncoder splits q / k / v / fc1 by columns and out / fc2 by rows; the
    # adapter is whole on every rank
    spec = spec_from_config(_config("families/mistralai--Voxtral-Mini-3B-2507"),
                            "config.json", name="m")
    one = inventory(spec).bytes_where("vision")
    two = inventory(spec, tp=2).bytes_where("vision")
    layer_split = 32 * (4 * 1280 * 1280 + 2 * 5120 * 1280 + 2 * 1280 + 5120) * 2
    assert one - two == layer_split // 2


def test_an_audio_tower_kvplan_cannot_lay_out_is_not_counted():
    for change in ({"num_key_value_heads": 5}, {"num_mel_bins": None}):
        raw = _config("families/mistralai--Voxtral-Mini-3B-2507")
        raw["audio_config"].update(change)
        assert spec_from_config(raw, "config.json", name="m").audio_encoder is None


# Gemma 4 E2B / E4B's audio tower: audio_config gemma4_audio as those checkpoints release it
# (transformers configuration_gemma4.py Gemma4AudioConfig, whose defaults these are, docstring
# checkpoint google/gemma-4-e2b-it): hidden 1024, 12 layers, 8 heads of 128, subsampling
# channels 128 / 32, light convolution of 5 taps, output_proj_dims 1536, clipped linears.
# Laid out from transformers modeling_gemma4.py Gemma4AudioModel, which vLLM gemma4_mm.py
# Gemma4ForConditionalGeneration builds with AutoModel.from_config, and gemma4_mm.py
# Gemma4MultimodalEmbedder (embed_audio):
#   layer0.conv 128 x 1 x 3 x 3, layer0.norm 128 (LayerNorm, no bias)          1,280
#   layer1.conv 32 x 128 x 3 x 3, layer1.norm 32                              36,896
#   input_proj_linear 1024 x ((128 // 4) x 32 = 1024), no bias             1,048,576
#   per layer: feed_forward1 / 2: ffw_layer_1 4096 x 1024, ffw_layer_2 1024 x 4096,
#                two RMSNorms of 1024                          2 x 8,390,656
#              self_attn q / k / v / post 1024 x 1024, relative_k_proj
#                1024 x 1024, per_dim_scale 128                            5,243,008
#              lconv1d linear_start 2048 x 1024, linear_end 1024 x 1024,
#                depthwise_conv1d 1024 x 1 x 5, two RMSNorms              3,152,896
#              norm_pre_attn, norm_post_attn, norm_out                        3,072
#   output_proj 1536 x 1024 + bias 1536                                    1,574,400
#   embed_audio.embedding_projection text x 1536, no bias (its norm has no weight)
# The tower alone: 304,824,608 parameters, the "304.8M USM-style Conformer" of the encoder
# extracted from Gemma 4 (huggingface.co/rnagabh/gemma4-audio-encoder). Each of a layer's ten
# clippable linears also stores four scalar bounds (buffers: 480 values, no parameters)
GEMMA4_AUDIO_CONFIG = {
    "model_type": "gemma4_audio", "hidden_size": 1024, "num_hidden_layers": 12,
    "num_attention_heads": 8, "subsampling_conv_channels": [128, 32], "conv_kernel_size": 5,
    "residual_weight": 0.5, "attention_chunk_size": 12, "attention_context_left": 13,
    "attention_context_right": 0, "attention_logit_cap": 50.0,
    "attention_invalid_logits_value": -1.0e9, "use_clipped_linears": True,
    "rms_norm_eps": 1e-6, "gradient_clipping": 1e10, "output_proj_dims": 1536}
GEMMA4_AUDIO_LAYER = (2 * (2 * 4096 * 1024 + 2 * 1024) + 5 * 1024 * 1024 + 128
                      + 2048 * 1024 + 1024 * 1024 + 1024 * 5 + 2 * 1024 + 3 * 1024)
GEMMA4_AUDIO_TOWER = (128 * 9 + 128 + 32 * 128 * 9 + 32 + 1024 * 1024 + 12 * GEMMA4_AUDIO_LAYER
                      + 1536 * 1024 + 1536)


def _gemma4_with_audio(audio: dict | None = None) -> dict:
    # the text and vision of Gemma-4-26B-A4B's config with E2B's audio_config beside them
    raw = _config("google--gemma-4-26B-A4B")
    raw["audio_config"] = dict(GEMMA4_AUDIO_CONFIG, **(audio or {}))
    return raw


def _audio_params(raw: dict) -> tuple[int, int]:
    spec = spec_from_config(raw, "config.json", name="m")
    audio = [t for t in inventory(spec).tensors
             if t.name.startswith(("model.audio_tower.", "model.embed_audio."))]
    return sum(t.num_params for t in audio), sum(t.num_elements for t in audio)


def test_gemma4_audio_tower_by_hand():
    assert GEMMA4_AUDIO_LAYER == 25_180_288
    assert GEMMA4_AUDIO_TOWER == 304_824_608
    raw = _gemma4_with_audio()
    text = raw["text_config"]["hidden_size"]
    assert text == 2816
    params, values = _audio_params(raw)
    assert params == GEMMA4_AUDIO_TOWER + text * 1536
    assert values == params + 12 * 10 * 4  # the clipping bounds
    # the tower is placed with the vision tower (first pipeline stage), bf16, and counted
    spec = spec_from_config(raw, "config.json", name="m")
    inv = inventory(spec)
    assert inv.bytes_where("vision") == 2 * (GEMMA4_26B_VISION + values)
    assert spec.uncounted_towers == ()
    plan = weight_plan(spec)
    assert plan is not None and "gemma4_audio" not in plan.why
    names = {t.name for t in inv.tensors}
    assert {"model.audio_tower.layers.11.lconv1d.depthwise_conv1d.weight",
            "model.audio_tower.layers.0.feed_forward2.ffw_layer_1.output_max",
            "model.audio_tower.output_proj.bias",
            "model.embed_audio.embedding_projection.weight"} <= names


def test_gemma4_audio_tower_without_clipped_linears_and_by_tp():
    # use_clipped_linears false: Gemma4ClippableLinear registers no bounds
    params, values = _audio_params(_gemma4_with_audio({"use_clipped_linears": False}))
    assert params == values == GEMMA4_AUDIO_TOWER + 2816 * 1536
    # kept whole on every rank (AutoModel.from_config; embed_audio a ReplicatedLinear)
    spec = spec_from_config(_gemma4_with_audio(), "config.json", name="m")
    assert inventory(spec, tp=2).bytes_where("vision") == inventory(spec).bytes_where("vision")


def test_gemma4_audio_tower_it_cannot_lay_out_is_named():
    for change in ({"output_proj_dims": None}, {"num_attention_heads": 7},
                   {"subsampling_conv_channels": [128]}):
        spec = spec_from_config(_gemma4_with_audio(change), "config.json", name="m")
        assert spec.audio_encoder is None
        assert spec.uncounted_towers == ("audio_config (gemma4_audio)",)


def test_a_tower_kvplan_does_not_lay_out_is_named_in_the_estimate():
    # a MoonViT mixing Kimi-K2.5's biases with Kimi-K3's RMSNorms (vision_config without a
    # model_type) is neither layout: the estimate says so by its config key, while the text
    # model is still counted
    raw = _config("families/moonshotai--Kimi-K2.5")
    raw["vision_config"]["norm_type"] = "rmsnorm"
    spec = spec_from_config(raw, "config.json", name="m")
    assert spec.vision is None
    plan = weight_plan(spec)
    assert plan is not None
    assert "not counted: vision_config, a tower kvplan does not lay out" in plan.why
    # a known layout says it too (Voxtral once its audio tower is unreadable)
    raw = _config("families/mistralai--Voxtral-Mini-3B-2507")
    raw["audio_config"]["num_mel_bins"] = None
    plan = weight_plan(spec_from_config(raw, "config.json", name="m"))
    assert plan is not None and "audio_config (voxtral_encoder)" in plan.why
    # and a counted tower is not named
    plan = weight_plan(spec_from_config(_config("google--gemma-4-26B-A4B"), "config.json",
                                        name="m"))
    assert plan is not None and "not counted:" not in plan.why


# Qwen3-VL's vision encoder (vLLM qwen3_vl.py Qwen3_VisionTransformer), in Qwen3-VL-8B-Instruct
# (hidden 1152, intermediate 4304, depth 27, patch 16 over 2 frames, 2304 positions, merge
# 2 x 2 -> 4608, out 4096, three deepstack mergers):
#   patch_embed Conv3d 1152 x 3 x 2 x 16 x 16 + bias                     1,770,624
#   pos_embed 2304 x 1152                                                2,654,208
#   per block: norm1 / norm2 (w + b), qkv 3456 x 1152 + b, proj 1152 x 1152 + b,
#              linear_fc1 4304 x 1152 + b, linear_fc2 1152 x 4304 + b   15,239,504
#   merger: LayerNorm 1152 (w + b), fc1 4608 x 4608 + b, fc2 4096 x 4608 + b
#   deepstack mergers: the same with the LayerNorm over 4608
def _qwen3_vit(out: int, deepstack: int) -> int:
    h, inter, merged = 1152, 4304, 4608
    block = 4 * h + 3 * h * h + 3 * h + h * h + h + inter * h + inter + h * inter + h
    mlp = merged * merged + merged + out * merged + out
    return (h * 3 * 2 * 16 * 16 + h + 2304 * h + 27 * block + 2 * h + mlp
            + deepstack * (2 * merged + mlp))


def test_qwen3_vl_8b_matches_its_safetensors_total():
    # Qwen/Qwen3-VL-8B-Instruct's model.safetensors.index.json: metadata.total_size
    # 17,534,247,392 bytes, all bf16 (quoted from the Hub file in public notes): the text
    # decoder and the vision tower together, to the byte (tolerance 0: every tensor is laid
    # out from the config, none estimated)
    raw = _config("families/Qwen--Qwen3-VL-8B-Instruct")
    assert _tower_params(raw) == _qwen3_vit(4096, 3) == 576_388_336
    spec = spec_from_config(raw, "config.json", name="m")
    assert inventory(spec).total_bytes == 17_534_247_392


def test_qwen3_vl_towers_by_hand():
    # the 30B-A3B projects into 2048; Qwen3.5-27B's tower has no deepstack mergers and
    # projects into 5120 (qwen3_5.py builds Qwen3-VL's encoder)
    assert _tower_params(_config("families/Qwen--Qwen3-VL-30B-A3B-Instruct")) == \
        _qwen3_vit(2048, 3)
    assert _tower_params(_config("families/Qwen--Qwen3.5-27B")) == _qwen3_vit(5120, 0)


def test_qwen3_vl_tower_survives_a_yaml_round_trip():
    spec = spec_from_config(_config("families/Qwen--Qwen3-VL-8B-Instruct"), "config.json",
                            name="m")
    again = spec_from_dict(yaml.safe_load(dump_yaml(spec)), "m.yaml")
    assert again.vision == spec.vision and again.vision.num_deepstack == 3


# EXAONE-4.5-33B's vision tower (vLLM exaone4_5.py EXAONE4_5_VisionTransformer over
# qwen2_5_vl.py's Qwen2_5_VisionTransformer; hidden 2048, intermediate 5120, depth 28, 32
# heads and 8 K/V heads of 64, patch 14 over 2 frames, merge 2 x 2 -> 8192, out 5120):
#   patch_embed Conv3d 2048 x 3 x 2 x 14 x 14, no bias                  2,408,448
#   per block: two RMSNorms 2048, qkv (32 + 2 x 8) x 64 = 3072 x 2048 + b, proj
#              2048 x 2048 + b, gate / up 5120 x 2048 + b, down 2048 x 5120 + b
#   merger: RMSNorm ln_q 2048, mlp.0 8192 x 8192 + b, mlp.2 5120 x 8192 + b
EXAONE_BLOCK = (2 * 2048 + 3072 * 2048 + 3072 + 2048 * 2048 + 2048
                + 2 * (5120 * 2048 + 5120) + 2048 * 5120 + 2048)
EXAONE_4_5_VISION = (2048 * 3 * 2 * 14 * 14 + 28 * EXAONE_BLOCK + 2048 + 8192 * 8192 + 8192
                     + 5120 * 8192 + 5120)


def test_exaone_4_5_vision_tower_by_hand():
    raw = _config("families/LGAI-EXAONE--EXAONE-4.5-33B")
    assert EXAONE_4_5_VISION == 1_286_482_944
    assert _tower_params(raw) == EXAONE_4_5_VISION


# Devstral-Small-2-24B's Pixtral tower (vLLM mistral3.py, pixtral.py PixtralHFVisionModel;
# hidden 1024, intermediate 4096, 24 layers, patch 14, spatial_merge_size 2, text 5120):
#   patch_conv 1024 x 3 x 14 x 14, no bias; ln_pre 1024                    603,136
#   per layer: attention_norm, ffn_norm 1024; q / k / v / o 1024 x 1024; gate / up
#              4096 x 1024, down 1024 x 4096; no biases                 16,779,264
#   projector: norm 1024, merging_layer 1024 x 4096, linear_1 5120 x 1024,
#              linear_2 5120 x 5120 (multimodal_projector_bias false)   35,652,608
PIXTRAL_LAYER = 2 * 1024 + 4 * 1024 * 1024 + 3 * 4096 * 1024
DEVSTRAL_2_VISION = (1024 * 3 * 14 * 14 + 1024 + 24 * PIXTRAL_LAYER + 1024 + 1024 * 4096
                     + 5120 * 1024 + 5120 * 5120)


def test_devstral_pixtral_tower_by_hand_and_unquantized():
    raw = _config("families/mistralai--Devstral-Small-2-24B-Instruct")
    assert DEVSTRAL_2_VISION == 438_958_080
    assert _tower_params(raw) == DEVSTRAL_2_VISION
    # the FP8 checkpoint leaves model.vision_tower and the projector out
    # (quantization_config.modules_to_not_convert): the tower stays bf16
    spec = spec_from_config(raw, "config.json", name="m")
    vision = [t for t in inventory(spec, spec.quantization).tensors if t.place == "vision"]
    assert {t.dtype for t in vision} == {"BF16"}


def test_a_llava_with_a_pixtral_encoder_is_not_laid_out_as_clip():
    # the outer model type names the tower only when vision_config leaves its own out
    raw = _config("llava-hf--llava-1.5-7b-hf")
    raw["vision_config"]["model_type"] = "pixtral"
    spec = spec_from_config(raw, "config.json", name="m")
    assert spec.vision is None and spec.uncounted_towers == ("vision_config (pixtral)",)


# LFM2.5-VL-1.6B's SigLIP2 NaFlex tower (vLLM lfm2_vl.py, siglip2.py; hidden 1152,
# intermediate 4304, 27 layers, patch 16, 256 positions, downsample_factor 2,
# projector_hidden_size 2048, text 2048, projector biases, no projector LayerNorm):
#   patch_embedding 1152 x 768 + bias, position_embedding 256 x 1152       1,180,800
#   per layer: two LayerNorms (w + b), q / k / v / out 1152 x 1152 + b, fc1 4304 x 1152
#              + b, fc2 1152 x 4304 + b                                  15,239,504
#   post_layernorm (w + b)                                                     2,304
#   linear_1 2048 x 4608 + b, linear_2 2048 x 2048 + b                    13,635,584
SIGLIP2_LAYER = 4 * 1152 + 4 * (1152 * 1152 + 1152) + 4304 * 1152 + 4304 + 1152 * 4304 + 1152
LFM2_5_VL_VISION = (1152 * 768 + 1152 + 256 * 1152 + 27 * SIGLIP2_LAYER + 2 * 1152
                    + 2048 * 4608 + 2048 + 2048 * 2048 + 2048)


def test_lfm2_vl_siglip2_tower_by_hand():
    raw = _config("families/LiquidAI--LFM2.5-VL-1.6B")
    assert raw["text_config"]["hidden_size"] == 2048
    assert LFM2_5_VL_VISION == 426_285_296
    assert _tower_params(raw) == LFM2_5_VL_VISION
    raw["projector_use_layernorm"] = True  # a projector LayerNorm: not laid out
    assert spec_from_config(raw, "config.json", name="m").vision is None


# Kimi-K2.5's MoonViT (vision_config vt_*: 27 blocks, hidden 1152, intermediate 4304, patch 14,
# a 64 x 64 position grid, merge 2 x 2; no attn_bias / linear_bias / patch_embed_proj_bias /
# norm_type / mm_projector_type keys, so vLLM kimi_k25_vit.py MoonViT3dPretrainedModel's
# defaults apply: biases everywhere, LayerNorms, the "patchmerger" projector; mm_hidden_size
# 1152 equals the tower's width, so KimiK25Config makes it the text width 7168):
#   patch_embed.proj 1152 x 3 x 14 x 14 + bias 1152                        678,528
#   patch_embed.pos_emb 64 x 64 x 1152 (the time table is a buffer)       4,718,592
#   per block: wqkv 3456 x 1152 + 3456, wo 1152 x 1152 + 1152          5,313,024
#              fc0 4304 x 1152 + 4304, fc1 1152 x 4304 + 1152          9,921,872
#              LayerNorms norm0 / norm1, weight and bias                  4,608
#   final_layernorm                                                       2,304
#   mm_projector.pre_norm LayerNorm of 1152                               2,304
#   mm_projector.proj.0 4608 x 4608 + 4608 (4 merged patches x 1152)   21,238,272
#   mm_projector.proj.2 7168 x 4608 + 7168                             33,037,312
K25_BLOCK = 5_313_024 + 9_921_872 + 4_608
K25_ENCODER = 678_528 + 4_718_592 + 27 * K25_BLOCK + 2_304
K25_TOWER = K25_ENCODER + 2_304 + 21_238_272 + 33_037_312


def test_kimi_k25_moonvit_by_hand():
    assert K25_BLOCK == (3456 * 1152 + 3456 + 1152 * 1152 + 1152 + 4304 * 1152 + 4304
                         + 1152 * 4304 + 1152 + 4 * 1152)
    # the model card's "MoonViT, 400M" vision encoder: 416,866,032 without the projector
    assert K25_ENCODER == 416_866_032
    raw = _config("families/moonshotai--Kimi-K2.5")
    assert _tower_params(raw) == K25_TOWER == 471_143_920
    spec = spec_from_config(raw, "config.json", name="m")
    assert spec.uncounted_towers == ()
    plan = weight_plan(spec)
    assert plan is not None and "not counted:" not in plan.why
    # the tower stays in bf16 beside the int4 experts, on the first pipeline stage
    inv = inventory(spec, spec.quantization)
    vision = [t for t in inv.tensors if t.place == "vision"]
    assert {t.dtype for t in vision} == {"BF16"}
    assert sum(t.num_bytes for t in vision) == 2 * K25_TOWER


def test_kimi_k25_matches_its_checkpoint_listing():
    # gogongxt/python@d2644104bc43890ee0cd101aac98cf27a9d81e14 scripts/models/kimi_k2.5.md, a
    # report printed from a local copy of the checkpoint's 64 safetensors: 170,738,182,128
    # values in all (int4 experts packed eight to an int32, their bf16 group scales and
    # weight_shape pairs counted as stored), the vision tower and projector tensors listed as
    # in the hand sum above
    spec = spec_from_config(_config("families/moonshotai--Kimi-K2.5"), "config.json", name="m")
    inv = inventory(spec, spec.quantization)
    assert sum(inv.elements_by_dtype().values()) == 170_738_182_128
    assert sum(t.num_elements for t in inv.tensors if t.place == "vision") == K25_TOWER


def test_kimi_k25_projector_is_whole_on_every_rank():
    # KimiK25MultiModalProjector: ReplicatedLinear proj.0 / proj.2; the blocks' wqkv / fc0
    # column-parallel and wo / fc1 row-parallel (QKVParallelLinear, MLP2): at TP 2 each rank
    # holds half of every block's linear weights and biases of wqkv / fc0, and all of wo / fc1's
    # biases
    spec = spec_from_config(_config("families/moonshotai--Kimi-K2.5"), "config.json", name="m")

    def vision(tp: int) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in inventory(spec, tp=tp).tensors:
            if t.place == "vision":
                key = "proj" if t.name.startswith("mm_projector.proj") else "other"
                out[key] = out.get(key, 0) + t.num_elements
        return out

    one, two = vision(1), vision(2)
    assert one["proj"] == two["proj"] == 21_238_272 + 33_037_312
    split = 27 * (3456 * 1152 + 3456 + 1152 * 1152 + 4304 * 1152 + 4304 + 1152 * 4304)
    assert one["other"] - two["other"] == split // 2


def test_kimi_k25_moonvit_survives_a_yaml_round_trip():
    spec = spec_from_config(_config("families/moonshotai--Kimi-K2.5"), "config.json", name="m")
    back = spec_from_dict(yaml.safe_load(dump_yaml(spec)), "m.yaml")
    assert back.vision == spec.vision and back.vision is not None
    assert back.vision.kind == "kimi_k25"


# Qwen2.5-Omni's thinker towers (vLLM 0.33.0 qwen2_5_omni_thinker.py
# Qwen2_5OmniThinkerForConditionalGeneration: audio_tower is transformers'
# Qwen2_5OmniAudioEncoder as is, visual qwen2_5_vl.py's Qwen2_5_VisionTransformer; talker.* and
# token2wav.* are mapped to None and never loaded). No whole Qwen2.5-Omni config.json was found,
# so this one is written here: the 7B's text shapes and towers of the widths its classes name
# (audio d_model 1280, 32 layers, ffn 5120, 128 mel bins, output_dim 3584; vision hidden 1280,
# intermediate 3420, depth 32, patch 14 over 2 frames, merge 2 x 2, out 3584)
QWEN2_5_OMNI = {
    "architectures": ["Qwen2_5OmniModel"], "model_type": "qwen2_5_omni",
    "thinker_config": {
        "model_type": "qwen2_5_omni_thinker",
        "text_config": {"model_type": "qwen2_5_omni_text", "hidden_size": 3584,
                        "intermediate_size": 18944, "num_attention_heads": 28,
                        "num_key_value_heads": 4, "num_hidden_layers": 28,
                        "vocab_size": 152064, "max_position_embeddings": 32768,
                        "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
        "audio_config": {"model_type": "qwen2_5_omni_audio_encoder", "d_model": 1280,
                         "encoder_attention_heads": 20, "encoder_ffn_dim": 5120,
                         "encoder_layers": 32, "num_mel_bins": 128,
                         "max_source_positions": 1500, "output_dim": 3584},
        "vision_config": {"model_type": "qwen2_5_omni_vision_encoder", "depth": 32,
                          "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                          "in_channels": 3, "patch_size": 14, "spatial_merge_size": 2,
                          "temporal_patch_size": 2, "out_hidden_size": 3584},
    },
}
#   audio: conv1 1280 x 128 x 3 + b, conv2 1280 x 1280 x 3 + b, audio_bos_eos_token 2 x 3584;
#   per layer two LayerNorms (w, b), q / v / out 1280 x 1280 + b, k 1280 x 1280 (no bias),
#   fc1 5120 x 1280 + b, fc2 1280 x 5120 + b; ln_post (w, b); proj 3584 x 1280 + b
OMNI_AUDIO_LAYER = 2 * 2 * 1280 + 4 * 1280 * 1280 + 3 * 1280 + 2 * 5120 * 1280 + 5120 + 1280
QWEN2_5_OMNI_AUDIO = (1280 * 128 * 3 + 1280 + 1280 * 1280 * 3 + 1280 + 2 * 3584
                      + 32 * OMNI_AUDIO_LAYER + 2 * 1280 + 3584 * 1280 + 3584)
#   vision: patch_embed 1280 x 3 x 2 x 14 x 14 (no bias); per block two RMSNorms 1280, qkv
#   3840 x 1280 + b, proj 1280 x 1280 + b, gate / up 3420 x 1280 + b, down 1280 x 3420 + b;
#   merger RMSNorm ln_q 1280, mlp.0 5120 x 5120 + b, mlp.2 3584 x 5120 + b
OMNI_VISION_BLOCK = (2 * 1280 + 3840 * 1280 + 3840 + 1280 * 1280 + 1280
                     + 2 * (3420 * 1280 + 3420) + 1280 * 3420 + 1280)
QWEN2_5_OMNI_VISION = (1280 * 3 * 2 * 14 * 14 + 32 * OMNI_VISION_BLOCK + 1280
                       + 5120 * 5120 + 5120 + 3584 * 5120 + 3584)


def test_qwen2_5_omni_thinker_towers_by_hand():
    assert (QWEN2_5_OMNI_AUDIO, QWEN2_5_OMNI_VISION) == (639_647_232, 676_550_144)
    spec = spec_from_config(QWEN2_5_OMNI, "config.json", name="m")
    assert spec.uncounted_towers == ()
    tensors = inventory(spec).tensors
    audio = sum(t.num_params for t in tensors if t.name.startswith("thinker.audio_tower."))
    visual = sum(t.num_params for t in tensors if t.name.startswith("thinker.visual."))
    assert (audio, visual) == (QWEN2_5_OMNI_AUDIO, QWEN2_5_OMNI_VISION)
    assert _tower_params(QWEN2_5_OMNI) == QWEN2_5_OMNI_AUDIO + QWEN2_5_OMNI_VISION
    # transformers' audio encoder is plain nn.Linear: whole on every rank under TP
    two = [t for t in inventory(spec, tp=2).tensors if t.name.startswith("thinker.audio_")]
    assert sum(t.num_params for t in two) == QWEN2_5_OMNI_AUDIO


def test_qwen2_5_omni_vision_without_its_width_stays_uncounted():
    # Qwen2_5OmniVisionEncoderConfig defaults hidden_size to 3,584 while the encoder is
    # 1,280 wide (some configs say embed_dim): a config without hidden_size is not guessed
    raw = json.loads(json.dumps(QWEN2_5_OMNI))
    del raw["thinker_config"]["vision_config"]["hidden_size"]
    spec = spec_from_config(raw, "config.json", name="m")
    assert spec.vision is None
    assert spec.uncounted_towers == (
        "thinker_config.vision_config (qwen2_5_omni_vision_encoder)",)
