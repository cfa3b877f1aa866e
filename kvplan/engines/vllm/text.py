"""vLLM's words as data: the `vllm serve` flags kvplan reads and the start-up log lines.

The flags come from `vllm/engine/arg_utils.py` EngineArgs.add_cli_args (0.33): those that
change what the memory holds map to a deployment setting, the rest are read and ignored
(kvplan.sources.launch). The log figures are what kvplan.sources.startlog reads from a
start-up log, in the units the engine prints them.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from kvplan.core.launch import EngineLog

if TYPE_CHECKING:
    from kvplan.core.launch import EngineLaunch


# --- the launch command (`vllm serve`), read by kvplan.sources.launch -------------------------
# Flags from vllm/engine/arg_utils.py EngineArgs.add_cli_args (0.33). Those that change what the
# memory holds map to a deployment setting; the rest are read and ignored.
@functools.cache
def launch_flags() -> EngineLaunch:
    from kvplan.core.launch import EngineLaunch

    setting = {
        "--model": ("model", "str"), "--tensor-parallel-size": ("tp", "int"),
        "-tp": ("tp", "int"), "--pipeline-parallel-size": ("pp", "int"), "-pp": ("pp", "int"),
        "--data-parallel-size": ("dp", "int"), "-dp": ("dp", "int"),
        "--decode-context-parallel-size": ("dcp", "int"), "-dcp": ("dcp", "int"),
        "--enable-expert-parallel": ("expert_parallel", "flag"),
        "--max-model-len": ("max_model_len", "tokens"),
        "--gpu-memory-utilization": ("memory_fraction", "float"),
        "--kv-cache-dtype": ("kv_dtype", "str"), "--block-size": ("block_size", "int"),
        "--max-num-seqs": ("max_num_seqs", "int"),
        "--max-num-batched-tokens": ("max_num_batched_tokens", "int"),
        "--quantization": ("quantization", "str"), "-q": ("quantization", "str"),
        "--dtype": ("model_dtype", "str"),
        "--enforce-eager": ("enforce_eager", "flag"),
        "--kv-cache-memory-bytes": ("kv_memory_bytes", "int"),
        "--enable-prefix-caching": ("prefix_caching", "flag"),
        "--no-enable-prefix-caching": ("prefix_caching", "no-flag"),
        "--enable-chunked-prefill": ("chunked_prefill", "flag"),
        "--no-enable-chunked-prefill": ("chunked_prefill", "no-flag"),
        "--revision": ("revision", "str"), "--swap-space": ("swap_space_gib", "float"),
        # speculative decoding: a JSON object from 0.8 (its num_speculative_tokens is read),
        # a flag of its own before (0.4-0.7 EngineArgs)
        "--speculative-config": ("speculative_config", "json"),
        "--num-speculative-tokens": ("num_speculative_tokens", "int"),
    }
    ignored = ("--host", "--port", "--served-model-name", "--api-key", "--tokenizer",
               "--tokenizer-mode", "--download-dir", "--chat-template", "--tool-call-parser",
               "--reasoning-parser", "--seed", "--max-logprobs", "--root-path",
               "--uvicorn-log-level", "--allowed-origins", "--generation-config",
               "--distributed-executor-backend", "--config-format", "--load-format",
               "--tokenizer-revision", "--code-revision", "--response-role", "--ssl-keyfile",
               "--ssl-certfile", "--log-config-file", "--hf-overrides",
               "--override-generation-config", "--worker-cls", "--max-log-len")
    ignored_flags = ("--trust-remote-code", "--disable-log-requests", "--disable-log-stats",
                     "--enable-auto-tool-choice", "--disable-fastapi-docs",
                     "--enable-log-requests", "--disable-frontend-multiprocessing",
                     "--enable-prompt-tokens-details", "--enable-server-load-tracking")
    flags = {**setting, **{f: ("", "ignore") for f in ignored},
             **{f: ("", "ignore-flag") for f in ignored_flags}}
    return EngineLaunch("vllm", (("vllm", "serve"), ("-m", "vllm.entrypoints.openai.api_server"),
                                 ("-m", "vllm.entrypoints.api_server")),
                        images=("vllm/vllm-openai", "vllm-openai"), flags=flags,
                        positional="model")


# --- its start-up log (read by kvplan.sources.startlog; units as the engine prints them) ---

LOG_FORMAT = EngineLog(
    "vllm", "vLLM",
    markers=(r"vLLM|vllm serve|gpu_worker\.py|kv_cache_utils\.py|Memory profiling "
             r"results|# GPU blocks:|GPU KV cache size:|Available KV cache memory"),
    figures=(
        ("version", r"vLLM API server version ([\w.+\-]+)", "str", "version"),
        ("version", r"Initializing a V[01] LLM engine \(v([\w.+\-]+)\)", "str", "version"),
        ("model", r"\bmodel='([^']+)'", "str", "model"),
        ("model", r"'model': '([^']+)'", "str", "model"),
        ("model", r"\bvllm serve ([^\s\\]+)", "str", "model"),
        ("max_model_len", r"\bmax_seq_len=(\d+)", "int", "settings"),
        ("max_model_len", r"'max_model_len': (\d+)", "int", "settings"),
        ("max_model_len", r"--max-model-len[= ](\d+)", "int", "settings"),
        ("tp", r"\btensor_parallel_size=(\d+)", "int", "settings"),
        ("tp", r"--tensor-parallel-size[= ](\d+)", "int", "settings"),
        ("pp", r"\bpipeline_parallel_size=(\d+)", "int", "settings"),
        ("pp", r"--pipeline-parallel-size[= ](\d+)", "int", "settings"),
        ("kv_dtype", r"\bkv_cache_dtype=(\w+)", "str", "settings"),
        ("block_size", r"'block_size': (\d+)", "int", "settings"),
        ("memory_fraction", r"gpu_memory_utilization=([\d.]+)", "num", "settings"),
        ("memory_fraction", r"'gpu_memory_utilization': ([\d.]+)", "num", "settings"),
        ("weights_bytes", r"Model loading took ([\d.]+) ?GiB", "gib", "weights"),
        ("gpu_total_bytes", r"total_gpu_memory=([\d.]+) ?GiB", "gib", "gpu"),
        ("non_torch_bytes", r"non_torch_memory=([\d.]+) ?GiB", "gib", "terms"),
        ("peak_torch_bytes", r"peak_torch_memory=([\d.]+) ?GiB", "gib", "terms"),
        ("cudagraph_bytes", r"Graph capturing finished in [\d.]+ secs?, took ([\d.]+) GiB",
         "gib", "terms"),
        ("available_kv_cache_bytes", r"Available KV cache memory: ([\d.]+) GiB", "gib", "kv"),
        ("available_kv_cache_bytes", r"kv_cache_size=([\d.]+) ?GiB", "gib", "kv"),
        ("num_blocks", r"# (?:GPU|cuda) blocks: (\d+)", "int", "kv"),
        ("kv_cache_tokens", r"GPU KV cache size: ([\d,]+) tokens", "int", "kv"),
        ("max_concurrency_tokens", r"Maximum concurrency for ([\d,]+) tokens per request",
         "int", "kv"),
        ("max_concurrency", r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x",
         "num", "kv"),
    ),
)
