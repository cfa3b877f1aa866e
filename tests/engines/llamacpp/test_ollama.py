"""Ollama (kvplan.engines.llamacpp.ollama): `ollama serve` and its environment planned through
llama.cpp's rules, against the KV figures real Ollama logs print
(tests/fixtures/logs/llamacpp/, index.yaml) and the rules of Ollama's source at each release
(kvplan/engines/llamacpp/ollama/config.py cites them)."""

from __future__ import annotations

import json
import re

import pytest
from paths import FIXTURES
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()
LOGS = FIXTURES / "logs" / "llamacpp"
MIB = 2**20
QWEN25_7B = str(FIXTURES / "engines" / "models" / "qwen2.5-7b.yaml")


def logged_mib(log: str, pattern: str) -> float:
    """A MiB figure as the log prints it (the first line matching `pattern`)."""
    found = re.search(pattern, (LOGS / log).read_text())
    assert found, (log, pattern)
    return float(found.group(1))


def plan(*args: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["plan", *args, "-f", "json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


# ollama 0.5.12, https://github.com/ollama/ollama/issues/9352
I9352 = "ollama-i9352-llama31-8b-10x8192-2x4090.log"


def test_ten_slots_of_8192_as_ollama_0_5_12_logged_them():
    # the reporter's Ollama 0.5.12 ran llama3.1:8b with num_ctx 8192 and 10 parallel slots on
    # 2x RTX 4090: the runner's n_ctx is 81,920 and "KV self size = 10240.00 MiB"
    _, out = plan("llama-3.1-8b", "--engine", "ollama", "--engine-version", "0.5.12",
                  "--max-model-len", "8192", "--parallel", "10", "--gpu", "rtx-4090",
                  "--count", "2")
    numbers = out["engine"]
    assert numbers["kv_size"] == 81920 == int(re.search(
        r"n_ctx += (\d+)", (LOGS / I9352).read_text()).group(1))
    assert numbers["total_bytes"] == logged_mib(I9352, r"KV self size += +([\d.]+) MiB") * MIB
    # the compute buffer of that unified 81,920-cell cache, as the runner printed it
    assert numbers["compute_mib"] == logged_mib(I9352, r"CUDA0 compute buffer size = +([\d.]+)")
    assert numbers["num_ctx"] == 8192 and out["deployment"]["max_model_len"] == 8192


def test_the_same_settings_from_the_serve_line():
    # OLLAMA_NUM_PARALLEL x OLLAMA_CONTEXT_LENGTH cells (llm/server.go KvSize); the model is
    # not on the line, MODEL names it; any release's cache holds the 81,920 cells of the log
    _, out = plan("llama-3.1-8b", "--from-command",
                  "OLLAMA_NUM_PARALLEL=10 OLLAMA_CONTEXT_LENGTH=8192 ollama serve",
                  "--gpu", "rtx-4090", "--count", "2")
    assert out["deployment"]["engine"] == "ollama"
    assert out["engine"]["total_bytes"] == logged_mib(I9352, r"KV self size += +([\d.]+)") * MIB
    # a cache per slot from 0.11.5 (llama.cpp's kv_unified false): 10 of 8,192 cells
    assert out["engine"]["cells_per_seq"] == 8192 and out["engine"]["parallel"] == 10


def test_one_request_of_4096_as_a_2026_ollama_logged_it():
    # an ollama runner log of 2026-05-05: n_ctx 4096, one slot, flash attention auto;
    # "size = 224.00 MiB (4096 cells, 28 layers, 1/1 seqs)", compute buffer 304.00 MiB
    log = "llamacpp-ollama-qwen25-7b-c4096-fa.log"
    _, out = plan(QWEN25_7B, "--from-command", "OLLAMA_CONTEXT_LENGTH=4096 ollama serve",
                  "--engine-version", "0.23")
    assert out["engine"]["total_bytes"] == logged_mib(
        log, r"llama_kv_cache: size = +([\d.]+) MiB") * MIB
    assert out["engine"]["compute_mib"] == logged_mib(log, r"CUDA0 compute buffer size = +([\d.]+)")


def test_the_vram_based_default_on_a_cpu_as_ollama_0_16_1_logged_it():
    # Ollama 0.16.1 on a CPU: 'vram-based default context total_vram="0 B"
    # default_num_ctx=4096', then `msg="kv cache" device=CPU size="384.0 MiB"` (its own
    # engine, whose causal cache is llama.cpp's: 48 layers x 4 KV heads x 128 x 2 x 2 B)
    log = "llamacpp-ollama-0.16.1-engine-qwen3-coder-30b-cpu-c4096.log"
    text = (LOGS / log).read_text()
    assert "default_num_ctx=4096" in text
    _, out = plan("qwen3-30b-a3b", "--engine", "ollama", "--engine-version", "0.16.1")
    assert out["engine"]["num_ctx"] == 4096
    assert out["engine"]["total_bytes"] == logged_mib(
        log, r'msg="kv cache" device=CPU size="([\d.]+) MiB"') * MIB == 4096 * 48 * 4 * 128 * 4


@pytest.mark.parametrize("version,gpu,count,num_ctx", [
    ("0.6.6", "h100", "1", 2048),  # api/types.go DefaultOptions NumCtx 2048
    ("0.6.7", "h100", "1", 4096),  # envconfig OLLAMA_CONTEXT_LENGTH default 4096
    ("0.15.4", "h100", "1", 4096),
    ("0.15.5", "rtx-5070-ti", "1", 4096),  # 16 GB: under 23 GiB
    ("0.15.5", "rtx-4090", "1", 32768),  # 23.6 GiB reported: 23 GiB or more
    ("0.15.5", "rtx-4090", "2", 131072),  # 47.3 GiB over two: 262,144, cut to the 131,072 trained
    ("0.30.0", "h100", "1", 131072),  # 79.2 GiB: 262,144, cut likewise
])
def test_the_default_context_by_release_and_gpu_memory(version, gpu, count, num_ctx):
    _, out = plan("llama-3.1-8b", "--engine", "ollama", "--engine-version", version,
                  "--gpu", gpu, "--count", count)
    assert out["engine"]["num_ctx"] == num_ctx
    # one request of num_ctx is what kvplan then plans: 131,072 B a token (32 x 8 x 128 x 4)
    assert out["engine"]["total_bytes"] == num_ctx * 32 * 8 * 128 * 4


@pytest.mark.parametrize("version,flash,k_bytes_per_cell", [
    # a q8_0 row of 8 x 128 values: 32 blocks of 34 B; f16: 2 B a value
    ("0.20.0", "", 8 * 128 * 2),  # dropped without OLLAMA_FLASH_ATTENTION=1
    ("0.20.0", "OLLAMA_FLASH_ATTENTION=1 ", 8 * 128 // 32 * 34),
    ("0.30.0", "", 8 * 128 // 32 * 34),  # llama-server takes --cache-type-k q8_0 as given
])
def test_a_quantized_cache_needs_flash_attention_up_to_0_29(version, flash, k_bytes_per_cell):
    _, out = plan("llama-3.1-8b", "--from-command",
                  f"{flash}OLLAMA_KV_CACHE_TYPE=q8_0 OLLAMA_CONTEXT_LENGTH=4096 ollama serve",
                  "--engine-version", version)
    assert out["engine"]["k_bytes"] == 4096 * 32 * k_bytes_per_cell


@pytest.mark.parametrize("version,cells", [
    ("0.11.4", 20224),  # one cache: GGML_PAD(5000 x 4, 256)
    ("0.11.5", 20480),  # a cache per slot: 4 x GGML_PAD(5000, 256)
])
def test_one_cache_for_every_slot_before_0_11_5(version, cells):
    _, out = plan("llama-3.1-8b", "--engine", "ollama", "--engine-version", version,
                  "--max-model-len", "5000", "--parallel", "4")
    assert out["engine"]["cells"] == cells


def test_the_docker_image_tag_is_the_release():
    _, out = plan("llama-3.1-8b", "--from-command",
                  "docker run -d --gpus=all -e OLLAMA_NUM_PARALLEL=2 -p 11434:11434 "
                  "ollama/ollama:0.6.2")
    assert out["deployment"]["engine_version"] == "0.6.2"
    assert out["engine"]["kv_size"] == 2 * 2048  # 0.6.2's default num_ctx, two slots


@pytest.mark.parametrize("line,message", [
    ("ollama serve", "names no model: it loads one per request"),
    ("OLLAMA_KV_CACHE_TYPE=q5_0 ollama serve", "Ollama has no KV cache type 'q5_0'"),
    ("OLLAMA_FLASH_ATTENTION=maybe ollama serve", "OLLAMA_FLASH_ATTENTION"),
])
def test_bad_settings_are_named(line, message):
    model = [] if line == "ollama serve" else ["llama-3.1-8b"]
    result = runner.invoke(app, ["plan", *model, "--from-command", line])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("version,cells", [("0.6.2", 2048), ("0.12.3", 4096)])
def test_num_parallel_0_is_the_variable_unset(version, cells):
    # Ollama's scheduler reads OLLAMA_NUM_PARALLEL=0 as it reads the variable's absence
    # (server/sched.go: before 0.10.0 both pick the slots that fit, from 0.10.0 both give 1),
    # so the line plans as it does without the variable: one slot of the release's default
    # num_ctx (2,048 in 0.6.2, 4,096 in 0.12.3: config.RULES), not a refusal of 0
    _, out = plan("llama-3.1-8b", "--from-command",
                  f"docker run -d --gpus=all -e OLLAMA_NUM_PARALLEL=0 ollama/ollama:{version}")
    assert out["deployment"]["engine_version"] == version
    assert out["engine"]["kv_size"] == cells


# --- the runner's own line: Ollama 0.4-0.11.4 log the command they start it with ("starting
# llama server" cmd="... runner --model BLOB --ctx-size N ... --parallel P"), where N is num_ctx
# x P (llm/server.go NewLlamaServer) and the runner's llama.cpp context holds N cells

# https://github.com/ollama/ollama/issues/10740 (Ollama 0.6.8, three GPUs); the same log then
# prints "llama_context: n_seq_max = 1", "n_ctx = 32768", "flash_attn = 1" and
# "n_ctx_per_seq (32768) < n_ctx_train (40960)": Qwen3-32B (64 layers, 8 KV heads of 128)
I10740 = ("/usr/local/bin/ollama runner --model /usr/share/ollama/.ollama/models/blobs/sha256-"
          "c4c7c3cb6da260df1fe1d3cfd090a32dc7cc348f1278158be18e301f390d6f6e --ctx-size 32768 "
          "--batch-size 512 --n-gpu-layers 65 --verbose --threads 32 --flash-attn --parallel 1 "
          "--tensor-split 22,22,21 --port 43719")
# https://github.com/ollama/ollama/issues/11964 (gpt-oss:20b under Ollama's own engine on two
# RTX 5060s): the reporter asked num_ctx 3182 and found the runner at --ctx-size 40960 with
# five slots, 8,192 a slot
I11964 = ("/home/localai/bin/ollama runner --ollama-engine --model /home/localai/.ollama/models/"
          "blobs/sha256-b112e727c6f18875636c56a779790a590d705aec9e1c0eb5a97d51fc2a778583 "
          "--ctx-size 40960 --batch-size 512 --n-gpu-layers 17 --threads 20 --parallel 5 "
          "--tensor-split 9,8 --port 34017")
# https://github.com/ollama/ollama/issues/8963 (Ollama 0.5.x's runner build, run as
# `ollama_llama_server runner`)
I8963 = ("/home/semtp/notebooks/ollama/lib/ollama/runners/cpu_avx2/ollama_llama_server runner "
         "--model /data/7859b431efb84f7d88b3e2e1acab4765/ollama_models/blobs/sha256-9801e7fce27d"
         "bf3d0bfb468b7b21f1d132131a546dfc43e50518631b8b1800a9 --ctx-size 8192 --batch-size 512 "
         "--n-gpu-layers 31 --verbose --threads 36 --no-mmap --parallel 1 --port 46403")


def test_the_runner_line_is_the_runners_context():
    # one slot of 32,768 cells with flash attention, as the log's llama_context lines say; the
    # cache by hand: 64 layers x 2 (K, V) x 8 heads x 128 x 2 B x 32,768 cells = 8 GiB (the
    # GPUs do not change it: one 80 GiB device here)
    result = runner.invoke(app, ["plan", "qwen3-32b", "--from-command", I10740,
                                 "--gpu-memory", "80GiB", "-f", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["deployment"]["engine"] == "ollama"
    assert (out["engine"]["kv_size"], out["engine"]["parallel"]) == (32768, 1)
    assert out["deployment"]["max_model_len"] == 32768  # num_ctx: one slot holds it all
    assert out["engine"]["total_bytes"] == 64 * 2 * 8 * 128 * 2 * 32768 == 8 * 2**30
    assert out["engine"]["gpu_layers"] == 64  # --n-gpu-layers 65: every layer and the output


def test_the_runner_context_is_split_over_its_slots():
    # --ctx-size 40960 over --parallel 5: num_ctx 8,192 (40,960 / 5) for each request; the
    # runner ran Ollama's own engine, which kvplan says it does not model
    result = runner.invoke(app, ["plan", "gpt-oss-20b", "--from-command", I11964,
                                 "--gpu-memory", "16GiB", "-f", "json"])
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    assert out["deployment"]["max_model_len"] == 40960 // 5 == 8192
    assert (out["engine"]["kv_size"], out["engine"]["parallel"]) == (40960, 5)
    assert "--ollama-engine" in result.stderr and "Ollama's own engine" in result.stderr


def test_the_0_5_runner_build_is_read_as_ollamas_runner():
    from kvplan.planning.launch import from_command

    launched = from_command(I8963, "llama-3.1-8b")
    assert launched.engine == "ollama"
    # the runner's defaults where the line is silent: flash attention off (fs.Bool
    # "flash-attn" false); its flags that change no memory are not reported as unknown
    assert launched.overrides["max_model_len"] == 8192
    assert launched.overrides["n_gpu_layers"] == "31"
    assert launched.overrides["flash_attn"] == "off"
    assert not any("not a flag kvplan knows" in w for w in launched.warnings)


def test_the_runners_flags_are_not_ollama_serves():
    # `ollama serve` takes no context flag (its environment sets it): the runner's table is
    # read after the runner's words only
    from kvplan.planning.launch import from_command

    launched = from_command("ollama serve --ctx-size 8192", "llama-3.1-8b")
    assert "max_model_len" not in launched.overrides
    assert any("--ctx-size: not a flag kvplan knows for ollama" in w for w in launched.warnings)


def test_a_runner_line_without_a_model_says_to_give_one():
    result = runner.invoke(app, ["plan", "--from-command", I8963])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "give the model as MODEL beside --from-command" in result.output


# an Ollama 0.9.0 session on a 4 GB CPU droplet (index.yaml: its source), whose log holds the
# runner's command and the runner's own llama.cpp lines
I_TINY = "ollama-0.9.0-tinyllama-cpu-runner-2x4096.log"
TINYLLAMA = str(FIXTURES / "engines" / "models" / "tinyllama-1.1b.yaml")


def test_the_runner_line_of_a_log_plans_the_cache_that_log_printed():
    # the runner line "--ctx-size 8192 ... --parallel 2": "llama_context: n_seq_max = 2",
    # "n_ctx = 8192", "n_ctx_per_seq = 4096" and "KV self size = 176.00 MiB" in the same log
    # (22 layers x 2 x 4 heads x 64 x 2 B x 8,192 cells); its CPU compute buffer, 544.01 MiB
    line = re.search(r'cmd="([^"]+)"', (LOGS / I_TINY).read_text()).group(1)
    _, out = plan(TINYLLAMA, "--from-command", line, "--gpu-memory", "3.8GiB",
                  "--engine-version", "0.9.0")
    assert (out["engine"]["kv_size"], out["engine"]["parallel"]) == (8192, 2)
    assert out["deployment"]["max_model_len"] == 4096 == int(re.search(
        r"n_ctx_per_seq = (\d+)", (LOGS / I_TINY).read_text()).group(1))
    assert out["engine"]["total_bytes"] == logged_mib(I_TINY, r"KV self size += +([\d.]+)") * MIB
    assert out["engine"]["total_bytes"] == 22 * 2 * 4 * 64 * 2 * 8192
    assert abs(out["engine"]["compute_mib"] - logged_mib(
        I_TINY, r"CPU compute buffer size = +([\d.]+)")) < 0.01


@pytest.mark.parametrize("version,num_ctx", [("0.9.0", 4096), ("0.9.3", 2048)])
def test_num_ctx_over_the_trained_context_is_cut_from_0_9_3(version, num_ctx):
    # the same server's settings (OLLAMA_CONTEXT_LENGTH 4096, two slots) on TinyLlama, trained
    # on 2,048: 0.9.0 ran 4,096 a slot (the log's "n_ctx_per_seq (4096) > n_ctx_train
    # (2048)"); 0.9.3's llm/server.go NewLlamaServer cuts num_ctx to n_ctx_train ("requested
    # context size too large for model")
    _, out = plan(TINYLLAMA, "--from-command",
                  "OLLAMA_CONTEXT_LENGTH=4096 OLLAMA_NUM_PARALLEL=2 ollama serve",
                  "--gpu-memory", "3.8GiB", "--engine-version", version)
    assert out["engine"]["num_ctx"] == num_ctx
    assert out["engine"]["kv_size"] == 2 * num_ctx
