"""Which vLLM releases serve a model's architecture: the generation registry across releases.

kvplan/data/vllm-served.txt lists, for every class some release's
vllm/model_executor/models/registry.py puts in `_TEXT_GENERATION_MODELS`, `_MULTIMODAL_MODELS`
or `_TRANSFORMERS_SUPPORTED_MODELS`, the first release that lists it and the first that no
longer does (scripts/vllm_registry_history.py, from each release's registry.py). A release that
no longer lists a class refuses it (registry.py `_raise_for_unsupported`: "was supported in
vLLM until vY", `_PREVIOUSLY_SUPPORTED_MODELS`, Y the last release serving it); one before
the class was added does not know it. Either may still try its Transformers backend
(`_try_resolve_transformers`, model_impl auto) where transformers or the config's auto_map
has a compatible class: another cache, not modelled, so kvplan refuses those too. Only the
classes vLLM lists in its Transformers-backend table are not refused before they were listed.
"""

from __future__ import annotations

import functools
from pathlib import Path

from kvplan.core.errors import BadInputError
from kvplan.core.record import record

SERVED_FILE = Path(__file__).resolve().parent.parent.parent / "data" / "vllm-served.txt"


def parse_release(text: str) -> tuple[int, ...]:
    """0.23.0 -> (0, 23, 0); 0.9.0.1 -> (0, 9, 0, 1); 0.6.4.post1 -> (0, 6, 4)."""
    return tuple(int(x) for x in text.split(".") if x.isdigit())


def shown(version: tuple[int, ...]) -> str:
    """A release as a flag takes it: (0, 24, 0) -> 0.24; (0, 9, 0, 1) -> 0.9.0.1."""
    if len(version) == 3 and version[2] == 0:
        version = version[:2]
    return ".".join(map(str, version))


@record
class Served:
    """One class of the registry: the releases that list it, [added, removed)."""

    name: str
    added: tuple[int, ...] | None  # None: listed by the oldest release read already
    removed: tuple[int, ...] | None  # None: the newest release read lists it
    # the table of the last release listing it: text, multimodal, or transformers (vLLM's
    # Transformers backend serves it)
    table: str = "text"

    def serves(self, version: tuple[int, ...]) -> bool:
        return ((self.added is None or version >= self.added)
                and (self.removed is None or version < self.removed))


@functools.cache
def served() -> tuple[tuple[tuple[int, ...], ...], dict[str, Served]]:
    """(the releases read, oldest first; class name -> Served) from SERVED_FILE."""
    releases: tuple[tuple[int, ...], ...] = ()
    table: dict[str, Served] = {}
    for line in SERVED_FILE.read_text(encoding="utf-8").splitlines():
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


def _renamed(name: str, version: tuple[int, ...]) -> str:
    """', now as X' where a class `version` serves differs from `name` only in underscores
    and case (Ernie4_5_ForCausalLM became Ernie4_5ForCausalLM in 0.10.1): the config's
    `architectures` then needs the new spelling."""
    key = name.replace("_", "").lower()
    now = [s.name for s in served()[1].values()
           if s.name != name and s.name.replace("_", "").lower() == key and s.serves(version)]
    return f", now as {now[0]}: write that in config.json's architectures" if now else ""


def _before(version: tuple[int, ...]) -> tuple[int, ...]:
    """The newest release read before `version`."""
    return max(r for r in served()[0] if r < version)


def check_served(architectures: tuple[str, ...], version: tuple[int, ...]) -> None:
    """Raise BadInputError when vLLM `version` serves none of `architectures` (a config's
    `architectures`), naming the class and the releases that do; classes no release read
    lists (out-of-tree plugins, pooling-only heads) are left to the readers. `version` as
    --engine-version gives it: 0.24 is 0.24.0."""
    version = tuple(version) + (0,) * (3 - len(version))
    known = [served()[1][a] for a in architectures if a in served()[1]]
    if not known or any(s.serves(version) for s in known):
        return
    s = known[0]
    if s.removed is not None and version >= s.removed:
        last = shown(_before(s.removed))
        raise BadInputError(
            f"vLLM {shown(version)} no longer serves {s.name} (removed in "
            f"{shown(s.removed)}{_renamed(s.name, version)}; the Transformers backend it "
            f"would try instead is not modelled); give --engine-version {last} or earlier")
    assert s.added is not None
    if s.table == "transformers":
        return  # an older release's Transformers backend fallback may take it: not refused
    raise BadInputError(
        f"vLLM {shown(version)} does not serve {s.name} yet (added in {shown(s.added)}); "
        f"give --engine-version {shown(s.added)} or later")



def removed() -> tuple[tuple[str, str, str], ...]:
    """(class, the release that added it, the release that removed it) for each class some
    release read lists and the newest does not, by name; "<=0.6.3" where the oldest release
    read lists it already (docs/architectures.md)."""
    releases, table = served()
    return tuple((name, f"<={shown(releases[0])}" if s.added is None else shown(s.added),
                  shown(s.removed)) for name, s in sorted(table.items())
                 if s.removed is not None)


def last_serving(architectures: tuple[str, ...]) -> tuple[int, ...] | None:
    """The newest release read that serves one of `architectures` where the newest serves
    none of them; None where it does, or where no release lists them."""
    releases, table = served()
    known = [table[a] for a in architectures if a in table]
    if not known or any(s.serves(releases[-1]) for s in known):
        return None
    return max((r for r in releases if any(s.serves(r) for s in known)), default=None)
