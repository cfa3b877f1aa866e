"""Hugging Face transformers cache classes (transformers 5.23 cache_utils.py), K and V as
`[batch, kv_heads, seq, head_dim]`: `DynamicCache` grows with the sequence (a sliding layer
keeps the last `window - 1` tokens); `StaticCache` allocates `max_cache_len` slots per full
layer and `min(window, max_cache_len)` per sliding one; MLA (DeepSeek-V3 in 5.x) caches the
latent and `k_rot`, one head; `QuantizedCache` (quanto) quantizes the prefill whole, keeps
decoded tokens in bf16 until `residual_length`, and packs each K/V tensor over the whole
batch (kvplan.engines.cache.whole_tensor_shapes); linear-attention / Mamba layers keep a conv
state and a float32 recurrent state. Each class's rule in full, with the releases read and
HQQ's difference: docs/engine-kv-sizing.md §4.3.
"""

from __future__ import annotations

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
from kvplan.engines.cache import dense_batch_bytes

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


def state_bytes(layer: RecurrentState, model_bytes: int, tp: int) -> int:
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


def residual_window(fmt: KVFormat) -> bool:
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
    (`full_precision_tokens`), and each layer's quantized K and V (MLA: latent and RoPE key)
    is one tensor for the whole batch, grouped and packed as optimum-quanto does
    (kvplan.engines.cache.whole_tensor_shapes)."""
    if cache not in CACHES:
        raise BadInputError(f"unknown cache class {cache!r}", "use dynamic or static")
    if seq_len <= 0 or batch <= 0:
        raise BadInputError("the sequence length and batch must be positive")
    fmt = kv_format(spec, kv_dtype)
    check_quantized(spec, fmt)
    recent = full_precision_tokens(fmt, seq_len, decoded) if residual_window(fmt) else None
    model_bytes = 4 if spec.dtype == "fp32" else 2
    attention = state = 0
    for layer in spec.layers:
        if isinstance(layer, NoCache):
            continue
        if isinstance(layer, RecurrentState):
            state += state_bytes(layer, model_bytes, tp) * batch
            continue
        if isinstance(layer, MLA):
            attention += dense_batch_bytes(layer, seq_len, fmt, batch, tp, recent,
                                           whole_tensor_groups=True)
            continue
        if not isinstance(layer, ATTENTION_KINDS):
            raise BadInputError(f"kvplan's hf profile does not model {layer.kind} layers")
        attention += dense_batch_bytes(layer, held_tokens(layer, cache, seq_len), fmt, batch,
                                       tp, recent, whole_tensor_groups=True)
    return HfProfile(SCHEMA, spec.name, cache, fmt.name, batch, seq_len, attention, state, tp)
