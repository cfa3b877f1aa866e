"""A model as kvplan sees it: a name, where its numbers came from, and its layers."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from kvplan.core.layers import ATTENTION_KINDS, MLA, Layer


@dataclass(frozen=True)
class Source:
    """Where a spec's numbers came from: a Hub repo and revision, a file, or a paper."""

    repo: str | None = None
    revision: str | None = None
    file: str | None = None
    sha256: str | None = None
    paper: str | None = None
    note: str | None = None

    def describe(self) -> str:
        if self.repo:
            rev = f"@{self.revision}" if self.revision else ""
            return f"hf:{self.repo}{rev}" + (f" ({self.file})" if self.file else "")
        return self.paper or self.file or self.note or "unknown"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    layers: tuple[Layer, ...]
    source: Source = field(default_factory=Source)
    display_name: str | None = None
    family: str | None = None
    dtype: str = "bf16"
    max_context_tokens: int | None = None
    num_params: int | None = None
    num_attention_heads: int | None = None
    aliases: tuple[str, ...] = ()

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def kind_counts(self) -> dict[str, int]:
        return dict(Counter(layer.kind for layer in self.layers))

    @property
    def attention_layers(self) -> tuple[Layer, ...]:
        return tuple(layer for layer in self.layers if isinstance(layer, ATTENTION_KINDS))

    @property
    def is_mla(self) -> bool:
        return any(isinstance(layer, MLA) for layer in self.layers)

    def max_tp(self) -> list[int]:
        """KV-head counts that bound tensor parallelism (empty for pure MLA/state models)."""
        return sorted({layer.num_kv_heads for layer in self.layers
                       if isinstance(layer, ATTENTION_KINDS)})
