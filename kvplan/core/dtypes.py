"""KV-cache storage formats and their exact byte cost.

A format says how one *row* of a cache tensor is stored (the `n` elements one token keeps for
one head). Sub-byte values are packed whole bytes per row, `ceil(n * bits / 8)`; group-wise
schemes add a scale (and a zero-point unless symmetric) per `group_size` elements. KIVI keys
(`:kivi`, per channel along the token axis; Liu et al., arXiv:2402.02750, Algorithm 1) and a
full-precision residual window (`:r128`) are charged per request (`KVFormat.tensor_bytes`).
Per-tensor scales (vLLM's fp8 `k_scale`/`v_scale`) sit outside the cache and are not counted.
Names: fp32, fp16, bf16, fp8 (= fp8_e4m3), fp8_e5m2, int8, int4, int2, nvfp4, the grammar
`int<bits>:g<group>[:s=<scale dtype>][:sym][:kivi][:r<tokens>]` and engine formats such as
`fp8_ds_mla`. The row cost, the grammar and KIVI's residual rule: docs/formulas.md §2.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.core.errors import BadInputError
from kvplan.core.record import record
from kvplan.core.units import whole_digits


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative ints."""
    return -(-a // b)


@record
class KVFormat:
    """How one row of `n` cache elements is stored. All costs are whole bytes."""

    name: str
    bits: int
    # Group-wise quantization: one scale (+ zero-point) per `group_size` elements; 0 = none.
    group_size: int = 0
    scale_bytes: int = 0
    zero_point: bool = False
    # KIVI: keys grouped per channel over `group_size` tokens instead of per token.
    per_channel_keys: bool = False
    # Recent tokens kept in `residual` (full precision) before they are quantized.
    residual_tokens: int = 0
    residual: KVFormat | None = None
    # MLA only: the RoPE part of the latent stored in another format (fp8_ds_mla keeps it bf16).
    mla_rope: KVFormat | None = None
    # Scalars stored once per row whatever its length (TurboQuant: the row's norm and its
    # residual's norm, kvplan.planning.policies).
    row_scalar_bytes: int = 0
    description: str = ""

    # --- costs -------------------------------------------------------------------------
    def row_bytes(self, n: int) -> int:
        """Bytes of one token's row of `n` elements (data plus per-token group scales)."""
        data = cdiv(n * self.bits, 8) + self.row_scalar_bytes
        if self.group_size and not self.per_channel_keys:
            data += cdiv(n, self.group_size) * self._group_meta_bytes()
        return data

    def key_row_bytes(self, n: int) -> int:
        """Like row_bytes, but under KIVI keys carry no per-token scales (see tensor_bytes)."""
        if self.per_channel_keys:
            return cdiv(n * self.bits, 8)
        return self.row_bytes(n)

    def value_row_bytes(self, n: int) -> int:
        """Values are always grouped per token, KIVI included."""
        if self.per_channel_keys:
            return replace(self, per_channel_keys=False).row_bytes(n)
        return self.row_bytes(n)

    def tensor_bytes(self, tokens: int, rows: int, n: int, role: str) -> int:
        """Exact bytes of `rows` rows (heads) of `n` elements for `tokens` tokens.

        role is "key", "value" or "latent" (MLA; stored like a key without per-channel groups).
        Handles the residual window and KIVI's per-channel key scales.
        """
        residual = min(tokens, self.residual_tokens) if self.residual is not None else 0
        quantized = tokens - residual
        if role == "key" and self.per_channel_keys:
            # KIVI Algorithm 1 (KeyQuant): r = l mod R key tokens stay in full precision, the
            # other l - r are quantized per channel in groups of `group_size` tokens
            residual = tokens % self.key_period
            quantized = tokens - residual
            total = quantized * rows * self.key_row_bytes(n)
            # one scale (+ zero-point) per channel per group of tokens
            total += rows * n * cdiv(quantized, self.group_size) * self._group_meta_bytes()
        elif role == "key":
            total = quantized * rows * self.key_row_bytes(n)
        elif role == "value":
            total = quantized * rows * self.value_row_bytes(n)
        else:
            total = quantized * rows * self.value_row_bytes(n)
        if residual:
            assert self.residual is not None
            total += residual * rows * self.residual.row_bytes(n)
        return total

    @property
    def key_period(self) -> int:
        """KIVI's residual length R: keys are flushed to the quantized cache R at a time."""
        return self.residual_tokens or self.group_size

    def last_flush_peak(self, tokens: int) -> int | None:
        """KIVI quantizes keys R tokens at a time (Algorithm 1), so key bytes drop at each
        flush. The token count of the last peak before `tokens` (R - 1 past a whole number of
        flushes), which a request that reached `tokens` has held; None when there is none."""
        if not (self.per_channel_keys and self.residual is not None and self.group_size):
            return None
        period = self.key_period
        peak = tokens // period * period - 1
        return peak if period - 1 <= peak < tokens and peak > 0 else None

    def token_row_bytes(self, n: int, role: str) -> int:
        """Marginal bytes of one more quantized token's row (no residual, no per-channel scales)."""
        return self.key_row_bytes(n) if role == "key" else self.value_row_bytes(n)

    def latent_bytes(self, lora_rank: int, rope_dim: int) -> int:
        """One MLA token record: the compressed latent plus its RoPE key part."""
        rope_format = self.mla_rope or self
        return self.value_row_bytes(lora_rank) + rope_format.value_row_bytes(rope_dim)

    def _group_meta_bytes(self) -> int:
        return self.scale_bytes * (2 if self.zero_point else 1)

    @property
    def is_quantized(self) -> bool:
        return self.bits < 16 or self.group_size > 0


# --- the named formats ----------------------------------------------------------------

FP32 = KVFormat("fp32", 32, description="IEEE float32, 4 bytes")
FP16 = KVFormat("fp16", 16, description="IEEE float16, 2 bytes")
BF16 = KVFormat("bf16", 16, description="bfloat16, 2 bytes")
FP8_E4M3 = KVFormat("fp8_e4m3", 8, description="fp8 e4m3, 1 byte; per-tensor scale not counted")
FP8_E5M2 = KVFormat("fp8_e5m2", 8, description="fp8 e5m2, 1 byte")
INT8 = KVFormat("int8", 8, description="int8, 1 byte; per-tensor scale not counted")
INT4 = KVFormat("int4", 4, description="4-bit, two per byte, rows rounded up to whole bytes")
INT2 = KVFormat("int2", 2, description="2-bit, four per byte, rows rounded up to whole bytes")
NVFP4 = KVFormat(
    "nvfp4", 4, group_size=16, scale_bytes=1,
    description="NVFP4: e2m1 values, one fp8 (e4m3) scale per 16 elements",
)
# vLLM's DeepSeek sparse-MLA record (vllm/v1/attention/backends/mla/flashmla_sparse.py):
# 512 fp8 NoPE values + 4 fp32 scales (one per 128) + 64 bf16 RoPE values = 656 bytes.
FP8_DS_MLA = KVFormat(
    "fp8_ds_mla", 8, group_size=128, scale_bytes=4, mla_rope=BF16,
    description="vLLM fp8_ds_mla: fp8 latent, fp32 scale per 128, RoPE part in bf16 (MLA only)",
)
# vLLM 0.33 nvfp4_ds_mla: 256 B packed e2m1 NoPE + 32 B fp8 scales + 64 B fp8 RoPE = 352 bytes.
NVFP4_DS_MLA = KVFormat(
    "nvfp4_ds_mla", 4, group_size=16, scale_bytes=1, mla_rope=FP8_E4M3,
    description="vLLM nvfp4_ds_mla: NVFP4 latent, RoPE part in fp8 (MLA only)",
)

_NAMED: dict[str, KVFormat] = {
    f.name: f
    for f in (FP32, FP16, BF16, FP8_E4M3, FP8_E5M2, INT8, INT4, INT2, NVFP4, FP8_DS_MLA,
              NVFP4_DS_MLA)
}
_ALIASES = {
    "float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16",
    "bfloat16": "bf16", "fp8": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2", "uint8": "int8",
}
MLA_ONLY = frozenset({"fp8_ds_mla", "nvfp4_ds_mla"})
_SCALE_FORMATS = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}


def format_names() -> list[str]:
    """The names accepted by --kv-dtype (plus 'auto' and the group-wise grammar)."""
    return sorted(_NAMED) + ["fp8"]


def parse_format(text: str, model_dtype: str = "bf16") -> KVFormat:
    """A --kv-dtype value -> KVFormat. 'auto' means the model's own dtype."""
    raw = text.strip().lower()
    if raw == "auto":
        raw = model_dtype
    raw = _ALIASES.get(raw, raw)
    if raw in _NAMED:
        return _NAMED[raw]
    if ":" in raw:
        return _parse_grouped(raw, text, model_dtype)
    raise BadInputError(
        f"unknown KV dtype {text!r}",
        "valid: auto, " + ", ".join(format_names())
        + ", or group-wise like int4:g64, int2:g32:kivi:r128 (see docs/formulas.md)",
    )


def _parse_grouped(raw: str, original: str, model_dtype: str) -> KVFormat:
    """int<bits>:g<group>[:s=<scale dtype>][:sym][:kivi][:r<tokens>]."""
    base, *options = raw.split(":")
    if base not in ("int8", "int4", "int2", "int3", "int1") and base not in ("fp8", "fp8_e4m3"):
        raise BadInputError(
            f"unknown group-wise KV dtype {original!r}",
            "the part before ':' must be int8, int4, int3, int2, int1 or fp8, e.g. int4:g64",
        )
    bits = 8 if base.startswith("fp8") else int(base[3:])
    group = 0
    scale_bytes = 2  # Hugging Face quanto/HQQ keep scale and zero-point in the compute dtype
    symmetric = False
    kivi = False
    residual_tokens = 0
    for opt in options:
        number = whole_digits(opt[1:], f"option {opt[0]!r} of KV dtype") if opt else None
        if opt.startswith("g") and number:
            group = number
        elif opt.startswith("s=") and opt[2:] in _SCALE_FORMATS:
            scale_bytes = _SCALE_FORMATS[opt[2:]]
        elif opt == "sym":
            symmetric = True
        elif opt == "kivi":
            kivi = True
        elif opt.startswith("r") and number is not None:
            residual_tokens = number
        else:
            raise BadInputError(
                f"cannot read option {opt!r} of KV dtype {original!r}",
                "options: g<group> (required), s=fp32|fp16|bf16|fp8, sym, kivi, r<tokens>",
            )
    if not group:
        raise BadInputError(
            f"group-wise KV dtype {original!r} needs a group size", "e.g. int4:g64"
        )
    if kivi and residual_tokens % group:
        raise BadInputError(
            f"KV dtype {original!r}: KIVI flushes its key residual R={residual_tokens} tokens "
            f"at a time in groups of {group}, so R must be a multiple of the group size",
            "e.g. int2:g32:kivi:r128 (the paper's G = 32, R = 128)")
    # KIVI keeps a not-yet-full group of key tokens in full precision, so it always needs the
    # model's dtype as its residual format, even without an `r` window.
    residual = parse_format(model_dtype) if residual_tokens or kivi else None
    return KVFormat(
        name=raw,
        bits=bits,
        group_size=group,
        scale_bytes=scale_bytes,
        zero_point=not symmetric,
        per_channel_keys=kivi,
        residual_tokens=residual_tokens,
        residual=residual,
        description=(
            f"{bits}-bit, groups of {group}"
            + (" (keys per channel, KIVI)" if kivi else "")
            + f", {scale_bytes}-byte scale" + ("" if symmetric else " and zero-point")
            + (f", last {residual_tokens} tokens in {model_dtype}" if residual_tokens else "")
        ),
    )
