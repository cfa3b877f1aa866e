"""Sweeps: the size quantities over a grid of models, KV dtypes, TP degrees, lengths and
batch sizes, fast enough for 100,000-row grids.

Speed comes from doing each piece of arithmetic once: a model's layers are collapsed to their
distinct specs with counts, one request's bytes are computed once per (model, dtype, TP,
tokens), and a batch is that times B (a batch of equal requests is linear in B).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

from kvplan.core.dtypes import KVFormat
from kvplan.core.errors import BadInputError
from kvplan.core.sizing import Sizer, check_parallelism
from kvplan.core.spec import ModelSpec
from kvplan.core.units import parse_tokens, whole_digits

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
            # counted before the list is built: 1..1099511627776:1 was a MemoryError
            if (hi - lo) // step + 1 + len(values) > MAX_ROWS:
                raise BadInputError(f"--tokens range {part!r} has more than {MAX_ROWS:,} "
                                    "lengths", "use a larger step, or doubling (1k..128k)")
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
        value = whole_digits(part, flag)
        if not value:
            raise BadInputError(f"{flag} values must be positive whole numbers, got {part!r}")
        out.append(value)
    if not out:
        raise BadInputError(f"{flag} is empty")
    return list(dict.fromkeys(out))


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
        # the sizing path of `kvplan size` (core.sizing.Sizer), built once per model, format
        # and TP degree
        whole = Sizer.of(spec.layers, fmt, 1)
        rank = Sizer.of(spec.layers, fmt, tp) if tp > 1 else whole
        per_token = whole.per_token()
        for n in tokens:
            request = whole.request(n)
            per_gpu = rank.request(n) if tp > 1 else request
            for b in batches:
                yield (spec.name, fmt.name, tp, n, b, per_token, request, b * request,
                       b * per_gpu)
