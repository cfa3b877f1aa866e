"""The quantities: exact KV-cache bytes per token, per request, per batch and per GPU.

Pure functions over a ModelSpec; every result is a frozen dataclass of Python ints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kvplan.core.dtypes import KVFormat
from kvplan.core.errors import BadInputError
from kvplan.core.layers import CompressedAttention, Layer
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec

SCHEMA = "kvplan.size/2"  # /2: inputs.length_counts replaced the per-request inputs.lengths


@record
class KindBreakdown:
    kind: str
    num_layers: int
    per_token_bytes: int
    request_bytes: int
    batch_bytes: int
    detail: str


@record
class SizeResult:
    # inputs, echoed
    model: str
    tokens: int
    batch: int
    length_runs: tuple[tuple[int, int], ...]  # (length, that many requests), in order
    kv_dtype: str
    tp: int
    pp: int
    block_size: int
    max_len: int
    # whole model, one copy (as if on a single GPU)
    per_token_bytes: int
    request_bytes: int
    batch_bytes: int
    breakdown: tuple[KindBreakdown, ...]
    # per GPU: KV heads split by TP, layers split by PP; the largest stage is reported
    per_gpu_batch_bytes: int
    all_gpus_batch_bytes: int
    stage_layers: tuple[int, ...]
    # allocation strategies for the same batch, per GPU
    paged_batch_bytes: int
    paged_waste_bytes: int
    contiguous_batch_bytes: int
    contiguous_waste_bytes: int

    @property
    def lengths(self) -> tuple[int, ...]:
        """One length per request, in order (as long as the batch: prefer length_runs)."""
        out: list[int] = []
        for n, count in self.length_runs:
            out += [n] * count
        return tuple(out)


def check_parallelism(spec: ModelSpec, tp: int, pp: int) -> None:
    """Raise when the model cannot be split this way (the checks serving engines make)."""
    if tp < 1 or pp < 1:
        raise BadInputError(f"--tp and --pp must be at least 1 (got tp={tp}, pp={pp})")
    heads = spec.num_attention_heads
    if heads and heads % tp:
        raise BadInputError(
            f"--tp {tp} does not divide {spec.name}'s {heads} attention heads",
            f"use a TP that divides {heads}: " + ", ".join(map(str, _divisors(heads))),
        )
    for kv in spec.max_tp():
        if kv % tp and tp % kv:
            raise BadInputError(
                f"--tp {tp} cannot split {spec.name}'s {kv} KV heads",
                "TP must divide the KV-head count, or be a multiple of it (heads replicated)",
            )
    if pp > spec.num_layers:
        raise BadInputError(
            f"--pp {pp} is more than {spec.name}'s {spec.num_layers} layers",
            f"use at most --pp {spec.num_layers}",
        )


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def pp_stages(num_layers: int, pp: int,
              partition: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """[start, end) layer ranges per stage, as vLLM's get_pp_indices splits them.

    Each stage gets num_layers // pp; the remainder goes one layer each to the stages before
    the last, starting from the second-to-last (the last stage also holds the LM head).
    `partition`: the layer count of each stage instead, as VLLM_PP_LAYER_PARTITION gives
    them (vllm/distributed/utils.py get_pp_indices: one count per stage, adding up to the
    model's layers, else a ValueError).
    """
    if partition is not None:
        sizes = [int(n) for n in partition]
        if len(sizes) != pp or sum(sizes) != num_layers or min(sizes) < 1:
            raise BadInputError(
                f"a pipeline layer partition of {','.join(map(str, sizes))} does not split "
                f"{num_layers} layers over {pp} stages",
                f"give {pp} layer counts of at least 1 that add up to {num_layers}")
    else:
        base, rest = divmod(num_layers, pp)
        sizes = [base] * pp
        for i in range(rest):
            sizes[pp - 2 - i if pp > 1 else 0] += 1
    ranges, start = [], 0
    for size in sizes:
        ranges.append((start, start + size))
        start += size
    return ranges


def stage_layers(layers: Sequence[Layer], pp: int,
                 partition: Sequence[int] | None = None) -> list[Sequence[Layer]]:
    """The layers of each pipeline stage (pp_stages' split)."""
    return [layers[a:b] for a, b in pp_stages(len(layers), pp, partition)]


@record
class Sizer:
    """The exact bytes of a list of layers in one format on one rank, each distinct layer
    computed once with how often it occurs: the one sizing path of `size`, `sweep` and every
    caller of per_token_bytes / request_bytes / batch_bytes.

    For formats whose cost is linear in tokens (no residual window, no KIVI key groups) a
    layer's request bytes are `fixed + rate * held_tokens(N)`, with fixed and rate taken from
    the layer's own formula at 0 and 1 token; other formats call the formula per length.
    """

    groups: tuple[tuple[Layer, int, int, int], ...]  # (layer, count, fixed bytes, bytes/token)
    fmt: KVFormat
    tp: int
    linear: bool

    @classmethod
    def of(cls, layers: Sequence[Layer], fmt: KVFormat, tp: int = 1) -> Sizer:
        counts: dict[Layer, int] = {}
        for layer in layers:
            counts[layer] = counts.get(layer, 0) + 1
        # CompressedAttention (DeepSeek-V4) is not one rate times its held tokens
        linear = fmt.residual is None and not fmt.per_channel_keys and not any(
            isinstance(layer, CompressedAttention) for layer in counts)
        groups = []
        for layer, count in counts.items():
            fixed = rate = 0
            if linear:
                fixed = layer.bytes_for_tokens(0, fmt, tp)
                rate = layer.bytes_for_tokens(1, fmt, tp) - fixed
            groups.append((layer, count, fixed, rate))
        return cls(tuple(groups), fmt, tp, linear)

    def per_token(self) -> int:
        """Bytes one more token adds while every layer still grows (before windows cap)."""
        return sum(n * layer.token_bytes(self.fmt, self.tp) for layer, n, _, _ in self.groups)

    def request(self, tokens: int) -> int:
        """Exact bytes one request of `tokens` tokens holds."""
        if self.linear:
            return sum(n * (fixed + rate * layer.held_tokens(tokens))
                       for layer, n, fixed, rate in self.groups)
        return sum(n * layer.request_bytes(tokens, self.fmt, self.tp)
                   for layer, n, _, _ in self.groups)

    def batch(self, lengths: Lengths) -> int:
        """Exact bytes of a batch: each distinct length once, times its requests."""
        return sum(count * self.request(n) for n, count in length_counts(lengths))


def per_token_bytes(layers: Sequence[Layer], fmt: KVFormat, tp: int = 1) -> int:
    """Bytes one more token adds while every layer still grows (before windows cap)."""
    return Sizer.of(layers, fmt, tp).per_token()


def request_bytes(layers: Sequence[Layer], tokens: int, fmt: KVFormat, tp: int = 1) -> int:
    """Exact bytes one request of `tokens` tokens holds (windows, chunks and state included)."""
    return Sizer.of(layers, fmt, tp).request(tokens)


Lengths = Sequence[int] | Mapping[int, int]  # one length per request, or length -> requests


def length_counts(lengths: Lengths) -> tuple[tuple[int, int], ...]:
    """(length, requests of that length), in order of first appearance: a batch is summed
    once per distinct length and multiplied, never once per request."""
    if isinstance(lengths, Mapping):
        return tuple(lengths.items())
    counts: dict[int, int] = {}
    for n in lengths:
        counts[n] = counts.get(n, 0) + 1
    return tuple(counts.items())


def _runs(lengths: Lengths) -> tuple[tuple[int, int], ...]:
    """(length, requests in a row of that length): the batch in its order, compressed."""
    if isinstance(lengths, Mapping):
        return tuple(lengths.items())
    runs: list[list[int]] = []
    for n in lengths:
        if runs and runs[-1][0] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    return tuple((n, c) for n, c in runs)


def batch_bytes(layers: Sequence[Layer], lengths: Lengths, fmt: KVFormat,
                tp: int = 1) -> int:
    return Sizer.of(layers, fmt, tp).batch(lengths)


def paged_bytes(layers: Sequence[Layer], lengths: Lengths, fmt: KVFormat, tp: int,
                block_size: int) -> int:
    """Each request rounded up to whole blocks in every layer (state layers: one state each)."""
    total = 0
    for n, count in length_counts(lengths):
        for layer in layers:
            slots = layer.paged_tokens(n, block_size)
            total += count * (layer.bytes_for_tokens(slots, fmt, tp) if slots
                              else layer.request_bytes(n, fmt, tp))
    return total


def contiguous_bytes(layers: Sequence[Layer], lengths: Lengths, fmt: KVFormat, tp: int,
                     max_len: int) -> int:
    """Every request preallocated at the maximum length (HF StaticCache style)."""
    total = 0
    for n, count in length_counts(lengths):
        for layer in layers:
            slots = layer.contiguous_tokens(max(max_len, n))
            total += count * (layer.bytes_for_tokens(slots, fmt, tp) if slots
                              else layer.request_bytes(n, fmt, tp))
    return total


def size(spec: ModelSpec, fmt: KVFormat, tokens: int | None = None, batch: int = 1,
         lengths: Lengths | None = None, tp: int = 1, pp: int = 1,
         block_size: int = 16, max_len: int | None = None) -> SizeResult:
    """Everything `kvplan size` reports, for B requests of N tokens or a list of lengths
    (or a mapping length -> requests). The cost grows with the distinct lengths, not B."""
    if lengths is None:
        if tokens is None or tokens <= 0:
            raise BadInputError("tokens must be a positive number")
        if batch <= 0:
            raise BadInputError(f"batch must be positive, got {batch}")
        runs: tuple[tuple[int, int], ...] = ((tokens, batch),)
    else:
        runs = _runs(lengths)
    if not runs or min(n for n, _ in runs) <= 0 or min(c for _, c in runs) <= 0:
        raise BadInputError("every request length must be positive")
    if block_size <= 0:
        raise BadInputError(f"--block-size must be positive, got {block_size}")
    check_parallelism(spec, tp, pp)
    longest = max(n for n, _ in runs)
    first = runs[0][0]
    max_len = max_len or spec.max_context_tokens or longest
    if max_len < longest:
        raise BadInputError(
            f"a request of {longest:,} tokens is longer than --max-len {max_len:,}")

    hist: dict[int, int] = {}  # each distinct length once, with its number of requests
    for n, count in runs:
        hist[n] = hist.get(n, 0) + count
    layers = spec.layers
    breakdown = []
    for kind in dict.fromkeys(layer.kind for layer in layers):
        members = [layer for layer in layers if layer.kind == kind]
        details = sorted({layer.describe() for layer in members})
        breakdown.append(KindBreakdown(
            kind=kind,
            num_layers=len(members),
            per_token_bytes=per_token_bytes(members, fmt),
            request_bytes=request_bytes(members, first, fmt),
            batch_bytes=batch_bytes(members, hist, fmt),
            detail="; ".join(details),
        ))

    # Each figure is the largest over pipeline stages: in a hybrid model the stage with the
    # most exact bytes need not be the one with the most paged or preallocated bytes.
    stages = stage_layers(layers, pp)
    stage_bytes = [batch_bytes(stage, hist, fmt, tp) for stage in stages]
    per_gpu = max(stage_bytes)
    paged = max(paged_bytes(stage, hist, fmt, tp, block_size) for stage in stages)
    contig = max(contiguous_bytes(stage, hist, fmt, tp, max_len) for stage in stages)
    return SizeResult(
        model=spec.name, tokens=first, batch=sum(c for _, c in runs), length_runs=runs,
        kv_dtype=fmt.name, tp=tp, pp=pp, block_size=block_size, max_len=max_len,
        per_token_bytes=per_token_bytes(layers, fmt),
        request_bytes=request_bytes(layers, first, fmt),
        batch_bytes=batch_bytes(layers, hist, fmt),
        breakdown=tuple(breakdown),
        per_gpu_batch_bytes=per_gpu,
        all_gpus_batch_bytes=sum(stage_bytes) * tp,
        stage_layers=tuple(len(stage) for stage in stages),
        paged_batch_bytes=paged,
        paged_waste_bytes=paged - per_gpu,
        contiguous_batch_bytes=contig,
        contiguous_waste_bytes=contig - per_gpu,
    )
