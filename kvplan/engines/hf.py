"""Hugging Face transformers cache classes (transformers 5.23 cache_utils.py).

Tensors are `[batch, kv_heads, seq, head_dim]` for K and V.

- `DynamicCache`: grows with the sequence; a sliding layer (DynamicSlidingWindowLayer)
  keeps the last `window - 1` tokens after each update; chunked layers use the same layer
  with the chunk as window.
- `StaticCache`: allocates `max_cache_len` slots per full layer and `min(window,
  max_cache_len)` per sliding/chunked layer, on the first update.
- MLA (DeepSeek-V3 in 5.x): the compressed latent (`kv_lora_rank` as "keys") and `k_rot`
  (`qk_rope_head_dim` as "values"), one head: (512 + 64) x 2 = 1,152 B per token per layer.
  transformers 4.57 cached expanded per-head K/V instead (~70x more); not modelled here.
- Linear-attention / Mamba layers: conv state `(B, conv_dim, kernel)` (kernel, not
  kernel - 1) in the model dtype and the recurrent state in float32 (torch path).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvplan.core.dtypes import BF16, FP16, FP32, KVFormat, parse_format
from kvplan.core.errors import BadInputError
from kvplan.core.layers import (
    ATTENTION_KINDS,
    MLA,
    AttentionLayer,
    CrossAttention,
    NoCache,
    RecurrentState,
)
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec
from kvplan.engines.base import (
    BaseEngine,
    Capacity,
    Constraint,
    Deployment,
    Need,
    Pool,
    merge_needs,
    weights_per_gpu,
)
from kvplan.engines.cache import (
    CacheLayout,
    StateBuffer,
    dense_bytes,
    dense_layers,
    spec_state,
)
from kvplan.engines.shared.activations import forward_activation_bytes
from kvplan.engines.shared.budget import check_positive
from kvplan.engines.shared.device import NON_TORCH_BYTES
from kvplan.engines.shared.weights import ModelDims, estimate_dims, stage_weights

SCHEMA = "kvplan.engine.hf/1"
CACHES = ("dynamic", "static")
SMALLER_KV_DTYPES = ("int4:g64:r128", "int2:g64:r128")  # QuantizedCache (quanto/HQQ)


def kv_format(spec: ModelSpec, kv_dtype: str = "auto") -> KVFormat:
    """The model dtype by default (HF keeps float32 models in float32 unless told)."""
    if kv_dtype == "auto":
        return {"fp32": FP32, "fp16": FP16}.get(spec.dtype, BF16)
    return parse_format(kv_dtype, spec.dtype)


@record
class HfProfile:
    schema: str
    model: str
    cache: str  # dynamic | static
    kv_dtype: str
    batch: int
    seq_len: int  # tokens held (dynamic) or max_cache_len (static)
    attention_bytes: int
    state_bytes: int
    tp: int

    @property
    def cache_bytes(self) -> int:
        return self.attention_bytes + self.state_bytes


def _state_bytes(layer: RecurrentState, model_bytes: int, tp: int) -> int:
    total = 0
    for t in layer.tensors:
        elements = t.elements_per_rank(tp)
        if t.name == "conv":
            # HF keeps (conv_dim, kernel): one column more than vLLM's (kernel - 1, conv_dim)
            elements = elements // t.shape[0] * (t.shape[0] + 1)
            total += elements * model_bytes
        else:
            total += elements * 4  # recurrent/SSM state in float32
    return total


def window_cap(layer: AttentionLayer, cache: str) -> int | None:
    """The most token slots a sliding/chunked layer keeps per row (None: it grows with the
    text): a StaticCache allocates `window` slots, a DynamicSlidingWindowLayer keeps the last
    `window - 1` tokens after each update."""
    window = layer.window_tokens
    if not window:
        return None
    return window if cache == "static" else window - 1


def held_tokens(layer: AttentionLayer, cache: str, seq_len: int) -> int:
    """Token slots one row of an attention layer keeps: a DynamicCache holding `seq_len`
    tokens, or a StaticCache with max_cache_len = `seq_len`."""
    if isinstance(layer, CrossAttention):
        return layer.encoder_tokens
    cap = window_cap(layer, cache)
    return seq_len if cap is None else min(cap, seq_len)


def full_precision_tokens(fmt: KVFormat, tokens: int, decoded: int = 0) -> int:
    """Tokens a QuantizedCache row keeps in full precision (a residual format such as
    int4:g64:r128; 0 for any other format): `QuantizedLayer.update` (transformers 5.24,
    cache_utils.py) quantizes the whole first update (the prefill) and appends each later
    one to a full-precision buffer, re-quantizing everything and emptying the buffer when
    it would reach `residual_length` R. After `decoded` one-token steps the buffer holds
    `decoded mod R` tokens (0 to R - 1), never min(tokens, R)."""
    if fmt.residual is None or not fmt.residual_tokens:
        return 0
    if decoded < 0:
        raise BadInputError(f"decoded tokens must be 0 or more, got {decoded}")
    return min(tokens, decoded % fmt.residual_tokens)


def _residual_window(fmt: KVFormat) -> bool:
    """A QuantizedCache format: group-wise per token with a residual window (KIVI's
    per-channel keys are kvplan's own what-if and keep the format's window)."""
    return fmt.residual is not None and not fmt.per_channel_keys


def check_quantized(spec: ModelSpec, fmt: KVFormat) -> None:
    """A residual format is transformers' QuantizedCache, which refuses any layer that is
    not full attention (`QuantizedCache.__init__`, transformers 5.24: "only supported for
    models with only full attention layers")."""
    if fmt.residual is None:
        return
    for layer in spec.layers:
        if isinstance(layer, NoCache):
            continue
        windowed = isinstance(layer, ATTENTION_KINDS) and layer.window_tokens
        if windowed or isinstance(layer, (RecurrentState, CrossAttention)):
            raise BadInputError(
                f"transformers' QuantizedCache (KV dtype {fmt.name}) supports only models whose "
                f"layers are all full attention; {spec.name} has {layer.kind} layers",
                "use a KV dtype without a residual window (bf16, fp16) for this model")


def profile(spec: ModelSpec, *, cache: str = "dynamic", seq_len: int, batch: int = 1,
            kv_dtype: str = "auto", tp: int = 1, decoded: int = 0) -> HfProfile:
    """Bytes of a DynamicCache holding `seq_len` tokens per row, or of a StaticCache
    with `max_cache_len = seq_len`, for `batch` rows. With a residual format (a
    QuantizedCache), `decoded` of the tokens came one at a time after the prefill
    (`full_precision_tokens`)."""
    if cache not in CACHES:
        raise BadInputError(f"unknown cache class {cache!r}", "use dynamic or static")
    if seq_len <= 0 or batch <= 0:
        raise BadInputError("the sequence length and batch must be positive")
    fmt = kv_format(spec, kv_dtype)
    check_quantized(spec, fmt)
    recent = full_precision_tokens(fmt, seq_len, decoded) if _residual_window(fmt) else None
    model_bytes = 4 if spec.dtype == "fp32" else 2
    attention = state = 0
    for layer in spec.layers:
        if isinstance(layer, NoCache):
            continue
        if isinstance(layer, RecurrentState):
            state += _state_bytes(layer, model_bytes, tp) * batch
            continue
        if isinstance(layer, MLA):
            attention += batch * dense_bytes(layer, seq_len, fmt, tp, recent)
            continue
        if not isinstance(layer, ATTENTION_KINDS):
            raise BadInputError(f"kvplan's hf profile does not model {layer.kind} layers")
        attention += batch * dense_bytes(layer, held_tokens(layer, cache, seq_len), fmt, tp,
                                         recent)
    return HfProfile(SCHEMA, spec.name, cache, fmt.name, batch, seq_len, attention, state, tp)


# --- the cache as allocated (what `kvplan validate` builds with torch) ---------------------

CACHE_NOTES = {
    "static": ("HF StaticCache: [batch, kv_heads, {max_len:,}, head_dim] per K and V, "
               "sliding and chunked layers capped at their window."),
    "dynamic": ("HF DynamicCache: [batch, kv_heads, tokens, head_dim]; sliding layers keep "
                "window - 1 tokens."),
}


def state_buffers(layer: RecurrentState, model_dtype: str, tp: int) -> tuple[StateBuffer, ...]:
    """The state tensors of one row: the conv state as (conv_dim, kernel), one column more
    than vLLM's (kernel - 1, conv_dim), in the model dtype (bf16 unless fp32/fp16); the
    recurrent/SSM state in float32."""

    conv = {"fp32": "float32", "fp16": "float16"}.get(model_dtype, "bfloat16")
    out = []
    for b in spec_state(layer, tp):
        if b.name == "conv":
            width = 1
            for d in b.shape[1:]:
                width *= d
            out.append(StateBuffer(b.name, conv, (width, b.shape[0] + 1)))
        else:
            out.append(StateBuffer(b.name, "float32", b.shape))
    return tuple(out)


def cache_layout(spec: ModelSpec, fmt: KVFormat, tokens: int, batch: int, *, tp: int = 1,
                 cache: str = "dynamic", max_len: int | None = None) -> CacheLayout:
    """The tensors of a DynamicCache holding `tokens` tokens per row, or of a StaticCache
    with max_cache_len = `max_len`: per layer K and V of [batch, kv_heads, slots, head_dim]
    (`held_tokens` slots), MLA's latent and k_rot as two tensors, states per row."""

    if cache not in CACHES:
        raise BadInputError(f"unknown cache class {cache!r}", "use dynamic or static")
    check_quantized(spec, fmt)
    seq_len = (max_len or tokens) if cache == "static" else tokens
    model_bytes = 4 if spec.dtype == "fp32" else 2
    layers = dense_layers(
        spec, lambda layer: held_tokens(layer, cache, seq_len)
        if isinstance(layer, ATTENTION_KINDS) else seq_len,  # MLA: every token
        batch, lambda layer: (state_buffers(layer, spec.dtype, tp),
                              _state_bytes(layer, model_bytes, tp)))
    # validate's `tokens` arrive as one prefill, which a QuantizedCache quantizes whole
    recent = full_precision_tokens(fmt, seq_len) if _residual_window(fmt) else None
    return CacheLayout(paged=False, block_tokens=None, batch=batch, axes="batch-heads",
                       layers=layers, split_latent=True, note=CACHE_NOTES[cache],
                       recent_tokens=recent)


# --- the engine plugin ---------------------------------------------------------------------

class HfEngine(BaseEngine):
    name = "hf"
    display_name = "transformers"
    kv_dtypes = ("auto", "bf16", "fp16", "fp32", "fp8", "int8", "int4", "int2")
    smaller_kv_dtypes = SMALLER_KV_DTYPES
    cache_variants = ("static", "dynamic")  # `validate --layout hf-static` / `hf-dynamic`

    def capacity(self, dep: Deployment) -> Capacity:
        fmt = kv_format(dep.spec, dep.kv_dtype)
        budget = dep.kv_memory_bytes
        if budget is None:
            assert dep.gpu_memory_bytes is not None
            budget = hf_free_bytes(dep.spec, dep.gpu_memory_bytes, weights=dep.weights_dtype,
                                   weights_bytes=dep.weights_bytes,
                                   activation_bytes=dep.activation_bytes, dims=dep.dims)
        max_len = dep.context_limit()
        needs: list[Need] = []
        growing = 0  # bytes per token of the layers that grow with the text
        for layer in dep.spec.layers:
            if isinstance(layer, NoCache):
                continue
            if isinstance(layer, RecurrentState):
                state = profile(replace(dep.spec, layers=(layer,)), seq_len=1, tp=dep.tp)
                needs.append(Need("fixed", fixed=1, weight=state.state_bytes))
                continue
            per_token = layer.bytes_for_tokens(1, fmt, dep.tp)
            if isinstance(layer, CrossAttention):  # the encoder's tokens, whatever the length
                needs.append(Need("fixed", fixed=layer.encoder_tokens, weight=per_token))
                continue
            growing += per_token
            if dep.hf_cache == "static":  # max_cache_len = max_len slots, capped by the window
                slots = held_tokens(layer, "static", max_len) \
                    if isinstance(layer, ATTENTION_KINDS) else max_len  # MLA: no window
                needs.append(Need("fixed", fixed=slots, weight=per_token))
                continue
            cap = window_cap(layer, "dynamic") if isinstance(layer, ATTENTION_KINDS) else None
            if cap is None:
                needs.append(Need("full", 1, weight=per_token))
            else:
                needs.append(Need("window", 1, cap=cap, weight=per_token))
        prof = profile(dep.spec, cache=dep.hf_cache, seq_len=max_len, kv_dtype=dep.kv_dtype,
                       tp=dep.tp)
        pool = Pool(self.name, (Constraint("bytes", "byte", budget, merge_needs(needs)),),
                    max_len)
        return Capacity(dep, self, None, prof, pool, fmt.name, weights_per_gpu(dep), growing,
                        (f"transformers {dep.hf_cache} cache; nothing reserved up front",))

    def numbers(self, cap: Capacity) -> dict[str, Any]:
        p: HfProfile = cap.engine_profile
        return {"cache": p.cache, "cache_bytes": p.cache_bytes, "seq_len": p.seq_len,
                "budget_bytes": cap.pool.constraints[0].capacity}

    def token_capacity(self, cap: Capacity) -> int:
        return cap.pool.constraints[0].capacity // max(1, cap.kv_bytes_per_token)

    def defaults(self, spec: ModelSpec, gpu_name: str | None = None,
                 gpu_memory_bytes: int | None = None,
                 version: str | None = None) -> dict[str, Any]:
        return {"cache": "dynamic", "kv_dtype": kv_format(spec).name}

    def cache_layout(self, spec: ModelSpec, fmt: KVFormat, tokens: int, batch: int, *,
                     tp: int = 1, block_size: int | None = None, max_len: int | None = None,
                     variant: str = "dynamic") -> CacheLayout:
        return cache_layout(spec, fmt, tokens, batch, tp=tp, cache=variant or "dynamic",
                            max_len=max_len)


def hf_free_bytes(spec: ModelSpec, gpu_memory_bytes: int, *, weights: str = "auto",
                  weights_bytes: int | None = None, activation_bytes: int | None = None,
                  batch_tokens: int = 2048, dims: ModelDims | None = None) -> int:
    """transformers reserves nothing: the cache may grow into whatever the weights and the
    forward pass leave (plus the CUDA context, counted as non-torch)."""
    dims = dims or estimate_dims(spec)
    w = sum(stage_weights(spec, weights, weights_bytes, 1, 1, dims)[0])
    acts = forward_activation_bytes(dims, batch_tokens) if activation_bytes is None \
        else activation_bytes
    free = gpu_memory_bytes - w - acts - NON_TORCH_BYTES
    check_positive("transformers", [free], gpu_memory_bytes, [w],
                    "use a larger GPU or a smaller weight format")
    return free

ENGINE = HfEngine()
