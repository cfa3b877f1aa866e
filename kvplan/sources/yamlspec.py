"""The library's YAML model files <-> ModelSpec (schema `kvplan.model/1`, docs/model-schema.md).

`layers` is an ordered list of groups; a group is one layer kind with a `count`, or
`repeat: N` over a nested `layers` list (Gemma's 5 sliding + 1 full, repeated).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kvplan.core.layers import (
    MLA,
    ChunkedLocal,
    CompressedAttention,
    CrossAttention,
    FullAttention,
    Layer,
    NoCache,
    RecurrentState,
    SlidingWindow,
    StateTensor,
)
from kvplan.core.patterns import lazy
from kvplan.core.quant import NONE
from kvplan.core.spec import (
    MAX_LAYERS,
    MAX_ROPE_FACTOR,
    MAX_ROPE_ORIGINAL_POSITIONS,
    Block,
    Checkpoint,
    ModelSpec,
    Rope,
    Source,
    SSMShapes,
    VisionTower,
)
from kvplan.sources.families import with_family_facts
from kvplan.sources.fields import Fields, read_yaml
from kvplan.sources.reader import finite_number

SCHEMA = "kvplan.model/1"
STATE_DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2,
                     "float16": 2, "fp8": 1, "int8": 1}
_BYTES_TO_DTYPE = {4: "fp32", 2: "bf16", 1: "fp8"}

_TOP = {"schema", "name", "display_name", "family", "aliases", "source", "dtype",
        "max_context_tokens", "num_params", "num_attention_heads", "shapes", "quantization_config",
        "checkpoint", "layers", "notes"}
# `shapes:` (optional, each field optional): ModelSpec's shapes beyond the KV cache.
SHAPE_INTS = ("hidden_size", "vocab_size", "intermediate_size", "num_experts",
              "num_experts_per_token", "moe_intermediate_size", "num_shared_experts",
              "shared_expert_intermediate_size", "first_dense_layers", "moe_layer_step",
              "q_lora_rank", "qk_nope_head_dim", "mla_v_head_dim", "index_n_heads",
              "num_nextn_predict_layers", "moe_latent_size", "hyper_connections", "o_groups",
              "o_lora_rank", "num_hash_layers")
SHAPE_BOOLS = ("tie_word_embeddings", "attention_bias", "routing_bias", "mla_output_gate",
               "attention_residuals", "moe_latent_norm", "vision_prefix_lm")
# fields that may be 0 (no shared experts, no dense layers, no MTP layer)
_SHAPE_ZERO_OK = {"num_shared_experts", "shared_expert_intermediate_size",
                  "first_dense_layers", "num_nextn_predict_layers", "qk_nope_head_dim"}
# `shapes.ssm`: the recurrent mixer of a hybrid's state layers (ModelSpec.ssm)
SSM_KINDS = ("mamba1", "mamba2", "gated_deltanet", "kda")
_SSM_INTS = ("d_inner", "d_state", "d_conv", "num_heads", "n_groups", "dt_rank")
_SSM_BOOLS = ("conv_bias", "proj_bias", "inner_norms", "full_rank_gate", "bounded_gate",
              "gated_norm")
_SSM_BOOLS_ON = ("conv_bias", "gated_norm")  # true when a spec leaves them out
# `shapes.blocks`: one token per layer (ModelSpec.blocks), a mixer letter and/or a
# feed-forward letter, then `:width` for a per-layer MLP width and `xN` to repeat the token.
BLOCK_MIXERS = {"*": "attention", "M": "ssm", "P": "parallel_ssm", "L": "linear"}
BLOCK_FFNS = {"-": "mlp", "E": "moe", "B": "mlp+moe", "F": "linear"}
_BLOCK_TOKEN = lazy(r"^(?:([*MPL]?)([-EBF]?)|(_))(?::(\d+))?(?:x(\d+))?$")
_SOURCE = {"repo", "revision", "file", "sha256", "paper", "note"}
_ATTN = {"kind", "count", "num_kv_heads", "head_dim", "v_head_dim"}
_KIND_FIELDS = {
    "full": _ATTN,
    "sliding": _ATTN | {"window"},
    "chunked": _ATTN | {"chunk"},
    "cross": _ATTN | {"encoder_tokens"},
    "mla": {"kind", "count", "kv_lora_rank", "qk_rope_head_dim", "index_head_dim"},
    "state": {"kind", "count", "variant", "tensors"},
    "none": {"kind", "count"},
    # DeepSeek-V4 compressed attention (kvplan.core.layers.CompressedAttention)
    "compressed": {"kind", "count", "head_dim", "rope_dim", "window", "compress_ratio",
                   "index_head_dim"},
}
MAX_DIM = 2**20  # a head size, head count, rank or state dimension (real ones: < 2**15)
MODEL_DTYPES = ("bf16", "fp16", "fp32")


def load_yaml_file(path: Path) -> ModelSpec:
    return spec_from_dict(read_yaml(str(path)), str(path))


def spec_from_dict(raw: Any, source: str) -> ModelSpec:
    top = Fields(raw, source)
    top.check_known(_TOP)
    schema = top.str("schema", SCHEMA)
    if schema != SCHEMA:
        raise top.error("schema", f"is {schema!r}; this kvplan reads {SCHEMA!r}")
    name = top.str("name")
    layers = _read_layers(top, "layers", top.list("layers"))
    if not layers:
        raise top.error("layers", "is empty", "list at least one layer group")
    src = Source()
    if top.has("source"):
        s = top.sub("source")
        s.check_known(_SOURCE)
        src = Source(**{k: (str(v) if v is not None else None) for k, v in s.raw.items()})
    dtype = top.str("dtype", "bf16")
    # the checkpoint's compute dtype, which --kv-dtype auto resolves to: a float, never a
    # quantized cache format or 'auto' itself
    if dtype not in MODEL_DTYPES:
        raise top.error("dtype", f"unknown model dtype {dtype!r}",
                        "one of: " + ", ".join(MODEL_DTYPES))
    aliases = top.list("aliases", [])
    if not all(isinstance(a, str) for a in aliases):
        raise top.error("aliases", "must be a list of names")
    shapes: dict[str, Any] = {}
    if top.has("shapes"):
        sh = top.sub("shapes")
        sh.check_known(set(SHAPE_INTS) | set(SHAPE_BOOLS)
                       | {"ssm", "blocks", "vision", "expert_dtype", "rope"})
        for key in SHAPE_INTS:
            shapes[key] = sh.int(key, None, minimum=0 if key in _SHAPE_ZERO_OK else 1)
        for key in SHAPE_BOOLS:
            if sh.has(key):
                shapes[key] = sh.bool(key, False)
        if sh.has("ssm"):
            shapes["ssm"] = _read_ssm(sh.sub("ssm"))
        if sh.has("expert_dtype"):
            from kvplan.sources.quant import DEEPSEEK_V4_EXPERT_DTYPES

            value = sh.str("expert_dtype")
            if value not in DEEPSEEK_V4_EXPERT_DTYPES:
                raise sh.error("expert_dtype", f"is {value!r}; kvplan knows "
                               + " and ".join(DEEPSEEK_V4_EXPERT_DTYPES) + " (DeepSeek-V4)")
            if top.raw.get("family") != "deepseek_v4":  # read nowhere else: not dropped
                raise sh.error("expert_dtype", "is read only for family deepseek_v4",
                               "remove it, or state the format in quantization_config")
            shapes["expert_dtype"] = value
        if sh.has("vision"):
            shapes["vision"] = _read_vision(sh.sub("vision"))
        if sh.has("rope"):
            shapes["rope"] = _read_rope(sh.sub("rope"))
        if sh.has("blocks"):
            shapes["blocks"] = parse_blocks(sh, sh.str("blocks"))
    quant = NONE
    if top.has("quantization_config"):
        from kvplan.sources.quant import read_quantization

        quant = read_quantization(top.raw["quantization_config"], source)
    expert_dtype = shapes.pop("expert_dtype", None)
    if top.raw.get("family") == "deepseek_v4":
        from kvplan.sources.quant import deepseek_v4_formats

        quant, shapes["expert_quantization"], _ = deepseek_v4_formats(quant, expert_dtype,
                                                                       source)
    checkpoint = None
    if top.has("checkpoint"):
        ck = top.sub("checkpoint")
        ck.check_known({"bytes", "source"})
        by = ck.sub("bytes")
        if not by.raw:
            raise ck.error("bytes", "is empty", "give bytes per safetensors dtype, e.g. "
                           "{BF16: 16060522496}")
        pairs = tuple((str(k), by.int(str(k), minimum=0)) for k in by.raw)
        checkpoint = Checkpoint(tuple(sorted(pairs, key=lambda kv: (-kv[1], kv[0]))),
                                ck.str("source"))
    return with_family_facts(ModelSpec(
        name=name,
        layers=tuple(layers),
        source=src,
        display_name=top.str("display_name", None),
        family=top.str("family", None),
        dtype=dtype,
        max_context_tokens=top.int("max_context_tokens", None),
        num_params=top.int("num_params", None),
        num_attention_heads=top.int("num_attention_heads", None),
        aliases=tuple(aliases),
        quantization=quant,
        checkpoint=checkpoint,
        **shapes,
    ))


def _read_ssm(f: Fields) -> SSMShapes:
    f.check_known({"kind", *_SSM_INTS, *_SSM_BOOLS})
    kind = f.str("kind")
    if kind not in SSM_KINDS:
        raise f.error("kind", f"is {kind!r}", "one of: " + ", ".join(SSM_KINDS))
    optional = ("num_heads", "n_groups", "dt_rank")
    ints = {k: f.int(k, 0, minimum=0, maximum=MAX_DIM) if k in optional
            else f.int(k, maximum=MAX_DIM) for k in _SSM_INTS}
    bools = {k: f.bool(k, k in _SSM_BOOLS_ON) for k in _SSM_BOOLS}
    return SSMShapes(kind, **ints, **bools)


# `shapes.vision`: a multimodal checkpoint's vision tower (ModelSpec.vision)
VISION_KINDS = ("clip", "siglip", "llama4", "mllama", "moonvit", "kimi_k25", "qwen2_vl",
                "qwen2_5_vl", "qwen2_5_omni",
                "radio", "gemma4", "qwen3_vl", "qwen3_omni", "exaone4_5",
                "pixtral", "siglip2")
_VISION_REQUIRED = ("hidden_size", "intermediate_size", "num_layers", "patch_size", "image_size")
_VISION_OPTIONAL = ("num_channels", "num_global_layers", "max_num_tiles", "num_aspect_ratios",
                    "output_dim", "projector_input_dim", "projector_output_dim",
                    "attention_size", "temporal_patch_size", "num_cls_tokens", "num_heads",
                    "num_kv_heads", "head_dim", "position_table_size", "standardize",
                    "num_deepstack")


def _read_vision(f: Fields) -> VisionTower:
    f.check_known({"kind", *_VISION_REQUIRED, *_VISION_OPTIONAL})
    kind = f.str("kind")
    if kind not in VISION_KINDS:
        raise f.error("kind", f"is {kind!r}", "one of: " + ", ".join(VISION_KINDS))
    ints = {k: f.int(k, maximum=MAX_DIM) for k in _VISION_REQUIRED}
    ints.update({k: f.int(k, 3 if k == "num_channels" else 0, minimum=0, maximum=MAX_DIM)
                 for k in _VISION_OPTIONAL})
    return VisionTower(kind, **ints)


def _read_rope(f: Fields) -> Rope:
    """`shapes.rope`: the rotary scaling config.json states (ModelSpec.rope): `scaling` (its
    rope_type), `factor`, `original_max_positions`, `local` (sliding layers with a rope of
    their own base, Gemma 3), `mrope` (config.json gives `mrope_section`), `partial` (its
    partial_rotary_factor)."""
    f.check_known({"scaling", "factor", "original_max_positions", "local", "mrope", "partial"})
    factor = f.raw.get("factor", 1)
    if not finite_number(factor) or not 0 < factor <= MAX_ROPE_FACTOR:
        raise f.error("factor", f"must be a number in (0, {MAX_ROPE_FACTOR}], got {factor!r}")
    partial = f.raw.get("partial", 1)
    if not finite_number(partial) or not 0 < partial <= 1:
        raise f.error("partial", f"must be a number in (0, 1], got {partial!r}")
    return Rope(f.str("scaling", "default"), float(factor),
                f.int("original_max_positions", None, maximum=MAX_ROPE_ORIGINAL_POSITIONS),
                f.bool("local", False), f.bool("mrope", False), float(partial))


def parse_blocks(f: Fields, text: str) -> tuple[Block, ...]:
    """`shapes.blocks`: e.g. "M - M * E" (Nemotron-H) or "*-:28672x6 -:7168x2" (NAS)."""
    out: list[Block] = []
    for token in text.split():
        m = _BLOCK_TOKEN.match(token)
        if m is None or not (m.group(1) or m.group(2) or m.group(3)) or (
                m.group(4) and m.group(2) not in ("-", "B")):
            raise f.error("blocks", f"has token {token!r}", "a token is a mixer letter "
                          "(* attention, M ssm, P ssm beside the previous attention, L linear) "
                          "and/or a feed-forward letter (- MLP, E MoE, B both, F linear), or _ "
                          "for a layer without weights, then :width (MLP only) and xN to "
                          "repeat it")
        width = int(m.group(4)) if m.group(4) else None
        repeat = int(m.group(5)) if m.group(5) else 1
        if (width is not None and not 1 <= width <= MAX_DIM) or not 1 <= repeat or \
                len(out) + repeat > MAX_LAYERS:
            raise f.error("blocks", f"has token {token!r} with a width or count out of range")
        block = Block(BLOCK_MIXERS.get(m.group(1)), BLOCK_FFNS.get(m.group(2)), width)
        out += [block] * repeat
    if not out:
        raise f.error("blocks", "is empty")
    return tuple(out)


def format_blocks(blocks: tuple[Block, ...]) -> str:
    mixers = {v: k for k, v in BLOCK_MIXERS.items()}
    ffns = {v: k for k, v in BLOCK_FFNS.items()}
    tokens: list[tuple[str, int]] = []
    for b in blocks:
        t = mixers.get(b.mixer or "", "") + ffns.get(b.ffn or "", "") or "_"
        if b.ffn_width is not None:
            t += f":{b.ffn_width}"
        if tokens and tokens[-1][0] == t:
            tokens[-1] = (t, tokens[-1][1] + 1)
        else:
            tokens.append((t, 1))
    return " ".join(t if n == 1 else f"{t}x{n}" for t, n in tokens)


def _read_layers(parent: Fields, path: str, groups: list[Any]) -> list[Layer]:
    layers: list[Layer] = []
    for i, raw in enumerate(groups):
        group = Fields(raw, parent.source, f"{parent.where(path)}[{i}]")
        # counts are bounded before any list is built: `count: 1000000000` must fail at
        # once, not after allocating a billion list entries
        room = MAX_LAYERS - len(layers)
        if group.has("repeat"):
            group.check_known({"repeat", "layers"})
            inner = _read_layers(group, "layers", group.list("layers"))
            repeat = group.int("repeat", maximum=MAX_LAYERS)
            if len(inner) * repeat > room:
                raise group.error("repeat", f"makes {len(inner) * repeat:,} layers, more than "
                                  f"the {MAX_LAYERS:,} kvplan accepts")
            layers.extend(inner * repeat)
        else:
            layer = _read_layer(group)
            count = group.int("count", 1, maximum=MAX_LAYERS)
            if count > room:
                raise group.error("count", f"makes the model more than {MAX_LAYERS:,} layers, "
                                  "more than kvplan accepts")
            layers.extend([layer] * count)
    return layers


def _read_layer(f: Fields) -> Layer:
    kind = f.str("kind")
    if kind not in _KIND_FIELDS:
        raise f.error("kind", f"unknown layer kind {kind!r}",
                      "one of: " + ", ".join(_KIND_FIELDS))
    f.check_known(_KIND_FIELDS[kind])
    if kind == "mla":
        return MLA(f.int("kv_lora_rank", maximum=MAX_DIM),
                   f.int("qk_rope_head_dim", maximum=MAX_DIM),
                   f.int("index_head_dim", None, maximum=MAX_DIM))
    if kind == "none":
        return NoCache()
    if kind == "compressed":
        ratio = f.int("compress_ratio", 0, minimum=0)
        if ratio not in (0, 1, 4, 128):
            raise f.error("compress_ratio", f"is {ratio}; kvplan models 0/1, 4 and 128")
        head_dim = f.int("head_dim", maximum=MAX_DIM)
        rope = f.int("rope_dim", maximum=MAX_DIM)
        if rope >= head_dim:
            raise f.error("rope_dim", f"is {rope}, not less than head_dim {head_dim}")
        return CompressedAttention(head_dim, rope, f.int("window", maximum=MAX_DIM), ratio,
                                   f.int("index_head_dim", None, maximum=MAX_DIM))
    if kind == "state":
        return RecurrentState(f.str("variant"), tuple(
            _read_tensor(Fields(t, f.source, f"{f.where('tensors')}[{j}]"))
            for j, t in enumerate(f.list("tensors"))))
    common = dict(num_kv_heads=f.int("num_kv_heads", maximum=MAX_DIM),
                  head_dim=f.int("head_dim", maximum=MAX_DIM),
                  v_head_dim=f.int("v_head_dim", None, maximum=MAX_DIM))
    if kind == "full":
        return FullAttention(**common)
    if kind == "sliding":
        return SlidingWindow(**common, window=f.int("window"))
    if kind == "chunked":
        return ChunkedLocal(**common, chunk=f.int("chunk"))
    return CrossAttention(**common, encoder_tokens=f.int("encoder_tokens"))


def _read_tensor(f: Fields) -> StateTensor:
    f.check_known({"name", "shape", "dtype", "tp_axis"})
    shape = f.list("shape")
    if not shape or len(shape) > 8 or not all(
            isinstance(d, int) and not isinstance(d, bool) and 0 < d <= MAX_DIM for d in shape):
        raise f.error("shape", f"must be a list of positive whole numbers, got {shape!r}")
    dtype = f.str("dtype")
    if dtype not in STATE_DTYPE_BYTES:
        raise f.error("dtype", f"unknown state dtype {dtype!r}",
                      "one of: " + ", ".join(STATE_DTYPE_BYTES))
    axis = f.int("tp_axis", None, minimum=0)
    if axis is not None and axis >= len(shape):
        raise f.error("tp_axis", f"is {axis} but the shape has {len(shape)} dimensions")
    return StateTensor(f.str("name"), tuple(shape), STATE_DTYPE_BYTES[dtype], axis)


# --- writing ------------------------------------------------------------------------------

def layer_to_dict(layer: Layer) -> dict[str, Any]:
    if isinstance(layer, MLA):
        out_mla: dict[str, Any] = {"kind": "mla", "kv_lora_rank": layer.kv_lora_rank,
                                   "qk_rope_head_dim": layer.qk_rope_head_dim}
        if layer.index_head_dim is not None:  # DeepSeek-V3.2 / GLM-5 DSA indexer keys
            out_mla["index_head_dim"] = layer.index_head_dim
        return out_mla
    if isinstance(layer, NoCache):
        return {"kind": "none"}
    if isinstance(layer, RecurrentState):
        return {"kind": "state", "variant": layer.variant, "tensors": [
            {"name": t.name, "shape": list(t.shape), "dtype": _BYTES_TO_DTYPE[t.dtype_bytes],
             **({"tp_axis": t.tp_axis} if t.tp_axis is not None else {})}
            for t in layer.tensors]}
    if isinstance(layer, CompressedAttention):
        out_c: dict[str, Any] = {"kind": "compressed", "head_dim": layer.head_dim,
                                 "rope_dim": layer.rope_dim, "window": layer.window,
                                 "compress_ratio": layer.compress_ratio}
        if layer.index_head_dim is not None:
            out_c["index_head_dim"] = layer.index_head_dim
        return out_c
    out: dict[str, Any] = {"kind": layer.kind, "num_kv_heads": layer.num_kv_heads,
                           "head_dim": layer.head_dim}
    if layer.v_head_dim is not None and layer.v_head_dim != layer.head_dim:
        out["v_head_dim"] = layer.v_head_dim
    if isinstance(layer, SlidingWindow):
        out["window"] = layer.window
    elif isinstance(layer, ChunkedLocal):
        out["chunk"] = layer.chunk
    elif isinstance(layer, CrossAttention):
        out["encoder_tokens"] = layer.encoder_tokens
    return out


def _runs(layers: list[Layer]) -> list[dict[str, Any]]:
    """Run-length encode consecutive identical layers into `count` groups."""
    out: list[dict[str, Any]] = []
    previous: Layer | None = None
    for layer in layers:
        if out and layer == previous:
            out[-1]["count"] = out[-1].get("count", 1) + 1
        else:
            out.append(layer_to_dict(layer))
        previous = layer
    for group in out:  # put count right after kind for readability
        if "count" in group:
            count = group.pop("count")
            items = list(group.items())
            group.clear()
            group.update([items[0], ("count", count), *items[1:]])
    return out


def layers_to_groups(layers: tuple[Layer, ...]) -> list[dict[str, Any]]:
    """The shortest faithful grouping: a repeated period (with a tail), else plain runs.
    Linear in the layers: trying each period in turn was quadratic (100,000 layers, minutes)."""
    n = len(layers)
    best = _runs(list(layers))
    if len(best) <= 3:  # a repeat group and a pattern of two runs are never shorter
        return best
    for period in _periods(layers):
        if period > n // 2:
            break
        # the smallest period of a sequence that is not one run has two runs or more
        repeats = n // period
        pattern = _runs(list(layers[:period]))
        tail = list(layers[period * repeats:])
        candidate = [{"repeat": repeats, "layers": pattern}] + (_runs(tail) if tail else [])
        if len(candidate) + len(pattern) < len(best):
            best = candidate
        break
    return best


def _periods(items: tuple[Any, ...]) -> Iterator[int]:
    """Every p >= 1 with items[i] == items[i - p] for each i >= p (the head repeated, then a
    prefix of it), smallest first: the borders of the sequence by its prefix function."""
    border = [0] * len(items)
    for i in range(1, len(items)):
        k = border[i - 1]
        while k and items[i] != items[k]:
            k = border[k - 1]
        border[i] = k + 1 if items[i] == items[k] else 0
    k = border[-1] if items else 0
    while k:
        yield len(items) - k
        k = border[k - 1]


def spec_to_dict(spec: ModelSpec) -> dict[str, Any]:
    source = {k: v for k, v in vars(spec.source).items() if v is not None}
    out: dict[str, Any] = {"schema": SCHEMA, "name": spec.name}
    if spec.display_name:
        out["display_name"] = spec.display_name
    if spec.family:
        out["family"] = spec.family
    if spec.aliases:
        out["aliases"] = list(spec.aliases)
    if source:
        out["source"] = source
    out["dtype"] = spec.dtype
    for key in ("max_context_tokens", "num_params", "num_attention_heads"):
        if getattr(spec, key) is not None:
            out[key] = getattr(spec, key)
    shapes = {k: getattr(spec, k) for k in (*SHAPE_INTS[:2], "tie_word_embeddings",
                                             *SHAPE_INTS[2:], *SHAPE_BOOLS[1:])
              if getattr(spec, k) is not None}
    if spec.ssm is not None:
        shapes["ssm"] = {k: v for k, v in vars(spec.ssm).items()
                         if not (k in ("num_heads", "n_groups", "dt_rank") and v == 0)}
    if spec.blocks is not None:
        shapes["blocks"] = format_blocks(spec.blocks)
    if spec.expert_quantization is not None:  # "fp4" or "fp8" (DeepSeek-V4 expert_dtype)
        shapes["expert_dtype"] = spec.expert_quantization.method
    if spec.rope is not None:
        shapes["rope"] = {"scaling": spec.rope.scaling, "factor": spec.rope.factor}
        if spec.rope.original_max_positions is not None:
            shapes["rope"]["original_max_positions"] = spec.rope.original_max_positions
        if spec.rope.local:
            shapes["rope"]["local"] = True
        if spec.rope.mrope:
            shapes["rope"]["mrope"] = True
        if spec.rope.partial != 1.0:
            shapes["rope"]["partial"] = spec.rope.partial
    if spec.vision is not None:
        shapes["vision"] = {k: v for k, v in vars(spec.vision).items()
                            if v or k in ("kind", *_VISION_REQUIRED)}
        if spec.vision.num_channels == 3:
            del shapes["vision"]["num_channels"]
    if shapes:
        out["shapes"] = shapes
    if spec.quantization.config_json:
        import json

        out["quantization_config"] = json.loads(spec.quantization.config_json)
    if spec.checkpoint is not None:
        out["checkpoint"] = {"bytes": dict(spec.checkpoint.bytes_by_dtype),
                             "source": spec.checkpoint.source}
    out["layers"] = layers_to_groups(spec.layers)
    return out


def dump_yaml(spec: ModelSpec) -> str:
    import yaml

    return yaml.safe_dump(spec_to_dict(spec), sort_keys=False, default_flow_style=None,
                          width=100)
