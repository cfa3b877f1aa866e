"""kvplan: exact KV-cache memory sizes and GPU capacity plans for LLM serving.

The front door (kvplan.api), loaded on first use so that `import kvplan` and `kvplan --help`
stay light:

    import kvplan
    m = kvplan.model("llama-3.1-8b")
    m.size(tokens="8k", kv_dtype="fp8")
    d = kvplan.deploy(m, gpu="h100", count=4)
    d.max_concurrency("32k"); d.max_context(64); d.fits("64x(2k+512)")
    kvplan.to_json(d.fits("64x(2k+512)"))  # any result as JSON text (kvplan.as_dict: a dict)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from kvplan.api import Deployed, Model, as_dict, deploy, kv_format, model, to_json, workload

__all__ = ["Deployed", "Model", "__version__", "as_dict", "deploy", "kv_format", "model",
           "to_json", "workload"]
# name -> the module that defines it (imported by name, on first access)
_LAZY = {name: "kvplan.api" for name in __all__ if name != "__version__"}


def __getattr__(name: str) -> Any:
    """kvplan.model, kvplan.deploy, ...: import kvplan.api the first time one is asked for."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kvplan' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
