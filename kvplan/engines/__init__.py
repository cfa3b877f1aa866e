"""Engine profiles: how each serving engine turns a memory budget into KV-cache capacity.

One package per engine (`vllm`, `sglang`, `trtllm`, `llamacpp`, `hf`, `tgi`), none importing
another (pyproject.toml's import contract); `shared` holds what several use (device facts,
weights, the weight-load replay, the budget record) and `base`, `registry`, `cache` the plugin
protocol, the names and the cache as allocated. Pure functions over a ModelSpec, ints out
(floats only where the engine computes one, with the exact Fraction too); output names follow
the engine's log; each module cites the engine source it follows (file, function, release),
and docs/engine-accuracy.md compares the results with real logs. docs/engines.md shows how to
add one.
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
