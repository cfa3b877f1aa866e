"""TGI's switches: the rule each release sizes its blocks by (`TGI_RELEASES`), the attention
backend the launcher resolves (and with it the block size), the KV dtypes and the launcher's
defaults. Sources are named in kvplan.engines.tgi.blocks.
"""

from __future__ import annotations

from kvplan.core.dtypes import BF16, FP8_E4M3, FP8_E5M2, FP16, KVFormat
from kvplan.core.errors import BadInputError
from kvplan.core.layers import ATTENTION_KINDS
from kvplan.core.spec import ModelSpec
from kvplan.engines import named_kv_format

SCHEMA = "kvplan.engine.tgi/1"
WIGGLE_ROOM = 0.90  # TGI_WIGGLE_ROOM default (models/globals.py, 3.3)
# (first release, wiggle room, what it multiplies): "free" = (total x fraction - used) x wiggle
# (flash_causal_lm.warmup up to 2.4), "fraction" = total x fraction x wiggle - used (3.0 on)
TGI_RELEASES: tuple[tuple[tuple[int, ...], float, str], ...] = (
    ((0, 9, 4), 1.0, "free"), ((1, 4, 1), 0.95, "free"), ((2, 3), 0.95, "free"),
    ((2, 4), 0.90, "free"),
    ((3, 0), 0.95, "fraction"), ((3, 1), 0.93, "fraction"), ((3, 3), WIGGLE_ROOM, "fraction"))
RESOLVED_ATTENTION = (2, 3)  # the launcher picks the attention backend from this release
# the launcher refuses --max-batch-prefill-tokens above --max-batch-total-tokens up to 2.3
# (launcher/src/main.rs main, 0.9.4-2.3.x); 2.4 dropped the check (the router checks the
# warm-up's figure instead)
PREFILL_CHECK_BEFORE = (2, 4)
MEMORY_FRACTION = 1.0  # CUDA_MEMORY_FRACTION / --cuda-memory-fraction default
DEFAULT_PREFILL_TOKENS = 4096  # launcher default max_batch_prefill_tokens
BLOCK_SIZES = {"flashinfer": 1, "flashdecoding": 256, "paged": 16}
FLASHINFER_HEAD_DIMS = (64, 128, 256)
KV_DTYPES = ("auto", "fp8_e4m3fn", "fp8_e5m2")
_FORMATS = {"bf16": BF16, "fp16": FP16, "fp8_e4m3fn": FP8_E4M3, "fp8_e5m2": FP8_E5M2}


def kv_format(spec: ModelSpec, kv_cache_dtype: str = "auto") -> KVFormat:
    """The model's dtype unless --kv-cache-dtype fp8_e4m3fn / fp8_e5m2."""
    return named_kv_format(spec, kv_cache_dtype, _FORMATS, "TGI", KV_DTYPES)


def release_rule(version: tuple[int, ...] | None) -> tuple[float, str]:
    """(wiggle room, what it multiplies) for a TGI release; the newest rule without one."""
    found = TGI_RELEASES[-1]
    if version is not None:
        known = [r for r in TGI_RELEASES if version >= r[0]]
        if not known:
            raise BadInputError(
                f"TGI {'.'.join(map(str, version))} does not size its batch from memory: "
                "before 0.9.4 the router takes --max-batch-total-tokens (default 16,000)",
                "give --engine-version 0.9.4 or newer, or --kv-memory")
        found = known[-1]
    return found[1], found[2]


def attention_backend(spec: ModelSpec, compute_major: int | None,
                      version: tuple[int, ...] | None = None, rocm: bool = False) -> str:
    """launcher resolve_attention: flashinfer unless the head dim (or the GPU) rules it out;
    paged attention before 2.3 and on ROCm."""
    if rocm or (version is not None and version[:2] < RESOLVED_ATTENTION):
        return "paged"
    heads = {layer.head_dim for layer in spec.layers if isinstance(layer, ATTENTION_KINDS)}
    fallback = "paged" if compute_major is not None and compute_major < 8 else "flashdecoding"
    if not heads <= set(FLASHINFER_HEAD_DIMS) or spec.traits.tgi_fallback_attention:
        return fallback
    return "flashinfer"
