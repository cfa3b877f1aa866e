"""Rules found by running `kvplan explain` on real start-up logs outside the corpus (issue 23's
held-out check): each test holds lines as an engine printed them, with their source, and a
figure derived from the log or a hand calculation written here."""

from __future__ import annotations

from paths import FIXTURES

from kvplan.planning.explain import explain, reading_formats
from kvplan.sources.startlog import read_log

LOGS = FIXTURES / "logs"

GIB = 2**30

# vLLM 0.10.2, Qwen3-235B-A22B-Instruct-2507-FP8 on 8 x L40S with --tensor-parallel-size 8
# --enable-expert-parallel (a public notes page, 'Hosting Qwen3-235B-A22B-Instruct-2507-FP8 on
# 8xL40S', 2025-09-24; tests/fixtures/logs/index.yaml): each worker process logs its own
# budget, in the order they finish, and the engine core then one token count per worker, in
# rank order
TP8 = (LOGS / "vllm" / "vllm-qwen3-235b-fp8-8xl40s-tp8-ep-0.10.2.log").read_text(encoding="utf-8")


def test_a_v1_worker_process_name_gives_its_rank():
    # the first token line is worker TP0's, so its budget is the one printed by
    # "(Worker_TP0_EP0 ...)": 10.68 GiB, not the first budget line's (TP6's 10.64 GiB)
    # (worker TP0's memory advice prints the same budget in bytes, 11,465,081,548: within
    # the printed 10.68 GiB's last digit, and read first)
    facts = read_log(TP8, reading_formats())
    assert abs(facts.kv["available_kv_cache_bytes"] - 10.68 * GIB) <= 0.005 * GIB


def test_the_tp8_log_recomputes_from_rank_0s_budget():
    # 94 layers, 4 KV heads of 128 over 8 ranks = one head a rank (replicated), bf16:
    # 94 x 2 x 128 x 2 bytes = 48,128 bytes a token; 10.68 GiB, +-0.005, holds
    # 238,163-238,386 tokens, whole 16-token blocks 238,160-238,384: 238,208 is inside, and
    # 10.64 GiB (at most 237,399 tokens) could not give it
    per_token = 94 * 2 * 128 * 2
    assert per_token * 238_208 <= (10.68 + 0.005) * GIB
    assert per_token * 238_208 > (10.64 + 0.005) * GIB
    result = explain(TP8, model="qwen3-235b-a22b")
    row = next(r for r in result.rows if r.quantity == "kv_cache_tokens"
               and r.basis == "given the logged budget")
    assert row.logged == 238_208 and row.status == "ok", row


# SGLang's bench_one_batch on gpt-oss-20b with --kv-cache-dtype fp8_e5m2 --max-total-tokens
# 4096 (a public PR write-up of 2025-09-28; the run also overrode num_hidden_layers to 1): a
# pool that prints "0.00 GB" is below the line's last digit, and the server ran on
SGLANG_ZERO = (FIXTURES / "engines" / "sglang-bench-one-batch-gpt-oss-20b-zero-pool.log"
               ).read_text(encoding="utf-8")


def test_a_budget_printed_as_zero_is_below_its_precision_not_a_refusal():
    result = explain(SGLANG_ZERO, model="gpt-oss-20b")
    assert not any("refused to start" in r.note for r in result.rows)
    assert any("below its printed precision" in n for n in result.notes)
    # gpt-oss-20b as kvplan knows it (24 layers, 8 KV heads of 64, fp8: one byte) holds 4,096
    # tokens in 24 x 8 x 64 x 4096 = 50,331,648 bytes of K (0.05 GB), more than the 0.005 GB
    # "0.00 GB" allows: the token line differs (the run's one-layer override is not printed)
    assert 24 * 8 * 64 * 4096 > 0.005e9
    row = next(r for r in result.rows if r.quantity == "max_total_num_tokens")
    assert row.logged == 4096 and row.status == "DIFF", row


# vLLM 0.22.1rc1 on its CPU backend on a Mac (public notes, 'vllm serve
# Qwen/Qwen2.5-1.5B-Instruct --gpu-memory-utilization 0.3'): the API server's banner is the
# only line of the excerpt that names the release
BANNER = (LOGS / "vllm" / "vllm-cpu-macos-qwen25-1.5b-0.22.1rc1-gmu03.log").read_text(
    encoding="utf-8")


def test_the_api_servers_banner_names_the_release():
    facts = read_log(BANNER, reading_formats())
    assert facts.version == "0.22.1rc1.dev495+g2ecf7d0eb"


# vLLM 0.6.4.post1 serving Llama-3.1-8B-Instruct over two GPUs (TP 2; a committed server log,
# https://github.com/0324wy/MapCoder/blob/ff7f2529f16279ac55d6d42c8db4b787d59d78ba/vllm.log):
# each worker prints its own "Memory profiling results" line, the second worker process first
# ("(VllmWorkerProcess pid=...)", kv_cache_size=31.68GiB) and the driver after it (no prefix,
# kv_cache_size=30.55GiB), then "# GPU blocks: 31284": V0's executor takes the least of the
# workers' block counts (distributed_gpu_executor.py determine_num_available_blocks)
V0_TP2 = (LOGS / "vllm" / "vllm-mapcoder-llama31-8b-tp2-0.6.4.post1.log").read_text(
    encoding="utf-8")


def test_v0_workers_budget_lines_give_the_least_as_the_engine_takes_it():
    facts = read_log(V0_TP2, reading_formats())
    assert facts.kv["available_kv_cache_bytes"] == round(30.55 * GIB)


def test_the_v0_tp2_log_recomputes_from_the_least_budget():
    # 32 layers, 8 KV heads of 128 over 2 ranks = 4 a rank, bf16: 32 x 2 x 4 x 128 x 2 =
    # 65,536 bytes a token, 16-token blocks of 1 MiB: 30.55 GiB (+-0.005) holds
    # 31,278-31,288 blocks (31,284 inside); 31.68 GiB holds 32,440 at least
    block = 32 * 2 * 4 * 128 * 2 * 16
    assert block == 2**20
    assert (30.545 * GIB) // block <= 31_284 <= (30.555 * GIB) // block
    assert (31.675 * GIB) // block > 31_284
    result = explain(V0_TP2, model="llama-3.1-8b")
    row = next(r for r in result.rows if r.quantity == "num_blocks"
               and r.basis == "given the logged budget")
    assert row.logged == 31_284 and row.status == "ok", row


# TensorRT-LLM 1.2.0rc4's trtllm-serve (PyTorch backend) with Meta-Llama-3-8B-Instruct on an
# H200 (139.80 GiB), max_seq_len 1025 (a committed server log,
# https://github.com/faradawn/bench3/blob/64ae4f53eaf341cac03be15bf7b0e59960310486/logs/trtllm-serve-egine.log):
# the backend first builds a 34-block pool to profile with ("Allocated 0.13 GiB for max
# tokens in paged KV cache (1088)"), then the 28,150-block pool it serves with
# ("Allocated 109.96 GiB ... (900800)")
TRT_TWO_POOLS = (LOGS / "trtllm" / "trtllm-bench3-llama3-8b-h200-maxtokens1088-1.2.0rc4.log"
                 ).read_text(encoding="utf-8")


def test_trtllm_the_pool_served_with_is_the_last_one_allocated():
    facts = read_log(TRT_TWO_POOLS, reading_formats())
    assert facts.kv["kv_cache_tokens"] == 900_800
    assert facts.kv["num_blocks"] == 28_150
    assert facts.kv["kv_cache_bytes"] == round(109.96 * GIB)


def test_trtllm_the_final_pool_recomputes_from_its_budget():
    # Llama-3-8B: 32 layers, 8 KV heads of 128, bf16: 32 x 2 x 8 x 128 x 2 = 131,072 bytes a
    # token ("kv size is 131072" in the log), 32-token blocks: 28,150 x 32 = 900,800 tokens
    # of 118,065,971,200 bytes = 109.957 GiB, "109.96 GiB"
    assert 28_150 * 32 == 900_800
    assert abs(900_800 * 131_072 / GIB - 109.96) < 0.005
    result = explain(TRT_TWO_POOLS, model="llama-3-8b")
    checked = [r for r in result.rows if r.basis == "given the logged budget"]
    assert {r.quantity for r in checked} >= {"num_blocks", "kv_cache_tokens"}
    assert all(r.status == "ok" for r in checked), checked


def test_trtllm_banner_and_executor_settings_are_read():
    facts = read_log(TRT_TWO_POOLS, reading_formats())
    assert facts.version == "1.2.0rc4"
    # "max_seq_len=1025, max_num_requests=32, max_num_tokens=1024, max_batch_size=32"
    assert facts.settings["max_model_len"] == 1025
    assert facts.settings["max_num_batched_tokens"] == 1024
    assert facts.settings["max_num_seqs"] == 32


# vLLM 0.22.1 over two T4s serving Qwen3-8B with a LoRA adapter (a committed Kaggle server log,
# https://github.com/trietnguyeminh/Submission---EXACT--IJCNN/blob/9bbbb12581eaeef6750c3d90c9672a00b8746106/vllm_server.log):
# its non-default args set lora_modules, which kvplan's vLLM model does not size, beside
# settings it reads (enable_lora, max_model_len, tensor_parallel_size, ...)
LORA = (LOGS / "vllm" / "vllm-exact-qwen3-8b-2xt4-tp2-0.22.1.log").read_text(encoding="utf-8")
# vLLM 0.11.0's LLM class running Qwen3-VL-Embedding-2B as a pooling model on a T4 (a
# committed log, https://github.com/zjpzhao/vllm-qwen3vl-cu118-t4/blob/41aa10721334953fd0755389ffe960c3bf2e5592/logs/verify_qwen3vl_flex.log):
# its args nest dicts ('limit_mm_per_prompt': {'image': 0, 'video': 0})
POOLING = (LOGS / "vllm" / "vllm-qwen3vl-embed-2b-t4-flex-0.11.0.log").read_text(
    encoding="utf-8")


def test_an_echoed_setting_kvplan_does_not_know_is_named_as_a_launch_flag_is():
    notes = " ".join(explain(LORA, model="qwen3-8b", gpu="t4").notes)
    assert "'lora_modules': --lora-modules: not a flag kvplan knows for vllm" in notes
    # the positional, the ignored host/port and the settings kvplan reads are not named
    for key in ("model_tag", "'model'", "'host'", "'port'", "'max_model_len'",
                "'tensor_parallel_size'", "'name'", "'enable_lora'"):
        assert f"set {key}" not in notes and f"set '{key}'" not in notes


def test_keys_inside_an_echoed_value_are_not_settings():
    # Qwen3-VL-2B's language model has Qwen3-1.7B's layers (28, 8 KV heads of 128)
    model = str(FIXTURES / "engines" / "models" / "qwen3-1.7b.yaml")
    notes = " ".join(explain(POOLING, model=model).notes)
    # runner and convert are settings kvplan reads (the runner row); pooler_config is not
    assert "set 'pooler_config': --pooler-config" in notes
    assert "set 'runner'" not in notes and "set 'convert'" not in notes
    assert "'image'" not in notes and "'video'" not in notes


# --- a fourth held-out round (docs/engine-accuracy.md section 8.4) ------------------------

def _log(engine: str, name: str) -> str:
    return (LOGS / engine / name).read_text(encoding="utf-8")


def _row(result, quantity: str):
    return next(r for r in result.rows if r.quantity == quantity
                and r.basis == "given the logged budget")


def test_a_v1_refusal_alone_is_read_as_vllm():
    # mlcommons/mlperf-automations#550: the ValueError of kv_cache_utils.py is the excerpt's
    # only vLLM line. Llama 3.1 8B: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B
    # a token; 4.92 GiB (+-0.005) holds 40,263-40,345 tokens, whole 16-token blocks of them
    # 40,256-40,336: the logged 40,304 is inside
    text = _log("vllm", "vllm-mlperf550-llama31-8b-edge-0.10.log")
    per_token = 32 * 8 * 128 * 2 * 2
    assert (4.92 - 0.005) * GIB // per_token <= 40_304 <= (4.92 + 0.005) * GIB // per_token
    result = explain(text, model="llama-3.1-8b")
    assert result.engine == "vllm"
    assert _row(result, "estimated_max_model_len").status == "ok"


def test_trtllm_08s_byte_line_is_the_budget():
    # TensorRT-LLM#1400 (0.8, an A100): "Allocate 69524783104 bytes for k/v cache." then "Using
    # 132608 tokens"; a Llama-2-7B layout holds 32 x 32 heads x 128 x 2 x 2 B = 524,288 B a
    # token, and 69,524,783,104 / 524,288 is 132,608 exactly
    text = _log("trtllm", "trtllm-i1400-llama-7b-sq-a100.log")
    assert 69_524_783_104 // (32 * 32 * 128 * 2 * 2) == 132_608
    facts = read_log(text, reading_formats())
    assert facts.kv["kv_cache_bytes"] == 69_524_783_104
    assert _row(explain(text, model="llama-2-7b"), "kv_cache_tokens").status == "ok"


def test_ollamas_scheduler_estimate_alone_is_an_ollama_log():
    # ollama#8098: the scheduler's lines without the runner's: memory.required.kv="896.0 MiB"
    # for --ctx-size 8192 --parallel 4 of Llama 3.2 3B (28 layers x 8 KV heads x 128 x 2 x 2 B
    # = 114,688 B a cell; 8,192 cells = 896 MiB)
    text = _log("llamacpp", "ollama-i8098-llama32-3b-4x2048.log")
    assert 8192 * 28 * 8 * 128 * 2 * 2 == 896 * 2**20
    result = explain(text, model="llama-3.2-3b")
    assert result.engine == "ollama"
    assert _row(result, "kv_mib").status == "ok"


def test_the_unmerged_llamacpp_mla_branch_is_named():
    # llama.cpp PR 11446's branch prints a stub cache and the MLA one ("K^R", "c^KV"): not
    # llama.cpp's merged cache, and kvplan says so where its lines differ
    text = _log("llamacpp", "llamacpp-pr11446-deepseek-mla-c32768-2gpu.log")
    result = explain(text, model="deepseek-v3")
    assert any("PR 11446" in n for n in result.notes)


def test_sglang_nsa_on_blackwell_caches_fp8():
    # sglang#11309 (DeepSeek-V3.2-Exp on 8 x B200): 0.5.3's server_args.py sets fp8_e4m3 for
    # DeepSeek NSA on compute capability 10: 61 layers x (656 B of the fp8 record + 132 B of
    # the indexer's key) = 48,068 B a token; 43.67 GiB (+-0.005) is 975,415-975,527 tokens
    text = _log("sglang", "sglang-pr11309-dsv32-exp-8xb200-dp8.log")
    model = str(FIXTURES / "hf-configs" / "deepseek-ai--DeepSeek-V3.2.json")
    per_token = 61 * (656 + 132)
    assert (43.67 - 0.005) * GIB // per_token <= 975_424 <= (43.67 + 0.005) * GIB // per_token
    assert _row(explain(text, model=model, gpu="b200"), "max_total_num_tokens").status == "ok"
    # on a Hopper GPU SGLang keeps the asked dtype (auto: bf16), and the line then differs
    assert _row(explain(text, model=model, gpu="h100"), "max_total_num_tokens").status != "ok"


def test_v1s_memory_advice_gives_the_budget_in_bytes():
    # a public note's vLLM 0.11 run of Qwen3-8B-FP8 (a 24 GB GPU, --max-model-len 1024): the
    # worker's advice prints "Current kv cache memory in use is 9232221491 bytes" beside
    # "Available KV cache memory: 8.60 GiB"; 36 layers x 8 KV heads x 128 x 2 x 2 B = 147,456 B
    # a token: 9,232,221,491 B hold 62,610 tokens, 62,608 in whole 16-token blocks (logged)
    text = _log("vllm", "vllm-qwen3-8b-fp8-24gb-debug-gmu08.log")
    per_token = 36 * 8 * 128 * 2 * 2
    assert 9_232_221_491 // per_token // 16 * 16 == 62_608
    facts = read_log(text, reading_formats())
    assert facts.kv["available_kv_cache_bytes"] == 9_232_221_491
    assert _row(explain(text, model="qwen3-8b"), "kv_cache_tokens").status == "ok"
