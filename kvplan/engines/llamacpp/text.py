"""llama.cpp's text: the `llama-server` flags and the start-up log lines, as data (read by
kvplan.sources.launch and kvplan.sources.startlog, without the engine's code).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from kvplan.core.launch import EngineLog, LogLine

if TYPE_CHECKING:
    from kvplan.core.launch import EngineLaunch


# --- the launch command (`llama-server`), read by kvplan.sources.launch ------------------------
# Flags from common/arg.cpp (common_params_parser_init); short and long spellings.
@functools.cache
def launch_flags() -> EngineLaunch:
    from kvplan.core.launch import EngineLaunch

    # the declared settings' flags (-c, -np, -ctk, -ub, ...) come from their
    # rows (kvplan.engines.settings), joined to this table by kvplan.planning.launch
    setting = {
        "-m": ("model", "str"), "--model": ("model", "str"),
        "-hf": ("hf_repo", "str"), "--hf-repo": ("hf_repo", "str"),
        "-ctv": ("kv_dtype_v", "str"), "--cache-type-v": ("kv_dtype_v", "str"),
        "-ngl": ("n_gpu_layers", "str"), "--n-gpu-layers": ("n_gpu_layers", "str"),
        "--gpu-layers": ("n_gpu_layers", "str"),
        "-b": ("n_batch", "int"), "--batch-size": ("n_batch", "int"),
        "-fa": ("flash_attn", "optional"), "--flash-attn": ("flash_attn", "optional"),
        "-kvu": ("kv_unified", "flag"), "--kv-unified": ("kv_unified", "flag"),
        "--swa-full": ("swa_full", "flag"), "-sm": ("split_mode", "str"),
        "--split-mode": ("split_mode", "str"), "-ts": ("tensor_split", "str"),
        "--tensor-split": ("tensor_split", "str"),
    }
    ignored = ("--host", "--port", "-t", "--threads", "-tb", "--threads-batch", "-a", "--alias",
               "--api-key", "-n", "--n-predict", "--temp", "--top-k", "--top-p", "--min-p",
               "--seed", "-s", "--chat-template", "--log-file", "--timeout", "--slot-save-path",
               "--rope-scaling", "--rope-freq-base", "--rope-freq-scale", "--threads-http",
               "--mirostat", "--mirostat-ent", "--mirostat-lr",
               # how the chat is templated and parsed, not what is cached
               "--reasoning-format", "--reasoning-budget", "--chat-template-file",
               "--grammar-file")
    ignored_flags = ("--jinja", "--mlock", "--no-mmap", "--metrics", "-cb", "--cont-batching",
                     "--no-webui", "--verbose", "-v", "--embedding", "--embeddings",
                     "--no-context-shift", "--log-verbose")
    flags = {**setting, **{f: ("", "ignore") for f in ignored},
             **{f: ("", "ignore-flag") for f in ignored_flags}}
    # the arguments common/arg.cpp gives an environment variable (`.set_env(...)`), as the
    # server image's users set them (docker run -e LLAMA_ARG_CTX_SIZE=8192 ...)
    env_flags = {"LLAMA_ARG_MODEL": "--model", "LLAMA_ARG_CTX_SIZE": "--ctx-size",
                 "LLAMA_ARG_N_PARALLEL": "--parallel", "LLAMA_ARG_N_GPU_LAYERS": "--n-gpu-layers",
                 "LLAMA_ARG_CACHE_TYPE_K": "--cache-type-k",
                 "LLAMA_ARG_CACHE_TYPE_V": "--cache-type-v",
                 "LLAMA_ARG_FLASH_ATTN": "--flash-attn"}
    # -c 0: "0 = loaded from model" (common/arg.cpp, --ctx-size's help), the model's trained
    # context, which is also what kvplan plans for llama.cpp without -c (ModelSpec
    # .context_tokens)
    unset = {"--ctx-size": ("0",), "-c": ("0",)}
    return EngineLaunch("llamacpp", (("llama-server",), ("llama-cli",)),
                        images=("ggml-org/llama.cpp", "ggerganov/llama.cpp"), flags=flags,
                        underscores_match_dashes=False, env_flags=env_flags,
                        unset_values=unset)


# --- its start-up log (read by kvplan.sources.startlog; units as the engine prints them) ---
#
# The KV line by build: llama_kv_cache_init / llama_new_context_with_model "KV self size  = X
# MiB, K (f16): ..., V (f16): ..." (2024; ik_llama.cpp's MLA cache prints "c^KV (q8_0): X
# MiB"), llama_kv_cache_unified (2025: "size = X MiB (N cells, L layers, S/S seqs), K (f16):
# ...") and llama_kv_cache (from b6300), and 2023's "kv self size  = X MB" (ggml's MB: 2^20).
# The server's "n_ctx_slot" is one slot's context (-np slots share n_ctx).

_KV_LINE = r"llama_kv_cache(?:_unified)?: +size = +"
LOG_FORMAT = EngineLog(
    "llamacpp", "llama.cpp",
    markers=(r"llama_kv_cache|llama_context|llama_model_loader|llama-server|"
             r"KV self size|kv self size|llama_model_load_internal|llama_new_context_with_model|"
             r"compute buffer size|KV buffer size|n_ctx_slot|"
             r"msg=\"kv cache\"|starting ollama engine|ollama runner"),
    # Ollama's own engine allocates its caches itself (ollama kvcache package, not llama.cpp's
    # llama_kv_cache): the causal layers as llama.cpp does, but a sliding-window layer keeps
    # a memory of its own besides the window (model/models/gptoss: NewSWAMemCache(window,
    # 4096); the 450.0 MiB of tests/fixtures/logs/llamacpp/
    # llamacpp-ollama-engine-gpt-oss-120b-gfx1151-c8192.log is 4,096 + the 512 batch such
    # cells on each of 18 sliding layers)
    unmodelled=((r"--ollama-engine|starting ollama engine",
                 "the log is Ollama's own engine (ollama runner --ollama-engine), whose "
                 "caches are its own: a sliding-window layer may keep more than its window "
                 "(gpt-oss: 4,096 tokens and a batch, kvcache.NewSWAMemCache), which kvplan "
                 "does not model"),
                # the MLA branch of llama.cpp PR 11446 (February 2025, never merged): a DeepSeek
                # model keeps a stub of the regular cache and, per layer, the compressed latent
                # and the rope key, printed as a second size line ("KV self size = 2196.00
                # MiB, K^R (f16): 244.00 MiB, c^KV (f16): 1952.00 MiB"); the merged MLA cache
                # (b5300 on) is llama_kv_cache's own and prints K/V
                (r"K\^R \(\w+\):",
                 "the log is llama.cpp PR 11446's unmerged MLA branch, whose DeepSeek cache "
                 "(the latent c^KV and the rope key K^R a layer, beside a stub of the regular "
                 "cache) kvplan does not model"),),
    figures=(
        # the build the binary prints first (common/common.cpp: "build: 6115 (50aa9389) with
        # cc ... for ..."; 2023's examples: "main: build = 916 (hash)"; 2026's
        # "build_info: b8680-15f786e65"), the number of the b6115 release tag. ik_llama.cpp
        # numbers its builds on its own count: a log with its MLA cache line ("c^KV") is not
        # dated by it.
        LogLine("version", "build",
                r"\bbuild(?:: | = |_info: b)(\d+)(?: \(|-)[0-9a-f]+", "str", "version",
                unless="c^KV"),
        LogLine("model", "general.name", r"general\.name\s+str\s+=\s+(.+)", "str", "model"),
        LogLine("max_model_len", "n_ctx", r"\bn_ctx\s+=\s+(\d+)", "int", "settings"),
        LogLine("ctx_per_seq", "n_ctx_slot=", r"\bn_ctx_slot=(\d+)", "int", "settings",
                "tokens", scope="sequence"),
        LogLine("parallel", "n_seq_max", r"\bn_seq_max\s+=\s+(\d+)", "int", "settings"),
        LogLine("parallel", "n_slots=", r"\bn_slots=(\d+)", "int", "settings"),
        LogLine("n_ubatch", "n_ubatch", r"\bn_ubatch\s+=\s+(\d+)", "int", "settings"),
        LogLine("flash_attn", "flash_attn", r"\bflash_attn\s+=\s+(\w+)", "str", "settings"),
        # ik_llama.cpp's MLA mode (llama_new_context_with_model: "mla_attn   = 2")
        LogLine("mla_attn", "mla_attn", r"\bmla_attn\s+=\s+(\d)\b", "int", "settings"),
        LogLine("kv_unified", "kv_unified", r"\bkv_unified\s+=\s+(true|false)", "str",
                "settings"),
        # the iSWA model's second cache (llama_kv_cache_iswa), one stream's cells
        LogLine("swa_cells", "SWA KV cache", r"creating +SWA KV cache, size = (\d+) cells",
                "int", "kv", "cells"),
        # the first GPU's compute buffer ("CUDA0", "ROCm0", "Vulkan0", "Metal"; not *_Host)
        LogLine("compute_mib", "compute buffer size",
                r"\b(?:CUDA|ROCm|Vulkan|Metal|SYCL|MUSA)\d* +compute buffer size = +([\d.]+) "
                r"MiB", "num", "kv", "MiB"),
        LogLine("cells", "cells", _KV_LINE + r"[\d.]+ MiB \( *(\d+) cells", "int", "kv",
                "cells", releases=("b5300", "")),
        LogLine("kv_mib", "size =", _KV_LINE + r"([\d.]+) MiB", "num", "kv", "MiB",
                releases=("b5300", "")),
        # "S/N seqs": N streams (a non-unified cache, -np N) of the printed cells each
        # (LM Studio's build pads the count: "1/ 1 seqs")
        LogLine("streams", "seqs)", _KV_LINE + r"[\d.]+ MiB \( *\d+ cells, +\d+ layers, "
                r"+\d+/ *(\d+) seqs\)", "int", "kv", "streams", releases=("b6250", ""),
                scope="sequence"),
        LogLine("k_mib", "size =", _KV_LINE + r"[^()]*\([^()]*\), K \(\w+\): +([\d.]+) MiB", "num",
                "kv", "MiB", releases=("b5300", "")),
        LogLine("v_mib", "size =", _KV_LINE + r"[^()]*\([^()]*\), K \(\w+\): +[\d.]+ MiB, V "
                r"\(\w+\): +([\d.]+) MiB", "num", "kv", "MiB", releases=("b5300", "")),
        LogLine("kv_dtype", "size =", _KV_LINE + r"[^()]*\([^()]*\), K \((\w+)\)", "str",
                "settings"),
        LogLine("kv_dtype_v", "size =", _KV_LINE + r"[^()]*\([^()]*\), K \(\w+\): +[\d.]+ MiB, V "
                r"\((\w+)\)", "str", "settings"),
        LogLine("kv_mib", "KV self size", r"KV self size += +([\d.]+) MiB", "num", "kv", "MiB",
                releases=("b1500", "b5299")),
        LogLine("k_mib", "KV self size", r"KV self size += +[\d.]+ MiB, K \(\w+\): +([\d.]+) MiB",
                "num", "kv", "MiB", releases=("b1500", "b5299")),
        LogLine("v_mib", "KV self size", r"KV self size += +[\d.]+ MiB, K \(\w+\): +[\d.]+ MiB, "
                r"V \(\w+\): +([\d.]+) MiB", "num", "kv", "MiB", releases=("b1500", "b5299")),
        LogLine("kv_dtype", "KV self size", r"KV self size += +[\d.]+ MiB, (?:K|c\^KV) \((\w+)\)",
                "str", "settings"),
        LogLine("kv_dtype_v", "KV self size", r"KV self size += +[\d.]+ MiB, K \(\w+\): +[\d.]+ "
                r"MiB, V \((\w+)\)", "str", "settings"),
        LogLine("kv_mib", "kv self size", r"kv self size += +([\d.]+) MB", "num", "kv", "MB",
                releases=("", "b1499")),
        # per-device buffers, summed, where no size line says the total
        LogLine("kv_mib", "KV buffer size", r"KV buffer size = +([\d.]+) MiB", "num", "kv",
                "MiB", combine="sum"),
        # Ollama's own lines, after llama.cpp's (which say the same where both are printed):
        # its runner's load request (runner.go: "KvSize:4096" is num_ctx x Parallel,
        # "KvCacheType:q8_0", empty for f16) and its memory report (device.go, backend.go
        # before: `msg="kv cache" device=CUDA0 size="1.9 GiB"`, one line a device, summed),
        # the only KV lines of Ollama's own engine (`ollama runner --ollama-engine`), which
        # prints no llama.cpp line. Ollama's own release (0.16.1) is no llama.cpp build, so
        # these lines date nothing.
        LogLine("model", "architecture=", r"\barchitecture=\w+ .*?\bname=(\S+) description=",
                "str", "model"),
        LogLine("max_model_len", "KvSize:", r"\bKvSize:(\d+)", "int", "settings"),
        LogLine("parallel", "Parallel:", r"\bParallel:(\d+) ", "int", "settings"),
        LogLine("kv_dtype", "KvCacheType:", r"\bKvCacheType:(\w+)", "str", "settings"),
        LogLine("kv_mib", 'msg="kv cache"',
                r'msg="kv cache" device=\S+ size="([\d.]+ (?:[KMGT]i)?B)"', "mib", "kv", "MiB",
                combine="sum"),
    ),
)
