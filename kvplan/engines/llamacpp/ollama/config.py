"""Ollama's release rules: how `ollama serve` and its OLLAMA_* environment become the
llama.cpp context it loads a model with (num_ctx x OLLAMA_NUM_PARALLEL cells), one row per
release whose source showed a change. Each rule, with the file and function of Ollama's source
it follows at the release's tag: docs/engine-kv-sizing.md §7.11.
"""

from __future__ import annotations

from kvplan.core.record import record
from kvplan.core.units import GIB


@record
class OllamaRules:
    """What changed between Ollama releases, as read from its source at each tag."""

    release: str
    # num_ctx when neither the request, the Modelfile nor OLLAMA_CONTEXT_LENGTH gives one;
    # None: by the total GPU memory (VRAM_TIERS)
    default_num_ctx: int | None
    # what an unset OLLAMA_NUM_PARALLEL gives: 1, or 0 = "auto" (auto_parallel when it fits)
    default_parallel: int
    auto_parallel: int
    # llama.cpp keeps a cache per sequence (kv_unified false) rather than one for all
    cache_per_sequence: bool
    flash_attention_default: str  # "off" or "auto" when OLLAMA_FLASH_ATTENTION is unset
    # a quantized OLLAMA_KV_CACHE_TYPE is dropped to f16 unless OLLAMA_FLASH_ATTENTION=1
    quantized_kv_needs_flash_attention: bool
    llama_server: bool  # the runner is upstream llama-server (0.30.0, PR #16031)
    # num_ctx above the model's trained context is cut to it (llm/server.go NewLlamaServer,
    # "requested context size too large for model", from 0.9.3); before, it runs as asked
    cuts_to_trained_context: bool = True


_FIRST = OllamaRules("0.1.0", 2048, 0, 4, False, "off", True, False, False)
RULES: dict[tuple[int, ...], OllamaRules] = {
    (0, 1, 0): _FIRST,
    (0, 6, 7): OllamaRules("0.6.7", 4096, 0, 2, False, "off", True, False, False),
    (0, 9, 3): OllamaRules("0.9.3", 4096, 0, 2, False, "off", True, False),
    (0, 10, 0): OllamaRules("0.10.0", 4096, 1, 0, False, "off", True, False),
    (0, 11, 5): OllamaRules("0.11.5", 4096, 1, 0, True, "off", True, False),
    (0, 13, 4): OllamaRules("0.13.4", 4096, 1, 0, True, "auto", True, False),
    (0, 15, 5): OllamaRules("0.15.5", None, 1, 0, True, "auto", True, False),
    (0, 30, 0): OllamaRules("0.30.0", None, 1, 0, True, "auto", False, True),
}
LATEST = (0, 32)  # the newest release read (v0.32.15)

# server/routes.go Serve (0.15.5 on): the total GPU memory (less OLLAMA_GPU_OVERHEAD) -> the
# default num_ctx; "slightly lower thresholds (47/23 GiB vs. 48/24 GiB)"
VRAM_TIERS: tuple[tuple[int, int], ...] = ((47 * GIB, 262_144), (23 * GIB, 32_768), (0, 4096))
# OLLAMA_KV_CACHE_TYPE values Ollama reads (envconfig/config.go; fs/ggml SupportsKVCacheType)
CACHE_TYPES = ("f16", "q8_0", "q4_0")
QUANTIZED = ("q8_0", "q4_0")
MIN_NUM_CTX = 4  # server/sched.go getRunner: `if opts.NumCtx < 4 { opts.NumCtx = 4 }`


def rules_for(version: tuple[int, ...] | None) -> OllamaRules:
    """The row of `version` (None: the newest read)."""
    from kvplan.engines.shared.releases import row_for

    return row_for(RULES, version) if version is not None else RULES[max(RULES)]


def default_num_ctx(rules: OllamaRules, total_gpu_bytes: int) -> int:
    """num_ctx when nothing sets it: the release's number, or its VRAM tier (no GPU: 0 B,
    the 4096 tier, as Ollama logs `total_vram="0 B" default_num_ctx=4096` on a CPU)."""
    if rules.default_num_ctx is not None:
        return rules.default_num_ctx
    return next(ctx for floor, ctx in VRAM_TIERS if total_gpu_bytes >= floor)


# strconv.ParseBool, which envconfig.BoolWithDefault reads OLLAMA_FLASH_ATTENTION with (in any
# case here), and kvplan's own --flash-attn spellings
_FLASH_ATTENTION = {"1": True, "t": True, "true": True, "on": True, "enabled": True,
                    "0": False, "f": False, "false": False, "off": False, "disabled": False}


def flash_attention_setting(value: str | None) -> bool | None:
    """OLLAMA_FLASH_ATTENTION (or --flash-attn) as Ollama reads it: True, False, or None when
    unset ("auto": the release's default)."""
    if value is None or value.strip().lower() == "auto":
        return None
    key = value.strip().lower()
    if key not in _FLASH_ATTENTION:
        from kvplan.core.errors import BadInputError

        raise BadInputError(f"OLLAMA_FLASH_ATTENTION (--flash-attn) must be 1 or 0 (true or "
                            f"false), got {value!r}")
    return _FLASH_ATTENTION[key]
