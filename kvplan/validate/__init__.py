"""`kvplan validate`: prove the predictions by allocating real caches with torch.

Two independent paths meet here: the **prediction** (`predict.py`: kvplan's maths over the
layout the engine describes, `Engine.cache_layout`) and the **allocation** (`allocate.py`: the
tensors that layout really creates, allocated with `torch.empty` after a free-memory check and
measured with torch). The allocation's bytes never come from the prediction's functions, so a
wrong formula shows up as a difference. Several ranks run in `ranks.py`; the report is built
in kvplan.output.validate; torch is imported only inside functions (an optional extra).
Exit codes: 0 measured == predicted; 1 a difference; 2 bad input or a validation that would
not fit in free memory. In full: docs/architecture.md, "Notes on single modules".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from kvplan.core.errors import BadInputError
from kvplan.core.spec import ModelSpec
from kvplan.validate.allocate import (
    Announce,
    BlockTensor,
    Plane,
    PoolUse,
    _check_decode,
    block_pools,
    dense_planes,
    require_torch,
    run_rank,
)
from kvplan.validate.predict import (
    CONTIGUOUS,
    block_size,
    cache_layout,
    layouts,
    max_len,
    predict,
    request_layout,
    subset,
)
from kvplan.validate.ranks import launch_ranks
from kvplan.validate.results import (
    DEVICES,
    PROBE_BATCH,
    PROBE_MAX_LEN,
    PROBE_TOKENS,
    SCHEMA,
    SCHEMA_ALL,
    AllocationPlan,
    AllResult,
    AllRow,
    DecodeResult,
    KindResult,
    Progress,
    RankResult,
    ValidateRequest,
    ValidateResult,
)

# --- the command's entry points -------------------------------------------------------------

def validate(request: ValidateRequest, announce: Announce | None = None) -> ValidateResult:
    """Predict, allocate and measure on 1 rank here, or on --tp ranks with torch.distributed.
    `announce` hears what one rank will allocate before it allocates anything."""
    from kvplan.core.sizing import check_parallelism

    if request.tokens <= 0 or request.batch <= 0:
        raise BadInputError("--tokens and --batch must be positive")
    if request.layout not in layouts():
        raise BadInputError(f"--layout must be one of {', '.join(layouts())}, "
                            f"got {request.layout!r}")
    if request.block_size is not None and request.block_size <= 0:
        raise BadInputError(f"--block-size must be positive, got {request.block_size}")
    if request.max_len is not None and request.max_len < request.tokens:
        raise BadInputError(f"--max-len {request.max_len:,} is shorter than --tokens "
                            f"{request.tokens:,}")
    if request.layers is not None and request.layers <= 0:
        raise BadInputError(f"--layers must be positive, got {request.layers}")
    check_parallelism(request.spec, request.tp, 1)
    from kvplan.core.layers import CompressedAttention

    if any(isinstance(layer, CompressedAttention) for layer in request.spec.layers):
        raise BadInputError(f"{request.spec.name} has DeepSeek-V4 compressed attention, "
                            "whose engine tensors validate does not allocate (no layout "
                            "describes its window, compressed, indexer-key and "
                            "compressor-state caches as tensors yet)",
                            "kvplan size gives its exact bytes; `kvplan plan --engine vllm` "
                            "plans vLLM's groups")
    _check_decode(request)
    require_torch()
    ranks = (run_rank(request, announce=announce),) if request.tp == 1 \
        else tuple(launch_ranks(request))
    return _result(request, ranks)


def _result(request: ValidateRequest, ranks: Sequence[RankResult]) -> ValidateResult:
    spec = subset(request.spec, request.layers)
    full = scaled = None
    if spec.num_layers < request.spec.num_layers:
        full = sum(predict(request).values())
        whole, part = request.spec.kind_counts(), spec.kind_counts()
        scaled = 0
        for row in ranks[0].kinds:
            count = part.get(row.kind)
            factor = (whole[row.kind], count) if count else (request.spec.num_layers,
                                                             spec.num_layers)
            scaled += row.measured_bytes * factor[0] // factor[1]
    worst = max(ranks, key=lambda r: abs(r.diff_bytes))
    layout = request_layout(request)  # the whole model's: its block size and note
    return ValidateResult(
        model=request.spec.name, layout=request.layout, tokens=request.tokens,
        batch=request.batch, kv_dtype=request.fmt.name, tp=request.tp,
        block_size=block_size(request, layout), max_len=max_len(request),
        device=ranks[0].device,
        num_layers=request.spec.num_layers, layers_validated=spec.num_layers,
        predicted_bytes=ranks[0].predicted_bytes,
        measured_bytes=min(r.measured_bytes for r in ranks), diff_bytes=worst.diff_bytes,
        ranks=tuple(ranks), full_predicted_bytes=full, scaled_measured_bytes=scaled,
        layout_note=layout.note)

# --- every library model --------------------------------------------------------------------

def validate_all(kv_dtype: str = "auto", tokens: int = PROBE_TOKENS, batch: int = PROBE_BATCH,
                 max_len: int = PROBE_MAX_LEN,
                 specs: Sequence[ModelSpec] | None = None,
                 progress: Callable[[Progress], None] | None = None) -> AllResult:
    """Every library model x every layout at a small probe size, on the CPU. `progress`
    hears each model and layout as it is done."""
    from kvplan.core.dtypes import parse_format
    from kvplan.sources.library import load_library

    require_torch()
    start = time.perf_counter_ns()
    rows: list[AllRow] = []
    every = list(specs if specs is not None else load_library())
    names = layouts()
    count = len(every) * len(names)
    for spec in every:
        for layout in names:
            if progress is not None:
                progress(Progress(len(rows), count, f"{spec.name} {layout}"))
            try:
                fmt = parse_format(kv_dtype, spec.dtype)
                result = validate(ValidateRequest(spec, fmt, tokens, batch, layout=layout,
                                                  max_len=max_len, device="cpu"))
            except BadInputError as exc:
                rows.append(AllRow(spec.name, layout, None, None, None,
                                   f"skipped: {exc.message}"))
                continue
            rows.append(AllRow(spec.name, layout, result.predicted_bytes,
                               result.measured_bytes, result.diff_bytes,
                               "ok" if result.ok else "DIFF"))
    elapsed = (time.perf_counter_ns() - start) // 10**6
    return AllResult(tokens, batch, max_len, kv_dtype, tuple(rows), elapsed)


__all__ = [
    "validate", "validate_all", "ValidateRequest", "ValidateResult", "RankResult",
    "KindResult", "DecodeResult", "AllRow", "AllResult", "AllocationPlan", "Progress",
    "layouts", "CONTIGUOUS", "DEVICES", "SCHEMA", "SCHEMA_ALL", "PROBE_TOKENS", "PROBE_BATCH",
    "PROBE_MAX_LEN", "predict", "cache_layout", "request_layout", "block_pools",
    "dense_planes", "Plane", "PoolUse", "BlockTensor", "run_rank", "launch_ranks",
    "require_torch", "block_size", "max_len", "subset",
]
