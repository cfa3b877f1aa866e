"""Typed reads from a raw mapping, with errors that name the file and the field.

Used only by the config readers (yamlspec.py, hfconfig.py); nothing else touches raw dicts.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Mapping
from typing import Any

from kvplan.core.errors import BadInputError, SpecError

_MISSING = object()


class Fields:
    """A view of one mapping inside a file: `Fields(raw, "x.yaml", "layers[2]")`."""

    def __init__(self, raw: Any, source: builtins.str, path: builtins.str = "") -> None:
        if not isinstance(raw, Mapping):
            raise SpecError(source, path or None,
                            f"expected a mapping of fields, got {type(raw).__name__}")
        self.raw = raw
        self.source = source
        self.path = path

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

    def int(self, name: builtins.str, default: Any = _MISSING, minimum: int = 1) -> Any:
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
        unknown = sorted(set(self.raw) - known)
        if unknown:
            raise self.error(
                unknown[0], "is not a known field",
                "known fields here: " + ", ".join(sorted(known)),
            )


def read_yaml(path: str, what: str = "") -> Any:
    """Parse a YAML file with the safe loader; unreadable or invalid files name the file, and
    invalid YAML also the line and column."""
    import yaml

    label = f"{what} {path}".strip()
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise BadInputError(f"cannot read {label}: {reason}") from exc
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"{path}{where}", None, f"is not valid YAML: {problem}") from exc
