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
