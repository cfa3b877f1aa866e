"""Which SGLang releases serve a model's architecture: the model classes across releases.

kvplan/data/sglang-served.txt lists, for every class some release's python/sglang/srt/models/
module names in its `EntryClass` (registry.py `import_model_classes` keys the registry by
those classes' names), the first release that names it and the first that no longer does
(scripts/sglang_models_history.py, from the wheels of 0.4.0 to 0.5.23). A release that does
not serve a config's class fails in `ModelRegistry.resolve_model_cls`, or from 0.4.7 tries its
Transformers backend (model_loader/utils.py `resolve_transformers_arch`, models/transformers.py
`TransformersForCausalLM`): another cache, not modelled, so kvplan refuses the class by name,
whether it came later, was removed, or is named by no release read (kvplan.engines.shared.served).
"""

from __future__ import annotations

from kvplan.engines.shared import served as _shared

SERVED_FILE = _shared.DATA / "sglang-served.txt"
# models/transformers.py first ships in 0.4.7
TRANSFORMERS_BACKEND = (0, 4, 7)


def check_served(architectures: tuple[str, ...], version: tuple[int, ...] | None) -> None:
    """Raise BadInputError when SGLang `version` (None: the newest release read) serves none
    of `architectures`, naming the class and the releases that do."""
    releases = _shared.served(SERVED_FILE)[0]
    _shared.check_served("SGLang", SERVED_FILE, architectures, version or releases[-1],
                         refuse_unlisted=True, backend_from=TRANSFORMERS_BACKEND)
