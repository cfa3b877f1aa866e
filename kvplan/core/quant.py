"""How a checkpoint stores one linear layer's weight: the tensors and their exact shapes.

A `Quantization` says which scheme a checkpoint uses (read from config.json's
`quantization_config` / `compression_config` by kvplan.sources.quant) and which modules it
leaves in the model dtype. `linear_tensors` turns one logical linear layer (out x in, as
torch's nn.Linear stores it) into the tensors the checkpoint holds for it, scales and zero
points included, with the shapes the engines' quantized layers create (vLLM
`vllm/model_executor/layers/quantization/*.py` `create_weights`; bitsandbytes Params4bit /
Int8Params) and the HF checkpoints hold. The table of every scheme's tensors, shapes and
dtypes, with the engine file each comes from: docs/formulas.md §6.
"""

from __future__ import annotations

import math
import re

from kvplan.core.dtypes import cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.record import record

# Bytes per element of the safetensors dtypes used below (sub-byte formats are stored packed
# in U8/I32 containers, so every stored tensor has a whole-byte element).
ELEMENT_BYTES = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "F8_E8M0": 1, "U8": 1, "I8": 1,
                 "I32": 4, "I64": 8}
MODEL_DTYPE_NAMES = {"bf16": "BF16", "fp16": "F16", "fp32": "F32"}

LAYOUTS = ("none", "fp8", "fp8-ct", "int8-ct", "int-packed", "nvfp4-ct", "mxfp4-ct", "awq", "gptq",
           "mxfp4", "nvfp4", "fp8-modelopt", "mxfp8", "bnb-4bit", "bnb-8bit", "fp4-e8m0")


KV_REQUEST_CONFIGS = ("modelopt", "fp8", "compressed-tensors")


@record
class KVScheme:
    """A `kv_cache_scheme` mapping's fields as the config writes them (None: absent)."""

    type: str | None = None  # "float" / "int"
    num_bits: int | None = None
    dynamic: bool | None = None
    strategy: str | None = None  # "tensor", "channel", "attn_head", ...
    symmetric: bool | None = None


@record
class KVCacheRequest:
    """A checkpoint's request for a quantized KV cache, engine-neutral: what the config says
    and which kind of config said it, no engine's reading of it (each engine decides in its
    own module whether and from which release `--kv-cache-dtype auto` follows it).

    `config`: the config kind that carried it, one of KV_REQUEST_CONFIGS ("modelopt":
    quant_method modelopt* or hf_quant_config.json's block; "fp8": quant_method "fp8";
    "compressed-tensors"). `quant_method`: the config's quant_method as written ("" when the
    block names none). `algo`: `kv_cache_quant_algo` as written (a string, e.g. "FP8",
    "NVFP4"). `scheme`: the `kv_cache_scheme` mapping's fields; `scheme_name`: a
    `kv_cache_scheme` given as a bare string. `nested`: the config is a ModelOpt
    {"quantization": {...}} block (hf_quant_config.json's shape) rather than a flat
    config.json quantization_config; `beside_nested`: the request was found beside that
    block (in the config.json mapping that holds it), not in it."""

    config: str
    quant_method: str = ""
    algo: str | None = None
    scheme: KVScheme | None = None
    scheme_name: str | None = None
    nested: bool = False
    beside_nested: bool = False

    @property
    def format(self) -> str | None:
        """The stored element format asked for, by the config's own words: "FP8" (a float
        8-bit scheme, or algo "FP8"), "NVFP4" (a float 4-bit scheme, or algo "NVFP4"), another
        algo string upper-cased as written, or None when nothing says (an int scheme)."""
        if self.scheme is not None and self.scheme.type == "float":
            return {8: "FP8", 4: "NVFP4"}.get(self.scheme.num_bits or 0)
        if self.scheme is not None:
            return None
        name = self.algo if self.algo is not None else self.scheme_name
        return name.strip().upper() if name is not None else None

    def describe(self) -> str:
        """What the checkpoint asks for, in words: "an FP8 KV cache (compressed-tensors
        kv_cache_scheme)"."""
        fields = " and ".join(n for n, v in (("kv_cache_scheme", self.scheme or self.scheme_name),
                                             ("kv_cache_quant_algo", self.algo)) if v)
        fmt = self.format
        what = f"an {fmt}" if fmt in ("FP8", "NVFP4") else f"a {fmt or 'quantized'}"
        return f"{what} KV cache ({self.config} {fields})"


@record
class Quantization:
    """A checkpoint's weight format: the layout of its quantized linear layers and which
    modules it leaves unquantized.

    `skip`: module-name patterns stored in the model dtype (the config's
    modules_to_not_convert / ignore / exclude_modules; `re:` prefixes a regular expression,
    `*` a glob). `only`: when set, the kinds of linear layers quantized at all ("experts":
    MXFP4 gpt-oss quantizes only the MoE experts).

    `per_module`: a per-layer map (ModelOpt MIXED_PRECISION `quantized_layers`,
    compressed-tensors config_groups `targets`): pairs of (module name as
    `canonical_module` writes it, a `re:` pattern or `Linear`; that module's format); a
    module the map does not name is stored in the model dtype (`module_format`).
    `kv_cache`: the checkpoint's request for a quantized KV cache as its config states it
    (KVCacheRequest), or None; each engine decides from it by its own release rules whether
    `--kv-cache-dtype auto` follows it.
    """

    method: str  # the config's quant_method (or "none")
    layout: str = "none"
    bits: int = 16
    group_size: int | None = None  # values per scale along the input (None: per channel)
    block: tuple[int, int] | None = None  # 2-D block scales (out, in)
    per_tensor: bool = False  # one scale per tensor
    symmetric: bool = True  # False: zero points stored
    static_input_scale: bool = False  # an input (activation) scale per layer
    double_quant: bool = False  # bitsandbytes nested quantization of the absmax
    skip: tuple[str, ...] = ()
    only: tuple[str, ...] | None = None
    scale_dtype: str | None = None  # None: the layout's default (model dtype where it says)
    description: str = ""
    warnings: tuple[str, ...] = ()
    # the mapping it was read from (JSON text, keys sorted), so that a spec written back to
    # YAML carries the config's own quantization_config
    config_json: str | None = None
    per_module: tuple[tuple[str, Quantization], ...] | None = None
    kv_cache: KVCacheRequest | None = None

    @property
    def quantized(self) -> bool:
        return self.layout != "none" or self.per_module is not None


NONE = Quantization("none", description="unquantized: every weight in the model dtype")

# Leading module-path components that differ between a checkpoint's names and kvplan's
# (`model.layers.N`, `model.language_model.layers.N`, `language_model.model.layers.N`,
# Nemotron-H's `backbone.layers.N`): vLLM's ModelOptMixedPrecisionConfig
# `_quantized_layer_prefix_candidates` swaps the first two; kvplan drops them all.
_ROOTS = frozenset({"model", "language_model", "backbone", "text_model"})
# Fused linear layers kvplan sizes as one tensor -> the checkpoint modules they are made of
# (the models' `packed_modules_mapping` in vLLM: qwen3_5.py in_proj_qkvz / in_proj_ba,
# llama.py qkv_proj / gate_up_proj)
PACKED_MODULES = {"qkv_proj": ("q_proj", "k_proj", "v_proj"),
                  "gate_up_proj": ("gate_proj", "up_proj"),
                  "in_proj_qkvz": ("in_proj_qkv", "in_proj_z"),
                  "in_proj_ba": ("in_proj_b", "in_proj_a")}


def canonical_module(name: str) -> str:
    """A module name with the root components dropped (`_ROOTS`), one expert's index dropped
    (`experts.7.up_proj` -> `experts.up_proj`: kvplan sizes the experts of a layer as one
    tensor counted E times) and `shared_expert` spelled `shared_experts`."""
    parts = name.split(".")
    while len(parts) > 1 and parts[0] in _ROOTS:
        parts = parts[1:]
    out: list[str] = []
    for k, part in enumerate(parts):
        if part.isdigit() and k and parts[k - 1] == "experts":
            continue
        out.append("shared_experts" if part == "shared_expert" else part)
    return ".".join(out)


def module_format(q: Quantization, name: str) -> Quantization | None:
    """The format `q.per_module` gives the module `name` (kvplan's name for it), or None
    when the map leaves it unquantized. Looked up as vLLM's
    ModelOptMixedPrecisionConfig._resolve_quant_algo does: the name itself or a parent
    module (`...mlp.experts` covers each expert projection); a fused layer by its parts
    (PACKED_MODULES), which must agree; then any child of the name."""
    table = dict(q.per_module or ())
    key = canonical_module(name)
    parts = key.split(".")
    for n in range(len(parts), 0, -1):
        found = table.get(".".join(parts[:n]))
        if found is not None:
            return found
    base, _, leaf = key.rpartition(".")
    if leaf in PACKED_MODULES:
        shards = [table.get(f"{base}.{s}" if base else s) for s in PACKED_MODULES[leaf]]
        named = {s for s in shards if s is not None}
        if len(named) == 1:
            return named.pop()
        if len(named) > 1:
            raise BadInputError(f"quantized_layers gives the parts of {name} different "
                                "formats; vLLM refuses such a fused layer (ModelOpt "
                                "MIXED_PRECISION)", "give the parts of one fused layer "
                                "one quant_algo")
    for k, v in table.items():
        if k.startswith(key + "."):
            return v
    # compressed-tensors targets: `re:` patterns matched from the start of the name, then
    # `Linear`; tried on the checkpoint's spellings of kvplan's name (`checkpoint_spellings`)
    patterns = [(k, v) for k, v in table.items() if k.startswith("re:")]
    if patterns:
        spellings = checkpoint_spellings(name)
        for k, v in patterns:
            if any(re.match(k[3:], n) for n in spellings):
                return v
    return table.get("Linear")


def checkpoint_spellings(name: str) -> tuple[str, ...]:
    """The names a checkpoint may give the module kvplan calls `name`: as kvplan writes it,
    under a multimodal model's `model.language_model.` / `language_model.model.` root, with
    Qwen's singular `shared_expert`, and with an expert index (`experts.0.`) where kvplan
    counts a layer's experts as one tensor; Nemotron-H's checkpoints root theirs at
    `backbone.` (vLLM nemotron_h.py hf_to_vllm_mapper: backbone -> model)."""
    key = canonical_module(name)
    out = [name, f"model.{key}", f"model.language_model.{key}", f"language_model.model.{key}",
           f"backbone.{key}"]
    out += [n.replace(".shared_experts.", ".shared_expert.") for n in out
            if ".shared_experts." in n]
    out += [n.replace(".experts.", ".experts.0.") for n in out if ".experts." in n]
    return tuple(dict.fromkeys(out))


@record
class StoredTensor:
    """One tensor as the checkpoint stores it: a name suffix, a shape, a safetensors dtype."""

    suffix: str  # "weight", "weight_scale_inv", "qweight", ...
    shape: tuple[int, ...]
    dtype: str

    @property
    def num_elements(self) -> int:
        return math.prod(self.shape)

    @property
    def num_bytes(self) -> int:
        return self.num_elements * ELEMENT_BYTES[self.dtype]


def linear_tensors(q: Quantization, out_features: int, in_features: int, model_dtype: str,
                   quantized: bool = True) -> tuple[StoredTensor, ...]:
    """The tensors one linear layer's weight is stored as (its bias is the caller's: it stays
    in the model dtype in every scheme here). `quantized=False`: a module the scheme skips."""
    md = MODEL_DTYPE_NAMES.get(model_dtype, "BF16")
    o, i = out_features, in_features
    layout = q.layout if quantized else "none"
    if layout == "none":
        return (StoredTensor("weight", (o, i), md),)
    if layout == "fp8":
        if q.block is not None:
            bo, bi = q.block
            return (StoredTensor("weight", (o, i), "F8_E4M3"),
                    StoredTensor("weight_scale_inv", (cdiv(o, bo), cdiv(i, bi)),
                                 q.scale_dtype or "F32"))
        out = [StoredTensor("weight", (o, i), "F8_E4M3"),
               StoredTensor("weight_scale", (), q.scale_dtype or "F32")]
        if q.static_input_scale:
            out.append(StoredTensor("input_scale", (), "F32"))
        return tuple(out)
    if layout in ("fp8-ct", "int8-ct"):
        sd = q.scale_dtype or md
        scale: tuple[int, ...]
        if q.block is not None:
            scale = (cdiv(o, q.block[0]), cdiv(i, q.block[1]))
        elif q.per_tensor:
            scale = (1,)
        else:
            scale = (o, 1)
        out = [StoredTensor("weight", (o, i), "F8_E4M3" if layout == "fp8-ct" else "I8"),
               StoredTensor("weight_scale", scale, sd)]
        if q.static_input_scale:
            out.append(StoredTensor("input_scale", (1,), sd))
        return tuple(out)
    if layout == "int-packed":
        per_int = 32 // q.bits
        groups = cdiv(i, q.group_size) if q.group_size else 1
        out = [StoredTensor("weight_packed", (o, cdiv(i, per_int)), "I32"),
               StoredTensor("weight_scale", (o, groups), q.scale_dtype or md),
               StoredTensor("weight_shape", (2,), "I64")]
        if not q.symmetric:
            out.append(StoredTensor("weight_zero_point", (cdiv(o, per_int), groups), "I32"))
        return tuple(out)
    if layout == "nvfp4-ct":
        g = q.group_size or 16
        return (StoredTensor("weight_packed", (o, cdiv(i, 2)), "U8"),
                StoredTensor("weight_scale", (o, cdiv(i, g)), "F8_E4M3"),
                StoredTensor("weight_global_scale", (1,), "F32"),
                StoredTensor("input_global_scale", (1,), "F32"))
    if layout == "mxfp4-ct":
        g = q.group_size or 32
        return (StoredTensor("weight_packed", (o, cdiv(i, 2)), "U8"),
                StoredTensor("weight_scale", (o, cdiv(i, g)), q.scale_dtype or "U8"))
    if layout in ("awq", "gptq"):
        per_int = 32 // q.bits
        g = q.group_size if q.group_size and q.group_size > 0 else i  # -1: one group
        groups = cdiv(i, g)
        sd = q.scale_dtype or "F16"
        if layout == "awq":
            return (StoredTensor("qweight", (i, cdiv(o, per_int)), "I32"),
                    StoredTensor("qzeros", (groups, cdiv(o, per_int)), "I32"),
                    StoredTensor("scales", (groups, o), sd))
        return (StoredTensor("qweight", (cdiv(i, per_int), o), "I32"),
                StoredTensor("qzeros", (groups, cdiv(o, per_int)), "I32"),
                StoredTensor("scales", (groups, o), sd),
                StoredTensor("g_idx", (i,), "I32"))
    if layout == "fp4-e8m0":  # DeepSeek-V4 experts: two e2m1 a byte (int8), e8m0 per 32
        g = q.group_size or 32
        return (StoredTensor("weight", (o, cdiv(i, 2)), "I8"),
                StoredTensor("scale", (o, cdiv(i, g)), "F8_E8M0"))
    if layout == "mxfp4":
        return (StoredTensor("blocks", (o, cdiv(i, 32), 16), "U8"),
                StoredTensor("scales", (o, cdiv(i, 32)), "U8"))
    if layout == "nvfp4":
        g = q.group_size or 16
        return (StoredTensor("weight", (o, cdiv(i, 2)), "U8"),
                StoredTensor("weight_scale", (o, cdiv(i, g)), "F8_E4M3"),
                StoredTensor("weight_scale_2", (), "F32"),
                StoredTensor("input_scale", (), "F32"))
    if layout == "fp8-modelopt":
        if q.block is not None:  # FP8_PB_WO: weight_scale [out_blk, 1, in_blk, 1]
            bo, bi = q.block
            return (StoredTensor("weight", (o, i), "F8_E4M3"),
                    StoredTensor("weight_scale", (cdiv(o, bo), 1, cdiv(i, bi), 1), "F32"))
        if not q.per_tensor:  # FP8_PER_CHANNEL_PER_TOKEN: one scale per output row
            return (StoredTensor("weight", (o, i), "F8_E4M3"),
                    StoredTensor("weight_scale", (o,), "F32"))
        return (StoredTensor("weight", (o, i), "F8_E4M3"),
                StoredTensor("weight_scale", (), "F32"),
                StoredTensor("input_scale", (), "F32"))
    if layout == "mxfp8":  # e4m3 values, one e8m0 exponent (uint8) per 32 along the input
        g = q.group_size or 32
        return (StoredTensor("weight", (o, i), "F8_E4M3"),
                StoredTensor("weight_scale", (o, cdiv(i, g)), "U8"))
    if layout == "bnb-4bit":
        n = o * i
        blocks = cdiv(n, q.group_size or 64)
        out = [StoredTensor("weight", (cdiv(n, 2), 1), "U8")]
        if q.double_quant:
            out += [StoredTensor("weight.absmax", (blocks,), "U8"),
                    StoredTensor("weight.nested_absmax", (cdiv(blocks, 256),), "F32"),
                    StoredTensor("weight.nested_quant_map", (256,), "F32")]
        else:
            out.append(StoredTensor("weight.absmax", (blocks,), "F32"))
        out.append(StoredTensor("weight.quant_map", (16,), "F32"))
        return tuple(out)
    if layout == "bnb-8bit":
        return (StoredTensor("weight", (o, i), "I8"), StoredTensor("SCB", (o,), "F32"))
    raise ValueError(f"unknown layout {layout!r}")
