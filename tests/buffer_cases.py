"""What the tests of the memory engines set aside besides the KV cache share: the real
start-up logs of tests/fixtures/engines/buffer-logs.yaml (each entry citing its source), the
models they name, and kvplan's predictions for them from the GPU and the logged settings alone
(llama.cpp's compute buffers, SGLang's free-memory readings, TensorRT-LLM's profile).
"""

from __future__ import annotations

from typing import Any

import paths
import yaml

from kvplan.engines import llamacpp, sglang, trtllm
from kvplan.sources.gpus import find_gpu
from kvplan.sources.library import resolve

FIXTURES = paths.FIXTURES / "engines"
MODELS = FIXTURES / "models"
LOGS = yaml.safe_load((FIXTURES / "buffer-logs.yaml").read_text())["entries"]
BY_ID = {e["id"]: e for e in LOGS}
MIB, GIB = 2**20, 2**30


LOCAL_MODELS = ("glm-4-32b-0414", "qwen1.5-7b")


def model(name: str):
    """The library's model (config.json shapes); the models it lacks are test fixtures."""
    local = MODELS / f"{name}.yaml"
    return resolve(str(local) if name in LOCAL_MODELS else name)


def entries(engine: str) -> list[dict[str, Any]]:
    return [e for e in LOGS if e["engine"] == engine]


def error(predicted: float, logged: float) -> float:
    return (predicted - logged) / logged


def llamacpp_buffers(e: dict[str, Any]) -> llamacpp.ComputeBuffers:
    """The compute buffers from the model's shapes and the logged settings (n_ctx, -ub, -fa,
    slots) only."""
    s = e["settings"]
    config = llamacpp.LlamacppConfig(
        ctx=s["n_ctx"], parallel=s.get("parallel", 1), n_ubatch=s["n_ubatch"],
        kv_unified=s.get("kv_unified", False),
        # builds before PR #23764 (2026-05-27): an f32 mask cast to f16 (the one later log,
        # 2026-08-14 on Vulkan, is not counted)
        f16_mask=False, flash_attn=llamacpp.flash_attn_on(s["flash_attn"]))
    prof = llamacpp.profile(model(e["model"]), config)
    assert prof.compute is not None
    return prof.compute


def sglang_predict(e: dict[str, Any]) -> tuple[sglang.SglangMemory, int]:
    """(the free-memory readings and the token count) from the GPU, version and settings."""
    from kvplan.engines import parse_version

    gpu = find_gpu(e["gpu"])
    s = e["settings"]
    spec = model(e["model"])
    mem = sglang.sglang_memory(spec, gpu.memory_bytes, tp=s.get("tp", 1),
                          version=parse_version(e.get("engine_version")),
                          weights=s.get("weights_dtype", "auto"))
    prof = sglang.profile(spec, sglang.SglangConfig(tp=s.get("tp", 1)),
                          mem.free_before_load_bytes, mem.free_after_load_bytes,
                          mem.mem_fraction_static)
    return mem, prof.max_total_num_tokens


def trtllm_total(e: dict[str, Any]) -> int:
    """The GPU's memory from the catalog; the DGX Spark (unified memory, not in the catalog)
    takes the logged total."""
    if e["gpu"] == "DGX Spark":
        return int(e["reported"]["total_gib"] * GIB)
    return find_gpu(e["gpu"]).memory_bytes


def trtllm_config(e: dict[str, Any], **kw: Any) -> trtllm.TrtllmConfig:
    s = e["settings"]
    return trtllm.TrtllmConfig(kv_cache_dtype=s["kv_dtype"], tokens_per_block=s["tokens_per_block"],
                               free_gpu_memory_fraction=s["free_gpu_memory_fraction"], **kw)


def trtllm_predict(e: dict[str, Any]) -> tuple[trtllm.TrtllmMemory, trtllm.TrtllmProfile]:
    """From the GPU and the logged settings only: the weights in their format, one forward
    pass over max_num_tokens, the CUDA context; the fraction of what is left."""
    s = e["settings"]
    spec = model(e["model"])
    r = e["reported"]
    # on unified memory cudaMemGetInfo counts the host's own use: take the log's non-torch
    # memory (less the temporary KV pool in it) so that the other terms can be compared
    non_torch = int((r["outside_torch_gib"] - r["tmp_kv_gib"]) * GIB) \
        if e["gpu"] == "DGX Spark" else None
    mem = trtllm.trtllm_memory(spec, trtllm_total(e), weights=s["weights_dtype"],
                          max_num_tokens=s["max_num_tokens"], non_torch_bytes=non_torch)
    return mem, trtllm.profile(spec, trtllm_config(e), mem.free_bytes)
