"""kvplan explain: start-up logs read and reconciled. The shared engine logs go through it
and their KV lines agree within 0.5% given the logged budget; a hand-written log in each
engine's own format checks the reader; a wrong line exits 1."""

from __future__ import annotations

import json
from pathlib import Path

import paths
import pytest
import yaml
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.core.errors import BadInputError
from kvplan.planning.explain import explain, log_formats, reading_formats
from kvplan.sources import startlog

FIXTURES = paths.FIXTURES / "engines"
CORPUS = paths.FIXTURES / "logs"
MODELS = FIXTURES / "models"
LOGS = {e["id"]: e for e in yaml.safe_load((FIXTURES / "engine-logs.yaml").read_text())
        ["entries"]}
runner = CliRunner()
GIB = 2**30

# the model (and, where the excerpt does not print it, the KV dtype) each excerpt ran: the
# entry's own `model` / `kv_cache_dtype` fields, as kvplan names them
# (the SGLang QwQ excerpt is rank TP0's: the entry says TP 4)
TP = {"sglang-doc-qwq-32b-tp4-24gb": 4}
RUNS = {
    "vllm-i10517-llama31-8b-rtx3090-mml29000": ("llama-3.1-8b", None),
    "vllm-pr20665-deepseek-v2-lite-4xl4-tp2-pp2": (None, None),  # the log names it
    "lmcache-i1739-qwen3-14b-1gpu": (str(MODELS / "qwen3-14b.yaml"), None),
    "vllm-doc-qwen25-7b-awq-rtx4080": (str(MODELS / "qwen2.5-7b.yaml"), None),
    "vllm-doc-mistral7b-gptq-dgx-spark": (str(MODELS / "mistral-7b-v0.2.yaml"), None),
    "vllm-doc-llama2-7b-rocm-throughput": ("llama-2-7b", None),
    "sglang-i21348-qwen3-235b-fp8-4xh100-tp4": (None, None),  # the log names it
    "sglang-doc-qwq-32b-tp4-24gb": (str(MODELS / "qwq-32b.yaml"), None),
    "trtllm-doc-llama31-8b-fp8-rtx5090": ("llama-3.1-8b", "fp8"),
}


@pytest.mark.parametrize("log_id", sorted(RUNS))
def test_shared_logs_kv_lines_agree_given_the_logged_budget(log_id):
    model, kv = RUNS[log_id]
    if model and model.endswith(".yaml"):  # a missing fixture fails: a skip would hide it
        assert Path(model).exists(), f"no fixture spec {model}"
    e = LOGS[log_id]
    result = explain(e["excerpt"], model=model, kv_dtype=kv, tp=TP.get(log_id))
    checked = [r for r in result.rows if r.basis == "given the logged budget"]
    assert checked, f"{log_id}: no KV line recomputed"
    for row in checked:
        assert row.status == "ok", (log_id, row)


def test_an_eagle_drafters_layer_shares_the_pool():
    # vllm-i19996: Llama-3.1-8B with an EAGLE head of one decoder layer, whose KV layer vLLM
    # puts in the same pool: 33 layers x 2 x 8 heads x 128 x 2 B = 135,168 B a token, 16-token
    # blocks of 2,162,688 B; 51.63 GiB holds floor(51.63 x 2^30 / 2,162,688) = 25,633 blocks
    # = 410,128 tokens, the issue's own figure
    excerpt = LOGS["vllm-i19996-llama31-8b-eagle-h100"]["excerpt"]
    assert int(51.63 * GIB) // 2_162_688 * 16 == 410_128
    plain = explain(excerpt, model="llama-3.1-8b")
    tokens = next(r for r in plain.rows if r.quantity == "kv_cache_tokens")
    assert tokens.status == "DIFF"  # without the draft layer: 32/33 too few layers
    assert tokens.kvplan == pytest.approx(410_128 * 33 / 32, rel=0.001)
    drafted = explain(excerpt, model="llama-3.1-8b", draft_layers=1)
    tokens = next(r for r in drafted.rows if r.quantity == "kv_cache_tokens")
    assert (tokens.status, tokens.kvplan) == ("ok", 410_128)


def test_a_logged_speculative_config_asks_for_the_drafters_layers():
    log = _v1_log(409_584).replace(
        "speculative_config=None", "speculative_config=SpeculativeConfig(method='eagle', "
        "model='yuhuili/EAGLE-LLaMA3.1-Instruct-8B', num_spec_tokens=3)")
    facts = startlog.read_log(log, reading_formats())
    assert facts.settings["speculative_method"] == "eagle"
    assert facts.settings["num_speculative_tokens"] == 3
    result = explain(log)
    assert any("--draft-layers" in n and "eagle" in n for n in result.notes)
    ngram = explain(log.replace("method='eagle'", "method='ngram'"))
    assert not any("--draft-layers" in n for n in ngram.notes)  # no drafter layers
    res = runner.invoke(app, ["explain", "-", "--draft-layers", "1"], input=log)
    assert res.exit_code == 1  # the 32-layer figure no longer agrees with 33 layers
    with pytest.raises(BadInputError, match="--draft-layers"):
        explain(LOGS["sglang-doc-qwq-32b-tp4-24gb"]["excerpt"],
                model=str(MODELS / "qwq-32b.yaml"), tp=4, draft_layers=1)


def _v1_log(tokens: int, model: str = "meta-llama/Llama-3.1-8B-Instruct") -> str:
    return (
        "INFO 06-23 14:20:01 [core.py:69] Initializing a V1 LLM engine (v0.9.1) with config: "
        f"model='{model}', speculative_config=None, tokenizer='{model}', dtype=torch.bfloat16, "
        "max_seq_len=32768, download_dir=None, load_format=auto, tensor_parallel_size=1, "
        "pipeline_parallel_size=1, quantization=None, enforce_eager=False, "
        "kv_cache_dtype=auto, device_config=cuda\n"
        "INFO 06-23 14:20:40 [gpu_model_runner.py:1595] Model loading took 14.9889 GiB and "
        "3.1 seconds\n"
        "INFO 06-23 14:21:48 [gpu_worker.py:232] Available KV cache memory: 50.00 GiB\n"
        f"INFO 06-23 14:21:48 [kv_cache_utils.py:716] GPU KV cache size: {tokens:,} tokens\n"
        "INFO 06-23 14:21:48 [kv_cache_utils.py:720] Maximum concurrency for 32,768 tokens "
        f"per request: {tokens / 32768:.2f}x\n")


def test_a_v1_log_in_vllms_own_words():
    # 50 GiB / (16 tokens x 131,072 B) = 25,600 blocks; vLLM keeps one as the null block:
    # 25,599 x 16 = 409,584 tokens
    tokens = (50 * GIB // (16 * 131_072) - 1) * 16
    facts = startlog.read_log(_v1_log(tokens), reading_formats())
    assert (facts.engine, facts.version, facts.model) == ("vllm", "0.9.1",
                                                          "meta-llama/Llama-3.1-8B-Instruct")
    assert facts.settings["max_model_len"] == 32768 and facts.settings["tp"] == 1
    assert facts.weights_bytes == round(14.9889 * GIB)
    result = explain(_v1_log(tokens))
    assert result.ok and result.model == "llama-3.1-8b"


def test_cli_exits_1_when_a_kv_line_differs(tmp_path):
    good = tmp_path / "good.log"
    good.write_text(_v1_log((50 * GIB // (16 * 131_072) - 1) * 16))
    ok = runner.invoke(app, ["explain", str(good), "-f", "json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["ok"] is True
    bad = tmp_path / "bad.log"
    bad.write_text(_v1_log(300_000))  # 27% fewer tokens than the budget gives
    result = runner.invoke(app, ["explain", str(bad)])
    assert result.exit_code == 1
    assert "DIFF" in result.stdout


def test_llamacpp_kv_line():
    # Llama-3.2-3B, 4,096 cells: 28 layers x 8 KV heads x 128 x 2 bytes x 4,096 = 224 MiB each
    log = ("llama_model_loader: - kv   2: general.name str = Llama 3.2 3B Instruct\n"
           "llama_context: n_ctx         = 4096\nllama_context: n_seq_max     = 1\n"
           "llama_kv_cache_unified:        CPU KV buffer size =   448.00 MiB\n"
           "llama_kv_cache_unified: size =  448.00 MiB (  4096 cells,  28 layers,  1/1 seqs), "
           "K (f16):  224.00 MiB, V (f16):  224.00 MiB\n")
    facts = startlog.read_log(log, reading_formats())
    assert facts.engine == "llamacpp" and facts.kv["cells"] == 4096
    assert facts.kv["k_mib"] == 224.0 and facts.settings["kv_dtype"] == "f16"
    result = explain(log, model="llama-3.2-3b")
    rows = {r.quantity: r for r in result.rows}
    assert rows["k_mib"].kvplan == 28 * 8 * 128 * 2 * 4096 / 2**20
    assert result.ok


def test_sglang_and_trtllm_are_recognised():
    assert startlog.detect_engine(LOGS["sglang-doc-qwq-32b-tp4-24gb"]["excerpt"],
                                  log_formats()) == "sglang"
    assert startlog.detect_engine(LOGS["trtllm-doc-llama31-8b-fp8-rtx5090"]["excerpt"],
                                  log_formats()) == "trtllm"


@pytest.mark.parametrize("text", ["", "hello world\n", "INFO some other server started\n"])
def test_a_log_with_nothing_to_read_is_exit_2(text, tmp_path):
    path = tmp_path / "x.log"
    path.write_text(text)
    result = runner.invoke(app, ["explain", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_model_must_be_known():
    with pytest.raises(BadInputError, match="does not name its model"):
        explain("INFO [gpu_worker.py:232] Available KV cache memory: 5.00 GiB\n")


def test_each_engine_declares_its_log_and_the_reader_knows_no_engine():
    """The log tables live in the engine modules (EngineLog), the reader takes them as
    arguments: a new engine's log is read without editing kvplan/sources/startlog.py."""
    import re

    from kvplan.core.launch import (
        LOG_COMBINE,
        LOG_CONVERTERS,
        LOG_PLACES,
        LOG_SCOPES,
        EngineLog,
        LogLine,
    )
    from kvplan.engines import registry

    formats = log_formats()
    assert [f.engine for f in formats] == [
        e.name for e in registry.all_engines() if e.log_format() is not None]
    assert {"vllm", "sglang", "llamacpp", "trtllm", "tgi"} <= {f.engine for f in formats}
    for f in formats:
        assert registry.get(f.engine).log_format() is f
        for line in f.figures:
            assert line.converter in LOG_CONVERTERS and line.place in LOG_PLACES, line.figure
            assert line.scope in LOG_SCOPES and line.combine in LOG_COMBINE, line.figure
            assert re.compile(line.pattern).groups == 1, (f.engine, line.figure)
            assert line.key and "\\" not in line.key, (f.engine, line.figure)
    source = open(startlog.__file__).read()
    for name in registry.names():
        assert f'"{name}"' not in source, name
    # a plugin's log, read by the same reader with no change to it
    toy = EngineLog("toy", "Toy", markers=r"toy-server", figures=(
        LogLine("num_blocks", "toy-server:", r"toy-server: ([\d,]+) blocks", "int", "kv"),
        LogLine("weights_bytes", "weights", r"weights ([\d.]+) GiB", "gib", "weights")))
    facts = startlog.read_log("toy-server: 1,234 blocks\nweights 1.50 GiB\n",
                              (*formats, toy))
    assert facts.engine == "toy" and facts.kv["num_blocks"] == 1234
    assert facts.weights_bytes == 3 * 2**30 // 2
    assert facts.lines["num_blocks"] == "toy-server: 1,234 blocks"


# --- the reader: linear, precise, settings echoed, dated, per worker and per slot -------------

def test_a_256_kib_line_is_read_in_milliseconds():
    """Patterns are tried only near their key, in a bounded window: a line of 256 KiB full of
    keys and near-misses costs a few passes over it, not a backtracking search."""
    import time

    bad = ("KV Cache is allocated. #tokens: K size: " * 7000)[:256 * 1024]
    text = ("[2025-01-01 TP0] sglang.launch_server --model-path x " + bad + "\n"
            + "vllm serve m --max-model-len " + "9" * 250_000 + "\n"
            + "llama_kv_cache: size = " + " " * 250_000 + "\n")
    start = time.perf_counter()
    for engine in ("sglang", "vllm", "llamacpp", "trtllm", "tgi"):
        startlog.read_log(text, reading_formats(), engine)
    assert time.perf_counter() - start < 0.5  # five engines' tables over 768 KiB of lines


def test_the_echoed_command_line_and_human_readable_lengths():
    log = ("INFO 05-01 10:00:00 [api_server.py:1040] vLLM API server version 0.9.0\n"
           "$ vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.65 "
           "--max-model-len 32K -tp 2 --kv-cache-dtype fp8 --max-num-seqs 64\n")
    facts = startlog.read_log(log, reading_formats())
    assert facts.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert facts.settings == {"memory_fraction": 0.65, "max_model_len": 32 * 1024, "tp": 2,
                              "kv_dtype": "fp8", "max_num_seqs": 64}
    lower = startlog.read_log(log.replace("32K", "32k"), reading_formats())
    assert lower.settings["max_model_len"] == 32_000  # vLLM: lower case is decimal


def test_an_echoed_count_of_400_digits_is_unreadable_not_converted():
    # issue 25: a number is checked for length before it is converted; an echoed
    # `-tp <400 digits>` is named as an unreadable line, never turned into a setting
    log = ("INFO 05-01 10:00:00 [api_server.py:1040] vLLM API server version 0.9.0\n"
           "$ vllm serve meta-llama/Llama-3.1-8B-Instruct -tp " + "7" * 400 + "\n")
    facts = startlog.read_log(log, reading_formats())
    assert "tp" not in facts.settings
    assert "tp" in facts.unreadable and "7777" in facts.unreadable["tp"]


def test_a_kv_line_agrees_within_the_logs_printed_precision():
    # "50.00 GiB" is 49.995-50.005 GiB: 2 MiB blocks of Llama-3.1-8B (16 x 131,072 B) number
    # floor(49.995 x 512) = 25,597 to floor(50.005 x 512) = 25,602 (the report counts every
    # block); one block outside either end is a difference of 0.004%, and a DIFF
    for blocks, ok in ((25_597, True), (25_602, True), (25_596, False), (25_603, False)):
        result = explain(_v1_log(blocks * 16))
        tokens = next(r for r in result.rows if r.quantity == "kv_cache_tokens")
        assert (tokens.status == "ok") is ok, blocks


def test_kvcacheds_virtual_pool_is_not_read_as_sglangs_own():
    log = ("[2025-09-04 10:00:00 TP0] kvcached: allocated virtual KV space\n"
           "[2025-09-04 10:00:01 TP0] KV Cache is allocated. #tokens: 9000000, K size: 999.00 GB,"
           " V size: 999.00 GB\n")
    facts = startlog.read_log(log, reading_formats())
    assert facts.engine == "sglang"
    assert not {"max_total_num_tokens", "k_size_bytes", "v_size_bytes"} & set(facts.kv)
    assert any("kvcached" in n for n in facts.notes)


V0_LOG = (  # vllm-project/vllm#10517: no release printed; the one-line profile of 0.6.3-0.6.4
    "Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB "
    "peak_torch_memory=17.98GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB "
    "kv_cache_size=2.89GiB gpu_memory_utilization=0.90\n"
    "# GPU blocks: 1478, # CPU blocks: 2048\n"
    "Maximum concurrency for 29000 tokens per request: 0.82x\n")


def test_a_log_without_a_release_is_dated_by_its_lines():
    result = explain(V0_LOG, model="llama-3.1-8b")
    assert result.version == "0.6.4"
    assert any("line formats" in n for n in result.notes)
    assert explain(V0_LOG, model="llama-3.1-8b", engine_version="0.6.3").version == "0.6.3"


def test_cli_takes_the_engine_version(tmp_path):
    path = tmp_path / "v0.log"
    path.write_text(V0_LOG)
    result = runner.invoke(app, ["explain", str(path), "--model", "llama-3.1-8b",
                                 "--engine-version", "0.6.3", "-f", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["version"] == "0.6.3"


def test_a_workers_budget_with_no_tp_printed_is_one_ranks_share():
    # Qwen2.5-7B at TP 2: 28 layers x 2 KV heads x 128 x 2 x 2 B = 28,672 B a token per rank;
    # 31.83 GiB / (16 x 28,672) = 74,501 blocks (the null block kept: 74,510 - 1 at the top of
    # the printed range), so 1,192,160 tokens is one rank's pool, not TP 1's (596,000)
    log = ("(VllmWorker TP0 pid=1) INFO 09-03 02:12:25 [gpu_worker.py:276] Available KV cache "
           "memory: 31.83 GiB\n"
           "INFO 09-03 02:12:26 [kv_cache_utils.py:849] GPU KV cache size: 1,192,160 tokens\n")
    result = explain(log, model="qwen2.5-7b")
    assert result.ok
    assert any("TP 2" in n for n in result.notes)


def test_a_server_slots_context_is_the_context_per_slot():
    # ik_llama.cpp, DeepSeek-R1's MLA cache in q8_0: 61 layers x (512 + 64) x 34/32 B x 32,768
    # cells = 1,166.62 MiB, the context being the one slot's 32,768 tokens
    log = ("llama_new_context_with_model: KV self size  = 1166.62 MiB, c^KV (q8_0): 1166.62 MiB,"
           " kv^T: not used\n"
           'INFO [                    init] initializing slots | n_slots=1\n'
           'INFO [                    init] new slot | id_slot=0 n_ctx_slot=32768\n')
    result = explain(log, model="deepseek-r1")
    kv = next(r for r in result.rows if r.quantity == "kv_mib")
    assert kv.status == "ok"
    assert kv.kvplan == pytest.approx(61 * 576 * 34 / 32 * 32768 / 2**20)
    assert result.settings["kv_dtype"] == "q8_0"


def test_a_non_unified_cache_prints_one_streams_cells():
    # llama.cpp -np 4 without --kv-unified: "8192 cells ... 4/4 seqs" is four streams of 8,192;
    # Qwen3-8B: 36 layers x 8 KV heads x 128 x 2 B = 73,728 B a cell for K (and for V), so
    # 32,768 cells hold 2,304 MiB of K and 4,608 MiB in all
    log = ("llama_context: n_seq_max     = 4\nllama_context: n_ctx         = 32768\n"
           "llama_kv_cache: size = 4608.00 MiB (  8192 cells,  36 layers,  4/4 seqs), "
           "K (f16): 2304.00 MiB, V (f16): 2304.00 MiB\n")
    result = explain(log, model="qwen3-8b")
    rows = {r.quantity: r for r in result.rows}
    assert rows["cells"].logged == 32768 and rows["kv_mib"].kvplan == 4608.0
    assert result.ok and any("4 streams" in n for n in result.notes)


def test_the_batch_and_eager_settings_a_v1_log_echoes():
    # vllm-project/vllm#27508's command line, and a V1 config dump's fields
    line = ("vllm serve openai/gpt-oss-120b --gpu-memory-utilization 0.95 "
            "--max-num-batched-tokens 1024\n")
    facts = startlog.read_log(line, reading_formats())
    assert facts.settings["max_num_batched_tokens"] == 1024
    assert facts.settings["memory_fraction"] == 0.95
    dump = ("INFO [core.py:74] Initializing a V1 LLM engine (v0.10.1.1) with config: "
            "model='m', tensor_parallel_size=1, data_parallel_size=2, enforce_eager=True, "
            "kv_cache_dtype=auto\n")
    facts = startlog.read_log(dump, reading_formats())
    assert (facts.settings["dp"], facts.settings["enforce_eager"]) == (2, "True")


def test_the_sampler_backend_a_v1_log_names():
    # dennislee22/vLLM-benchmarking, vllm-7B-1gpuA10080GB-0.5GRAM.log (0.10.1.1): the log says
    # it built FlashInfer's top-k/top-p sampler and reserved 24.83 GiB for the KV cache
    entry = yaml.safe_load((CORPUS / "index.yaml").read_text(encoding="utf-8"))
    entry = next(e for e in entry["logs"] if e["id"] == "dennislee22-qwen2-7b-a100-gmu05")
    text = (CORPUS / entry["file"]).read_text(encoding="utf-8")
    assert "Using FlashInfer for top-p & top-k sampling" in text
    assert startlog.read_log(text, reading_formats()).settings["flashinfer_sampler"] == "FlashInfer"
    result = explain(text, model="qwen2.5-7b", gpu="A100 80GB")
    budget = next(r for r in result.rows if r.quantity == "KV budget")
    logged = round(24.83 * 2**30)
    assert budget.logged == logged
    assert abs(budget.kvplan - logged) <= 0.02 * logged  # issue 23's V1 bar


def test_token_lines_of_trtllm_05_and_vllm_cpu():
    # TensorRT-LLM#224 (the C++ runtime of 0.5); vLLM's kv_cache_utils line on the CPU platform
    trt = startlog.read_log("[TensorRT-LLM][INFO] Using 10718 tokens in paged KV cache.\n",
                            log_formats())
    assert (trt.engine, trt.kv["kv_cache_tokens"]) == ("trtllm", 10718)
    cpu = startlog.read_log("(EngineCore pid=1) INFO [kv_cache_utils.py:1087] CPU KV cache size: "
                            "699,008 tokens\n", log_formats())
    assert (cpu.engine, cpu.kv["kv_cache_tokens"]) == ("vllm", 699008)


def test_the_settings_that_decide_the_budget_and_the_log_lacks_are_named():
    # the V1 config line prints the length, TP, eager flag and release, not the memory
    # fraction, the batch's tokens or the request cap: the prediction took vLLM's defaults
    result = explain(_v1_log(409_584), gpu="h100")
    assert any(r.quantity == "KV budget" and r.basis == "from settings" for r in result.rows)
    assert result.unprinted == ("gpu_memory_utilization", "max_num_batched_tokens",
                                "max_num_seqs")
    assert any("does not print: gpu_memory_utilization" in n for n in result.notes)
    # "non-default args" lists every setting not at its default: nothing is left unprinted
    echoed = _v1_log(409_584) + ("INFO 06-23 14:20:00 [utils.py:326] non-default args: "
                                 "{'model': 'meta-llama/Llama-3.1-8B-Instruct'}\n")
    assert explain(echoed, gpu="h100").unprinted == ()
    # without a release line (and none given) the release is named too
    undated = "\n".join(line for line in _v1_log(409_584).splitlines() if "core.py" not in line)
    assert "engine release" in explain(undated, model="llama-3.1-8b", gpu="h100").unprinted


def test_a_gpu_with_more_than_one_reported_total_is_named_when_the_log_prints_none():
    # The L4's total: deviceQuery 22518 MBytes (23,612,293,120 B) on one driver, nvidia-smi and
    # PyTorch 23034 MiB (24,152,899,584 B) on driver 580: 0.92 of the 0.50 GiB between them is
    # 0.46 GiB, a tenth of a 4.75 GiB budget. A V1 log prints no total, so the budget from
    # settings cannot be held to the one kvplan takes; the H100 reports one total.
    echoed = _v1_log(409_584) + ("INFO 06-23 14:20:00 [utils.py:326] non-default args: "
                                 "{'model': 'meta-llama/Llama-3.1-8B-Instruct'}\n")
    assert explain(echoed, gpu="L4").unprinted == ("GPU total memory",)
    assert explain(echoed, gpu="h100").unprinted == ()
    from kvplan.sources.gpus import find_gpu

    l4 = find_gpu("L4")
    assert l4.other_memory_bytes == (23034 * 2**20,)
    assert round((l4.other_memory_bytes[0] - l4.memory_bytes) / 2**30, 2) == 0.50


def test_echoed_settings_are_read_through_their_setting_rows():
    # flags vLLM's own log lines do not name: read by the rows' vLLM spellings (dashes or
    # underscores, "=" or a space), each as a launch line's flag would be
    from kvplan.engines.settings import BY_NAME

    log = ("INFO 05-01 10:00:00 [api_server.py:1040] vLLM API server version 0.10.1\n"
           "$ vllm serve meta-llama/Llama-3.1-8B-Instruct --cpu-offload-gb 4 "
           "--tensor_parallel_size=2 --enable-expert-parallel --max-num-batched-tokens 8192\n")
    facts = startlog.read_log(log, reading_formats())
    assert facts.settings == {"cpu_offload_bytes": 4.0, "tp": 2, "expert_parallel":
                              "--enable-expert-parallel", "max_num_batched_tokens": 8192}
    # the non-default args' dict, by the same rows' argument names
    dump = ("INFO 05-01 10:00:00 [api_server.py:1040] vLLM API server version 0.10.1\n"
            "INFO 05-01 10:00:00 [utils.py:326] non-default args: {'model': 'm', "
            "'max_model_len': 16384, 'gpu_memory_utilization': 0.5, 'block_size': 32, "
            "'enforce_eager': True, 'decode_context_parallel_size': 2}\n")
    facts = startlog.read_log(dump, reading_formats())
    assert facts.settings == {"max_model_len": 16384, "memory_fraction": 0.5, "block_size": 32,
                              "enforce_eager": "True", "dcp": 2}
    # a row that gains a vLLM flag is read from a log with no other change
    assert all(flag in BY_NAME[name].engine_flags["vllm"] for name, flag in (
        ("cpu_offload_gb", "--cpu-offload-gb"), ("dcp", "-dcp")))
    # and the deployment takes them as it would from the flags: 4 GiB fewer weights a GPU
    budget = "INFO 05-01 10:01:00 [gpu_worker.py:232] Available KV cache memory: 20.00 GiB\n"
    offloaded, kept = (
        next(r.kvplan for r in explain(text + budget, gpu="h100").rows
             if r.quantity == "KV budget")
        for text in (log, log.replace("--cpu-offload-gb 4 ", "")))
    assert offloaded - kept == 4 * GIB


def test_a_key_inside_an_echoed_value_is_not_the_servers_setting():
    # vLLM echoes --speculative-config as a dict inside the non-default args: the draft's
    # max_model_len and tensor_parallel_size there are not the server's (8,192 and TP 4)
    dump = ("INFO 05-01 10:00:00 [api_server.py:1040] vLLM API server version 0.10.1\n"
            "INFO 05-01 10:00:00 [utils.py:326] non-default args: {'model': 'm', "
            "'speculative_config': {'method': 'eagle', 'model': 'd', 'max_model_len': 2048, "
            "'tensor_parallel_size': 1}, 'max_model_len': 8192, 'tensor_parallel_size': 4, "
            "'limit_mm_per_prompt': {'image': 0}}\n")
    facts = startlog.read_log(dump, reading_formats())
    assert (facts.settings["max_model_len"], facts.settings["tp"]) == (8192, 4)
    assert facts.settings["speculative_method"] == "eagle"  # the engine's own line, nested
    assert startlog.echoed_keys(dump, "non-default args: {") == [
        "model", "speculative_config", "max_model_len", "tensor_parallel_size",
        "limit_mm_per_prompt"]
    # a key the dict does not hold at its top level is not read from a nested one
    nested_only = dump.replace(", 'max_model_len': 8192", "")
    assert "max_model_len" not in startlog.read_log(nested_only, reading_formats()).settings


def test_an_echoed_dict_a_terminal_wrapped_is_read_whole():
    # dennislee22/vLLM-benchmarking's 0.10.1.1 log (tests/fixtures/logs/vllm/dennislee22-
    # qwen2-7b-a100-gmu05.log) wraps its non-default args inside 'Qwen2-7B-Instruct': the keys
    # after the wrap are the dict's too, and no key is taken from the next record's text
    wrapped = ("(APIServer pid=2739) INFO 09-04 01:28:28 [utils.py:326] non-default args: "
               "{'model_tag': 'Qwen2-7B-Instruct', 'port': 8081, 'model': 'Qwe\n"
               "n2-7B-Instruct', 'max_model_len': 16384, 'gpu_memory_utilization': 0.5}\n"
               "(APIServer pid=2739) INFO 09-04 01:28:43 ['block_size': 64] an unrelated line\n")
    line, keys = startlog.echoed_dict(wrapped, "non-default args: {")
    assert list(keys) == ["model_tag", "port", "model", "max_model_len",
                          "gpu_memory_utilization"]
    assert line.endswith("'gpu_memory_utilization': 0.5}") and "Qwen2-7B-Instruct" in line
    facts = startlog.read_log(wrapped, reading_formats(), "vllm")
    assert (facts.settings["max_model_len"], facts.settings["memory_fraction"]) == (16384, 0.5)
    assert "block_size" not in facts.settings


def test_an_echoed_dict_is_read_up_to_the_line_limit():
    # 4,000 keys (about 56 KiB) are read whole; past MAX_LINE_CHARS (64 KiB) the reader stops
    def keys(count):
        body = ", ".join(f"'k{i}': {i}" for i in range(count))
        text = "non-default args: {" + body + ", 'max_model_len': 4096}\n"
        return len(text), startlog.echoed_keys(text, "non-default args: {")

    size, read = keys(4000)
    assert size < startlog.MAX_LINE_CHARS and len(read) == 4001 and read[-1] == "max_model_len"
    size, read = keys(6000)
    assert size > startlog.MAX_LINE_CHARS and "max_model_len" not in read and len(read) < 6000


def test_a_count_below_one_workers_budget_names_the_fewest_over_workers():
    # TP 2 halves Llama-3.1-8B's KV heads: 16 x 65,536 B blocks, 50 GiB -> 51,200 blocks, one
    # the null block: 51,199 x 16 tokens; a log printing 128 blocks fewer is what a worker
    # with 0.125 GiB less would give (vLLM sizes every worker by the fewest blocks over them)
    def tp2(tokens: int) -> str:
        return _v1_log(tokens).replace("tensor_parallel_size=1", "tensor_parallel_size=2")

    result = explain(tp2((51_199 - 128) * 16))
    assert not result.ok  # still a difference: the other worker's budget is not in the log
    assert any("fewest blocks over its 2 workers" in n for n in result.notes)
    exact = explain(tp2(51_199 * 16))
    assert exact.ok and not any("fewest blocks" in n for n in exact.notes)


def test_tgi_launcher_defaults_are_read_and_its_advice_is_not():
    # huggingface/ms-build-mi300 README (TGI 2.0.2 on MI300X): the launcher prints the limits it
    # chose ("Default `max_total_tokens` to 4096", "... `max_batch_prefill_tokens` to 4145",
    # "Sharding model on 2 processes") after advice naming other values
    # ("--max-batch-prefill-tokens=8242 --max-total-tokens=8192"), which it does not run with
    text = (CORPUS / "tgi" / "tgi-msbuild-llama3-8b-mi300x-2.0.2.log").read_text(encoding="utf-8")
    facts = startlog.read_log(text, reading_formats())
    assert facts.engine == "tgi"
    assert (facts.settings["max_model_len"], facts.settings["max_num_batched_tokens"],
            facts.settings["tp"]) == (4096, 4145, 2)
    # no budget line and no breakdown: the router's token figure from settings is still shown
    rows = explain(text, model="llama-3-8b", gpu="mi300x").rows
    figure = next(r for r in rows if r.quantity == "max_batch_total_tokens")
    assert (figure.basis, figure.logged) == ("from settings", 801568)


def test_a_v0_engine_under_a_v1_default_release_is_modelled_as_v0():
    # a T4 log of vLLM 0.8.2 run as V0 ("Initializing a V0 LLM engine (v0.8.2)"): 0.8 defaults
    # to V1, whose profile (1,024 dummy requests through the sampler) kvplan would apply; the
    # log's own V0 profile reserved 0.90 GiB of activations and left 6.22 GiB for the KV
    # cache of 14.74 GiB x 0.89. Llama-3.2-3B: 28 layers x 8 KV heads x 128 x 2 x 2 B =
    # 114,688 B a token, 16-token blocks: 6.22 GiB / 1,835,008 B = 3,639.6 blocks, the log's
    # 3,637 within its last digit
    text = (CORPUS / "vllm" / "vllm-stdout-llama32-3b-t4-0.8.2.log").read_text()
    result = explain(text, model="llama-3.2-3b")
    rows = {(r.quantity, r.basis): r for r in result.rows}
    assert result.version == "0.7.3" and any("V0 engine" in n for n in result.notes)
    assert rows[("num_blocks", "given the logged budget")].status == "ok"
    budget = rows[("KV budget", "from settings")]
    assert budget.logged == round(6.22 * GIB)
    assert abs(budget.diff_percent) < 6  # V1's profile gave -66%
    # the same log with --engine-version 0.8.2 takes V1's profile, as asked
    assert explain(text, model="llama-3.2-3b", engine_version="0.8.2").version == "0.8.2"


def test_trtllm_primary_blocks_of_the_per_window_line():
    # TensorRT-LLM 1.3.0rc7, Kimi-K2.5 (DeepSeek-V3 MLA, 61 layers x (512 + 64) x 1 B in FP8 =
    # 35,136 B a token on every rank): "primary blocks=158543" of 32 tokens is the pool the
    # "(5073376)" token count states, 158,543 x 32 = 5,073,376
    text = (CORPUS / "trtllm" / "trtllm-kimi-k25-nvfp4-b300-tp8-1.3.0rc7.log").read_text()
    facts = startlog.read_log(text, log_formats())
    assert facts.kv["num_blocks"] == 158543 and facts.kv["num_blocks"] * 32 == 5073376
    result = explain(text, model="kimi-k2", tp=8, kv_dtype="fp8")
    assert {r.quantity for r in result.rows} >= {"num_blocks", "kv_cache_tokens"} and result.ok


def test_llamacpp_seqs_printed_with_a_space():
    # LM Studio's llama.cpp runtime prints "1/ 1 seqs" (a padded count)
    line = ("llama_kv_cache_unified: size = 18432.00 MiB (131072 cells,  36 layers,  1/ 4 seqs), "
            "K (f16): 9216.00 MiB, V (f16): 9216.00 MiB\n")
    assert startlog.read_log(line, log_formats()).kv["streams"] == 4


def test_a_given_model_name_with_a_weight_formats_suffix():
    # explain --model is read as the log's own model name would be: Qwen3-30B-A3B with FP8
    # weights (2 x L40S, TP 2, vLLM 0.10.2: the log's 25.91 GiB a worker; with bf16 weights
    # kvplan would leave less than half of it)
    text = (CORPUS / "vllm" / "vllm-qwen3-30b-a3b-2507-fp8-2xl40s-tp2-ep-0.10.2.log").read_text()
    result = explain(text, model="qwen3-30b-a3b-fp8", tp=2, gpu="l40s")
    budget = next(r for r in result.rows if r.quantity == "KV budget")
    assert budget.logged == round(25.91 * GIB) and abs(budget.diff_percent) < 5
    assert any("fp8 weights" in n for n in result.notes)


def test_ollamas_own_engine_memory_report():
    # Ollama 0.16.1 with --ollama-engine prints no llama.cpp line: its load request
    # ("KvSize:4096", "Parallel:1", an empty KvCacheType for f16) and its memory report
    # (msg="kv cache" device=CPU size="384.0 MiB"). Qwen3-Coder-30B-A3B: 48 layers x 4 KV
    # heads x 128 x 2 x 2 B = 98,304 B a token, x 4,096 = 384 MiB
    text = (CORPUS / "llamacpp" / "llamacpp-ollama-0.16.1-engine-qwen3-coder-30b-cpu-c4096.log"
            ).read_text()
    facts = startlog.read_log(text, reading_formats())
    # an Ollama log, planned as Ollama: KvSize is the runner's context, num_ctx x Parallel
    assert (facts.engine, facts.model) == ("ollama", "Qwen3-Coder-30B-A3B-Instruct")
    assert facts.settings["runner_ctx"] == 4096 and facts.kv["kv_mib"] == 384.0
    result = explain(text, model="qwen3-30b-a3b")
    assert (result.engine, result.version) == ("ollama", "0.16.1")
    assert result.settings["max_model_len"] == 4096 and result.settings["parallel"] == 1
    assert result.ok and next(r for r in result.rows if r.quantity == "kv_mib").kvplan == 384.0


def test_a_size_with_its_unit_is_read_in_mib_with_its_printed_precision():
    # Ollama's per-device lines are summed: 1.9 GiB + 384.0 MiB, each to its last digit
    line = ('msg="kv cache" device=CUDA0 size="1.9 GiB"\nmsg="kv cache" device=CPU '
            'size="384.0 MiB"\nmsg="total memory" size="2.4 GiB"\n')
    facts = startlog.read_log(line, log_formats(), engine="llamacpp")
    assert facts.kv["kv_mib"] == 1.9 * 1024 + 384.0
    assert facts.precision["kv_mib"] == 0.05 * 1024 + 0.05


def test_a_difference_under_ollamas_own_engine_names_its_rule():
    # gpt-oss-120b under Ollama's engine: 18 full layers of 8,192 cells (288 MiB) and 18
    # sliding layers that keep 4,096 + 512 cells (kvcache.NewSWAMemCache): 450.0 MiB, which
    # kvplan does not model; the difference is named, not left bare
    text = (CORPUS / "llamacpp" / "llamacpp-ollama-engine-gpt-oss-120b-gfx1151-c8192.log"
            ).read_text()
    result = explain(text, model="gpt-oss-120b")
    assert not result.ok
    assert any("Ollama's own engine" in n and "does not model" in n for n in result.notes)


def test_a_reupload_the_hub_cannot_be_asked_about_is_read_by_its_name(monkeypatch):
    # the T4 log names unsloth/Llama-3.2-3B-Instruct, a re-upload of the library's
    # meta-llama/Llama-3.2-3B-Instruct; with the Hub out of reach it is read as that model
    # (said), and its "# cuda blocks: 3637" is recomputed from the logged 6.22 GiB
    from kvplan.core.errors import UnavailableError
    from kvplan.sources import hub

    def unreachable(*args, **kwargs):
        raise UnavailableError("cannot reach the Hugging Face Hub (test)")

    monkeypatch.setattr(hub, "load_hub_spec", unreachable)
    text = (CORPUS / "vllm" / "vllm-stdout-llama32-3b-t4-0.8.2.log").read_text()
    result = explain(text)
    assert result.model == "llama-3.2-3b" and result.ok
    assert any("same name under another owner" in n for n in result.notes)
    assert next(r for r in result.rows if r.quantity == "num_blocks").logged == 3637
    # a name no library model shares stays the Hub's error
    with pytest.raises(UnavailableError):
        explain(text.replace("unsloth/Llama-3.2-3B-Instruct", "someone/Not-A-Model-7B"))


def test_tgi_json_output_names_its_model():
    # text-generation-launcher --json-output: the Args line inside a JSON string
    log = ('{"timestamp":"2024-05-07T12:39:07Z","level":"INFO","fields":{"message":"Args { '
           'model_id: \\"meta-llama/Meta-Llama-3-8B-Instruct\\", revision: None, num_shard: '
           'Some(2) }"},"target":"text_generation_launcher"}\n'
           '{"timestamp":"2024-05-07T12:39:22Z","level":"INFO","message":"Setting max batch '
           'total tokens to 801568","target":"text_generation_router"}\n')
    facts = startlog.read_log(log, reading_formats())
    assert facts.engine == "tgi" and facts.model == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert facts.settings["tp"] == 2 and facts.kv["max_batch_total_tokens"] == 801568
    plain = startlog.read_log('INFO text_generation_launcher: Args { model_id: "gpt2", '
                              'num_shard: None }\n', reading_formats())
    assert plain.model == "gpt2"


# llama-server b6115 on eight Ascend 910B4 (gpt-oss-20b, -c 0): the build line, the context and
# both caches of the iSWA model, as published in a deployment guide (held-out logs, second
# round: tests/fixtures/logs/llamacpp/llamacpp-cann-gpt-oss-20b-b6115-c0.log)
B6115_LOG = """build: 6115 (50aa9389) with cc (GCC) 10.3.1 for aarch64-linux-gnu
llama_context: n_seq_max     = 1
llama_context: n_ctx         = 131072
llama_context: n_ubatch      = 512
llama_context: flash_attn    = 1
llama_context: kv_unified    = false
llama_kv_cache_unified_iswa: creating non-SWA KV cache, size = 131072 cells
llama_kv_cache_unified: size = 3072.00 MiB (131072 cells,  12 layers,  1/1 seqs), \
K (f16): 1536.00 MiB, V (f16): 1536.00 MiB
llama_kv_cache_unified_iswa: creating     SWA KV cache, size = 768 cells
llama_kv_cache_unified: size =   18.00 MiB (   768 cells,  12 layers,  1/1 seqs), \
K (f16):    9.00 MiB, V (f16):    9.00 MiB
"""


def test_llamacpps_build_line_is_its_release():
    # "build: 6115 (50aa9389)" is release b6115 (common/common.cpp prints LLAMA_BUILD_NUMBER
    # and LLAMA_COMMIT first); 2023's "main: build = 916 (b5472ea)" is b916. Neither is dated
    # by its line formats then, and no note says the log prints no release.
    result = explain(B6115_LOG, model="gpt-oss-20b")
    assert result.version == "6115"
    assert not any("prints no release" in n for n in result.notes)
    # gpt-oss-20b: 12 full layers of 8 KV heads x 64 at f16, 131,072 cells = 3,072 MiB;
    # the sliding cache: pad(128 + 512, 256) = 768 cells
    assert result.ok
    old = "main: build = 916 (b5472ea)\n" + B6115_LOG.split("\n", 1)[1]
    assert explain(old, model="gpt-oss-20b").version == "916"
    # a 2026 build's line (acdtrx/llama-runner's committed llama-server.log, Homebrew's ggml)
    new = "build_info: b8680-15f786e65\n" + B6115_LOG.split("\n", 1)[1]
    assert explain(new, model="gpt-oss-20b").version == "8680"
    # ik_llama.cpp counts its builds on its own: its MLA cache line leaves it undated by them
    ik = ("build: 3641 (4a6eb6a1)\n"
          "llama_new_context_with_model: KV self size  = 1166.62 MiB, c^KV (q8_0): 1166.62 MiB, "
          "kv^T: not used\n")
    assert explain(ik, model="deepseek-r1").version != "3641"
    assert any("'build' line is not read" in n for n in explain(ik, model="deepseek-r1").notes)
    # and where no build line is there, nothing is said of one
    no_build = ik.split("\n", 1)[1]
    assert not any("'build'" in n for n in explain(no_build, model="deepseek-r1").notes)


# vLLM 0.9.2's CPU build, V0 engine, Qwen3-0.6B (a PyCon Korea 2025 example script's docstring;
# tests/fixtures/logs/vllm/vllm-cpu-qwen3-0.6b-0.9.2-v0-pycon.log): the platform's budget
# warning and the executor's block line, whose device is "cpu"
V0_CPU_LOG = """\
WARNING 07-15 21:27:10 [cpu.py:131] Environment variable VLLM_CPU_KVCACHE_SPACE (GiB) for CPU \
backend is not set, using 4 by default.
INFO 07-15 21:27:10 [llm_engine.py:230] Initializing a V0 LLM engine (v0.9.2) with config: \
model='Qwen/Qwen3-0.6B', dtype=torch.float16, max_seq_len=2048, tensor_parallel_size=1, \
kv_cache_dtype=auto,  device_config=cpu
INFO 07-15 21:27:12 [executor_base.py:113] # cpu blocks: 2340, # CPU blocks: 0
INFO 07-15 21:27:12 [executor_base.py:118] Maximum concurrency for 2048 tokens per request: \
18.28x
"""


def test_v0s_cpu_blocks_and_its_default_cache_space():
    model = str(paths.ROOT / "tests/fixtures/engines/models/qwen3-0.6b.yaml")
    result = explain(V0_CPU_LOG, model=model)
    rows = {r.quantity: r for r in result.rows if r.basis == "given the logged budget"}
    # 4 GiB over 16-token blocks of 28 layers x 8 KV heads x 128 x 2 (K, V) x 2 B (fp16):
    # 4 x 2^30 // (16 x 114,688) = 2,340 blocks; 2,340 x 16 / 2,048 = 18.28x
    assert rows["num_blocks"].status == "ok" and rows["num_blocks"].logged == 2340
    assert rows["max_concurrency"].status == "ok"
    assert result.ok


# SGLang (a 2026-04 dev build, 0.0.0.dev11582) serving Qwen3.5-9B over two RTX 4090s at TP 2:
# the hybrid model's state pool and its KV pool, both sized from one rest of memory (a
# study's notes; tests/fixtures/logs/sglang/sglang-qwen35-9b-2x4090-tp2-dev11582.log)
HYBRID_LOG = """\
[2026-04-14 16:08:49 TP0] Using KV cache dtype: torch.bfloat16
[2026-04-14 16:08:49 TP0] Mamba Cache is allocated. max_mamba_cache_size: 186, conv_state \
size: 0.10GB, ssm_state size: 4.38GB
[2026-04-14 16:08:49 TP1] Mamba Cache is allocated. max_mamba_cache_size: 186, conv_state \
size: 0.10GB, ssm_state size: 4.38GB
[2026-04-14 16:08:49 TP0] KV Cache is allocated. #tokens: 327310, K size: 2.50 GB, V size: \
2.50 GB
[2026-04-14 16:08:49 TP1] KV Cache is allocated. #tokens: 327310, K size: 2.50 GB, V size: \
2.50 GB
"""


def test_a_hybrids_state_pool_is_part_of_the_budget_sglang_split():
    # SGLang gives the state pool ratio / (1 + ratio) of the rest (mamba_full_memory_ratio
    # 0.9) and the KV pool the remainder, so the K and V lines alone are not the budget it
    # split: 2.50 + 2.50 + 0.10 + 4.38 GB are. At TP 2 each rank keeps 2 of 4 KV heads of 256
    # on 8 full-attention layers: 8 x 2 x 256 x 2 B = 8,192 B of K a token, and 2.50 GB of K
    # is 327,680 tokens at its last digit (327,310 logged: 2.497 GiB)
    model = str(paths.ROOT / "tests/fixtures/engines/models/qwen3.5-9b.json")
    result = explain(HYBRID_LOG, model=model, tp=2)
    rows = {r.quantity: r for r in result.rows if r.basis == "given the logged budget"}
    assert rows["max_total_num_tokens"].status == "ok", rows
    assert rows["k_size_bytes"].status == "ok" and rows["v_size_bytes"].status == "ok"
    assert abs(rows["max_total_num_tokens"].kvplan - 327310) < 2.50 * 2**30 * 0.01 / 8192


# SGLang 0.5.8.post1 (ROCm) serving GLM-5-FP8 over eight MI355X with an fp8 KV cache: an excerpt
# without the server_args line, where only the workers' prefixes say TP 8 and only the model
# runner's line says the cache is fp8 (tests/fixtures/logs/sglang/
# sglang-glm5-fp8-mi355x-tp8-0.5.8.post1.log)
GLM5_LOG = "".join(
    f"[2026-02-26 05:35:08 TP{r}] KV Cache is allocated. #tokens: 3262823, KV size: 186.77 GB\n"
    for r in (7, 6, 0, 2, 4, 1, 5, 3)) + \
    "[2026-02-26 05:35:08 TP0] Using KV cache dtype: torch.float8_e4m3fn\n"


def test_sglangs_worker_prefixes_and_its_kv_dtype_line_are_settings():
    model = str(paths.ROOT / "tests/fixtures/hf-configs/zai-org--GLM-5.json")
    result = explain(GLM5_LOG, model=model)
    # eight workers name tensor ranks 0-7: at least TP 8, which this log ran
    assert result.settings["tp"] == 8
    assert any("tensor ranks 0-7" in n for n in result.notes)
    # model_runner.py logs the dtype --kv-cache-dtype auto became
    assert result.settings["kv_dtype"] == "float8_e4m3fn"
    # the budget recomputed at fp8, not at the model's bf16 (which gives 2,002,383 tokens of
    # the logged 186.77 GB: 78 layers x (512 + 64) x 2 B, and the indexer's keys)
    tokens = next(r for r in result.rows if r.quantity == "max_total_num_tokens")
    assert tokens.kvplan > 3_000_000
    # a log that prints only rank 0 says nothing of its TP size
    one = explain(GLM5_LOG.split("\n", 3)[2] + "\n", model=model)
    assert "tp" not in one.settings


def test_async_scheduling_as_a_log_states_it():
    # vLLM's CPU build turns async scheduling off (platforms/cpu.py check_and_update_config)
    # after config/vllm.py has logged it enabled: its "CPU KV cache size" line reads as
    # --no-async-scheduling; a GPU log's echoed launch line or non-default args as given
    from kvplan.planning.explain import _other_settings

    head = "INFO 05-01 10:00:00 [api_server.py:1040] vLLM API server version 0.32.0\n"
    cases = [
        ("INFO 05-01 10:00:00 [vllm.py:1110] Asynchronous scheduling is enabled.\n"
         "INFO 05-01 10:01:00 [kv_cache_utils.py:1300] CPU KV cache size: 3,568 tokens\n", False),
        ("$ vllm serve openai/gpt-oss-20b --no-async-scheduling\n", False),
        ("$ vllm serve openai/gpt-oss-20b --async-scheduling\n", True),
        ("INFO 05-01 10:00:00 [utils.py:326] non-default args: {'model': 'm', "
         "'async_scheduling': False}\n", False),
        ("INFO 05-01 10:00:00 [utils.py:326] non-default args: {'model': 'm', "
         "'async_scheduling': True}\n", True),
        ("INFO 05-01 10:01:00 [kv_cache_utils.py:1300] GPU KV cache size: 3,568 tokens\n", None),
    ]
    for text, value in cases:
        s = startlog.read_log(head + text, reading_formats()).settings
        assert _other_settings(s, "vllm", {}).get("async_scheduling") is value, text
