"""Ollama's start-up logs through `kvplan explain`: planned as Ollama (its release, its
server config line's OLLAMA_* values read through the `ollama serve` environment table, num_ctx
x parallel), not as a bare llama.cpp run. The log is tests/fixtures/logs/llamacpp/
ollama-i9221-qwen2-32b-0.5.7-auto-parallel.log (ollama/ollama issue 9221, Ollama 0.5.7)."""

from __future__ import annotations

import paths
import yaml

from kvplan.planning.explain import explain, reading_formats
from kvplan.sources.startlog import read_log

CORPUS = paths.FIXTURES / "logs"
QWQ = paths.FIXTURES / "engines" / "models" / "qwq-32b.yaml"
I9221 = CORPUS / "llamacpp" / "ollama-i9221-qwen2-32b-0.5.7-auto-parallel.log"
MIB = 2**20


def test_an_ollama_log_is_planned_as_ollama():
    result = explain(I9221.read_text(encoding="utf-8"), model=str(QWQ))
    assert result.engine == "ollama"
    assert result.version == "0.5.7"  # "Listening on ... (version 0.5.7)"
    # OLLAMA_NUM_PARALLEL:0 is unset; the runner's kv_size 8,192 over its n_ctx_per_seq 2,048
    # is the 4 slots Ollama chose, each of num_ctx 2,048
    assert result.settings["parallel"] == 4
    assert result.settings["max_model_len"] == 2048
    rows = {r.quantity: r for r in result.rows if r.basis == "given the logged budget"}
    # by hand: 64 layers x (K and V) x 8 KV heads x 128 x 2 bytes (f16) x 8,192 cells
    assert rows["kv_mib"].kvplan == 64 * 2 * 8 * 128 * 2 * 8192 / MIB
    assert rows["kv_mib"].logged == 2048.0 and rows["kv_mib"].status == "ok"
    assert result.ok


def test_the_server_config_line_is_read_through_the_ollama_serve_environment():
    # ollama/ollama issue 12998 (0.12.10): the server config line as printed
    line = ('time=2025-11-07T18:10:03.828+08:00 level=INFO source=routes.go:1525 msg="server '
            'config" env="map[CUDA_VISIBLE_DEVICES: OLLAMA_CONTEXT_LENGTH:262144 OLLAMA_DEBUG:'
            'INFO OLLAMA_FLASH_ATTENTION:false OLLAMA_KV_CACHE_TYPE: OLLAMA_NUM_PARALLEL:1 '
            'OLLAMA_SCHED_SPREAD:false ROCR_VISIBLE_DEVICES:]"')
    facts = read_log(line, reading_formats(), "ollama")
    assert facts.settings["max_model_len"] == 262144
    assert facts.settings["parallel"] == 1
    assert facts.settings["flash_attn"] == "false"
    assert "kv_dtype" not in facts.settings  # OLLAMA_KV_CACHE_TYPE: empty, unset


def test_every_ollama_log_of_the_corpus_is_read_as_ollama():
    index = yaml.safe_load((CORPUS / "index.yaml").read_text(encoding="utf-8"))
    ollama = [e for e in index["logs"] if e["engine"] == "ollama"]
    assert len(ollama) >= 5
    for entry in ollama:
        text = (CORPUS / entry["file"]).read_text(encoding="utf-8")
        assert read_log(text, reading_formats()).engine == "ollama", entry["id"]


def test_the_server_configs_context_is_num_ctx_where_the_runner_prints_none():
    # the server config line and release of issue 9221's log, with OLLAMA_CONTEXT_LENGTH and
    # OLLAMA_NUM_PARALLEL set as issue 12998's line sets them, and its KV line: Ollama's
    # rule gives the runner num_ctx x parallel = 4,096 x 2 cells, 2 x 1,024 MiB at 2,048
    text = I9221.read_text(encoding="utf-8").replace(
        "OLLAMA_NUM_PARALLEL:0", "OLLAMA_NUM_PARALLEL:2 OLLAMA_CONTEXT_LENGTH:4096")
    text = "\n".join(line for line in text.splitlines()
                     if "kv_size" not in line and "n_ctx_per_seq" not in line)
    result = explain(text, model=str(QWQ))
    assert result.settings["max_model_len"] == 4096 and result.settings["parallel"] == 2
    kv = next(r for r in result.rows if r.quantity == "kv_mib")
    # by hand: 64 layers x (K and V) x 8 KV heads x 128 x 2 bytes x (4,096 x 2) cells
    assert kv.kvplan == 64 * 2 * 8 * 128 * 2 * (4096 * 2) / MIB
    assert kv.status == "ok"

