"""Fields a config.json leaves out that its transformers config class defaults: the config
object vLLM builds (AutoConfig) fills them in and the model file reads them, so kvplan takes
the same value (kvplan.sources.hfconfig._ARCH_DEFAULTS) and says so in its notes; fields with
no class default stay refused by name. Each case takes a real config, writes the class
default in, and removes the key instead: the two must size and weigh the same."""

from __future__ import annotations

import json

import pytest
from paths import FIXTURES
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.dtypes import BF16
from kvplan.core.layers import FullAttention, RecurrentState
from kvplan.core.sizing import per_token_bytes, request_bytes
from kvplan.core.weights import inventory
from kvplan.sources.hfconfig import _ARCH_DEFAULTS, _DEFAULTS_CLASS, load_config_file

CONFIGS = FIXTURES / "hf-configs"
FAMILIES = CONFIGS / "families"
GRANITE_350M = FAMILIES / "ibm-granite--granite-4.0-h-350m.json"


def test_every_defaulted_model_type_names_its_class():
    assert set(_ARCH_DEFAULTS) <= set(_DEFAULTS_CLASS)


# (fixture, the nested mapping holding the key, key, the class default in transformers 5.19.0
# configuration_<family>.py)
CASES = [
    # GraniteMoeHybridConfig: mamba_expand 2, mamba_n_groups 1, mamba_d_conv 4, mamba_d_head
    # "auto" (mamba_expand x hidden_size / mamba_n_heads), mamba_d_state 256
    (GRANITE_350M, (), "mamba_expand", 2),
    (GRANITE_350M, (), "mamba_n_groups", 1),
    (GRANITE_350M, (), "mamba_d_conv", 4),
    (GRANITE_350M, (), "mamba_d_head", "auto"),
    (GRANITE_350M, (), "mamba_d_state", 256),
    # FalconH1Config: mamba_n_groups 1, mamba_d_conv 4, mamba_d_state 256 (the excerpt lacks
    # mamba_d_ssm, so _variant writes back 24 heads x 64, as its source's export does)
    (FAMILIES / "tiiuae--Falcon-H1-0.5B.json", (), "mamba_n_groups", 1),
    (FAMILIES / "tiiuae--Falcon-H1-0.5B.json", (), "mamba_d_conv", 4),
    (FAMILIES / "tiiuae--Falcon-H1-0.5B.json", (), "mamba_d_state", 256),
    # NemotronHConfig: ssm_state_size 128, mamba_num_heads 128, mamba_head_dim 64
    (CONFIGS / "nvidia--Nemotron-H-56B-Base-8K.json", (), "ssm_state_size", 128),
    (CONFIGS / "nvidia--Nemotron-H-56B-Base-8K.json", (), "mamba_num_heads", 128),
    (CONFIGS / "nvidia--Nemotron-H-56B-Base-8K.json", (), "mamba_head_dim", 64),
    # the hybrids' KV heads default to 8, not to num_attention_heads; NemotronHConfig's
    # head_dim to 128 (the 56B file spells it attention_head_dim, which vLLM does not read)
    (CONFIGS / "nvidia--Nemotron-H-56B-Base-8K.json", (), "num_key_value_heads", 8),
    (CONFIGS / "nvidia--Nemotron-H-56B-Base-8K.json", (), "head_dim", 128),
    (CONFIGS / "ai21labs--AI21-Jamba-1.5-Mini.json", (), "num_key_value_heads", 8),
    (FAMILIES / "tiiuae--Falcon-H1-0.5B.json", (), "num_key_value_heads", 8),
    (FAMILIES / "LiquidAI--LFM2.5-VL-1.6B.json", ("text_config",), "num_key_value_heads", 8),
    # JambaConfig: mamba_d_state 16, mamba_expand 2
    (CONFIGS / "ai21labs--AI21-Jamba-1.5-Mini.json", (), "mamba_d_state", 16),
    (CONFIGS / "ai21labs--AI21-Jamba-1.5-Mini.json", (), "mamba_expand", 2),
    # Lfm2Config: conv_L_cache 3 (LFM2.5-VL's text_config)
    (FAMILIES / "LiquidAI--LFM2.5-VL-1.6B.json", ("text_config",), "conv_L_cache", 3),
    # Qwen3NextConfig: linear_conv_kernel_dim 4, linear_num_value_heads 32
    (FAMILIES / "Qwen--Qwen3-Next-80B-A3B-Instruct.json", (), "linear_conv_kernel_dim", 4),
    (FAMILIES / "Qwen--Qwen3-Next-80B-A3B-Instruct.json", (), "linear_num_value_heads", 32),
]


def _variant(fixture, where, key, value, tmp_path, name):
    raw = json.loads(fixture.read_text())
    target = raw
    for step in where:
        target = target[step]
    if value is None:
        target.pop(key, None)
    else:
        target[key] = value
    if raw.get("model_type") == "falcon_h1":
        raw.setdefault("mamba_d_ssm", raw["mamba_n_heads"] * raw["mamba_d_head"])
    path = tmp_path / name / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(raw))
    return load_config_file(path)


@pytest.mark.parametrize(("fixture", "where", "key", "default"), CASES)
def test_a_left_out_key_is_its_class_default(fixture, where, key, default, tmp_path):
    written = _variant(fixture, where, key, default, tmp_path, "written")
    absent = _variant(fixture, where, key, None, tmp_path, "absent")
    assert absent.layers == written.layers
    assert per_token_bytes(absent.layers, BF16) == per_token_bytes(written.layers, BF16)
    assert request_bytes(absent.layers, 4096, BF16) == request_bytes(written.layers, 4096, BF16)
    assert absent.ssm == written.ssm
    assert [(t.name, t.shape) for t in inventory(absent).tensors] == \
        [(t.name, t.shape) for t in inventory(written).tensors]
    # said where it is used, with the class and the release; never when the file states it
    said = [n for n in absent.class_defaults if n.startswith(".".join((*where, key)) + " =")]
    assert len(said) == 1 and "Config, transformers 5.19.0 default" in said[0]
    assert not any(n.startswith(".".join((*where, key)) + " =")
                   for n in written.class_defaults)


def test_nemotron_h_keys_with_a_spelling_alias_stay_required(tmp_path):
    # NemotronHConfig.__post_init__ takes n_groups from mamba_n_groups and conv_kernel from
    # mamba_d_conv when a config spells them so: a class default could shadow that value
    from kvplan.core.errors import SpecError

    for key in ("n_groups", "conv_kernel"):
        with pytest.raises(SpecError, match=key):
            _variant(CONFIGS / "nvidia--Nemotron-H-56B-Base-8K.json", (), key, None,
                     tmp_path, key)


# --- granite-4.0-h-350m: an excerpt without mamba_expand ----------------------------------

def test_granite_4_0_h_350m_by_hand():
    # the excerpt has no mamba_expand: GraniteMoeHybridConfig's 2 (transformers 5.19.0), which
    # vLLM 0.33.0 granitemoehybrid.py reads (intermediate_size = mamba_expand x hidden_size)
    raw = json.loads(GRANITE_350M.read_text())
    assert "mamba_expand" not in raw
    spec = load_config_file(GRANITE_350M)
    hidden, heads, d_head, d_state, groups, d_conv = 768, 48, 32, 128, 1, 4
    inner = 2 * hidden
    assert heads * d_head == inner  # the class's validate_architecture holds
    # vLLM mamba_utils.py mamba2_state_shape: conv (d_conv - 1, inner + 2 x groups x d_state),
    # temporal (heads, head_dim, d_state), both in the model dtype (mamba_ssm_cache_dtype auto)
    conv_bytes = (d_conv - 1) * (inner + 2 * groups * d_state) * 2
    ssm_bytes = heads * d_head * d_state * 2
    assert (conv_bytes, ssm_bytes) == (10_752, 393_216)
    attention_layers = [i for i, t in enumerate(raw["layer_types"]) if t == "attention"]
    assert attention_layers == [10, 13, 17, 27]
    states = [x for x in spec.layers if isinstance(x, RecurrentState)]
    assert len(states) == 28 and len(spec.layers) == 32
    assert {x.request_bytes(8192, BF16) for x in states} == {conv_bytes + ssm_bytes}
    # attention: 4 KV heads of 768 / 12 = 64, K and V, bf16
    assert [spec.layers[i] for i in attention_layers] == [FullAttention(4, 64)] * 4
    assert per_token_bytes(spec.layers, BF16) == 4 * 2 * 4 * 64 * 2 == 4096
    assert request_bytes(spec.layers, 8192, BF16) == \
        28 * (conv_bytes + ssm_bytes) + 8192 * 4096 == 44_865_536


def test_granite_4_0_h_350m_parameters_by_hand():
    # vLLM granitemoehybrid.py: a Mamba2 mixer (in_proj to 2 x inner + 2 x groups x d_state
    # + heads, a conv of the conv dim with bias, dt_bias / A / D per head, a gated norm,
    # out_proj) or an attention layer (q / k / v / o, no bias), and every layer a shared MLP
    # (num_local_experts 0: input_linear to 2 x 2,048, output_linear); tied embeddings
    h, vocab, inner, conv_dim, heads = 768, 100_352, 1536, 1792, 48
    mamba = h * (2 * inner + 2 * 128 + heads) + conv_dim * 4 + conv_dim + 3 * heads + inner \
        + inner * h
    attention = h * h + 2 * h * 4 * 64 + h * h
    mlp = h * 2 * 2048 + 2048 * h
    total = vocab * h + 28 * mamba + 4 * attention + 32 * (mlp + 2 * h) + h
    assert total == 340_332_224  # 649.1 MiB in bf16; IBM calls the model "350M"
    assert sum(t.num_params for t in inventory(load_config_file(GRANITE_350M)).tensors) == total


def test_granite_notes_say_the_class_default():
    result = CliRunner().invoke(app, ["size", str(GRANITE_350M), "-t", "8k"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "mamba_expand = 2 (absent: GraniteMoeHybridConfig, transformers 5.19.0 default)" \
        in text
    plan = CliRunner().invoke(app, ["plan", str(GRANITE_350M), "--gpu", "h100", "-f", "json"])
    assert plan.exit_code == 0, plan.output
    assert any("GraniteMoeHybridConfig" in n for n in json.loads(plan.output)["notes"])


@pytest.mark.parametrize("model_type", ["granitemoehybrid", "nemotron_h", "olmo_hybrid"])
def test_a_hybrid_without_its_layer_schedule_is_refused_by_name(model_type):
    # the state sizes may come from the class, but which layers carry them does not: the
    # classes would schedule them (GraniteMoeHybridConfig every layer Mamba, OlmoHybridConfig
    # every 4th attention), which the reader does not reproduce
    from kvplan.core.errors import SpecError
    from kvplan.sources.hfconfig import spec_from_config

    with pytest.raises(SpecError) as err:
        spec_from_config({"model_type": model_type, "num_hidden_layers": 4,
                          "num_attention_heads": 32, "hidden_size": 4096}, "config.json", "m")
    assert err.value.field == "layer_types"
