"""Experts in every config kvplan reads: ERNIE 4.5's MoE keys read exactly (vLLM
model_executor/models/ernie45_moe.py), and a config whose keys say it has experts that kvplan
does not read for its family refused by name, never weighed as a dense model."""

from __future__ import annotations

import json

import pytest
from paths import FIXTURES
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import SpecError
from kvplan.core.layers import FullAttention
from kvplan.core.weights import estimable, inventory
from kvplan.planning.compute import param_split
from kvplan.sources.hfconfig import load_config_file, spec_from_config

# ERNIE-4.5-21B-A3B's shapes as its model card and config.json publish them (no complete
# config.json copy was found to commit; these are the keys vLLM ernie45_moe.py reads):
# 28 layers, 20 query / 4 KV heads over hidden 2,560, a 12,288-wide dense MLP, 64 experts of
# 1,536 with 6 per token and 2 shared, MoE from layer 1 on every layer, a tied vocabulary of
# 103,424. Model card: "21B total parameters, 3B activated per token".
ERNIE_21B = {
    "architectures": ["Ernie4_5_MoeForCausalLM"], "model_type": "ernie4_5_moe",
    "hidden_act": "silu", "hidden_size": 2560, "intermediate_size": 12288,
    "max_position_embeddings": 131072, "num_attention_heads": 20, "num_key_value_heads": 4,
    "num_hidden_layers": 28, "rms_norm_eps": 1e-05, "vocab_size": 103424, "rope_theta": 500000,
    "use_bias": False, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "moe_num_experts": 64, "moe_num_shared_experts": 2, "moe_layer_start_index": 1,
    "moe_intermediate_size": 1536, "moe_k": 6, "moe_layer_interval": 1,
    "moe_use_aux_free": True}
# ERNIE-4.5-300B-A47B (model card: 54 layers, 64 / 8 heads, 64 experts with 8 per token;
# "300B total, 47B activated"): hidden 8,192, dense MLP 28,672, experts of 3,584, MoE from
# layer 3, no shared experts (stated: Ernie4_5_MoeConfig's default would be 2), untied.
ERNIE_300B = {
    **ERNIE_21B, "hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64,
    "num_key_value_heads": 8, "num_hidden_layers": 54, "tie_word_embeddings": False,
    "moe_num_shared_experts": 0, "moe_layer_start_index": 3, "moe_intermediate_size": 3584,
    "moe_k": 8}


def _ernie(raw: dict) -> tuple:
    spec = spec_from_config(raw, "ernie", name="ernie")
    return spec, sum(t.num_params for t in inventory(spec).tensors)


def test_ernie_4_5_21b_a3b_parameters_by_hand():
    # vLLM ernie45_moe.py: Ernie4_5_MoeAttention q / o 2560 x 2560, k / v 512 x 2560 (head_dim
    # 2560 / 20 = 128, 4 KV heads), no biases (use_bias false); Ernie4_5_MoeDecoderLayer: MoE
    # where (i + 1) % moe_layer_interval == 0 and moe_layer_start_index <= i <=
    # moe_layer_end_index (27, the last), so layer 0 keeps a 12,288-wide gated MLP and layers
    # 1-27 an Ernie4_5_MoeMoE: gate 64 x 2560 (no bias) and its e_score_correction_bias (64),
    # 64 experts of 3 x 2560 x 1536, shared experts one MLP 1536 x 2 = 3,072 wide; two norms
    # a layer, the final norm, one tied 103,424 x 2560 table
    h, vocab = 2560, 103_424
    attention = 2 * h * h + 2 * 512 * h + 2 * h
    moe = 64 * h + 64 + 64 * 3 * h * 1536 + 3 * h * 3072
    hand = vocab * h + 28 * attention + 3 * h * 12288 + 27 * moe + h
    assert hand == 21_825_437_888
    spec, total = _ernie(ERNIE_21B)
    assert spec.layers == (FullAttention(4, 128),) * 28
    assert (spec.num_experts, spec.num_experts_per_token, spec.moe_intermediate_size,
            spec.shared_expert_intermediate_size, spec.first_dense_layers,
            spec.moe_layer_step) == (64, 6, 1536, 3072, 1, 1)
    assert total == hand
    # active: the 6 of 64 routed experts a token uses, on 27 layers
    active = hand - 27 * (64 - 6) * 3 * h * 1536
    split = param_split(spec)
    assert (split.total_params, split.active_params) == (hand, active) == (
        21_825_437_888, 3_352_150_208)
    # the model card's "21B" and "3B" (ERNIE-4.5-21B-A3B): whole billions
    assert (hand // 10**9, active // 10**9) == (21, 3)
    # the router's bias as the checkpoint names it (load_weights maps moe_statics onto gate)
    names = {t.name for t in inventory(spec).tensors}
    assert {"model.layers.1.mlp.gate.weight",
            "model.layers.1.mlp.moe_statics.e_score_correction_bias",
            "model.layers.1.mlp.shared_experts.down_proj.weight",
            "model.layers.0.mlp.down_proj.weight"} <= names
    assert "model.layers.0.mlp.gate.weight" not in names


def test_ernie_4_5_300b_a47b_parameters_by_hand():
    # the same model file: layers 0-2 dense (moe_layer_start_index 3), 51 MoE layers of 64
    # experts of 3 x 8192 x 3584 and no shared expert; q / o 8192 x 8192, k / v 1024 x 8192;
    # an untied embedding and LM head
    h, vocab = 8192, 103_424
    attention = 2 * h * h + 2 * 1024 * h + 2 * h
    moe = 64 * h + 64 + 64 * 3 * h * 3584
    hand = 2 * vocab * h + 54 * attention + 3 * 3 * h * 28672 + 51 * moe + h
    active = hand - 51 * (64 - 8) * 3 * h * 3584
    assert (hand, active) == (299_484_163_264, 47_926_586_560)
    spec, total = _ernie(ERNIE_300B)
    assert total == hand
    assert param_split(spec).active_params == active
    # "300B total, 47B activated": within 0.2% of 300B; 47 whole billions active
    assert abs(hand - 300 * 10**9) < 0.002 * 300 * 10**9
    assert active // 10**9 == 47


def test_ernie_moe_interval_and_end_index():
    # vLLM Ernie4_5_MoeDecoderLayer's rule with moe_layer_interval 2 and moe_layer_end_index
    # 4 on 8 layers: (i + 1) % 2 == 0 and 1 <= i <= 4 -> MoE on layers 1 and 3 only; layers
    # 5 and 7 stay dense although the interval reaches them
    raw = {**ERNIE_21B, "num_hidden_layers": 8, "moe_layer_interval": 2,
           "moe_layer_end_index": 4}
    spec, total = _ernie(raw)
    assert spec.blocks is not None
    assert [b.ffn for b in spec.blocks] == ["mlp", "moe", "mlp", "moe", "mlp", "mlp", "mlp",
                                            "mlp"]
    h = 2560
    attention = 2 * h * h + 2 * 512 * h + 2 * h
    moe = 64 * h + 64 + 64 * 3 * h * 1536 + 3 * h * 3072
    assert total == 103_424 * h + 8 * attention + 6 * 3 * h * 12288 + 2 * moe + h
    # without an end index the interval rule runs to the last layer: 1, 3, 5, 7
    raw.pop("moe_layer_end_index")
    spec, _ = _ernie(raw)
    assert (spec.first_dense_layers, spec.moe_layer_step, spec.num_moe_layers) == (1, 2, 4)


def test_ernie_moe_use_moe_false_is_dense():
    # Ernie4_5_MoeDecoderLayer: use_moe false builds the dense MLP on every layer
    spec, total = _ernie({**ERNIE_21B, "use_moe": False})
    assert not spec.num_experts
    h = 2560
    assert total == 103_424 * h + 28 * (2 * h * h + 2 * 512 * h + 2 * h
                                        + 3 * h * 12288) + h


# --- the safety net: expert keys kvplan does not read for the family --------------------------

DENSE_BASE = {k: v for k, v in ERNIE_21B.items() if not k.startswith("moe_")} | {
    "model_type": "llama", "architectures": ["SomeMoeForCausalLM"]}


@pytest.mark.parametrize("keys", [
    {"moe_num_experts": 64, "moe_intermediate_size": 1536},  # ERNIE's names on another family
    {"num_experts_per_tok": 8},  # experts per token, no count read
    {"moe_k": 6},
    # per-modality lists (ERNIE-4.5-VL's keys) under generic names
    {"num_experts": [64, 64], "moe_intermediate_size": [1536, 512]},
])
def test_unread_expert_keys_refuse_the_weights(keys):
    spec = spec_from_config({**DENSE_BASE, **keys}, "x", name="x")
    assert estimable(spec) is not None
    with pytest.raises(Exception, match="MoE|expert"):
        inventory(spec)


def test_ernie_vl_per_modality_experts_are_not_weighed_dense():
    # ERNIE-4.5-VL (model_type ernie4_5_moe_vl, read for its KV cache) keeps its expert keys
    # as lists, one per modality (vLLM ernie45_vl_moe.py Ernie4_5_VLMoeMoE: text and vision
    # experts, each with its own gate, from moe_num_experts and moe_layer_start_index [text,
    # vision]); the model card's 64 text and 64 vision experts, 6 per token (the widths here
    # are illustrative). kvplan does not lay out these two expert sets: the weights are
    # refused, where before the config was weighed as a dense model
    raw = {**DENSE_BASE, "model_type": "ernie4_5_moe_vl",
           "architectures": ["Ernie4_5_VLMoeForConditionalGeneration"],
           "moe_num_experts": [64, 64], "moe_k": 6, "moe_intermediate_size": [1536, 512],
           "moe_num_shared_experts": 2, "moe_layer_start_index": [1, 1]}
    spec = spec_from_config(raw, "x", name="x")
    assert (spec.num_experts, spec.num_experts_per_token) == (64, 6)
    assert estimable(spec) == "the spec does not say which layers are MoE"


def test_plan_refuses_unread_experts_by_name(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**DENSE_BASE, "moe_num_experts": 64,
                                "moe_intermediate_size": 1536}))
    planned = CliRunner().invoke(app, ["plan", str(path), "--gpu", "h100",
                                       "--max-model-len", "8192"])
    assert planned.exit_code == 2, planned.output
    assert "weights cannot be counted" in planned.output
    assert "MoE" in planned.output
    # the KV cache is still sized
    assert CliRunner().invoke(app, ["size", str(path), "-t", "8192"]).exit_code == 0


def test_no_expert_keys_stay_dense():
    # zero or null expert counts are a dense model's (Qwen-style configs keep num_experts 0)
    for keys in ({}, {"num_experts": 0}, {"moe_num_experts": None, "moe_k": 0}):
        spec = spec_from_config({**DENSE_BASE, **keys}, "x", name="x")
        assert not spec.num_experts and estimable(spec) is None


# Key names that say a model has routed experts, listed here on their own (not kvplan's list):
# those of the engines' model files (n_routed_experts, num_local_experts, num_experts,
# moe_num_experts, num_experts_per_tok, moe_k, moe_topk, moe_top_k, top_k_experts,
# experts_per_token, num_experts_per_token) and other spellings seen in the wild.
EXPERT_KEYS = {"n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts",
               "n_experts", "num_routed_experts", "moe_num_routed_experts",
               "num_experts_per_tok", "experts_per_token", "num_experts_per_token",
               "top_k_experts", "moe_topk", "moe_top_k", "moe_k", "n_activated_experts"}
_TOWERS = ("vision", "audio", "visual", "encoder")


def _says_experts(raw, found=None) -> list[str]:
    found = [] if found is None else found
    for key, value in raw.items():
        if isinstance(value, dict) and not any(t in key for t in _TOWERS):
            _says_experts(value, found)
        values = value if isinstance(value, list) else [value]
        if key in EXPERT_KEYS and any(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                      for v in values):
            found.append(key)
    return found


CONFIGS = sorted([*(FIXTURES / "hf-configs").glob("*.json"),
                  *(FIXTURES / "hf-configs" / "families").glob("*.json")])


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_no_config_with_experts_is_weighed_dense(path):
    keys = _says_experts(json.loads(path.read_text()))
    if not keys:
        return
    try:
        spec = load_config_file(path)
    except SpecError:
        return  # refused as a whole (MiniMax-M3): nothing is weighed
    if estimable(spec) is not None:
        return  # the weights are refused by name
    moe_layers = (sum(b.ffn is not None and "moe" in b.ffn for b in spec.blocks)
                  if spec.blocks is not None else spec.num_moe_layers)
    assert spec.num_experts and moe_layers, f"{path.name}: {keys} weighed as a dense model"


@pytest.mark.parametrize("model_type", ["olmoe", "phimoe", "minicpm"])
def test_experts_as_wide_as_intermediate_size(model_type):
    # configs without moe_intermediate_size whose engine builds the routed experts
    # intermediate_size wide on every layer: vLLM olmoe.py OlmoeMoE, phimoe.py PhiMoE and
    # minicpm.py MiniCPMMoE (when num_experts is set) pass intermediate_size=
    # config.intermediate_size. Before kvplan read them so, their weights were refused
    raw = {**DENSE_BASE, "model_type": model_type, "intermediate_size": 640,
           "num_experts" if model_type != "phimoe" else "num_local_experts": 4,
           "num_experts_per_tok": 2}
    spec = spec_from_config(raw, model_type, name=model_type)
    assert (spec.num_experts, spec.num_experts_per_token) == (4, 2)
    assert spec.moe_intermediate_size == 640
    assert spec.num_moe_layers == 28  # every one of DENSE_BASE's 28 layers
    assert estimable(spec) is None
