"""Sweeps: the size quantities over a grid of models, KV dtypes, TP degrees, lengths and
batch sizes, fast enough for 100,000-row grids.

Speed comes from doing each piece of arithmetic once: a model's layers are collapsed to their
distinct specs with counts, one request's bytes are computed once per (model, dtype, TP,
tokens), and a batch is that times B (a batch of equal requests is linear in B).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kvplan.core.dtypes import KVFormat
from kvplan.core.errors import BadInputError
from kvplan.core.sizing import check_parallelism
from kvplan.core.spec import ModelSpec
from kvplan.core.units import parse_tokens

SCHEMA = "kvplan.sweep/1"
COLUMNS = ("model", "kv_dtype", "tp", "tokens", "batch", "per_token_bytes", "request_bytes",
           "batch_bytes", "per_gpu_batch_bytes")
MAX_ROWS = 10_000_000


def parse_token_range(text: str) -> list[int]:
    """'1k..128k' doubles (1k, 2k, 4k, ..., 128k); '1k..8k:1k' steps by 1k; '2k,8k,32k' lists."""
    values: list[int] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if ".." not in part:
            values.append(parse_tokens(part, "--tokens"))
            continue
        lo_text, _, rest = part.partition("..")
        hi_text, _, step_text = rest.partition(":")
        lo, hi = parse_tokens(lo_text, "--tokens"), parse_tokens(hi_text, "--tokens")
        if hi < lo:
            raise BadInputError(f"--tokens range {part!r} runs backwards")
        if step_text:
            step = parse_tokens(step_text, "--tokens step")
            values.extend(range(lo, hi + 1, step))
        else:
            n = lo
            while n <= hi:
                values.append(n)
                n *= 2
    if not values:
        raise BadInputError("--tokens is empty", "e.g. 1k..128k, 1k..8k:1k or 2k,8k")
    return list(dict.fromkeys(values))


def parse_int_values(text: str, flag: str) -> list[int]:
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if not part.isdigit() or int(part) <= 0:
            raise BadInputError(f"{flag} values must be positive whole numbers, got {part!r}")
        out.append(int(part))
    if not out:
        raise BadInputError(f"{flag} is empty")
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class _Sizer:
    """One (model, dtype, TP degree): each distinct layer once, with how often it occurs.

    For formats whose cost is linear in tokens (no residual window, no KIVI key groups) a
    layer's request bytes are `fixed + rate * held_tokens(N)`, with fixed and rate taken from
    the layer's own formula at 0 and 1 token; other formats call the formula per length.
    """

    groups: tuple[tuple[Any, int, int, int], ...]  # (layer, count, fixed bytes, bytes/token)
    fmt: KVFormat
    tp: int
    linear: bool

    @classmethod
    def build(cls, spec: ModelSpec, fmt: KVFormat, tp: int) -> _Sizer:
        groups = []
        for layer, count in Counter(spec.layers).items():
            fixed = layer.bytes_for_tokens(0, fmt, tp)
            groups.append((layer, count, fixed, layer.bytes_for_tokens(1, fmt, tp) - fixed))
        linear = fmt.residual is None and not fmt.per_channel_keys
        return cls(tuple(groups), fmt, tp, linear)

    def per_token(self) -> int:
        return sum(n * layer.token_bytes(self.fmt, self.tp) for layer, n, _, _ in self.groups)

    def request(self, tokens: int) -> int:
        if self.linear:
            return sum(n * (fixed + rate * layer.held_tokens(tokens))
                       for layer, n, fixed, rate in self.groups)
        return sum(n * layer.request_bytes(tokens, self.fmt, self.tp)
                   for layer, n, _, _ in self.groups)


def count_rows(models: Sequence[ModelSpec], formats: Sequence[KVFormat], tps: Sequence[int],
               tokens: Sequence[int], batches: Sequence[int]) -> int:
    return len(models) * len(formats) * len(tps) * len(tokens) * len(batches)


def sweep(models: Sequence[ModelSpec], formats: Sequence[KVFormat], tps: Sequence[int],
          tokens: Sequence[int], batches: Sequence[int]) -> Iterator[tuple]:
    """Rows (in COLUMNS order) of the full grid, models outermost, batch innermost."""
    total = count_rows(models, formats, tps, tokens, batches)
    if total > MAX_ROWS:
        raise BadInputError(f"the sweep grid has {total:,} rows, more than {MAX_ROWS:,}",
                            "narrow --tokens, --batch or the other lists")
    for spec, tp in itertools.product(models, tps):
        check_parallelism(spec, tp, 1)
    for spec, fmt, tp in itertools.product(models, formats, tps):
        whole = _Sizer.build(spec, fmt, 1)
        rank = _Sizer.build(spec, fmt, tp) if tp > 1 else whole
        per_token = whole.per_token()
        for n in tokens:
            request = whole.request(n)
            per_gpu = rank.request(n) if tp > 1 else request
            for b in batches:
                yield (spec.name, fmt.name, tp, n, b, per_token, request, b * request,
                       b * per_gpu)
