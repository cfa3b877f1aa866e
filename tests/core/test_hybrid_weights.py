"""Weight inventories of hybrid and per-layer-block models (kvplan.core.weights with
ModelSpec.ssm / ModelSpec.blocks): Jamba (Mamba-1 + attention, MoE every other layer),
Nemotron-H (Mamba-2 / attention / MLP / MoE blocks), Qwen3-Next (gated DeltaNet + gated
attention, MoE) and Nemotron-NAS (per-layer attention no_op and FFN widths).

Each is checked against an independent figure: a Hub parameter total with its source, or a
per-tensor sum written out here from the modelling code's tensor shapes (transformers
modeling_jamba.py JambaMambaMixer, modeling_nemotron_h.py NemotronHMamba2Mixer / NemotronHMLP /
NemotronHMoE, modeling_qwen3_next.py Qwen3NextGatedDeltaNet / Qwen3NextAttention, the
checkpoint's modeling_decilm.py)."""

from __future__ import annotations

import json

import pytest
from paths import FIXTURES

from kvplan.core.errors import SpecError
from kvplan.core.weights import inventory, supported
from kvplan.sources.fields import Fields
from kvplan.sources.hfconfig import load_config_file
from kvplan.sources.library import load_library
from kvplan.sources.yamlspec import format_blocks, parse_blocks, spec_from_dict, spec_to_dict

CONFIGS = FIXTURES / "hf-configs"
LIB = {s.name: s for s in load_library()}


def test_jamba_1_5_mini_is_its_per_tensor_sum():
    h, v, inner, state, conv, rank, kv_width, mlp, experts = (
        4096, 65536, 8192, 16, 4, 256, 8 * 128, 14336, 16)
    mamba = (2 * inner * h                      # in_proj (x and gate), no bias
             + inner * conv + inner             # depthwise conv1d weight + bias
             + (rank + 2 * state) * inner       # x_proj -> dt, B, C
             + inner * rank + inner             # dt_proj + bias
             + inner * state + inner            # A_log, D
             + h * inner                        # out_proj
             + rank + 2 * state)                # dt / B / C RMSNorms
    attention = 2 * h * h + 2 * h * kv_width    # q, o; k, v (8 KV heads of 128)
    dense = 3 * h * mlp
    moe = experts * h + experts * 3 * h * mlp   # router + experts
    # 32 layers: attention where i % 8 == 4 (4), Mamba elsewhere (28); MoE on odd layers (16)
    expected = (2 * v * h + h                    # untied embedding and LM head, final norm
                + 32 * 2 * h                     # input_layernorm, pre_ff_layernorm
                + 4 * attention + 28 * mamba + 16 * dense + 16 * moe)
    assert expected == 51_570_323_328  # "52B total parameters" (AI21's model card, rounded)
    for spec in (LIB["jamba-1.5-mini"],
                 load_config_file(CONFIGS / "ai21labs--AI21-Jamba-1.5-Mini.json")):
        inv = inventory(spec)
        assert inv.total_params == expected
        assert inv.total_bytes == 2 * expected


def test_nemotron_h_56b_is_its_per_tensor_sum():
    h, v = 8192, 131072
    heads, head_dim, groups, state, conv = 256, 64, 8, 256, 4
    inner = heads * head_dim
    conv_dim = inner + 2 * groups * state
    mamba = ((inner + conv_dim + heads) * h     # in_proj: z, x+B+C, dt
             + conv_dim * conv + conv_dim       # conv1d weight + bias (use_conv_bias)
             + 3 * heads                        # dt_bias, A_log, D
             + inner                            # gated RMSNorm
             + h * inner)                       # out_proj
    attention = 2 * h * 64 * 128 + 2 * h * 8 * 128
    mlp = 2 * h * 32768                         # up + down (relu2, no gate)
    cfg = json.loads((CONFIGS / "nvidia--Nemotron-H-56B-Base-8K.json").read_text())
    pattern = cfg["hybrid_override_pattern"]
    counts = {c: pattern.count(c) for c in "M*-"}
    assert counts == {"M": 54, "*": 10, "-": 54} and len(pattern) == 118
    expected = (2 * v * h + h + 118 * h         # embeddings, head, final norm, one norm a block
                + 54 * mamba + 10 * attention + 54 * mlp)
    assert abs(expected - 56e9) <= 56e9 * 0.006  # "Nemotron-H-56B" (rounded)
    for spec in (LIB["nemotron-h-56b"], load_config_file(CONFIGS / cfg_name("56B"))):
        assert inventory(spec).total_params == expected


def cfg_name(tag: str) -> str:
    return {"56B": "nvidia--Nemotron-H-56B-Base-8K.json",
            "nano": "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json"}[tag]


def test_nemotron_3_nano_bf16_tensors_match_the_hub_total():
    """31,577,937,344 = the Hub safetensors total of NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 as
    the library cites it; it equals the inventory's BF16 tensors. The inventory adds one fp32
    e_score_correction_bias per MoE router (NemotronHTopkRouter, kept in fp32 by
    _keep_in_fp32_modules_strict): 23 MoE blocks x 128 experts."""
    for spec in (LIB["nemotron-3-nano-30b-a3b"], load_config_file(CONFIGS / cfg_name("nano"))):
        by = inventory(spec).elements_by_dtype()
        assert by == {"BF16": 31_577_937_344, "F32": 23 * 128}


def test_nemotron_3_nano_moe_block_by_hand():
    spec = LIB["nemotron-3-nano-30b-a3b"]
    h, experts, width, shared = 2688, 128, 1856, 3712
    moe = (experts * h + experts                # router weight + fp32 correction bias
           + experts * 2 * h * width            # up + down per expert, no gate
           + 2 * h * shared)                    # shared expert up + down
    layer = next(i for i, b in enumerate(spec.blocks) if b.ffn == "moe")
    inv = inventory(spec)
    assert sum(t.num_params for t in inv.tensors if t.layer == layer) == moe + h  # + its norm


def test_qwen3_next_matches_the_hub_totals():
    """Qwen/Qwen3-Next-80B-A3B-Instruct: 81,324,862,720 (the Hub safetensors total, as the
    library YAML cites), MTP layer included. Qwen/Qwen3-Coder-Next, the same architecture
    without mtp.* tensors: 79,674,391,296 (the Hub's totalParameters, quoted by a public
    test suite's CatalogParameterTests)."""
    spec = LIB["qwen3-next-80b-a3b"]
    assert inventory(spec).total_params == 81_324_862_720 == spec.num_params
    assert inventory(spec, include_mtp=False).total_params == 79_674_391_296


def test_qwen3_next_layers_by_hand():
    spec = LIB["qwen3-next-80b-a3b"]
    h = 2048
    key, value, vh = 16 * 128, 32 * 128, 32
    deltanet = ((2 * key + 2 * value) * h       # in_proj_qkvz
                + 2 * vh * h                    # in_proj_ba
                + (2 * key + value) * 4         # conv1d, no bias
                + 2 * vh                        # dt_bias, A_log
                + 128                           # gated RMSNorm over one value head
                + h * value)                    # out_proj
    attention = (2 * 16 * 256 * h               # q_proj with the output gate
                 + 2 * 2 * 256 * h + h * 16 * 256 + 2 * 256)  # k, v, o, q_norm, k_norm
    moe = 512 * h + 512 * 3 * h * 512 + 3 * h * 512 + h  # router, experts, shared, its gate
    inv = inventory(spec)
    per_layer = {i: sum(t.num_params for t in inv.tensors if t.layer == i) for i in (0, 3)}
    assert per_layer == {0: 2 * h + deltanet + moe, 3: 2 * h + attention + moe}


def test_nemotron_super_49b_is_its_per_tensor_sum():
    """Per layer from block_configs: attention unless no_op (8 KV heads: n_heads_in_group 8),
    an MLP as wide as DeciLM's rule gives (int(2 x ffn_mult x hidden / 3) rounded up to 256)."""
    cfg = json.loads((CONFIGS / "nvidia--Llama-3_3-Nemotron-Super-49B-v1.json").read_text())
    h, v = 8192, 128256
    expected = 2 * v * h + h
    for block in cfg["block_configs"]:
        if not block["attention"]["no_op"]:
            expected += h + 2 * h * h + 2 * h * (h // 64 * 8)
        width = int(2 * block["ffn"]["ffn_mult"] * h / 3)
        width += -width % 256
        expected += h + 3 * h * width
    assert abs(expected - 49e9) <= 49e9 * 0.02  # "49B" (model card, rounded)
    for spec in (LIB["llama-3.3-nemotron-super-49b"],
                 load_config_file(CONFIGS / "nvidia--Llama-3_3-Nemotron-Super-49B-v1.json")):
        assert inventory(spec).total_params == expected == 49_867_145_216


def test_tensor_parallel_shards_a_mamba2_mixer():
    """TP 2 on Nemotron-H-56B: every matrix split in two except the per-block norms and the
    final norm (replicated); vocabulary rows split."""
    spec = LIB["nemotron-h-56b"]
    whole, half = inventory(spec), inventory(spec, tp=2)
    replicated = 118 * 8192 + 8192
    assert 2 * (half.total_params - replicated) == whole.total_params - replicated


def test_mamba2_groups_replicated_when_tp_exceeds_them():
    """vLLM mamba_mixer2.py: n_groups 8 over TP 16 -> each rank holds one group (8 extra)."""
    spec = LIB["nemotron-h-56b"]
    inv = inventory(spec, tp=16)
    conv = next(t for t in inv.tensors if t.name == "model.layers.0.mixer.conv1d.weight")
    assert conv.shape == (16384 // 16 + 2 * 1 * 256, 1, 4)


def test_blocks_round_trip_through_yaml():
    for name in ("nemotron-h-56b", "llama-3.3-nemotron-super-49b", "jamba-1.5-mini",
                 "qwen3-next-80b-a3b"):
        spec = LIB[name]
        again = spec_from_dict(spec_to_dict(spec), "round-trip")
        assert (again.blocks, again.ssm) == (spec.blocks, spec.ssm)
    text = "*-:28672x3 M E -"
    blocks = parse_blocks(Fields({}, "t"), text)
    assert len(blocks) == 6 and blocks[0].ffn_width == 28672 and blocks[3].mixer == "ssm"
    assert format_blocks(blocks) == text


@pytest.mark.parametrize("token", ["", "Q", "*:12", "-:0", "x3", "*-x0"])
def test_bad_block_tokens_are_refused(token):
    with pytest.raises(SpecError, match="blocks"):
        parse_blocks(Fields({}, "t"), token)


def test_a_hybrid_without_mixer_shapes_is_not_computed():
    spec = LIB["jamba-1.5-mini"]
    from dataclasses import replace
    assert "recurrent mixer" in (supported(replace(spec, ssm=None)) or "")
    assert "blocks" in (supported(replace(LIB["nemotron-h-56b"], blocks=None)) or "")


# --- Llama 3.2 Vision (mllama): cross-attention layers + the tiled vision encoder ----------

def _mllama_vision(text_hidden: int) -> int:
    """MllamaVisionModel + projector by hand (vision_config: hidden 1280, intermediate 5120,
    32 local + 8 gated global layers, patch 14 at 560, 4 tiles, 8 aspect ratios, output 7680)."""
    h, inter, positions, ids, tiles = 1280, 5120, (560 // 14) ** 2 + 1, 8 + 1, 4
    layer = 4 * h * h + (inter * h + inter) + (h * inter + h) + 4 * h  # no attention biases
    return (h * 3 * 14 * 14 + h                        # patch conv (no bias), class embedding
            + positions * h + 1 + ids * tiles * positions * h  # gated position + tile table
            + 2 * (ids * tiles * h + 1)                 # pre / post tile embeddings + gates
            + 4 * h                                     # layernorm_pre / _post (w + b)
            + 32 * layer + 8 * (layer + 2)              # the global layers' two gates
            + 7680 * text_hidden + text_hidden)         # multi_modal_projector (+ bias)


def _mllama_text(h: int, inter: int, layers: int, cross: int, heads: int, kv: int) -> int:
    v, hd = 128256, h // heads
    self_layer = 2 * h + 2 * h * h + 2 * h * kv * hd + 3 * h * inter
    cross_layer = self_layer + 2 * hd + 2               # q/k norms, attn and MLP gates
    return ((v + 8) * h + v * h + h                     # embed_tokens has 8 extra rows
            + (layers - cross) * self_layer + cross * cross_layer)


def test_llama_3_2_90b_vision_is_its_per_tensor_sum():
    expected = _mllama_vision(8192) + _mllama_text(8192, 28672, 100, 20, 64, 8)
    # the model card's Params column: "90B (88.8)" (its 11B row, 10.6, is also below the
    # Hub count of 10.67B; the exact check is the 11B model below)
    assert abs(expected - 88.8e9) <= 88.8e9 * 0.005
    for spec in (LIB["llama-3.2-90b-vision"],
                 load_config_file(CONFIGS / "meta-llama--Llama-3.2-90B-Vision-Instruct.json")):
        assert inventory(spec).total_params == expected == 88_593_355_323
    assert LIB["llama-3.2-90b-vision"].num_params == expected


def test_llama_3_2_11b_vision_matches_its_hub_count():
    """The same inventory on Llama-3.2-11B-Vision-Instruct's shapes (its config.json: text
    hidden 4096, MLP 14336, 40 layers with cross-attention at 3, 8, ..., 38, 32 heads / 8 KV;
    the same vision_config): 10,670,220,835, the Hub's safetensors BF16 parameter count as a
    public benchmark's model table records it (HfApi.get_safetensors_metadata)."""
    raw = json.loads((CONFIGS / "meta-llama--Llama-3.2-90B-Vision-Instruct.json").read_text())
    raw["text_config"].update(hidden_size=4096, intermediate_size=14336, num_hidden_layers=40,
                              cross_attention_layers=[3, 8, 13, 18, 23, 28, 33, 38],
                              num_attention_heads=32, num_key_value_heads=8)
    from kvplan.sources.hfconfig import spec_from_config
    spec = spec_from_config(raw, "11b", "llama-3.2-11b-vision")
    assert inventory(spec).total_params == 10_670_220_835
    assert 10_670_220_835 == _mllama_vision(4096) + _mllama_text(4096, 14336, 40, 8, 32, 8)


def test_vision_tower_sits_on_the_first_pipeline_stage():
    from kvplan.core.weights import placement
    spec = LIB["llama-4-scout"]
    one, two = placement(spec, pp=2), placement(spec, pp=2)
    inv = one.inventory
    vision = inv.bytes_where("vision")
    assert vision == 2 * 871_932_416
    assert one.stage_bytes[0] == (inv.bytes_where("embed") + vision
                                  + inv.bytes_where("layer", range(0, 24)))
    assert two.stage_bytes == one.stage_bytes


def test_vision_shapes_round_trip_through_yaml():
    for name in ("llava-1.5-7b", "gemma-3-4b", "llama-4-scout", "llama-3.2-90b-vision"):
        spec = LIB[name]
        assert spec.vision is not None
        assert spec_from_dict(spec_to_dict(spec), "rt").vision == spec.vision


# --- library models with shapes written by hand ---------------------------------------------

def test_gpt_3_175b_is_its_per_tensor_sum():
    """GPT-3 175B (Brown et al. 2020, Table 2.1 and section 2.1: GPT-2's architecture with
    d_model 12288, 96 layers, n_ctx 2048; GPT-2's 50,257-token BPE and tied embeddings). The
    table's "175.0B" is nominal: the per-tensor count is 174.60B (-0.23%)."""
    h, v, n = 12288, 50257, 96
    layer = (2 * 2 * h                 # two LayerNorms (w + b)
             + 3 * h * h + 3 * h       # c_attn (q, k, v) + bias
             + h * h + h               # c_proj + bias
             + 4 * h * h + 4 * h       # c_fc + bias
             + 4 * h * h + h)          # mlp c_proj + bias
    expected = v * h + 2048 * h + n * layer + 2 * h  # tied wte, wpe, final LayerNorm
    assert inventory(LIB["gpt-3-175b"]).total_params == expected == 174_604_259_328
    assert abs(expected - LIB["gpt-3-175b"].num_params) <= 175e9 * 0.005


def test_gemma_3_27b_hand_shapes_give_the_hub_total():
    """The YAML's hand-written shapes (text hidden 5376, MLP 21504, the shared SigLIP tower):
    the inventory equals the Hub safetensors total the YAML cites, to the parameter."""
    spec = LIB["gemma-3-27b"]
    assert inventory(spec).total_params == spec.num_params == 27_432_406_640
    assert inventory(spec).total_bytes == spec.checkpoint.total_bytes


# --- Kimi-K3: KDA + gated MLA, attention residuals, latent MXFP4 MoE, MoonViT -----------------

def test_kimi_k3_matches_its_safetensors_headers():
    """The inventory from config.json alone against the per-dtype bytes of the 96 safetensors
    headers (the tensor listing the YAML's checkpoint.source cites: 1,503,647,073,024 values,
    1453.66 GiB), byte for byte in each dtype."""
    spec = LIB["kimi-k3"]
    inv = inventory(spec, spec.quantization)
    assert inv.bytes_by_dtype() == dict(spec.checkpoint.bytes_by_dtype) == {
        "U8": 1_446_456_066_048, "BF16": 114_359_769_088, "F32": 44_489_728}
    assert sum(inv.elements_by_dtype().values()) == 1_503_647_073_024
    fixture = load_config_file(CONFIGS / "families" / "moonshotai--Kimi-K3.json")
    assert inventory(fixture, fixture.quantization).bytes_by_dtype() == inv.bytes_by_dtype()


def test_kimi_k3_fp32_tensors_by_hand():
    """The listing's fp32 tensors: per KDA layer (69) three short convolutions 12288 x 1 x 4,
    dt_bias 12288, A_log and o_norm 128; per MoE layer (92) the router's correction bias 896."""
    f32 = 69 * (3 * 12288 * 4 + 12288 + 128 + 128) + 92 * 896
    assert inventory(LIB["kimi-k3"]).elements_by_dtype()["F32"] == f32


def test_kimi_k3_layers_by_hand():
    spec = LIB["kimi-k3"]
    h, inner, hd = 7168, 96 * 128, 128
    residuals = 2 * (h + h)                        # *_res_norm + *_res_proj (1 x hidden)
    kda = (3 * inner * h + 3 * inner * 4           # q/k/v and their convolutions
           + hd * h + inner * hd + 96 * h          # f_a, f_b, b_proj
           + hd + inner + hd                       # A_log, dt_bias, o_norm
           + inner * h + h * inner)                # g_proj (full rank), o_proj
    mla = (1536 * h + 1536 + 96 * 192 * 1536       # q_a, its norm, q_b
           + 576 * h + 512 + 96 * 256 * 512        # kv_a (+ rope), its norm, kv_b
           + inner * h + h * inner)                # g_proj, o_proj
    moe = (896 * h + 896                           # router + correction bias
           + 3584 * h + h * 3584 + 3584            # latent down / up projections, norm
           + 896 * 3 * 3072 * 3584                 # experts in the 3584-wide latent
           + 3 * 6144 * h)                         # two shared experts
    params = {}
    for t in inventory(spec).tensors:
        if t.layer in (0, 1, 3):
            params[t.layer] = params.get(t.layer, 0) + t.num_params
    assert params == {0: 2 * h + residuals + kda + 3 * 33792 * h,
                      1: 2 * h + residuals + kda + moe,
                      3: 2 * h + residuals + mla + moe}


def test_kimi_k3_moonvit_by_hand():
    h, inter, qkv = 1024, 4096, 1536
    block = 3 * qkv * h + h * qkv + 2 * inter * h + 2 * h
    expected = (h * 3 * 14 * 14 + 64 * 64 * h + 27 * block + h
                + 4096 * 4096 + 7168 * 4096 + 7168)    # patch merger + its post-norm
    inv = inventory(LIB["kimi-k3"])
    assert sum(t.num_params for t in inv.tensors if t.place == "vision") == expected


def test_kimi_k3_patch_merger_is_whole_on_every_rank():
    # Kimi-K3's model builds vLLM kimi_k25_vit.py KimiK25MultiModalProjector, whose
    # patchmergerv2 linears are ReplicatedLinear: proj.0 4096 x 4096 and proj.2 7168 x 4096
    # on every rank at TP 8, not an eighth of each
    tensors = inventory(LIB["kimi-k3"], tp=8, padded_vocab=True).tensors
    merger = {t.name: t.shape for t in tensors if t.name.startswith("mm_projector.proj")}
    assert merger == {"mm_projector.proj.0.weight": (4096, 4096),
                      "mm_projector.proj.2.weight": (7168, 4096)}


# --- DeepSeek-V4-Flash: compressed attention, hyper-connections, hash routing, FP4 experts ---

def test_deepseek_v4_flash_matches_its_safetensors_headers():
    """The inventory from config.json alone (quantization_config's FP8 128 x 128 with e8m0
    scales, expert_dtype fp4) against the per-dtype bytes of the 46 safetensors headers the
    YAML's checkpoint.source cites (158,069,433,298 values, 148.65 GiB), MTP layer included."""
    spec = LIB["deepseek-v4-flash"]
    inv = inventory(spec, spec.quantization)
    assert inv.bytes_by_dtype() == dict(spec.checkpoint.bytes_by_dtype)
    assert sum(inv.elements_by_dtype().values()) == 158_069_433_298
    fixture = load_config_file(CONFIGS / "families" / "deepseek-ai--DeepSeek-V4-Flash.json")
    assert inventory(fixture, fixture.quantization).bytes_by_dtype() == inv.bytes_by_dtype()


def test_deepseek_v4_flash_small_dtypes_by_hand():
    """From the listing: int64 hash tables on the first 3 layers (vocab x top-6); fp32 per
    layer (43 + 1 MTP) the attention sinks (64) and two hyper-connection mixes (24 + 24 x
    16384 + 3), per compressor its position table (ratio 4: 4 x 1024 and the indexer's 4 x 256,
    21 layers; ratio 128: 128 x 512, 20 layers), the routers' biases (40 + 1 MTP layers of
    256) and the two hyper-connection heads (4 + 4 x 16384 + 1)."""
    by = inventory(LIB["deepseek-v4-flash"]).elements_by_dtype()
    assert by["I64"] == 3 * 129280 * 6
    f32 = (44 * (64 + 2 * (24 + 24 * 16384 + 3))
           + 21 * (4 * 1024 + 4 * 256) + 20 * 128 * 512
           + 41 * 256 + 2 * (4 + 4 * 16384 + 1))
    assert by["F32"] == f32 == 144_672_072 // 4


def test_deepseek_v4_flash_experts_are_fp4_and_the_rest_fp8():
    spec = LIB["deepseek-v4-flash"]
    by = inventory(spec, spec.quantization).bytes_by_dtype()
    # 44 layers x 256 experts x (w1, w3: 2048 x 4096; w2: 4096 x 2048), two values a byte
    assert by["I8"] == 44 * 256 * 3 * 2048 * 4096 // 2
    # per layer fp8: wq_a 1024 x 4096, wq_b 32768 x 1024, wkv 512 x 4096, wo_a 8192 x 4096,
    # wo_b 4096 x 8192, shared experts 3 x 2048 x 4096; indexer wq_b 8192 x 1024 on 21
    # layers; the MTP layer's e_proj and h_proj 4096 x 4096
    layer = (1024 * 4096 + 32768 * 1024 + 512 * 4096 + 2 * 8192 * 4096 + 3 * 2048 * 4096)
    assert by["F8_E4M3"] == 44 * layer + 21 * 8192 * 1024 + 2 * 4096 * 4096


@pytest.mark.parametrize("mult", [float("inf"), float("nan"), 1e300, -1.0, "5.25", None])
def test_a_nas_block_with_an_unusable_ffn_mult_leaves_the_blocks_unknown(mult):
    """A hostile ffn_mult (infinite, enormous, negative, not a number) must not overflow the
    width rule: the blocks are unknown and the inventory says so, never a traceback."""
    from kvplan.sources.hfconfig import spec_from_config

    raw = json.loads((CONFIGS / "nvidia--Llama-3_3-Nemotron-Super-49B-v1.json").read_text())
    raw["block_configs"][5]["ffn"]["ffn_mult"] = mult
    spec = spec_from_config(raw, "nas", "nas")
    assert spec.blocks is None and "blocks" in (supported(spec) or "")


# --- Gemma 3n: per-layer inputs, AltUp, LAuReL, KV-shared layers --------------------------

# Gemma 3n E2B's text shapes (the E2B model config of Google's ai-edge-torch Gemma 3n
# converter and the gemma library's Gemma3n_E2B; no config.json copy was found): hidden 2048,
# 30 layers (4 sliding of 512 then 1 full), 8 heads and 2 KV heads of 256, MLPs of 8192, a
# 262,400-row vocabulary, 256-wide per-layer inputs over 262,144 rows, AltUp of 4 streams,
# LAuReL of rank 64, the last 10 layers sharing K/V
GEMMA3N_E2B = {
    "architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n",
    "text_config": {
        "model_type": "gemma3n_text", "hidden_size": 2048, "num_hidden_layers": 30,
        "intermediate_size": [8192] * 30, "num_attention_heads": 8, "num_key_value_heads": 2,
        "head_dim": 256, "vocab_size": 262_400, "vocab_size_per_layer_input": 262_144,
        "hidden_size_per_layer_input": 256, "num_kv_shared_layers": 10,
        "sliding_window": 512, "max_position_embeddings": 32768, "laurel_rank": 64,
        "altup_num_inputs": 4,
        "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 6},
    "audio_config": {"model_type": "gemma3n_audio"},
    "vision_config": {"model_type": "gemma3n_vision"}}


def test_gemma3n_text_model_by_hand_from_vllm_gemma3n():
    """vLLM gemma3n.py: Gemma3nTextModel's embed_tokens (tied to the LM head),
    embed_tokens_per_layer, per_layer_model_projection and its norm, 3 altup_projections and
    3 altup_unembed_projections; per Gemma3nDecoderLayer q / k / v / o with q_norm and k_norm
    (v_norm has no weight), four sandwich norms, the gated MLP, AltUp (correction_coefs 4 x 4,
    prediction_coefs 16 x 4, modality_router 4 x 2048, router_norm, correct_output_scale),
    LAuReL (linear_left / linear_right of rank 64, post_laurel_norm), per_layer_input_gate /
    per_layer_projection (2048 <-> 256) and post_per_layer_input_norm; the final norm."""
    from kvplan.core.weights import weight_plan
    from kvplan.sources.hfconfig import spec_from_config

    h, n_layers, width = 2048, 30, 256
    model = (262_400 * h                                   # embed_tokens (tied)
             + 262_144 * n_layers * width                  # embed_tokens_per_layer
             + n_layers * width * h + width                # per_layer_model_projection, norm
             + 2 * 3 * h * h + h)                          # altup in / out projections, norm
    layer = (4 * h                                         # sandwich norms
             + 2 * h * h + 2 * 512 * h + 2 * 256           # q, o; k, v (2 x 256); q/k norms
             + 3 * h * 8192                                # gate / up / down
             + 16 + 64 + 4 * h + 2 * h                     # AltUp
             + 2 * 64 * h + h                              # LAuReL
             + 2 * width * h + h)                          # per-layer gate / projection, norm
    assert layer == 62_153_296
    spec = spec_from_config(GEMMA3N_E2B, "config.json", name="e2b")
    assert sum(t.num_params for t in inventory(spec).tensors) == model + 30 * layer \
        == 4_456_156_768
    # the towers are named as not counted; the text model is no generic estimate
    plan = weight_plan(spec)
    assert plan is not None and "generic decoder" not in plan.why
    assert "audio_config (gemma3n_audio)" in plan.why


# Gemma 3n's audio_config (gemma3n_audio) as released, the defaults of transformers
# configuration_gemma3n.py Gemma3nAudioConfig: hidden 1536, 12 conformer blocks of 8 heads
# (192 each), 128 mel bins, subsampling channels 128 / 32 with 3 x 3 kernels of stride 2, a
# light convolution of 5 taps, 128 hard-token rows
GEMMA3N_AUDIO_CONFIG = {
    "model_type": "gemma3n_audio", "input_feat_size": 128, "hidden_size": 1536,
    "conf_num_attention_heads": 8, "conf_num_hidden_layers": 12, "conf_attention_chunk_size": 12,
    "conf_attention_context_left": 13, "conf_attention_context_right": 0,
    "conf_attention_logit_cap": 50.0, "conf_conv_kernel_size": 5, "conf_reduction_factor": 4,
    "conf_residual_weight": 0.5, "sscp_conv_channel_size": [128, 32],
    "sscp_conv_kernel_size": [[3, 3], [3, 3]], "sscp_conv_stride_size": [[2, 2], [2, 2]],
    "sscp_conv_group_norm_eps": 1e-3, "rms_norm_eps": 1e-6, "gradient_clipping": 1e10,
    "vocab_size": 128, "vocab_offset": 262_272}


def _gemma3n_with_audio(**change: object) -> dict:
    raw = json.loads(json.dumps(GEMMA3N_E2B))
    raw["audio_config"] = dict(GEMMA3N_AUDIO_CONFIG, **change)
    return raw


def test_gemma3n_audio_tower_by_hand():
    """transformers modeling_gemma3n.py Gemma3nAudioEncoder (vLLM gemma3n_mm.py builds it with
    AutoModel.from_config) and vLLM gemma3n_mm.py Gemma3nMultimodalEmbedder (embed_audio)."""
    from kvplan.core.weights import weight_plan
    from kvplan.sources.hfconfig import spec_from_config

    h = 1536
    freq = (128 + 2 - 3) // 2 + 1  # 64 after conv_0 (padded 1 + 1, kernel 3, stride 2)
    freq = (freq + 2 - 3) // 2 + 1  # 32 after conv_1
    subsample = (128 * 9 + 128            # conv_0 128 x 1 x 3 x 3, its cumulative group norm
                 + 32 * 128 * 9 + 32      # conv_1 32 x 128 x 3 x 3, its norm
                 + h * freq * 32)         # input_proj_linear (32 x 32 -> 1536), no bias
    block = (2 * (2 * 4 * h * h + 2 * h)  # ffw_layer_start / _end: 1536 <-> 6144, two norms
             + 5 * h * h + 192 + 2 * h    # q / k / v, pos_proj, post; per_dim_scale; 2 norms
             + 3 * h * h + h * 5 + 2 * h  # lconv1d linear_start (x 2), linear_end; conv; norms
             + h)                         # the block's norm
    embedder = 128 * h + 2 * h + 2048 * h  # embedding, hard / soft norms, projection to 2048
    assert block == 56_644_800
    assert subsample + 12 * block == 681_348_640
    spec = spec_from_config(_gemma3n_with_audio(), "config.json", name="e2b")
    audio = [t for t in inventory(spec).tensors if t.place == "vision"]
    assert sum(t.num_params for t in audio) == subsample + 12 * block + embedder
    # with the text model (4,456,156,768 by hand above) and MobileNet-v5's 294,284,096
    # (KerasHub's mobilenetv5_300m_enc preset), plus embed_vision (128 x 2048 rows, two norms,
    # 2048 x 2048), Gemma 3n E2B comes to 5,439,595,456: the 5.44B published for the model
    total = (4_456_156_768 + subsample + 12 * block + embedder + 294_284_096
             + 128 * 2048 + 2 * 2048 + 2048 * 2048)
    assert round(total / 1e7) == 544
    assert spec.uncounted_towers == ("vision_config (gemma3n_vision)",)
    plan = weight_plan(spec)
    assert plan is not None and "gemma3n_audio" not in plan.why
    # embed_audio's table is vocabulary-parallel and its projection row-parallel in vLLM
    two = [t for t in inventory(spec, tp=2).tensors if t.place == "vision"]
    assert sum(t.num_params for t in two) == sum(t.num_params for t in audio) \
        - 64 * h - 2048 * h // 2


def test_gemma3n_audio_tower_it_cannot_lay_out_is_named():
    from kvplan.sources.hfconfig import spec_from_config

    for change in ({"vocab_size": None}, {"conf_num_attention_heads": 7},
                   {"sscp_conv_stride_size": [[2, 2], [1, 1]]}):
        spec = spec_from_config(_gemma3n_with_audio(**change), "config.json", name="e2b")
        assert spec.audio_encoder is None
        assert "audio_config (gemma3n_audio)" in spec.uncounted_towers


def test_kv_shared_layers_keep_their_targets_projections():
    # vLLM gemma3n.py Gemma3nAttention: the shared layers (20-29) reuse layer 18's K/V when
    # sliding and layer 19's when full (the last of their kind before sharing); each keeps
    # q / k / v / o projections of that layer's shapes: k 2 x 256 rows, not 8 x 256
    from kvplan.sources.hfconfig import spec_from_config

    spec = spec_from_config(GEMMA3N_E2B, "config.json", name="e2b")
    assert dict(spec.kv_shared) == {i: 19 if i % 5 == 4 else 18 for i in range(20, 30)}
    k = {t.layer: t.shape for t in inventory(spec).tensors if t.name.endswith("k_proj.weight")}
    assert set(k.values()) == {(512, 2048)} and len(k) == 30
    # Gemma 4's KV-shared layers alike (gemma4.py): 35 layers, the last 20 shared, one KV head
    # of 256 on sliding layers and of global_head_dim 512 on full ones; q 8 heads of either
    pattern = ["sliding_attention"] * 4 + ["full_attention"]
    raw = {"architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text",
           "hidden_size": 1536, "num_hidden_layers": 35, "intermediate_size": 6144,
           "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
           "global_head_dim": 512, "vocab_size": 262_144, "num_kv_shared_layers": 20,
           "sliding_window": 512, "layer_types": pattern * 7,
           "max_position_embeddings": 131_072, "tie_word_embeddings": True}
    spec = spec_from_config(raw, "config.json", name="g4")
    shapes = {(t.layer, t.name.rsplit(".", 2)[-2]): t.shape[0] for t in inventory(spec).tensors
              if t.name.endswith(("q_proj.weight", "k_proj.weight"))}
    assert (shapes[15, "q_proj"], shapes[15, "k_proj"]) == (8 * 256, 256)   # sliding
    assert (shapes[19, "q_proj"], shapes[19, "k_proj"]) == (8 * 512, 512)   # full
