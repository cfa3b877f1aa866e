"""Ollama's text: `ollama serve` and the environment it reads, as data (read by
kvplan.sources.launch without the engine's code). Its start-up logs are the runner's
llama.cpp lines and Ollama's own, which kvplan reads as llama.cpp's (kvplan.engines.llamacpp
.text), so Ollama declares no log format of its own.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvplan.core.launch import EngineLaunch, EngineLog

LOG_FORMAT: EngineLog | None = None


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
    return EngineLaunch("ollama", (("ollama", "serve"), ("ollama", "start")),
                        images=("ollama/ollama",), flags={"-h": ("", "ignore-flag"),
                                                          "--help": ("", "ignore-flag")},
                        env=env)
