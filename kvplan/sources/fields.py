"""Typed reads from a raw mapping, with errors that name the file and the field.

Used only by the config readers (yamlspec.py, hfconfig.py); nothing else touches raw dicts.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Mapping
from typing import Any

from kvplan.core.errors import SpecError

_MISSING = object()
# The largest whole number any field takes: exact as a float (JSON and YAML may write 1e15)
# and far above any real count of tokens, bytes or parameters.
MAX_INT = 2**53


class Fields:
    """A view of one mapping inside a file: `Fields(raw, "x.yaml", "layers[2]")`."""

    def __init__(self, raw: Any, source: builtins.str, path: builtins.str = "") -> None:
        if not isinstance(raw, Mapping):
            raise SpecError(source, path or None,
                            f"expected a mapping of fields, got {type(raw).__name__}")
        self.raw = raw
        self.source = source
        self.path = path
        # fields a reader took from a config class's default (`defaulted`), and each said as
        # a note where it is used (`filled`)
        self.defaulted: frozenset[builtins.str] = frozenset()
        self.filled: tuple[builtins.str, ...] = ()

    def where(self, name: builtins.str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def has(self, name: builtins.str) -> bool:
        return self.raw.get(name) is not None

    def error(self, name: builtins.str | None, problem: builtins.str,
              hint: builtins.str | None = None) -> SpecError:
        return SpecError(self.source, self.where(name) if name else (self.path or None),
                         problem, hint)

    def first(self, *names: builtins.str) -> builtins.str | None:
        """The first of `names` present with a non-null value."""
        return next((n for n in names if self.raw.get(n) is not None), None)

    def int(self, name: builtins.str, default: Any = _MISSING, minimum: int = 1,
            maximum: int = MAX_INT) -> Any:
        value = self.raw.get(name)
        if value is None:
            if default is _MISSING:
                raise self.error(name, "is missing", "add it as a whole number")
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(name, f"must be a whole number, got {value!r}")
        if isinstance(value, float):
            if not math.isfinite(value) or not value.is_integer():
                raise self.error(name, f"must be a whole number, got {value!r}")
            value = int(value)
        if value < minimum:
            raise self.error(name, f"must be at least {minimum}, got {value}")
        if value > maximum:
            raise self.error(name, f"must be at most {maximum:,}, got {value:,}")
        return value

    def str(self, name: builtins.str, default: Any = _MISSING) -> Any:
        value = self.raw.get(name)
        if value is None:
            if default is _MISSING:
                raise self.error(name, "is missing")
            return default
        if not isinstance(value, builtins.str):
            raise self.error(name, f"must be text, got {value!r}")
        return value

    def bool(self, name: builtins.str, default: bool) -> bool:
        value = self.raw.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(name, f"must be true or false, got {value!r}")
        return value

    def list(self, name: builtins.str, default: Any = _MISSING) -> Any:
        value = self.raw.get(name)
        if value is None:
            if default is _MISSING:
                raise self.error(name, "is missing", "give a list")
            return default
        if not isinstance(value, list):
            raise self.error(name, f"must be a list, got {type(value).__name__}")
        return value

    def sub(self, name: builtins.str) -> Fields:
        return Fields(self.raw.get(name), self.source, self.where(name))

    def check_known(self, known: set[builtins.str]) -> None:
        # YAML keys need not be text (`? null`, `1:`): compare and name them as text
        unknown = sorted(str(k) for k in self.raw if k not in known)
        if unknown:
            raise self.error(
                unknown[0], "is not a known field",
                "known fields here: " + ", ".join(sorted(known)),
            )


def read_yaml(path: str, what: str = "") -> Any:
    """A YAML file through the one reader (kvplan.sources.reader): size, depth and alias
    limits checked; unreadable or invalid files name the file (and the line)."""
    from kvplan.sources.reader import load_yaml

    return load_yaml(path, what)
