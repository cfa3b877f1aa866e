"""What the engine tests under tests/engines/ share: the real start-up logs of
tests/fixtures/engines/engine-logs.yaml (a copy of the shared engine-logs.yaml), the models
they name, Llama-3.1-8B's shapes, and the worked-example models of docs/engine-kv-sizing.md.

Budgets are logged with two decimals of GiB, so a recomputed block count can differ by the
rounding (+-0.005 GiB); `close` allows 0.5% for that, exact matches are asserted where the log
allows.
"""

from __future__ import annotations

import paths
import yaml
from factories import FullAttention, ModelSpec, SlidingWindow

from kvplan.core.units import parse_bytes
from kvplan.engines.shared.weights import ModelDims
from kvplan.sources.library import resolve

FIXTURES = paths.FIXTURES / "engines"
MODELS = FIXTURES / "models"
GIB = 2**30
LOGS = yaml.safe_load((FIXTURES / "engine-logs.yaml").read_text())["entries"]
BY_ID = {e["id"]: e for e in LOGS}

LLAMA8B = ModelSpec("llama-3.1-8b", (FullAttention(8, 128),) * 32, num_attention_heads=32,
                    num_params=8030261248)
LLAMA8B_DIMS = ModelDims(4096, 14336, 128256)


def model(name: str) -> ModelSpec:
    return resolve(str(MODELS / f"{name}.yaml"))


def gib(x: float) -> int:
    """A GiB figure printed with two decimals -> bytes, as kvplan --kv-memory reads it."""
    return parse_bytes(f"{x}GiB")


def close(predicted: float, logged: float, tol: float = 0.005) -> bool:
    return abs(predicted - logged) <= tol * abs(logged)


def gemma3_27b() -> ModelSpec:
    sliding, full = SlidingWindow(16, 128, window=1024), FullAttention(16, 128)
    return ModelSpec("gemma-3-27b", ((sliding,) * 5 + (full,)) * 10 + (sliding,) * 2,
                     num_attention_heads=32)


# the tiny random Qwen3-Next vLLM's CPU build served (tests/oracle_vllm_cpu/): three gated
# delta-net layers, one full-attention layer (2 KV heads x 64, bf16: 512 B a token)
QWEN3_NEXT_TINY = {
    "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "dtype": "bfloat16",
    "vocab_size": 512, "hidden_size": 256, "intermediate_size": 512,
    "max_position_embeddings": 8192, "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 64, "linear_num_key_heads": 4,
    "linear_num_value_heads": 8, "linear_key_head_dim": 64, "linear_value_head_dim": 64,
    "linear_conv_kernel_dim": 4, "num_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 128, "shared_expert_intermediate_size": 128,
    "full_attention_interval": 4, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "layer_types": ["linear_attention"] * 3 + ["full_attention"],
}


# --- a ModelOpt checkpoint that asks for an FP8 KV cache -----------------------------------
# Llama-3.1-8B-Instruct's real config (tests/fixtures/hf-configs/) with the block of a ModelOpt
# export (hf_quant_config.json's `quantization`, as config.json nests it). Bytes per token by
# hand: 32 layers x 8 KV heads x head_dim 128 (4096 / 32) x K and V x dtype bytes.
LLAMA8B_BF16_TOKEN_BYTES = 32 * 8 * 128 * 2 * 2  # 131,072
LLAMA8B_FP8_TOKEN_BYTES = 32 * 8 * 128 * 2 * 1  # 65,536


def modelopt_llama8b(quant_algo: str, kv_cache_quant_algo: str | None = "FP8") -> ModelSpec:
    import json

    from kvplan.sources.hfconfig import spec_from_config

    config = paths.FIXTURES / "hf-configs" / "meta-llama--Llama-3.1-8B-Instruct.json"
    raw = json.loads(config.read_text())
    inner = {"quant_algo": quant_algo, "group_size": 16, "exclude_modules": ["lm_head"]}
    if kv_cache_quant_algo is not None:
        inner["kv_cache_quant_algo"] = kv_cache_quant_algo
    raw["quantization_config"] = {"quant_method": "modelopt", "quantization": inner}
    return spec_from_config(raw, "config.json", "llama-3.1-8b-modelopt")


def served_version_flags(config_path) -> list[str]:
    """`--engine-version` for a real config whose class vLLM's newest release no longer
    serves (kvplan.engines.vllm.served): the last release that did; [] where the newest
    serves it."""
    import json
    from pathlib import Path

    from kvplan.engines.vllm.served import last_serving, shown

    if Path(config_path).suffix != ".json":
        return []  # a YAML spec names no class
    archs = json.loads(Path(config_path).read_text(encoding="utf-8")).get("architectures")
    last = last_serving(tuple(archs)) if isinstance(archs, list) else None
    return [] if last is None else ["--engine-version", shown(last)]
