"""`lazy(pattern)`: a regular expression compiled the first time it is used, not when its
module is imported. Compiling one costs 50-200 us; a command imports modules with dozens of
patterns it never runs (a plan reads no launch line, a log no byte sizes), and those were a
tenth of its start-up over the floor (benchmarks/README.md).
"""

from __future__ import annotations

import re
from typing import Any


class LazyPattern:
    """Stands for `re.compile(pattern, flags)`: its methods and attributes (match, search,
    findall, sub, pattern, ...) are the compiled pattern's, compiled on the first use."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(*self._args)
        return getattr(compiled, name)


def lazy(pattern: str, flags: int = 0) -> Any:
    """A pattern compiled on its first use (LazyPattern), typed as the compiled one."""
    return LazyPattern(pattern, flags)


# A module or tensor pattern (a quantization config's `re:` entries, llama.cpp's
# --override-tensor) is tried on every name (a few dozen characters) of every layer, by
# Python's backtracking matcher: a repeated group that itself repeats or branches
# ("(.*.*)*x", "(\\w+\\.?)+x") takes exponential time on a name it does not match, and each
# unbounded repeat in sequence multiplies the work by the name's length. Real patterns
# (".*lm_head", "model.layers.*.self_attn.*", ".*mlp.gate$") have neither.
_MAX_PATTERN_CHARS = 256
MAX_UNBOUNDED_REPEATS = 3
_SHORT_REPEAT = 8  # a repeat of at most this many steps costs no more than a few letters
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def pattern_problem(pattern: str) -> str | None:
    """Why a module- or tensor-name regular expression cannot be matched in bounded time (or
    at all), else None."""
    import importlib

    if len(pattern) > _MAX_PATTERN_CHARS:
        return f"is longer than {_MAX_PATTERN_CHARS} characters"
    try:
        tree = importlib.import_module("re._parser").parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"is not a regular expression ({exc})"
    unbounded = 0
    stack: list[tuple[Any, bool]] = [(tree, False)]  # (items, inside a repeat of more than 1)
    while stack:
        items, repeated = stack.pop()
        for op, av in items:
            name = str(op)
            if name in _REPEATS:
                low, high, body = av
                many = high > 1
                if many and repeated:
                    return "repeats a group that itself repeats (exponential matching time)"
                unbounded += high > _SHORT_REPEAT
                stack.append((body, repeated or many))
            elif name == "BRANCH":
                if repeated:
                    return "repeats a group that branches (exponential matching time)"
                stack.extend((b, repeated) for b in av[1])
            elif name == "SUBPATTERN":
                stack.append((av[-1], repeated))
            elif name in ("ASSERT", "ASSERT_NOT", "ATOMIC_GROUP"):
                stack.append((av[-1] if name != "ATOMIC_GROUP" else av, repeated))
            elif name == "GROUPREF_EXISTS":
                stack.extend((b, repeated) for b in av[1:] if b is not None)
    if unbounded > MAX_UNBOUNDED_REPEATS:
        return (f"has {unbounded} unbounded repeats ('*', '+', '{{0,99}}'; at most "
                f"{MAX_UNBOUNDED_REPEATS}: each multiplies the matching time by a name's "
                "length)")
    return None
