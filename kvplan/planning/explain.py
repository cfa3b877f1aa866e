"""`kvplan explain LOGFILE`: an engine's start-up log reconciled with kvplan's own numbers.

Two passes over what the log states (kvplan.sources.startlog):
1. **given the logged budget**: kvplan computes the engine's KV lines (blocks, tokens,
   concurrency, K/V sizes) from the budget the log printed, the model and the settings. These
   must agree within the log's own printed precision (the budget's last digit, half a unit
   either way, and the line's own), else exit 1: a check that kvplan still matches the engine
   version a team deploys.
2. **from the GPU and settings alone**, when the log gives the GPU's total memory (or --gpu
   names it): kvplan's predicted budget and its terms (weights, activation peak, non-torch
   memory, CUDA graphs) beside each term the log printed. An engine whose log prints the
   free-memory readings it sizes its pool from (`log_readings`: SGLang's "Load weight
   begin/end ... avail mem") has its pool sized from them instead, by the engine's own rule
   (`capacity_from_readings`), with the span their printed precision allows; a reading the
   log lacks is named by its line.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvplan.core.errors import BadInputError
from kvplan.core.launch import EngineLog
from kvplan.core.record import record
from kvplan.sources.startlog import LogFacts, echoed_keys, read_log

# the agreement a KV line must reach: within what the log's printed precision allows
TOLERANCE_TEXT = "the log's printed precision"

# the engine's KV figures explain compares, under the names engine.numbers() gives them
KV_FIGURES = ("num_blocks", "kv_cache_tokens", "max_concurrency", "max_total_num_tokens",
              "k_size_bytes", "v_size_bytes", "cells", "k_mib", "v_mib", "kv_mib",
              "max_batch_total_tokens", "estimated_max_model_len", "swa_cells")
# speculative methods whose drafter has no attention layer of its own (vLLM config/
# speculative.py: n-gram and suffix lookups, Medusa and MLP-speculator heads): nothing in the
# KV pool
NO_DRAFT_LAYERS = ("ngram", "suffix", "medusa", "mlp_speculator")
# the figures that state the KV budget (_logged_budget reads them)
BUDGET_FIGURES = ("available_kv_cache_bytes", "k_size_bytes", "v_size_bytes", "kv_cache_bytes")
# the lines whose sum is the budget, first match taken: a hybrid model's state pool (SGLang's
# "Mamba Cache is allocated" line) is sized from the same memory as its KV pool and before it,
# so the budget the engine split is both pools
BUDGET_SUMS = (("k_size_bytes", "v_size_bytes", "mamba_conv_bytes", "mamba_ssm_bytes"),
               ("k_size_bytes", "v_size_bytes"), ("kv_cache_bytes",))
UNREADABLE = "the log prints this line, but its figure is not a number kvplan can read"
# the rows whose figures are bytes, besides the figures named *_bytes (shown as sizes)
BYTE_QUANTITIES = ("weights", "activation peak", "non-torch memory", "CUDA graphs",
                   "KV budget", "logged KV budget")
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
    # the settings that decide the budget from settings (their rows' `budget`) which the log
    # does not print, so that the prediction took the engine's defaults: by row name, and
    # "engine release" when the log prints none and none was given
    unprinted: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not any(r.status == "DIFF" for r in self.rows)


def log_formats() -> tuple[EngineLog, ...]:
    """The start-up log formats of every registered engine that declares one (`log_format`,
    optional: a minimal plugin need not), in registry order; the built-in engines' from their
    tables, without their code (kvplan.engines.registry.log_format)."""
    from kvplan.engines import registry

    found = (registry.log_format(name) for name in registry.names())
    return tuple(f for f in found if f is not None)


def _format_of(engine: str | None) -> EngineLog | None:
    """The start-up log format of the engine a log was read as (None: none is registered)."""
    from kvplan.engines import registry

    return registry.log_format(engine) if engine in registry.names() else None


def reading_formats() -> tuple[EngineLog, ...]:
    """The formats explain reads a log with: each engine's own (`log_formats`) and, after them,
    the settings it echoes, read through the setting rows (`_echoed_settings`)."""
    return tuple(_echoed_settings(f) for f in log_formats())


# how an echoed setting's text becomes its value, by the row's kind (kvplan.engines.settings;
# a bool row's flag stands alone, a gib row's number is the engine's GiB)
_ECHO_CONVERTERS = {"int": "int", "float": "num", "gib": "num", "tokens": "tokens", "str": "str",
                    "bool": "str"}


# a JSON object or Python dict as a log echoes one (vLLM --limit-mm-per-prompt), one level of
# nesting ({"image": {"count": 0}})
_OBJECT = r"\{(?:[^{}]|\{[^{}]*\})*\}"


def _echoed_settings(fmt: EngineLog) -> EngineLog:
    """`fmt` with a line format for every setting row's engine flag (kvplan.engines.settings),
    after the engine's own lines: the flag in an echoed launch line (`vllm serve ... --block-size
    32`, `--tensor_parallel_size=2`) and, where the engine echoes its non-default args as a
    dict, the flag's argument name there (`'block_size': 32`). One declaration per setting: the
    log is read with the same spellings, type and bounds as a launch line or a flag."""
    import re

    from kvplan.core.launch import LogLine
    from kvplan.engines.settings import SETTINGS

    lines = []
    for row in SETTINGS:
        converter = _ECHO_CONVERTERS.get(row.kind)
        if converter is None:  # bytes: the engine's own lines read a budget it echoes
            continue
        off = (row.off_flag,) if row.off_flag and fmt.engine in row.engine_flags else ()
        for flag in (*row.engine_flags.get(fmt.engine, ()), *off):
            bare = flag.lstrip("-")
            dashes = "-" * (len(flag) - len(bare))
            # --tensor-parallel-size or --tensor_parallel_size: the reader looks for the
            # longest word of the name (a short flag, -tp, as it is)
            words = "[-_]".join(re.escape(w) for w in bare.split("-"))
            key = max(bare.split("-"), key=len) if dashes == "--" else flag
            if row.kind == "bool":
                pattern = rf"(?<![\w-])({dashes}{words})(?![\w-])"
            elif row.parse is not None:  # a value with a syntax of its own: a JSON object too
                pattern = rf"(?<![\w-]){dashes}{words}(?:=| +)['\"]?({_OBJECT}|[^\s\\'\"]+)"
            else:
                value = r"([\d.]+[kKmMgG]?)" if converter == "tokens" else r"([^\s\\'\"]+)"
                pattern = rf"(?<![\w-]){dashes}{words}(?:=| +){value}"
            lines.append(LogLine(row.field_name, key, pattern, converter, "settings"))
            if fmt.echoes_non_defaults and flag.startswith("--") and flag not in off:
                name = flag[2:].replace("-", "_")
                # a value with a syntax of its own: a dict, or a quoted word ('pooling')
                value = r"(True|False)" if row.kind == "bool" else \
                    rf"'?({_OBJECT}|[^,'{{}}\s]+)'?" if row.parse is not None else \
                    r"'?([^,'}\s]+)'?"
                lines.append(LogLine(row.field_name, f"'{name}':", rf"'{name}': {value}",
                                     converter, "settings", echoed=True))
    # the environment variables the engine's launch table reads (EngineLaunch.env: vLLM's
    # VLLM_PP_LAYER_PARTITION), as an echoed launch line sets them (`NAME=value vllm serve`,
    # `-e NAME=value`, `export NAME=value`) or a Go map prints them (Ollama's routes.go
    # `server config env="map[OLLAMA_NUM_PARALLEL:1 OLLAMA_KV_CACHE_TYPE: ...]"`, empty when
    # unset); launch.py's one reading makes them settings
    from kvplan.engines import registry

    table = registry.launch_table(fmt.engine)
    for env_name, (field, kind) in (table.env if table is not None else {}).items():
        converter = _ECHO_CONVERTERS.get(kind, "str")
        lines.append(LogLine(field, f"{env_name}=",
                             rf"(?<![\w-]){re.escape(env_name)}=['\"]?([^\s'\"]+)", converter,
                             "settings"))
        lines.append(LogLine(field, f"{env_name}:",
                             rf"(?<![\w-]){re.escape(env_name)}:([^\s\]\"]+)", converter,
                             "settings"))
    return replace(fmt, figures=(*fmt.figures, *lines))


def _diff(logged: float, ours: float) -> float | None:
    if not logged:
        return None
    return (ours - logged) / logged * 100


def _logged_budget(facts: LogFacts) -> int | None:
    kv = facts.kv
    if "available_kv_cache_bytes" in kv:
        return int(kv["available_kv_cache_bytes"])
    for names in BUDGET_SUMS:
        if all(n in kv for n in names):
            return sum(int(kv[n]) for n in names)
    return None


def _deployment(facts: LogFacts, model: str | None, gpu: str | None, kv_dtype: str | None,
                warnings: list[str], tp: int | None = None,
                draft_layers: int | None = None) -> Any:
    from kvplan.planning.deployment import deployment
    from kvplan.planning.launch import model_name
    from kvplan.sources.library import resolve

    name = model or facts.model
    if not name:
        raise BadInputError("the log does not name its model", "give --model")
    # --model is read as the log's own model name would be: a checkpoint name with a weight
    # format's suffix (Qwen3-30B-A3B-FP8) is the base model with those weights
    name, quant = model_name(name, warnings)
    try:
        spec = resolve(name)
    except BadInputError as exc:
        raise BadInputError(f"the log's model {name!r}: {exc.message}",
                            "give --model with a library name or a config.json") from None
    quant = _weights_format(facts, model, quant, spec, warnings)
    s = dict(facts.settings)
    if tp is not None:
        s["tp"] = tp
    kv = kv_dtype or s.get("kv_dtype")
    gpu_of_log = None
    if gpu is None and facts.gpu_total_bytes:
        from kvplan.sources.gpus import custom_gpu

        gpu_of_log = custom_gpu(f"{facts.gpu_total_bytes}B", "the log's GPU")
    extra: dict[str, Any] = {k: s[k] for k in ("n_ubatch", "flash_attn") if k in s}
    if str(s.get("enforce_eager")) in ("True", "--enforce-eager"):
        extra["enforce_eager"] = True
    if s.get("flashinfer_sampler") == "FlashInfer":
        extra["flashinfer_sampler"] = True
    # llama.cpp: `kv_unified = true|false`, or a KV line of one stream for several sequences
    if "kv_unified" in s:
        extra["kv_unified"] = str(s["kv_unified"]).lower() == "true"
    elif "streams" in facts.kv and int(s.get("parallel", 1)) > 1:
        extra["kv_unified"] = int(facts.kv["streams"]) == 1
    _speculative(s, draft_layers, extra, warnings)
    extra.update(_other_settings(s, str(facts.engine), extra))
    if s.get("pp_layer_partition") is not None:
        from kvplan.planning.launch import layer_partition

        extra["pp_layers"] = layer_partition(str(s["pp_layer_partition"]), s.get("pp"))
    if s.get("kv_dtype_v") not in (None, s.get("kv_dtype")):
        extra["kv_dtype_v"] = s["kv_dtype_v"]  # llama.cpp -ctv in its own type
    # the one deployment builder, as plan and check use it: the log's settings are checked as
    # the same flags would be
    return deployment(
        spec, gpu=gpu if gpu is not None else gpu_of_log, tp=s.get("tp"), pp=s.get("pp"),
        engine=str(facts.engine), engine_version=facts.version,
        kv_dtype=str(kv or "auto"),
        max_model_len=s.get("max_model_len"), block_size=s.get("block_size"),
        gpu_memory_utilization=s.get("memory_fraction"), max_num_seqs=s.get("max_num_seqs"),
        parallel=s.get("parallel", 1), weights_dtype=quant or "auto",
        max_num_batched_tokens=s.get("max_num_batched_tokens"), dp=int(s.get("dp", 1)),
        **extra)


def _weights_format(facts: LogFacts, model: str | None, quant: str | None, spec: Any,
                    warnings: list[str]) -> str | None:
    """The weights' format: the quantization the log prints (vLLM's config dump, SGLang's
    server_args or weight loader), which is what the engine ran, over a weight-format suffix
    of --model; else the suffix of the model the log names (read as a launch line's is,
    kvplan.planning.launch). Said where it sets the weights. A model whose own config states
    its format (gpt-oss's mxfp4 experts beside bf16 attention) keeps it: its config says
    which tensors the format covers, the log's one word does not."""
    from kvplan.planning.launch import name_quant, quantization_weights

    if spec.quantization.method != "none":
        return quant
    logged = facts.settings.get("quantization")
    mapped = quantization_weights(str(logged), warnings) if logged is not None else None
    if mapped is not None:
        if quant is not None and quant != mapped:
            warnings.append(f"the log prints quantization={logged}: {mapped} weights, not the "
                            f"{quant} of --model's suffix")
        elif quant is None:
            warnings.append(f"the log prints quantization={logged}: the weights are sized as "
                            f"{mapped}")
        return mapped
    if quant is None and model is not None and facts.model:
        quant = name_quant(str(facts.model))
        if quant is not None:
            warnings.append(f"the log's model {facts.model!r} is read with {quant} weights (its "
                            "name's suffix)")
    return quant


# the settings _deployment passes by name itself
_OWN = ("tp", "pp", "dp", "max_model_len", "kv_dtype", "block_size", "gpu_memory_utilization",
        "max_num_seqs", "max_num_batched_tokens", "parallel", "kv_memory")


def _other_settings(s: dict[str, Any], engine: str, extra: dict[str, Any]) -> dict[str, Any]:
    """Every other setting the log echoes, by its row's name, for the deployment builder to
    read and bound as it reads a flag (a switch as the flag alone or True)."""
    from kvplan.engines.settings import SETTINGS

    out: dict[str, Any] = {}
    for row in SETTINGS:
        if row.name in _OWN or row.name in extra or row.field_name not in s or (
                row.only and engine not in row.only):
            continue
        value = s[row.field_name]
        if row.kind == "bool":  # the flag (not its off flag), True, or False
            value = str(value) == "True" or (str(value).startswith("-") and
                                             str(value) != row.off_flag)
        out[row.name] = value
    return out


def _speculative(s: dict[str, Any], draft_layers: int | None, extra: dict[str, Any],
                 warnings: list[str]) -> None:
    """Speculative decoding as the log states it: the draft tokens a step, and the drafter's
    layers in the KV pool, which the log does not print (`draft_layers` gives them)."""
    if "num_speculative_tokens" in s:
        extra["num_speculative_tokens"] = int(s["num_speculative_tokens"])
    method = s.get("speculative_method")
    if draft_layers is not None:
        extra["num_draft_layers"] = draft_layers
    elif method is not None and str(method) not in NO_DRAFT_LAYERS:
        warnings.append(f"the log runs speculative decoding ({method}): its drafter's layers "
                        "share the KV pool, and the log does not print how many; --draft-layers "
                        "(the draft model's num_hidden_layers) counts them")


def explain(text: str, model: str | None = None, gpu: str | None = None,
            engine: str | None = None, kv_dtype: str | None = None,
            tp: int | None = None, engine_version: str | None = None,
            draft_layers: int | None = None) -> Explanation:
    """Reconcile a start-up log; `model`, `gpu`, `kv_dtype`, `tp`, `engine_version` and
    `draft_layers` (an EAGLE/MTP drafter's decoder layers) supply what the log does not print
    (a per-rank log shows only its own rank, not the TP size; a log with no release line is
    dated by its line formats unless `engine_version` says)."""
    from kvplan.engines.registry import get

    facts = read_log(text, reading_formats(), engine)
    warnings: list[str] = list(facts.notes)
    release_known = facts.version is not None or engine_version is not None
    if engine_version is not None:
        facts.version = engine_version
    elif not _modelled_as(text, facts, warnings) and facts.version is None:
        facts.version = _date(facts, warnings)
    _settings_from_lines(facts, warnings)
    dep = _deployment(facts, model, gpu, kv_dtype, warnings, tp, draft_layers)
    from kvplan.engines.settings import check_bounds

    check_bounds(dep)  # each setting by its row, as from a flag (--draft-layers: vLLM's only)
    eng = get(dep.engine)
    rows: list[Row] = []
    budget = _logged_budget(facts)
    half = _budget_precision(facts)
    if budget is None and "num_blocks" in facts.kv:
        # V0 printed only "# GPU blocks: N": the budget is N whole blocks of the engine's size
        per_block = eng.numbers(eng.capacity(replace(dep, kv_memory_bytes=2**40))).get(
            "bytes_per_block")
        if per_block:
            budget, half = int(facts.kv["num_blocks"]) * int(per_block), 0
            warnings.append("the log prints blocks, not bytes: the budget is its block count "
                            "times the block size, so the block line agrees by construction")
    misread = next((facts.unreadable[k] for k in BUDGET_FIGURES if k in facts.unreadable), None)
    if budget is None and misread is not None:
        # the budget's line is there but its figure is not a number ("5e1 GiB", "-- GiB"):
        # a difference that names the line, never the quieter "prints no KV budget"
        warnings.append(f"logged KV budget: {UNREADABLE} ({misread[:80]})")
        rows.append(Row("logged KV budget", "input", None, None, None, "DIFF", misread[:300],
                        UNREADABLE))
    elif budget is None and eng.needs_memory:
        warnings.append("the log prints no KV budget: only what follows from the settings")
    elif budget is not None and budget + half <= 0:
        # even the top of its printed span is not positive (-8.59 GiB, or 0 printed exactly)
        warnings.append("the logged KV budget is not positive: the engine refused to start, "
                        "so there is no KV line to recompute")
        rows.append(_refused(facts, budget))
    else:
        if budget is not None and budget <= 0:
            # printed as zero at its precision ("K size: 0.00 GB"): below the last digit, not
            # a refusal; the KV lines are recomputed over the span the digit allows
            warnings.append("the logged KV budget prints as zero: it is below its printed "
                            "precision, and the KV lines are recomputed over that span")
        rows += _recomputed(eng, dep, facts, budget, half)
        if tp is None and "tp" not in facts.settings and any(r.status == "DIFF" for r in rows):
            rows, dep = _per_worker(eng, dep, facts, budget, half, rows, warnings)
        warnings += _fewest_over_workers(dep, facts, rows)
        for figure in ESTIMATED_FIGURES:
            if figure in facts.kv:
                ours = eng.numbers(eng.capacity(_given(dep, budget)))
                if figure in ours:
                    logged, value = facts.kv[figure], ours[figure]
                    rows.append(Row(figure, "from settings", logged, value,
                                    _diff(float(logged), float(value)), "info",
                                    facts.lines.get(figure, "")))
    warnings += _unmodelled(text, facts, rows)
    warnings += _unknown_echoed(text, facts)
    unread = _unreadable(eng, dep, facts, budget if budget is not None and budget > 0 else None)
    warnings += [f"{r.quantity}: {r.note} ({r.line[:80]})" for r in unread]
    rows += unread
    unprinted: tuple[str, ...] = ()
    # the engine's pool from the free memory its log printed (SGLang), else from the GPU
    predicted = _from_readings(eng, dep, facts, warnings)
    if predicted:
        # the readings stand for the GPU, the weights and the reserves: what the log may not
        # print is the fraction, whose default follows the release
        unprinted = () if "memory_fraction" in facts.settings else (
            ("gpu_memory_utilization",) + (() if release_known else ("engine release",)))
    elif dep.gpu_memory_bytes is not None and eng.needs_memory:
        predicted = _predicted(eng, dep, facts, warnings)
        if predicted:
            unprinted = _unprinted(text, facts, dep, release_known)
    rows += predicted
    if unprinted:
        warnings.append("the budget from settings takes the engine's defaults for what the "
                        f"log does not print: {', '.join(unprinted)}")
    if facts.weights_bytes is not None and not any(r.quantity == "weights" for r in rows):
        rows += _weights_only(eng, dep, facts, warnings)
    if not rows:
        raise BadInputError("the log has no line kvplan can recompute",
                            "include the engine's KV cache lines (e.g. vLLM 'Available KV "
                            "cache memory' / 'GPU KV cache size')")
    settings = {k: v for k, v in facts.settings.items()}
    return Explanation(str(facts.engine), dep.spec.name, facts.version, settings, tuple(rows),
                       tuple(warnings), unprinted)


def _unknown_echoed(text: str, facts: LogFacts) -> list[str]:
    """The settings a log echoes as set (vLLM's non-default args) under a flag kvplan does not
    know for the engine: named as a launch line's unknown flag is
    (kvplan.planning.launch.unknown_flag), since the budget from settings leaves them out."""
    from kvplan.planning.launch import engine_launches, unknown_flag

    fmt = _format_of(facts.engine)
    if fmt is None or not fmt.echoes_non_defaults:
        return []
    table = next((t for t in engine_launches() if t.engine == facts.engine), None)
    if table is None:
        return []
    known = {f.replace("_", "-") for f in table.flags}
    found = []
    for key in echoed_keys(text, fmt.echoes_non_defaults):
        flag = "--" + key.replace("_", "-")
        if key not in fmt.echoed_positional and flag not in known:
            found.append(f"the log's non-default args set '{key}': " + unknown_flag(flag,
                                                                                 table.engine))
    return found


def _unprinted(text: str, facts: LogFacts, dep: Any, release_known: bool) -> tuple[str, ...]:
    """The settings deciding the engine's budget (kvplan.engines.settings rows' `budget`) that
    the log does not print; none where the log lists every non-default setting (then what it
    does not list is at its default). Also the release, when the log prints none, and the
    GPU's total, when the log prints none and the GPU is known to report more than one."""
    from kvplan.engines.settings import SETTINGS

    fmt = _format_of(facts.engine)
    echoed = fmt is not None and bool(fmt.echoes_non_defaults) and \
        fmt.echoes_non_defaults in text
    s = facts.settings
    names = [] if echoed else [
        row.name for row in SETTINGS if dep.engine in row.budget
        and row.name not in s and row.field_name not in s]
    if not release_known:
        names.append("engine release")
    if facts.gpu_total_bytes is None and _total_varies(dep.gpu_name):
        names.append("GPU total memory")
    return tuple(names)


def _total_varies(gpu_name: str | None) -> bool:
    """Whether the catalog records more than one total the framework reports for this GPU
    (kvplan.sources.gpus `other_memory_bytes`): then a log that prints none may have had
    either, and the budget from settings cannot be held to the one kvplan takes."""
    from kvplan.sources.gpus import find_gpu

    if gpu_name is None:
        return False
    try:
        return bool(find_gpu(gpu_name).other_memory_bytes)
    except BadInputError:
        return False


def _given(dep: Any, budget: int | None) -> Any:
    return replace(dep, kv_memory_bytes=max(budget, 1)) if budget is not None else dep


def _recomputed(eng: Any, dep: Any, facts: LogFacts, budget: int | None,
                half: float) -> list[Row]:
    """Each KV line the log printed beside kvplan's from the logged budget; it agrees when the
    logged value lies between kvplan's at the budget's lowest and highest printed reading,
    widened by the line's own rounding. A hybrid model's state pool takes whole request
    slots out of the budget (SGLang's MambaPool), so its token count steps down inside the
    span where one more slot fits: the span's middle and quarter readings count too."""
    ours = eng.numbers(eng.capacity(_given(dep, budget)))
    figures = [f for f in KV_FIGURES if f in facts.kv and f in ours]
    if not figures:
        return []
    ends = [ours]
    if budget is not None and half:
        ends = [eng.numbers(eng.capacity(_given(dep, round(budget + d * half))))
                for d in (-1, -0.5, 0.5, 1)] + [ours]
    rows = []
    for figure in figures:
        logged, value = facts.kv[figure], ours[figure]
        lo = min(float(e[figure]) for e in ends)
        hi = max(float(e[figure]) for e in ends)
        slack = facts.precision.get(figure, 0.0) + 1e-9 * max(abs(lo), abs(hi), 1.0)
        ok = lo - slack <= float(logged) <= hi + slack
        rows.append(Row(figure, "given the logged budget", logged, value,
                        _diff(float(logged), float(value)), "ok" if ok else "DIFF",
                        facts.lines.get(figure, "")))
    return rows


def _refused(facts: LogFacts, budget: int) -> Row:
    """A logged KV budget (or V0 block count) of zero or less: the engine did not start, and
    no KV line agrees with anything, so the verdict is a difference, never "ok"."""
    key = next((k for k in ("available_kv_cache_bytes", "k_size_bytes", "kv_cache_bytes",
                            "num_blocks") if k in facts.lines), "")
    return Row("logged KV budget", "input", budget, None, None, "DIFF",
               facts.lines.get(key, ""), "not positive: the engine refused to start")


def _unreadable(eng: Any, dep: Any, facts: LogFacts, budget: int | None) -> list[Row]:
    """A KV line the log prints whose figure kvplan could not read (1e999, a 5,000-digit
    number): a difference, never a silent "ok" by omission."""
    figures = [f for f in KV_FIGURES if f in facts.unreadable and f not in facts.kv]
    if not figures:
        return []
    ours = eng.numbers(eng.capacity(_given(dep, budget))) if budget is not None else {}
    return [Row(figure, "given the logged budget", None, ours.get(figure), None, "DIFF",
                facts.unreadable[figure][:300], UNREADABLE) for figure in figures]


def _per_worker(eng: Any, dep: Any, facts: LogFacts, budget: int | None, half: float,
                rows: list[Row], warnings: list[str]) -> tuple[list[Row], Any]:
    """A log that does not print the TP size: a worker's budget gives one rank's share of the
    cache. The smallest TP size that makes every recomputed line agree is taken, and said."""
    for size in (2, 4, 8, 16):
        try:
            trial = replace(dep, tp=size)
            found = _recomputed(eng, trial, facts, budget, half)
        except BadInputError:
            continue
        if found and all(r.status == "ok" for r in found):
            warnings.append(f"the log does not print the TP size; its KV lines agree with a "
                            f"worker's budget at TP {size} (not at TP 1), so TP {size} is "
                            f"applied: --tp says otherwise")
            return found, trial
    return rows, dep


def _fewest_over_workers(dep: Any, facts: LogFacts, rows: list[Row]) -> list[str]:
    """A KV line below what the logged budget holds, from a log of several workers that prints
    one worker's budget: the engine gives every worker the fewest blocks over them (vLLM V1
    v1/core/kv_cache_utils.py unify_kv_cache_configs; V0 executor_base.py takes the minimum of
    the workers' block counts), so a worker with less memory lowers the count. Said, not
    assumed: the line stays a difference until the other workers' budgets are in the log."""
    workers = int(dep.tp or 1) * int(dep.pp or 1)
    below = [r for r in rows if r.status == "DIFF" and r.kvplan is not None
             and float(r.logged) < float(r.kvplan)]
    if workers < 2 or not below or facts.scopes.get("available_kv_cache_bytes") != "worker":
        return []
    return [f"{r.quantity} is below what the logged budget holds: the log prints one worker's "
            f"budget, and the engine sizes every worker's cache by the fewest blocks over its "
            f"{workers} workers; a worker with less memory would give this count (the other "
            "workers' budget lines say)" for r in below]


def _budget_precision(facts: LogFacts) -> float:
    """Half a unit of the budget's last printed digit, in bytes (the K and V lines' summed)."""
    for names in (("available_kv_cache_bytes",), *BUDGET_SUMS):
        if all(n in facts.kv for n in names):
            return sum(facts.precision.get(n, 0.0) for n in names)
    return 0.0


def _unmodelled(text: str, facts: LogFacts, rows: list[Row]) -> list[str]:
    """Where a KV line differs: the rules the engine's `unmodelled` lines show this run follows
    and kvplan does not model, each named."""
    import re

    if not any(r.status == "DIFF" for r in rows):
        return []
    fmt = _format_of(facts.engine)
    return [f"{rule} (a KV line differs)" for pattern, rule in
            (fmt.unmodelled if fmt is not None else ()) if re.search(pattern, text)]


def _modelled_as(text: str, facts: LogFacts, warnings: list[str]) -> bool:
    """The release whose model the log's engine ran as, where a line of the engine's
    `modelled_as` shows it (vLLM's V0 engine under 0.8-0.10): applied and said."""
    import re

    fmt = _format_of(facts.engine)
    for pattern, release, why in fmt.modelled_as if fmt is not None else ():
        if re.search(pattern, text):
            printed = f" (the log prints {facts.version})" if facts.version else ""
            warnings.append(f"{why}: {release} is applied{printed}; --engine-version says "
                            "otherwise")
            facts.version = release
            return True
    return False


def _date(facts: LogFacts, warnings: list[str]) -> str | None:
    """The release a log with no release line was written by, from its line formats: the
    latest release that prints every line read (each LogLine names the releases printing it)."""
    from kvplan.engines import parse_version

    first: tuple[int, ...] = ()
    last: tuple[int, ...] | None = None
    lo_text = hi_text = ""
    for lo, hi in facts.releases.values():
        lo_v, hi_v = parse_version(lo), parse_version(hi)
        if lo_v is not None and lo_v > first:
            first, lo_text = lo_v, lo
        if hi_v is not None and (last is None or hi_v < last):
            last, hi_text = hi_v, hi
    if last is None and first:
        warnings.append(f"the log prints no release; its line formats are those of {lo_text} "
                        "and later: kvplan's latest model of the engine is applied "
                        "(--engine-version says which)")
        return None
    if last is None or (first and first > last):
        if first and last is not None:
            warnings.append(f"the log's lines are of different releases ({lo_text} and later, "
                            f"{hi_text} and earlier): not dated; --engine-version says which")
        return None
    if not first and not hi_text:
        return None
    warnings.append(f"the log prints no release; its line formats are those of {lo_text or '?'}"
                    f"-{hi_text}: {hi_text} is applied (--engine-version says which)")
    return hi_text


def _settings_from_lines(facts: LogFacts, warnings: list[str]) -> None:
    """Settings a log states other than as a setting: a slot's context times the slots, the
    cells of llama.cpp's KV line (its context, padded)."""
    from kvplan.engines import registry

    s = facts.settings
    # an echoed environment variable at a value the engine reads as its absence (the launch
    # table's `unset_values`: Ollama's OLLAMA_NUM_PARALLEL:0) leaves the setting to its default
    known = facts.engine in registry.names()
    table = registry.launch_table(str(facts.engine)) if known else None
    if table is not None:
        for env_name, (field_name, _) in table.env.items():
            if str(s.get(field_name)) in table.unset_values.get(env_name, ()):
                del s[field_name]
    # the engine's own rule for settings its log states other than as settings (Ollama's
    # runner context: kvplan.engines.llamacpp.ollama.engine.runner_settings)
    hook = getattr(registry.get(str(facts.engine)), "log_settings", None) if known else None
    if hook is not None:
        hook(s, facts.kv, warnings)
    if "max_model_len" not in s and "max_concurrency_tokens" in facts.kv:
        s["max_model_len"] = facts.kv["max_concurrency_tokens"]  # vLLM prints max_model_len
    if "max_model_len" not in s and "ctx_per_seq" in s:
        s["max_model_len"] = int(s["ctx_per_seq"]) * int(s.get("parallel", 1))
        warnings.append(f"the context is {s.get('parallel', 1)} slot(s) of "
                        f"{s['ctx_per_seq']:,} tokens (n_ctx_slot)")
    streams = int(facts.kv.get("streams", 1))
    if "cells" in facts.kv and streams > 1:
        # a non-unified cache prints one stream's cells; the engine holds them per stream
        facts.kv["cells"] = int(facts.kv["cells"]) * streams
        warnings.append(f"the KV line is {streams} streams (one per sequence) of "
                        f"{int(facts.kv['cells']) // streams:,} cells")
    if "max_model_len" not in s and "cells" in facts.kv:
        s["max_model_len"] = int(facts.kv["cells"])


def _predicted(eng: Any, dep: Any, facts: LogFacts, warnings: list[str]) -> list[Row]:
    """The budget from the GPU and settings alone, each term beside the log's own line."""
    try:
        cap = eng.capacity(dep)
    except BadInputError as exc:
        warnings.append(f"no prediction from settings: {exc.message}")
        return []
    b = cap.budget
    rows: list[Row] = []
    if b is None:  # an engine with no budget breakdown (TGI): its token figure alone
        return _predicted_figures(eng, cap, facts)
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
    return rows + _predicted_figures(eng, cap, facts)


def _from_readings(eng: Any, dep: Any, facts: LogFacts, warnings: list[str]) -> list[Row]:
    """The engine's token figure as it sizes its pool from the free-memory readings its log
    prints (the engine's `log_readings`: SGLang's "Load weight begin/end ... avail mem"),
    beside the logged one, with the span the readings' printed precision allows. Where the
    log prints the token figure but lacks a reading, the missing line is named."""
    names = tuple(getattr(eng, "log_readings", ()))
    if not names or not any(f in facts.kv for f in TOKEN_FIGURES):
        return []
    fmt = _format_of(facts.engine)
    keys = {line.figure: line.key for line in (fmt.figures if fmt is not None else ())}
    missing = [n for n in names if n not in facts.terms]
    if missing:
        lines = " and ".join(f"'{keys.get(n, n)}'" for n in missing)
        warnings.append(f"no budget from the logged free memory: the log lacks the {lines} "
                        f"line{'s' if len(missing) > 1 else ''} ({', '.join(missing)}) the "
                        "engine sizes its pool from")
        return []
    from itertools import product

    readings = {n: int(facts.terms[n]) for n in names}
    try:
        cap = eng.capacity_from_readings(dep, readings)
        # each reading as printed stands for half a unit of its last digit either way: the
        # pool at every corner of that box
        spans = [eng.numbers(eng.capacity_from_readings(dep, {
            n: round(v + d * facts.precision.get(n, 0.0))
            for d, (n, v) in zip(signs, readings.items(), strict=True)}))
            for signs in product((-1, 1), repeat=len(readings))]
    except BadInputError as exc:
        warnings.append(f"no budget from the logged free memory: {exc.message}")
        return []
    logged = _logged_budget(facts)
    rows = [] if logged is None else [Row(
        "KV budget", "from settings", logged, eng.kv_budget_bytes(cap), _diff(logged,
        eng.kv_budget_bytes(cap)), "info", facts.lines.get(
            "k_size_bytes" if "k_size_bytes" in facts.lines else "kv_cache_bytes", ""),
        "from the logged free memory: the pool's bytes as sized, beside the logged KV sizes")]
    out = []
    for row in _predicted_figures(eng, cap, facts):
        values = [float(n[row.quantity]) for n in spans]
        lo, hi = min(values), max(values)
        inside = "within" if lo <= float(row.logged) <= hi else "outside"
        out.append(replace(row, note=(
            f"from the logged free memory (the {', '.join(repr(keys.get(n, n)) for n in names)}"
            f" lines) and {'; '.join(cap.notes)}: the readings' printed precision spans "
            f"{lo:,.0f}-{hi:,.0f}, the logged figure is {inside} it")))
    return rows + out


# the token (or block) figures the engine's own lines give, in the order they are compared
TOKEN_FIGURES = ("kv_cache_tokens", "num_blocks", "max_total_num_tokens",
                 "max_batch_total_tokens")


def _predicted_figures(eng: Any, cap: Any, facts: LogFacts) -> list[Row]:
    """The engine's token (or block) figure from settings beside the logged one."""
    numbers = eng.numbers(cap)
    for figure in TOKEN_FIGURES:
        if figure in facts.kv and figure in numbers:
            return [Row(figure, "from settings", facts.kv[figure], numbers[figure],
                        _diff(float(facts.kv[figure]), float(numbers[figure])), "info",
                        facts.lines.get(figure, ""))]
    return []


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
