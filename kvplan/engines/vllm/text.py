"""vLLM's words as data: the `vllm serve` flags kvplan reads and the start-up log lines.

The flags come from `vllm/engine/arg_utils.py` EngineArgs.add_cli_args (0.33): those that
change what the memory holds map to a deployment setting, the rest are read and ignored
(kvplan.sources.launch). The log figures are what kvplan.sources.startlog reads from a
start-up log, in the units the engine prints them.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from kvplan.core.launch import EngineLog, LogLine

if TYPE_CHECKING:
    from kvplan.core.launch import EngineLaunch


# --- the launch command (`vllm serve`), read by kvplan.sources.launch -------------------------
# Flags from vllm/engine/arg_utils.py EngineArgs.add_cli_args (0.33). Those that change what the
# memory holds map to a deployment setting; the rest are read and ignored.
@functools.cache
def launch_flags() -> EngineLaunch:
    from kvplan.core.launch import EngineLaunch

    # the declared settings' flags (--tensor-parallel-size, --max-model-len, --kv-cache-dtype,
    # --cpu-offload-gb, ...) come from their rows (kvplan.engines.settings), joined to this
    # table by kvplan.planning.launch
    setting = {
        "--model": ("model", "str"),
        "--quantization": ("quantization", "str"), "-q": ("quantization", "str"),
        "--dtype": ("model_dtype", "str"),
        "--enable-prefix-caching": ("prefix_caching", "flag"),
        "--no-enable-prefix-caching": ("prefix_caching", "no-flag"),
        "--enable-chunked-prefill": ("chunked_prefill", "flag"),
        "--no-enable-chunked-prefill": ("chunked_prefill", "no-flag"),
        "--revision": ("revision", "str"), "--swap-space": ("swap_space_gib", "float"),
        # speculative decoding: a JSON object from 0.8 (its num_speculative_tokens is read),
        # a flag of its own before (0.4-0.7 EngineArgs)
        "--speculative-config": ("speculative_config", "json"),
        # a KV connector (LMCache, NIXL, offloading): read to be named, not modelled
        "--kv-transfer-config": ("kv_transfer_config", "json"),
        # read to be named: they change the model's config (its layers, heads, context) or
        # the CUDA graphs vLLM captures, which kvplan takes from the checkpoint and the release
        "--hf-overrides": ("hf_overrides", "str"), "--rope-scaling": ("rope_scaling", "str"),
        "--compilation-config": ("compilation_config", "str"), "-O": ("compilation_config", "str"),
    }
    ignored = ("--host", "--port", "--served-model-name", "--api-key", "--tokenizer",
               "--tokenizer-mode", "--download-dir", "--chat-template", "--tool-call-parser",
               "--reasoning-parser", "--seed", "--max-logprobs", "--root-path",
               "--uvicorn-log-level", "--allowed-origins", "--generation-config",
               "--distributed-executor-backend", "--config-format", "--load-format",
               "--tokenizer-revision", "--code-revision", "--response-role", "--ssl-keyfile",
               "--ssl-certfile", "--log-config-file",
               "--override-generation-config", "--worker-cls", "--max-log-len",
               # the HTTP front end (processes on the CPU) and the chat layer
               "--api-server-count", "--chat-template-content-format",
               "--tool-parser-plugin", "--default-chat-template-kwargs")
    ignored_flags = ("--trust-remote-code", "--disable-log-requests", "--disable-log-stats",
                     "--enable-auto-tool-choice", "--disable-fastapi-docs",
                     "--enable-log-requests", "--disable-frontend-multiprocessing",
                     "--enable-prompt-tokens-details", "--enable-server-load-tracking",
                     "--enable-reasoning", "--disable-uvicorn-access-log",
                     "--enable-force-include-usage", "--return-tokens-as-token-ids")
    flags = {**setting, **{f: ("", "ignore") for f in ignored},
             **{f: ("", "ignore-flag") for f in ignored_flags}}
    return EngineLaunch("vllm", (("vllm", "serve"), ("-m", "vllm.entrypoints.openai.api_server"),
                                 ("-m", "vllm.entrypoints.api_server")),
                        images=("vllm/vllm-openai", "vllm-openai"), flags=flags,
                        positional="model",
                        # envs.py: the layers of each pipeline stage (get_pp_indices);
                        # kvcached's switch (ovg-project/kvcached), read to be named
                        env={"VLLM_PP_LAYER_PARTITION": ("pp_layer_partition", "str"),
                             "ENABLE_KVCACHED": ("kvcached", "str")},
                        # FlexibleArgumentParser is an argparse.ArgumentParser with its default
                        # allow_abbrev; 0.10.2's own start-up advice writes --kv-cache-memory=N
                        # for --kv-cache-memory-bytes (gpu_worker.py)
                        abbreviations=True)


# --- its start-up log (read by kvplan.sources.startlog; units as the engine prints them) ---
#
# The settings a log echoes as flags (`vllm serve ... --block-size 32`) or in its non-default
# args (`'block_size': 32`) are read through their setting rows (kvplan.engines.settings, the
# row's vLLM flags; kvplan.planning.explain adds those line formats); here are only the lines
# in vLLM's own words (the engine config's `key=value` dump, the V0 profile's sentences).
#
# The releases of a line are those whose source prints it (first, last; "" = open): V0's
# worker.py profile lines of 0.6.3-0.6.4 and 0.6.5-0.10, the executors' block lines, V1's
# gpu_worker.py / kv_cache_utils.py lines (V1 from 0.8, the default engine from 0.8 on; V0
# removed in 0.11). A log that prints no release is dated by the lines it has.

_V0 = ("0.2.0", "0.10.2")
_V1 = ("0.8.0", "")
LOG_FORMAT = EngineLog(
    "vllm", "vLLM",
    markers=(r"vLLM|vllm serve|gpu_worker\.py|kv_cache_utils\.py|Memory profiling|"
             r"GPU blocks:|CUDA blocks:|[GC]PU KV cache size:|Available KV cache memory|"
             r"reserved for KV Cache|stored in KV cache|VllmWorker|model_runner\.py|"
             r"Desired GPU memory utilization|vllm\.entrypoints|LLM engine \(v|"
             # V1's refusal alone (kv_cache_utils.py _check_enough_kv_cache_memory), as a
             # failed start is often posted: the ValueError line and nothing before it
             r"KV cache is needed, which is larger than the available KV cache memory"),
    # api_server.py / cli/serve.py log_non_default_args (0.10 on)
    echoes_non_defaults="non-default args: {",
    # cli/serve.py: `vllm serve MODEL` stores the positional as model_tag (and copies it into
    # model)
    echoed_positional=("model_tag", "model"),
    # 0.8-0.10 default to V1 (config.py RULES, row 0.8.0) but still run V0 on request
    # (VLLM_USE_V1=0, or an unsupported feature), and then say so in llm_engine.py's
    # "Initializing a V0 LLM engine (v0.8.2) with config: ...". V0's worker.py profile and
    # its scheduler defaults did not change after 0.7 (the profile lines are 0.6.5's), so
    # such a log is modelled by 0.7.3, the last release whose default engine was V0.
    modelled_as=((r"Initializing an? V0 LLM engine \(v0\.(?:8|9|10)\.", "0.7.3",
                  "the log runs vLLM's V0 engine under a release whose default engine is V1; "
                  "V0's profile is that of 0.7.3, the last release to run V0 by default"),),
    figures=(
        LogLine("version", "vLLM API server version", r"vLLM API server version ([\w.+\-]+)",
                "str", "version"),
        LogLine("version", "LLM engine (v", r"LLM engine \(v([\w.+\-]+)\)", "str", "version"),
        # the API server's start-up banner (entrypoints utils.py / api_utils.py, 0.17 on):
        # block letters, then "version 0.22.1rc1.dev495+g2ecf7d0eb" on the second line
        LogLine("version", "\u2588  version ", r"\u2588\s+version ([\w.+\-]+)", "str",
                "version"),
        LogLine("model", "model=", r"\bmodel='([^']+)'", "str", "model"),
        LogLine("model", "'model':", r"'model': '([^']+)'", "str", "model"),
        LogLine("model", "vllm serve ", r"\bvllm serve +([^\s\\-][^\s\\]*)", "str", "model"),
        LogLine("model", "--model", r"--model[= ]([^\s\\]+)", "str", "model"),
        LogLine("max_model_len", "max_seq_len=", r"\bmax_seq_len=(\d+)", "int", "settings"),
        LogLine("tp", "tensor_parallel_size=", r"\btensor_parallel_size=(\d+)", "int",
                "settings"),
        LogLine("pp", "pipeline_parallel_size=", r"\bpipeline_parallel_size=(\d+)", "int",
                "settings"),
        LogLine("kv_dtype", "kv_cache_dtype=", r"\bkv_cache_dtype=(\w+)", "str", "settings"),
        # the non-default args' key, at the dict's top level: a speculative_config may hold
        # the drafter's own kv_cache_dtype and quantization (config/speculative.py)
        LogLine("kv_dtype", "'kv_cache_dtype':", r"'kv_cache_dtype': '(\w+)'", "str",
                "settings", echoed=True),
        LogLine("kv_dtype", "cache", r"--kv[-_]cache[-_]dtype[= ](\w+)", "str", "settings"),
        # the weights' quantization (engine config dump, non-default args, the echoed
        # command): "None" where there is none (kvplan.planning.launch.quantization_weights)
        LogLine("quantization", "quantization=", r"\bquantization=([\w-]+)", "str", "settings"),
        LogLine("quantization", "'quantization':", r"'quantization': '([\w-]+)'", "str",
                "settings", echoed=True),
        LogLine("quantization", "--quantization", r"--quantization[= ]([\w-]+)", "str",
                "settings"),
        # the block vLLM settled on for an attention + Mamba hybrid, over any --block-size
        # asked (models/config.py HybridAttentionMambaModelConfig, 0.11-0.19;
        # platforms/interface.py Platform._align_hybrid_block_size, 0.20 to 0.33); before
        # the echoed flag's line (the setting rows' lines come after these)
        LogLine("block_size", "Setting attention block size to",
                r"Setting attention block size to (\d+) tokens", "int", "settings"),
        # the SSM state's dtype the CPU platform settles on: its reset to float32 or the
        # 16-bit one it keeps (platforms/cpu.py check_and_update_config, 0.32), over the flag
        LogLine("mamba_ssm_cache_dtype", "Reset SSM cache type to",
                r"Reset SSM cache type to (float32)\b", "str", "settings"),
        LogLine("mamba_ssm_cache_dtype", "SSM state storage",
                r"Using (float16|bfloat16) SSM state storage", "str", "settings"),
        # the runner vLLM resolved from the architecture, over an echoed `--runner auto`
        # (config/model.py ModelConfig._get_runner_type, 0.11.0 and 0.12.0 logs): pooling
        # profiles a pooler, no sampler (kvplan.engines.vllm.memory.pooler_bytes)
        LogLine("runner", "Resolved `--runner", r"Resolved `--runner \w+` to `--runner (\w+)`",
                "str", "settings"),
        LogLine("max_num_batched_tokens", "max_num_batched_tokens=",
                r"\bmax_num_batched_tokens=(\d+)", "int", "settings"),
        LogLine("enforce_eager", "enforce_eager=", r"\benforce_eager=(True|False)", "str",
                "settings"),
        # V1's sampler backend (v1/sample/ops/topk_topp_sampler.py, TopKTopPSampler.__init__):
        # with FlashInfer the profile's sampler warm-up holds the logits and their fp32 copy
        # only (kvplan.engines.vllm.memory)
        LogLine("flashinfer_sampler", "for top-p & top-k sampling",
                r"Using (FlashInfer) for top-p & top-k sampling", "str", "settings",
                releases=_V1),
        # speculative decoding as V1 echoes it: the engine config's SpeculativeConfig repr
        # (config/speculative.py __repr__: method, model, num_spec_tokens) or the non-default
        # args' dict; the drafter's layer count is in its own config, not printed
        LogLine("speculative_method", "speculative_config=SpeculativeConfig(",
                r"speculative_config=SpeculativeConfig\(method='([\w-]+)'", "str", "settings",
                releases=_V1),
        LogLine("speculative_method", "'speculative_config':",
                r"'speculative_config': \{[^}]*'method': '([\w-]+)'", "str", "settings"),
        LogLine("num_speculative_tokens", "num_spec_tokens=", r"\bnum_spec_tokens=(\d+)", "int",
                "settings", releases=_V1),
        # read inside the non-default args' speculative_config, so not `echoed`
        LogLine("num_speculative_tokens", "'num_speculative_tokens':",
                r"'num_speculative_tokens': (\d+)", "int", "settings"),
        LogLine("dp", "data_parallel_size=", r"\bdata_parallel_size=(\d+)", "int", "settings"),
        LogLine("memory_fraction", "gpu_memory_utilization=",
                r"gpu_memory_utilization=([\d.]+)", "num", "settings"),
        LogLine("memory_fraction", "gpu_memory_utilization (",
                r"gpu_memory_utilization \(([\d.]+)\)", "num", "settings", releases=("0.6.5",
                                                                                    "0.10.2")),
        LogLine("memory_fraction", "Desired GPU memory utilization is (",
                r"Desired GPU memory utilization is \(([\d.]+),", "num", "settings",
                releases=("0.10.0", "")),
        LogLine("weights_bytes", "Model loading took", r"Model loading took ([\d.]+) ?GiB",
                "gib", "weights", "GiB", releases=_V1, scope="worker"),
        LogLine("weights_bytes", "Loading model weights took",
                r"Loading model weights took ([\d.]+) ?GB", "gib", "weights", "GB",
                releases=("0.4.0", "0.10.2"), scope="worker"),
        LogLine("weights_bytes", "model weights take", r"model weights take ([\d.]+) ?GiB",
                "gib", "weights", "GiB", releases=("0.6.5", "0.10.2"), scope="worker"),
        LogLine("weights_bytes", "GiB for weight", r"([\d.]+) GiB for weight", "gib", "weights",
                "GiB", releases=("0.10.0", ""), scope="worker"),
        LogLine("gpu_total_bytes", "total_gpu_memory=", r"total_gpu_memory=([\d.]+) ?GiB",
                "gib", "gpu", "GiB", releases=("0.6.3", "0.6.4")),
        LogLine("gpu_total_bytes", "total_gpu_memory (", r"total_gpu_memory \(([\d.]+) ?GiB\)",
                "gib", "gpu", "GiB", releases=("0.6.5", "0.10.2")),
        LogLine("gpu_total_bytes", "Free memory on device (",
                r"Free memory on device \([\d.]+/([\d.]+) GiB\)", "gib", "gpu", "GiB",
                releases=("0.10.0", "")),
        LogLine("non_torch_bytes", "non_torch_memory=", r"non_torch_memory=([\d.]+) ?GiB",
                "gib", "terms", "GiB", releases=("0.6.3", "0.6.4"), scope="worker"),
        LogLine("non_torch_bytes", "non_torch_memory takes",
                r"non_torch_memory takes ([\d.]+) ?GiB", "gib", "terms", "GiB",
                releases=("0.6.5", "0.10.2"), scope="worker"),
        LogLine("non_torch_bytes", "GiB for non-torch memory",
                r"([\d.]+) GiB for non-torch memory", "gib", "terms", "GiB",
                releases=("0.10.0", ""), scope="worker"),
        LogLine("peak_torch_bytes", "peak_torch_memory=", r"peak_torch_memory=([\d.]+) ?GiB",
                "gib", "terms", "GiB", releases=("0.6.3", "0.6.4"), scope="worker"),
        LogLine("activation_bytes", "activation peak memory takes",
                r"activation peak memory takes ([\d.]+) ?GiB", "gib", "terms", "GiB",
                releases=("0.6.5", "0.10.2"), scope="worker"),
        LogLine("activation_bytes", "GiB for peak activation",
                r"([\d.]+) GiB for peak activation", "gib", "terms", "GiB",
                releases=("0.10.0", ""), scope="worker"),
        LogLine("cudagraph_bytes", "Graph capturing finished",
                r"Graph capturing finished in [\d.]+ secs?, took ([\d.]+) GiB", "gib", "terms",
                "GiB", scope="worker"),
        LogLine("cudagraph_bytes", "GiB for CUDAGraph memory",
                r"([\d.]+) GiB for CUDAGraph memory", "gib", "terms", "GiB",
                releases=("0.10.0", ""), scope="worker"),
        # --kv-cache-memory-bytes as the engine echoes it ("non-default args: {...}"): the
        # budget itself, exact (gpu_worker.py / cpu_worker.py use it instead of profiling)
        LogLine("available_kv_cache_bytes", "'kv_cache_memory_bytes':",
                r"'kv_cache_memory_bytes': (\d+)", "int", "kv", "bytes", scope="worker"),
        # the same budget in bytes, where the worker's memory advice prints it after the
        # graphs are captured (gpu_worker.py, 0.10.2 on: "... `--kv-cache-memory=N` to fully
        # utilize gpu memory. Current kv cache memory in use is 9232221491 bytes.")
        LogLine("available_kv_cache_bytes", "kv cache memory in use is",
                r"Current kv cache memory in use is (\d+) bytes", "int", "kv", "bytes",
                releases=("0.10.2", ""), scope="worker"),
        LogLine("available_kv_cache_bytes", "Available KV cache memory:",
                r"Available KV cache memory: (-?[\d.]+) GiB", "gib", "kv", "GiB",
                releases=_V1, scope="worker"),
        # the CPU build's worker (v1/worker/cpu_worker.py determine_available_memory, 0.32):
        # "Explicitly set (X/total) GiB for KV cache on node N." (--kv-cache-memory-bytes or
        # VLLM_CPU_KVCACHE_SPACE) or "Auto set (X/total) GiB for KV cache ..."
        LogLine("available_kv_cache_bytes", "GiB for KV cache on node",
                r"(?:Explicitly|Auto) set \((-?[\d.]+)/[\d.]+\) GiB for KV cache on node",
                "gib", "kv", "GiB", scope="worker"),
        # V0's per-worker budget lines: every worker prints its own (the driver unprefixed,
        # the others as "(VllmWorkerProcess pid=...)", which names no rank), and the executor
        # gives every worker the least of their block counts (distributed_gpu_executor.py /
        # executor_base.py determine_num_available_blocks: min over the workers), so the
        # least budget is the one the blocks line follows
        LogLine("available_kv_cache_bytes", "kv_cache_size=", r"kv_cache_size=(-?[\d.]+) ?GiB",
                "gib", "kv", "GiB", releases=("0.6.3", "0.6.4"), scope="worker",
                combine="min"),
        LogLine("available_kv_cache_bytes", "reserved for KV Cache is",
                r"reserved for KV Cache is (?:only )?(-?[\d.]+) ?GiB", "gib", "kv", "GiB",
                releases=("0.6.5", "0.10.2"), scope="worker", combine="min"),
        # V0 gpu_executor.py's "# GPU blocks" until 0.6.6 and V1 kv_cache_utils.py's until
        # 0.7.2 (then tokens); V0 executor_base.py's "# cuda blocks" (the device name) from 0.7
        LogLine("num_blocks", "GPU blocks:", r"GPU blocks: (\d+)", "int", "kv", "blocks",
                releases=("0.2.0", "0.7.2")),
        # (on the CPU platform the device is "cpu": "# cpu blocks: 2340, # CPU blocks: 0", the
        # second being the swap space's; the regex is case-sensitive)
        LogLine("num_blocks", "blocks:",
                r"# (?:CUDA|cuda|ROCM|rocm|XPU|xpu|cpu) blocks: (\d+)",
                "int", "kv", "blocks", releases=("0.7.0", "0.10.2")),
        # V0's CPU platform with VLLM_CPU_KVCACHE_SPACE unset (platforms/cpu.py
        # check_and_update_config, 0.7-0.10): the cache is 4 GiB, which cpu_worker.py divides
        # into blocks without profiling
        LogLine("available_kv_cache_bytes", "VLLM_CPU_KVCACHE_SPACE (GiB)",
                r"VLLM_CPU_KVCACHE_SPACE \(GiB\) for CPU backend is not set, using (\d+) by "
                r"default", "gib", "kv", "GiB", releases=("0.7.0", "0.10.2"), scope="worker"),
        LogLine("kv_cache_tokens", "GPU KV cache size:", r"GPU KV cache size: ([\d,]+) tokens",
                "int", "kv", "tokens", releases=("0.7.3", "")),
        # the same line on the CPU platform (kv_cache_utils.py names the device: vLLM-CPU, and
        # plugins such as vllm-metal that report device type "cpu")
        LogLine("kv_cache_tokens", "CPU KV cache size:", r"CPU KV cache size: ([\d,]+) tokens",
                "int", "kv", "tokens", releases=("0.7.3", "")),
        # the CPU platform runs without async scheduling (platforms/cpu.py
        # check_and_update_config sets it False, after config/vllm.py has logged
        # "Asynchronous scheduling is enabled."): read as --no-async-scheduling (any value
        # but the flag or True is off: kvplan.planning.explain._other_settings)
        LogLine("async_scheduling", "CPU KV cache size:",
                r"(CPU) KV cache size: [\d,]+ tokens", "str", "settings"),
        # V0's refusal names the tokens its blocks hold (num_gpu_blocks x block_size)
        LogLine("kv_cache_tokens", "stored in KV cache (",
                r"can be stored in KV cache \((\d+)\)", "int", "kv", "tokens",
                releases=("0.2.0", "0.10.2")),
        # V1's refusal when one request of max_model_len does not fit (kv_cache_utils.py
        # check_enough_kv_cache_memory; the estimate from 0.9)
        LogLine("available_kv_cache_bytes", "larger than the available KV cache memory (",
                r"larger than the available KV cache memory \((-?[\d.]+) GiB\)", "gib", "kv",
                "GiB", releases=("0.8.0", ""), scope="worker"),
        LogLine("estimated_max_model_len", "the estimated maximum model length is",
                r"the estimated maximum model length is (\d+)", "int", "kv", "tokens",
                releases=("0.9.0", "")),
        LogLine("max_model_len", "max seq len (", r"max seq len \((\d+)\)", "int", "settings"),
        LogLine("max_concurrency_tokens", "Maximum concurrency for",
                r"Maximum concurrency for ([\d,]+) tokens per request", "int", "kv", "tokens"),
        LogLine("max_concurrency", "tokens per request:",
                r"tokens per request: ([\d.]+)x", "num", "kv", "x"),
    ),
)
