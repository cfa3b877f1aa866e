"""Ollama's text: `ollama serve` and the environment it reads, and its start-up log, as
data (read by kvplan.sources.launch and kvplan.sources.startlog without the engine's code).
Its log is mostly its runner's llama.cpp lines (kvplan.engines.llamacpp.text, read as they
are) with Ollama's own: its release and its server config line, whose OLLAMA_* values are
read through `launch_flags().env` as `ollama serve`'s environment is.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvplan.core.launch import EngineLaunch, EngineLog



def _log_format() -> EngineLog:
    """Ollama's log: llama.cpp's line formats (the runner's), its context as the runner's
    (`runner_ctx`, num_ctx x parallel: engine.runner_settings takes num_ctx from it) and
    undated (llama.cpp's build numbers are not Ollama's releases), after Ollama's own lines:
    its release (routes.go "Listening on ... (version 0.5.7)", "version=0.12.3") and the
    runner's command (server.go "starting llama server" cmd="... --ctx-size 8192 ...
    --parallel 4"). The server config line (routes.go `server config env="map[...
    OLLAMA_NUM_PARALLEL:1 ...]"`) is read by explain through `launch_flags().env`."""
    from dataclasses import replace

    from kvplan.core.launch import EngineLog, LogLine
    from kvplan.engines.llamacpp.text import LOG_FORMAT as LLAMACPP

    own = (
        LogLine("version", "(version ", r"\(version (\d[\w.+-]*)\)", "str", "version"),
        LogLine("version", "version=", r"\bversion=(\d[\w.+-]*)", "str", "version"),
        LogLine("runner_ctx", "--ctx-size", r"--ctx-size (\d+)", "int", "settings"),
        LogLine("parallel", "--parallel", r"--parallel (\d+)", "int", "settings"),
        # the runner's llama.cpp context, as num_ctx (one slot's) and the whole cache
        # (llama_kv_cache_init's kv_size, the 2024-2025 builds Ollama carried)
        LogLine("num_ctx", "n_ctx_per_seq", r"\bn_ctx_per_seq\s+=\s+(\d+)", "int",
                "settings"),
        LogLine("num_ctx", "n_ctx_per_seq (", r"\bn_ctx_per_seq \((\d+)\) <", "int",
                "settings"),
        LogLine("runner_ctx", "kv_size =", r"\bkv_size = (\d+)", "int", "settings"),
        # the scheduler's estimate of the runner's whole cache, printed before the runner
        # starts (llm/memory.go EstimateGPULayers, 0.1.3x-0.11: the offload line's
        # memory.required.kv, ggml.go GraphSize: --ctx-size cells x layers x (K + V head
        # dims) x KV heads at the cache type's bytes, Ollama's format.HumanBytes2 to one
        # decimal): where the runner's own llama.cpp lines are not in the excerpt it is the
        # log's only KV figure (ollama#8098, #9181)
        LogLine("kv_mib", "memory.required.kv=",
                r'memory\.required\.kv="([\d.]+ (?:[KMGT]i)?B)"', "mib", "kv", "MiB"),
    )
    runner = tuple(replace(line, releases=("", ""), figure="runner_ctx")
                   if line.figure == "max_model_len" else replace(line, releases=("", ""))
                   for line in LLAMACPP.figures)
    return EngineLog(
        "ollama", "Ollama",
        markers=(r'msg="server config"|INFO server config env=|Listening on \S+ \(version |'
                 r'msg="starting llama server"|msg="llama runner started|'
                 r"starting ollama engine|ollama runner|memory\.required\.kv="),
        figures=(*own, *runner), unmodelled=LLAMACPP.unmodelled, within="llamacpp")


LOG_FORMAT: EngineLog = _log_format()


@functools.cache
def launch_flags() -> EngineLaunch:
    """`ollama serve` (alias `start`, cmd/cmd.go) takes no flag that changes memory: the
    server is set by its environment (envconfig/config.go), read here as the deployment's
    settings; the model is not on the line (it is loaded per request), so MODEL beside
    --from-command names it."""
    from kvplan.core.launch import EngineLaunch

    env = {
        # the context of each request (num_ctx) unless the request or Modelfile sets one
        "OLLAMA_CONTEXT_LENGTH": ("max_model_len", "tokens"),
        "OLLAMA_NUM_PARALLEL": ("parallel", "int"),  # requests at once, each num_ctx cells
        "OLLAMA_KV_CACHE_TYPE": ("kv_dtype", "str"),  # f16, q8_0, q4_0
        "OLLAMA_FLASH_ATTENTION": ("flash_attn", "str"),  # 1/0 (strconv.ParseBool)
    }
    # OLLAMA_NUM_PARALLEL=0 is the variable's absence in every release read: before 0.10.0
    # both are "auto" (server/sched.go pickBestFullFitByLibrary: `if *numParallel <= 0` tries
    # defaultParallel, then 1); from 0.10.0 envconfig's default is 1 (NumParallel =
    # Uint("OLLAMA_NUM_PARALLEL", 1)) and 0 is raised to it (sched.go load: `if numParallel < 1
    # { numParallel = 1 }`, `max(int(envconfig.NumParallel()), 1)` from 0.12.0)
    unset = {"OLLAMA_NUM_PARALLEL": ("0",)}
    # the runner `ollama serve` starts for a model, as its log prints the command ("starting
    # llama server" cmd="/usr/local/bin/ollama runner --model ... --ctx-size 8192 ...
    # --parallel 4"; llm/server.go NewLlamaServer, 0.4 to 0.11.4: from 0.11.5 the line names
    # only --model and --port and the context goes in the load request), `ollama_llama_server
    # runner` in 0.5.4-0.5.x's runner builds. Its flags are Go's flag package's (runner.go
    # Execute, llama/runner in 0.5, runner/llamarunner from 0.6): --ctx-size is the whole
    # context, num_ctx x --parallel (server.go: `opts.NumCtx * numParallel`), the llama.cpp
    # n_ctx over n_seq_max = --parallel sequences; engine.launch_settings turns it into num_ctx
    runner = {
        "--model": ("model", "str"),  # a blob of Ollama's store: MODEL beside the line names it
        "--ctx-size": ("runner_ctx", "int"),  # default 2048
        "--parallel": ("parallel", "int"),  # default 1
        "--kv-cache-type": ("kv_dtype", "str"),  # default "" = f16
        "--flash-attn": ("flash_attn", "flag"),  # default false
        "--n-gpu-layers": ("n_gpu_layers", "str"),  # default 0 (server.go omits it for -1)
        # Ollama's own engine for the model (runner/ollamarunner): kvplan plans llama.cpp's
        # cache, so the setting is named in a warning (planning.launch)
        "--ollama-engine": ("ollama_engine", "flag"),
        # n_batch = --batch-size x --parallel; llama.cpp's compute buffers follow n_ubatch (512)
        "--batch-size": ("", "ignore"), "--main-gpu": ("", "ignore"),
        "--threads": ("", "ignore"), "--port": ("", "ignore"),
        "--tensor-split": ("", "ignore"),  # the split over GPUs, not the cache's size
        "--verbose": ("", "ignore-flag"), "--no-mmap": ("", "ignore-flag"),
        "--mlock": ("", "ignore-flag"), "--multiuser-cache": ("", "ignore-flag"),
    }
    programs = (("ollama", "serve"), ("ollama", "start"), ("ollama", "runner"),
                ("ollama_llama_server", "runner"))
    return EngineLaunch("ollama", programs,
                        images=("ollama/ollama",), flags={"-h": ("", "ignore-flag"),
                                                          "--help": ("", "ignore-flag")},
                        env=env, unset_values=unset,
                        program_flags={("ollama", "runner"): runner,
                                       ("ollama_llama_server", "runner"): runner})
