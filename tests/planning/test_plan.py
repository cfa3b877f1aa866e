"""The planner's questions (library) and `kvplan plan` / `kvplan compare` (CLI)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import paths
import pytest
from factories import FullAttention, ModelSpec, SlidingWindow, dense, hybrid
from hypothesis import given, settings
from hypothesis import strategies as st
from probes import probe
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.dtypes import cdiv
from kvplan.core.errors import BadInputError
from kvplan.engines.registry import get as get_engine
from kvplan.planning import plan

GIB = 2**30
FIXTURES = paths.FIXTURES / "engines" / "models"
LLAMA8B = str(FIXTURES / "llama-3.1-8b.yaml")  # with num_params, for estimated budgets
runner = CliRunner()


def llama8b() -> ModelSpec:
    return replace(dense(), name="llama-3.1-8b", num_params=8030261248)


def cap60(**kw) -> plan.Capacity:
    """Llama-3.1-8B with vLLM's 60 GiB worked example: 30,720 blocks of 16 tokens."""
    dep = plan.Deployment(llama8b(), kv_memory_bytes=60 * GIB, max_model_len=131072, **kw)
    return plan.capacity(dep)


def invoke(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "120"})


# --- concurrency and context -------------------------------------------------------------------

def test_max_concurrency_counts_the_null_block():
    cap = cap60()
    assert cap.engine_profile.num_blocks == 30720
    r = plan.max_concurrency(cap, 8192)
    # vLLM prints 60.00x (30,720 / 512), but one block is the null block: 59 whole requests
    assert r.engine_concurrency == 60.0
    assert r.max_requests == (30720 - 1) // 512 == 59
    assert r.units_per_request == (512,)
    # one token more needs a 513th block per request
    assert plan.max_concurrency(cap, 8193).max_requests == 30719 // 513
    assert plan.max_concurrency(cap, 131073).limited_by == "max_model_len"


def test_max_context_is_tight():
    cap = cap60()
    r = plan.max_context(cap, 64)
    assert r.max_context_tokens == 30719 // 64 * 16  # 479 blocks each
    assert plan.max_context(cap, 1).limited_by == "max_model_len"
    assert plan.max_context(cap, 40000).max_context_tokens == 0


@settings(max_examples=60, deadline=None)
@given(blocks=st.integers(1, 50_000), block_size=st.sampled_from([1, 16, 32, 64, 544]),
       concurrency=st.integers(1, 300), window=st.integers(0, 5000),
       limit=st.integers(1, 2_000_000))
def test_largest_context_fits_and_one_more_does_not(blocks, block_size, concurrency, window,
                                                    limit):
    needs = [plan.Need("full", block_size, shareable=True)]
    if window:
        needs.append(plan.Need("window", block_size, cap=window, extra_blocks=1))
    pool = plan.Pool("vllm", (plan.Constraint("blocks", "block", blocks, tuple(needs)),), limit)
    cap = plan.Capacity(plan.Deployment(dense()), get_engine("vllm"), None, None, pool, "bf16", 0,
                        0)
    r = plan.max_context(cap, concurrency)
    if r.max_context_tokens == 0:
        assert not pool.fits(1, concurrency)
    else:
        assert pool.fits(r.max_context_tokens, concurrency)
        assert r.max_context_tokens == limit or not pool.fits(r.max_context_tokens + 1,
                                                              concurrency)


def test_sliding_window_pool_uses_vllm_blocks():
    pair = (SlidingWindow(8, 64, window=128), FullAttention(8, 64))
    spec = ModelSpec("gpt-oss-120b", pair * 18, num_attention_heads=64, num_params=10**9)
    dep = plan.Deployment(spec, kv_memory_bytes=40 * GIB, max_model_len=131072,
                          engine_version="0.11", max_num_batched_tokens=8192)
    cap = plan.capacity(dep)
    r = plan.max_concurrency(cap, 131072)
    assert r.units_per_request == (8192 + 521,)
    assert r.max_requests == (72817 - 1) // 8713


def test_hybrid_mamba_pool_fixed_blocks():
    spec = replace(hybrid(), num_params=80 * 10**9)
    cap = plan.capacity(plan.Deployment(spec, kv_memory_bytes=40 * GIB,
                                        engine_version="0.11", max_model_len=262144))
    assert plan.max_concurrency(cap, 262144).units_per_request == (485,)
    assert plan.max_concurrency(cap, 544).units_per_request == (1 + 3,)


# --- workloads ---------------------------------------------------------------------------------

def test_parse_workload_mix():
    w = plan.parse_workload("64x(2k+512),8x(32k+1k)")
    assert [(g.count, g.prompt_tokens, g.output_tokens) for g in w.groups] == \
        [(64, 2048, 512), (8, 32768, 1024)]
    assert w.num_requests == 72 and w.longest == 33792
    assert plan.parse_workload("(8,192+0)").groups[0].tokens == 8192
    for bad in ("64x2k", "x(1+2)", "0x(1k+1)", "64x(2k+abc)"):
        with pytest.raises(BadInputError):
            plan.parse_workload(bad)


def test_workload_blocks_are_rounded_per_request():
    cap = cap60()
    w = plan.parse_workload("10x(1000+1)")
    result = plan.check_workload(cap, w)
    assert result.uses[0].needed == 10 * 63  # cdiv(1001, 16) each, not cdiv(10,010, 16)
    assert result.fits


def test_shared_prefix_shares_whole_blocks_only():
    cap = cap60()
    w = plan.parse_workload("10x(1000+1)", shared_prefix=1000)
    # 1,000 tokens = 62 whole blocks (+ 8 tokens in a block of its own per request)
    assert plan.check_workload(cap, w).uses[0].needed == 10 * 63 - 9 * 62
    assert plan.check_workload(cap, w).uses[0].shared_saving == 9 * 62
    with pytest.raises(BadInputError, match="longer than the shortest prompt"):
        plan.parse_workload("10x(1000+1)", shared_prefix=2000)


def test_parallel_sampling_shares_the_prompt():
    cap = cap60()
    w = plan.parse_workload("1x(1000+100)", n=4)
    # 4 sequences of cdiv(1,100, 16) = 69 blocks share the prompt's 62 whole blocks
    assert plan.check_workload(cap, w).uses[0].needed == 4 * 69 - 3 * 62
    assert w.num_sequences == 4


def test_workload_that_does_not_fit():
    cap = cap60()
    result = plan.check_workload(cap, plan.parse_workload("100x(32k+1k)"))
    assert not result.fits and "KV blocks" in result.reason
    assert result.max_scale < 1
    too_long = plan.check_workload(cap, plan.parse_workload("1x(128k+1k)"))
    assert not too_long.fits and "longer than the maximum" in too_long.reason


def test_workload_files(tmp_path):
    jsonl = tmp_path / "w.jsonl"
    jsonl.write_text('{"prompt_tokens": 1000, "output_tokens": 24}\n\n'
                     '{"prompt": 2000, "output": 48}\n{"prompt": 1000, "output": 24}\n')
    w = plan.parse_workload(str(jsonl))
    assert w.num_requests == 3 and {g.count for g in w.groups} == {1, 2}
    csv = tmp_path / "w.csv"
    csv.write_text("prompt_tokens,output_tokens\n100,10\n200,x\n")
    with pytest.raises(BadInputError, match="line 3"):
        plan.parse_workload(str(csv))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": 10, "output": 1}\n{"prompt": 10}\n')
    with pytest.raises(BadInputError, match="line 2: no output length"):
        plan.parse_workload(str(bad))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"prompt": 10, "output": 1}\n{oops\n')
    with pytest.raises(BadInputError, match="line 2: not valid JSON"):
        plan.parse_workload(str(broken))
    with pytest.raises(BadInputError, match="cannot read"):
        plan.parse_workload(str(tmp_path / "missing.jsonl"))


# --- layouts, decode, offload, suggestions -----------------------------------------------------

def llama70b() -> ModelSpec:
    return replace(dense(layers=80, heads=64), name="llama-3.1-70b", num_params=70553706496)


def test_candidate_layouts_respect_heads():
    spec = replace(dense(layers=48, kv_heads=8, heads=40), num_params=10**9)
    assert plan.candidate_layouts(spec, 3) == [(1, 3)]  # 40 heads: TP 3 impossible
    assert plan.candidate_layouts(spec, 4) == [(4, 1), (2, 2), (1, 4)]


def test_fewest_gpus():
    dep = plan.Deployment(llama70b(), gpu_name="H100 SXM", gpu_memory_bytes=85028896768,
                          max_model_len=32768)
    small = plan.fewest_gpus(dep, plan.Target(context_tokens=32768, concurrency=8))
    assert small.best is not None and (small.best.tp, small.best.pp) == (4, 1)
    # 1 GPU cannot hold the weights; 2 leave 3.3 GiB (no 32k request); 4 hold 14 requests
    assert [o.meets_target for o in small.options] == [False, False, False, True, True, True]
    assert small.options[0].error.startswith("no memory is left")
    fits = {(o.tp, o.pp): o.max_requests for o in small.options[1:]}
    assert fits == {layout: _llama70b_h100_requests_at_32k(*layout) for layout in fits} == {
        (2, 1): 0, (1, 2): 0, (4, 1): 14, (2, 2): 14, (1, 4): 14}
    big = plan.fewest_gpus(dep, plan.Target(context_tokens=32768, concurrency=32))
    assert big.best is not None and (big.best.tp, big.best.pp) == (8, 1)
    assert {o.num_gpus for o in big.options} == {1, 2, 4, 8}  # powers of two by default
    every = plan.fewest_gpus(dep, plan.Target(context_tokens=32768, concurrency=32),
                             counts=range(1, 9))
    assert every.best is not None and (every.best.tp, every.best.pp) == (1, 7)
    by_layout = {(o.tp, o.pp): o.max_requests for o in every.options if o.num_gpus in (5, 6, 7)}
    hand = {layout: _llama70b_h100_requests_at_32k(*layout) for layout in by_layout}
    assert by_layout == hand == {(1, 5): 21, (2, 3): 28, (1, 6): 27, (1, 7): 34}  # 5, 6 < 32
    impossible = plan.fewest_gpus(dep, plan.Target(context_tokens=32768, concurrency=10**6),
                                  max_gpus=2)
    assert impossible.best is None


def _llama70b_h100_requests_at_32k(tp: int, pp: int) -> int:
    """By hand: 32k requests of Llama-3.1-70B on H100s under vLLM 0.33's budget, as
    kvplan.engines.vllm.budget / memory document it. Per stage (get_pp_indices split;
    embeddings on the first stage, LM head on the last): ceil(total x 0.92) - weights / TP -
    activations - 64 MiB of kernels - the CUDA-graph estimate. Activations = 8,192 tokens x
    (3 x 28,672 / TP + 3 x 8,192) x 2 B, or on the last stage the sampler's 1,024 seqs x
    128,256 vocab x 14 B (one Triton pass) + the 8,192 tokens' hidden states when larger.
    Graphs (1,024 seqs: 51 piecewise + 51 full) = twice the 512-token forward + 100 later
    graphs x the stage's layers x 156 KiB. Blocks = the smallest stage's budget // (16 tokens x
    its layers x K+V x 8/TP heads x 128 x 2 B), less the null block, // 2,048 blocks per 32k
    request."""
    params, vocab, hidden, inter = 70553706496, 128256, 8192, 28672
    layers = [80 // pp] * pp
    for i in range(2, 80 % pp + 2):
        layers[-i] += 1
    embedding, layer_bytes = vocab * hidden * 2, (params - 2 * vocab * hidden) * 2
    per_token = (3 * inter // tp + 3 * hidden) * 2
    graphs = 2 * 512 * per_token + 100 * max(layers) * 156 * 1024
    blocks = []
    for i, n in enumerate(layers):
        weights = (layer_bytes * n // 80 + embedding * (i == 0) + embedding * (i == pp - 1)) // tp
        act = 8192 * per_token
        if i == pp - 1:
            act = max(act, 1024 * vocab * 14 + 8192 * hidden * 2)
        budget = int(math.ceil(85028896768 * 0.92) - (weights + act + 64 * 2**20) - graphs)
        blocks.append(budget // (16 * n * 2 * (8 // tp) * 128 * 2))
    return (min(blocks) - 1) // 2048


def test_decode_floor():
    dep = plan.Deployment(llama8b(), gpu_name="H100", gpu_memory_bytes=85028896768,
                          gpu_bandwidth_bytes_per_s=3_350_000_000_000, max_model_len=32768)
    cap = plan.capacity(dep)
    d = plan.decode_floor(cap, 8, 4096)
    assert d.kv_bytes_per_gpu == 8 * 4096 * 131072
    assert d.bytes_per_step == d.weights_read_bytes_per_gpu + d.kv_bytes_per_gpu
    assert d.ms_per_token == pytest.approx(d.bytes_per_step / 3.35e12 * 1000)
    assert d.tokens_per_s == pytest.approx(8 / (d.ms_per_token / 1000))
    with pytest.raises(BadInputError, match="bandwidth"):
        plan.decode_floor(cap60(), 1, 1)


def test_offload_capacity_matches_vllm_cpu_blocks():
    o = plan.offload_capacity(cap60(), 4 * GIB, 8192)
    assert o.num_cpu_blocks == 2048 and o.tokens == 2048 * 16  # RTX 3090 log: 2,048
    assert o.requests_at_context == 4


def test_suggestions_name_a_smaller_dtype():
    cap = cap60()
    target = plan.Target(context_tokens=8192, concurrency=100)
    assert not target.met_by(cap)
    tips = plan.suggestions(cap, target)
    assert tips.max_concurrency_at_context == 59
    assert tips.max_context_at_concurrency == 30719 // 100 * 16
    assert tips.kv_dtype_that_fits == "fp8"


def test_other_engines_build_pools():
    spec = llama8b()
    # no engine can hold more 8k requests (1 GiB each) than 80 GiB less the bf16 weights
    ceiling = (80 * GIB - 8030261248 * 2) // (8192 * 131072)  # 65
    for engine in ("sglang", "trtllm", "hf"):
        cap = plan.capacity(plan.Deployment(spec, engine=engine, gpu_memory_bytes=80 * GIB,
                                            max_model_len=32768))
        assert 40 < plan.max_concurrency(cap, 8192).max_requests <= ceiling, engine
    cpp = plan.capacity(plan.Deployment(spec, engine="llamacpp", max_model_len=16384,
                                        parallel=4))
    assert cpp.engine_profile.cells == 16384
    assert plan.max_concurrency(cpp, 4096).max_requests == 4
    assert plan.max_concurrency(cpp, 8192).limited_by == "max_model_len"  # 4,096 per slot
    with pytest.raises(BadInputError, match="no memory to plan with"):
        plan.capacity(plan.Deployment(spec))
    with pytest.raises(BadInputError, match="unknown engine"):
        plan.capacity(plan.Deployment(spec, engine="lmdeploy", kv_memory_bytes=GIB))


# --- the CLI -----------------------------------------------------------------------------------

PLAN_KEYS = {"schema", "kvplan_version", "deployment", "budget", "engine", "log_lines",
             "answer", "target_met", "tables", "notes", "warnings",
             # the verdict (kvplan.planning.verdict), added by issue 20
             "fits", "engine_starts", "reason", "budget_terms"}


def test_cli_concurrency_at_context_json():
    res = invoke("plan", LLAMA8B, "--kv-memory", "60GiB", "--max-model-len", "128k",
                 "--context", "8k", "-f", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "kvplan.plan/1" and set(doc) == PLAN_KEYS
    assert doc["engine"]["num_blocks"] == 30720
    assert doc["engine"]["kv_cache_tokens"] == 491520
    assert doc["answer"]["max_concurrency"] == 59
    assert doc["log_lines"][0] == "Available KV cache memory: 60.0 GiB"
    assert doc["target_met"] is True


def test_cli_target_not_met_exits_1_with_suggestions():
    res = invoke("plan", LLAMA8B, "--kv-memory", "60GiB", "--max-model-len", "128k",
                 "--context", "8k", "--concurrency", "100", "-f", "json")
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert doc["target_met"] is False
    fits = {r["name"]: r["value"] for r in doc["tables"]["What fits instead"]}
    assert fits["max_concurrency_at_context"] == "59" and fits["kv_dtype_that_fits"] == "fp8"


def test_cli_context_at_concurrency_table():
    res = invoke("plan", LLAMA8B, "--kv-memory", "60GiB", "--max-model-len", "128k",
                 "--concurrency", "64")
    assert res.exit_code == 0, res.output
    assert "max_context_tokens" in res.stdout and "7,664" in res.stdout  # 479 blocks x 16


def test_cli_workload(tmp_path):
    ok = invoke("plan", LLAMA8B, "--kv-memory", "60GiB", "--requests", "64x(2k+512)",
                "--shared-prefix", "1k", "-f", "json")
    assert ok.exit_code == 0, ok.output
    answer = json.loads(ok.stdout)["answer"]
    assert answer["fits"] is True and answer["requests"] == 64
    full = invoke("plan", LLAMA8B, "--kv-memory", "60GiB", "--requests", "100x(32k+1k)")
    assert full.exit_code == 1
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"prompt": 100, "output": 10}\n{"prompt": 100, "output": 10}\n'
                    '{"prompt": -5, "output": 10}\n')
    bad = invoke("plan", LLAMA8B, "--kv-memory", "60GiB", "--requests", str(rows))
    assert bad.exit_code == 2 and "line 3" in bad.stderr


def test_cli_estimated_budget_with_gpu_and_decode_floor():
    res = invoke("plan", LLAMA8B, "--gpu", "h100", "--context", "32k", "-f", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["budget"]["method"] == "estimated"
    assert doc["budget"]["utilization"] == 0.92  # vLLM 0.33 default
    # batch 13: (budget // 2 MiB blocks - 1 null block) // 2,048 blocks per 32k request; the
    # budget as in test_report.test_capacity_rows_follow_the_budget: weights, the sampler's one
    # Triton pass (above the 8,192-token forward), 64 MiB of kernels, the graph estimate
    sampler = 1024 * 128256 * 14 + 8192 * 4096 * 2
    graphs = 2 * 512 * (3 * 14336 + 3 * 4096) * 2 + 100 * 32 * 156 * 1024
    budget = (math.ceil(85_028_896_768 * 0.92) - 8030261248 * 2 - sampler - 64 * 2**20
              - graphs)
    assert (budget // (16 * 131072) - 1) // 2048 == 13
    assert "Decode floor (memory-bound, batch 13, 32,768 tokens)" in doc["tables"]
    md = invoke("plan", LLAMA8B, "--gpu", "h100", "--count", "2", "-f", "markdown")
    assert md.exit_code == 0 and "**Memory per GPU (fullest stage)**" in md.stdout
    old = invoke("plan", LLAMA8B, "--gpu", "h100", "--engine-version", "0.11", "-f", "json")
    assert json.loads(old.stdout)["budget"]["utilization"] == 0.9


def test_cli_find_gpus():
    res = invoke("plan", LLAMA8B, "--gpu-memory", "24GiB", "--context", "32k",
                 "--concurrency", "16", "--find-gpus", "-f", "json")
    assert res.exit_code == 0, res.output
    answer = json.loads(res.stdout)["answer"]
    # vLLM 0.33 budget per GPU (kvplan.engines.vllm.memory's documented model): ceil(24 GiB x
    # 0.92) - bf16 weights / TP - sampler (256 seqs x 128,256 vocab x 14 B + 2,048 x 4,096 bf16
    # hidden states; above the 2,048-token forward) - 64 MiB of kernels - CUDA graphs (twice
    # the 512-token forward + 50 more piecewise and 34 more full graphs x 32 layers x 156 KiB)
    sampler, non_torch = 256 * 128256 * 14 + 2048 * 4096 * 2, 64 * 2**20
    graphs = {tp: 2 * 512 * (3 * 14336 // tp + 3 * 4096) * 2 + 84 * 32 * 156 * 1024
              for tp in (2, 4)}
    budget = {tp: math.ceil(24 * GIB * 0.92) - 8030261248 * 2 // tp - sampler - non_torch
              - graphs[tp] for tp in (2, 4)}
    # 32k tokens = 2,048 blocks of 16; a block is 16 x 131,072 B / TP; one null block
    fits = {tp: (budget[tp] // (16 * 131072 // tp) - 1) // 2048 for tp in (2, 4)}
    assert fits == {2: 6, 4: 17}  # 2 GPUs fall short of 16 requests, 4 hold them
    assert (answer["fewest_gpus"], answer["tp"], answer["max_concurrency"]) == (4, 4, fits[4])
    none = invoke("plan", LLAMA8B, "--find-gpus", "--gpu-memory", "24GiB")
    assert none.exit_code == 2 and "needs a target" in none.stderr


def test_cli_bad_input_exit_2():
    unknown = invoke("plan", LLAMA8B, "--gpu", "h10O")
    assert unknown.exit_code == 2 and "unknown GPU" in unknown.stderr
    tp = invoke("plan", LLAMA8B, "--gpu-memory", "80GiB", "--tp", "3")
    assert tp.exit_code == 2 and "does not divide" in tp.stderr
    small = invoke("plan", LLAMA8B, "--gpu-memory", "12GiB")
    # "does not fit" is an answer, exit 1 as in `check` (issue 11), not bad input
    assert small.exit_code == 1 and "no memory is left" in small.stderr
    both = invoke("plan", LLAMA8B, "--gpu", "h100", "--gpu-memory", "80GiB")
    assert both.exit_code == 2
    count = invoke("plan", LLAMA8B, "--gpu", "h100", "--count", "4", "--tp", "2")
    assert count.exit_code == 2 and "--count is 4" in count.stderr
    engine = invoke("plan", LLAMA8B, "--kv-memory", "1GiB", "--engine", "lmdeploy")
    assert engine.exit_code == 2
    dtype = invoke("plan", LLAMA8B, "--kv-memory", "1GiB", "--kv-dtype", "int4:g64")
    assert dtype.exit_code == 2 and "vLLM has no --kv-cache-dtype" in dtype.stderr


@pytest.mark.parametrize("engine", ["sglang", "trtllm", "llamacpp", "hf"])
def test_cli_other_engines(engine):
    res = invoke("plan", LLAMA8B, "--gpu-memory", "80GiB", "--engine", engine,
                 "--max-model-len", "16k", "--context", "4k", "-f", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    # at most what 80 GiB less the bf16 weights holds in 4k requests of 512 MiB: 130
    ceiling = (80 * GIB - 8030261248 * 2) // (4096 * 131072)
    assert doc["deployment"]["engine"] == engine
    assert 1 <= doc["answer"]["max_concurrency"] <= ceiling


def test_cli_csv_is_one_row():
    res = invoke("plan", LLAMA8B, "--kv-memory", "60GiB", "--context", "8k", "-f", "csv")
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("model,engine,gpu,tp,pp,kv_dtype,")


def test_cli_host_offload():
    res = invoke("plan", LLAMA8B, "--kv-memory", "60GiB", "--context", "8k", "--host-memory",
                 "4GiB", "-f", "json")
    rows = {r["name"]: r["value"] for r in
            json.loads(res.stdout)["tables"]["KV offload to host memory (per GPU)"]}
    assert rows["num_cpu_blocks"] == "2,048"


def test_cli_compare_dtypes_and_engines():
    res = invoke("compare", LLAMA8B, "--gpu-memory", "80GiB", "--kv-dtype", "auto,fp8",
                 "--context", "8k", "--max-model-len", "32k", "-f", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "kvplan.compare/1"
    from kvplan.output.plan import COMPARE_KEYS

    assert all(list(row) == list(COMPARE_KEYS) for row in doc["rows"])
    bf16, fp8 = doc["rows"]
    assert fp8["kv_bytes_per_token"] * 2 == bf16["kv_bytes_per_token"]
    assert fp8["max_concurrency"] >= 2 * bf16["max_concurrency"]
    engines = invoke("compare", LLAMA8B, "--gpu-memory", "80GiB", "--engine",
                     "vllm,sglang,trtllm", "--max-model-len", "32k", "-f", "csv")
    assert engines.exit_code == 0 and len(engines.stdout.strip().splitlines()) == 4
    err = invoke("compare", LLAMA8B, "--gpu-memory", "8GiB", "-f", "json")
    # a row whose engine would not start is exit 1, as in `plan` and `check`
    assert err.exit_code == 1 and "no memory is left" in json.loads(err.stdout)["rows"][0][
        "error"]


def test_plan_json_imports_nothing_heavy():
    result = probe(["plan", LLAMA8B, "--kv-memory", "60GiB", "-f", "json"],
                   ("torch", "numpy", "transformers", "rich"))
    assert result.loaded == [], result.stderr
    assert json.loads(result.stdout)["engine"]["num_blocks"] == 30720  # 60 GiB // 2 MiB: it ran


def test_suggestions_for_a_workload():
    tips = plan.suggestions(cap60(), plan.Target(workload=plan.parse_workload("100x(32k+1k)")))
    assert tips.max_concurrency_at_context == 30719 // cdiv(33792, 16)
    assert tips.max_context_at_concurrency == 30719 // 100 * 16
    assert tips.kv_dtype_that_fits is None  # fp8: 61,439 // 2,112 = 29 requests < 100


# --- which limit binds: KV blocks, max_num_seqs or max_model_len ----------------------------

def _answer(*args: str) -> dict:
    res = invoke("plan", *args, "--format", "json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["answer"]


def test_max_num_seqs_flag_caps_concurrency():
    # 128-token requests hold 128 / 16 = 8 blocks each; thousands fit in an H100's blocks,
    # but vLLM's scheduler never runs more than max_num_seqs at once
    answer = _answer("llama-3.1-8b", "--gpu", "h100", "--context", "128", "--max-num-seqs", "4")
    assert answer["max_concurrency"] == 4
    assert answer["limited_by"] == "max_num_seqs"
    assert answer["engine_concurrency"] > 1000  # the blocks would allow far more


def test_max_num_seqs_engine_default_caps_concurrency():
    # vllm/engine/arg_utils.py get_batch_defaults: >= 70 GiB and not an A100 -> 1,024
    # sequences for the OpenAI server (at most max_num_batched_tokens = 8,192)
    answer = _answer("llama-3.1-8b", "--gpu", "h100", "--context", "128")
    assert (answer["max_concurrency"], answer["limited_by"]) == (min(1024, 8192), "max_num_seqs")
    # below 70 GiB: 256 sequences (the L4)
    answer = _answer("llama-3.1-8b", "--gpu", "l4", "--context", "16", "--max-model-len", "4k")
    assert (answer["max_concurrency"], answer["limited_by"]) == (256, "max_num_seqs")


def test_kv_blocks_and_max_model_len_bind():
    cap = cap60()  # 30,720 blocks, one of them the null block
    long = plan.max_concurrency(cap, 131072)
    assert long.limited_by == "KV blocks"
    assert long.max_requests == (30720 - 1) // (131072 // 16)
    past = plan.max_concurrency(cap, 131073)
    assert (past.max_requests, past.limited_by) == (0, "max_model_len")
    capped = plan.max_concurrency(cap60(max_num_seqs=2), 131072)
    assert (capped.max_requests, capped.limited_by) == (2, "max_num_seqs")


def test_trtllm_max_batch_size_caps_concurrency():
    # tensorrt_llm/llmapi/llm_args.py: max_batch_size defaults to 2,048
    answer = _answer("llama-3.1-8b", "--gpu", "h100", "--engine", "trtllm", "--context", "128")
    assert (answer["max_concurrency"], answer["limited_by"]) == (2048, "max_batch_size")
    answer = _answer("llama-3.1-8b", "--gpu", "h100", "--engine", "trtllm", "--context", "128",
                     "--max-num-seqs", "16")
    assert (answer["max_concurrency"], answer["limited_by"]) == (16, "max_batch_size")


def test_context_question_names_the_request_cap():
    # 2,000 requests at once: more than vLLM's 1,024 max_num_seqs on an H100, at any length
    answer = _answer_any("llama-3.1-8b", "--gpu", "h100", "--concurrency", "2000")
    assert (answer["max_context_tokens"], answer["limited_by"]) == (0, "max_num_seqs")
    answer = _answer_any("llama-3.1-8b", "--gpu", "h100", "--concurrency", "16",
                         "--max-model-len", "8k")
    assert (answer["max_context_tokens"], answer["limited_by"]) == (8192, "max_model_len")


def _answer_any(*args: str) -> dict:
    res = invoke("plan", *args, "--format", "json")
    # 1: the target is not met (a clean exit, not an exception)
    assert res.exit_code in (0, 1) and not isinstance(res.exception, Exception) or \
        isinstance(res.exception, SystemExit), res.output
    return json.loads(res.stdout)["answer"]
