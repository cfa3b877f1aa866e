"""Ollama (`ollama serve`): its settings and release rules (`config`) turned into the
llama.cpp context its runner loads, planned by the llama.cpp engine (`engine`); `ollama
serve` and its environment as data (`text`).
"""

from typing import TYPE_CHECKING

from kvplan.engines import lazy_exports

if TYPE_CHECKING:
    from kvplan.engines.llamacpp.ollama.config import (
        RULES,
        VRAM_TIERS,
        OllamaRules,
        default_num_ctx,
        rules_for,
    )
    from kvplan.engines.llamacpp.ollama.engine import ENGINE, OllamaEngine, runner_deployment
    from kvplan.engines.llamacpp.ollama.text import launch_flags

__all__ = ["ENGINE", "RULES", "VRAM_TIERS", "OllamaEngine", "OllamaRules",
           "default_num_ctx", "launch_flags", "rules_for", "runner_deployment"]

# each submodule is imported when one of its names is first asked for (lazy_exports)
__getattr__ = lazy_exports(__name__, {
    "config": ("RULES", "VRAM_TIERS", "OllamaRules", "default_num_ctx", "rules_for"),
    "engine": ("ENGINE", "OllamaEngine", "runner_deployment"),
    "text": ("launch_flags",),
})
