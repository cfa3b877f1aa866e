"""TGI's text: the `text-generation-launcher` flags and the start-up log lines, as data
(read by kvplan.sources.launch and kvplan.sources.startlog).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from kvplan.core.launch import EngineLog, LogLine

if TYPE_CHECKING:
    from kvplan.core.launch import EngineLaunch


@functools.cache
def launch_flags() -> EngineLaunch:
    """`text-generation-launcher` flags (launcher/src/main.rs Args)."""
    from kvplan.core.launch import EngineLaunch

    # the declared settings' flags (--num-shard, --max-total-tokens, --kv-cache-dtype,
    # --max-batch-total-tokens, ...)
    # come from their rows (kvplan.engines.settings), joined to this table by
    # kvplan.planning.launch
    setting = {
        "--model-id": ("model", "str"), "--revision": ("revision", "str"),
        "--quantize": ("quantization", "str"),
        "--dtype": ("model_dtype", "str"),
        "--max-input-tokens": ("max_input_tokens", "tokens"),
        "--max-input-length": ("max_input_tokens", "tokens"),
        "--cuda-graphs": ("cuda_graphs", "str"),
    }
    ignored = ("--port", "--hostname", "--max-concurrent-requests", "--max-best-of",
               "--max-stop-sequences", "--max-top-n-tokens", "--waiting-served-ratio",
               "--max-waiting-tokens", "--huggingface-hub-cache", "--weights-cache-override",
               "--api-key", "--shard-uds-path", "--master-addr", "--master-port",
               "--tokenizer-config-path", "--otlp-endpoint", "--payload-limit", "--sharded")
    flags = {**setting, **{f: ("", "ignore") for f in ignored},
             "--trust-remote-code": ("", "ignore-flag"), "--json-output": ("", "ignore-flag")}
    # every launcher argument is `#[clap(long, env)]` (launcher/src/main.rs Args): MODEL_ID,
    # MAX_TOTAL_TOKENS, NUM_SHARD, ... in the container's environment set the same settings
    return EngineLaunch("tgi", (("text-generation-launcher",),),
                        images=("huggingface/text-generation-inference",
                                "text-generation-inference"), flags=flags,
                        flags_from_env=True)


# --- its start-up log (read by kvplan.sources.startlog; units as the engine prints them) ---

LOG_FORMAT = EngineLog(
    "tgi", "TGI",
    markers=(r"text_generation_(?:launcher|router)|Setting max batch total tokens"),
    figures=(
        # the launcher's `Args { model_id: "..." }`; with --json-output the same text inside
        # a JSON string, its quotes escaped (model_id: \"...\")
        LogLine("model", "model_id:", r'model_id: \\?"([^"\\]+)\\?"', "str", "model"),
        LogLine("tp", "num_shard:", r"num_shard: Some\((\d+)\)", "int", "settings"),
        LogLine("max_model_len", "max_total_tokens:", r"max_total_tokens: (?:Some\()?(\d+)",
                "int", "settings"),
        LogLine("memory_fraction", "cuda_memory_fraction:", r"cuda_memory_fraction: ([\d.]+)",
                "num", "settings"),
        LogLine("max_batch_prefill_tokens", "max_batch_prefill_tokens:",
                r"max_batch_prefill_tokens: (?:Some\()?(\d+)", "int", "settings"),
        LogLine("num_blocks", "KV-cache blocks:", r"KV-cache blocks: (\d+), size: \d+", "int",
                "kv", "blocks"),
        LogLine("block_size", "KV-cache blocks:", r"KV-cache blocks: \d+, size: (\d+)", "int",
                "kv", "tokens"),
        LogLine("max_batch_total_tokens", "Setting max batch total tokens to",
                r"Setting max batch total tokens to (\d+)", "int", "kv", "tokens"),
        # the launcher's own lines (launcher/src/main.rs) for what it chose: the defaults it
        # derives from the model ("Default `max_total_tokens` to 4096") and the shards it
        # starts; read before the flags of its advice ("You can increase that size using
        # `--max-total-tokens=8192 ...`"), which are not the settings it runs with
        LogLine("max_model_len", "Default `max_total_tokens` to",
                r"Default `max_total_tokens` to (\d+)", "int", "settings"),
        LogLine("max_num_batched_tokens", "Default `max_batch_prefill_tokens` to",
                r"Default `max_batch_prefill_tokens` to (\d+)", "int", "settings"),
        LogLine("tp", "Sharding model on", r"Sharding model on (\d+) processes", "int",
                "settings"),
    ),
)
