"""Weights for every config kvplan reads: the tensor inventory (kvplan.core.weights) lays out a
family it does not model by name as a generic decoder, so `plan`, `import` and the front door
never stop at "no parameter count" for a config whose KV cache `size` sizes. Numbers are
hand sums or a published safetensors total, never kvplan's own output."""

from __future__ import annotations

import json

import pytest
from paths import FIXTURES
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.weights import estimable, inventory, supported, weight_plan
from kvplan.sources.hfconfig import spec_from_config
from kvplan.sources.weights import estimate_weights

CONFIGS = FIXTURES / "hf-configs"


def _config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def _params(raw: dict) -> int:
    spec = spec_from_config(raw, "config.json", name="m")
    return sum(t.num_params for t in inventory(spec).tensors)


# granite-4.0-micro's published shape (GraniteMoeHybrid with every layer attention and no
# experts; ibm-granite/granite-4.0-micro): 40 layers of hidden 2560, 40 heads, 8 KV heads,
# the shared MLP 8192 wide, a tied 100,352-token vocabulary
GRANITE_MICRO = {
    "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
    "hidden_size": 2560, "num_hidden_layers": 40, "num_attention_heads": 40,
    "num_key_value_heads": 8, "intermediate_size": 8192, "shared_intermediate_size": 8192,
    "num_local_experts": 0, "num_experts_per_tok": 0, "layer_types": ["attention"] * 40,
    "vocab_size": 100352, "tie_word_embeddings": True, "max_position_embeddings": 131072,
    "mamba_n_heads": 128, "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1,
    "mamba_d_conv": 4, "mamba_expand": 2, "torch_dtype": "bfloat16"}

# Qwen3.5 / Qwen3.6 27B's text model (transformers' Qwen3_5Config test preset of the 27B)
QWEN3_5_27B = {
    "architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
    "tie_word_embeddings": False, "text_config": {
        "model_type": "qwen3_5_text", "attn_output_gate": True, "full_attention_interval": 4,
        "head_dim": 256, "hidden_size": 5120, "intermediate_size": 17408,
        "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
        "linear_num_value_heads": 48, "linear_value_head_dim": 128,
        "mamba_ssm_dtype": "float32", "max_position_embeddings": 262144,
        "num_attention_heads": 24, "num_hidden_layers": 64, "num_key_value_heads": 4,
        "tie_word_embeddings": False, "vocab_size": 248320, "dtype": "bfloat16"}}


def test_qwen2_vl_7b_matches_its_safetensors_index_total():
    # tests/fixtures/hf-configs/SOURCES.md: the checkpoint's model.safetensors.index.json
    # states metadata.total_size 16,582,751,232 bytes (bf16)
    spec = spec_from_config(_config("Qwen--Qwen2-VL-7B-Instruct"), "config.json", name="m")
    assert supported(spec) is None
    inv = inventory(spec)
    assert inv.total_bytes == 16_582_751_232
    # the vision encoder by hand (transformers Qwen2VisionTransformerPretrainedModel): Conv3d
    # patches 1280 x 3 x 2 x 14 x 14; 32 blocks of two LayerNorms, qkv 1280 -> 3840 and proj
    # (biased), fc1 / fc2 1280 <-> 5120 (biased); the merger's LayerNorm and 5120 -> 5120 ->
    # 3584 (biased)
    h = 1280
    block = 4 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * 4 * h + 4 * h) + (4 * h * h + h)
    vision = (1280 * 3 * 2 * 14 * 14 + 32 * block + 2 * h
              + (4 * h * 4 * h + 4 * h) + (4 * h * 3584 + 3584))
    assert sum(t.num_params for t in inv.tensors if t.place == "vision") == vision
    # the text model: untied embeddings, q/k/v with biases (o without), a gated MLP
    d = 3584
    layer = (d * d + d) + 2 * (d * 512 + 512) + d * d + 3 * d * 18944 + 2 * d
    assert sum(t.num_params for t in inv.tensors) == vision + 2 * 152064 * d + 28 * layer + d


def test_granite_4_micro_weights_by_hand():
    spec = spec_from_config(GRANITE_MICRO, "config.json", name="m")
    assert supported(spec) is not None and estimable(spec) is None
    # tied embedding; per layer q and o 2560 x 2560, k and v 2560 x (8 x 64), the gated
    # shared MLP 3 x 2560 x 8192, two norms; the final norm
    layer = 2 * 2560 * 2560 + 2 * 2560 * 512 + 3 * 2560 * 8192 + 2 * 2560
    assert _params(GRANITE_MICRO) == 100352 * 2560 + 40 * layer + 2560 == 3_402_836_480


def test_a_granite_4_h_mamba2_layer_by_hand():
    # granite-4.0-h-micro's mixer (GraniteMoeHybridMambaLayer): 64 heads of 64, 128 states,
    # one B/C group, a 4-wide convolution with a bias, no projection biases
    raw = {**GRANITE_MICRO, "hidden_size": 2048, "num_attention_heads": 32,
           "num_hidden_layers": 2, "layer_types": ["mamba", "attention"],
           "mamba_n_heads": 64, "mamba_d_head": 64, "shared_intermediate_size": 8192}
    inner, conv_dim, heads = 64 * 64, 64 * 64 + 2 * 128, 64
    mixer = (2048 * (inner + conv_dim + heads)  # in_proj: x, z, B, C, dt
             + conv_dim * 4 + conv_dim  # depthwise conv and its bias
             + 3 * heads + inner  # dt_bias, A_log, D; the gated norm
             + inner * 2048)  # out_proj
    attention = 2 * 2048 * 2048 + 2 * 2048 * (8 * 64)
    mlp, norms = 3 * 2048 * 8192, 2 * 2048
    assert _params(raw) == (100352 * 2048 + mixer + attention + 2 * (mlp + norms) + 2048)


def test_qwen3_5_27b_text_weights_by_hand():
    # Qwen3-Next's layout (vLLM qwen3_5.py reuses Qwen3NextDecoderLayer): 48 gated delta-net
    # layers, 16 gated-attention layers (q_proj twice the query width, q/k norms), a gated MLP
    # 17,408 wide everywhere; untied embeddings
    h, vh, kh, vd, kd = 5120, 48, 16, 128, 128
    key, value = kh * kd, vh * vd
    conv = 2 * key + value
    deltanet = (h * (2 * key + 2 * value) + h * 2 * vh  # in_proj_qkvz, in_proj_ba
                + conv * 4 + 2 * vh + vd  # conv1d, dt_bias and A_log, the shared norm
                + value * h)  # out_proj
    attention = h * 2 * 24 * 256 + 2 * h * 4 * 256 + 24 * 256 * h + 2 * 256
    mlp, norms = 3 * h * 17408, 2 * h
    expected = 2 * 248320 * h + 48 * deltanet + 16 * attention + 64 * (mlp + norms) + h
    assert _params(QWEN3_5_27B) == expected


def test_the_estimate_is_a_generic_decoder_only_when_nothing_better_is_known():
    spec = spec_from_config(GRANITE_MICRO, "config.json", name="m")
    plan = weight_plan(spec)
    assert plan is not None and "generic decoder" in plan.why
    assert plan.stage_bytes == (2 * 3_402_836_480,)  # bf16; 100,352 is a multiple of 64
    # a published parameter count or checkpoint is preferred (the caller spreads it)
    from dataclasses import replace

    assert weight_plan(replace(spec, num_params=3_400_000_000)) is None


@pytest.mark.parametrize("raw", [
    GRANITE_MICRO, QWEN3_5_27B, "Qwen--Qwen2-VL-7B-Instruct", "google--gemma-4-26B-A4B"])
def test_plan_gives_a_weights_figure_for_configs_size_reads(tmp_path, raw):
    # the four configs `plan` refused with "has no parameter count"
    raw = _config(raw) if isinstance(raw, str) else raw
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    runner = CliRunner()
    sized = runner.invoke(app, ["size", str(path), "-t", "4096"])
    assert sized.exit_code == 0, sized.output
    planned = runner.invoke(app, ["plan", str(path), "--gpu", "h200", "--max-model-len",
                                  "8192", "-f", "json"])
    assert planned.exit_code == 0, planned.output
    assert "no parameter count" not in planned.output
    assert estimate_weights(raw, str(path)).total_params > 0


def test_the_qwen2_vl_tower_survives_a_yaml_round_trip():
    import yaml

    from kvplan.sources.yamlspec import dump_yaml, spec_from_dict

    spec = spec_from_config(_config("Qwen--Qwen2-VL-7B-Instruct"), "config.json", name="m")
    again = spec_from_dict(yaml.safe_load(dump_yaml(spec)), "m.yaml")
    assert again.vision == spec.vision and again.vision.temporal_patch_size == 2
    assert inventory(again).total_bytes == 16_582_751_232


def test_mamba_130m_matches_its_published_parameter_count():
    # state-spaces/mamba-130m-hf: 129,135,360 parameters. By hand (vLLM mamba.py MambaMixer):
    # a tied 50,280 x 768 embedding; per layer a norm, in_proj 768 -> 2 x 1536, the conv
    # (1536 x 4 + bias), x_proj 1536 -> 48 + 2 x 16, dt_proj 48 -> 1536 (+ bias), A_log
    # 1536 x 16, D, out_proj 1536 -> 768; no MLP; the final norm
    raw = {"architectures": ["MambaForCausalLM"], "model_type": "mamba", "hidden_size": 768,
           "num_hidden_layers": 24, "vocab_size": 50280, "intermediate_size": 1536,
           "state_size": 16, "conv_kernel": 4, "expand": 2, "time_step_rank": 48,
           "use_bias": False, "use_conv_bias": True, "tie_word_embeddings": True}
    layer = (768 + 768 * 3072 + 1536 * 4 + 1536 + 1536 * 80 + 48 * 1536 + 1536
             + 1536 * 16 + 1536 + 1536 * 768)
    assert _params(raw) == 50280 * 768 + 24 * layer + 768 == 129_135_360


def test_whisper_large_v3_matches_its_published_parameter_count():
    # openai/whisper-large-v3: 1,543,490,560 parameters (its model card's 1.55B). By hand
    # (transformers modeling_whisper.py): the encoder's two convolutions over 128 mel bins,
    # 1,500 positions and 32 blocks; the decoder's 51,866-token embedding (tied to proj_out),
    # 448 positions and 32 blocks with a cross-attention each; LayerNorms with biases
    raw = {"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper",
           "d_model": 1280, "encoder_layers": 32, "decoder_layers": 32,
           "encoder_attention_heads": 20, "decoder_attention_heads": 20,
           "encoder_ffn_dim": 5120, "decoder_ffn_dim": 5120, "num_mel_bins": 128,
           "vocab_size": 51866, "max_source_positions": 1500, "max_target_positions": 448}
    d = 1280
    ln, attention = 2 * d, 3 * (d * d + d) + d * d  # q, v, out biased; k not
    mlp = (d * 5120 + 5120) + (5120 * d + d)
    encoder = ((d * 128 * 3 + d) + (d * d * 3 + d) + 1500 * d
               + 32 * (ln + attention + ln + mlp) + ln)
    decoder = 51866 * d + 448 * d + 32 * (2 * (ln + attention) + ln + mlp) + ln
    assert _params(raw) == encoder + decoder == 1_543_490_560


def test_lfm2_short_convolutions_and_its_adjusted_mlp_by_hand():
    # LFM2-1.2B's published shape: 16 layers of 2048 (attention at 6 of them, 32 heads, 8 KV
    # heads), 65,536 tied tokens; intermediate_size 12,288 auto-adjusted (vLLM lfm2.py
    # Lfm2MLP): int(2 x 12288 / 3) = 8192, a multiple of 256
    raw = {"architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2", "hidden_size": 2048,
           "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
           "vocab_size": 65536, "intermediate_size": 12288, "block_auto_adjust_ff_dim": True,
           "block_multiple_of": 256, "block_ffn_dim_multiplier": 1.0, "conv_L_cache": 3,
           "conv_bias": False, "full_attn_idxs": [2, 5, 8, 10, 12, 14],
           "tie_word_embeddings": True, "max_position_embeddings": 128000}
    spec = spec_from_config(raw, "config.json", name="m")
    assert spec.intermediate_size == 8192
    h = 2048
    mlp, norms = 3 * h * 8192, 2 * h
    conv = h * 3 * h + h * 3 + h * h  # in_proj to B, C, x; the depthwise conv; out_proj
    attention = 2 * h * h + 2 * h * 512
    assert _params(raw) == 65536 * h + 10 * (conv + mlp + norms) + 6 * (
        attention + mlp + norms) + h


def test_qwen2_5_vl_7b_matches_its_published_parameter_count():
    # Qwen/Qwen2.5-VL-7B-Instruct: 8,292,166,656 parameters, 676,550,144 of them the vision
    # encoder (the Hub's count; 16,584,333,312 bf16 bytes). Its published shape: the Qwen2
    # text model of Qwen2-VL-7B; the vision encoder 32 blocks of 1280 with RMSNorms, a biased
    # qkv / proj and a biased gated MLP 3,420 wide, the merger's RMSNorm and 5120 -> 5120 ->
    # 3584 (biased)
    raw = {**_config("Qwen--Qwen2-VL-7B-Instruct"),
           "architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
           "vision_config": {"depth": 32, "hidden_act": "silu", "hidden_size": 1280,
                             "intermediate_size": 3420, "num_heads": 16, "in_chans": 3,
                             "out_hidden_size": 3584, "patch_size": 14,
                             "spatial_merge_size": 2, "spatial_patch_size": 14,
                             "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31],
                             "tokens_per_second": 2, "temporal_patch_size": 2}}
    spec = spec_from_config(raw, "config.json", name="m")
    inv = inventory(spec)
    h = 1280
    block = 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + 3 * h * 3420 + 2 * 3420 + h
    vision = 1280 * 3 * 2 * 14 * 14 + 32 * block + h + (4 * h * 4 * h + 4 * h) + (
        4 * h * 3584 + 3584)
    assert sum(t.num_params for t in inv.tensors if t.place == "vision") == vision == 676_550_144
    assert sum(t.num_params for t in inv.tensors) == 8_292_166_656
    assert inv.total_bytes == 16_584_333_312


@pytest.mark.parametrize("raw", [
    {"architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1", "hidden_size": 1024,
     "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
     "head_dim": 128, "intermediate_size": 2048, "vocab_size": 1000, "mamba_d_ssm": 2048,
     "mamba_n_heads": 32, "mamba_d_head": 64, "mamba_d_state": 128, "mamba_d_conv": 4,
     "mamba_n_groups": 1, "mamba_expand": 2, "tie_word_embeddings": False},
    {"architectures": ["IQuestLoopCoderForCausalLM"], "model_type": "iquest_loopcoder",
     "hidden_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 8,
     "num_key_value_heads": 2, "intermediate_size": 2048, "vocab_size": 1000, "loop_num": 3,
     "tie_word_embeddings": False},
    "google--gemma-4-26B-A4B"])
def test_per_layer_blocks_survive_a_yaml_round_trip(raw):
    import yaml

    from kvplan.sources.yamlspec import dump_yaml, spec_from_dict

    raw = _config(raw) if isinstance(raw, str) else raw
    spec = spec_from_config(raw, "config.json", name="m")
    again = spec_from_dict(yaml.safe_load(dump_yaml(spec)), "m.yaml")
    assert again.blocks == spec.blocks is not None
    assert inventory(again).total_bytes == inventory(spec).total_bytes


def test_gemma_4_moe_layers_keep_their_dense_mlp():
    # vLLM gemma4.py Gemma4DecoderLayer: self.mlp (intermediate_size 2,112) on every layer
    # and, with num_experts, 128 experts of 704 beside it
    spec = spec_from_config(_config("google--gemma-4-26B-A4B"), "config.json", name="m")
    names = {t.name for t in inventory(spec).tensors if t.layer == 0}
    assert {"model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.down_proj.weight"} <= names
    dense = [t for t in inventory(spec).tensors if t.name.startswith("model.layers.0.mlp.up_proj")]
    assert [t.shape for t in dense] == [(2112, 2816)]


@pytest.mark.parametrize("path", sorted(CONFIGS.rglob("*.json")), ids=lambda p: p.stem)
def test_every_fixture_config_size_reads_has_a_weights_estimate(path):
    # the rule `plan` follows: a config whose KV cache kvplan sizes never ends in "no
    # parameter count"
    from kvplan.core.errors import SpecError

    try:
        spec = spec_from_config(json.loads(path.read_text()), str(path), name=path.stem)
    except SpecError:
        pytest.skip("refused by name: no KV figure either")
    assert estimable(spec) is None
    assert sum(t.num_params for t in inventory(spec).tensors) > 0


def test_import_plan_and_the_front_door_count_one_parameter_total(tmp_path):
    """The one estimate: `kvplan import` (estimate_weights), the planner's parameter split
    (traffic, what-if prefill) and the front door's traffic all count a config.json without a
    published num_params tensor by tensor, and none stops at "no parameter count"."""
    import kvplan
    from kvplan.planning.compute import param_split
    from kvplan.planning.plan import _read_fraction

    # Llama-3.1-8B by hand: a 128,256 x 4,096 embedding and an untied LM head of the same
    # shape; per layer q and o 4,096 x 4,096, k and v 1,024 x 4,096, a gated MLP 3 x 14,336 x
    # 4,096 and two norms; the final norm. Meta's checkpoint states 8,030,261,248.
    layer = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096 + 2 * 4096
    by_hand = 2 * 128256 * 4096 + 32 * layer + 4096
    assert by_hand == 8_030_261_248
    for name, expected in (("meta-llama--Llama-3.1-8B-Instruct", by_hand),
                           ("google--gemma-4-26B-A4B", None)):
        raw = _config(name)
        path = tmp_path / name / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(raw))
        imported = estimate_weights(raw, str(path)).total_params
        spec = spec_from_config(raw, str(path), name="m")
        assert spec.num_params is None
        assert param_split(spec).total_params == imported
        # the decode floor reads the share the same split gives (no untied input table, only
        # the experts a batch routes to), as for a model with a published count
        assert _read_fraction(spec, 1) == param_split(spec).read_fraction(1) < 1
        assert expected is None or imported == expected
        traffic = kvplan.deploy(str(path), gpu="h200").traffic(2, "8x(2k+512)")
        assert traffic.gpus_per_replica == 1 and traffic.replicas_by_memory >= 1
        planned = CliRunner().invoke(app, ["plan", str(path), "--gpu", "h200",
                                           "--requests", "8x(2k+512)", "--rate", "2"])
        assert planned.exit_code == 0 and "no parameter count" not in planned.output, \
            planned.output


def test_plan_names_why_it_cannot_size_the_weights(tmp_path):
    # Nemotron Parse without encoder.args: `size` sizes its KV (self- and cross-attention),
    # but the RADIO encoder's width and depth are nowhere in the config, so its weights are
    # not guessed; `plan` stops with the missing shape and what the user can give instead
    raw = {"architectures": ["NemotronParseForConditionalGeneration"],
           "model_type": "nemotron_parse", "is_encoder_decoder": True,
           "image_size": [2048, 1648], "encoder": {"patch_size": 16},
           "decoder": {"d_model": 1024, "decoder_layers": 10, "decoder_attention_heads": 16,
                       "max_position_embeddings": 9000, "decoder_ffn_dim": 4096,
                       "vocab_size": 52_000, "tie_word_embeddings": True}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    runner = CliRunner()
    assert runner.invoke(app, ["size", str(path), "-t", "4096"]).exit_code == 0
    planned = runner.invoke(app, ["plan", str(path), "--gpu", "h100"])
    assert planned.exit_code == 2, planned.output
    assert "the RADIO encoder's shapes (encoder.args)" in planned.stderr
    assert "--weights-memory" in planned.stderr and "num_params" in planned.stderr
    assert "Traceback" not in planned.output
    # the measured weights it asks for are enough
    given = runner.invoke(app, ["plan", str(path), "--gpu", "h100", "--weights-memory",
                                "2GiB"])
    assert given.exit_code == 0, given.output
    # `kvplan import` writes the spec (its KV is read) and says why it carries no num_params
    imported = runner.invoke(app, ["import", str(path)])
    assert imported.exit_code == 0, imported.output
    assert "num_params" not in imported.stdout
    assert "the RADIO encoder's shapes (encoder.args)" in imported.stderr
