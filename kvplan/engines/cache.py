"""How an engine lays out its KV cache for a batch, in neutral terms (no engine names).

An engine that `kvplan validate` can allocate returns a `CacheLayout` from its
`cache_layout(...)` method: which cache layers it keeps, how each is stored, how many token
rows or blocks the batch holds, its padding (SGLang's padding page and `max_mamba + 1` state
slots, vLLM's null block) and its recurrent-state tensors. `kvplan.validate` turns it into
torch tensors and compares their storage with kvplan's byte formulas, never asking which
engine it is looking at. Only ints, tuples and layer objects; no torch. A layout is **paged**
(`groups` of block pools) or **dense** (`layers`, placed by `axes`); both shapes in detail:
docs/architecture.md, "Notes on single modules".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kvplan.core.dtypes import KVFormat, cdiv
from kvplan.core.layers import ATTENTION_KINDS, MLA, Layer, NoCache, RecurrentState
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec

AXES = ("pool", "batch-heads", "batch-tokens")
# torch dtype names for the state tensors' element sizes (the spec's `dtype_bytes`)
STATE_DTYPES = {4: "float32", 2: "bfloat16", 1: "uint8"}


@record
class StateBuffer:
    """One recurrent-state tensor of one slot, on one rank: its name, torch dtype, shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]


@record
class CacheLayer:
    """One cache layer as the engine stores it.

    `layer` is the layer as stored (a chunked layer in a full group keeps every token);
    `kind` the model's own layer kind (the report's row). Dense layouts: `slots` token rows
    per tensor row (per request, or the whole pool), or, for a state layer, state slots.
    State layers: `state` the tensors of one slot and `state_bytes` their bytes by the
    engine's own formula (the prediction; the tensors are what is allocated)."""

    index: int  # the model layer
    name: str  # the engine's name for it: "12", or "12.indexer"
    layer: Layer
    kind: str
    indexer: bool = False  # an MLA layer's indexer-key cache, kept as a layer of its own
    slots: int = 0
    state: tuple[StateBuffer, ...] = ()
    state_bytes: int = 0


@record
class CacheGroup:
    """Cache layers that share one block table (a vLLM KV-cache group)."""

    layers: tuple[CacheLayer, ...]
    block_tokens: int
    blocks_per_request: int  # blocks one request holds at its peak (a state layer: 1)


@record
class CacheLayout:
    """An engine's cache for `batch` requests of `tokens` tokens on one rank."""

    paged: bool
    block_tokens: int | None  # the block / page size it reports (None: it has none)
    batch: int
    axes: str = "batch-tokens"  # dense layouts: where the token rows go (AXES)
    layers: tuple[CacheLayer, ...] = ()  # dense layouts
    groups: tuple[CacheGroup, ...] = ()  # paged layouts
    shared_tensors: int = 0  # paged: 0 = a tensor per cache layer, else tensors shared by groups
    reserved_blocks: int = 0  # paged: blocks of every tensor no request uses (a null block)
    split_latent: bool = False  # MLA: latent and RoPE parts in two tensors (else one row)
    whole_tokens: bool = False  # pages whole tokens: no full-precision recent tokens (KIVI)
    # dense: token rows per request kept in the format's full-precision residual (None: the
    # format's own window, the most recent min(slots, residual_tokens))
    recent_tokens: int | None = None
    # dense, group-wise residual formats: each layer's quantized K, V (or MLA latent, RoPE
    # key) tensor is grouped whole, across batch, heads and tokens (`whole_tensor_shapes`),
    # not row by row
    whole_tensor_groups: bool = False
    # what the report says about it; {batch}, {tokens}, {block_size}, {max_len} are filled in
    note: str = ""


def recent_rows(fmt: KVFormat, slots: int, recent: int | None = None) -> int:
    """How many of `slots` token rows a residual format keeps in full precision: `recent`
    when the layout says (capped by `slots`), else the format's window min(slots, R)."""
    if fmt.residual is None:
        return 0
    return min(slots, fmt.residual_tokens if recent is None else recent)


def dense_bytes(layer: Layer, slots: int, fmt: KVFormat, tp: int = 1,
                recent: int | None = None) -> int:
    """Bytes of `slots` token rows of one attention/MLA layer for one request, `recent` of
    them in the format's full-precision residual (None: the format's own window)."""
    if recent is None or fmt.residual is None or fmt.per_channel_keys:
        return layer.bytes_for_tokens(slots, fmt, tp)
    full = recent_rows(fmt, slots, recent)
    quantized = replace(fmt, residual=None, residual_tokens=0)
    return (layer.bytes_for_tokens(slots - full, quantized, tp)
            + layer.bytes_for_tokens(full, fmt.residual, tp))


def groups_whole_tensors(fmt: KVFormat, whole_tensor_groups: bool) -> bool:
    """Whether a layout that groups whole tensors (`CacheLayout.whole_tensor_groups`) does
    so for `fmt`: a group-wise format with a residual window, keys grouped per token."""
    return (whole_tensor_groups and bool(fmt.group_size) and fmt.residual is not None
            and not fmt.per_channel_keys)


def tensor_widths(layer: Layer, tp: int = 1) -> tuple[tuple[str, int, int], ...]:
    """(name, rows per token, width) of each cache tensor of an attention or MLA layer when
    the latent and its RoPE key are two tensors: K (heads, head_dim) and V (heads,
    value width); MLA's latent (1, kv_lora_rank) and RoPE key (1, qk_rope_head_dim)."""
    if isinstance(layer, MLA):
        return (("latent", 1, layer.kv_lora_rank), ("latent.rope", 1, layer.qk_rope_head_dim))
    if isinstance(layer, ATTENTION_KINDS):
        heads = layer.heads_per_rank(tp)
        return (("k", heads, layer.head_dim), ("v", heads, layer.value_dim))
    raise ValueError(f"{layer.kind} layers have no K/V tensors")


def whole_tensor_shapes(fmt: KVFormat, elements: int) -> tuple[tuple[int, int], int]:
    """((rows, group size) of the packed data, groups) of `elements` values quantized as one
    tensor, as optimum-quanto 0.2.7 does for transformers' QuantizedCache (the backend
    `generate` picks, transformers 5.24 generation/utils.py): tensor/grouped.py `group`
    (axis 0) reshapes the tensor to (elements / G, G), groups of G consecutive values across
    head and token boundaries; tensor/packed.py `pack_weights` packs 8 // bits groups into
    one uint8 row of G values, rounding the number of rows up. One scale and one shift per
    group come on top (`whole_tensor_bytes`). quanto refuses a tensor whose elements per
    batch row are not a multiple of G; kvplan counts the last group whole then."""
    group = fmt.group_size
    groups = cdiv(elements, group)
    if 8 % fmt.bits:  # not a packable width (quanto packs 2 and 4 bits): bytes, unpadded
        return (cdiv(groups * group * fmt.bits, 8), 1), groups
    return (cdiv(groups, 8 // fmt.bits), group), groups


def whole_tensor_bytes(fmt: KVFormat, elements: int) -> int:
    """Bytes of `elements` values quantized as one tensor (`whole_tensor_shapes`): the packed
    data plus a scale (and a shift, unless symmetric) per group in the format's scale
    bytes."""
    (rows, width), groups = whole_tensor_shapes(fmt, elements)
    meta = fmt.scale_bytes * (2 if fmt.zero_point else 1)
    return rows * width + groups * meta


def dense_batch_bytes(layer: Layer, slots: int, fmt: KVFormat, batch: int, tp: int = 1,
                      recent: int | None = None, whole_tensor_groups: bool = False) -> int:
    """Bytes of one attention/MLA layer's dense cache for `batch` requests of `slots` token
    rows (`recent` of them in the residual, as `dense_bytes`): row by row, or, where the
    layout groups whole tensors (`groups_whole_tensors`), each tensor of the whole batch as
    `whole_tensor_bytes` and its residual rows in full precision."""
    if not groups_whole_tensors(fmt, whole_tensor_groups):
        return batch * dense_bytes(layer, slots, fmt, tp, recent)
    assert fmt.residual is not None
    full = recent_rows(fmt, slots, recent)
    total = 0
    for _, rows, width in tensor_widths(layer, tp):
        if slots - full:
            total += whole_tensor_bytes(fmt, batch * rows * (slots - full) * width)
        total += batch * rows * full * fmt.residual.row_bytes(width)
    if isinstance(layer, MLA):  # the indexer keys keep their own format
        total += batch * slots * layer.index_token_bytes()
    return total


def spec_state(layer: RecurrentState, tp: int) -> tuple[StateBuffer, ...]:
    """The state tensors as the spec gives them (vLLM's shape calculator): each tensor's TP
    axis split across ranks, its element size as a torch dtype."""
    out = []
    for t in layer.tensors:
        dims = list(t.shape)
        if t.tp_axis is not None:
            dims[t.tp_axis] = -(-dims[t.tp_axis] // tp)
        out.append(StateBuffer(t.name, STATE_DTYPES[t.dtype_bytes], tuple(dims)))
    return tuple(out)


def dense_layers(spec: ModelSpec, slots: Callable[[Layer], int], state_slots: int,
                 state: Callable[[RecurrentState], tuple[tuple[StateBuffer, ...], int]]
                 ) -> tuple[CacheLayer, ...]:
    """A dense layout's cache layers, one per layer of `spec` that keeps a cache, in model
    order: `slots(layer)` token rows for an attention or MLA layer; `state_slots` slots of the
    tensors and bytes `state(layer)` gives for a recurrent layer. The layout decides the
    numbers; which layers become which cache layer is decided here once."""
    out = []
    for i, layer in enumerate(spec.layers):
        if isinstance(layer, NoCache):
            continue
        if isinstance(layer, RecurrentState):
            buffers, nbytes = state(layer)
            out.append(CacheLayer(i, str(i), layer, layer.kind, slots=state_slots,
                                  state=buffers, state_bytes=nbytes))
        else:
            out.append(CacheLayer(i, str(i), layer, layer.kind, slots=slots(layer)))
    return tuple(out)
