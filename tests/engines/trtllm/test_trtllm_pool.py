"""TensorRT-LLM's paged KV pool (kvplan.engines.trtllm.pool) against the real log of
tests/fixtures/engines/engine-logs.yaml and the worked numbers of docs/engine-kv-sizing.md:
the logged settings (and the logged budget, where the log gives one) go in, and the
logged token count, block count and concurrency must come out within 0.5% (engine_cases.close).
"""

from __future__ import annotations

from engine_cases import BY_ID, GIB, close, gib, model
from factories import dense

from kvplan.engines import trtllm


def test_trtllm_rtx5090_llama8b_fp8():
    e = BY_ID["trtllm-doc-llama31-8b-fp8-rtx5090"]["reported"]
    config = trtllm.TrtllmConfig(kv_cache_dtype="fp8", free_gpu_memory_fraction=0.9)
    p = trtllm.profile(model("llama-3.1-8b"), config, gib(e["trt_available_mem_gib"]))
    assert p.bytes_per_token == 32 * 2 * 8 * 128 * 1  # fp8: 64 KiB
    # max_tokens = int(17.83 GiB x 0.9) // 64 KiB = 262,914; blocks = ceil(/ 32)
    assert p.num_blocks == -(-(int(gib(17.83) * 0.9) // 65536) // 32) == 8217
    assert p.kv_cache_tokens == 8217 * 32  # the log's "(263008)" is also blocks x 32
    assert close(p.num_blocks, e["trt_num_blocks"])
    assert close(p.kv_cache_tokens, e["kv_cache_tokens"])
    assert f"{p.allocated_bytes / GIB:.2f}" == f"{e['trt_kv_alloc_gib']:.2f}"


def test_trtllm_worked_example_and_heads():
    # §3: 80 GiB, profile peak 20 GiB, 1 GiB temporary KV, 0.9 -> 449,740 tokens, 14,055 blocks
    p = trtllm.profile(dense(), trtllm.TrtllmConfig(), 61 * GIB)
    assert p.kv_cache_bytes == int((80 - 20 + 1) * GIB * 0.9) == 58948426137
    assert p.max_tokens == 58948426137 // 131072 == 449740
    assert p.num_blocks == -(-449740 // 32) == 14055  # ceil(tokens / 32)
    # TP 16 on 8 KV heads: the pool keeps ceil(8/16) = 1 head; the estimate floors 8*128//16
    p16 = trtllm.profile(dense(heads=64), trtllm.TrtllmConfig(tp=16), 61 * GIB)
    assert p16.bytes_per_token == 32 * 1 * 256 * 2
    assert p16.estimate_bytes_per_token == 32 * 2 * (8 * 128 // 16) * 2
    # NVFP4: 0.5625 B per element -> 32,768 + 4,096 = 36,864 B/token for Llama-3.1-8B
    nv = trtllm.profile(dense(), trtllm.TrtllmConfig(kv_cache_dtype="nvfp4"), 61 * GIB)
    elements = 2 * 32 * 8 * 128  # K+V x layers x KV heads x head_dim
    assert nv.bytes_per_token == elements // 2 + elements // 16 == 36864
