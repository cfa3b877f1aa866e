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

from kvplan.engines.shared import served as _shared
from kvplan.engines.shared.served import Served, parse_release, shown

__all__ = ["SERVED_FILE", "Served", "check_served", "last_serving", "parse_release", "removed",
           "served", "shown"]

SERVED_FILE = _shared.DATA / "vllm-served.txt"


def served() -> _shared.Table:
    """(the releases read, oldest first; class name -> Served) from SERVED_FILE."""
    return _shared.served(SERVED_FILE)


def check_served(architectures: tuple[str, ...], version: tuple[int, ...]) -> None:
    """Raise BadInputError when vLLM `version` serves none of `architectures` (a config's
    `architectures`), naming the class and the releases that do; classes no release read
    lists (out-of-tree plugins, pooling-only heads) are left to the readers. `version` as
    --engine-version gives it: 0.24 is 0.24.0."""
    _shared.check_served("vLLM", SERVED_FILE, architectures, version)


def removed() -> tuple[tuple[str, str, str], ...]:
    """(class, the release that added it, the release that removed it) for each class some
    release read lists and the newest does not (docs/architectures.md)."""
    return _shared.removed(SERVED_FILE)


def last_serving(architectures: tuple[str, ...]) -> tuple[int, ...] | None:
    """The newest release read that serves one of `architectures` where the newest serves
    none of them; None where it does, or where no release lists them."""
    return _shared.last_serving(SERVED_FILE, architectures)
