"""What `kvplan import` resolves: a model named by library name, file or Hub repo, with its
weights (exact from safetensors headers, local or on the Hub, else estimated from config.json).

It sits above the readers it combines (kvplan.sources.library, hub, weights, hfconfig), so
none of them needs another back: the safetensors reader (weights) stays a reader of files and
headers, the Hub client (hub) fetches, and this module decides which to ask.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.core.errors import SpecError
from kvplan.core.spec import Checkpoint, ModelSpec
from kvplan.sources.weights import (
    INDEX_FILE,
    Weights,
    cheap_weights,
    estimate_weights,
    listed_weights,
)

if TYPE_CHECKING:
    from kvplan.sources.hub import HubConfig


def hub_weights(fetched: HubConfig) -> Weights | None:
    """Exact weights of a Hub repo at the commit of its fetched config.json, from its
    safetensors headers; None when it has none or the Hub cannot be reached."""
    from kvplan.sources.hub import safetensors_tensors

    files = safetensors_tensors(fetched)
    if files is None:
        return None
    return listed_weights(str(fetched.ref), files)


def import_spec(model: str) -> tuple[ModelSpec, Weights | None]:
    """MODEL resolved for `kvplan import`, with its weights: exact from safetensors headers
    (local files or the Hub), else an estimate from config.json, else None (a library YAML).
    An exact count is recorded as num_params; a Hub repo id becomes the spec's alias."""
    from kvplan.sources.library import hub_ref_of, resolve

    ref = hub_ref_of(model)
    if ref is None:
        spec = resolve(model)
        weights = cheap_weights(model)
        path = Path(model).expanduser()
        config = path / "config.json" if path.is_dir() else path
        if weights is None and path.exists() and config.suffix == ".json":
            from kvplan.sources.hfconfig import parse_json

            weights = _try_estimate(parse_json(config.read_bytes(), str(config)),
                                    str(config), spec.dtype)
    else:
        from kvplan.sources.hfconfig import parse_json
        from kvplan.sources.hub import fetch_config, spec_from_hub_config

        fetched = fetch_config(ref)
        spec = spec_from_hub_config(fetched)
        spec = replace(spec, aliases=(ref.repo,))
        weights = None if fetched.offline else hub_weights(fetched)
        if weights is None:
            if not fetched.offline:
                spec = _index_checkpoint(spec, fetched)
            weights = _try_estimate(parse_json(fetched.data, fetched.label), fetched.label,
                                    spec.dtype)
    if weights is not None and weights.exact:
        where = f"hf:{ref.repo}@{spec.source.revision or ref.rev}" if ref is not None else model
        spec = replace(spec, num_params=weights.total_params, checkpoint=Checkpoint(
            tuple((d.dtype, d.num_bytes) for d in weights.by_dtype),
            f"the safetensors headers of {weights.num_files} file"
            f"{'s' if weights.num_files != 1 else ''} of {where}"))
    return spec, weights


def _index_checkpoint(spec: ModelSpec, fetched: HubConfig) -> ModelSpec:
    """The headers could not be read: the shards' index still states their total bytes
    (`metadata.total_size`), which is recorded as the published checkpoint (total only)."""
    from kvplan.sources.hub import safetensors_index_total

    total = safetensors_index_total(fetched)
    if total is None:
        return spec
    where = f"hf:{fetched.ref.repo}@{spec.source.revision or fetched.ref.rev}"
    return replace(spec, checkpoint=Checkpoint(
        (("total", total),), f"{INDEX_FILE} metadata.total_size of {where}"))


def _try_estimate(raw: Any, source: str, dtype: str) -> Weights | None:
    # An architecture the estimate does not know (no hidden_size, say) leaves the weights
    # unknown; it must not stop the KV spec, which was read fine, from being imported.
    try:
        return estimate_weights(raw, source, dtype)
    except SpecError:
        return None
