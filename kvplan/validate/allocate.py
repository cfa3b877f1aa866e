"""The allocation side of validate: the tensors a layout really creates, built from their
shapes and torch dtypes, allocated without touching their pages and measured with torch.

The layout is the engine's description (kvplan.engines.cache.CacheLayout); what is built here
is the format's side: which tensors, packed how, with which scales (`_token_planes`,
`_slot_planes`, `dense_planes`, `block_pools`). Every allocation is `torch.empty`, measured
with `untyped_storage().nbytes()`, made group by group after a free-memory check (`_Guard`)
and freed on every way out (`_freed`); torch is imported only inside these functions. In
full: docs/architecture.md, "Notes on single modules".
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from kvplan.core.dtypes import KVFormat
from kvplan.core.errors import BadInputError, KvplanError
from kvplan.core.layers import ATTENTION_KINDS, MLA, Layer, NoCache, RecurrentState
from kvplan.core.record import record
from kvplan.engines.cache import (
    CacheLayer,
    CacheLayout,
    groups_whole_tensors,
    recent_rows,
    tensor_widths,
    whole_tensor_shapes,
)
from kvplan.validate.predict import (
    either,
    layouts_where,
    predict,
    request_layout,
    subset,
    total,
)
from kvplan.validate.results import (
    DEVICES,
    INSTALL_HINT,
    SAFETY_FRACTION,
    AllocationPlan,
    DecodeResult,
    KindResult,
    RankResult,
    ValidateRequest,
)

# --- torch, imported only here --------------------------------------------------------------

def require_torch() -> Any:
    """torch. The first import runs with the cyclic garbage collector paused, then freezes
    every object alive (gc.freeze): torch's import leaves ~150,000 long-lived objects, and
    each full collection that scanned them cost ~50 ms; a validate run made three (a seventh
    of a 70B x 32k run). Reference counting still frees everything validate allocates."""
    import gc
    import sys

    loaded = sys.modules.get("torch")
    if loaded is not None:
        return loaded
    collecting = gc.isenabled()
    gc.disable()
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Failed to initialize NumPy" without numpy
            import torch
    except ImportError:
        raise BadInputError(
            f"kvplan validate needs torch, which is not installed: {INSTALL_HINT}") from None
    finally:
        gc.freeze()
        if collecting:
            gc.enable()
    return torch


def _itemsize(torch: Any, dtype: str) -> int:
    size = _ITEMSIZE.get(dtype)
    if size is None:
        size = _ITEMSIZE[dtype] = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
    return size


_ITEMSIZE: dict[str, int] = {}


# --- what one format stores (the allocation side: shapes and torch dtypes) ------------------

Shape = tuple[int, ...]
Planes = list[tuple[str, str, Shape]]  # (name, torch dtype, shape)
_SCALE_DTYPE = {4: "float32", 2: "float16", 1: "float8_e4m3fn"}
_PLAIN_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16",
                "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2", "int8": "int8"}


def _mla_record_bytes(name: str, rank: int, rope: int) -> int | None:
    """Engine MLA records, as vLLM's flashmla_sparse backend documents them."""
    if name == "fp8_ds_mla":  # fp8 latent + one fp32 scale per 128 + bf16 RoPE part
        return rank + rank // 128 * 4 + rope * 2
    if name == "nvfp4_ds_mla":  # packed e2m1 latent + fp8 scale per 16 + fp8 RoPE part
        return rank // 2 + rank // 16 + rope
    return None


def _token_planes(fmt: KVFormat, n: int, shape: Callable[[int], Shape], name: str) -> Planes:
    """The tensors storing one row of `n` elements per token slot; shape(last) -> full shape.

    Whole elements keep their dtype; 4-, 2- (any sub-byte) bit values are packed into uint8,
    whole bytes per row; group-wise formats add a scale (and zero-point) tensor in their own
    dtype with one entry per group.
    """
    if not fmt.group_size and fmt.bits >= 8:
        return [(name, _PLAIN_DTYPE[fmt.name], shape(n))]
    if fmt.bits < 8:
        planes = [(name, "uint8", shape(-(-n * fmt.bits // 8)))]
    else:
        planes = [(name, "float8_e4m3fn" if fmt.name.startswith("fp8") else "int8", shape(n))]
    if fmt.group_size:
        groups = -(-n // fmt.group_size)
        scale = _SCALE_DTYPE[fmt.scale_bytes]
        planes.append((f"{name}.scale", scale, shape(groups)))
        if fmt.zero_point:
            planes.append((f"{name}.zero", scale, shape(groups)))
    return planes


def _slot_planes(fmt: KVFormat, slots: int, n: int, name: str, per_channel: bool,
                 shape: Callable[[int, int], Shape],
                 group_shape: Callable[[int, int], Shape],
                 recent_override: int | None = None) -> Planes:
    """Rows of `n` elements for `slots` tokens of one layer, recent tokens and KIVI included
    (`recent_override`: the layout's count of full-precision recent rows, None: the
    format's window).

    shape(tokens, last) places token rows; group_shape(groups, last) places KIVI key groups
    (per channel, `group_size` tokens packed along the token axis).
    """
    recent = recent_rows(fmt, slots, recent_override)
    older = slots - recent
    planes: Planes = []
    if per_channel and fmt.per_channel_keys:
        # KIVI keys: the last slots mod R stay in full precision (KVFormat.tensor_bytes)
        recent = slots % fmt.key_period
        groups = (slots - recent) // fmt.group_size
        if groups:
            packed = -(-fmt.group_size * fmt.bits // 8)
            data = "uint8" if fmt.bits < 8 else "int8"
            planes.append((name, data, group_shape(groups, n) + (packed,)))
            scale = _SCALE_DTYPE[fmt.scale_bytes]
            planes.append((f"{name}.scale", scale, group_shape(groups, n)))
            if fmt.zero_point:
                planes.append((f"{name}.zero", scale, group_shape(groups, n)))
    elif older:
        planes += _token_planes(fmt, n, lambda last: shape(older, last), name)
    if recent:
        assert fmt.residual is not None
        planes += _token_planes(fmt.residual, n, lambda last: shape(recent, last),
                                f"{name}.recent")
    return planes


def _latent_planes(fmt: KVFormat, layer: MLA, slots: int, shape: Callable[[int, int], Shape],
                   split: bool, indexer: bool = True,
                   recent_override: int | None = None) -> Planes:
    """MLA: one latent row per token (no K/V pair); split = HF's latent + k_rot tensors;
    indexer=False leaves out the DSA indexer keys (vLLM caches them as a layer of their own)."""
    recent = recent_rows(fmt, slots, recent_override)
    planes: Planes = []
    if slots - recent:
        planes += _latent_part(fmt, layer, slots - recent, shape, split, "latent")
    if recent and fmt.residual is not None:
        planes += _latent_part(fmt.residual, layer, recent, shape, split, "latent.recent")
    index = layer.index_head_dim
    if indexer and index and slots:
        planes += _indexer_planes(index, slots, shape)
    return planes


def _indexer_planes(index_head_dim: int, slots: int, shape: Callable[[int, int], Shape]
                    ) -> Planes:
    """DSA indexer keys: fp8 values + an fp32 scale per 128, as uint8."""
    return [("indexer", "uint8", shape(slots, index_head_dim + index_head_dim // 128 * 4))]


def _latent_part(fmt: KVFormat, layer: MLA, count: int, shape: Callable[[int, int], Shape],
                 split: bool, name: str) -> Planes:
    """The latent rows of `count` tokens stored in one format."""
    def place(last: int) -> Shape:
        return shape(count, last)

    rank, rope = layer.kv_lora_rank, layer.qk_rope_head_dim
    record = _mla_record_bytes(fmt.name, rank, rope)
    if record is not None:
        return [(f"{name}.record", "uint8", shape(count, record))]
    if split or fmt.group_size or fmt.mla_rope is not None:
        return (_token_planes(fmt, rank, place, name)
                + _token_planes(fmt.mla_rope or fmt, rope, place, f"{name}.rope"))
    # vLLM/SGLang keep kv_lora_rank + qk_rope_head_dim in one row
    return _token_planes(fmt, rank + rope, place, name)


def _whole_tensor_planes(fmt: KVFormat, layer: Layer, slots: int, batch: int, tp: int,
                         recent_override: int | None) -> Planes:
    """One layer's tensors when each is quantized whole (`CacheLayout.whole_tensor_groups`):
    per K, V (or MLA latent, RoPE key) tensor of [batch, rows, tokens, width], the packed
    groups of its older tokens as `whole_tensor_shapes` gives them, a scale (and zero-point)
    per group, and its recent tokens in full precision; MLA's indexer keys as their own."""
    assert fmt.residual is not None
    recent = recent_rows(fmt, slots, recent_override)
    scale = _SCALE_DTYPE[fmt.scale_bytes]
    planes: Planes = []
    for name, rows, width in tensor_widths(layer, tp):
        if slots - recent:
            data, groups = whole_tensor_shapes(fmt, batch * rows * (slots - recent) * width)
            planes.append((name, "uint8", data))
            planes.append((f"{name}.scale", scale, (groups,)))
            if fmt.zero_point:
                planes.append((f"{name}.zero", scale, (groups,)))
        if recent:
            def place(last: int, rows: int = rows) -> Shape:
                return (batch, rows, recent, last)

            planes += _token_planes(fmt.residual, width, place, f"{name}.recent")
    if isinstance(layer, MLA) and layer.index_head_dim and slots:
        planes += _indexer_planes(layer.index_head_dim, slots, lambda t, last: (batch, t, last))
    return planes


def _heads(num_kv_heads: int, tp: int) -> int:
    return max(1, num_kv_heads // tp)  # vLLM/SGLang: replicate, never split a head


def _kv_dims(layer: Layer) -> tuple[int, int, int]:
    """(KV heads, key width, value width) of an attention layer, as its tensors are shaped."""
    if not isinstance(layer, ATTENTION_KINDS):
        raise BadInputError(f"validate does not allocate {layer.kind} layers "
                            f"({type(layer).__name__}) yet")
    v = layer.v_head_dim if layer.v_head_dim is not None else layer.head_dim
    return layer.num_kv_heads, layer.head_dim, v


# --- layouts -> tensors ---------------------------------------------------------------------

@record
class Plane:
    """One tensor a dense layout allocates."""

    kind: str
    layer: int
    name: str
    dtype: str
    shape: Shape


@record
class PoolUse:
    layer: str  # the engine's name for the cache layer ("12", "12.indexer")
    kind: str
    planes: tuple[tuple[str, str, Shape], ...]  # per-block tensors of this layer
    blocks: int  # block ids this layer's group holds for the batch


@record
class BlockTensor:
    """One raw int8 tensor of a paged layout's block pool, viewed by every layer in `uses`."""

    num_blocks: int
    page_bytes: int  # from the largest user's per-block tensors
    uses: tuple[PoolUse, ...]
    shared: bool  # shared by several layer groups (hybrid models)
    reserved_blocks: int = 1  # blocks no request uses (vLLM's null block)


def _placer(axes: str, batch: int, heads: int) -> tuple[Callable[[int, int], Shape],
                                                       Callable[[int, int], Shape]]:
    """(shape(tokens, last), group_shape(groups, n)) of one layer's tensors: token rows of one
    pool, [batch, heads, rows, dim] or [batch, rows, heads, dim]."""
    if axes == "pool":
        return (lambda t, last: (t, heads, last)), (lambda g, n: (g, heads, n))
    if axes == "batch-heads":
        return ((lambda t, last: (batch, heads, t, last)),
                (lambda g, n: (batch, heads, g, n)))
    return (lambda t, last: (batch, t, heads, last)), (lambda g, n: (batch, g, heads, n))


def dense_planes(layout: CacheLayout, fmt: KVFormat, tp: int) -> list[Plane]:
    """The tensors of a dense layout: per cache layer its rows in the format's planes, per
    state layer its state tensors for every slot."""
    out: list[Plane] = []
    batch = layout.batch
    for cached in layout.layers:
        layer, i = cached.layer, cached.index
        if isinstance(layer, RecurrentState):
            out += [Plane(cached.kind, i, b.name, b.dtype, (cached.slots, *b.shape))
                    for b in cached.state]
            continue
        if groups_whole_tensors(fmt, layout.whole_tensor_groups):
            planes = _whole_tensor_planes(fmt, layer, cached.slots, batch, tp,
                                          layout.recent_tokens)
        elif isinstance(layer, MLA):
            if layout.axes == "batch-tokens":  # one latent row per token, no head axis
                shape: Callable[[int, int], Shape] = lambda t, last: (batch, t, last)  # noqa: E731
            else:
                shape, _ = _placer(layout.axes, batch, 1)
            planes = _latent_planes(fmt, layer, cached.slots, shape, split=layout.split_latent,
                                    recent_override=layout.recent_tokens)
        else:
            heads, k_dim, v_dim = _kv_dims(layer)
            shape, group_shape = _placer(layout.axes, batch, _heads(heads, tp))
            recent = layout.recent_tokens
            planes = (_slot_planes(fmt, cached.slots, k_dim, "k", True, shape, group_shape,
                                   recent)
                      + _slot_planes(fmt, cached.slots, v_dim, "v", False, shape, group_shape,
                                     recent))
        out += [Plane(cached.kind, i, name, dtype, sh) for name, dtype, sh in planes]
    return out


def block_pools(layout: CacheLayout, fmt: KVFormat, tp: int) -> list[BlockTensor]:
    """A paged layout's cache tensors: raw int8 [num_blocks * page] buffers, the reserved
    blocks first (vLLM's block 0, the null block), num_blocks = reserved + the blocks the
    batch holds in every group.

    Each layer views its buffer as its own tensors, for attention a K and a V plane of
    [num_blocks, block_size, kv_heads, head_dim] (packed data plus scales when quantized),
    for MLA one latent plane (its indexer keys are a cache layer of their own), for state
    layers the state tensors of one request.
    """
    if not layout.groups:
        return []
    torch = require_torch()
    uses: dict[str, PoolUse] = {}
    group_blocks = []
    for group in layout.groups:
        held = layout.batch * group.blocks_per_request
        group_blocks.append(held)
        for cached in group.layers:
            planes = _block_planes(cached, fmt, tp, group.block_tokens)
            uses[cached.name] = PoolUse(cached.name, cached.kind, tuple(planes), held)
    num_blocks = layout.reserved_blocks + sum(group_blocks)

    def page(use: PoolUse) -> int:
        return sum(math.prod(s) * _itemsize(torch, d) for _, d, s in use.planes)

    reserved = layout.reserved_blocks
    if not layout.shared_tensors:
        return [BlockTensor(num_blocks, page(u), (u,), False, reserved) for u in uses.values()]
    largest = max(page(u) for u in uses.values())
    pools = []
    for slot in range(layout.shared_tensors):
        members = tuple(uses[g.layers[slot].name] for g in layout.groups
                        if slot < len(g.layers))
        pools.append(BlockTensor(num_blocks, largest, members, True, reserved))
    return pools


def _block_planes(cached: CacheLayer, fmt: KVFormat, tp: int, block_size: int) -> Planes:
    layer = cached.layer
    if isinstance(layer, RecurrentState):
        return [(b.name, b.dtype, b.shape) for b in cached.state]
    if isinstance(layer, MLA):
        if cached.indexer:
            assert layer.index_head_dim is not None  # the engine names its indexer's head
            return _indexer_planes(layer.index_head_dim, block_size, lambda t, last: (t, last))
        return _latent_planes(fmt, layer, block_size, lambda t, last: (t, last), split=False,
                              indexer=False)
    heads, k_dim, v_dim = _kv_dims(layer)
    h = _heads(heads, tp)
    return (_token_planes(fmt, k_dim, lambda last: (block_size, h, last), "k")
            + _token_planes(fmt, v_dim, lambda last: (block_size, h, last), "v"))


# --- measurement ----------------------------------------------------------------------------

def _resident_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _available_cpu_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


class _Meter:
    """Before/after readings of one device: CUDA's allocator and free memory, or CPU RSS."""

    def __init__(self, torch: Any, device: Any) -> None:
        self.torch, self.device = torch, device
        self.cuda = device.type == "cuda"

    def read(self) -> tuple[int | None, int | None]:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)
            free, _ = self.torch.cuda.mem_get_info(self.device)
            return self.torch.cuda.memory_allocated(self.device), free
        return _resident_bytes(), None


def _storage_bytes(tensors: Sequence[Any]) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def _resolve_device(torch: Any, device: str, rank: int = 0) -> Any:
    if device not in DEVICES:
        raise BadInputError(f"--device must be one of {', '.join(DEVICES)}, got {device!r}")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        if not torch.cuda.is_available():
            raise BadInputError("--device cuda: torch sees no CUDA device",
                                "use --device cpu (or auto)")
        return torch.device("cuda", rank % torch.cuda.device_count())
    return torch.device("cpu")


def _free_bytes(device: Any, torch: Any) -> int | None:
    """What the device can still give: MemAvailable (CPU) or CUDA's free memory."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    return _available_cpu_bytes()


def _check_fits(request: ValidateRequest, predicted: int, device: Any, torch: Any,
                ranks_here: int = 1) -> int | None:
    """Refuse, saying what fits instead, rather than run the device out of memory. Returns
    the free bytes it found (None when the device cannot say)."""
    free = _free_bytes(device, torch)
    if free is None:
        return None
    budget = int(free * SAFETY_FRACTION) // ranks_here
    if predicted <= budget:
        return free
    ranks = f" x {ranks_here} ranks" if ranks_here > 1 else ""
    raise BadInputError(
        f"validating {request.spec.name} needs {predicted:,} bytes{ranks} but "
        f"{device.type} has {free:,} bytes free (kvplan uses at most "
        f"{SAFETY_FRACTION:.0%} of it); nothing was allocated", _what_fits(request, budget))


class _Guard:
    """The check before each allocation: the tensor, plus a margin, must fit in what the
    device has free now, less what this run has allocated but not yet touched (on the CPU
    untouched pages do not show in MemAvailable, yet they may be written)."""

    MARGIN_BYTES = 64 * 2**20  # for the allocator, the decode check and everything else

    def __init__(self, request: ValidateRequest, device: Any, torch: Any) -> None:
        self.request, self.device, self.torch = request, device, torch
        self.allocated = 0
        self.resident0 = _resident_bytes() if device.type != "cuda" else None

    def reserve(self, nbytes: int) -> None:
        free = _free_bytes(self.device, self.torch)
        if free is None:
            self.allocated += nbytes
            return
        untouched = 0
        if self.device.type != "cuda":
            resident = _resident_bytes()
            grown = resident - self.resident0 if resident is not None and \
                self.resident0 is not None else 0
            untouched = max(0, self.allocated - max(0, grown))
        room = int(free * SAFETY_FRACTION) - untouched - self.MARGIN_BYTES
        if nbytes > room:
            raise BadInputError(
                f"validating {self.request.spec.name}: the next tensor needs {nbytes:,} bytes "
                f"but only {max(0, room):,} bytes are safe to take on {self.device.type} "
                f"({free:,} free, {self.allocated:,} already allocated); everything "
                "allocated was freed", _what_fits(self.request, self.allocated))
        self.allocated += nbytes


def _what_fits(request: ValidateRequest, budget: int) -> str:
    def fits(req: ValidateRequest) -> bool:
        return total(req) <= budget

    def largest(low: int, high: int, ok: Callable[[int], bool]) -> int:
        """The largest value in [low, high] that fits (sizes grow with it), or 0."""
        best = 0
        while low <= high:
            mid = (low + high) // 2
            if ok(mid):
                best, low = mid, mid + 1
            else:
                high = mid - 1
        return best

    options = []
    batch = largest(1, request.batch - 1, lambda b: fits(replace(request, batch=b)))
    if batch:
        options.append(f"--batch {batch}")
    layers = largest(1, (request.layers or request.spec.num_layers) - 1,
                     lambda k: fits(replace(request, layers=k)))
    if layers:
        options.append(f"--layers {layers} (validates a subset and scales up)")
    return ("fits instead: " + " or ".join(options)) if options else (
        "use fewer --tokens, or a smaller --batch or --layers K")


Announce = Callable[[AllocationPlan], None]


def run_rank(request: ValidateRequest, rank: int = 0, check_memory: bool = True,
             announce: Announce | None = None) -> RankResult:
    """Allocate this rank's cache group by group, measure it, run the decode check, free
    everything. `announce` hears what will be allocated before anything is."""
    torch = require_torch()
    device = _resolve_device(torch, request.device, rank)
    spec = subset(request.spec, request.layers)
    layers, fmt = spec.layers, request.fmt
    layout = request_layout(request, spec)
    rows = predict(request, spec, layout)
    predicted = sum(rows.values())
    free = _check_fits(request, predicted, device, torch) if check_memory else None
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if layout.paged:
        pools = block_pools(layout, fmt, request.tp)
        sizes = [p.num_blocks * p.page_bytes for p in pools]
        planes: list[Plane] = []
    else:
        pools = []
        planes = dense_planes(layout, fmt, request.tp)
        sizes = [math.prod(p.shape) * _itemsize(torch, p.dtype) for p in planes]
    if announce is not None:
        announce(AllocationPlan(str(device), len(sizes), sum(sizes), free))
    meter = _Meter(torch, device)
    guard = _Guard(request, device, torch) if check_memory else None
    held: list[Any] = []
    views: dict[tuple[int, str], Any] = {}
    try:
        with _freed(held, views, torch, device):
            alloc0, free0 = meter.read()
            if pools:
                measured, allocated = _allocate_pools(pools, held, torch, device, meter, guard)
            else:
                measured, allocated = _allocate_planes(planes, held, views, torch, device,
                                                       meter, guard)
            alloc1, free1 = meter.read()
            decode = None
            if request.decode_steps:
                decode = _decode(request, layout, layers, views, torch, device)
            return _rank_result(rank, device, rows, measured, allocated, len(held),
                                alloc0, alloc1, free0, free1, meter.cuda, layers, decode)
    except RuntimeError as exc:  # an allocation the check let through still failed
        if "out of memory" in str(exc).lower():
            raise BadInputError(f"{device.type} ran out of memory while validating; "
                                "everything allocated was freed",
                                _what_fits(request, predicted // 2)) from None
        raise


@contextlib.contextmanager
def _freed(held: list[Any], views: dict, torch: Any, device: Any) -> Iterator[None]:
    """Free every tensor on every way out, Ctrl-C included: drop the lists, the locals of the
    frames an exception unwound through, and (CUDA) the caching allocator's blocks."""
    try:
        yield
    except BaseException as exc:
        held.clear()
        views.clear()
        traceback.clear_frames(exc.__traceback__)
        raise
    finally:
        held.clear()
        views.clear()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()


def _empty(torch: Any, shape: Shape, dtype: str, device: Any) -> Any:
    """A tensor whose pages are never touched (torch.empty: nothing is zero-filled)."""
    return torch.empty(shape, dtype=getattr(torch, dtype), device=device)


def _allocate_planes(planes: Sequence[Plane], tensors: list[Any], views: dict, torch: Any,
                     device: Any, meter: _Meter, guard: _Guard | None = None
                     ) -> tuple[dict[str, int], dict[str, int | None]]:
    measured: dict[str, int] = {}
    allocated: dict[str, int | None] = {}
    for kind in dict.fromkeys(p.kind for p in planes):
        group = [p for p in planes if p.kind == kind]
        if guard is not None:  # the memory check, once per group of tensors
            guard.reserve(sum(math.prod(p.shape) * _itemsize(torch, p.dtype) for p in group))
        before, _ = meter.read()
        mine = []
        for p in group:
            t = _empty(torch, p.shape, p.dtype, device)
            mine.append(t)
            views[(p.layer, p.name)] = t
        tensors += mine
        after, _ = meter.read()
        measured[kind] = _storage_bytes(mine)
        allocated[kind] = after - before if after is not None and before is not None else None
    return measured, allocated


def _allocate_pools(pools: Sequence[BlockTensor], tensors: list[Any], torch: Any, device: Any,
                    meter: _Meter, guard: _Guard | None = None
                    ) -> tuple[dict[str, int], dict[str, int | None]]:
    """Paged layouts: allocate each raw pool, view it per layer, attribute its pages by block
    owner (the reserved blocks and the padding are rows of their own)."""
    measured: dict[str, int] = {}
    allocated: dict[str, int | None] = {}

    def add(table: dict, kind: str, n: int | None) -> None:
        table[kind] = None if n is None or table.get(kind, 0) is None else table.get(kind, 0) + n

    for pool in pools:
        if guard is not None:  # the memory check, before each pool tensor
            guard.reserve(pool.num_blocks * pool.page_bytes)
        before, _ = meter.read()
        raw = _empty(torch, (pool.num_blocks * pool.page_bytes,), "int8", device)
        tensors.append(raw)
        after, _ = meter.read()
        size = _storage_bytes([raw])
        per_block = size // pool.num_blocks  # the page, read back from the storage
        used = 0
        for use in pool.uses:
            layer_page = 0
            offset = 0
            planes = sorted(use.planes, key=lambda p: -_itemsize(torch, p[1]))
            kv_pair = [p[0] for p in planes] == ["k", "v"] and planes[0][1:] == planes[1][1:]
            if kv_pair:  # plain K and V: one [2, num_blocks, block_size, heads, dim] view
                planes = planes[:1]
            for _, dtype, shape in planes:
                copies = 2 if kv_pair else 1
                nbytes = copies * pool.num_blocks * math.prod(shape) * _itemsize(torch, dtype)
                view = raw[offset:offset + nbytes].view(getattr(torch, dtype))
                view = view.view(*((2,) if kv_pair else ()), pool.num_blocks, *shape)
                tensors.append(view)
                offset += nbytes
                layer_page += nbytes // pool.num_blocks
            if layer_page > per_block:
                raise KvplanError(f"cache layer {use.layer} needs {layer_page} B per block, "
                                  f"its pool page has {per_block}")
            add(measured, use.kind, use.blocks * layer_page)
            used += use.blocks * layer_page
        reserved = pool.reserved_blocks * per_block
        measured["null block"] = measured.get("null block", 0) + reserved
        measured["padding"] = measured.get("padding", 0) + size - used - reserved
        delta = after - before if after is not None and before is not None else None
        kinds = {u.kind for u in pool.uses}
        add(allocated, kinds.pop() if len(kinds) == 1 and not pool.shared else "pool", delta)
    return measured, allocated


def _rank_result(rank: int, device: Any, rows: dict[str, int], measured: dict[str, int],
                 allocated: dict[str, int | None], num_tensors: int, alloc0: int | None,
                 alloc1: int | None, free0: int | None, free1: int | None, cuda: bool,
                 layers: Sequence[Layer], decode: DecodeResult | None) -> RankResult:
    counts: dict[str, int] = {}
    for layer in layers:
        counts[layer.kind] = counts.get(layer.kind, 0) + 1
    kinds = []
    for kind in dict.fromkeys([*rows, *measured]):
        p, m = rows.get(kind, 0), measured.get(kind, 0)
        a = allocated.get(kind)
        kinds.append(KindResult(kind, counts.get(kind, 0), p, m, m - p, a,
                                a - m if a is not None else None))
    predicted, total = sum(rows.values()), sum(measured.values())
    delta = alloc1 - alloc0 if alloc1 is not None and alloc0 is not None else None
    return RankResult(
        rank=rank, device=str(device), predicted_bytes=predicted, measured_bytes=total,
        diff_bytes=total - predicted, num_tensors=num_tensors,
        allocated_bytes=delta if cuda else None,
        device_free_drop_bytes=(free0 - free1) if cuda and free0 is not None
        and free1 is not None else None,
        resident_bytes=None if cuda else delta, kinds=tuple(kinds), decode=decode)


# --- decode check ---------------------------------------------------------------------------

def _decode(request: ValidateRequest, layout: CacheLayout, layers: Sequence[Layer],
            views: dict, torch: Any, device: Any) -> DecodeResult:
    """One query token per request through scaled_dot_product_attention over every
    attention layer's cache; time per step and the bandwidth it achieved."""
    import torch.nn.functional as functional

    from kvplan.core.sizing import batch_bytes

    calls = []
    read: dict[int, int] = {}
    heads_first = layout.axes == "batch-heads"  # [batch, heads, slots, dim] already
    attended = []
    for i, layer in enumerate(layers):
        if isinstance(layer, MLA):
            k = views.get((i, "latent"))
            if k is None:
                continue
            k = k if heads_first else k.unsqueeze(1)  # [batch, 1, slots, dim]
            v = k
        elif isinstance(layer, (RecurrentState, NoCache)):
            continue
        else:
            k, v = views.get((i, "k")), views.get((i, "v"))
            if k is None or v is None:
                continue
            if not heads_first:  # [batch, slots, heads, dim] -> [batch, heads, slots, dim]
                k, v = k.transpose(1, 2), v.transpose(1, 2)
        slots = min(k.shape[2], layer.held_tokens(request.tokens))
        k, v = k[:, :, :slots], v[:, :, :slots]
        q = torch.randn(k.shape[0], k.shape[1], 1, k.shape[3], dtype=k.dtype, device=device)
        calls.append((q, k, v))
        attended.append(layer)
        for t in (k, v):
            read[id(t)] = t.numel() * t.element_size()
    if not calls:
        raise BadInputError("the decode check found no attention layer to read")

    def step() -> None:
        for q, k, v in calls:
            functional.scaled_dot_product_attention(q, k, v)

    step()  # warm-up
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
    start = time.perf_counter_ns()
    for _ in range(request.decode_steps):
        step()
    if cuda:
        torch.cuda.synchronize(device)
    ns = max(1, (time.perf_counter_ns() - start) // request.decode_steps)
    per_step = sum(read.values())
    predicted = batch_bytes(attended, [request.tokens] * request.batch, request.fmt, request.tp)
    gpu_name, floor = None, None
    if cuda:
        gpu_name = torch.cuda.get_device_name(device)
        bandwidth = _catalog_bandwidth(gpu_name)
        if bandwidth:
            floor = predicted * 10**9 // bandwidth
    return DecodeResult(request.decode_steps, ns, per_step, per_step * 10**9 // ns, predicted,
                        gpu_name, floor)


def _catalog_bandwidth(device_name: str) -> int | None:
    """HBM bytes/s from kvplan's GPU catalog (kvplan.sources.gpus), when it knows this device."""
    from kvplan.sources.gpus import find_gpu

    try:
        gpu = find_gpu(device_name)
    except KvplanError:  # a device the catalog does not list (or names ambiguously)
        return None
    return gpu.hbm_bandwidth_bytes_per_s or None


def _check_decode(request: ValidateRequest) -> None:
    if not request.decode_steps:
        return
    if request.decode_steps < 0:
        raise BadInputError(f"--decode-steps must be positive, got {request.decode_steps}")
    def per_request(layout: CacheLayout) -> bool:
        return not layout.paged and layout.axes != "pool"

    if not per_request(request_layout(request)):
        raise BadInputError(
            f"the decode check reads dense per-request caches; --layout {request.layout} "
            "pages them",
            f"use --layout {either(layouts_where(per_request, request))} with --decode-steps")
    if request.fmt.name not in ("fp32", "fp16", "bf16") or request.fmt.residual is not None:
        raise BadInputError(
            f"the decode check runs torch attention, which cannot read KV dtype "
            f"{request.fmt.name} directly", "use --kv-dtype auto, bf16, fp16 or fp32")

