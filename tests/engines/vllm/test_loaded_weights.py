"""The weights as vLLM logs them: `torch.cuda.memory_allocated` across the model load, i.e.
the tensors as PyTorch's caching allocator rounds them plus the rotary cos/sin caches vLLM
builds (kvplan.core.allocator, kvplan.engines.shared.loading: loaded_weight_bytes / rope_caches).
Expected values are the allocator's rules worked by hand (c10/cuda/CUDACachingAllocator.cpp)
or the figures real logs printed."""

from __future__ import annotations

import pytest
from paths import FIXTURES, TESTS

from kvplan.core.allocator import CachingAllocator
from kvplan.engines.shared import loading
from kvplan.sources.families import with_family_facts
from kvplan.sources.hfconfig import load_config_file
from kvplan.sources.library import resolve

MIB = 2**20
GIB = 2**30
CONFIGS = FIXTURES / "hf-configs"
MODELS = FIXTURES / "engines" / "models"


def test_allocator_rounds_as_the_caching_allocator_does():
    a = CachingAllocator()
    # a 4-byte scalar takes a 512-byte block of the small pool
    a.malloc(4)
    assert a.allocated_bytes == 512
    # 25 MiB (>= 10 MiB): a fresh segment of 26 MiB (rounded to 2 MiB); 1 MiB left is not
    # more than kSmallSize, so the block is not split and counts 26 MiB
    a.malloc(25 * MIB)
    assert a.allocated_bytes == 512 + 26 * MIB
    # 67.5 MiB: a 68 MiB segment, 0.5 MiB left, not split
    a.malloc(67 * MIB + MIB // 2)
    assert a.allocated_bytes == 512 + 26 * MIB + 68 * MIB
    # 9.5 MiB (< 10 MiB): a 20 MiB segment; 10.5 MiB left is split off
    h = a.malloc(9 * MIB + MIB // 2)
    assert a.allocated_bytes == 512 + 94 * MIB + 9 * MIB + MIB // 2
    # a second 9.5 MiB takes the 10.5 MiB rest whole (1 MiB left: not split)
    a.malloc(9 * MIB + MIB // 2)
    assert a.allocated_bytes == 512 + 94 * MIB + 20 * MIB
    # freed, the first 9.5 MiB block is reused by a 3 MiB request, split (6.5 MiB left)
    a.free(h)
    a.malloc(3 * MIB)
    assert a.allocated_bytes == 512 + 94 * MIB + 20 * MIB - 9 * MIB - MIB // 2 + 3 * MIB


def test_a_freed_block_is_split_for_a_smaller_tensor():
    # the fp32 concatenation of a rotary cache (64 MiB) freed, a 35 MiB qkv weight takes it
    # and the 29 MiB rest is split off: exact, where a fresh segment would count 36 MiB
    a = CachingAllocator()
    tmp = a.malloc(64 * MIB)
    a.free(tmp)
    assert a.allocated_bytes == 0
    a.malloc(35 * MIB)
    assert a.allocated_bytes == 35 * MIB
    a.malloc(35 * MIB)  # the 29 MiB rest is too small: a fresh 36 MiB segment
    assert a.allocated_bytes == 35 * MIB + 36 * MIB


def test_rope_caches_follow_each_scaling_kind():
    def caches(name):
        return [(c.positions, c.rotary_dim) for c in
                loading.rope_caches(load_config_file(CONFIGS / f"{name}.json"))]

    # Gemma 3 4B: sliding layers' own rope (rope_local_base_freq) over 131,072 positions;
    # the global layers' linear factor 8: LinearScalingRotaryEmbedding's max_len =
    # max_position x factor; head_dim 256
    assert caches("google--gemma-3-4b-it") == [(131072, 256), (131072 * 8, 256)]
    assert loading.rotary_cache_bytes(resolve("gemma-3-4b")) == (131072 + 1048576) * 256 * 2
    # Gemma 3 1B: unscaled, but two bases, so two caches of 32,768 positions
    assert caches("google--gemma-3-1b-it") == [(32768, 256), (32768, 256)]
    # DeepSeek-V3: YaRN over original_max_position_embeddings 4,096 x factor 40, MLA's
    # qk_rope_head_dim 64
    assert caches("deepseek-ai--DeepSeek-V3") == [(4096 * 40, 64)]
    # Phi-3.5-mini: longrope's short (4,096) and long (131,072) caches concatenated; head 96
    assert caches("microsoft--Phi-3.5-mini-instruct") == [(4096 + 131072, 96)]
    # Llama 3.1: llama3 scaling keeps max_position_embeddings
    assert caches("meta-llama--Meta-Llama-3.1-70B") == [(131072, 128)]


def test_mrope_caches_are_four_times_longer_in_vllm():
    """vLLM's get_rope builds MRotaryEmbedding wherever `mrope_section` is in the rope config
    (rotary_embedding/__init__.py), and MRotaryEmbedding.__init__ makes its cache
    `max_position_embeddings * 4` long (rotary_embedding/mrope.py, 0.11-0.24); the rotary dim
    is `int(head_size * partial_rotary_factor)`."""
    from kvplan.engines.vllm.config import rules_for

    def caches(name, factor):
        spec = load_config_file(CONFIGS / f"{name}.json")
        return [(c.positions, c.rotary_dim) for c in loading.rope_caches(spec, None, factor)]

    four = rules_for((0, 12, 0)).mrope_cache_factor
    assert four == 4 and rules_for((0, 24, 0)).mrope_cache_factor == 4
    # Qwen2-VL's spelling, rope_scaling {"type": "mrope", "mrope_section": [16, 24, 24]}:
    # 32,768 positions of head 128
    assert caches("Qwen--Qwen2-VL-7B-Instruct", four) == [(4 * 32768, 128)]
    # Qwen2.5-VL: {"type": "default", "mrope_section": ...}, 128,000 positions
    assert caches("families/Qwen--Qwen2.5-VL-7B-Instruct", four) == [(4 * 128000, 128)]
    # Qwen3.5: rope_parameters {"rope_type": "default", "mrope_section": [11, 11, 10],
    # "mrope_interleaved": true, "partial_rotary_factor": 0.25}: 262,144 positions, 64 of
    # the 256-dim heads rotated (2 x (11 + 11 + 10) = 64), first built by full-attention layer 3
    assert caches("families/Qwen--Qwen3.5-27B", four) == [(4 * 262144, 64)]
    # GLM-4.5V: rope_scaling {"rope_type": "default", "mrope_section": [8, 12, 12]},
    # partial_rotary_factor 0.5 of head 128, 65,536 positions
    assert caches("families/zai-org--GLM-4.5V", four) == [(4 * 65536, 64)]
    # SGLang's MRotaryEmbedding keeps max_position_embeddings (factor 1); so did vLLM before
    # Qwen2.5-VL's support (0.7.2)
    assert rules_for((0, 6, 6)).mrope_cache_factor == 1
    assert caches("families/Qwen--Qwen2.5-VL-7B-Instruct", 1) == [(128000, 128)]
    # Qwen3-VL-30B-A3B's config.json (verbatim): text_config.rope_scaling {"mrope_section":
    # [24, 20, 20], "rope_type": "default"}, 262,144 positions of head 128; 3 x 262,144 x 128
    # x 2 B = 0.1875 GiB more than a plain cache, what its 0.12 TP-2 logs' weights held
    assert caches("families/Qwen--Qwen3-VL-30B-A3B-Instruct", four) == [(4 * 262144, 128)]
    vl30 = load_config_file(CONFIGS / "families" / "Qwen--Qwen3-VL-30B-A3B-Instruct.json")
    assert loading.rotary_cache_bytes(vl30, four) - loading.rotary_cache_bytes(vl30) \
        == 3 * GIB // 16
    # Qwen3-VL spells it in text_config.rope_scaling with rope_type "default"
    raw = {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
           "text_config": {"model_type": "qwen3_vl_text", "hidden_size": 2048,
                           "num_hidden_layers": 28, "num_attention_heads": 16,
                           "num_key_value_heads": 8, "head_dim": 128,
                           "intermediate_size": 6144, "vocab_size": 151936,
                           "max_position_embeddings": 262144,
                           "rope_scaling": {"mrope_interleaved": True,
                                            "mrope_section": [24, 20, 20],
                                            "rope_type": "default"}}}
    from kvplan.sources.hfconfig import spec_from_config

    spec = spec_from_config(raw, "config.json", "qwen3-vl-2b")
    assert spec.rope is not None and spec.rope.mrope
    # 4 x 262,144 x 128 x 2 B = 256 MiB (the 0.25 GiB the T4 pooling logs lack)
    assert loading.rotary_cache_bytes(spec, four) == 256 * MIB


def test_r1_distill_qwen_14b_tp2_is_the_logged_13_9476():
    """vllm#13061 (V0 0.7.2, 2 x RTX 4090, TP 2): "Loading model weights took 13.9476 GB"
    (GiB). The tensors are 13.7561 GiB; the rest is the rotary cache (131,072 x 128 x 2 B =
    32 MiB) and the allocator: per layer the 35 MiB qkv, 25 MiB o_proj and 135 MiB gate_up
    each keep 1 MiB more and the 67.5 MiB down_proj 0.5 MiB more (3.5 MiB x 48 layers), except
    where the rotary cache's freed fp32 buffers (32, 32 and 64 MiB) take layers 1-3's
    attention weights exactly (4 MiB)."""
    spec = resolve(str(MODELS / "deepseek-r1-distill-qwen-14b.yaml"))
    # per rank, bf16: half the padded vocabulary (152,064 / 2 rows of 5,120) for the embedding
    # and the untied head; per layer qkv 3,584 x 5,120 + its bias, o_proj 5,120 x 2,560,
    # gate_up 13,824 x 5,120, down 5,120 x 6,912, two norms; the final norm
    per_layer = 3584 * 5120 + 3584 + 5120 * 2560 + 13824 * 5120 + 5120 * 6912 + 2 * 5120
    tensors = 2 * (2 * 76032 * 5120 + 48 * per_layer + 5120)
    expected = tensors + 32 * MIB + (48 * 7 // 2 - 4) * MIB + 48 * 4 * 512
    got = loading.loaded_weight_bytes(spec, tp=2)[0]
    assert got == expected
    assert round(got / GIB, 4) == 13.9476


def test_gemma3_4b_vlm_is_the_logged_8_58():
    """vllm PR 21489 (0.10.0, B200, google/gemma-3-4b-it): "8.58 GiB for weight". The
    checkpoint is 8.01 GiB (vision tower included); the global layers' linear-scaled rotary
    cache is 1,048,576 x 256 x 2 B = 512 MiB and the sliding layers' 64 MiB."""
    spec = resolve("gemma-3-4b")
    got = loading.loaded_weight_bytes(spec)[0]
    assert got >= 8600158944 + 576 * MIB
    assert round(got / GIB, 2) == 8.58


@pytest.mark.parametrize("pp", [1, 2])
def test_every_stage_builds_its_own_caches(pp):
    # each pipeline stage's process builds the caches its layers ask for
    spec = resolve("gemma-3-4b")
    stages = loading.loaded_weight_bytes(spec, pp=pp)
    assert len(stages) == pp
    if pp == 2:
        assert all(s > 576 * MIB for s in stages)


def test_rope_survives_the_yaml_round_trip_and_bad_values_are_one_clear_error():
    from kvplan.core.errors import SpecError
    from kvplan.sources.yamlspec import spec_from_dict, spec_to_dict

    spec = load_config_file(CONFIGS / "microsoft--Phi-3.5-mini-instruct.json")
    again = spec_from_dict(spec_to_dict(spec), "x.yaml")
    assert again.rope == spec.rope and again.rope is not None
    assert again.rope.original_max_positions == 4096
    raw = spec_to_dict(resolve("gemma-3-4b"))
    raw["shapes"]["rope"]["factor"] = "eight"
    with pytest.raises(SpecError, match="factor"):
        spec_from_dict(raw, "x.yaml")



@pytest.mark.parametrize("factor", [1024, 1024.5, float("nan"), 0, True])
def test_config_json_and_yaml_take_the_same_rope_factors(factor):
    # one bound, (0, 1024]: config.json ignores a factor outside it (an unscaled rope), a
    # library YAML refuses it
    from kvplan.core.errors import SpecError
    from kvplan.sources.hfconfig import spec_from_config
    from kvplan.sources.yamlspec import spec_from_dict, spec_to_dict

    taken = not isinstance(factor, bool) and 0 < factor <= 1024
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 8,
           "hidden_size": 512, "max_position_embeddings": 4096,
           "rope_scaling": {"rope_type": "linear", "factor": factor}}
    rope = spec_from_config(cfg, "config.json", name="m").rope
    assert (rope.factor if rope is not None else 1.0) == (factor if taken else 1.0)
    raw = spec_to_dict(resolve("gemma-3-4b"))
    raw["shapes"]["rope"]["factor"] = factor
    if taken:
        assert spec_from_dict(raw, "x.yaml").rope.factor == factor
    else:
        with pytest.raises(SpecError, match="factor"):
            spec_from_dict(raw, "x.yaml")

# Library models whose context is not their config.json's max_position_embeddings, by choice
# (each YAML's notes say why): their rotary cache follows the library's context.
ROPE_CONTEXT_DIFFERS = {
    "llama-2-13b": "the vendored config is an early revision with 2,048 positions; 4,096",
    "qwen2.5-72b": "config.json's 32,768; the library plans the card's 131,072 (YaRN)",
    "falcon-7b": "config.json states no max_position_embeddings",
}


def test_library_rope_caches_are_their_configs():
    """Every library model with its config.json as a fixture builds the rotary caches the
    config gives (the library's `shapes.rope` where the scaling changes their length)."""
    import sys

    sys.path.insert(0, str(TESTS / "sources"))
    from test_library_reproducible import PAIRS

    for pair in PAIRS:
        spec, path = pair.values
        if spec.name in ROPE_CONTEXT_DIFFERS:
            continue
        want = [(c.positions, c.rotary_dim, c.first_layer)
                for c in loading.rope_caches(load_config_file(path))]
        if spec.name == "deepseek-v2":  # the library plans 131,072 of config's 163,840
            assert spec.max_context_tokens == 131072
        got = [(c.positions, c.rotary_dim, c.first_layer) for c in loading.rope_caches(spec)]
        assert got == want, spec.name


def test_sglang_counts_segments_not_blocks():
    """SGLang's "mem usage" is free device memory lost (segments after empty_cache): at least
    vLLM's block count, and for QwQ-32B at TP 4 (the shared SGLang log: 15.54 GB, which are
    GiB) within 0.5%: its 12.5 MiB o_proj shards leave 1.5 MiB of each 14 MiB segment free but
    reserved, the 17.5 MiB qkv shards 0.5 MiB of each 18 MiB."""
    from dataclasses import replace

    from kvplan.core.layers import FullAttention
    from kvplan.core.spec import ModelSpec
    from kvplan.engines import sglang

    # QwQ-32B config.json: hidden 5120, MLP 27648, 64 layers, 40 / 8 heads of 128, vocabulary
    # 152064, untied, q/k/v biases, 40,960 positions
    qwq = with_family_facts(ModelSpec(
        name="qwq-32b", layers=(FullAttention(8, 128),) * 64, family="qwen2",
        num_attention_heads=40, hidden_size=5120, vocab_size=152064, intermediate_size=27648,
        tie_word_embeddings=False, attention_bias=True, max_context_tokens=40960))
    seg = sglang.loaded_weight_bytes(qwq, tp=4)[0]
    assert seg > loading.loaded_weight_bytes(replace(qwq), tp=4)[0]
    assert abs(seg / GIB - 15.54) <= 15.54 * 0.005
