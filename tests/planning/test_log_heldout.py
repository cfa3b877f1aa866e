"""Rules found by running `kvplan explain` on real start-up logs outside the corpus (issue 23's
held-out check): each test holds lines as an engine printed them, with their source, and a
figure derived from the log or a hand calculation written here."""

from __future__ import annotations

from kvplan.planning.explain import explain, reading_formats
from kvplan.sources.startlog import read_log

GIB = 2**30

# vLLM 0.10.2, Qwen3-235B-A22B-Instruct-2507-FP8 on 8 x L40S with --tensor-parallel-size 8
# --enable-expert-parallel (a public notes page, 'Hosting Qwen3-235B-A22B-Instruct-2507-FP8 on
# 8xL40S', 2025-09-24): each worker process logs its own budget, in the order they finish,
# and the engine core then one token count per worker, in rank order
TP8 = """\
(APIServer pid=1624) INFO 09-24 20:45:41 [api_server.py:1896] vLLM API server version 0.10.2
(APIServer pid=1624) INFO 09-24 20:45:41 [utils.py:328] non-default args: {'model_tag': 'Qwen/Qwen3-235B-A22B-Instruct-2507-FP8', 'model': 'Qwen/Qwen3-235B-A22B-Instruct-2507-FP8', 'max_model_len': 32768, 'tensor_parallel_size': 8, 'enable_expert_parallel': True, 'swap_space': 0.0}
(Worker_TP6_EP6 pid=2084) INFO 09-24 20:53:40 [gpu_worker.py:298] Available KV cache memory: 10.64 GiB
(Worker_TP2_EP2 pid=2080) INFO 09-24 20:53:40 [gpu_worker.py:298] Available KV cache memory: 10.64 GiB
(Worker_TP7_EP7 pid=2085) INFO 09-24 20:53:40 [gpu_worker.py:298] Available KV cache memory: 10.65 GiB
(Worker_TP0_EP0 pid=2078) INFO 09-24 20:53:40 [gpu_worker.py:298] Available KV cache memory: 10.68 GiB
(Worker_TP4_EP4 pid=2082) INFO 09-24 20:53:40 [gpu_worker.py:298] Available KV cache memory: 10.68 GiB
(Worker_TP5_EP5 pid=2083) INFO 09-24 20:53:40 [gpu_worker.py:298] Available KV cache memory: 10.64 GiB
(Worker_TP1_EP1 pid=2079) INFO 09-24 20:53:41 [gpu_worker.py:298] Available KV cache memory: 10.64 GiB
(Worker_TP3_EP3 pid=2081) INFO 09-24 20:53:41 [gpu_worker.py:298] Available KV cache memory: 10.65 GiB
(EngineCore_DP0 pid=1944) INFO 09-24 20:53:41 [kv_cache_utils.py:864] GPU KV cache size: 238,208 tokens
(EngineCore_DP0 pid=1944) INFO 09-24 20:53:41 [kv_cache_utils.py:868] Maximum concurrency for 32,768 tokens per request: 7.27x
(EngineCore_DP0 pid=1944) INFO 09-24 20:53:41 [kv_cache_utils.py:864] GPU KV cache size: 237,392 tokens
(EngineCore_DP0 pid=1944) INFO 09-24 20:53:41 [kv_cache_utils.py:868] Maximum concurrency for 32,768 tokens per request: 7.24x
"""


def test_a_v1_worker_process_name_gives_its_rank():
    # the first token line is worker TP0's, so its budget is the one printed by
    # "(Worker_TP0_EP0 ...)": 10.68 GiB, not the first budget line's (TP6's 10.64 GiB)
    facts = read_log(TP8, reading_formats())
    assert facts.kv["available_kv_cache_bytes"] == round(10.68 * GIB)


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
SGLANG_ZERO = """\
[2025-09-28 17:07:10 TP0] Load weight begin. avail mem=94.63 GB
[2025-09-28 17:07:10 TP0] Load weight end. type=GptOssForCausalLM, dtype=torch.bfloat16, avail mem=91.91 GB, mem usage=2.72 GB.
[2025-09-28 17:07:10 TP0] Using KV cache dtype: torch.float8_e5m2
[2025-09-28 17:07:10 TP0] KV Cache is allocated. #tokens: 4096, K size: 0.00 GB, V size: 0.00 GB
[2025-09-28 17:07:10 TP0] Memory pool end. avail mem=89.83 GB
max_total_num_tokens=4096
"""


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
