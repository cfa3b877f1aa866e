"""A checkpoint's weight format from config.json: `quantization_config` (transformers, vLLM),
`compression_config` (older compressed-tensors checkpoints), top level or inside a nested
text config -> kvplan.core.quant.Quantization.

Known `quant_method`s: fp8, fbgemm_fp8, compressed-tensors, awq / gptq (and their Marlin/GEMM
variants), mxfp4, modelopt (also hf_quant_config.json's nested block) and bitsandbytes; the
fields each is read from and what it stores are in docs/formulas.md §6. An MLX checkpoint's
top-level `quantization` block (mlx_quantization) is named and counted unquantized. An unknown
`quant_method` is not silently taken as the model dtype: the result carries a warning naming
it and what was assumed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvplan.core.errors import BadInputError, SpecError
from kvplan.core.patterns import MAX_UNBOUNDED_REPEATS, pattern_problem
from kvplan.core.quant import NONE, KVCacheRequest, KVScheme, Quantization, canonical_module
from kvplan.sources.fields import Fields

_TEXT_KEYS = ("text_config", "llm_config", "language_config")


def find_quantization_config(raw: Any) -> tuple[Any, str] | None:
    """(the raw quantization mapping, the key path it was found at), or None."""
    if not isinstance(raw, dict):
        return None
    for key in ("quantization_config", "compression_config"):
        if isinstance(raw.get(key), dict):
            return raw[key], key
    for text in _TEXT_KEYS:
        nested = raw.get(text)
        if isinstance(nested, dict):
            for key in ("quantization_config", "compression_config"):
                if isinstance(nested.get(key), dict):
                    return nested[key], f"{text}.{key}"
    # hf_quant_config.json (ModelOpt): {"producer": ..., "quantization": {...}}
    if isinstance(raw.get("quantization"), dict) and "producer" in raw:
        return raw["quantization"], "quantization"
    return None


def quantization_from_config(raw: Any, source: str, dtype: str | None = None) -> Quantization:
    """The checkpoint format of a config.json (NONE when it states no quantization);
    `dtype` the model dtype its reader settled on (named where the format is counted
    unquantized)."""
    found = find_quantization_config(raw)
    mlx = mlx_quantization(raw, source, dtype)
    if mlx is not None and (found is None or "quant_method" not in found[0]):
        return mlx
    if found is None:
        return NONE
    qc, where = found
    return read_quantization(qc, source, where)


# Why no engine kvplan plans for loads an MLX checkpoint: vLLM 0.33 has no MLX method among
# its quantization methods (model_executor/layers/quantization/__init__.py) and reads only a
# quantization_config (or compression_config) by its quant_method
# (transformers_utils/model_arch_config_convertor.py _normalize_quantization_config; a
# missing quant_method is "" and taken as none in config/model.py _verify_quantization), so it
# builds the layers unquantized, which MLX's packed tensors and scales/biases do not fit
MLX_NOT_LOADED = ("vLLM, SGLang, TGI, TensorRT-LLM and llama.cpp do not load (vLLM 0.33 "
                  "reads a quantization_config by its quant_method and has no MLX one; "
                  "llama.cpp reads GGUF only)")


def mlx_quantization(raw: Any, source: str, dtype: str | None = None) -> Quantization | None:
    """An MLX checkpoint's `quantization` block -> a format kept unquantized whose warning
    names it; None for any other config. mlx-lm's utils.py quantize_model writes
    {"group_size", "bits", "mode"} at the top of config.json and copies it to
    `quantization_config` (no quant_method); a layer its model's quant_predicate gives
    parameters of its own gets an entry under its module path (mlx-lm's load_model also takes
    false there). MLX's affine mode packs `bits`-bit values into uint32 words beside one scale
    and one bias per `group_size` values; the mxfp4 / nvfp4 / mxfp8 modes store scales only.
    Which layers are quantized is not in the config (those with `to_quantized` whose input
    width `group_size` divides, less those the model's quant_predicate leaves out unrecorded),
    so the MLX file's own size is not figured here."""
    if not isinstance(raw, dict) or "producer" in raw:  # hf_quant_config.json's block
        return None
    block = raw.get("quantization")
    if not isinstance(block, dict):
        return None
    f = Fields(block, source, "quantization")
    if "quant_method" in block or "quant_algo" in block:
        return None
    bits, group = f.int("bits"), f.int("group_size")
    mode = f.str("mode", "affine")
    overrides = sum(1 for v in block.values() if isinstance(v, (dict, bool)))
    said = f"{bits}-bit, group {group}" + ("" if mode == "affine" else f", mode {mode}") + (
        f", {overrides} per-module override{'s' if overrides != 1 else ''}" if overrides else "")
    counted = f"the unquantized model ({dtype or 'its dtype'})"
    return Quantization(
        "mlx", "none", description=f"MLX quantization ({said}): counted as unquantized",
        warnings=(f"{source}: config.json carries MLX quantization ({said}): MLX's own "
                  f"format, which {MLX_NOT_LOADED}; weights are counted as {counted}",))


def _names(f: Fields, *keys: str) -> tuple[str, ...]:
    for key in keys:
        value = f.raw.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise f.error(key, f"must be a list of module names, got {value!r}")
        return tuple(value)
    return ()


def read_quantization(qc: Any, source: str, where: str = "quantization_config"
                      ) -> Quantization:
    """One quantization mapping -> Quantization (carrying the mapping as JSON text)."""
    import json

    q = _read(qc, source, where)
    for pattern in q.skip + tuple(k for k, _ in q.per_module or ()):
        problem = pattern_problem(pattern[3:]) if pattern.startswith("re:") else None
        if problem:
            raise SpecError(source, where, f"the module pattern {pattern[:80]!r} {problem}",
                            "write it in Python's regular-expression syntax, without a "
                            "repeated group that itself repeats or branches and with at most "
                            f"{MAX_UNBOUNDED_REPEATS} unbounded repeats")
    try:
        text = json.dumps(qc, sort_keys=True)
    except (TypeError, ValueError):
        text = None
    return replace(q, config_json=text) if q is not NONE or text else q


def _read(qc: Any, source: str, where: str) -> Quantization:
    f = Fields(qc, source, where)
    method = f.raw.get("quant_method")
    if method is None and f.has("quant_algo"):
        method = "modelopt"  # hf_quant_config.json's nested block names only the algorithm
    if method is None and (f.raw.get("load_in_4bit") or f.raw.get("load_in_8bit")):
        method = "bitsandbytes"
    if method is None and f.has("config_groups"):
        method = "compressed-tensors"
    if not isinstance(method, str):
        raise f.error("quant_method", f"must name the quantization method, got {method!r}")
    m = method.lower()
    if m == "fp8":
        return _fp8(f, m)
    if m == "compressed-tensors":
        return _compressed_tensors(f)
    if m == "fbgemm_fp8":  # Meta's Llama-3.1-405B-FP8: vLLM fbgemm_fp8.py create_weights
        return Quantization("fbgemm_fp8", "fp8-ct", 8, scale_dtype="F32",
                            skip=_names(f, "modules_to_not_convert"),
                            description="FBGEMM FP8: e4m3 weights, one fp32 scale per output "
                                        "row")
    if m in ("awq", "awq_marlin", "gptq", "gptq_marlin"):
        return _awq_gptq(f, m)
    if m == "mxfp4":
        skip = _names(f, "modules_to_not_convert")
        return Quantization(
            "mxfp4", "mxfp4", 4, group_size=32, skip=skip, only=("expert",),
            description="MXFP4 MoE experts (e2m1 values, one e8m0 scale per 32); attention, "
                        "router, embeddings and LM head in the model dtype")
    if m.startswith("modelopt"):  # modelopt, modelopt_fp4, modelopt_mixed (vLLM's names)
        return _modelopt(f)
    if m == "bitsandbytes":
        return _bnb(f)
    if m in ("bf16", "fp16", "none"):
        return NONE
    return Quantization(
        m, "none", description=f"unknown quant_method {method!r}: counted as unquantized",
        warnings=(f"{source}: {where}.quant_method {method!r} is a format kvplan does not "
                  "know; its weights are counted in the model dtype (16 bits each), which "
                  "overstates a quantized checkpoint; give --weights-dtype or "
                  "--weights-memory",))


def _block(f: Fields, key: str, block: list[Any]) -> tuple[int, int]:
    """A [rows, columns] scale block: two positive whole numbers (each divides a weight's
    sides into scale rows and columns)."""
    if not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block):
        raise f.error(key, f"must be two positive whole numbers, got {block!r}")
    return block[0], block[1]


def _fp8(f: Fields, method: str) -> Quantization:
    skip = _names(f, "modules_to_not_convert", "ignored_layers")
    block = f.raw.get("weight_block_size")
    static = f.raw.get("activation_scheme") == "static"
    kv, kv_warnings = kv_request(f, "fp8", method)
    if block is not None:
        if not isinstance(block, list) or len(block) != 2:
            raise f.error("weight_block_size", f"must be two positive whole numbers, got "
                          f"{block!r}")
        block = _block(f, "weight_block_size", block)
        # scale_fmt "ue8m0" (DeepSeek-V4): the block scales are stored as e8m0 exponents
        e8m0 = f.raw.get("scale_fmt") == "ue8m0"
        return Quantization(method, "fp8", 8, block=(block[0], block[1]), skip=skip,
                            static_input_scale=static, scale_dtype="F8_E8M0" if e8m0 else None,
                            description=f"FP8 e4m3, one {'e8m0' if e8m0 else 'fp32'} scale per "
                                        f"{block[0]}x{block[1]} block",
                            kv_cache=kv, warnings=kv_warnings)
    return Quantization(method, "fp8", 8, per_tensor=True, skip=skip, static_input_scale=static,
                        description="FP8 e4m3, one fp32 scale per tensor", kv_cache=kv,
                        warnings=kv_warnings)


def _compressed_tensors(f: Fields) -> Quantization:
    fmt = f.raw.get("format") or ""
    groups = f.sub("config_groups") if f.has("config_groups") else None
    skip = _names(f, "ignore")
    kv, kv_warnings = kv_request(f, "compressed-tensors", "compressed-tensors")
    if groups is None or not groups.raw:
        q = Quantization("compressed-tensors", "none", skip=skip,
                         description="compressed-tensors without quantization groups")
    elif len(groups.raw) == 1:
        q = replace(_ct_group(f, groups, next(iter(groups.raw)), fmt), skip=skip)
    else:
        q = _ct_groups(f, groups, fmt, skip)
    return replace(q, kv_cache=kv, warnings=q.warnings + kv_warnings)


def _ct_groups(f: Fields, groups: Fields, fmt: str, skip: tuple[str, ...]) -> Quantization:
    """Several config_groups, each with its `targets`: module names, `re:` patterns (matched
    from the start of a name, vLLM compressed_tensors/utils.py _is_equal_or_regex_match) or
    the class name `Linear` (every linear layer no name or pattern claims), as vLLM's
    find_matched_target picks a layer's group. A linear layer no group targets stays in the
    model dtype."""
    entries: list[tuple[str, Quantization]] = []
    warnings: list[str] = []
    for name in groups.raw:
        q = _ct_group(f, groups, name, fmt)
        warnings += q.warnings
        targets = groups.sub(name).raw.get("targets")
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            raise groups.sub(name).error("targets", "must list the module names, re: "
                                         f"patterns or class names the group quantizes, got "
                                         f"{targets!r}")
        for t in targets:
            if t.startswith("re:") or t == "Linear":
                entries.append((t, q))
            elif "." in t or t == "lm_head":
                entries.append((canonical_module(t), q))
            else:
                warnings.append(f"{f.source}: {groups.where(name)}.targets names the class "
                                f"{t!r}, which kvplan does not match; the layers it covers "
                                "are counted in the model dtype")
    entries = [(k, q) for k, q in entries if q.quantized]
    kinds = ", ".join(dict.fromkeys(q.description for _, q in entries))
    return Quantization("compressed-tensors", "none", skip=skip, per_module=tuple(entries),
                        warnings=tuple(warnings),
                        description=f"compressed-tensors, {len(groups.raw)} groups by target "
                                    f"({kinds})")


def _ct_group(f: Fields, groups: Fields, name: str, fmt: str) -> Quantization:
    """One config group's format (its `weights` and `format`)."""
    g = groups.sub(name)
    w = g.sub("weights")
    bits = w.int("num_bits")
    kind = w.str("type", "int")
    strategy = w.str("strategy", "tensor")
    group_size = w.int("group_size", None)
    symmetric = w.bool("symmetric", True)
    block = w.raw.get("block_structure")
    acts = g.raw.get("input_activations")
    static = isinstance(acts, dict) and acts.get("dynamic") is False
    block_t = _block(w, "block_structure", block) \
        if isinstance(block, list) and len(block) == 2 else None
    base = Quantization("compressed-tensors", symmetric=symmetric, static_input_scale=static)
    fmt = g.raw.get("format") or fmt  # a group's own format wins over the top-level one
    # MXFP4 (Kimi-K3): e2m1 values, one e8m0 exponent (stored uint8) per 32, no global scale;
    # a float4 group of 32 without a format name is the same scheme (NVFP4's group is 16)
    if fmt == "mxfp4-pack-quantized" or (fmt != "nvfp4-pack-quantized" and kind == "float"
                                          and bits == 4 and group_size == 32):
        return replace(base, layout="mxfp4-ct", bits=4, group_size=group_size or 32,
                       description="compressed-tensors MXFP4 (e2m1 values, one e8m0 scale "
                                   "per 32 values, no global scale)")
    if fmt == "nvfp4-pack-quantized" or (kind == "float" and bits == 4):
        return replace(base, layout="nvfp4-ct", bits=4, group_size=group_size or 16,
                       description="compressed-tensors NVFP4 (fp8 scale per 16 values, fp32 "
                                   "global scale)")
    if kind == "float" and bits == 8:
        return replace(base, layout="fp8-ct", bits=8, block=block_t,
                       per_tensor=strategy == "tensor",
                       description=f"compressed-tensors FP8, {strategy} scales")
    if fmt in ("pack-quantized", "marlin-24") or (kind == "int" and bits < 8):
        return replace(base, layout="int-packed", bits=bits,
                       group_size=group_size if strategy == "group" else None,
                       description=f"compressed-tensors int{bits} packed, {strategy} scales"
                                   + (f" (group {group_size})" if group_size else ""))
    if kind == "int" and bits == 8:
        return replace(base, layout="int8-ct", bits=8, block=block_t,
                       per_tensor=strategy == "tensor",
                       description=f"compressed-tensors int8, {strategy} scales")
    return Quantization("compressed-tensors", "none", description="compressed-tensors scheme "
                        "kvplan does not know: counted as unquantized",
                        warnings=(f"{f.source}: compressed-tensors {kind}{bits} format "
                                  f"{fmt!r} is not known; weights counted in the model dtype",))


# the packed widths vLLM's GPTQ kernels load (gptq.py GPTQConfig.__init__ refuses any
# other); 32 // bits values share one int32, so a width past 32 would pack none
PACKED_BITS = (2, 3, 4, 8)


def _packed_bits(f: Fields, where: str, bits: Any) -> int:
    if isinstance(bits, bool) or bits not in PACKED_BITS:
        raise f.error(where, f"must be one of {', '.join(map(str, PACKED_BITS))} bits, got "
                      f"{bits!r}", "give the width the checkpoint was packed with")
    return int(bits)


def _awq_gptq(f: Fields, method: str) -> Quantization:
    bits = _packed_bits(f, "bits", f.int("bits", None) or f.int("w_bit", 4))
    group = f.raw.get("group_size", f.raw.get("q_group_size", 128))
    if isinstance(group, bool) or not isinstance(group, int):
        raise f.error("group_size", f"must be a whole number, got {group!r}")
    skip = _names(f, "modules_to_not_convert")
    if method.startswith("gptq") and f.raw.get("dynamic"):
        return _gptq_dynamic(f, bits, group, skip)
    if method.startswith("awq"):
        zero = f.bool("zero_point", True)
        return Quantization("awq", "awq", bits, group_size=group, symmetric=not zero,
                            skip=skip, description=f"AWQ int{bits}, group {group}: fp16 scale "
                            f"and packed {bits}-bit zero point per group")
    return _gptq(bits, group, skip)


def _gptq(bits: int, group: int, skip: tuple[str, ...]) -> Quantization:
    return Quantization("gptq", "gptq", bits, group_size=group, symmetric=False, skip=skip,
                        description=f"GPTQ int{bits}, group {group}: fp16 scale, packed zero "
                                    "point per group, g_idx per input")


def _gptq_dynamic(f: Fields, bits: int, group: int, skip: tuple[str, ...]) -> Quantization:
    """GPTQ(Model)'s `dynamic`: regular expressions over module names, first match wins,
    matched from the start of the name; `-:` leaves the module unquantized, a `+:` or bare
    pattern overrides bits / group_size for it; a module no pattern matches takes the base
    format (vLLM quantization/utils/gptq_utils.py get_dynamic_override)."""
    dynamic = f.raw["dynamic"]
    if not isinstance(dynamic, dict):
        raise f.error("dynamic", f"must map module patterns to overrides, got {dynamic!r}")
    base = _gptq(bits, group, skip=())
    entries: list[tuple[str, Quantization]] = []
    for pattern, override in dynamic.items():
        if pattern.startswith("-:"):
            entries.append(("re:" + pattern[2:], NONE))
            continue
        if not isinstance(override, dict):
            raise f.error(f"dynamic.{pattern}", f"must be a mapping, got {override!r}")
        b, g = override.get("bits", bits), override.get("group_size", group)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (b, g)):
            raise f.error(f"dynamic.{pattern}", "bits and group_size must be whole numbers, "
                          f"got {override!r}")
        b = _packed_bits(f, f"dynamic.{pattern}.bits", b)
        entries.append(("re:" + pattern.removeprefix("+:"), _gptq(b, g, skip=())))
    entries.append(("Linear", base))
    return replace(base, layout="none", skip=skip, per_module=tuple(entries),
                   description=base.description + f"; {len(dynamic)} per-module overrides "
                                                  "(dynamic)")


# vLLM's vllm/model_executor/layers/quantization/modelopt.py QUANT_ALGOS: the quant_algo values
# it loads; anything else (W4A8_AWQ, INT4_AWQ, W8A8_SQ_PER_CHANNEL, ...) it refuses
MODELOPT_ALGOS = ("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO", "NVFP4", "W4A16_NVFP4",
                  "MXFP8", "MIXED_PRECISION")
# what ModelOptMixedPrecisionConfig.get_quant_method builds a layer for (MXFP8 since its
# mxfp8_config); a per-layer algo outside these is loaded unquantized there
_MIXED_ALGOS = ("FP8", "NVFP4", "W4A16_NVFP4", "MXFP8")


def _modelopt_algo(algo: str, group: int | None) -> Quantization | None:
    """One ModelOpt quant_algo -> its checkpoint format (None: not one kvplan knows). The
    tensors each creates: modelopt.py create_weights of ModelOptFp8LinearMethod (FP8),
    ModelOptFp8PcPtLinearMethod (per channel), ModelOptFp8PbWoLinearMethod (128x128
    blocks), ModelOptNvFp4LinearMethod / ModelOptNvFp4W4A16LinearMethod, MXFP8."""
    if algo in ("NVFP4", "W4A16_NVFP4"):
        g = group or 16
        return Quantization("modelopt", "nvfp4", 4, group_size=g,
                            description=f"NVFP4 (ModelOpt {algo}): e2m1 values, one fp8 scale "
                                        f"per {g}, fp32 global scales")
    if algo == "FP8":
        return Quantization("modelopt", "fp8-modelopt", 8, per_tensor=True,
                            description="FP8 (ModelOpt), one fp32 scale per tensor")
    if algo == "FP8_PER_CHANNEL_PER_TOKEN":
        return Quantization("modelopt", "fp8-modelopt", 8,
                            description="FP8 (ModelOpt), one fp32 scale per output row")
    if algo == "FP8_PB_WO":
        return Quantization("modelopt", "fp8-modelopt", 8, block=(128, 128),
                            description="FP8 (ModelOpt), one fp32 scale per 128x128 block")
    if algo == "MXFP8":
        return Quantization("modelopt", "mxfp8", 8, group_size=32,
                            description="MXFP8 (ModelOpt): e4m3 values, one e8m0 scale per 32")
    return None


KV_FORMATS = ("FP8", "NVFP4")  # the KV formats some engine kvplan models takes from a config


def kv_request(f: Fields, config: str, quant_method: str = "", outer: Fields | None = None,
               nested: bool = False) -> tuple[KVCacheRequest | None, tuple[str, ...]]:
    """The KV cache request a quantization config states (`kv_cache_quant_algo`,
    `kv_cache_scheme`), read as written, with no engine's reading of it: `f` the block that
    holds the scheme, `outer` an enclosing block also looked in (a ModelOpt config.json that
    nests hf_quant_config.json's block). Returns (the request or None, warnings): a format no
    engine kvplan models takes from a checkpoint (KV_FORMATS) is named in a warning."""
    blocks = [f] + ([outer] if outer is not None else [])
    algo: str | None = None
    scheme: KVScheme | None = None
    scheme_name: str | None = None
    algo_at = scheme_at = ""
    for b in blocks:
        raw = b.raw.get("kv_cache_quant_algo")
        if raw is not None and algo is None:
            if not isinstance(raw, str):
                raise b.error("kv_cache_quant_algo", f"must be a format name such as \"FP8\", "
                              f"got {raw!r}")
            algo, algo_at = raw, b.where("kv_cache_quant_algo")
        raw = b.raw.get("kv_cache_scheme")
        if raw is not None and scheme is None and scheme_name is None:
            scheme_at = b.where("kv_cache_scheme")
            if isinstance(raw, str):
                scheme_name = raw
            elif isinstance(raw, dict):
                scheme = _kv_scheme(b.sub("kv_cache_scheme"))
            else:
                raise b.error("kv_cache_scheme", "must be a mapping (type, num_bits, "
                              f"dynamic, strategy, symmetric) or a format name, got {raw!r}")
    if algo is None and scheme is None and scheme_name is None:
        return None, ()
    beside = outer is not None and not any(
        f.raw.get(k) is not None for k in ("kv_cache_quant_algo", "kv_cache_scheme"))
    req = KVCacheRequest(config, quant_method, algo, scheme, scheme_name, nested, beside)
    warnings: tuple[str, ...] = ()
    if req.format not in KV_FORMATS:
        where = scheme_at if (scheme is not None or algo is None) else algo_at
        said = (f"{scheme!r}" if scheme is not None
                else repr(algo if algo is not None else scheme_name))
        warnings = (f"{f.source}: {where} {said} is not a KV cache format any engine kvplan "
                    "models takes from a checkpoint (" + ", ".join(KV_FORMATS) + "); "
                    "--kv-cache-dtype auto is taken as the model dtype",)
    return req, warnings


def _kv_scheme(f: Fields) -> KVScheme:
    bits = f.raw.get("num_bits")
    if bits is not None and (isinstance(bits, bool) or not isinstance(bits, int)):
        raise f.error("num_bits", f"must be a whole number, got {bits!r}")
    out: dict[str, Any] = {}
    for key in ("type", "strategy"):
        v = f.raw.get(key)
        if v is not None and not isinstance(v, str):
            raise f.error(key, f"must be a string, got {v!r}")
        out[key] = v
    for key in ("dynamic", "symmetric"):
        v = f.raw.get(key)
        if v is not None and not isinstance(v, bool):
            raise f.error(key, f"must be true or false, got {v!r}")
        out[key] = v
    return KVScheme(out["type"], bits, out["dynamic"], out["strategy"], out["symmetric"])


def _modelopt(f: Fields) -> Quantization:
    outer = f
    if isinstance(f.raw.get("quantization"), dict):
        # a config.json block that nests hf_quant_config.json's {"quantization": {...}}:
        # vLLM's ModelOptQuantConfigBase.from_config reads the inner block
        f = f.sub("quantization")
    algo = str(f.raw.get("quant_algo") or "").upper()
    if not algo and isinstance(f.raw.get("quantized_layers"), dict):
        algo = "MIXED_PRECISION"  # quant_method "modelopt_mixed" names the scheme itself
    skip = _names(f, "exclude_modules", "ignore")
    method = outer.raw.get("quant_method")
    kv, kv_warnings = kv_request(f, "modelopt", method if isinstance(method, str) else "",
                                 outer if f is not outer else None,
                                 nested=f is not outer or f.path == "quantization")
    group = f.int("group_size", None)
    if algo == "MIXED_PRECISION":
        q = _modelopt_mixed(f, group)
    else:
        q = _modelopt_algo(algo, group) or Quantization(
            "modelopt", "none", description=f"ModelOpt {algo or 'unknown'}: counted as "
            "unquantized", warnings=(f"{f.source}: ModelOpt quant_algo {algo!r} is not one "
                                     "vLLM loads (modelopt.py QUANT_ALGOS: "
                                     + ", ".join(MODELOPT_ALGOS) + "); weights counted in "
                                     "the model dtype",))
    return replace(q, skip=skip, kv_cache=kv, warnings=q.warnings + kv_warnings)


def _modelopt_mixed(f: Fields, group: int | None) -> Quantization:
    """ModelOpt MIXED_PRECISION: `quantized_layers` maps each quantized module to its own
    {quant_algo, group_size}; a module it does not name stays in the model dtype (vLLM
    ModelOptMixedPrecisionConfig: _from_config, _resolve_quant_algo, get_quant_method).
    One NVFP4 group size serves every NVFP4 layer: the top-level group_size, else the first
    NVFP4 entry's, else 16, as vLLM resolves it."""
    layers = f.raw.get("quantized_layers")
    if not isinstance(layers, dict) or not layers:
        raise f.error("quantized_layers", "must map each quantized module to its quant_algo "
                      f"(MIXED_PRECISION needs it, as vLLM does), got {layers!r}")
    algos: dict[str, str] = {}
    for name, info in layers.items():
        algo = info.get("quant_algo") if isinstance(info, dict) else None
        if not isinstance(algo, str):
            raise f.error(f"quantized_layers.{name}", "must be a mapping with a quant_algo "
                          f"string, got {info!r}")
        algos[name] = algo.upper()
        if group is None and algos[name] in ("NVFP4", "W4A16_NVFP4"):
            g = info.get("group_size", 16)
            if isinstance(g, bool) or not isinstance(g, int) or g <= 0:
                raise f.error(f"quantized_layers.{name}.group_size",
                              f"must be a positive whole number, got {g!r}")
            group = g
    formats = {a: _modelopt_algo(a, group) for a in sorted(set(algos.values()))}
    warnings = []
    unknown = sorted(a for a, q in formats.items() if q is None)
    if unknown:
        warnings.append(f"{f.source}: {f.where('quantized_layers')} names quant_algo "
                        f"{', '.join(unknown)}, which kvplan does not know; those modules "
                        "are counted in the model dtype")
    unloaded = sorted(a for a, q in formats.items() if q is not None and a not in _MIXED_ALGOS)
    if unloaded:
        warnings.append(f"{f.source}: {f.where('quantized_layers')} names quant_algo "
                        f"{', '.join(unloaded)}; vLLM's MIXED_PRECISION builds only "
                        f"{', '.join(_MIXED_ALGOS)} layers and loads the rest unquantized; "
                        "kvplan sizes them as the checkpoint stores them")
    table = tuple((canonical_module(n), q) for n, a in algos.items()
                  if (q := formats[a]) is not None)
    counts = ", ".join(f"{sum(1 for a in algos.values() if a == k)} {k}" for k in formats)
    return Quantization("modelopt", "none", group_size=group, per_module=table,
                        warnings=tuple(warnings),
                        description=f"ModelOpt MIXED_PRECISION, per layer ({counts}); the "
                                    "modules it does not name in the model dtype")


def _bnb(f: Fields) -> Quantization:
    skip = _names(f, "llm_int8_skip_modules") or ("lm_head",)
    if f.raw.get("load_in_4bit"):
        kind = f.raw.get("bnb_4bit_quant_type", "fp4")
        double = f.bool("bnb_4bit_use_double_quant", False)
        return Quantization("bitsandbytes", "bnb-4bit", 4, group_size=64, double_quant=double,
                            skip=skip, description=f"bitsandbytes {kind}, blocksize 64"
                            + (", double quantization" if double else ""))
    return Quantization("bitsandbytes", "bnb-8bit", 8, skip=skip,
                        description="bitsandbytes LLM.int8: int8 weights, fp32 row scales")


DEEPSEEK_V4_EXPERT_DTYPES = ("fp4", "fp8")


def expert_quantization(expert_dtype: object) -> Quantization | None:
    """DeepSeek-V4's `expert_dtype` (a top-level config key beside quantization_config): "fp4"
    stores the routed experts as e2m1 values packed two per int8 with one e8m0 scale per 32
    (the released checkpoint's experts.*.w1/w2/w3 weight I8 and scale F8_E8M0); "fp8"
    (Flash-Base) as FP8 128x128 blocks with fp32 scales; None for any other value."""
    if expert_dtype == "fp4":
        return Quantization("fp4", "fp4-e8m0", 4, group_size=32, only=("expert",),
                            description="FP4 experts (e2m1 packed two per int8, one e8m0 scale "
                                        "per 32 values)")
    if expert_dtype == "fp8":
        return Quantization("fp8", "fp8", 8, block=(128, 128), scale_dtype="F32",
                            only=("expert",),
                            description="FP8 e4m3 experts, one fp32 scale per 128x128 block")
    return None


def deepseek_v4_formats(q: Quantization, expert_dtype: object, source: str
                        ) -> tuple[Quantization, Quantization | None, str | None]:
    """DeepSeek-V4's checkpoint format as vLLM reads it (vllm/models/deepseek_v4/
    quant_config.py DeepseekV4FP8Config): quantization_config gives the FP8 block format of
    attention, shared experts and MTP projections; the routed experts' storage is the
    top-level `expert_dtype`, and so is the dtype of the block scales (`is_scale_e8m0`: e8m0
    with "fp4" experts, fp32 with "fp8"). A config.json without `expert_dtype` (the Flash
    release's first copy had none) is read as "fp4", as vLLM does, and the returned warning
    says so. Returns (the format, the experts' own format or None, a warning or None); a
    quantization_config other than FP8 blocks (a re-quantized release) is left as it is."""
    if q.layout != "fp8" or q.block is None:
        return q, None, None
    warning = None
    if expert_dtype is None:
        expert_dtype = "fp4"
        warning = (f"{source}: no expert_dtype; the routed experts are taken as FP4 (two "
                   "e2m1 values per int8, one e8m0 scale per 32), as vLLM's "
                   "DeepseekV4FP8Config does when the field is missing")
    if expert_dtype not in DEEPSEEK_V4_EXPERT_DTYPES:
        raise BadInputError(f"{source}: expert_dtype {expert_dtype!r} is not a DeepSeek-V4 "
                            "expert format", "one of: " + ", ".join(DEEPSEEK_V4_EXPERT_DTYPES))
    e8m0 = expert_dtype == "fp4"
    bo, bi = q.block
    main = replace(q, scale_dtype="F8_E8M0" if e8m0 else "F32",
                   warnings=q.warnings + ((warning,) if warning else ()),
                   description=f"FP8 e4m3, one {'e8m0' if e8m0 else 'fp32'} scale per "
                               f"{bo}x{bi} block")
    return main, expert_quantization(expert_dtype), warning
