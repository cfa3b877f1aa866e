"""Engine profiles: how each serving engine turns a memory budget into KV-cache capacity.

One package or module per engine, none importing another (pyproject.toml's import contract);
pure functions over a ModelSpec, ints out (floats only where the engine itself computes a
float, e.g. vLLM's "Maximum concurrency", and then the exact Fraction too). Output field names
follow what the engine logs; each module cites the engine source it follows (file, function,
release), and docs/engine-accuracy.md compares the results with the engines' logs.

- `vllm`      vLLM V1: pages per layer kind, layer groups, blocks, the profile run, start-up lines
- `sglang`    SGLang: `max_total_num_tokens` from the mem_fraction_static rule
- `trtllm`    TensorRT-LLM: tokens from the free-memory fraction, blocks of 32
- `llamacpp`  llama.cpp: cells padded to 256, K/V buffers in ggml types (MiB log line)
- `hf`        Hugging Face transformers: DynamicCache / StaticCache
- `tgi`       Text Generation Inference: blocks from the memory left after its warm-up
- `shared`    what several engines use (device facts, weights, the weight-load replay, budget)
- `base`, `registry`, `cache`: the plugin protocol, the names, the cache as allocated
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from kvplan.core.dtypes import KVFormat
    from kvplan.core.spec import ModelSpec




def lazy_exports(package: str, exports: Mapping[str, Sequence[str]]) -> Callable[[str], Any]:
    """A package's `__getattr__` (PEP 562) for the names it re-exports, `exports` being
    submodule -> names: a submodule is imported when one of its names is first asked for.
    So `kvplan.engines.NAME.text` (the engine's flag table and log lines, as data) can be
    imported without the engine's code, as the launch-line and log readers need every
    engine's tables but only the named engine's code (kvplan.engines.registry)."""
    import importlib

    where = {name: sub for sub, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        sub = where.get(name)
        if sub is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{sub}"), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__


def named_kv_format(spec: ModelSpec, name: str, formats: Mapping[str, KVFormat],
                    engine: str, valid: Sequence[str], flag: str = "--kv-cache-dtype"
                    ) -> KVFormat:
    """An engine's KV-dtype flag -> its stored format. `auto` is the model dtype, with float32
    checkpoints served in bf16 (the engines' `dtype=auto` rule)."""
    from kvplan.core.dtypes import BF16, FP16
    from kvplan.core.errors import BadInputError

    key = name.strip().lower()
    if key == "auto":
        return BF16 if spec.dtype in ("bf16", "fp32") else FP16
    if key not in formats:
        raise BadInputError(f"{engine} has no {flag} {name!r}", "valid: " + ", ".join(valid))
    return formats[key]


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """'0.9.1.dev705+g01220ce89' -> (0, 9, 1); 'b8247' -> (8247,); None/'' -> None.

    Only the leading numeric release parts count (dev/rc/local suffixes are dropped).
    """
    if not text:
        return None
    raw = text.strip().lower().lstrip("v")

    def number(piece: str) -> int:
        if len(piece) > 9:  # a release part, or llama.cpp's build number: a few digits
            from kvplan.core.errors import BadInputError

            raise BadInputError(f"cannot read the engine version {text[:40]!r}: a part of "
                                f"{len(piece):,} digits", "write it like 0.11.0 or 0.21")
        return int(piece)

    def digits(piece: str) -> bool:
        return piece.isascii() and piece.isdigit()

    if raw.startswith("b") and raw[1:].split() and digits(raw[1:].split()[0]):
        return (number(raw[1:].split()[0]),)
    parts: list[int] = []
    for piece in raw.replace("+", ".").replace(" ", ".").split("."):
        if not digits(piece):
            break
        parts.append(number(piece))
    if not parts:
        from kvplan.core.errors import BadInputError

        raise BadInputError(f"cannot read the engine version {text!r}",
                            "write it like 0.11.0 or 0.21")
    return tuple(parts)
