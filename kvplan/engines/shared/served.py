"""Which releases of an engine serve a model's architecture: the check vLLM and SGLang share.

An engine's file (kvplan/data/vllm-served.txt, kvplan/data/sglang-served.txt; written by
scripts/served_history.py's writer) lists, for every class some release read serves, the
first release that lists it and the first that no longer does, and its table. An engine
refuses a class a release does not serve; it may try a Transformers backend instead (vLLM's
`_try_resolve_transformers`, SGLang's `resolve_transformers_arch` from 0.4.7): another cache,
not modelled, so kvplan refuses those too (kvplan.engines.vllm.served,
kvplan.engines.sglang.served say which classes each engine's check leaves alone).
"""

from __future__ import annotations

import functools
from pathlib import Path

from kvplan.core.errors import BadInputError
from kvplan.core.record import record

DATA = Path(__file__).resolve().parent.parent.parent / "data"


def parse_release(text: str) -> tuple[int, ...]:
    """A release as the file writes it, read as --engine-version is (kvplan.engines.
    parse_version): 0.23.0 -> (0, 23, 0); 0.9.0.1 -> (0, 9, 0, 1); 0.6.4.post1 -> (0, 6, 4)."""
    from kvplan.engines import parse_version

    version = parse_version(text)
    if version is None:
        raise ValueError(f"no release in {text!r}")
    return version


def shown(version: tuple[int, ...]) -> str:
    """A release as a flag takes it: (0, 24, 0) -> 0.24; (0, 9, 0, 1) -> 0.9.0.1."""
    if len(version) == 3 and version[2] == 0:
        version = version[:2]
    return ".".join(map(str, version))


@record
class Served:
    """One class of the file: the releases that list it, [added, removed)."""

    name: str
    added: tuple[int, ...] | None  # None: listed by the oldest release read already
    removed: tuple[int, ...] | None  # None: the newest release read lists it
    # the table of the last release listing it: vLLM's text, multimodal, or transformers
    # (vLLM's Transformers backend serves it); SGLang's model
    table: str = "text"

    def serves(self, version: tuple[int, ...]) -> bool:
        return ((self.added is None or version >= self.added)
                and (self.removed is None or version < self.removed))


Table = tuple[tuple[tuple[int, ...], ...], dict[str, Served]]


@functools.cache
def served(path: Path) -> Table:
    """(the releases read, oldest first; class name -> Served) from the file at `path`."""
    releases: tuple[tuple[int, ...], ...] = ()
    table: dict[str, Served] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if words[0] == "releases":
            releases = tuple(parse_release(w) for w in words[1:])
        elif words[0] != "newest":
            name, added, removed, kind = words
            table[name] = Served(
                name, None if added.startswith("<=") else parse_release(added),
                None if removed == "-" else parse_release(removed), kind)
    return releases, table


def _renamed(path: Path, name: str, version: tuple[int, ...]) -> str:
    """', now as X' where a class `version` serves differs from `name` only in underscores
    and case (vLLM's Ernie4_5_ForCausalLM became Ernie4_5ForCausalLM in 0.10.1): the
    config's `architectures` then needs the new spelling."""
    key = name.replace("_", "").lower()
    now = [s.name for s in served(path)[1].values()
           if s.name != name and s.name.replace("_", "").lower() == key and s.serves(version)]
    return f", now as {now[0]}: write that in config.json's architectures" if now else ""


def check_served(engine: str, path: Path, architectures: tuple[str, ...],
                 version: tuple[int, ...], *, refuse_unlisted: bool = False,
                 backend_from: tuple[int, ...] = ()) -> None:
    """Raise BadInputError when `engine` at `version` serves none of `architectures` (a
    config's `architectures`), naming the class and the releases that do. A class no
    release read lists is refused only with `refuse_unlisted` (else left to the readers);
    `backend_from`: the first release with a Transformers backend to try instead."""
    version = tuple(version) + (0,) * (3 - len(version))
    releases, table = served(path)
    known = [table[a] for a in architectures if a in table]
    if any(s.serves(version) for s in known) or not (known or refuse_unlisted
                                                     and architectures):
        return
    backend = ("; the Transformers backend it would try instead is not modelled"
               if version >= backend_from else "")
    if not known:
        raise BadInputError(
            f"{engine} {shown(version)} does not serve {architectures[0]} (no {engine} "
            f"release {shown(releases[0])} to {shown(releases[-1])} has a model class of "
            f"that name{backend}); plan it with another --engine")
    s = known[0]
    if s.removed is not None and version >= s.removed:
        last = shown(max(r for r in releases if r < s.removed))
        raise BadInputError(
            f"{engine} {shown(version)} no longer serves {s.name} (removed in "
            f"{shown(s.removed)}{_renamed(path, s.name, version)}{backend}); give "
            f"--engine-version {last} or earlier")
    assert s.added is not None
    if s.table == "transformers":
        return  # an older release's Transformers backend fallback may take it: not refused
    raise BadInputError(
        f"{engine} {shown(version)} does not serve {s.name} yet (added in {shown(s.added)}); "
        f"give --engine-version {shown(s.added)} or later")


def removed(path: Path) -> tuple[tuple[str, str, str], ...]:
    """(class, the release that added it, the release that removed it) for each class some
    release read lists and the newest does not, by name; "<=X" where the oldest release
    read, X, lists it already."""
    releases, table = served(path)
    return tuple((name, f"<={shown(releases[0])}" if s.added is None else shown(s.added),
                  shown(s.removed)) for name, s in sorted(table.items())
                 if s.removed is not None)


def last_serving(path: Path, architectures: tuple[str, ...]) -> tuple[int, ...] | None:
    """The newest release read that serves one of `architectures` where the newest serves
    none of them; None where it does, or where no release lists them."""
    releases, table = served(path)
    known = [table[a] for a in architectures if a in table]
    if not known or any(s.serves(releases[-1]) for s in known):
        return None
    return max((r for r in releases if any(s.serves(r) for s in known)), default=None)
