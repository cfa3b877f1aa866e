"""What llama.cpp, SGLang and TensorRT-LLM set aside besides the KV cache, predicted from the
GPU and the settings alone and compared with real start-up logs
(tests/fixtures/engines/buffer-logs.yaml, each entry citing its source).

docs/engine-accuracy.md section 7 holds the table `accuracy_table()` prints; a test keeps
them equal. Regenerate it with `python tests/engines/test_engine_buffers.py`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/

import paths
import pytest
import yaml
from accuracy_doc import assert_in_accuracy_doc
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import BadInputError, SpecError
from kvplan.engines import llamacpp, sglang, trtllm
from kvplan.engines.base import Deployment
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


# --- llama.cpp: the compute buffers -------------------------------------------------------

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


def test_compute_buffer_without_flash_attention_is_kq_plus_mask_plus_four_hidden():
    # Llama-3.1-8B, 8,192 cells, -ub 512, no flash attention (build_attn_mha): KQ = n_kv x
    # n_tokens x n_head x 4 B, the f32 mask n_kv x 512 x 4 B, four hidden states 4,096 x 512
    # x 4 B; it is larger than the logits (128,256 x 512 x 4 B + one hidden state)
    c = llamacpp_buffers(BY_ID["llamacpp-kaggle-llama31-8b-t4-c8192-nofa"])
    kq, mask, hidden = 8192 * 512 * 32 * 4, 8192 * 512 * 4, 4096 * 512 * 4
    assert c.gpu_bytes == kq + mask + 4 * hidden == 560 * MIB
    assert c.phase == "attention"
    assert c.host_bytes == hidden + mask  # token embeddings (CPU get_rows) + the f32 mask


def test_compute_buffer_with_flash_attention_is_the_logits():
    # Qwen2.5-7B, 4,096 cells, flash attention: no KQ; the logits 152,064 x 512 x 4 B and the
    # final norm 3,584 x 512 x 4 B are the largest set alive
    c = llamacpp_buffers(BY_ID["llamacpp-ollama-qwen25-7b-c4096-fa"])
    assert c.gpu_bytes == 152064 * 512 * 4 + 3584 * 512 * 4 == 304 * MIB
    assert c.phase == "output"


def test_micro_batch_is_capped_by_the_context():
    # n_tokens = min(n_ctx, n_ubatch) (llama_context::sched_reserve): 256 cells, -ub 512
    spec = resolve("llama-3.1-8b")
    c = llamacpp.profile(spec, llamacpp.LlamacppConfig(ctx=256)).compute
    assert c is not None and c.n_tokens == 256
    assert c.gpu_bytes == 128256 * 256 * 4 + 4096 * 256 * 4


def test_compute_buffer_grows_with_the_micro_batch():
    spec = resolve("llama-3.1-8b")
    small = llamacpp.profile(spec, llamacpp.LlamacppConfig(ctx=8192, n_ubatch=512)).compute
    large = llamacpp.profile(spec, llamacpp.LlamacppConfig(ctx=8192, n_ubatch=2048)).compute
    assert small is not None and large is not None
    assert large.gpu_bytes == 128256 * 2048 * 4 + 4096 * 2048 * 4  # logits of 2,048 rows


def test_flash_attn_values():
    assert llamacpp.flash_attn_on(None) and llamacpp.flash_attn_on("auto")
    assert not llamacpp.flash_attn_on("off") and not llamacpp.flash_attn_on("0")
    with pytest.raises(BadInputError, match="on, off or auto"):
        llamacpp.flash_attn_on("maybe")


def test_unknown_shapes_give_no_estimate():
    from factories import FullAttention, ModelSpec

    spec = ModelSpec("bare", (FullAttention(8, 128),) * 4)
    assert llamacpp.profile(spec, llamacpp.LlamacppConfig(ctx=1024)).compute is None


@pytest.mark.parametrize("e", [e for e in entries("llamacpp") if e["counted"]],
                         ids=lambda e: e["id"])
def test_llamacpp_gpu_compute_buffer_against_logs(e):
    """Every counted log within 15%, none over-estimated by more than 1% (the misses are
    ggml-alloc placing the logits above a freed hole: kvplan is low there, never high)."""
    got = llamacpp_buffers(e).gpu_bytes / MIB
    logged = e["reported"]["cuda_compute_mib"]
    assert -0.15 <= error(got, logged) <= 0.01, (got, logged)


def test_llamacpp_most_logs_exact():
    """The model is the mechanism, not a fit: 6 of the 8 counted logs to 0.1%."""
    counted = [e for e in entries("llamacpp") if e["counted"]]
    exact = [e["id"] for e in counted if abs(error(llamacpp_buffers(e).gpu_bytes / MIB,
                                                   e["reported"]["cuda_compute_mib"])) <= 0.001]
    assert len(exact) >= 6, exact


def test_llamacpp_kv_lines_still_exact():
    for e in entries("llamacpp"):
        if "kv_mib" not in e["reported"]:
            continue
        s = e["settings"]
        prof = llamacpp.profile(model(e["model"]), llamacpp.LlamacppConfig(
            ctx=s["n_ctx"], parallel=s.get("parallel", 1),
            kv_unified=s.get("kv_unified", False)))
        assert prof.kv_mib == e["reported"]["kv_mib"], e["id"]


# --- the plan subtracts them ------------------------------------------------------------------

RTX4090 = find_gpu("rtx-4090").memory_bytes
LLAMA8B_BF16 = 2 * 8030261248  # bf16 weights: 2 bytes x parameters
COMPUTE_FA = 128256 * 512 * 4 + 4096 * 512 * 4  # flash attention on (auto): the logits phase
# 277 x 256 cells: weights + KV fit the card, weights + KV + compute buffers do not
TIGHT_CTX = 277 * 256


def test_tight_context_is_between_the_two_sums():
    kv = TIGHT_CTX * 32 * 2 * 8 * 128 * 2
    assert LLAMA8B_BF16 + kv <= RTX4090 < LLAMA8B_BF16 + kv + COMPUTE_FA


def test_plan_subtracts_the_compute_buffers():
    from kvplan.planning.plan import capacity

    dep = Deployment(resolve("llama-3.1-8b"), engine="llamacpp", max_model_len=TIGHT_CTX,
                     gpu_name="RTX 4090", gpu_memory_bytes=RTX4090)
    cap = capacity(dep)
    assert cap.pool.constraints[0].capacity == 0  # does not start
    assert any("compute buffers" in n for n in cap.notes)
    assert cap.engine_profile.compute.gpu_bytes == COMPUTE_FA
    rows = dict(cap.engine.memory_rows(cap))
    assert rows["- compute buffers"] == COMPUTE_FA
    assert rows["= left"] == RTX4090 - LLAMA8B_BF16 - TIGHT_CTX * 131072 - COMPUTE_FA < 0
    # the longest context that fits: what the card holds after weights and compute buffers,
    # in whole 256-cell steps of 256 x 131,072 B
    longest = (RTX4090 - LLAMA8B_BF16 - COMPUTE_FA) // (256 * 131072) * 256
    for ctx, cells in ((longest, longest), (longest + 256, 0)):
        cap = capacity(Deployment(resolve("llama-3.1-8b"), engine="llamacpp",
                                  max_model_len=ctx, gpu_name="RTX 4090",
                                  gpu_memory_bytes=RTX4090))
        assert cap.pool.constraints[0].capacity == cells


def test_two_gpus_hold_half_the_kv_cache_each():
    from kvplan.planning.plan import capacity

    dep = Deployment(resolve("llama-3.1-8b"), engine="llamacpp", max_model_len=73728, tp=2,
                     gpu_name="RTX 4090", gpu_memory_bytes=RTX4090)
    cap = capacity(dep)
    rows = dict(cap.engine.memory_rows(cap))
    assert rows["- KV cache"] == 73728 * 131072 // 2  # 32 layers, 16 on each GPU
    assert cap.pool.constraints[0].capacity == 73728  # fits on two cards, not on one
    one = capacity(Deployment(resolve("llama-3.1-8b"), engine="llamacpp", max_model_len=73728,
                              gpu_name="RTX 4090", gpu_memory_bytes=RTX4090))
    assert LLAMA8B_BF16 + 73728 * 131072 + COMPUTE_FA > RTX4090
    assert one.pool.constraints[0].capacity == 0


def _json(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_plan_and_compare_agree_and_plan_says_so():
    args = ("llama-3.1-8b", "--gpu", "rtx-4090", "--engine", "llamacpp", "--max-model-len",
            str(TIGHT_CTX), "--context", str(TIGHT_CTX), "-f", "json")
    plan = _json("plan", *args)
    compare = _json("compare", *args)
    assert plan["answer"]["max_concurrency"] == compare["rows"][0]["max_concurrency"] == 0
    assert plan["engine"]["compute_buffer_bytes"] == COMPUTE_FA
    assert any("compute buffers" in n for n in plan["notes"])
    table = CliRunner().invoke(app, ["plan", *args[:-2]], env={"COLUMNS": "100"}).stdout
    assert "compute buffers" in table and "Memory per GPU" in table


def test_plan_flags_reach_the_engine():
    flags = ("plan", "llama-3.1-8b", "--gpu", "rtx-4090", "--engine", "llamacpp",
             "--max-model-len", "8192", "-f", "json")
    off = _json(*flags, "-fa", "off", "-ub", "1024")
    # no flash attention, -ub 1024: KQ 8,192 x 1,024 x 32 x 4 B + mask + 4 hidden states
    assert off["engine"]["compute_buffer_bytes"] == \
        8192 * 1024 * 32 * 4 + 8192 * 1024 * 4 + 4 * 4096 * 1024 * 4


def test_capacity_plan_file_reads_ubatch_and_flash_attn(tmp_path):
    from kvplan.planning import check

    text = f"""\
schema: kvplan.capacity/1
deployments:
  - name: tight
    model: llama-3.1-8b
    gpu: rtx-4090
    engine: {{name: llamacpp, n_ubatch: 1024, flash_attn: "off"}}
    max_model_len: {8192}
    requires: {{min_concurrency: {{concurrency: 1, context: 8k}}}}
"""
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    dep = check.load_plan(path).deployments[0].deployment
    assert (dep.n_ubatch, dep.flash_attn) == (1024, "off")
    from kvplan.planning.plan import capacity

    assert capacity(dep).engine_profile.compute.gpu_bytes == \
        8192 * 1024 * 32 * 4 + 8192 * 1024 * 4 + 4 * 4096 * 1024 * 4
    path.write_text(text.replace('"off"', '"sometimes"'))
    with pytest.raises(SpecError, match="engine.flash_attn.*on, off or auto"):
        check.load_plan(path)


def test_launch_command_sets_ubatch_and_flash_attn():
    from kvplan.planning.launch import from_command

    plan = from_command("llama-server -hf meta-llama/Llama-3.1-8B-Instruct -c 8192 -ub 256 "
                        "-fa off")
    assert plan.overrides["n_ubatch"] == 256
    assert plan.overrides["flash_attn"] == "off"


def test_explain_sets_the_logged_micro_batch_and_shows_the_compute_buffer():
    """`kvplan explain` on a llama.cpp log reads -ub and -fa from it and puts kvplan's compute
    buffer beside the logged one (an estimate: 'info', never a DIFF)."""
    from kvplan.planning.explain import explain

    e = BY_ID["llamacpp-kaggle-llama31-8b-t4-c8192-nofa"]["reported"]
    log = "\n".join([
        "llama_new_context_with_model: n_ctx      = 8192",
        "llama_new_context_with_model: n_ubatch   = 512",
        "llama_new_context_with_model: flash_attn = 0",
        "llama_new_context_with_model: KV self size  = 1024.00 MiB, K (f16):  512.00 MiB, "
        "V (f16):  512.00 MiB",
        f"llama_new_context_with_model:      CUDA0 compute buffer size = "
        f"{e['cuda_compute_mib']:8.2f} MiB",
        f"llama_new_context_with_model:  CUDA_Host compute buffer size = "
        f"{e['host_compute_mib']:8.2f} MiB"])
    rows = {r.quantity: r for r in explain(log, model="llama-3.1-8b").rows}
    assert rows["compute_mib"].logged == 560.0 and rows["compute_mib"].status == "info"
    assert rows["compute_mib"].kvplan == (8192 * 512 * 32 * 4 + 8192 * 512 * 4
                                          + 4 * 4096 * 512 * 4) / MIB
    with_fa = explain(log.replace("flash_attn = 0", "flash_attn = 1"), model="llama-3.1-8b")
    fa = {r.quantity: r for r in with_fa.rows}["compute_mib"]
    assert fa.kvplan == (128256 * 512 * 4 + 4096 * 512 * 4) / MIB  # the logits phase


# --- SGLang ---------------------------------------------------------------------------------

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


@pytest.mark.parametrize("log_id, within_gib", [
    ("sglang-docs-llama31-8b-h100-2025-01", 0.08), ("sglang-h100-qwen3-30b-a3b-fp8-2026-08", 0.01)])
def test_sglang_budget_subtracts_the_weights_as_free_memory_sees_them(log_id, within_gib):
    # model_runner.py::profile_max_num_token sizes the pool from get_available_gpu_memory read
    # after the load (torch.cuda.empty_cache, then mem_get_info; its GB are GiB), so the
    # weights the budget takes off are the drop its two "avail mem" lines show: the allocator's
    # segments and the fp32 rotary caches, more than the tensors' own bytes
    e = BY_ID[log_id]
    r = e["reported"]
    logged = (r["avail_before_load_gb"] - r["avail_after_load_gb"]) * GIB
    mem, _ = sglang_predict(e)
    assert mem.free_before_load_bytes - mem.free_after_load_bytes == mem.weights_bytes
    assert abs(mem.weights_bytes - logged) <= within_gib * GIB
    if e["model"] == "llama-3.1-8b":  # 8,030,261,248 bf16 parameters: the tensors alone
        tensors = 8_030_261_248 * 2
        assert abs(mem.weights_bytes - logged) < abs(tensors - logged)
        # Llama 3.1's rope cache: 131,072 positions x 128 (cos and sin) x 4 B, kept in fp32
        assert mem.weights_bytes - tensors >= 131_072 * 128 * 4


def test_sglang_prefill_graph_sizes_as_the_log_lists_them():
    # the 2026-08 H100 log captures [4, 8, ..., 8192]: 8 + 14 + 8 + 8 + 12 + 8 = 58 sizes
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, 8193, 512)]
    assert sglang.prefill_graph_sizes(8192) == len(sizes) == 58
    assert sglang.prefill_graph_sizes(4096) == sum(s <= 4096 for s in sizes) == 50  # 8+14+8+8+12


def test_sglang_default_fraction_with_prefill_graphs_matches_the_log():
    # 0.5.23 reserve on an H100 (81,089 MB): 512 + 8,192 x 1.5 + 128 + 2 x 256 + 58 x 8 MB
    h100 = find_gpu("h100").memory_bytes
    mb = h100 / MIB
    expected = round((mb - (512 + 8192 * 1.5 + 1 / 8 * 1024 + 2 * 256 + 58 * 8)) / mb, 3)
    assert sglang.sglang_default_mem_fraction(h100, version=(0, 5, 23)) == expected == 0.829
    assert sglang.sglang_default_mem_fraction(h100, version=(0, 5, 23),
                                         prefill_cuda_graph=False) == 0.834
    # MLA backends reserve 1.5 GiB for their prefill graphs instead
    assert sglang.sglang_default_mem_fraction(h100, version=(0, 5, 23), mla=True) == \
        round((mb - (512 + 8192 * 1.5 + 128 + 512 + 1536)) / mb, 3)
    # what the log's own numbers imply: 1 - (after - rest) / before, rest = the K+V pool
    e = BY_ID["sglang-h100-qwen3-30b-a3b-fp8-2026-08"]["reported"]
    rest = e["max_total_num_tokens"] * 48 * 4 * 128 * 2 * 2 / GIB
    implied = 1 - (e["avail_after_load_gb"] - rest) / e["avail_before_load_gb"]
    assert abs(implied - expected) <= 0.002


def test_sglang_default_fraction_of_the_2025_docs_log():
    e = BY_ID["sglang-docs-llama31-8b-h100-2025-01"]
    mem, _ = sglang_predict(e)
    assert mem.mem_fraction_static == e["reported"]["mem_fraction_static"] == 0.88


@pytest.mark.parametrize("e", entries("sglang"), ids=lambda e: e["id"])
def test_sglang_tokens_within_2_percent(e):
    _, tokens = sglang_predict(e)
    assert abs(error(tokens, e["reported"]["max_total_num_tokens"])) <= 0.02


# --- TensorRT-LLM -------------------------------------------------------------------------------

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


# --- the table in docs/engine-accuracy.md ---------------------------------------------------

def accuracy_table() -> str:
    rows = ["| log | engine | setting | logged | kvplan | error | counted |",
            "| --- | --- | --- | ---: | ---: | ---: | --- |"]

    def add(e: dict[str, Any], what: str, logged: float, got: float, fmt: str) -> None:
        rows.append(f"| {e['id']} | {e['engine']} | {what} | {logged:{fmt}} | {got:{fmt}} | "
                    f"{error(got, logged):+.2%} | {'yes' if e['counted'] else 'no'} |")

    for e in entries("llamacpp"):
        s, c = e["settings"], llamacpp_buffers(e)
        what = (f"n_ctx {s['n_ctx']:,}, -ub {s['n_ubatch']}, -fa {s['flash_attn']}: GPU compute "
                f"MiB ({c.phase})")
        add(e, what, e["reported"]["cuda_compute_mib"], c.gpu_mib, ",.2f")
        add(e, "host compute MiB", e["reported"]["host_compute_mib"], c.host_mib, ",.2f")
    for e in entries("sglang"):
        mem, tokens = sglang_predict(e)
        r = e["reported"]
        add(e, f"{e['gpu']}, mem_fraction_static {mem.mem_fraction_static}: free before load GB",
            r["avail_before_load_gb"], mem.free_before_load_bytes / GIB, ".2f")
        add(e, "free after load GB", r["avail_after_load_gb"], mem.free_after_load_bytes / GIB,
            ".2f")
        add(e, "max_total_num_tokens", r["max_total_num_tokens"], tokens, ",.0f")
    for e in entries("trtllm"):
        mem, prof = trtllm_predict(e)
        r, st = e["reported"], e["settings"]
        flow = "PyTorch backend" if st["backend"] == "pytorch" else "TRT engine"
        add(e, f"{e['gpu']}, {flow}, fraction {st['free_gpu_memory_fraction']}: total GiB",
            r["total_gib"], mem.total_bytes / GIB, ".2f")
        if "weights_gib" in r:
            add(e, "weights GiB (inside torch)", r["weights_gib"], mem.weights_bytes / GIB, ".2f")
            add(e, "activations GiB (inside torch)", r["activation_gib"],
                mem.activation_bytes / GIB, ".2f")
        if "engine_mib" in r:
            add(e, "engine MiB (weights)", r["engine_mib"], mem.weights_bytes / MIB, ",.0f")
            add(e, "execution context MiB (activations)", r["execution_context_mib"],
                mem.activation_bytes / MIB, ",.0f")
        if st["backend"] == "pytorch":
            add(e, "available GiB (x fraction; non-torch as logged: unified memory)",
                r["available_gib"], prof.kv_cache_bytes / GIB, ".2f")
        else:
            add(e, "available GiB", r["available_gib"], mem.free_bytes / GIB, ".2f")
        if "tokens" in r:
            add(e, "tokens", r["tokens"], prof.kv_cache_tokens, ",.0f")
        elif "blocks" in r:
            add(e, "blocks", r["blocks"], prof.num_blocks, ",.0f")
    return "\n".join(rows) + "\n"


def test_accuracy_doc_is_current():
    assert_in_accuracy_doc(accuracy_table(), __file__)


if __name__ == "__main__":
    print(accuracy_table(), end="")
