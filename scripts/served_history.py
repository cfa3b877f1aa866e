"""The history writer both engines' served-architecture files share
(kvplan/data/vllm-served.txt, kvplan/data/sglang-served.txt; read by
kvplan.engines.shared.served): for every class some release lists, the first release that
lists it, the first later release that no longer does, and the table the newest release
listing it puts it in.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version))


def history(header: str, tables: list[tuple[str, dict[str, str]]]) -> str:
    """The file's text from (release, {class: table}) pairs, in any order; a release given
    twice counts once."""
    releases = sorted(dict(tables).items(), key=lambda vt: version_key(vt[0]))
    listed = [(version, set(found)) for version, found in releases]
    table = {name: t for _, found in releases for name, t in found.items()}
    first, newest = listed[0][0], listed[-1][0]
    added: dict[str, str] = {}
    removed: dict[str, str] = {}
    previous: set[str] = set()
    for version, names in listed:
        for name in names - previous:
            added.setdefault(name, "<=" + version if version == first else version)
            removed.pop(name, None)  # listed again: only its last removal counts
        for name in previous - names:
            removed[name] = version
        previous = names
    lines = [header.rstrip("\n"),
             "releases " + " ".join(v for v, _ in listed),
             f"newest {newest}"]
    lines += [f"{name} {added[name]} {removed.get(name, '-')} {table[name]}"
              for name in sorted(added)]
    return "\n".join(lines) + "\n"


def write_or_check(out: Path, text: str, check: bool, script: str) -> int:
    """Write `text` to `out`, or with `check` exit 1 when the committed file differs."""
    if check:
        if out.read_text(encoding="utf-8") != text:
            print(f"{out.relative_to(ROOT)} differs: rerun scripts/{script}", file=sys.stderr)
            return 1
        return 0
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}", file=sys.stderr)
    return 0
