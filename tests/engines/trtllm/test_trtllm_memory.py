"""What TensorRT-LLM sets aside before its KV pool (kvplan.engines.trtllm.memory: weights, one
forward pass over max_num_tokens, the CUDA context, the all-reduce workspace), predicted from
the GPU and the settings alone and compared with real start-up logs
(tests/fixtures/engines/buffer-logs.yaml); the plan's rows and `explain` on a PyTorch-backend
log.
"""

from __future__ import annotations

import pytest
from buffer_cases import BY_ID, GIB, MIB, entries, error, model, trtllm_config, trtllm_predict
from engine_cases import LLAMA8B, LLAMA8B_DIMS

from kvplan.engines import trtllm
from kvplan.engines.base import Deployment
from kvplan.sources.gpus import find_gpu


def test_trtllm_total_matches_the_catalog():
    e = BY_ID["trtllm-doc-llama31-8b-fp8-rtx5090"]
    assert round(find_gpu(e["gpu"]).memory_bytes / GIB, 2) == e["reported"]["total_gib"]


def test_trtllm_pytorch_available_is_total_less_peak_plus_temporary_kv_times_fraction():
    # _cal_max_memory (1.1.0rc3 log): (119.70 - 113.65 + 0.56) GiB x 0.9 = 5.95 GiB
    r = BY_ID["trtllm-pytorch-gpt-oss-120b-dgx-spark"]["reported"]
    available = (r["total_gib"] - r["peak_gib"] + r["tmp_kv_gib"]) * 0.9
    assert round(available, 2) == r["available_gib"]
    # the peak is weights + activations + what is outside torch (the temporary pool within it)
    assert abs(r["weights_gib"] + r["activation_gib"] + r["outside_torch_gib"] - r["peak_gib"]) \
        <= 0.015


def test_trtllm_pytorch_tokens_and_blocks_of_the_gpt_oss_log():
    e = BY_ID["trtllm-pytorch-gpt-oss-120b-dgx-spark"]
    r, spec = e["reported"], model(e["model"])
    # "kv size is 73728": 36 layers x 8 KV heads x 64 x 2 (K and V) x 2 B
    prof = trtllm.profile(spec, trtllm_config(e), 0, kv_cache_bytes=int(r["available_gib"] * GIB))
    assert prof.bytes_per_token == prof.estimate_bytes_per_token == 36 * 8 * 64 * 2 * 2 \
        == r["kv_size"]
    # 5.95 GiB is rounded to 0.005 GiB, i.e. to 73 tokens of 73,728 B
    assert abs(prof.max_tokens - r["max_tokens"]) <= 0.005 * GIB // r["kv_size"] + 1
    # the logged max_tokens (86,711) -> ceil(86,711 / 32) = 2,710 blocks -> 86,720 tokens
    exact = trtllm.profile(spec, trtllm_config(e, max_tokens=r["max_tokens"]), 0,
                           kv_cache_bytes=r["tokens"] * r["kv_size"] * 2)
    assert exact.num_blocks == -(-86711 // 32) == 2710
    assert exact.kv_cache_tokens == r["tokens"]


def test_trtllm_pytorch_activation_term_against_the_log():
    # "Memory dynamically allocated during inference (inside torch)": 0.85 GiB for 8,192 tokens
    # of gpt-oss-120b; kvplan's forward pass (4 active experts of 2,880 and three hidden
    # states, bf16) is an estimate: within 25%
    e = BY_ID["trtllm-pytorch-gpt-oss-120b-dgx-spark"]
    mem, _ = trtllm_predict(e)
    assert abs(error(mem.activation_bytes / GIB, e["reported"]["activation_gib"])) <= 0.25
    h, n = 2880, 2880
    assert mem.activation_bytes == 8192 * (4 * (2 * n + n) + 3 * h) * 2


@pytest.mark.parametrize("eid", ["trtllm-memory-doc-llama2-7b-fp8-h100",
                                 "trtllm-issue2268-qwen15-7b-a100-40gb",
                                 "trtllm-doc-llama31-8b-fp8-rtx5090"])
def test_trtllm_engine_flow_blocks_from_the_logged_available(eid):
    # kvCacheManager.cpp: maxTokens = fraction x available / bytes per token; blocks rounded up
    e = BY_ID[eid]
    r = e["reported"]
    prof = trtllm.profile(model(e["model"]), trtllm_config(e), int(r["available_gib"] * GIB))
    assert prof.num_blocks == r["blocks"] or abs(error(prof.num_blocks, r["blocks"])) < 0.001
    if "tokens" in r and eid != "trtllm-doc-llama31-8b-fp8-rtx5090":
        assert prof.kv_cache_tokens == r["tokens"]


def test_trtllm_engine_flow_is_overestimated_by_its_buffers():
    # the TRT-engine flow also holds the engine's activations, the runtime buffers and the
    # decoder, which grow with max_batch_size: kvplan's "available" is above every log
    for e in entries("trtllm"):
        if e["settings"]["backend"] == "engine" and e["gpu"] != "DGX Spark":
            mem, _ = trtllm_predict(e)
            assert mem.free_bytes / GIB > e["reported"]["available_gib"]


def test_trtllm_weights_of_the_memory_doc_engine():
    # "Loaded engine size: 6695 MiB" (Llama-2-7B FP8, 16-bit embeddings): within 1%
    e = BY_ID["trtllm-memory-doc-llama2-7b-fp8-h100"]
    mem, _ = trtllm_predict(e)
    assert abs(error(mem.weights_bytes / MIB, e["reported"]["engine_mib"])) <= 0.01


def test_trtllm_plan_uses_max_num_tokens_for_the_activation_term():
    spec = model("llama-3.1-8b")
    gpu = find_gpu("H100").memory_bytes
    small = trtllm.trtllm_memory(spec, gpu, max_num_tokens=2048)
    large = trtllm.trtllm_memory(spec, gpu, max_num_tokens=8192)
    # 3 x 14,336 (gate, up, product) + 3 x 4,096 hidden, bf16, per token
    assert large.activation_bytes - small.activation_bytes == 6144 * (3 * 14336 + 3 * 4096) * 2
    assert small.free_bytes - large.free_bytes == 6144 * (3 * 14336 + 3 * 4096) * 2


def test_trtllm_plan_shows_the_fraction_of_what_the_profile_leaves():
    """`plan --engine trtllm` (no --kv-memory): weights + one forward over max_num_tokens +
    non-torch come off the GPU, and the pool gets free_gpu_memory_fraction of the rest."""
    from kvplan.engines.registry import get

    gpu = find_gpu("H100")
    spec = model("llama-3.1-8b")
    dep = Deployment(spec, engine="trtllm", gpu_name=gpu.name,
                     gpu_memory_bytes=gpu.memory_bytes)
    cap = get("trtllm").capacity(dep)
    rows = dict(get("trtllm").memory_rows(cap))
    # 8,192 tokens x (3 x 14,336 + 3 x 4,096) x 2 B; the CUDA context and kernels 360 MiB
    acts, non_torch = 8192 * (3 * 14336 + 3 * 4096) * 2, 360 * MIB
    weights = rows["- weights"]
    free = gpu.memory_bytes - weights - acts - non_torch
    assert rows["- activation peak (max_num_tokens)"] == acts
    assert rows["- non-torch"] == non_torch
    assert rows["= free after the profile"] == free
    assert rows["x free_gpu_memory_fraction 0.9"] == int(free * 0.9)
    assert cap.engine_profile.max_tokens == int(free * 0.9) // 131072
    given = get("trtllm").capacity(Deployment(spec, engine="trtllm", kv_memory_bytes=GIB))
    assert given.budget is None and get("trtllm").memory_rows(given) is None


def test_trtllm_tensor_parallel_adds_the_all_reduce_workspace():
    # plugin.py allocate_allreduce_fusion_workspace: IPC size x tp + barriers 256 x tp + three
    # Lamport buffers of size x tp; size 16,000,000 B up to TP 2, 8,000,000 B beyond
    assert trtllm.trtllm_allreduce_workspace_bytes(1) == 0
    assert trtllm.trtllm_allreduce_workspace_bytes(2) == 16_000_000 * 2 * 4 + 256 * 2
    assert trtllm.trtllm_allreduce_workspace_bytes(8) == 8_000_000 * 8 * 4 + 256 * 8
    spec, gpu = model("llama-3.1-8b"), find_gpu("H100").memory_bytes
    one, four = trtllm.trtllm_memory(spec, gpu), trtllm.trtllm_memory(spec, gpu, tp=4)
    assert four.non_torch_bytes - one.non_torch_bytes == 8_000_000 * 4 * 4 + 256 * 4


GPT_OSS_LOG = """\
[TensorRT-LLM] TensorRT-LLM version: 1.1.0rc3
[12/20/2025-04:21:50] [TRT-LLM] [I] Memory used after loading model weights (inside torch) in \
memory usage profiling: 63.52 GiB
[12/20/2025-04:21:51] [TRT-LLM] [I] Memory dynamically allocated during inference (inside \
torch) in memory usage profiling: 0.85 GiB
[12/20/2025-04:21:51] [TRT-LLM] [I] Peak memory during memory usage profiling (torch + \
non-torch): 113.65 GiB, available KV cache memory when calculating max tokens: 5.95 GiB, \
fraction is set 0.8999999761581421, kv size is 73728. device total memory 119.70 GiB, , tmp \
kv_mem 0.56 GiB
[TensorRT-LLM][INFO] Number of tokens per block: 32.
[TensorRT-LLM][INFO] [MemUsageChange] Allocated 5.95 GiB for max tokens in paged KV cache \
(86720).
"""  # a backslash at a line end joins the lines: each log line is one line


def test_explain_reads_the_pytorch_backend_profile_lines():
    """The lines of trtllm-pytorch-gpt-oss-120b-dgx-spark (jeansblog/trt_llm README): the pool
    recomputed from the logged 5.95 GiB, and the weights and activations beside kvplan's."""
    from kvplan.planning.explain import explain

    ex = explain(GPT_OSS_LOG, model="gpt-oss-120b")
    assert ex.engine == "trtllm"
    rows = {(r.quantity, r.basis): r for r in ex.rows}
    given = rows[("kv_cache_tokens", "given the logged budget")]
    assert given.logged == 86720 and given.status == "ok"
    # 5.95 GiB // 73,728 B = 86,652 tokens -> 2,708 blocks of 32 (the log's 5.95 is rounded)
    assert given.kvplan == -(-int(5.95 * GIB) // 73728 // 32) * 32
    assert rows[("weights", "from settings")].logged == int(63.52 * GIB)
    assert rows[("activation peak", "from settings")].logged == int(0.85 * GIB)
    assert "Memory dynamically allocated" in rows[("activation peak", "from settings")].line
    assert ex.settings["memory_fraction"] == pytest.approx(0.9)
    assert ex.settings["block_size"] == 32


def test_trtllm_free_is_the_gpu_less_weights_and_activations():
    free = trtllm.trtllm_free_bytes(LLAMA8B, 80 * GIB, activation_bytes=GIB, non_torch_bytes=0,
                               dims=LLAMA8B_DIMS)
    assert free == 80 * GIB - 8030261248 * 2 - GIB
