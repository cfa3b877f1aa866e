"""Engine start-up logs as input: the settings, memory terms and KV lines a vLLM (V0 and V1),
SGLang, llama.cpp (and Ollama), TensorRT-LLM or TGI log printed, each with the line it came
from. A partial log gives what it has; nothing is guessed.

Units as the engines print them: vLLM, SGLang and TRT-LLM print GiB (SGLang writes "GB" but
divides by 2^30), llama.cpp MiB; a two-decimal figure is converted to bytes with
`round(x * 2^30)`, so it carries the log's own rounding (half a hundredth of a GiB).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kvplan.core.errors import BadInputError

MAX_LOG_BYTES = 64 * 2**20
GIB = 2**30
MIB = 2**20


@dataclass
class LogFacts:
    engine: str | None = None
    version: str | None = None
    model: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # launch-style setting names
    gpu_total_bytes: int | None = None
    weights_bytes: int | None = None
    terms: dict[str, int] = field(default_factory=dict)  # activation/non-torch/cudagraph
    kv: dict[str, Any] = field(default_factory=dict)  # the engine's own KV figures
    lines: dict[str, str] = field(default_factory=dict)  # figure -> the log line it came from
    notes: list[str] = field(default_factory=list)


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _gib(text: str) -> int:
    return round(_num(text) * GIB)


# (figure, pattern, converter, where it goes); first match of each figure wins unless noted
_VLLM: tuple[tuple[str, str, Any, str], ...] = (
    ("version", r"vLLM API server version ([\w.+\-]+)", str, "version"),
    ("version", r"Initializing a V[01] LLM engine \(v([\w.+\-]+)\)", str, "version"),
    ("model", r"\bmodel='([^']+)'", str, "model"),
    ("model", r"'model': '([^']+)'", str, "model"),
    ("model", r"\bvllm serve ([^\s\\]+)", str, "model"),
    ("max_model_len", r"\bmax_seq_len=(\d+)", _int, "settings"),
    ("max_model_len", r"'max_model_len': (\d+)", _int, "settings"),
    ("max_model_len", r"--max-model-len[= ](\d+)", _int, "settings"),
    ("tp", r"\btensor_parallel_size=(\d+)", _int, "settings"),
    ("tp", r"--tensor-parallel-size[= ](\d+)", _int, "settings"),
    ("pp", r"\bpipeline_parallel_size=(\d+)", _int, "settings"),
    ("pp", r"--pipeline-parallel-size[= ](\d+)", _int, "settings"),
    ("kv_dtype", r"\bkv_cache_dtype=(\w+)", str, "settings"),
    ("block_size", r"'block_size': (\d+)", _int, "settings"),
    ("memory_fraction", r"gpu_memory_utilization=([\d.]+)", _num, "settings"),
    ("memory_fraction", r"'gpu_memory_utilization': ([\d.]+)", _num, "settings"),
    ("weights_bytes", r"Model loading took ([\d.]+) ?GiB", _gib, "weights"),
    ("gpu_total_bytes", r"total_gpu_memory=([\d.]+) ?GiB", _gib, "gpu"),
    ("non_torch_bytes", r"non_torch_memory=([\d.]+) ?GiB", _gib, "terms"),
    ("peak_torch_bytes", r"peak_torch_memory=([\d.]+) ?GiB", _gib, "terms"),
    ("cudagraph_bytes", r"Graph capturing finished in [\d.]+ secs?, took ([\d.]+) GiB", _gib,
     "terms"),
    ("available_kv_cache_bytes", r"Available KV cache memory: ([\d.]+) GiB", _gib, "kv"),
    ("available_kv_cache_bytes", r"kv_cache_size=([\d.]+) ?GiB", _gib, "kv"),
    ("num_blocks", r"# (?:GPU|cuda) blocks: (\d+)", _int, "kv"),
    ("kv_cache_tokens", r"GPU KV cache size: ([\d,]+) tokens", _int, "kv"),
    ("max_concurrency_tokens", r"Maximum concurrency for ([\d,]+) tokens per request", _int,
     "kv"),
    ("max_concurrency", r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", _num,
     "kv"),
)
_SGLANG: tuple[tuple[str, str, Any, str], ...] = (
    ("model", r"\bmodel_path='([^']+)'", str, "model"),
    ("model", r"sglang\.launch_server .*?--model(?:-path)? (\S+)", str, "model"),
    ("tp", r"\btp_size=(\d+)", _int, "settings"),
    ("tp", r"sglang\.launch_server .*?--tp(?:-size)? (\d+)", _int, "settings"),
    ("memory_fraction", r"\bmem_fraction_static=([\d.]+)", _num, "settings"),
    ("memory_fraction", r"--mem-fraction-static[= ]([\d.]+)", _num, "settings"),
    ("max_model_len", r"\bcontext_len=(\d+)", _int, "settings"),
    ("max_model_len", r"\bcontext_length=(\d+)", _int, "settings"),
    ("kv_dtype", r"\bkv_cache_dtype='(\w+)'", str, "settings"),
    ("max_num_seqs", r"\bmax_running_requests=(\d+)", _int, "settings"),
    ("free_before_load_bytes", r"Load weight begin\. avail mem=([\d.]+) GB", _gib, "terms"),
    ("weights_bytes", r"Load weight end\..*?mem usage=([\d.]+) GB", _gib, "weights"),
    ("cudagraph_bytes", r"Capture cuda graph end\..*?mem usage=([\d.]+) GB", _gib, "terms"),
    ("max_total_num_tokens", r"KV Cache is allocated\. #tokens: (\d+)", _int, "kv"),
    ("k_size_bytes", r"KV Cache is allocated\. #tokens: \d+, K size: ([\d.]+) GB", _gib, "kv"),
    ("v_size_bytes", r"KV Cache is allocated\..*?V size: ([\d.]+) GB", _gib, "kv"),
    ("max_total_num_tokens", r"\bmax_total_num_tokens=(\d+)", _int, "kv"),
)
_LLAMACPP: tuple[tuple[str, str, Any, str], ...] = (
    ("model", r"general\.name\s+str\s+=\s+(.+)", str, "model"),
    ("max_model_len", r"\bn_ctx\s+=\s+(\d+)", _int, "settings"),
    ("parallel", r"\bn_seq_max\s+=\s+(\d+)", _int, "settings"),
    ("cells", r"llama_kv_cache(?:_unified)?: +size = +[\d.]+ MiB \( *(\d+) cells", _int, "kv"),
    ("kv_mib", r"llama_kv_cache(?:_unified)?: +size = +([\d.]+) MiB", _num, "kv"),
    ("k_mib", r"llama_kv_cache(?:_unified)?: +size = .*?K \(\w+\): +([\d.]+) MiB", _num, "kv"),
    ("v_mib", r"llama_kv_cache(?:_unified)?: +size = .*?V \(\w+\): +([\d.]+) MiB", _num, "kv"),
    ("kv_dtype", r"llama_kv_cache(?:_unified)?: +size = .*?K \((\w+)\)", str, "settings"),
    ("kv_dtype_v", r"llama_kv_cache(?:_unified)?: +size = .*?V \((\w+)\)", str, "settings"),
    ("kv_mib", r"KV self size += +([\d.]+) MiB", _num, "kv"),
    ("k_mib", r"KV self size = .*?K \(\w+\): +([\d.]+) MiB", _num, "kv"),
    ("v_mib", r"KV self size = .*?V \(\w+\): +([\d.]+) MiB", _num, "kv"),
)
_TRTLLM: tuple[tuple[str, str, Any, str], ...] = (
    ("gpu_total_bytes", r"max tokens in paged kv cache: total: ([\d.]+) GiB", _gib, "gpu"),
    ("free_bytes", r"max tokens in paged kv cache: total: [\d.]+ GiB, available: ([\d.]+) GiB",
     _gib, "kv"),
    ("num_blocks", r"Number of blocks in KV cache primary pool: (\d+)", _int, "kv"),
    ("tokens_per_block", r"Number of tokens per block: (\d+)", _int, "kv"),
    ("kv_cache_bytes", r"Allocated ([\d.]+) GiB for max tokens in paged KV cache", _gib, "kv"),
    ("kv_cache_tokens", r"for max tokens in paged KV cache \((\d+)\)", _int, "kv"),
)
_TGI: tuple[tuple[str, str, Any, str], ...] = (
    ("model", r"model_id: \"([^\"]+)\"", str, "model"),
    ("tp", r"num_shard: Some\((\d+)\)", _int, "settings"),
    ("max_model_len", r"max_total_tokens: Some\((\d+)\)", _int, "settings"),
    ("memory_fraction", r"cuda_memory_fraction: ([\d.]+)", _num, "settings"),
    ("max_batch_prefill_tokens", r"max_batch_prefill_tokens: Some\((\d+)\)", _int, "settings"),
    ("num_blocks", r"KV-cache blocks: (\d+), size: \d+", _int, "kv"),
    ("block_size", r"KV-cache blocks: \d+, size: (\d+)", _int, "kv"),
    ("max_batch_total_tokens", r"Setting max batch total tokens to (\d+)", _int, "kv"),
)
_MARKERS = (
    ("vllm", re.compile(r"vLLM|vllm serve|gpu_worker\.py|kv_cache_utils\.py|Memory profiling "
                        r"results|# GPU blocks:|GPU KV cache size:|Available KV cache memory")),
    ("sglang", re.compile(r"sglang|KV Cache is allocated\. #tokens|server_args=ServerArgs|"
                          r"Load weight (?:begin|end)")),
    ("llamacpp", re.compile(r"llama_kv_cache|llama_context|llama_model_loader|llama-server|"
                            r"KV self size")),
    ("trtllm", re.compile(r"\[TensorRT-LLM\]|paged kv cache|KV cache primary pool")),
    ("tgi", re.compile(r"text_generation_(?:launcher|router)|Setting max batch total tokens")),
)
_TABLES = {"vllm": _VLLM, "sglang": _SGLANG, "llamacpp": _LLAMACPP, "trtllm": _TRTLLM,
           "tgi": _TGI}
_RANK_BUDGET = re.compile(r"rank=(\d+)[^\n]*Available KV cache memory: ([\d.]+) GiB")


def read_log(text: str, engine: str | None = None) -> LogFacts:
    """The facts a start-up log states. `engine` overrides the detection."""
    if len(text) > MAX_LOG_BYTES:
        raise BadInputError(f"the log is larger than {MAX_LOG_BYTES // MIB} MiB",
                            "give the start-up part (up to the KV cache lines)")
    facts = LogFacts(engine=engine or detect_engine(text))
    if facts.engine is None:
        raise BadInputError("no vLLM, SGLang, llama.cpp, TensorRT-LLM or TGI start-up lines "
                            "found in the log", "give the log from the engine's start-up, or "
                            "--engine to say which engine wrote it")
    if facts.engine not in _TABLES:
        raise BadInputError(f"kvplan reads no {facts.engine} start-up log",
                            "one of: " + ", ".join(_TABLES))
    for figure, pattern, convert, where in _TABLES[facts.engine]:
        if _have(facts, figure, where):
            continue
        m = re.search(pattern, text)
        if not m:
            continue
        try:
            value = convert(m.group(1).strip())
        except ValueError:
            continue
        _put(facts, figure, where, value)
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        facts.lines[figure] = text[start:end if end >= 0 else None].strip()
    _rank_budgets(text, facts)  # only vLLM's workers print "rank=N ... Available KV cache"
    if "peak_torch_bytes" in facts.terms and facts.weights_bytes is not None:
        facts.terms["activation_bytes"] = facts.terms["peak_torch_bytes"] - facts.weights_bytes
    return facts


def detect_engine(text: str) -> str | None:
    scores = [(len(marker.findall(text)), name) for name, marker in _MARKERS]
    best = max(scores)
    return best[1] if best[0] else None


def _have(facts: LogFacts, figure: str, where: str) -> bool:
    if where == "settings":
        return figure in facts.settings
    if where == "kv":
        return figure in facts.kv
    if where == "terms":
        return figure in facts.terms
    return getattr(facts, {"model": "model", "version": "version", "weights": "weights_bytes",
                           "gpu": "gpu_total_bytes"}[where]) is not None


def _put(facts: LogFacts, figure: str, where: str, value: Any) -> None:
    if where == "settings":
        facts.settings[figure] = value
    elif where == "kv":
        facts.kv[figure] = value
    elif where == "terms":
        facts.terms[figure] = value
    elif where == "model":
        facts.model = str(value)
    elif where == "version":
        facts.version = str(value)
    elif where == "weights":
        facts.weights_bytes = int(value)
    elif where == "gpu":
        facts.gpu_total_bytes = int(value)


def _rank_budgets(text: str, facts: LogFacts) -> None:
    """With several workers each logs its own budget; the lowest rank's (the first pipeline
    stage's) is the one kvplan applies, and the spread is noted."""
    ranks = {int(r): _gib(v) for r, v in _RANK_BUDGET.findall(text)}
    if len(set(ranks.values())) > 1:
        low = min(ranks)
        facts.kv["available_kv_cache_bytes"] = ranks[low]
        facts.notes.append(f"ranks logged different KV budgets ({len(set(ranks.values()))} "
                           f"values); rank {low}'s is applied to every stage")
