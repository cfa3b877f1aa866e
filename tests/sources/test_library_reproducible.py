"""The library is reproducible from the real configs: where a library model's source config.json
is a test fixture, reading that config gives exactly the library's layers.

(The Hub revision of some fixtures differs from the library's source in fields that do not
shape the cache, e.g. token ids; only the layers, dtype-independent, are compared.)
"""


import pytest
from paths import FIXTURES

from kvplan.sources.hfconfig import load_config_file
from kvplan.sources.library import load_library
from kvplan.sources.yamlspec import SHAPE_BOOLS, SHAPE_INTS

CONFIGS = FIXTURES / "hf-configs"
# Where the fixture file name differs from "<org>--<name>" of the library's source repo.
RENAMED = {
    "meta-llama/Llama-3.1-405B": "meta-llama--Meta-Llama-3.1-405B.json",
    "meta-llama/Llama-3.1-70B": "meta-llama--Meta-Llama-3.1-70B.json",
    # the Instruct model's config (same shapes as the base model the library entry names)
    "meta-llama/Llama-3.1-8B": "meta-llama--Llama-3.1-8B-Instruct.json",
}


def _pairs():
    for spec in load_library():
        repo = spec.source.repo
        if not repo:
            continue
        path = CONFIGS / RENAMED.get(repo, repo.replace("/", "--") + ".json")
        if not path.is_file():  # the architecture families' configs (test_families.py)
            path = CONFIGS / "families" / path.name
        if path.is_file():
            yield pytest.param(spec, path, id=spec.name)


PAIRS = list(_pairs())


def test_most_of_the_library_has_its_config_as_a_fixture():
    assert len(PAIRS) >= 40


@pytest.mark.parametrize(("spec", "path"), PAIRS)
def test_config_reproduces_library_layers(spec, path):
    assert load_config_file(path).layers == spec.layers


SHAPES = (*SHAPE_INTS, *SHAPE_BOOLS, "ssm", "blocks", "vision", "expert_quantization")


@pytest.mark.parametrize(("spec", "path"), PAIRS)
def test_config_reproduces_library_shapes(spec, path):
    """The library's `shapes:` are what config.json gives (hidden, vocabulary, MLP and MoE
    widths, tied embeddings, MLA ranks), field by field: none added, none missing."""
    from_config = load_config_file(path)
    keys = SHAPES
    if spec.name == "llama-4-maverick":
        # aiconfigurator's copy is trimmed to text_config; the YAML writes Maverick's
        # vision_config (the same as Scout's) by hand
        keys = tuple(k for k in SHAPES if k != "vision")
        assert from_config.vision is None and spec.vision == _scout_vision()
    assert {k: getattr(spec, k) for k in keys} == {k: getattr(from_config, k) for k in keys}


def _scout_vision():  # noqa: N802
    return next(s for s in load_library() if s.name == "llama-4-scout").vision


def test_library_shapes_where_known():
    # DeepSeek-V3 config.json: hidden_size 7168, vocab_size 129280, moe_intermediate_size
    # 2048, n_routed_experts 256, first_k_dense_replace 3, q_lora_rank 1536.
    spec = next(s for s in load_library() if s.name == "deepseek-v3")
    assert (spec.hidden_size, spec.vocab_size, spec.moe_intermediate_size, spec.num_experts,
            spec.first_dense_layers, spec.q_lora_rank) == (7168, 129280, 2048, 256, 3, 1536)
    assert [spec.is_moe_layer(i) for i in range(4)] == [False, False, False, True]
    assert spec.num_moe_layers == 61 - 3
    # Mixtral-8x7B: every layer MoE, experts 14336 wide, no dense MLP.
    mixtral = next(s for s in load_library() if s.name == "mixtral-8x7b")
    assert (mixtral.intermediate_size, mixtral.moe_intermediate_size) == (None, 14336)
    # Llama-4-Maverick: interleave_moe_layer_step 2 -> MoE on odd layers (24 of 48).
    maverick = next(s for s in load_library() if s.name == "llama-4-maverick")
    assert maverick.num_moe_layers == 48 // 2 and maverick.is_moe_layer(1)
