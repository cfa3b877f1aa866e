"""The Ollama plugin: the llama.cpp context `ollama serve` loads a model with, sized by
llama.cpp's own rules (kvplan.engines.llamacpp), never a copy of them.

Ollama is a server in front of llama.cpp: its scheduler turns the request's num_ctx (the
deployment's max_model_len: the context of one request), OLLAMA_NUM_PARALLEL, OLLAMA_KV_CACHE_TYPE
and OLLAMA_FLASH_ATTENTION into the runner's context, num_ctx x parallel cells with one slot
per parallel request (`config` cites each rule's source by release). That context is then
exactly a llama-server deployment, which the llama.cpp engine plans; this engine keeps the
Ollama deployment and says how it got there. Not modelled: Ollama's own engine (`ollama runner
--ollama-engine`, some architectures up to 0.29), whose sliding-window layers keep more than
llama.cpp's window; the layer count its memory estimate offloads when the model does not fit
(num_gpu; give --n-gpu-layers); vision projectors.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvplan.core.errors import BadInputError
from kvplan.core.spec import ModelSpec
from kvplan.engines.base import Capacity, Deployment
from kvplan.engines.llamacpp.engine import ENGINE as LLAMACPP
from kvplan.engines.llamacpp.engine import LlamacppEngine
from kvplan.engines.llamacpp.ollama.config import (
    CACHE_TYPES,
    LATEST,
    MIN_NUM_CTX,
    QUANTIZED,
    OllamaRules,
    default_num_ctx,
    flash_attention_setting,
    rules_for,
)
from kvplan.engines.llamacpp.ollama.text import LOG_FORMAT, launch_flags

SCHEMA = "kvplan.engine.ollama/1"


def cache_type(kv_dtype: str) -> str:
    """kvplan's KV dtype -> OLLAMA_KV_CACHE_TYPE (auto and 16-bit: f16, Ollama's default)."""
    key = kv_dtype.strip().lower()
    if key in ("auto", "fp16", "float16", ""):
        return "f16"
    if key not in CACHE_TYPES:
        raise BadInputError(f"Ollama has no KV cache type {kv_dtype!r} (OLLAMA_KV_CACHE_TYPE, "
                            "--kv-dtype)", "valid: " + ", ".join(CACHE_TYPES))
    return key


def runner_deployment(dep: Deployment) -> tuple[Deployment, tuple[str, ...]]:
    """The llama.cpp deployment Ollama's scheduler starts for `dep`, and how it got there
    (one note a rule that applied). `dep.max_model_len` is num_ctx, one request's context;
    `dep.parallel` is OLLAMA_NUM_PARALLEL."""
    from kvplan.engines import parse_version

    rules: OllamaRules = rules_for(parse_version(dep.engine_version))
    notes: list[str] = []
    if dep.max_model_len is None:
        gpus = (dep.gpu_memory_bytes or 0) * dep.num_gpus
        num_ctx = default_num_ctx(rules, gpus)
        notes.append(
            f"num_ctx {num_ctx:,}: Ollama's default from {rules.release} when neither the "
            "request, the Modelfile nor OLLAMA_CONTEXT_LENGTH sets one" + (
                "" if rules.default_num_ctx is not None else
                (f" (by the total GPU memory, {gpus:,} bytes: 47 GiB or more 262,144, 23 GiB "
                 "or more 32,768, else 4,096)" if gpus else
                 " (no GPU given: the tier of 0 bytes, 4,096)")))
    else:
        num_ctx = max(dep.max_model_len, MIN_NUM_CTX)
    trained = dep.spec.max_context_tokens
    if trained and num_ctx > trained and rules.cuts_to_trained_context:
        notes.append(f"num_ctx {num_ctx:,} is cut to the model's trained context, {trained:,} "
                     "(Ollama: 'requested context size too large for model')")
        num_ctx = trained
    parallel = dep.parallel
    if rules.default_parallel == 0 and parallel == 1:
        notes.append(f"Ollama {rules.release}: with OLLAMA_NUM_PARALLEL unset it loads "
                     f"{rules.auto_parallel} slots where they fit (else 1); kvplan plans the "
                     "1 given (set --parallel to plan the others)")
    flash = flash_attention_setting(dep.flash_attn)
    flash_mode = "on" if flash else "off" if flash is False else rules.flash_attention_default
    kv = cache_type(dep.kv_dtype)
    if dep.kv_dtype_v is not None and cache_type(dep.kv_dtype_v) != kv:
        raise BadInputError("Ollama gives K and V one cache type (OLLAMA_KV_CACHE_TYPE); "
                            f"--kv-dtype-v {dep.kv_dtype_v} differs from {kv}",
                            "leave the V type out")
    if kv in QUANTIZED and rules.quantized_kv_needs_flash_attention and flash is not True:
        notes.append(f"OLLAMA_KV_CACHE_TYPE={kv} without OLLAMA_FLASH_ATTENTION=1: Ollama "
                     f"{rules.release} keeps an f16 cache ('OLLAMA_FLASH_ATTENTION must be "
                     "enabled to use a quantized OLLAMA_KV_CACHE_TYPE')")
        kv = "f16"
    unified = not rules.cache_per_sequence if dep.kv_unified is None else dep.kv_unified
    notes.append(f"the runner's context: num_ctx {num_ctx:,} x OLLAMA_NUM_PARALLEL {parallel} "
                 f"= {num_ctx * parallel:,} cells, {parallel} slot(s), cache type {kv}, flash "
                 f"attention {flash_mode} (" + (
                     "llama-server -c {0} -np {1}" if rules.llama_server else
                     "llama.cpp n_ctx {0}, n_seq_max {1}").format(num_ctx * parallel, parallel)
                 + f", as Ollama's releases from {rules.release} start it)")
    run = replace(dep, engine=LLAMACPP.name, engine_version=None,
                  max_model_len=num_ctx * parallel, kv_dtype=kv, kv_dtype_v=None,
                  flash_attn=flash_mode, kv_unified=unified)
    return run, tuple(notes)


def runner_settings(settings: dict[str, Any], kv: dict[str, Any], notes: list[str]) -> None:
    """The settings of a log Ollama's runner wrote, as its lines state them (kvplan's explain
    calls it as the engine's `log_settings`): one request's context (the deployment's
    max_model_len; Ollama's num_ctx) is the runner's context over its slots (the runner's
    n_ctx, KvSize or --ctx-size: `runner_ctx`; else its KV line's cells times its streams),
    num_ctx x parallel (`runner_deployment`), over the server's default (OLLAMA_CONTEXT_LENGTH,
    which a request or Modelfile may change). Where the log prints no parallel (or prints the
    variable unset), the slots are the runner's context over its per-sequence one
    (`num_ctx`, the runner's n_ctx_per_seq)."""
    streams = int(kv.get("streams", 1))
    total = settings.pop("runner_ctx", None)
    slot = settings.pop("num_ctx", None)  # the runner's n_ctx_per_seq
    if total is None and "cells" in kv:
        total = int(kv["cells"]) * streams
    if total is None:
        return
    if "parallel" not in settings and slot:
        settings["parallel"] = max(int(total) // int(slot), 1)
        notes.append(f"Ollama ran {settings['parallel']} slot(s): the runner's context of "
                     f"{int(total):,} cells over its {int(slot):,} per sequence")
    parallel = int(settings.get("parallel", 1))
    num_ctx = int(total) // parallel
    if settings.get("max_model_len") not in (None, num_ctx):
        notes.append(f"the runner's context is {int(total):,} cells for {parallel} slot(s): "
                     f"num_ctx {num_ctx:,} is applied, not OLLAMA_CONTEXT_LENGTH "
                     f"{settings['max_model_len']} (a request or Modelfile set its own)")
    settings["max_model_len"] = num_ctx


# the runner's own defaults (runner.go Execute, 0.5-0.11.4: fs.Int("ctx-size", 2048),
# fs.Bool("flash-attn", false), fs.Int("n-gpu-layers", 0)) for a runner line without them
RUNNER_DEFAULTS = {"runner_ctx": 2048, "flash_attn": False, "n_gpu_layers": "0"}


def launch_settings(program: str, settings: dict[str, Any], notes: list[str]) -> None:
    """The settings of an `ollama runner` line (its log's "starting llama server" command), as
    `ollama serve`'s deployment states them (kvplan's planning.launch calls it as the engine's
    `launch_settings`): --ctx-size is the runner's whole context, num_ctx x --parallel, which
    `runner_settings` turns into num_ctx; an absent flag is at the runner's default; the cache
    is one over the slots, as the llama.cpp those runners carried kept it (kv_unified; the
    per-sequence cache came with 0.11.5, whose runner line no longer names the context).
    `ollama serve`'s own line is read as it is."""
    if program.split()[-1:] != ["runner"]:
        return
    for name, value in RUNNER_DEFAULTS.items():
        settings.setdefault(name, value)
    settings.setdefault("kv_unified", True)
    if settings.pop("ollama_engine", False):
        notes.append("--ollama-engine: the runner runs Ollama's own engine, whose sliding-window "
                     "layers keep more than llama.cpp's window; kvplan plans llama.cpp's cache")
    notes.append(f"{program}: the runner Ollama 0.4-0.11.4 start with the context on its line "
                 "(llm/server.go); --ctx-size is num_ctx x --parallel cells (give "
                 "--engine-version for the release's rules)")
    runner_settings(settings, {}, notes)


class OllamaEngine(LlamacppEngine):
    """`ollama serve`: Ollama's settings -> a llama.cpp context, planned by llama.cpp's
    engine; the capacity keeps the Ollama deployment (its num_ctx per request)."""

    name = "ollama"
    display_name = "Ollama"
    start_log = LOG_FORMAT  # its runner's llama.cpp lines and its own (text.py)
    launch_table = launch_flags
    log_settings = staticmethod(runner_settings)
    launch_settings = staticmethod(launch_settings)
    latest_version = LATEST
    kv_dtypes = ("auto", *CACHE_TYPES)
    smaller_kv_dtypes = QUANTIZED

    def capacity(self, dep: Deployment) -> Capacity:
        run, notes = runner_deployment(dep)
        cap = LLAMACPP.capacity(run)
        # the deployment as Ollama resolved it: max_model_len is the num_ctx it gave
        dep = replace(dep, max_model_len=run.context_limit() // run.parallel)
        return replace(cap, deployment=dep, engine=self,
                       pool=replace(cap.pool, engine=self.name), notes=(*notes, *cap.notes))

    def numbers(self, cap: Capacity) -> dict[str, Any]:
        """llama.cpp's figures, and Ollama's: num_ctx (one request's context) and the
        runner's KvSize (num_ctx x parallel, as its load request logs it)."""
        p = cap.engine_profile
        return {**super().numbers(cap), "num_ctx": p.cells_per_seq,
                "kv_size": p.cells, "parallel": p.seqs}

    def defaults(self, spec: ModelSpec, gpu_name: str | None = None,
                 gpu_memory_bytes: int | None = None,
                 version: str | None = None) -> dict[str, Any]:
        from kvplan.engines import parse_version

        rules = rules_for(parse_version(version))
        return {"num_ctx": default_num_ctx(rules, gpu_memory_bytes or 0),
                "parallel": rules.default_parallel or rules.auto_parallel,
                "kv_cache_type": "f16", "flash_attention": rules.flash_attention_default}


ENGINE = OllamaEngine()
