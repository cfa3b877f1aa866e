"""`kvplan validate`: prove the predictions by allocating real caches with torch.

Two independent paths meet here:

- the **prediction** is kvplan's maths (`kvplan.core.sizing`, the layer kinds' byte formulas,
  `KVFormat`), plus a few documented engine rules where a layout stores more than the tokens
  (vLLM's null block and group padding, SGLang's padding page, HF's window - 1);
- the **allocation** builds, per layer, the tensors a layout really creates (their shapes and
  torch dtypes: `[batch, kv_heads, max_len, head_dim]` for HF's static cache, raw int8 block
  pools for vLLM, `[tokens + page, heads, dim]` buffers for SGLang, packed `uint8` values with
  scale and zero-point tensors for quantized formats) and measures their storage with torch.

The allocation's bytes never come from the functions that make the prediction: they are the
storage of tensors shaped as the layout shapes them, so a wrong formula shows up as a
difference (exit 1). (vLLM's grouping decision, which layers share block ids and which
block size a hybrid gets, is shared by both sides; it uses kvplan's page sizes to decide,
but the pages themselves are measured.) torch is imported only inside this module's
functions: it is an optional extra (`pip install 'kvplan[validate]'`).
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan import __version__
from kvplan.core.dtypes import KVFormat, cdiv
from kvplan.core.errors import BadInputError, KvplanError
from kvplan.core.layers import (
    ATTENTION_KINDS,
    MLA,
    ChunkedLocal,
    CrossAttention,
    Layer,
    NoCache,
    RecurrentState,
    SlidingWindow,
)
from kvplan.core.spec import ModelSpec

if TYPE_CHECKING:
    from kvplan.output.render import Report

SCHEMA = "kvplan.validate/1"
SCHEMA_ALL = "kvplan.validate-all/1"
LAYOUTS = ("vllm", "sglang", "hf-static", "hf-dynamic", "contiguous")
DEVICES = ("auto", "cuda", "cpu")
INSTALL_HINT = "pip install 'kvplan[validate]'"
# Refuse to allocate more than this share of the free memory: the rest is for the allocator,
# the decode check's queries and everything else running on the device.
SAFETY_FRACTION = 0.9
# --all: every library model and layout at this probe size, on the CPU.
PROBE_TOKENS = 100  # not a multiple of 16: the last block of every request is partly empty
PROBE_BATCH = 2
PROBE_MAX_LEN = 128  # static layouts preallocate more than the tokens
RANK_TIMEOUT_S = 300


# --- results: frozen dataclasses of ints ----------------------------------------------------

@dataclass(frozen=True)
class KindResult:
    """One row: a layer kind (vLLM adds 'null block' and 'padding')."""

    kind: str
    num_layers: int
    predicted_bytes: int
    measured_bytes: int  # storage bytes of the tensors (vLLM: this kind's pages of the pools)
    diff_bytes: int  # measured - predicted
    allocated_bytes: int | None  # CUDA memory_allocated() change; CPU: resident-memory change
    overhead_bytes: int | None  # allocated - measured: the allocator's rounding


@dataclass(frozen=True)
class DecodeResult:
    steps: int
    ns_per_step: int
    bytes_per_step: int  # K/V bytes the attention calls read per step
    achieved_bytes_per_s: int
    predicted_bytes_per_step: int  # kvplan: the batch's attention-cache bytes
    gpu: str | None
    floor_ns_per_step: int | None  # predicted bytes / the catalog's HBM bandwidth


@dataclass(frozen=True)
class RankResult:
    rank: int
    device: str
    predicted_bytes: int
    measured_bytes: int
    diff_bytes: int
    num_tensors: int
    allocated_bytes: int | None  # CUDA: torch.cuda.memory_allocated() change
    device_free_drop_bytes: int | None  # CUDA: drop of mem_get_info()'s free memory
    resident_bytes: int | None  # CPU: the process's resident-memory change
    kinds: tuple[KindResult, ...]
    decode: DecodeResult | None


@dataclass(frozen=True)
class ValidateRequest:
    spec: ModelSpec
    fmt: KVFormat
    tokens: int
    batch: int
    layout: str = "vllm"
    block_size: int | None = None  # None: the layout's default (vLLM 16, SGLang 1)
    max_len: int | None = None  # static layouts; None: tokens
    tp: int = 1
    device: str = "auto"
    layers: int | None = None  # validate this many of the model's layers, then scale up
    decode_steps: int = 0


@dataclass(frozen=True)
class ValidateResult:
    model: str
    layout: str
    tokens: int
    batch: int
    kv_dtype: str
    tp: int
    block_size: int
    max_len: int
    device: str
    num_layers: int
    layers_validated: int
    predicted_bytes: int  # per rank
    measured_bytes: int  # the minimum over ranks, as engines take it
    diff_bytes: int  # the largest |difference| over ranks, with its sign
    ranks: tuple[RankResult, ...]
    full_predicted_bytes: int | None  # --layers: kvplan's figure for every layer
    scaled_measured_bytes: int | None  # --layers: the measurement scaled up per kind

    @property
    def ok(self) -> bool:
        return all(r.diff_bytes == 0 and all(k.diff_bytes == 0 for k in r.kinds)
                   for r in self.ranks)


@dataclass(frozen=True)
class AllRow:
    model: str
    layout: str
    predicted_bytes: int | None
    measured_bytes: int | None
    diff_bytes: int | None
    status: str  # ok | DIFF | skipped: <why>


@dataclass(frozen=True)
class AllResult:
    tokens: int
    batch: int
    max_len: int
    kv_dtype: str
    rows: tuple[AllRow, ...]
    elapsed_ms: int

    @property
    def ok(self) -> bool:
        return all(r.status != "DIFF" for r in self.rows)


# --- torch, imported only here --------------------------------------------------------------

def require_torch() -> Any:
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Failed to initialize NumPy" without numpy
            import torch
    except ImportError:
        raise BadInputError(
            f"kvplan validate needs torch, which is not installed: {INSTALL_HINT}") from None
    return torch


def _itemsize(torch: Any, dtype: str) -> int:
    return torch.empty(0, dtype=getattr(torch, dtype)).element_size()


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
                 group_shape: Callable[[int, int], Shape]) -> Planes:
    """Rows of `n` elements for `slots` tokens of one layer, recent tokens and KIVI included.

    shape(tokens, last) places token rows; group_shape(groups, last) places KIVI key groups
    (per channel, `group_size` tokens packed along the token axis).
    """
    recent = min(slots, fmt.residual_tokens) if fmt.residual is not None else 0
    older = slots - recent
    planes: Planes = []
    if per_channel and fmt.per_channel_keys:
        groups, unfinished = divmod(older, fmt.group_size)
        recent += unfinished  # a key group is quantized only once it is full
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
                   split: bool) -> Planes:
    """MLA: one latent row per token (no K/V pair); split = HF's latent + k_rot tensors."""
    recent = min(slots, fmt.residual_tokens) if fmt.residual is not None else 0
    planes: Planes = []
    if slots - recent:
        planes += _latent_part(fmt, layer, slots - recent, shape, split, "latent")
    if recent and fmt.residual is not None:
        planes += _latent_part(fmt.residual, layer, recent, shape, split, "latent.recent")
    index = layer.index_head_dim
    if index and slots:  # DSA indexer keys: fp8 values + an fp32 scale per 128, as uint8
        planes.append(("indexer", "uint8", shape(slots, index + index // 128 * 4)))
    return planes


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


def _state_shapes(layer: RecurrentState, tp: int, layout: str = "vllm",
                  model_dtype: str = "bf16") -> list[tuple[str, str, Shape]]:
    """Per-rank recurrent-state tensors, the TP axis split as vLLM's shape calculator does.

    vLLM and the contiguous layout keep the spec's shapes and dtypes; SGLang keeps the SSM
    (temporal) state in float32; Hugging Face keeps the conv state as (conv_dim, kernel), one
    column more than vLLM's (kernel - 1, conv_dim), in the model dtype, and the rest in float32.
    """
    dtypes = {4: "float32", 2: "bfloat16", 1: "uint8"}
    out = []
    for t in layer.tensors:
        dims = list(t.shape)
        if t.tp_axis is not None:
            dims[t.tp_axis] = -(-dims[t.tp_axis] // tp)
        dtype = dtypes[t.dtype_bytes]
        if layout == "sglang" and t.name in _SSM_NAMES:
            dtype = "float32"
        elif layout.startswith("hf-"):
            if t.name == "conv":
                dtype = _PLAIN_DTYPE.get(model_dtype, "bfloat16")
                if dtype not in ("float32", "float16"):
                    dtype = "bfloat16"
                dims = [math.prod(dims[1:]), dims[0] + 1]
            else:
                dtype = "float32"
        out.append((t.name, dtype, tuple(dims)))
    return out


_SSM_NAMES = ("ssm", "recurrent", "temporal")  # SGLang mamba2_state_dtype: float32


def _heads(num_kv_heads: int, tp: int) -> int:
    return max(1, num_kv_heads // tp)  # vLLM/SGLang: replicate, never split a head


def _kv_dims(layer: Layer) -> tuple[int, int, int]:
    """(KV heads, key width, value width) of an attention layer, as its tensors are shaped."""
    assert isinstance(layer, ATTENTION_KINDS)
    v = layer.v_head_dim if layer.v_head_dim is not None else layer.head_dim
    return layer.num_kv_heads, layer.head_dim, v


# --- layouts -> tensors ---------------------------------------------------------------------

@dataclass(frozen=True)
class Plane:
    """One tensor a dense layout allocates."""

    kind: str
    layer: int
    name: str
    dtype: str
    shape: Shape


@dataclass(frozen=True)
class PoolUse:
    layer: int
    kind: str
    planes: tuple[tuple[str, str, Shape], ...]  # per-block tensors of this layer
    blocks: int  # block ids this layer's group holds for the batch


@dataclass(frozen=True)
class Pool:
    """One raw int8 tensor of vLLM's block pool, viewed by every layer in `uses`."""

    num_blocks: int
    page_bytes: int  # from the largest user's per-block tensors
    uses: tuple[PoolUse, ...]
    shared: bool  # shared by several layer groups (hybrid models)


def _static_slots(layer: Layer, max_len: int) -> int:
    """HF StaticCache / contiguous preallocation: slots per request."""
    if isinstance(layer, SlidingWindow):
        return min(layer.window, max_len)  # HF StaticSlidingWindowLayer
    if isinstance(layer, ChunkedLocal):
        return min(layer.chunk, max_len)  # the same layer, the chunk as its window
    if isinstance(layer, CrossAttention):
        return layer.encoder_tokens
    return max_len


def _dynamic_slots(layer: Layer, tokens: int) -> int:
    """HF DynamicCache: grows with the tokens; DynamicSlidingWindowLayer keeps window - 1."""
    if isinstance(layer, SlidingWindow):
        return min(tokens, layer.window - 1)
    if isinstance(layer, ChunkedLocal):
        return min(tokens, layer.chunk - 1)
    if isinstance(layer, CrossAttention):
        return layer.encoder_tokens
    return tokens


def _placer(layout: str, batch: int, heads: int) -> tuple[Callable[[int, int], Shape],
                                                         Callable[[int, int], Shape]]:
    """(shape(tokens, last), group_shape(groups, n)) of one layer's tensors in a layout."""
    if layout == "sglang":  # token rows of the pool
        return (lambda t, last: (t, heads, last)), (lambda g, n: (g, heads, n))
    if layout.startswith("hf-"):  # [batch, kv_heads, seq, head_dim]
        return ((lambda t, last: (batch, heads, t, last)),
                (lambda g, n: (batch, heads, g, n)))
    return (lambda t, last: (batch, t, heads, last)), (lambda g, n: (batch, g, heads, n))


def dense_planes(layout: str, layers: Sequence[Layer], fmt: KVFormat, tokens: int, batch: int,
                 tp: int, max_len: int, page: int = 1, model_dtype: str = "bf16"
                 ) -> list[Plane]:
    """The tensors of the hf-static, hf-dynamic, contiguous and sglang layouts."""
    out: list[Plane] = []
    for i, layer in enumerate(layers):
        if isinstance(layer, NoCache):
            continue
        if isinstance(layer, RecurrentState):
            slots = batch + 1 if layout == "sglang" else batch  # SGLang: max_mamba + 1 slots
            out += [Plane(layer.kind, i, name, dtype, (slots, *shape))
                    for name, dtype, shape in _state_shapes(layer, tp, layout, model_dtype)]
            continue
        if layout == "sglang":  # MHATokenToKVPool: the batch's token rows + a padding page
            held = layer.encoder_tokens if isinstance(layer, CrossAttention) else tokens
            slots = batch * (-(-held // page) * page) + page
        elif layout == "hf-dynamic":
            slots = _dynamic_slots(layer, tokens)
        else:
            slots = _static_slots(layer, max_len)
        if isinstance(layer, MLA):
            shape, _ = _placer(layout, batch, 1)
            if layout == "contiguous":
                planes = _latent_planes(fmt, layer, slots, lambda t, last: (batch, t, last),
                                        split=False)
            else:
                planes = _latent_planes(fmt, layer, slots, shape,
                                        split=layout.startswith("hf-"))
        else:
            heads, k_dim, v_dim = _kv_dims(layer)
            shape, group_shape = _placer(layout, batch, _heads(heads, tp))
            planes = (_slot_planes(fmt, slots, k_dim, "k", True, shape, group_shape)
                      + _slot_planes(fmt, slots, v_dim, "v", False, shape, group_shape))
        out += [Plane(layer.kind, i, name, dtype, sh) for name, dtype, sh in planes]
    return out


# vLLM: groups of layers sharing block ids (engine-kv-sizing.md §1.3, §1.7) -----------------

@dataclass(frozen=True)
class VllmGroup:
    layers: tuple[int, ...]
    block_size: int


@dataclass(frozen=True)
class VllmPlan:
    """How vLLM V1 groups the layers: shared=False is one group whose every layer has its own
    tensor; shared=True is the hybrid case, `slots` tensors each shared by one layer of every
    group (a group with fewer layers leaves padding slots)."""

    groups: tuple[VllmGroup, ...]
    shared: bool
    slots: int


def _kv_page(layer: Layer, fmt: KVFormat, tp: int, block_size: int) -> int:
    """kvplan's bytes of one block of one layer (a state layer: its whole state)."""
    if isinstance(layer, RecurrentState):
        return layer.state_bytes(tp)
    return layer.bytes_for_tokens(block_size, fmt, tp)


def _type_key(layer: Layer) -> tuple[Any, ...]:
    return (layer.kind, getattr(layer, "window", None), getattr(layer, "chunk", None),
            getattr(layer, "encoder_tokens", None))


def vllm_plan(layers: Sequence[Layer], fmt: KVFormat, tp: int, block_size: int) -> VllmPlan:
    """vLLM's layer groups and per-layer block sizes.

    - a hybrid of attention and Mamba/GDN layers raises the attention block size to
      16 * cdiv(mamba_page, 16 * attention_page_per_token) (0.11 HybridAttentionMambaModelConfig)
      and pads the state page up to the attention page;
    - one layer spec, or one type with different pages: one group, a tensor per layer;
    - otherwise pages are unified (an attention page dividing the largest gets its block size
      multiplied, the rest are padded: 0.33 unify_kv_cache_spec_page_size), layers bucketed
      by spec, the group size is the smallest bucket (the largest when it is < 1.5x the
      smallest), and each bucket is split into cdiv(n, size) groups taking layers i::groups.
    """
    cached = [i for i, layer in enumerate(layers) if not isinstance(layer, NoCache)]
    if not cached:
        return VllmPlan((), False, 0)
    states = [i for i in cached if isinstance(layers[i], RecurrentState)]
    attention = [i for i in cached if i not in states]
    bs = block_size
    if states and attention:
        per_token = max(_kv_page(layers[i], fmt, tp, 1) for i in attention)
        mamba = max(_kv_page(layers[i], fmt, tp, 1) for i in states)
        bs = max(bs, 16 * cdiv(mamba, 16 * per_token))
    sizes = {i: bs for i in cached}
    if len({layers[i] for i in cached}) == 1 or len({_type_key(layers[i]) for i in cached}) == 1:
        return VllmPlan((VllmGroup(tuple(cached), bs),), False, len(cached))
    largest = max(_kv_page(layers[i], fmt, tp, bs) for i in cached)
    for i in attention:
        page = _kv_page(layers[i], fmt, tp, bs)
        if page != largest and largest % page == 0:
            sizes[i] = bs * (largest // page)
    buckets: dict[tuple[Layer, int], list[int]] = {}
    for i in cached:
        buckets.setdefault((layers[i], sizes[i]), []).append(i)
    counts = [len(b) for b in buckets.values()]
    size = max(counts) if max(counts) < 1.5 * min(counts) else min(counts)
    groups = []
    for (_, bsize), members in buckets.items():
        n = cdiv(len(members), size)
        groups += [VllmGroup(tuple(members[g::n]), bsize) for g in range(n)]
    return VllmPlan(tuple(groups), True, size)


def _held_blocks(layer: Layer, tokens: int, block_size: int) -> int:
    """Blocks vLLM's managers hold for one request at its peak, by replaying its decode.

    Before computing token m the sliding-window manager frees blocks wholly before
    m - window (remove_skipped_blocks: (computed - window + 1) // block_size); the chunked
    manager frees those before the current chunk's start. A request that reached `tokens`
    passed through every shorter length, so the pool must have held the largest count.
    """
    if isinstance(layer, RecurrentState):
        return 1  # one page holds a request's whole state (vLLM 0.11)
    if isinstance(layer, CrossAttention):
        return -(-layer.encoder_tokens // block_size)
    if isinstance(layer, SlidingWindow):
        last = min(tokens, layer.window + 2 * block_size)  # periodic after this
        return max(-(-m // block_size) - max(0, (m - layer.window) // block_size)
                   for m in range(1, last + 1))
    if isinstance(layer, ChunkedLocal):
        c = layer.chunk
        period = c * block_size // math.gcd(c, block_size)
        last = min(tokens, period + c)
        return max(-(-m // block_size) - ((m - 1) // c * c) // block_size
                   for m in range(1, last + 1))
    return -(-tokens // block_size)


def vllm_pools(layers: Sequence[Layer], fmt: KVFormat, tokens: int, batch: int, tp: int,
               plan: VllmPlan) -> list[Pool]:
    """vLLM's KV-cache tensors: raw int8 [num_blocks * page] buffers, block 0 the null block.

    Each layer views its buffer as its own tensors, for attention a K and a V plane of
    [num_blocks, block_size, kv_heads, head_dim] (packed data plus scales when quantized),
    for MLA one latent plane, for state layers the conv and SSM states of one request.
    """
    if not plan.groups:
        return []
    torch = require_torch()
    uses: dict[int, PoolUse] = {}
    group_blocks = []
    for group in plan.groups:
        held = batch * _held_blocks(layers[group.layers[0]], tokens, group.block_size)
        group_blocks.append(held)
        for i in group.layers:
            uses[i] = PoolUse(i, layers[i].kind, tuple(_block_planes(layers[i], fmt, tp,
                                                                     group.block_size)), held)
    num_blocks = 1 + sum(group_blocks)  # block id 0 is the null block

    def page(use: PoolUse) -> int:
        return sum(math.prod(s) * _itemsize(torch, d) for _, d, s in use.planes)

    if not plan.shared:
        return [Pool(num_blocks, page(uses[i]), (uses[i],), False) for i in plan.groups[0].layers]
    largest = max(page(u) for u in uses.values())
    pools = []
    for slot in range(plan.slots):
        members = tuple(uses[g.layers[slot]] for g in plan.groups if slot < len(g.layers))
        pools.append(Pool(num_blocks, largest, members, True))
    return pools


def _block_planes(layer: Layer, fmt: KVFormat, tp: int, block_size: int) -> Planes:
    if isinstance(layer, RecurrentState):
        return _state_shapes(layer, tp)
    if isinstance(layer, MLA):
        return _latent_planes(fmt, layer, block_size, lambda t, last: (t, last), split=False)
    heads, k_dim, v_dim = _kv_dims(layer)
    h = _heads(heads, tp)
    return (_token_planes(fmt, k_dim, lambda last: (block_size, h, last), "k")
            + _token_planes(fmt, v_dim, lambda last: (block_size, h, last), "v"))


# --- the prediction (kvplan's maths) --------------------------------------------------------

def _no_recent_tokens(fmt: KVFormat, layout: str) -> None:
    if fmt.residual is not None or fmt.per_channel_keys:
        raise BadInputError(
            f"--layout {layout} stores whole tokens in pages; KV dtype {fmt.name} keeps recent "
            "tokens in full precision (Hugging Face QuantizedCache / KIVI)",
            "use --layout hf-dynamic, hf-static or contiguous for this KV dtype")


def predict(layout: str, layers: Sequence[Layer], fmt: KVFormat, tokens: int, batch: int,
            tp: int, block_size: int, max_len: int, model_dtype: str = "bf16"
            ) -> dict[str, int]:
    """kvplan's bytes per row (layer kind, plus vLLM's 'null block' and 'padding')."""
    from kvplan.core.sizing import contiguous_bytes, paged_bytes

    lengths = [tokens] * batch
    rows: dict[str, int] = {}

    def add(kind: str, n: int) -> None:
        rows[kind] = rows.get(kind, 0) + n

    cached = [(i, layer) for i, layer in enumerate(layers) if not isinstance(layer, NoCache)]
    if layout == "contiguous":
        for _, layer in cached:
            add(layer.kind, contiguous_bytes([layer], lengths, fmt, tp, max_len))
    elif layout in ("hf-static", "hf-dynamic"):
        # kvplan's Hugging Face profile (engines/hf.py): static = max_len slots, sliding and
        # chunked layers capped at the window; dynamic keeps window - 1; HF state shapes.
        from kvplan.engines import hf

        for kind in dict.fromkeys(layer.kind for _, layer in cached):
            members = ModelSpec(name=kind, layers=tuple(x for _, x in cached if x.kind == kind),
                                dtype=model_dtype)
            profile = hf.profile(members, cache=layout[3:],
                                 seq_len=max_len if layout == "hf-static" else tokens,
                                 batch=batch, kv_dtype=fmt.name, tp=tp)
            add(kind, profile.cache_bytes)
    elif layout == "sglang":
        # Rule: one token pool for the batch, each request rounded up to whole pages, plus one
        # padding page (SGLang buffers hold N + page_size rows); every attention layer keeps
        # every token (sliding windows are not capped, as for Gemma 2/3; the hybrid-SWA pool
        # of gpt-oss and Llama 4 is not modelled); the state pool has batch + 1 slots, with the
        # SSM state in float32 (kvplan's SGLang profile, engines/sglang.py).
        _no_recent_tokens(fmt, layout)
        for _, layer in cached:
            if isinstance(layer, RecurrentState):
                from kvplan.engines.sglang import mamba_state_bytes

                add(layer.kind, (batch + 1) * mamba_state_bytes(layer, tp, 4))
                continue
            held = layer.encoder_tokens if isinstance(layer, CrossAttention) else tokens
            pool = batch * cdiv(held, block_size) * block_size + block_size
            add(layer.kind, layer.bytes_for_tokens(pool, fmt, tp))
    elif layout == "vllm":
        _no_recent_tokens(fmt, layout)
        plan = vllm_plan(layers, fmt, tp, block_size)
        null = padding = 0
        largest = max((_kv_page(layers[i], fmt, tp, g.block_size)
                       for g in plan.groups for i in g.layers), default=0)
        for group in plan.groups:
            first = layers[group.layers[0]]
            blocks = batch * (1 if isinstance(first, RecurrentState)
                              else first.paged_tokens(tokens, group.block_size)
                              // group.block_size)
            for i in group.layers:
                add(layers[i].kind, paged_bytes([layers[i]], lengths, fmt, tp, group.block_size))
                page = _kv_page(layers[i], fmt, tp, group.block_size)
                if plan.shared:  # a page smaller than the pool's is padded
                    padding += (largest - page) * blocks
                else:
                    null += page  # the null block: one page of every layer's tensor
            if plan.shared:  # the group's empty slots: pages no layer of this group uses
                padding += (plan.slots - len(group.layers)) * largest * blocks
        if plan.shared:
            null = plan.slots * largest
        rows["null block"] = null
        rows["padding"] = padding
    else:
        raise BadInputError(f"--layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    return rows


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


def _check_fits(request: ValidateRequest, predicted: int, device: Any, torch: Any,
                ranks_here: int = 1) -> None:
    """Refuse, saying what fits instead, rather than run the device out of memory."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
    else:
        free = _available_cpu_bytes()
    if free is None:
        return
    budget = int(free * SAFETY_FRACTION) // ranks_here
    if predicted <= budget:
        return
    from kvplan.output.render import human_bytes

    ranks = f" x {ranks_here} ranks" if ranks_here > 1 else ""
    raise BadInputError(
        f"validating {request.spec.name} needs {human_bytes(predicted)}{ranks} but "
        f"{device.type} has {human_bytes(free)} free (kvplan uses at most "
        f"{SAFETY_FRACTION:.0%} of it); nothing was allocated", _what_fits(request, budget))


def _what_fits(request: ValidateRequest, budget: int) -> str:
    def total(req: ValidateRequest) -> int:
        spec = _subset(req.spec, req.layers)
        return sum(predict(req.layout, spec.layers, req.fmt, req.tokens, req.batch, req.tp,
                           _block_size(req), _max_len(req), spec.dtype).values())

    def largest(low: int, high: int, fits: Callable[[int], bool]) -> int:
        """The largest value in [low, high] that fits (sizes grow with it), or 0."""
        best = 0
        while low <= high:
            mid = (low + high) // 2
            if fits(mid):
                best, low = mid, mid + 1
            else:
                high = mid - 1
        return best

    options = []
    batch = largest(1, request.batch - 1,
                    lambda b: total(replace(request, batch=b)) <= budget)
    if batch:
        options.append(f"--batch {batch}")
    layers = largest(1, (request.layers or request.spec.num_layers) - 1,
                     lambda k: total(replace(request, layers=k)) <= budget)
    if layers:
        options.append(f"--layers {layers} (validates a subset and scales up)")
    return ("fits instead: " + " or ".join(options)) if options else (
        "use fewer --tokens, or a smaller --batch or --layers K")


def _block_size(request: ValidateRequest) -> int:
    """--block-size, else the layout's default: SGLang's page of 1, vLLM's block size for
    this model (16; 64 for MLA backends, kvplan's vLLM profile)."""
    if request.block_size is not None:
        return request.block_size
    if request.layout == "sglang":
        return 1
    from kvplan.engines.vllm import default_block_size

    return default_block_size(request.spec)


def _max_len(request: ValidateRequest) -> int:
    return request.max_len or request.tokens


def _subset(spec: ModelSpec, count: int | None) -> ModelSpec:
    """`count` of the model's layers, evenly spread so that every kind keeps its share."""
    total = spec.num_layers
    if not count or count >= total:
        return spec
    picked = sorted({i * total // count for i in range(count)})
    return replace(spec, layers=tuple(spec.layers[i] for i in picked))


def run_rank(request: ValidateRequest, rank: int = 0, check_memory: bool = True) -> RankResult:
    """Allocate this rank's cache, measure it, run the decode check, free everything."""
    torch = require_torch()
    device = _resolve_device(torch, request.device, rank)
    spec = _subset(request.spec, request.layers)
    layers, fmt, dtype = spec.layers, request.fmt, spec.dtype
    bs, max_len = _block_size(request), _max_len(request)
    rows = predict(request.layout, layers, fmt, request.tokens, request.batch, request.tp, bs,
                   max_len, dtype)
    predicted = sum(rows.values())
    if check_memory:
        _check_fits(request, predicted, device, torch)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    meter = _Meter(torch, device)
    held: list[Any] = []
    views: dict[tuple[int, str], Any] = {}
    try:
        with _freed(held, views, torch, device):
            alloc0, free0 = meter.read()
            if request.layout == "vllm":
                pools = vllm_pools(layers, fmt, request.tokens, request.batch, request.tp,
                                   vllm_plan(layers, fmt, request.tp, bs))
                measured, allocated = _allocate_pools(pools, held, torch, device, meter)
            else:
                planes = dense_planes(request.layout, layers, fmt, request.tokens,
                                      request.batch, request.tp, max_len, bs, dtype)
                measured, allocated = _allocate_planes(planes, held, views, torch, device,
                                                       meter)
            alloc1, free1 = meter.read()
            decode = None
            if request.decode_steps:
                decode = _decode(request, layers, views, torch, device)
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


def _allocate_planes(planes: Sequence[Plane], tensors: list[Any], views: dict, torch: Any,
                     device: Any, meter: _Meter) -> tuple[dict[str, int], dict[str, int | None]]:
    measured: dict[str, int] = {}
    allocated: dict[str, int | None] = {}
    for kind in dict.fromkeys(p.kind for p in planes):
        before, _ = meter.read()
        mine = []
        for p in planes:
            if p.kind == kind:
                t = torch.zeros(p.shape, dtype=getattr(torch, p.dtype), device=device)
                mine.append(t)
                views[(p.layer, p.name)] = t
        tensors += mine
        after, _ = meter.read()
        measured[kind] = _storage_bytes(mine)
        allocated[kind] = after - before if after is not None and before is not None else None
    return measured, allocated


def _allocate_pools(pools: Sequence[Pool], tensors: list[Any], torch: Any, device: Any,
                    meter: _Meter) -> tuple[dict[str, int], dict[str, int | None]]:
    """vLLM: allocate each raw pool, view it per layer, attribute its pages by block owner."""
    measured: dict[str, int] = {}
    allocated: dict[str, int | None] = {}

    def add(table: dict, kind: str, n: int | None) -> None:
        table[kind] = None if n is None or table.get(kind, 0) is None else table.get(kind, 0) + n

    for pool in pools:
        before, _ = meter.read()
        raw = torch.zeros(pool.num_blocks * pool.page_bytes, dtype=torch.int8, device=device)
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
                raise KvplanError(f"vLLM layer {use.layer} needs {layer_page} B per block, "
                                  f"its pool page has {per_block}")
            add(measured, use.kind, use.blocks * layer_page)
            used += use.blocks * layer_page
        measured["null block"] = measured.get("null block", 0) + per_block
        measured["padding"] = measured.get("padding", 0) + size - used - per_block
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

def _decode(request: ValidateRequest, layers: Sequence[Layer], views: dict, torch: Any,
            device: Any) -> DecodeResult:
    """One query token per request through scaled_dot_product_attention over every
    attention layer's cache; time per step and the bandwidth it achieved."""
    import torch.nn.functional as functional

    from kvplan.core.sizing import batch_bytes

    calls = []
    read: dict[int, int] = {}
    hf = request.layout.startswith("hf-")
    attended = []
    for i, layer in enumerate(layers):
        if isinstance(layer, MLA):
            k = views.get((i, "latent"))
            if k is None:
                continue
            k = k if hf else k.unsqueeze(1)  # [batch, 1, slots, dim]
            v = k
        elif isinstance(layer, (RecurrentState, NoCache)):
            continue
        else:
            k, v = views.get((i, "k")), views.get((i, "v"))
            if k is None or v is None:
                continue
            if not hf:  # contiguous [batch, slots, heads, dim] -> [batch, heads, slots, dim]
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
    if request.layout not in ("hf-static", "hf-dynamic", "contiguous"):
        raise BadInputError(
            f"the decode check reads dense per-request caches; --layout {request.layout} "
            "pages them", "use --layout hf-static, hf-dynamic or contiguous with --decode-steps")
    if request.fmt.name not in ("fp32", "fp16", "bf16") or request.fmt.residual is not None:
        raise BadInputError(
            f"the decode check runs torch attention, which cannot read KV dtype "
            f"{request.fmt.name} directly", "use --kv-dtype auto, bf16, fp16 or fp32")


# --- the command's entry points -------------------------------------------------------------

def validate(request: ValidateRequest) -> ValidateResult:
    """Predict, allocate and measure on 1 rank here, or on --tp ranks with torch.distributed."""
    from kvplan.core.sizing import check_parallelism

    if request.tokens <= 0 or request.batch <= 0:
        raise BadInputError("--tokens and --batch must be positive")
    if request.layout not in LAYOUTS:
        raise BadInputError(f"--layout must be one of {', '.join(LAYOUTS)}, "
                            f"got {request.layout!r}")
    if _block_size(request) <= 0:
        raise BadInputError(f"--block-size must be positive, got {request.block_size}")
    if request.max_len is not None and request.max_len < request.tokens:
        raise BadInputError(f"--max-len {request.max_len:,} is shorter than --tokens "
                            f"{request.tokens:,}")
    if request.layers is not None and request.layers <= 0:
        raise BadInputError(f"--layers must be positive, got {request.layers}")
    check_parallelism(request.spec, request.tp, 1)
    _check_decode(request)
    require_torch()
    ranks = (run_rank(request),) if request.tp == 1 else tuple(launch_ranks(request))
    return _result(request, ranks)


def _result(request: ValidateRequest, ranks: Sequence[RankResult]) -> ValidateResult:
    spec = _subset(request.spec, request.layers)
    full = scaled = None
    if spec.num_layers < request.spec.num_layers:
        full_rows = predict(request.layout, request.spec.layers, request.fmt, request.tokens,
                            request.batch, request.tp, _block_size(request), _max_len(request),
                            request.spec.dtype)
        full = sum(full_rows.values())
        whole, part = request.spec.kind_counts(), spec.kind_counts()
        scaled = 0
        for row in ranks[0].kinds:
            count = part.get(row.kind)
            factor = (whole[row.kind], count) if count else (request.spec.num_layers,
                                                             spec.num_layers)
            scaled += row.measured_bytes * factor[0] // factor[1]
    worst = max(ranks, key=lambda r: abs(r.diff_bytes))
    return ValidateResult(
        model=request.spec.name, layout=request.layout, tokens=request.tokens,
        batch=request.batch, kv_dtype=request.fmt.name, tp=request.tp,
        block_size=_block_size(request), max_len=_max_len(request), device=ranks[0].device,
        num_layers=request.spec.num_layers, layers_validated=spec.num_layers,
        predicted_bytes=ranks[0].predicted_bytes,
        measured_bytes=min(r.measured_bytes for r in ranks), diff_bytes=worst.diff_bytes,
        ranks=tuple(ranks), full_predicted_bytes=full, scaled_measured_bytes=scaled)


# --- several ranks: torch.distributed (NCCL on GPUs, Gloo on CPU) ---------------------------

def launch_ranks(request: ValidateRequest, timeout_s: int = RANK_TIMEOUT_S) -> list[RankResult]:
    """Start --tp rank processes; each allocates and measures its shard, rank 0 gathers all.

    Ranks are plain subprocesses (`python -m kvplan.validate`) meeting at a file:// store;
    they are killed, and the store removed, on every way out (Ctrl-C included). When one
    fails the others are stopped at once rather than left waiting in the collective.
    """
    world = request.tp
    torch = require_torch()
    cuda = request.device == "cuda" or request.device == "auto" and torch.cuda.is_available()
    if cuda and torch.cuda.device_count() < world:
        raise BadInputError(f"--tp {world} needs {world} GPUs; torch sees "
                            f"{torch.cuda.device_count()}", "use --device cpu (Gloo ranks)")
    if not cuda:  # the ranks share this machine's memory: check their sum before starting
        spec = _subset(request.spec, request.layers)
        per_rank = sum(predict(request.layout, spec.layers, request.fmt, request.tokens,
                               request.batch, request.tp, _block_size(request),
                               _max_len(request), spec.dtype).values())
        _check_fits(request, per_rank, torch.device("cpu"), torch, ranks_here=world)
    package_root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"]
                                        if env.get("PYTHONPATH") else "")
    with tempfile.TemporaryDirectory(prefix="kvplan-validate-") as tmp:
        job, out = Path(tmp) / "request.pkl", Path(tmp) / "result.pkl"
        job.write_bytes(pickle.dumps(request))
        procs: list[subprocess.Popen[bytes]] = []
        logs = [Path(tmp) / f"rank{r}.log" for r in range(world)]
        try:
            for rank in range(world):
                with open(logs[rank], "wb") as log:
                    procs.append(subprocess.Popen(
                        [sys.executable, "-m", "kvplan.validate", str(job), str(rank),
                         str(world), str(Path(tmp) / "store"), str(out)],
                        env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log))
            deadline = time.monotonic() + timeout_s
            while any(proc.poll() is None for proc in procs):
                failed = [r for r, proc in enumerate(procs) if proc.poll()]
                if failed or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            failed = [r for r, proc in enumerate(procs) if proc.poll()]
            if out.exists():
                status, payload = pickle.loads(out.read_bytes())
                if status == "error":
                    raise BadInputError(payload[0], payload[1])
                return list(payload)
            if failed:
                tail = logs[failed[0]].read_text(errors="replace").strip().splitlines()
                raise KvplanError(f"validate rank {failed[0]} failed: "
                                  + (tail[-1] if tail else "no output"))
            raise BadInputError(f"the {world} validate ranks did not finish within "
                                f"{timeout_s} s; they were stopped")
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()


def _rank_main(argv: Sequence[str]) -> int:
    """One rank: init the process group, allocate and measure, gather to rank 0."""
    from datetime import timedelta

    job, rank_s, world_s, store, out = argv
    rank, world = int(rank_s), int(world_s)
    request: ValidateRequest = pickle.loads(Path(job).read_bytes())
    torch = require_torch()
    import torch.distributed as dist

    device = _resolve_device(torch, request.device, rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                            init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=RANK_TIMEOUT_S // 2))
    try:
        try:
            outcome: Any = run_rank(request, rank, check_memory=device.type == "cuda")
        except KvplanError as exc:
            outcome = ("error", (f"rank {rank}: {exc.message}", exc.hint))
        except Exception as exc:  # reach the collective anyway, so no rank waits for us
            outcome = ("error", (f"rank {rank}: {type(exc).__name__}: {exc}", None))
        gathered = _all_gather_objects(outcome, world, device, torch, dist)
        if rank == 0:
            failed = [g for g in gathered if isinstance(g, tuple)]
            Path(out).write_bytes(pickle.dumps(failed[0] if failed else ("ok", gathered)))
    finally:
        dist.destroy_process_group()
    return 0


def _all_gather_objects(obj: Any, world: int, device: Any, torch: Any, dist: Any) -> list[Any]:
    """all_gather of pickled objects as uint8 tensors (gather_object needs numpy)."""
    data = pickle.dumps(obj)
    size = torch.tensor([len(data)], dtype=torch.int64, device=device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    longest = max(int(x.item()) for x in sizes)
    buf = torch.zeros(longest, dtype=torch.uint8, device=device)
    buf[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device)
    bufs = [torch.zeros_like(buf) for _ in range(world)]
    dist.all_gather(bufs, buf)
    return [pickle.loads(bytes(b[:int(n.item())].cpu().tolist()))
            for b, n in zip(bufs, sizes, strict=True)]


# --- every library model --------------------------------------------------------------------

def validate_all(kv_dtype: str = "auto", tokens: int = PROBE_TOKENS, batch: int = PROBE_BATCH,
                 max_len: int = PROBE_MAX_LEN,
                 specs: Sequence[ModelSpec] | None = None) -> AllResult:
    """Every library model x every layout at a small probe size, on the CPU."""
    from kvplan.core.dtypes import parse_format
    from kvplan.sources.library import load_library

    require_torch()
    start = time.perf_counter_ns()
    rows = []
    for spec in (specs if specs is not None else load_library()):
        for layout in LAYOUTS:
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


# --- reports --------------------------------------------------------------------------------

def to_report(result: ValidateResult) -> Report:
    from kvplan.output.render import Column, Report, Table

    r = result
    rank0 = r.ranks[0]
    cuda_allocated = rank0.allocated_bytes  # None on the CPU
    cuda = cuda_allocated is not None
    alloc_header = "allocated (CUDA)" if cuda else "resident change"
    kinds = Table(
        title=(f"{r.model}: {r.layout} layout, {r.tokens:,} tokens x batch {r.batch}, "
               f"KV {r.kv_dtype}, on {rank0.device}"
               + (f", {r.layers_validated} of {r.num_layers} layers" if r.full_predicted_bytes
                  is not None else "")),
        columns=(Column("kind", "layer kind"), Column("num_layers", "layers", "int"),
                 Column("predicted_bytes", "predicted (B)", "exact"),
                 Column("measured_bytes", "measured (B)", "exact"),
                 Column("diff_bytes", "diff (B)", "exact"),
                 Column("allocated_bytes", alloc_header, "exact"),
                 Column("overhead_bytes", "allocator overhead", "exact")),
        rows=tuple(asdict(k) for k in rank0.kinds) + ({
            "kind": "total", "num_layers": r.layers_validated,
            "predicted_bytes": rank0.predicted_bytes, "measured_bytes": rank0.measured_bytes,
            "diff_bytes": rank0.diff_bytes,
            "allocated_bytes": cuda_allocated if cuda else rank0.resident_bytes,
            "overhead_bytes": (cuda_allocated - rank0.measured_bytes
                               if cuda_allocated is not None else None)},),
    )
    tables = [kinds]
    rank_rows = [asdict(x) | {"rank": str(x.rank)} for x in r.ranks]
    rank_columns = (Column("rank", "rank"), Column("device", "device"),
                    Column("predicted_bytes", "predicted (B)", "exact"),
                    Column("measured_bytes", "measured (B)", "exact"),
                    Column("diff_bytes", "diff (B)", "exact"),
                    Column("allocated_bytes", "allocated (CUDA)", "exact"),
                    Column("device_free_drop_bytes", "device free drop", "exact"),
                    Column("resident_bytes", "resident change", "exact"))
    if len(r.ranks) > 1:
        rank_rows.append({"rank": "min", "device": "", "predicted_bytes": min(
            x.predicted_bytes for x in r.ranks), "measured_bytes": r.measured_bytes,
            "diff_bytes": r.diff_bytes})
        tables.append(Table(f"{len(r.ranks)} ranks (TP {r.tp}), each its own shard",
                            rank_columns, tuple(rank_rows)))
    decode = rank0.decode
    if decode:
        tables.append(Table(
            f"Decode check: {decode.steps} steps, one query token per request",
            (Column("quantity", "quantity"), Column("value", "value", "exact")),
            tuple({"quantity": q, "value": v} for q, v in (
                ("time per step (ns)", decode.ns_per_step),
                ("K/V bytes read per step", decode.bytes_per_step),
                ("achieved bytes per second", decode.achieved_bytes_per_s),
                ("kvplan's bytes per step", decode.predicted_bytes_per_step),
                (f"predicted floor (ns) on {decode.gpu or 'this device'}",
                 decode.floor_ns_per_step),
            ))))
    status = "OK: measured == predicted" if r.ok else "DIFF: measured != predicted"
    notes = [
        f"{status} ({r.measured_bytes:,} vs {r.predicted_bytes:,} bytes per rank).",
        "Predicted: kvplan's maths; measured: the storage bytes of the tensors the layout "
        "allocates (untyped_storage().nbytes()), built from its shapes, not from kvplan.",
        _layout_note(r),
    ]
    if r.full_predicted_bytes is not None:
        notes.append(f"Scaled up: {r.layers_validated} of {r.num_layers} layers validated; "
                     f"per kind, the measurement scales to {r.scaled_measured_bytes:,} bytes "
                     f"for the whole model (kvplan predicts {r.full_predicted_bytes:,}).")
    if cuda:
        notes.append("Allocated: change in torch.cuda.memory_allocated(); device free drop: "
                     "change in torch.cuda.mem_get_info() (the caching allocator's segments).")
    else:
        notes.append("Resident change: the process's RSS change (page-granular, noisy for "
                     "small caches); only the storage bytes are compared.")
    payload = {
        "schema": SCHEMA, "kvplan_version": __version__,
        "inputs": {"model": r.model, "layout": r.layout, "tokens": r.tokens, "batch": r.batch,
                   "kv_dtype": r.kv_dtype, "tp": r.tp, "block_size": r.block_size,
                   "max_len": r.max_len, "device": r.device, "layers": r.layers_validated},
        "ok": r.ok, "predicted_bytes": r.predicted_bytes, "measured_bytes": r.measured_bytes,
        "diff_bytes": r.diff_bytes, "num_layers": r.num_layers,
        "layers_validated": r.layers_validated,
        "full_predicted_bytes": r.full_predicted_bytes,
        "scaled_measured_bytes": r.scaled_measured_bytes,
        "kinds": [asdict(k) for k in rank0.kinds],
        "ranks": [asdict(x) for x in r.ranks],
    }
    return Report(tables, payload, kinds, notes)


def _layout_note(r: ValidateResult) -> str:
    return {
        "vllm": f"vLLM: raw int8 block pools per layer group, block {r.block_size} (raised for "
                "attention + Mamba hybrids until a page holds a state), block 0 the null "
                "block; K and V planes per attention layer, one latent plane for MLA; each "
                "request holds the blocks it peaks at growing one token per step.",
        "sglang": f"SGLang: one token pool, {r.batch} x {r.tokens:,} tokens rounded to pages of "
                  f"{r.block_size} plus one padding page; state pool batch + 1 slots.",
        "hf-static": f"HF StaticCache: [batch, kv_heads, {r.max_len:,}, head_dim] per K and V, "
                     "sliding and chunked layers capped at their window.",
        "hf-dynamic": "HF DynamicCache: [batch, kv_heads, tokens, head_dim]; sliding layers "
                      "keep window - 1 tokens.",
        "contiguous": f"Contiguous: [batch, {r.max_len:,}, kv_heads, head_dim] per K and V.",
    }[r.layout]


def all_report(result: AllResult) -> Report:
    from kvplan.output.render import Column, Report, Table

    columns = (Column("model", "model"), Column("layout", "layout"),
               Column("predicted_bytes", "predicted (B)", "exact"),
               Column("measured_bytes", "measured (B)", "exact"),
               Column("diff_bytes", "diff (B)", "exact"), Column("status", "status"))
    rows = tuple(asdict(r) for r in result.rows)
    bad = sum(r.status == "DIFF" for r in result.rows)
    table = Table(f"validate --all: {len({r.model for r in result.rows})} models, "
                  f"{result.tokens} tokens x batch {result.batch} (static layouts "
                  f"{result.max_len}), KV {result.kv_dtype}, CPU", columns, rows)
    payload = {"schema": SCHEMA_ALL, "kvplan_version": __version__, "ok": result.ok,
               "inputs": {"tokens": result.tokens, "batch": result.batch,
                          "max_len": result.max_len, "kv_dtype": result.kv_dtype},
               "elapsed_ms": result.elapsed_ms, "rows": [asdict(r) for r in result.rows]}
    notes = [f"{'OK' if not bad else f'{bad} DIFF'}: {len(rows)} validations in "
             f"{result.elapsed_ms:,} ms."]
    return Report([table], payload, table, notes)

