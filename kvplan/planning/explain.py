"""`kvplan explain LOGFILE`: an engine's start-up log reconciled with kvplan's own numbers.

Two passes over what the log states (kvplan.sources.startlog):
1. **given the logged budget**: kvplan computes the engine's KV lines (blocks, tokens,
   concurrency, K/V sizes) from the budget the log printed, the model and the settings. These
   must agree within 0.5% (the logs' own two-decimal rounding is smaller), else exit 1: a check
   that kvplan still matches the engine version a team deploys.
2. **from the GPU and settings alone**, when the log gives the GPU's total memory (or --gpu
   names it): kvplan's predicted budget and its terms (weights, activation peak, non-torch
   memory, CUDA graphs) beside each term the log printed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvplan.core.errors import BadInputError
from kvplan.core.launch import EngineLog
from kvplan.core.record import record
from kvplan.sources.startlog import LogFacts, read_log

TOLERANCE = 0.005  # a KV line further off than this is a disagreement (exit 1)

# the engine's KV figures explain compares, under the names engine.numbers() gives them
KV_FIGURES = ("num_blocks", "kv_cache_tokens", "max_concurrency", "max_total_num_tokens",
              "k_size_bytes", "v_size_bytes", "cells", "k_mib", "v_mib", "kv_mib",
              "max_batch_total_tokens")
# figures the engine estimates rather than computes exactly: shown beside the log, never a DIFF
# (llama.cpp's compute buffer: docs/engine-accuracy.md section 7)
ESTIMATED_FIGURES = ("compute_mib",)


@record
class Row:
    quantity: str
    basis: str  # "given the logged budget" | "from settings" | "input"
    logged: Any
    kvplan: Any
    diff_percent: float | None
    status: str  # "ok" | "DIFF" | "info"
    line: str  # the log line the logged value came from
    note: str = ""


@record
class Explanation:
    engine: str
    model: str
    version: str | None
    settings: dict[str, Any]
    rows: tuple[Row, ...]
    notes: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not any(r.status == "DIFF" for r in self.rows)


def log_formats() -> tuple[EngineLog, ...]:
    """The start-up log formats of every registered engine that declares one (`log_format`,
    optional: a minimal plugin need not), in registry order."""
    from kvplan.engines.registry import all_engines

    out = []
    for engine in all_engines():
        declared = getattr(engine, "log_format", None)
        found = declared() if declared is not None else None
        if found is not None:
            out.append(found)
    return tuple(out)


def _diff(logged: float, ours: float) -> float | None:
    if not logged:
        return None
    return (ours - logged) / logged * 100


def _logged_budget(facts: LogFacts) -> int | None:
    kv = facts.kv
    if "available_kv_cache_bytes" in kv:
        return int(kv["available_kv_cache_bytes"])
    if "k_size_bytes" in kv and "v_size_bytes" in kv:
        return int(kv["k_size_bytes"]) + int(kv["v_size_bytes"])
    if "kv_cache_bytes" in kv:
        return int(kv["kv_cache_bytes"])
    return None


def _deployment(facts: LogFacts, model: str | None, gpu: str | None, kv_dtype: str | None,
                warnings: list[str], tp: int | None = None) -> Any:
    from kvplan.planning.deployment import deployment
    from kvplan.planning.launch import model_name
    from kvplan.sources.library import resolve

    name = model or facts.model
    if not name:
        raise BadInputError("the log does not name its model", "give --model")
    if model is None:
        name, quant = model_name(name, warnings)
    else:
        quant = None
    try:
        spec = resolve(name)
    except BadInputError as exc:
        raise BadInputError(f"the log's model {name!r}: {exc.message}",
                            "give --model with a library name or a config.json") from None
    s = dict(facts.settings)
    if tp is not None:
        s["tp"] = tp
    if "max_model_len" not in s and "max_concurrency_tokens" in facts.kv:
        s["max_model_len"] = facts.kv["max_concurrency_tokens"]  # vLLM prints max_model_len
    kv = kv_dtype or s.get("kv_dtype")
    gpu_of_log = None
    if gpu is None and facts.gpu_total_bytes:
        from kvplan.sources.gpus import custom_gpu

        gpu_of_log = custom_gpu(f"{facts.gpu_total_bytes}B", "the log's GPU")
    # the one deployment builder, as plan and check use it: the log's settings are checked as
    # the same flags would be
    return deployment(
        spec, gpu=gpu if gpu is not None else gpu_of_log, tp=s.get("tp"), pp=s.get("pp"),
        engine=str(facts.engine), engine_version=facts.version,
        kv_dtype=str(kv or "auto"),
        max_model_len=s.get("max_model_len"), block_size=s.get("block_size"),
        gpu_memory_utilization=s.get("memory_fraction"), max_num_seqs=s.get("max_num_seqs"),
        parallel=s.get("parallel", 1), weights_dtype=quant or "auto",
        **{k: s[k] for k in ("n_ubatch", "flash_attn") if k in s})


def explain(text: str, model: str | None = None, gpu: str | None = None,
            engine: str | None = None, kv_dtype: str | None = None,
            tp: int | None = None) -> Explanation:
    """Reconcile a start-up log; `model`, `gpu`, `kv_dtype` and `tp` supply what the log
    does not print (a per-rank log shows only its own rank, not the TP size)."""
    from kvplan.engines.registry import get

    facts = read_log(text, log_formats(), engine)
    warnings: list[str] = list(facts.notes)
    dep = _deployment(facts, model, gpu, kv_dtype, warnings, tp)
    eng = get(dep.engine)
    rows: list[Row] = []
    budget = _logged_budget(facts)
    if budget is None and "num_blocks" in facts.kv:
        # V0 printed only "# GPU blocks: N": the budget is N whole blocks of the engine's size
        per_block = eng.numbers(eng.capacity(replace(dep, kv_memory_bytes=2**40))).get(
            "bytes_per_block")
        if per_block:
            budget = int(facts.kv["num_blocks"]) * int(per_block)
            warnings.append("the log prints blocks, not bytes: the budget is its block count "
                            "times the block size, so the block line agrees by construction")
    given = replace(dep, kv_memory_bytes=budget) if budget is not None else dep
    if budget is None and eng.needs_memory:
        warnings.append("the log prints no KV budget: only what follows from the settings")
    else:
        cap = eng.capacity(given)
        ours = eng.numbers(cap)
        for figure in KV_FIGURES:
            if figure not in facts.kv or figure not in ours:
                continue
            logged, value = facts.kv[figure], ours[figure]
            diff = _diff(float(logged), float(value))
            if figure == "max_concurrency":  # printed with two decimals
                bad = abs(float(value) - float(logged)) > max(0.005 + 1e-9,
                                                             TOLERANCE * float(logged))
            else:
                bad = diff is not None and abs(diff) > TOLERANCE * 100
            rows.append(Row(figure, "given the logged budget", logged, value, diff,
                            "DIFF" if bad else "ok", facts.lines.get(figure, "")))
        for figure in ESTIMATED_FIGURES:
            if figure in facts.kv and figure in ours:
                logged, value = facts.kv[figure], ours[figure]
                rows.append(Row(figure, "from settings", logged, value,
                                _diff(float(logged), float(value)), "info",
                                facts.lines.get(figure, "")))
    if dep.gpu_memory_bytes is not None and eng.needs_memory:
        rows += _predicted(eng, dep, facts, warnings)
    if facts.weights_bytes is not None and not any(r.quantity == "weights" for r in rows):
        rows += _weights_only(eng, dep, facts, warnings)
    if not rows:
        raise BadInputError("the log has no line kvplan can recompute",
                            "include the engine's KV cache lines (e.g. vLLM 'Available KV "
                            "cache memory' / 'GPU KV cache size')")
    settings = {k: v for k, v in facts.settings.items()}
    return Explanation(str(facts.engine), dep.spec.name, facts.version, settings, tuple(rows),
                       tuple(warnings))


def _predicted(eng: Any, dep: Any, facts: LogFacts, warnings: list[str]) -> list[Row]:
    """The budget from the GPU and settings alone, each term beside the log's own line."""
    try:
        cap = eng.capacity(dep)
    except BadInputError as exc:
        warnings.append(f"no prediction from settings: {exc.message}")
        return []
    b = cap.budget
    rows: list[Row] = []
    if b is None:
        return rows
    pairs = (("weights", facts.weights_bytes, max(b.weights_bytes) if b.weights_bytes else 0,
              "weights_bytes"),
             # vLLM prints the torch peak (activations = peak - weights), TensorRT-LLM the
             # activations themselves
             ("activation peak", facts.terms.get("activation_bytes"),
              max(b.activation_bytes) if b.activation_bytes else 0,
              "peak_torch_bytes" if "peak_torch_bytes" in facts.lines else "activation_bytes"),
             ("non-torch memory", facts.terms.get("non_torch_bytes"), b.non_torch_bytes,
              "non_torch_bytes"),
             ("CUDA graphs", facts.terms.get("cudagraph_bytes"), b.cudagraph_bytes,
              "cudagraph_bytes"),
             ("KV budget", _logged_budget(facts), b.available, "available_kv_cache_bytes"))
    for label, logged, ours, key in pairs:
        if logged is None:
            continue
        rows.append(Row(label, "from settings", int(logged), int(ours), _diff(logged, ours),
                        "info", facts.lines.get(key, facts.lines.get("weights_bytes", ""))))
    numbers = eng.numbers(cap)
    for figure in ("kv_cache_tokens", "num_blocks", "max_total_num_tokens",
                   "max_batch_total_tokens"):
        if figure in facts.kv and figure in numbers:
            rows.append(Row(figure, "from settings", facts.kv[figure], numbers[figure],
                            _diff(float(facts.kv[figure]), float(numbers[figure])), "info",
                            facts.lines.get(figure, "")))
            break
    return rows


def _weights_only(eng: Any, dep: Any, facts: LogFacts, warnings: list[str]) -> list[Row]:
    from kvplan.engines.base import weights_per_gpu

    try:
        ours = weights_per_gpu(dep)
    except BadInputError:
        return []
    if not ours or facts.weights_bytes is None:
        return []
    return [Row("weights", "from settings", facts.weights_bytes, ours,
                _diff(facts.weights_bytes, ours), "info", facts.lines.get("weights_bytes", ""))]
