"""SGLang's text: the `sglang.launch_server` flags and the start-up log lines, as data
(read by kvplan.sources.launch and kvplan.sources.startlog).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from kvplan.core.launch import EngineLog, LogLine

if TYPE_CHECKING:
    from kvplan.core.launch import EngineLaunch


# --- the launch command (`python -m sglang.launch_server`), read by kvplan.sources.launch -----
# Flags from python/sglang/srt/server_args.py ServerArgs.add_cli_args.
@functools.cache
def launch_flags() -> EngineLaunch:
    from kvplan.core.launch import EngineLaunch

    # the declared settings' flags (--tp-size, --context-length, --kv-cache-dtype, ...)
    # come from their rows (kvplan.engines.settings), joined to this table by
    # kvplan.planning.launch
    setting = {
        "--model-path": ("model", "str"), "--model": ("model", "str"),
        "--ep-size": ("ep", "int"),
        "--max-total-tokens": ("max_total_tokens", "int"),
        "--max-prefill-tokens": ("max_prefill_tokens", "int"),
        "--quantization": ("quantization", "str"), "--dtype": ("model_dtype", "str"),
        "--cuda-graph-max-bs": ("cuda_graph_max_bs", "int"), "--revision": ("revision", "str"),
        "--speculative-algorithm": ("speculative", "str"),
        # an embedding or reward model: named (a ...ForSequenceClassification checkpoint holds
        # a score head where kvplan counts the LM head), not modelled
        "--is-embedding": ("is_embedding", "flag"),
    }
    ignored = ("--host", "--port", "--served-model-name", "--api-key", "--tokenizer-path",
               "--tokenizer-mode", "--chat-template", "--tool-call-parser", "--reasoning-parser",
               "--log-level", "--random-seed", "--download-dir", "--load-format",
               "--attention-backend", "--sampling-backend", "--grammar-backend",
               "--log-requests-level", "--log-level-http", "--decode-log-interval")
    # --enable-p2p-check only tests peer access between the GPUs at start-up;
    # --enable-cache-report adds the cached prompt tokens to a response's usage
    ignored_flags = ("--trust-remote-code", "--enable-metrics", "--log-requests",
                     "--skip-tokenizer-init", "--disable-radix-cache", "--enable-torch-compile",
                     "--enable-p2p-check", "--enable-cache-report")
    flags = {**setting, **{f: ("", "ignore") for f in ignored},
             **{f: ("", "ignore-flag") for f in ignored_flags}}
    return EngineLaunch("sglang", (("-m", "sglang.launch_server"), ("sglang", "serve")),
                        images=("lmsysorg/sglang",), flags=flags,
                        # kvcached's switch (ovg-project/kvcached), read to be named
                        env={"ENABLE_KVCACHED": ("kvcached", "str")})


# --- its start-up log (read by kvplan.sources.startlog; units as the engine prints them) ---
#
# SGLang prints "GB" for figures divided by 2^30: get_available_gpu_memory returns
# `free_gpu_memory / (1 << 30)` (srt/utils/common.py, 0.5.23; srt/utils.py before), and the
# "K size"/"V size" lines divide by `GB = 1024 * 1024 * 1024` (mem_cache/memory_pool.py). Its
# own pool line is "KV Cache is allocated. #tokens: N, K size: X GB, V size: Y GB" (MHA pools;
# 0.4.1 had no "#tokens" and printed max_total_num_tokens separately, later builds add
# "dtype: ...") or "..., KV size: X GB" (MLA pools). kvcached's virtual pool ("kvcached ...
# #tokens") is not SGLang's own and is not read as it.

LOG_FORMAT = EngineLog(
    "sglang", "SGLang",
    markers=(r"sglang|KV Cache is allocated\.|server_args=ServerArgs|"
             r"Load weight (?:begin|end)|max_total_num_tokens="),
    figures=(
        LogLine("model", "model_path=", r"\bmodel_path='([^']+)'", "str", "model"),
        LogLine("model", "--model", r"--model(?:-path)?[= ](\S+)", "str", "model"),
        LogLine("tp", "tp_size=", r"\btp_size=(\d+)", "int", "settings"),
        LogLine("tp", "--tp", r"--tp(?:-size)?[= ](\d+)", "int", "settings"),
        LogLine("memory_fraction", "mem_fraction_static=", r"\bmem_fraction_static=([\d.]+)",
                "num", "settings"),
        LogLine("memory_fraction", "--mem-fraction-static",
                r"--mem-fraction-static[= ]([\d.]+)", "num", "settings"),
        LogLine("max_model_len", "context_len=", r"\bcontext_len=(\d+)", "int", "settings"),
        LogLine("max_model_len", "context_length=", r"\bcontext_length=(\d+)", "int",
                "settings"),
        LogLine("max_model_len", "--context-length", r"--context-length[= ](\d+)", "int",
                "settings"),
        LogLine("kv_dtype", "kv_cache_dtype=", r"\bkv_cache_dtype='(\w+)'", "str", "settings"),
        LogLine("kv_dtype", "--kv-cache-dtype", r"--kv-cache-dtype[= ](\w+)", "str", "settings"),
        # the dtype the pool was allocated in (model_executor/model_runner.py, 0.5 on): what
        # --kv-cache-dtype auto became (the checkpoint's fp8 KV, or the model dtype), printed
        # where the server_args line is not in the excerpt
        LogLine("kv_dtype", "Using KV cache dtype:", r"Using KV cache dtype: torch\.(\w+)",
                "str", "settings"),
        # the weights' quantization: server_args (None where there is none), the echoed
        # command, and the weight loader's "Load weight end. ... quant=awq, bits=4"
        LogLine("quantization", "quantization=", r"\bquantization='?([\w-]+)", "str",
                "settings"),
        LogLine("quantization", "--quantization", r"--quantization[= ]([\w-]+)", "str",
                "settings"),
        LogLine("quantization", "Load weight end", r"Load weight end\..*?\bquant=([\w-]+)",
                "str", "settings"),
        LogLine("max_num_seqs", "max_running_requests=", r"\bmax_running_requests=(\d+)",
                "int", "settings"),
        # the free memory SGLang sizes its pool by (engine.SglangEngine.log_readings): each
        # rank prints its own reading, and SGLang takes the least over the ranks
        # (get_available_gpu_memory(distributed=True), an all_reduce MIN)
        LogLine("free_before_load_bytes", "Load weight begin", r"Load weight begin\. avail "
                r"mem=([\d.]+) GB", "gib", "terms", "GB", scope="worker", combine="min"),
        LogLine("free_after_load_bytes", "Load weight end", r"Load weight end\..*?\bavail "
                r"mem=([\d.]+) GB", "gib", "terms", "GB", scope="worker", combine="min"),
        LogLine("weights_bytes", "Load weight end", r"mem usage=([\d.]+) GB", "gib", "weights",
                "GB", scope="worker"),
        LogLine("cudagraph_bytes", "Capture cuda graph end", r"mem usage=([\d.]+) GB", "gib",
                "terms", "GB", scope="worker"),
        LogLine("max_total_num_tokens", "KV Cache is allocated.", r"#tokens: (\d+)", "int",
                "kv", "tokens", scope="worker",
                unless="kvcached"),
        LogLine("k_size_bytes", "KV Cache is allocated.", r"\bK size: ([\d.]+) GB", "gib",
                "kv", "GB", scope="worker",
                unless="kvcached"),
        LogLine("v_size_bytes", "KV Cache is allocated.", r"\bV size: ([\d.]+) GB", "gib",
                "kv", "GB", scope="worker",
                unless="kvcached"),
        LogLine("kv_cache_bytes", "KV Cache is allocated.", r"\bKV size: ([\d.]+) GB", "gib",
                "kv", "GB", scope="worker",
                unless="kvcached"),
        LogLine("max_total_num_tokens", "max_total_num_tokens=",
                r"\bmax_total_num_tokens=(\d+)", "int", "kv", "tokens", scope="worker"),
        # a hybrid (Mamba / linear-attention) model's state pool, sized from the same rest
        # memory as the KV pool and before it (model_runner_kv_cache_mixin.py: the state's
        # share mamba_full_memory_ratio / (1 + ratio)); mem_cache/memory_pool.py MambaPool:
        # "Mamba Cache is allocated. max_mamba_cache_size: 186, conv_state size: 0.10GB,
        # ssm_state size: 4.38GB" (later builds: "conv_state 0.12GB, ssm_state 3.09GB, ...")
        LogLine("mamba_conv_bytes", "Mamba Cache is allocated.",
                r"\bconv_state(?: size:)? ([\d.]+) ?GB", "gib", "kv", "GB", scope="worker"),
        LogLine("mamba_ssm_bytes", "Mamba Cache is allocated.",
                r"\bssm_state(?: size:)? ([\d.]+) ?GB", "gib", "kv", "GB", scope="worker"),
    ),
)
