"""GGUF files (llama.cpp, Ollama) as models: the header only, never the tensors.

kvplan reads the header itself, field by field (`_Header`), keeping only the keys it needs and
stepping over the vocabulary's strings (llama.cpp's `gguf` package would build a numpy array
per string). Every count the file states is checked against the bytes left and kvplan's limits
before anything is allocated or iterated; a file that is not a regular file is refused before
it is opened. The format is the one llama.cpp's `gguf-py/gguf/gguf_reader.py` reads (GGUF
v2/v3); the ggml block sizes come from the `gguf` package's `GGML_QUANT_SIZES`. The
architecture keys (llama.cpp `gguf-py/gguf/constants.py`; list in docs/engine-kv-sizing.md
§7.7) are translated into the config.json fields kvplan.sources.hfconfig reads, so a GGUF file
and the model's config.json give the same layers; weights' bytes come from the tensor infos.
"""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path
from typing import Any, BinaryIO

from kvplan.core.errors import BadInputError
from kvplan.core.record import record
from kvplan.core.spec import MAX_LAYERS, ModelSpec, Source

# GGUF general.architecture -> (config.json model_type, architectures[0])
ARCHITECTURES: dict[str, tuple[str, str]] = {
    "llama": ("llama", "LlamaForCausalLM"),
    "mistral3": ("mistral", "MistralForCausalLM"),
    "qwen2": ("qwen2", "Qwen2ForCausalLM"),
    "qwen3": ("qwen3", "Qwen3ForCausalLM"),
    "qwen3moe": ("qwen3_moe", "Qwen3MoeForCausalLM"),
    "gemma": ("gemma", "GemmaForCausalLM"),
    "gemma2": ("gemma2", "Gemma2ForCausalLM"),
    "gemma3": ("gemma3_text", "Gemma3ForCausalLM"),
    "phi3": ("phi3", "Phi3ForCausalLM"),
    "nemotron_h": ("nemotron_h", "NemotronHForCausalLM"),
}

MAGIC = b"GGUF"
MAX_KEPT_STRING = 64 * 1024    # a kept string value (a name, an architecture)
MAX_KEPT_ARRAY = MAX_LAYERS    # a kept per-layer array (as many as kvplan's layer limit)
MAX_NESTING = 4                # arrays of arrays (llama.cpp writes none deeper than 2)
MAX_DIMS = 4                   # GGML_MAX_DIMS
MAX_KEY = 1024                 # a key's name
MAX_KEYS = 10_000              # keys in a header (real files: < 100)
MAX_TENSORS = 200_000          # tensor infos (real files: a few thousand)
MAX_VOCAB = 4_000_000          # tokens in the vocabulary (real files: <= 262,144)
# value types (gguf-py constants.GGUFValueType): fixed sizes, and their struct codes
_FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
          12: "d"}
_STRING, _ARRAY = 8, 9


@record
class GGUFWeights:
    """Exact bytes of the tensors in the file, by ggml type."""

    total_bytes: int
    total_params: int
    bytes_by_type: dict[str, int]


class _Bad(Exception):
    """The file breaks the format (the caller names the file)."""


class _Header:
    """A GGUF header read front to back from a file, every count checked first."""

    def __init__(self, data: Any, size: int) -> None:
        self.data = data  # the file, memory-mapped: nothing is read until it is sliced
        self.size = size
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.size - self.pos:
            raise _Bad(f"it ends inside its header (needs {n:,} bytes at byte {self.pos:,} "
                       f"of {self.size:,})")
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out

    def skip(self, n: int) -> None:
        if n < 0 or n > self.size - self.pos:
            raise _Bad(f"it ends inside its header (a value of {n:,} bytes at byte "
                       f"{self.pos:,} of {self.size:,})")
        self.pos += n

    def num(self, code: str) -> Any:
        return struct.unpack("<" + code, self.take(struct.calcsize(code)))[0]

    def count(self, what: str, min_item_bytes: int, limit: int | None = None) -> int:
        n = int(self.num("Q"))
        if n * max(min_item_bytes, 1) > self.size - self.pos:
            raise _Bad(f"it declares {n:,} {what}, more than its {self.size:,} bytes can hold")
        if limit is not None and n > limit:
            raise _Bad(f"it declares {n:,} {what}, more than any model has ({limit:,})")
        return n

    def skip_strings(self, n: int) -> None:
        """Step over n length-prefixed strings (the vocabulary) without reading them."""
        data, size, pos = self.data, self.size, self.pos
        unpack = struct.Struct("<Q").unpack_from
        for _ in range(n):
            if pos + 8 > size:
                raise _Bad("it ends inside its vocabulary")
            pos += 8 + unpack(data, pos)[0]
        if pos > size:
            raise _Bad("it ends inside its vocabulary")
        self.pos = pos

    def string(self, keep: bool, limit: int = MAX_KEPT_STRING) -> str | None:
        n = self.count("bytes of text", 1)
        if not keep:
            self.skip(n)
            return None
        if n > limit:
            raise _Bad(f"a text value of {n:,} bytes (at byte {self.pos:,}) is longer than "
                       f"any kvplan reads ({limit:,})")
        return self.take(n).decode("utf-8", "replace")

    def value(self, vtype: int, keep: bool, depth: int = 0) -> Any:
        if vtype in _FIXED:
            if not keep:
                self.skip(struct.calcsize(_FIXED[vtype]))
                return None
            return self.num(_FIXED[vtype])
        if vtype == _STRING:
            return self.string(keep)
        if vtype != _ARRAY:
            raise _Bad(f"a value of unknown type {vtype} at byte {self.pos:,}")
        if depth >= MAX_NESTING:
            raise _Bad(f"arrays nest deeper than {MAX_NESTING} levels")
        sub = int(self.num("I"))
        if sub in _FIXED:
            width = struct.calcsize(_FIXED[sub])
            n = self.count("array elements", width)
            if not keep:
                self.skip(n * width)
                return None
            if n > MAX_KEPT_ARRAY:
                raise _Bad(f"an array of {n:,} numbers is longer than any kvplan reads "
                           f"({MAX_KEPT_ARRAY:,})")
            return list(struct.unpack(f"<{n}{_FIXED[sub]}", self.take(n * width)))
        if sub == _STRING:  # each at least its 8-byte length
            n = self.count("array elements", 8)
            if keep and n > MAX_KEPT_ARRAY:
                raise _Bad(f"an array of {n:,} strings is longer than any kvplan reads")
            items = [self.string(keep) for _ in range(n)]
            return items if keep else n
        if sub == _ARRAY:
            n = self.count("array elements", 12)
            if keep and n > MAX_KEPT_ARRAY:
                raise _Bad(f"an array of {n:,} arrays is longer than any kvplan reads")
            items = [self.value(_ARRAY, keep, depth + 1) for _ in range(n)]
            return items if keep else None
        raise _Bad(f"an array of unknown type {sub} at byte {self.pos:,}")


def _open(path: Path) -> BinaryIO:
    """The file, opened only once it is known to be a regular file (a FIFO would block at
    open, a device never end)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise BadInputError(f"cannot read {path}: not a regular file",
                                "give the path of a .gguf file")
        return open(path, "rb")  # noqa: SIM115 (closed by the caller)
    except OSError as exc:
        raise BadInputError(f"cannot read {path}: {exc.strerror or exc}") from None


def _keeps(name: str) -> bool:
    return (name.startswith("general.") or name == "tokenizer.ggml.model"
            or name.partition(".")[0] in ARCHITECTURES)


_Tensors = list[tuple[str, tuple[int, ...], int, int]]  # name, dims, ggml type, offset


def _read(path: Path, with_tensors: bool) -> tuple[dict[str, Any], _Tensors, int, int]:
    """(header keys kvplan needs, tensor infos (name, dims, ggml type, offset), the offset
    where tensor data starts, the file's size)."""
    import mmap

    with _open(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        try:
            if size < 24:
                raise _Bad(f"it is {size} bytes long, shorter than a GGUF header")
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError, _Bad) as exc:
            raise BadInputError(f"{path}: not a readable GGUF file ({exc})",
                                "check that the download finished") from None
        try:
            return _parse(path, _Header(data, size), with_tensors)
        finally:
            data.close()


def _parse(path: Path, h: _Header, with_tensors: bool
           ) -> tuple[dict[str, Any], _Tensors, int, int]:
    size = h.size
    try:
        if h.take(4) != MAGIC:
            raise _Bad("it does not start with the GGUF magic bytes")
        version = h.num("I")
        if version not in (2, 3):
            raise _Bad(f"GGUF version {version} is not read (kvplan reads versions 2 "
                       "and 3, little-endian)")
        n_tensors = h.count("tensors", 24, MAX_TENSORS)
        n_keys = h.count("keys", 13, MAX_KEYS)
        out: dict[str, Any] = {}
        for _ in range(n_keys):
            name = h.string(True, MAX_KEY) or ""
            vtype = int(h.num("I"))
            if name == "tokenizer.ggml.tokens" and vtype == _ARRAY:
                sub = int(h.num("I"))
                if sub != _STRING:
                    raise _Bad("tokenizer.ggml.tokens is not an array of strings")
                n = h.count("tokens", 8, MAX_VOCAB)
                h.skip_strings(n)
                out["tokenizer.ggml.tokens.count"] = n
                continue
            keep = _keeps(name)
            value = h.value(vtype, keep)
            if keep:
                out[name] = value
        tensors: list[tuple[str, tuple[int, ...], int, int]] = []
        if with_tensors:
            for _ in range(n_tensors):
                tname = h.string(True, MAX_KEY) or ""
                n_dims = int(h.num("I"))
                if n_dims > MAX_DIMS:
                    raise _Bad(f"tensor {tname!r} has {n_dims} dimensions (ggml has at "
                               f"most {MAX_DIMS})")
                dims = tuple(int(h.num("Q")) for _ in range(n_dims))
                tensors.append((tname, dims, int(h.num("I")), int(h.num("Q"))))
        align = out.get("general.alignment", 32)
        if isinstance(align, bool) or not isinstance(align, int) or not 1 <= align <= 2**16:
            raise _Bad(f"general.alignment {align!r} is not a usable alignment")
        data_start = -(-h.pos // align) * align
    except _Bad as exc:
        raise BadInputError(f"{path}: not a readable GGUF file ({exc})",
                            "check that the download finished (a truncated file cannot "
                            "be read)") from None
    except (struct.error, OSError, ValueError) as exc:
        raise BadInputError(f"{path}: not a readable GGUF file ({exc})",
                            "check that the download finished") from None
    return out, tensors, data_start, size


def read_header(path: Path) -> dict[str, Any]:
    """The header's `general.*` keys, the architecture's keys, `tokenizer.ggml.model` and the
    vocabulary's length (`tokenizer.ggml.tokens.count`); every other value is stepped over."""
    return _read(path, with_tensors=False)[0]


def weights(path: Path) -> GGUFWeights:
    """Exact tensor bytes from the tensor infos (no data read)."""
    return _weights(path, *_read(path, with_tensors=True)[1:])


def _weights(path: Path, tensors: _Tensors, data_start: int, size: int) -> GGUFWeights:
    try:
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    except ImportError:
        raise BadInputError("reading .gguf files needs the gguf package",
                            "pip install 'gguf>=0.10'") from None
    by_type: dict[str, int] = {}
    params = 0
    for name, dims, ggml_type, offset in tensors:
        try:
            qtype = GGMLQuantizationType(ggml_type)
            block, type_bytes = GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            raise BadInputError(f"{path}: tensor {name!r} has ggml type {ggml_type}, which "
                                "the gguf package does not know",
                                "update the gguf package (pip install -U gguf)") from None
        elements = 1
        for d in dims:
            elements *= d
        if elements % block:
            raise BadInputError(f"{path}: tensor {name!r} has {elements:,} values, not whole "
                                f"blocks of {block} for {qtype.name}")
        n_bytes = elements // block * type_bytes
        if data_start + offset + n_bytes > size:
            raise BadInputError(f"{path}: truncated (tensor {name} ends past the file's "
                                f"{size:,} bytes)", "check that the download finished")
        by_type[qtype.name] = by_type.get(qtype.name, 0) + n_bytes
        params += elements
    return GGUFWeights(sum(by_type.values()), params, by_type)


def config_from_header(h: dict[str, Any], source: str) -> dict[str, Any]:
    """The config.json fields this header describes (only the ones kvplan reads). Counts
    are checked here, where the key can be named: whole numbers, per-layer arrays as long as
    the block count, nothing empty."""

    arch = h.get("general.architecture")
    if not isinstance(arch, str):
        raise BadInputError(f"{source}: the GGUF header has no general.architecture")
    if arch not in ARCHITECTURES:
        raise BadInputError(f"{source}: GGUF architecture {arch[:80]!r} has no reader in "
                            "kvplan", "known: " + ", ".join(sorted(ARCHITECTURES)))
    model_type, class_name = ARCHITECTURES[arch]

    def bad(name: str, problem: str) -> BadInputError:
        return BadInputError(f"{source}: {arch}.{name} {problem}",
                             "the GGUF header is damaged or not one llama.cpp wrote; size "
                             "the model from its config.json")

    def count(name: str, value: Any, minimum: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad(name, f"must be a whole number, got {str(value)[:40]}")
        if not minimum <= value <= 2**53:
            raise bad(name, f"must be between {minimum} and 2^53, got {value:,}")
        return value

    def key(name: str, default: Any = None, per_layer: bool = False, minimum: int = 0) -> Any:
        value = h.get(f"{arch}.{name}", default)
        if value is None:
            return None
        if isinstance(value, list):
            if not per_layer:
                raise bad(name, "is an array; kvplan reads one number here")
            if len(value) != layers:
                raise bad(name, f"has {len(value):,} entries for {layers:,} layers "
                          f"({arch}.block_count)")
            return [count(name, v, 0) for v in value]
        return count(name, value, minimum)

    layers = h.get(f"{arch}.block_count")
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise BadInputError(f"{source}: {arch}.block_count is missing or not a positive count")
    if layers > MAX_LAYERS:
        raise bad("block_count", f"is {layers:,}, more than the {MAX_LAYERS:,} layers kvplan "
                  "reads")
    cfg: dict[str, Any] = {"model_type": model_type, "architectures": [class_name],
                           "num_hidden_layers": layers}
    heads = key("attention.head_count", per_layer=True)
    if isinstance(heads, list):
        heads = max(heads)
    kv = key("attention.head_count_kv", heads, per_layer=True)
    for field, value in (("hidden_size", key("embedding_length")),
                         ("num_attention_heads", heads),
                         ("max_position_embeddings", key("context_length")),
                         ("head_dim", key("attention.key_length")),
                         ("sliding_window", key("attention.sliding_window")),
                         ("num_local_experts" if arch != "qwen3moe" else "num_experts",
                          key("expert_count")),
                         ("num_experts_per_tok", key("expert_used_count"))):
        if value is not None:
            cfg[field] = value
    if "head_dim" not in cfg and isinstance(heads, int) and heads and "hidden_size" in cfg:
        # llama.cpp llama-model.cpp load_hparams: n_embd_head_k = n_embd / n_head unless
        # attention.key_length says otherwise; written out so that no config class's
        # head_dim default (Qwen3Config, NemotronHConfig: 128) stands in for it
        cfg["head_dim"] = cfg["hidden_size"] // heads
    vocab = key("vocab_size", h.get("tokenizer.ggml.tokens.count"))
    if vocab:
        cfg["vocab_size"] = vocab
    ff = key("feed_forward_length", per_layer=True)
    if isinstance(ff, int):
        cfg["intermediate_size"] = ff
    expert_ff = key("expert_feed_forward_length")  # MoE experts' width (qwen3moe, ...)
    if isinstance(expert_ff, int):
        cfg["moe_intermediate_size"] = expert_ff
    if arch == "nemotron_h":
        # per layer: KV heads > 0 = attention, no KV heads and no MLP = Mamba2, else MLP
        if h.get(f"{arch}.attention.head_count_kv") is None:
            raise bad("attention.head_count_kv", "is missing (a nemotron_h header names the "
                      "KV heads of each layer)")
        kv_list = kv if isinstance(kv, list) else [kv] * layers
        ff_list = ff if isinstance(ff, list) else [ff or 0] * layers
        cfg["hybrid_override_pattern"] = "".join(
            "*" if k else ("M" if not f else "-") for k, f in zip(kv_list, ff_list, strict=True))
        cfg["num_key_value_heads"] = max(kv_list)
        inner, groups = key("ssm.inner_size"), key("ssm.group_count", 1, minimum=1)
        state, conv = key("ssm.state_size"), key("ssm.conv_kernel")
        mamba_heads = key("ssm.time_step_rank", minimum=1)  # llama.cpp: Mamba2's head count
        if None in (inner, state, conv, mamba_heads):
            raise BadInputError(f"{source}: a nemotron_h GGUF without its ssm.* keys "
                                "(ssm.inner_size, ssm.state_size, ssm.conv_kernel, "
                                "ssm.time_step_rank)")
        if inner % mamba_heads:
            raise bad("ssm.inner_size", f"{inner:,} is not a whole number of "
                      f"{mamba_heads:,} heads ({arch}.ssm.time_step_rank)")
        cfg.update(mamba_num_heads=mamba_heads, mamba_head_dim=inner // mamba_heads,
                   ssm_state_size=state, n_groups=groups, conv_kernel=conv)
        if isinstance(ff, list):
            cfg["intermediate_size"] = max(ff)
    elif isinstance(kv, list):
        if len(set(kv)) != 1:
            raise BadInputError(f"{source}: per-layer KV head counts for {arch} are not read",
                                "size this model from its config.json")
        cfg["num_key_value_heads"] = kv[0]
    elif kv is not None:
        cfg["num_key_value_heads"] = kv
    value_length = key("attention.value_length")
    if value_length is not None and value_length != cfg.get("head_dim"):
        raise BadInputError(f"{source}: key and value lengths differ ({cfg.get('head_dim')} / "
                            f"{value_length}); kvplan reads such GGUF files from config.json")
    return cfg


def load_gguf(path: Path) -> ModelSpec:
    """A .gguf file -> ModelSpec through config.json's reader; weights from tensor infos."""
    from dataclasses import replace

    from kvplan.sources.hfconfig import spec_from_config

    source = str(path)
    header, tensors, data_start, size = _read(path, with_tensors=True)  # the file read once
    cfg = config_from_header(header, source)
    name = str(header.get("general.name") or path.stem)[:200]
    slug = "-".join(name.lower().split()) or path.stem
    spec = spec_from_config(cfg, source, name=slug, source_info=Source(
        file=source, note="GGUF header"))
    from kvplan.core.spec import Checkpoint

    w = _weights(path, tensors, data_start, size)
    bytes_by_type = tuple(sorted(w.bytes_by_type.items(), key=lambda kv: -kv[1]))
    checkpoint = Checkpoint(bytes_by_type, f"GGUF tensor infos of {path.name} (ggml types)") \
        if w.total_bytes else None
    return replace(spec, num_params=w.total_params or spec.num_params, checkpoint=checkpoint)
