"""A weight load replayed through PyTorch's caching allocator, as an engine measures it.

vLLM logs the weights it loaded as the change of `torch.cuda.memory_allocated` across
`load_model`; SGLang as the drop in free device memory after `empty_cache`. Both count the
caching allocator's blocks or segments (kvplan.core.allocator), not the tensors' own bytes,
and both create their parameters alike (QKVParallelLinear, MergedColumnParallelLinear,
get_rope's cached cos/sin tables), so one replay serves both: the checkpoint's tensors fused
as vLLM's packed_modules_mapping fuses them, in the model's creation order, with the rotary
caches (vLLM `rotary_embedding.py::get_rope`) and the attention layers' scalars. Each
engine reads it its own way (kvplan.engines.vllm.memory, kvplan.engines.sglang.memory).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kvplan.core.layers import ATTENTION_KINDS, MLA, SlidingWindow
from kvplan.core.quant import NONE, Quantization
from kvplan.core.record import record
from kvplan.core.sizing import pp_stages
from kvplan.core.spec import ModelSpec
from kvplan.core.weights import ExpertLoad

if TYPE_CHECKING:
    from kvplan.core.allocator import CachingAllocator


@record
class RopeCache:
    """One rotary cos/sin cache vLLM builds at load: `positions` x `rotary_dim` in the model
    dtype, created by the first layer (`first_layer`) that asks for its configuration."""

    positions: int
    rotary_dim: int
    first_layer: int
    linear: bool = False  # LinearScalingRotaryEmbedding: one more fp32 copy while built


def rope_caches(spec: ModelSpec, layers: range | None = None,
                mrope_factor: int = 1) -> tuple[RopeCache, ...]:
    """The caches `get_rope` builds (rotary_embedding `get_rope`: one per distinct (head
    size, rotary dim, max position, base, scaling) key, kept in `_ROPE_DICT`), with the
    length each scaling class gives its `cos_sin_cache` (max_position_embeddings; x factor for
    linear / dynamic; original_max_position_embeddings x factor for yarn; short + long for
    longrope). Sliding layers with a rope of their own (Gemma 3) get a second, unscaled cache.
    The rotary dim is the head size x partial_rotary_factor (`get_rope`: `int(head_size *
    partial_rotary_factor)`). `layers`: those of one pipeline stage. `mrope_factor`: how many
    times longer the engine builds a multimodal rope's cache (`Rope.mrope`; vLLM's
    MRotaryEmbedding: 4, its Rules' `mrope_cache_factor`; SGLang's: 1). The lengths per
    class: docs/engine-kv-sizing.md §7.5.
    """
    if not spec.max_context_tokens:
        return ()
    max_pos = spec.max_context_tokens
    rope = spec.rope
    found: dict[tuple[int, bool], RopeCache] = {}
    for i in layers if layers is not None else range(spec.num_layers):
        layer = spec.layers[i]
        if isinstance(layer, MLA):
            dim = layer.qk_rope_head_dim
        elif isinstance(layer, ATTENTION_KINDS):
            dim = layer.head_dim
        else:
            continue
        local = rope is not None and rope.local and isinstance(layer, SlidingWindow)
        if rope is not None and not local and not isinstance(layer, MLA) \
                and rope.scaling != "proportional":
            # a local rope's own parameters are not read; Gemma 4's "proportional" rope is
            # kept at the full head (as before partial factors were read: its A100 log fits)
            dim = int(dim * rope.partial)
        if (dim, local) in found:
            continue
        positions, linear = max_pos, False
        if rope is not None and not local:
            factor, original = rope.factor, rope.original_max_positions or max_pos
            # a multimodal rope takes `mrope_factor` x the positions its get_rope branch
            # passes (max_position for "default", original_max_position for "yarn")
            grow = mrope_factor if rope.mrope else 1
            if rope.mrope and rope.scaling in ("default", "yarn"):
                positions = max_pos * grow
            if rope.scaling in ("linear", "dynamic"):
                positions, linear = math.ceil(max_pos * factor), rope.scaling == "linear"
            elif rope.scaling in ("yarn", "deepseek_yarn"):
                positions = math.ceil(original * grow * factor)
            elif rope.scaling == "longrope":
                positions = original + max_pos
        found[(dim, local)] = RopeCache(positions, dim, i, linear)
    return tuple(found.values())


def rotary_cache_bytes(spec: ModelSpec, mrope_factor: int = 1) -> int:
    """The bytes of every rotary cache (`rope_caches`), each `.to(dtype)` in the model dtype
    (`RotaryEmbedding.__init__`): 32 MiB for Llama 3.1's 131,072 positions x 128."""
    dtype_bytes = 4 if spec.dtype == "fp32" else 2
    return sum(c.positions * c.rotary_dim * dtype_bytes
               for c in rope_caches(spec, mrope_factor=mrope_factor))


# Attention.__init__ keeps four fp32 scalars on the device (_k_scale, _v_scale, _q_scale,
# _prob_scale); each takes a 512-byte block of the caching allocator.
ATTENTION_SCALE_TENSORS = 4
# Checkpoint tensors vLLM loads into one parameter (packed_modules_mapping): q/k/v into
# qkv_proj, gate/up into gate_up_proj (dense MLPs, shared experts and the stacked experts
# alike: FusedMoE holds every expert's w13 in one [E, 2I, H] tensor and w2 in one more).
_FUSED = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
          "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj"}


@functools.lru_cache(maxsize=8192)  # names repeat across layouts (find-gpus tries ~30)
def _fused_name(name: str) -> str:
    """A checkpoint tensor's name as vLLM's fused parameter (q/k/v -> qkv_proj, ...)."""
    return ".".join(_FUSED.get(p, p) for p in name.split("."))


def _replay_rope(alloc: CachingAllocator, cache: RopeCache, model_bytes: int,
                 keep_fp32: bool = False) -> None:
    """`_compute_cos_sin_cache` on the device, then `.to(dtype)`: inv_freq and positions,
    freqs = positions x inv_freq, cos, sin and their concatenation in fp32 (linear scaling:
    positions divided by the factor and the list concatenated once more), freed once the
    model-dtype copy exists. Only the order of these fp32 blocks matters: later weights
    reuse them. `keep_fp32`: the fp32 concatenation is the cache (SGLang on CUDA)."""
    n, d = cache.positions, cache.rotary_dim
    temps = [alloc.malloc(d // 2 * 4), alloc.malloc(n * 4)]
    if cache.linear:
        temps.append(alloc.malloc(n * 4))
    temps += [alloc.malloc(n * d // 2 * 4) for _ in range(3)]
    cat = alloc.malloc(n * d * 4)
    if cache.linear:
        temps.append(cat)
        cat = alloc.malloc(n * d * 4)
    for h in temps:
        alloc.free(h)
    if not keep_fp32:
        alloc.malloc(n * d * model_bytes)
        alloc.free(cat)


def loaded_weights(spec: ModelSpec, weights: str = "auto", tp: int = 1, pp: int = 1,
                   ep: int = 1, expert_load: ExpertLoad | None = None,
                   partition: Sequence[int] | None = None,
                   every_stage_ends: bool = False, mrope_factor: int = 1) -> tuple[int, ...]:
    """`loaded_weight_bytes` in the format `weights` names (kvplan.core.weights.load_format:
    the checkpoint's, one quantized at load, or a model dtype); MXFP4 experts laid out as
    `expert_load` says."""
    from kvplan.core.weights import load_format

    target, q, _ = load_format(spec, weights)
    return loaded_weight_bytes(target, q, tp, pp, ep,
                               expert_load=expert_load if q.layout == "mxfp4" else None,
                               partition=partition, every_stage_ends=every_stage_ends,
                               mrope_factor=mrope_factor)


def loaded_weight_bytes(spec: ModelSpec, q: Quantization = NONE, tp: int = 1, pp: int = 1,
                        ep: int = 1, include_mtp: bool = False,
                        expert_load: ExpertLoad | None = None, reserved: bool = False,
                        rope_fp32: bool = False,
                        partition: Sequence[int] | None = None,
                        every_stage_ends: bool = False,
                        mrope_factor: int = 1) -> tuple[int, ...]:
    """What vLLM logs as the weights one GPU of each pipeline stage loaded ("Loading model
    weights took", "Model loading took", the worker's "model weights take"): the change of
    `torch.cuda.memory_allocated` across `load_model` (`DeviceMemoryProfiler`). That counts
    the caching allocator's blocks (kvplan.core.allocator), so it is the weights as vLLM
    creates its parameters (the checkpoint's tensors, `placement`, fused as
    packed_modules_mapping fuses them) in the order the model's __init__ creates them, plus
    the rotary caches (`rope_caches`, built by the first layer that uses each, with their
    fp32 intermediates freed for later weights to reuse) and the attention layers' scalars,
    each allocation as the allocator rounds it: a 25 MiB o_proj in a fresh 26 MiB segment
    counts 26 MiB. R1-Distill-Qwen-14B at TP 2 (vllm#13061): 13.7561 GiB of tensors, 13.9476
    logged, all of it this. `reserved`: the segments instead of the blocks, as an engine that
    measures the drop in free device memory after `empty_cache` sees them (SGLang);
    `rope_fp32`: rotary caches kept in fp32 (SGLang on CUDA); `every_stage_ends`: the model
    class builds the embedding, final norm and LM head on every pipeline stage
    (EngineTraits.vllm_pp_every_stage_ends for vLLM); `mrope_factor`: as `rope_caches`."""
    from kvplan.core.allocator import CachingAllocator
    from kvplan.core.weights import placement

    plan = placement(spec, q, tp, pp, ep, include_mtp=include_mtp, expert_load=expert_load,
                     partition=partition, every_stage_ends=every_stage_ends)
    inv = plan.inventory
    stages = pp_stages(spec.num_layers, pp, partition)
    model_bytes = 4 if spec.dtype == "fp32" else 2
    # (param, layer) -> bytes, in creation order (a dict keeps its insertion order)
    groups: dict[tuple[str, int | None], int] = {}
    places: dict[tuple[str, int | None], str] = {}
    for t in inv.tensors:
        key = (_fused_name(t.name), t.layer)
        places.setdefault(key, t.place)
        groups[key] = groups.get(key, 0) + t.num_bytes
    # each place's parameters in creation order; "layer" ones by their layer
    by_place: dict[str, list[tuple[str, int | None]]] = {}
    by_layer: dict[int | None, list[tuple[str, int | None]]] = {}
    for key, place in places.items():
        by_place.setdefault(place, []).append(key)
        if place == "layer":
            by_layer.setdefault(key[1], []).append(key)
    out = []
    for k, (a, b) in enumerate(stages):
        alloc = CachingAllocator()
        last = k == pp - 1

        def put(key: tuple[str, int | None], alloc: CachingAllocator = alloc) -> None:
            alloc.malloc(groups[key])

        first_use = {c.first_layer: c for c in rope_caches(spec, range(a, b), mrope_factor)}
        if k == 0 or every_stage_ends:
            # the vision tower is built before the LM, on the first stage only
            for place in ("vision", "embed") if k == 0 else ("embed",):
                for key in by_place.get(place, []):
                    put(key)
        for i in range(a, b):
            mine = by_layer.get(i, [])
            attn = [key for key in mine if "attn" in key[0]]
            for key in attn:
                put(key)
            if i in first_use:
                _replay_rope(alloc, first_use[i], model_bytes, rope_fp32)
            if isinstance(spec.layers[i], (*ATTENTION_KINDS, MLA)):
                for _ in range(ATTENTION_SCALE_TENSORS):
                    alloc.malloc(4)
            for key in mine:
                if key not in attn:
                    put(key)
        if last or every_stage_ends:
            for place in ("final", "head", "mtp") if last else ("final", "head"):
                for key in by_place.get(place, []):
                    put(key)
            if last and pp > 1 and spec.tie_word_embeddings and not every_stage_ends:
                for key in by_place.get("embed", []):
                    put(key)
        out.append(alloc.live_segment_bytes if reserved else alloc.allocated_bytes)
    return tuple(out)
