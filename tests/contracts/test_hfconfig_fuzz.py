"""Mutated real configs end in a ModelSpec or a KvplanError, never another exception.

Mutations: dropped keys, wrong types, huge / negative / zero / non-finite numbers, nulls,
values wrapped in lists or dicts, whole configs nested under text_config, and corrupted JSON
text. Every spec that does come out must also be sizeable.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import paths
import pytest
from hostile import change_field
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.core.dtypes import BF16
from kvplan.core.errors import KvplanError
from kvplan.core.sizing import per_token_bytes, request_bytes
from kvplan.core.spec import ModelSpec
from kvplan.sources.hfconfig import parse_json, spec_from_config

FIXTURES = paths.FIXTURES / "hf-configs"
TEXTS = {p.name: p.read_bytes() for p in sorted(FIXTURES.glob("*.json"))}
CONFIGS: dict[str, Any] = {}
for _name, _text in TEXTS.items():
    try:
        CONFIGS[_name] = json.loads(_text)
    except ValueError:  # a fixture that is broken on purpose: still used as text
        pass

# Field names the reader looks at: mutating these exercises its branches.
KEYS = [
    "model_type", "num_hidden_layers", "n_layer", "num_layers", "num_attention_heads", "n_head",
    "num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num",
    "multi_query", "new_decoder_architecture", "multi_query_attention", "attn_config",
    "hidden_size", "n_embd", "head_dim", "attention_head_dim", "kv_channels", "v_head_dim",
    "max_position_embeddings", "n_positions", "seq_length", "torch_dtype", "dtype",
    "sliding_window", "sliding_window_size", "use_sliding_window", "max_window_layers",
    "sliding_window_pattern", "layer_types", "layers_block_type", "hybrid_override_pattern",
    "hybrid_layer_pattern", "attn_type_list", "attn_layer_period", "attn_layer_offset",
    "attn_layer_indices", "full_attention_interval", "cross_attention_layers",
    "full_attn_idxs", "attention_types", "window_size", "attention_chunk_size",
    "no_rope_layers", "no_rope_layer_interval", "num_kv_shared_layers", "global_head_dim",
    "num_global_key_value_heads", "attention_k_eq_v", "swa_num_key_value_heads",
    "swa_head_dim", "swa_v_head_dim", "swa_num_attention_heads", "kv_lora_rank",
    "qk_rope_head_dim", "index_topk", "index_head_dim", "indexer_types", "index_topk_pattern",
    "block_configs", "n_heads_in_group", "no_op", "window_length", "mamba_num_heads",
    "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel", "mamba_n_heads",
    "mamba_d_head", "mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_n_groups",
    "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
    "linear_value_head_dim", "linear_conv_kernel_dim", "mamba_ssm_cache_dtype",
    "text_config", "vision_config", "image_size", "patch_size", "max_num_tiles",
    "is_encoder_decoder", "conv_L_cache", "state_size", "expand",
]
NUMBERS = st.one_of(
    st.sampled_from([0, -1, 1, 2, 3, 4, 5, 8, 64, 127, 128, 4096, 10**9, 10**18, 2**53 + 1,
                     -(10**18), 2**64, 1.5, 32.0, 1e308, -0.0]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
WORDS = st.sampled_from([
    "full_attention", "sliding_attention", "chunked_attention", "linear_attention", "mamba",
    "attention", "mlp", "moe", "indexed_attention", "conv", "hybrid", "auto", "float32",
    "bfloat16", "LLLG", "M*-E", "FSSF", "full", "shared", "", "llama", "gemma3", "gemma3_text",
    "gemma4_text", "llama4", "qwen3_next", "nemotron_h", "jamba", "mamba2", "minimax",
    "falcon_h1", "deepseek_v32", "mllama",
])
LEAVES = st.one_of(st.none(), st.booleans(), NUMBERS, WORDS, st.text(max_size=6))
VALUES = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=6),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=4)), children,
                        max_size=4)),
    max_leaves=16,
)


def check(raw: Any) -> None:
    """The contract: a ModelSpec that can be sized, or a KvplanError."""
    try:
        spec = spec_from_config(raw, "fuzz.json", name="fuzz")
    except KvplanError:
        return
    assert isinstance(spec, ModelSpec)
    assert 1 <= spec.num_layers
    distinct = tuple(set(spec.layers))  # frozen layers: sizing each kind once is enough
    assert per_token_bytes(distinct, BF16) >= 0
    assert request_bytes(distinct, 1000, BF16, tp=2) >= 0


def dict_nodes(node: Any) -> list[dict]:
    """Every mapping in a config (the top level, text_config, block_configs[i].attention ...)."""
    out = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            out.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


@st.composite
def mutated_configs(draw: st.DrawFn) -> Any:
    name = draw(st.sampled_from(sorted(CONFIGS)))
    raw = copy.deepcopy(CONFIGS[name])
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        nodes = dict_nodes(raw)
        target = draw(st.sampled_from(nodes)) if nodes else None
        op = draw(st.sampled_from(["drop", "set", "number", "null", "wrap", "item", "nest",
                                   "replace"]))
        if op == "nest":
            raw = {draw(st.sampled_from(["text_config", "llm_config", "language_config"])): raw,
                   "model_type": draw(WORDS)}
            continue
        if op == "replace":
            raw = draw(VALUES)
            continue
        if target is None:
            continue
        existing = sorted(target)
        key = draw(st.sampled_from(existing + KEYS) if existing else st.sampled_from(KEYS))
        if change_field(draw, target, key, op, VALUES, NUMBERS):
            continue
        if op == "wrap":
            value = target.get(key)
            target[key] = draw(st.sampled_from([[value], {"value": value}, [[value]]]))
        elif op == "item" and isinstance(target.get(key), list) and target[key]:
            items = target[key]
            index = draw(st.integers(min_value=0, max_value=len(items) - 1))
            change = draw(st.sampled_from(["set", "drop", "dup"]))
            if change == "set":
                items[index] = draw(LEAVES)
            elif change == "drop":
                del items[index]
            else:
                items.append(items[index])
    return raw


@pytest.mark.slow  # ~3 s: 1,000 examples
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_configs())
def test_mutated_configs_end_in_a_spec_or_a_kvplan_error(raw):
    check(raw)


@st.composite
def corrupted_texts(draw: st.DrawFn) -> bytes:
    text = TEXTS[draw(st.sampled_from(sorted(TEXTS)))]
    op = draw(st.sampled_from(["truncate", "insert", "number", "deep", "bytes"]))
    if op == "truncate":
        return text[:draw(st.integers(min_value=0, max_value=len(text)))]
    if op == "insert":
        at = draw(st.integers(min_value=0, max_value=len(text)))
        junk = draw(st.sampled_from([b"{", b"}", b"[", b"]", b",", b":", b'"', b"\\", b"\xff",
                                     b"NaN", b"-Infinity", b"null"]))
        return text[:at] + junk + text[at:]
    if op == "number":
        # the first number in the file becomes a non-finite, huge or over-long literal
        literal = draw(st.sampled_from([b"Infinity", b"NaN", b"1e999", b"-1e999",
                                        b"9" * 5000, b"-0", b"1.0000000001"]))
        at = next((i for i, c in enumerate(text) if chr(c).isdigit()), 0)
        end = at
        while end < len(text) and (chr(text[end]).isdigit() or text[end] in b".eE+-"):
            end += 1
        return text[:at] + literal + text[end:]
    if op == "deep":
        depth = draw(st.sampled_from([10, 1000, 100_000]))
        return b'{"text_config": ' + b"[" * depth + b"]" * depth + b"}"
    return draw(st.binary(max_size=64))


@settings(max_examples=200, deadline=None)
@given(corrupted_texts())
def test_corrupted_json_text_ends_in_a_spec_or_a_kvplan_error(data):
    try:
        raw = parse_json(data, "fuzz.json")
    except KvplanError:
        return
    check(raw)


BAD_VALUES = [None, -1, 0, 10**18, 2**53 + 1, 1.5, float("inf"), float("nan"), "x", True,
              [], {}, [1, 2], {"a": 1}]


@pytest.mark.slow  # ~2.5 s: every field x every bad value
def test_every_field_of_every_real_config_with_every_bad_value():
    """Exhaustive single-field mutations of the real configs (top level and text_config)."""
    runs = 0
    for raw in CONFIGS.values():
        for path in ([], ["text_config"]):
            node = raw
            for part in path:
                node = node.get(part) if isinstance(node, dict) else None
            if not isinstance(node, dict):
                continue
            for key in sorted(set(node) | set(KEYS)):
                for value in BAD_VALUES + ["drop"]:
                    # the reader never changes its input: copying the mutated path suffices
                    mutated = dict(raw)
                    target = mutated
                    for part in path:
                        target[part] = dict(target[part])
                        target = target[part]
                    if value == "drop":
                        target.pop(key, None)
                    else:
                        target[key] = value
                    check(mutated)
                    runs += 1
    assert runs > 10_000
