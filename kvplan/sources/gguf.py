"""GGUF files (llama.cpp, Ollama) as models: the header only, never the tensors.

The `gguf` package (llama.cpp's own reader, an optional extra) memory-maps the file and parses
its key/value header and tensor infos; no tensor data is read, so a multi-GB file costs
milliseconds. The header's architecture keys are translated into the config.json fields that
kvplan.sources.hfconfig already reads, so a GGUF file and the same model's config.json go
through one reader and give the same layers. The weights' exact bytes come from the tensor
infos (each tensor's element count in its ggml quantization type's block size).

Keys (llama.cpp `gguf-py/gguf/constants.py` Keys.LLM / Keys.Attention / Keys.SSM):
`{arch}.block_count`, `.context_length`, `.embedding_length`, `.feed_forward_length`,
`.attention.head_count`, `.attention.head_count_kv` (a number, or one per layer where 0 marks
a recurrent layer), `.attention.key_length`, `.attention.value_length`,
`.attention.sliding_window`, `.ssm.conv_kernel`, `.ssm.inner_size`, `.ssm.state_size`,
`.ssm.time_step_rank`, `.ssm.group_count`, `.expert_count`, `.expert_used_count`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvplan.core.errors import BadInputError
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec, Source

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


@record
class GGUFWeights:
    """Exact bytes of the tensors in the file, by ggml type."""

    total_bytes: int
    total_params: int
    bytes_by_type: dict[str, int]


def _reader(path: Path) -> Any:
    try:
        from gguf import GGUFReader
    except ImportError:
        raise BadInputError("reading .gguf files needs the gguf package",
                            "pip install 'kvplan[gguf]'") from None
    try:
        return GGUFReader(str(path), "r")
    except (ValueError, OSError, IndexError, KeyError, TypeError) as exc:
        raise BadInputError(f"{path}: not a readable GGUF file ({exc})",
                            "check that the download finished (a truncated file cannot be "
                            "read)") from None


def _value(field: Any) -> Any:
    """A GGUF key's value as plain Python (numbers, strings, lists)."""
    from gguf import GGUFValueType

    types = field.types
    if not types:
        return None
    if types[0] == GGUFValueType.ARRAY:
        sub = types[-1]
        if sub == GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8", "replace") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    if types[0] == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8", "replace")
    return field.parts[field.data[0]].tolist()[0]


def read_header(path: Path) -> dict[str, Any]:
    """Every key of the header except the tokenizer's vocabulary lists (their length kept)."""
    r = _reader(path)
    out: dict[str, Any] = {}
    for name, field in r.fields.items():
        if name.startswith("tokenizer.ggml.") and name not in ("tokenizer.ggml.model",):
            if name == "tokenizer.ggml.tokens":
                out["tokenizer.ggml.tokens.count"] = len(field.data)
            continue
        out[name] = _value(field)
    return out


def weights(path: Path) -> GGUFWeights:
    """Exact tensor bytes from the tensor infos (no data read)."""
    r = _reader(path)
    by_type: dict[str, int] = {}
    params = 0
    size = path.stat().st_size
    for t in r.tensors:
        if int(t.data_offset) + int(t.n_bytes) > size:
            raise BadInputError(f"{path}: truncated (tensor {t.name} ends past the file's "
                                f"{size:,} bytes)", "check that the download finished")
        name = t.tensor_type.name
        by_type[name] = by_type.get(name, 0) + int(t.n_bytes)
        params += int(t.n_elements)
    return GGUFWeights(sum(by_type.values()), params, by_type)


def config_from_header(h: dict[str, Any], source: str) -> dict[str, Any]:
    """The config.json fields this header describes (only the ones kvplan reads)."""
    arch = h.get("general.architecture")
    if not isinstance(arch, str):
        raise BadInputError(f"{source}: the GGUF header has no general.architecture")
    if arch not in ARCHITECTURES:
        raise BadInputError(f"{source}: GGUF architecture {arch!r} has no reader in kvplan",
                            "known: " + ", ".join(sorted(ARCHITECTURES)))
    model_type, class_name = ARCHITECTURES[arch]

    def key(name: str, default: Any = None) -> Any:
        return h.get(f"{arch}.{name}", default)

    layers = key("block_count")
    heads = key("attention.head_count")
    if not isinstance(layers, int) or layers < 1:
        raise BadInputError(f"{source}: {arch}.block_count is missing or not a positive count")
    cfg: dict[str, Any] = {"model_type": model_type, "architectures": [class_name],
                           "num_hidden_layers": layers}
    if isinstance(heads, list):
        heads = max(heads)
    kv = key("attention.head_count_kv", heads)
    hidden = key("embedding_length")
    for field, value in (("hidden_size", hidden), ("num_attention_heads", heads),
                         ("max_position_embeddings", key("context_length")),
                         ("head_dim", key("attention.key_length")),
                         ("sliding_window", key("attention.sliding_window")),
                         ("num_local_experts" if arch != "qwen3moe" else "num_experts",
                          key("expert_count")),
                         ("num_experts_per_tok", key("expert_used_count"))):
        if value is not None:
            cfg[field] = value
    vocab = key("vocab_size", h.get("tokenizer.ggml.tokens.count"))
    if vocab:
        cfg["vocab_size"] = vocab
    ff = key("feed_forward_length")
    if isinstance(ff, int):
        cfg["intermediate_size"] = ff
    if arch == "nemotron_h":
        # per layer: KV heads > 0 = attention, no KV heads and no MLP = Mamba2, else MLP
        kv_list = kv if isinstance(kv, list) else [kv] * layers
        ff_list = ff if isinstance(ff, list) else [ff or 0] * layers
        cfg["hybrid_override_pattern"] = "".join(
            "*" if k else ("M" if not f else "-") for k, f in zip(kv_list, ff_list, strict=True))
        cfg["num_key_value_heads"] = max(kv_list)
        inner, groups = key("ssm.inner_size"), key("ssm.group_count", 1)
        state, conv = key("ssm.state_size"), key("ssm.conv_kernel")
        head_dim = key("ssm.time_step_rank")  # llama.cpp stores Mamba2's head count here
        if None in (inner, state, conv, head_dim):
            raise BadInputError(f"{source}: a nemotron_h GGUF without its ssm.* keys")
        cfg.update(mamba_num_heads=head_dim, mamba_head_dim=inner // head_dim,
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
    header = read_header(path)
    cfg = config_from_header(header, source)
    name = str(header.get("general.name") or path.stem)
    slug = "-".join(name.lower().split())
    spec = spec_from_config(cfg, source, name=slug, source_info=Source(
        file=source, note="GGUF header (the gguf package's reader)"))
    from kvplan.core.spec import Checkpoint

    w = weights(path)
    bytes_by_type = tuple(sorted(w.bytes_by_type.items(), key=lambda kv: -kv[1]))
    checkpoint = Checkpoint(bytes_by_type, f"GGUF tensor infos of {path.name} (ggml types)") \
        if w.total_bytes else None
    return replace(spec, num_params=w.total_params or spec.num_params, checkpoint=checkpoint)
