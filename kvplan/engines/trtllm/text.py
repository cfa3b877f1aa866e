"""TensorRT-LLM's text: the `trtllm-serve` flags and the start-up log lines, as data
(read by kvplan.sources.launch and kvplan.sources.startlog).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from kvplan.core.launch import EngineLog, LogLine

if TYPE_CHECKING:
    from kvplan.core.launch import EngineLaunch


# --- the launch command (`trtllm-serve`), read by kvplan.sources.launch ------------------------
# Flags from tensorrt_llm/commands/serve.py (click options, underscore spelling); later
# releases give options a second name (`--moe_expert_parallel_size`/`--ep_size`,
# `--config`/`--extra_llm_api_options`), read as the same setting.
@functools.cache
def launch_flags() -> EngineLaunch:
    from kvplan.core.launch import EngineLaunch

    # the declared settings' flags (--tp_size, --max_seq_len, --max_batch_size, ...) come from their
    # rows (kvplan.engines.settings), joined to this table by kvplan.planning.launch
    setting = {
        "--ep_size": ("ep", "int"), "--moe_expert_parallel_size": ("ep", "int"),
        "--backend": ("backend", "str"), "--tokenizer": ("", "ignore"),
        "--extra_llm_api_options": ("extra_options", "str"),
        "--config": ("extra_options", "str"),
    }
    # what the server does with requests and responses (parsers, templates, tracing, the
    # tokenizer's class, the HF revision of the same weights): no memory of the GPU's
    ignored = ("--host", "--port", "--log_level", "--num_postprocess_workers",
               "--server_role", "--metadata_server_config_file", "--reasoning_parser",
               "--tool_parser", "--chat_template", "--custom_tokenizer", "--revision",
               "--otlp_traces_endpoint", "--media_io_kwargs", "--disagg_cluster_uri",
               "--custom_module_dirs")
    ignored_flags = ("--trust_remote_code", "--grpc", "--fail_fast_on_attention_window_too_large")
    flags = {**setting, **{f: ("", "ignore") for f in ignored},
             **{f: ("", "ignore-flag") for f in ignored_flags}}
    # the LLM API options a YAML file gives (--extra_llm_api_options / --config; serve.py
    # loads it with yaml.safe_load and update_llm_args_with_extra_dict lays it over the flags;
    # the keys are llmapi/llm_args.py's TorchLlmArgs and KvCacheConfig fields, kv_cache_dtype
    # the PyTorch backend's key of 0.19-0.21). Logging and block reuse change no memory; any
    # other key (cuda_graph_config, enable_attention_dp, kv_cache_config.max_tokens, ...) is
    # named as one that might
    options = {
        "max_batch_size": ("max_num_seqs", "int"),
        "max_num_tokens": ("max_num_batched_tokens", "int"),
        "max_seq_len": ("max_model_len", "tokens"),
        "tensor_parallel_size": ("tp", "int"), "pipeline_parallel_size": ("pp", "int"),
        "moe_expert_parallel_size": ("ep", "int"), "backend": ("backend", "str"),
        "kv_cache_config.free_gpu_memory_fraction": ("gpu_memory_utilization", "float"),
        "kv_cache_config.dtype": ("kv_dtype", "str"), "kv_cache_dtype": ("kv_dtype", "str"),
        "print_iter_log": ("", "ignore"), "kv_cache_config.enable_block_reuse": ("", "ignore"),
    }
    return EngineLaunch("trtllm", (("trtllm-serve", "serve"), ("trtllm-serve",)),
                        images=("nvidia/tensorrt-llm/release", "tensorrt_llm/release"),
                        flags=flags, positional="model",
                        option_files={"extra_options": options})


# --- its start-up log (read by kvplan.sources.startlog; units as the engine prints them) ---

LOG_FORMAT = EngineLog(
    "trtllm", "TensorRT-LLM",
    markers=(r"\[TensorRT-LLM\]|paged kv cache|paged KV cache|KV cache primary pool|"
             r"MemUsageChange|memory usage profiling"),
    figures=(
        # the package's import banner (tensorrt_llm/__init__.py: "[TensorRT-LLM] TensorRT-LLM
        # version: X", "TensorRT LLM version: X" in 1.x)
        LogLine("version", "LLM version: ", r"TensorRT[- ]LLM version: ([\w.+\-]+)", "str",
                "version"),
        LogLine("gpu_total_bytes", "max tokens in paged kv cache: total:",
                r"max tokens in paged kv cache: total: ([\d.]+) GiB", "gib", "gpu", "GiB"),
        LogLine("free_bytes", "max tokens in paged kv cache: total:",
                r"max tokens in paged kv cache: total: [\d.]+ GiB, available: ([\d.]+) GiB",
                "gib", "kv", "GiB"),
        LogLine("num_blocks", "Number of blocks in KV cache primary pool:",
                r"Number of blocks in KV cache primary pool: (\d+)", "int", "kv", "blocks"),
        # the runtime's line per attention window (kvCacheManager.cpp: "Max KV cache blocks per
        # sequence: N [window size=W], tokens per block=T, primary blocks=P, secondary
        # blocks=S, ..."), printed where the primary pool's own line is not (1.3.0rc7:
        # tests/fixtures/logs/trtllm/trtllm-kimi-k25-nvfp4-b300-tp8-1.3.0rc7.log); the first
        # release that prints it was not read, so it does not date a log
        LogLine("num_blocks", "primary blocks=", r"tokens per block=\d+, primary blocks=(\d+)",
                "int", "kv", "blocks", combine="last"),
        LogLine("tokens_per_block", "Number of tokens per block:",
                r"Number of tokens per block: (\d+)", "int", "kv", "tokens"),
        # the PyTorch backend (1.x, _torch/pyexecutor/_util.py KvCacheCreator) first builds a
        # small pool to profile with ("tmp kv_mem" in its estimate line), then the pool it
        # serves with, each printing the runtime's lines: the last of them is the pool
        # (tests/fixtures/logs/trtllm/trtllm-bench3-llama3-8b-h200-maxtokens1088-1.2.0rc4.log)
        LogLine("kv_cache_bytes", "for max tokens in paged KV cache",
                r"Allocated ([\d.]+) GiB for max tokens in paged KV cache", "gib", "kv", "GiB",
                combine="last"),
        # the C++ runtime of 0.5-0.8 printed the tokens only (kvCacheManager: "Using %d tokens
        # in paged KV cache"; TensorRT-LLM#224, #1400)
        # and its bytes before them (0.8's kvCacheManager.cpp: "Allocate %zu bytes for k/v
        # cache.", then "Using %d tokens in paged KV cache."; TensorRT-LLM#1400)
        LogLine("kv_cache_bytes", "bytes for k/v cache",
                r"Allocate (\d+) bytes for k/v cache", "int", "kv", "bytes",
                releases=("0.5.0", "0.8.0")),
        LogLine("kv_cache_tokens", "tokens in paged KV cache.",
                r"Using (\d+) tokens in paged KV cache\.", "int", "kv", "tokens",
                releases=("0.5.0", "0.8.0")),
        LogLine("kv_cache_tokens", "for max tokens in paged KV cache (",
                r"for max tokens in paged KV cache \((\d+)\)", "int", "kv", "tokens",
                combine="last"),
        # the PyTorch backend's profile (_util.py::KvCacheCreator.configure_kv_cache_capacity
        # and _cal_max_memory): the pool's bytes after the fraction, and the peak's terms
        LogLine("gpu_total_bytes", "device total memory", r"device total memory ([\d.]+) GiB",
                "gib", "gpu", "GiB"),
        LogLine("available_kv_cache_bytes", "available KV cache memory when calculating",
                r"available KV cache memory when calculating max tokens: ([\d.]+) GiB", "gib",
                "kv", "GiB"),
        LogLine("weights_bytes", "Memory used after loading model weights (inside torch)",
                r"Memory used after loading model weights \(inside torch\)[^:]*: ([\d.]+) GiB",
                "gib", "weights", "GiB"),
        LogLine("activation_bytes", "Memory dynamically allocated during inference",
                r"Memory dynamically allocated during inference \(inside torch\)[^:]*: "
                r"([\d.]+) GiB", "gib", "terms", "GiB"),
        LogLine("memory_fraction", "fraction is set", r"fraction is set ([\d.]+)", "num",
                "settings"),
        LogLine("block_size", "Number of tokens per block:", r"Number of tokens per block: "
                r"(\d+)", "int", "settings"),
        # the PyTorch backend's executor settings (_torch/pyexecutor/py_executor_creator.py:
        # "max_seq_len=S, max_num_requests=R, max_num_tokens=T, max_batch_size=B")
        LogLine("max_model_len", "max_seq_len=", r"\bmax_seq_len=(\d+), max_num_requests=",
                "int", "settings"),
        LogLine("max_num_batched_tokens", "max_num_tokens=",
                r"max_num_requests=\d+, max_num_tokens=(\d+)", "int", "settings"),
        LogLine("max_num_seqs", "max_batch_size=",
                r"max_num_tokens=\d+, max_batch_size=(\d+)", "int", "settings"),
    ),
)
