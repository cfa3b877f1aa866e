"""An engine's release table: which row of behaviour switches a version has.

Each engine keeps what changes between its releases as data, one row per release whose
source showed a change (kvplan.engines.vllm.config.RULES, kvplan.engines.sglang.memory.RULES);
the newest release read is the table's `max`. A version between two rows has the earlier
row's switches, a version before the first row the first row's, and a short version is
that release's .0 ("0.33" is 0.33.0). This is the one lookup the tables share.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


def release(version: tuple[int, ...]) -> tuple[int, ...]:
    """`version` as a three-part release to compare with a table's ("0.17" is 0.17.0); a
    longer version keeps its first three parts."""
    return tuple(version[:3]) + (0,) * (3 - len(version[:3]))


def row_for(rows: Mapping[tuple[int, ...], T], version: tuple[int, ...]) -> T:
    """The row of the newest release at or before `version` (see the module docstring)."""
    padded = release(version)
    found = rows[min(rows)]
    for row in sorted(rows):
        if row <= padded:
            found = rows[row]
    return found
