"""The Python front door: `kvplan.model()` and `kvplan.deploy()`.

    import kvplan
    m = kvplan.model("llama-3.1-8b")              # a library name, a path, "hf:org/name@rev"
    m.size(tokens="8k", kv_dtype="fp8")           # SizeResult: exact ints
    d = kvplan.deploy(m, gpu="h100", count=4)     # engine="vllm" by default
    d.max_concurrency("32k"); d.max_context(64); d.fits("64x(2k+512)")
    d.fewest_gpus(context="32k", concurrency=64)  # LayoutResult
    d.traffic("5/s", "2k+512", ttft="500ms", itl="50ms")  # TrafficPlan: replicas (bounds)
    d.verdict("32k", 64)                          # Verdict: fits, engine_starts, reason
    kvplan.to_json(d.max_concurrency("32k"))      # any result as JSON (as_dict: a dict)

Values are accepted as the CLI accepts them ("8k", "57.65GiB", "h100", "int4:g64"; a KV dtype
also as a `KVFormat`); results are frozen dataclasses; the CLI's `size`, `plan` and `compare`
call exactly these methods.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.core.record import record

if TYPE_CHECKING:
    from kvplan.core.dtypes import KVFormat
    from kvplan.core.sizing import SizeResult
    from kvplan.core.spec import ModelSpec
    from kvplan.engines.base import Capacity, Deployment
    from kvplan.planning.plan import (
        ConcurrencyResult,
        ContextResult,
        LayoutResult,
        WorkloadResult,
    )
    from kvplan.planning.traffic import TrafficLayouts, TrafficPlan
    from kvplan.planning.verdict import Start, Verdict
    from kvplan.sources.workload import Workload

Tokens = str | int
Memory = str | int


def _tokens(value: Tokens | None, what: str) -> int | None:
    from kvplan.planning.deployment import tokens

    return tokens(value, what)


def kv_format(kv_dtype: str | KVFormat, model_dtype: str = "bf16") -> KVFormat:
    """A KV dtype as a format object: a name ("auto", "fp8", "int4:g64") is read as --kv-dtype
    reads it ("auto" = the model's own dtype); a KVFormat is returned as it is."""
    if isinstance(kv_dtype, str):
        from kvplan.core.dtypes import parse_format

        return parse_format(kv_dtype, model_dtype)
    return kv_dtype


@record
class Model:
    """A resolved model: its `spec` (layers, dtype, maximum context) and what it costs."""

    spec: ModelSpec

    @property
    def name(self) -> str:
        """The model's name, as the library spells it."""
        return self.spec.name

    def size(self, tokens: Tokens | None = None, batch: int = 1, *,
             lengths: str | list[Tokens] | None = None, kv_dtype: str | KVFormat = "auto",
             tp: int = 1, pp: int = 1, block_size: int = 16, max_len: Tokens | None = None,
             warnings: list[str] | None = None) -> SizeResult:
        """KV bytes per token, per request, per batch and per GPU (`kvplan size`).

        tokens: per request ("8k" = 8,192; default: the model's maximum context); batch:
        requests of that length; or lengths: "2k,4k,8192" / a list, one request each.
        A request longer than the model's maximum context is sized anyway (the contiguous
        figure preallocates it) and noted in `warnings`, when a list is given.
        """
        from kvplan.core.errors import BadInputError
        from kvplan.core.sizing import size
        from kvplan.core.units import MAX_BATCH, parse_int_list

        notes: list[str] = warnings if warnings is not None else []
        if lengths is not None and (tokens is not None or batch != 1):
            raise BadInputError("--lengths replaces --tokens and --batch; give one or the other")
        if batch <= 0:
            raise BadInputError(f"--batch must be positive, got {batch}")
        if batch > MAX_BATCH:
            raise BadInputError(f"--batch {batch:,} is more than the {MAX_BATCH:,} requests "
                                "kvplan sizes at once")
        if block_size < 1 or block_size & (block_size - 1):
            # engines page in powers of two (vLLM 1..128, TRT-LLM tokens_per_block, SGLang
            # page_size); `plan` checks the engine's own list
            raise BadInputError(f"--block-size must be a power of two (1, 8, 16, ...), got "
                                f"{block_size}")
        spec = self.spec
        fmt = kv_format(kv_dtype, spec.dtype)
        # a batch is one length times a count, never a list as long as the batch
        if isinstance(lengths, str):
            runs: list[int] | dict[int, int] = parse_int_list(lengths, "--lengths")
        elif lengths is not None:
            runs = [n for n in (_tokens(x, "lengths") for x in lengths) if n is not None]
        else:
            runs = {spec.context_tokens(_tokens(tokens, "tokens")): batch}
        longest = max(runs)
        explicit_max = _tokens(max_len, "max_len")
        if spec.max_context_tokens and longest > spec.max_context_tokens \
                and explicit_max is None:
            notes.append(f"{longest:,} tokens is more than {spec.name}'s maximum context of "
                         f"{spec.max_context_tokens:,}")
            explicit_max = longest
        if tokens is None and lengths is None and not spec.max_context_tokens:
            notes.append(f"{spec.name} has no known maximum context; sized at 8,192 tokens")
        return size(spec, fmt, lengths=runs, tp=tp, pp=pp, block_size=block_size,
                    max_len=explicit_max)


def model(ref: str | Path | ModelSpec | Model, *,
          assume_standard_attention: bool = False) -> Model:
    """A model by library name (`llama-3.1-8b`), YAML spec or config.json path,
    `hf:org/name[@revision]`, or an existing ModelSpec. assume_standard_attention: read a
    config.json kvplan would refuse as standard attention (`spec.warnings` say so)."""
    if isinstance(ref, Model):
        return ref
    if isinstance(ref, (str, Path)):
        from kvplan.sources.library import resolve

        return Model(resolve(str(ref), assume_standard_attention))
    return Model(ref)


@record
class Deployed:
    """A model served by one engine on some GPUs: the capacity questions `kvplan plan` asks.

    `deployment` holds every setting; `capacity` (computed once, on first use) is the
    engine's view: its budget, its start-up numbers and its pools."""

    deployment: Deployment

    @cached_property
    def start(self) -> Start:
        """Whether the engine starts at all, why not, and one GPU's budget terms
        (kvplan.planning.verdict.engine_start: the verdict `plan` and `check` give)."""
        from kvplan.planning.verdict import engine_start

        return engine_start(self.deployment)

    @cached_property
    def capacity(self) -> Capacity:
        """The engine's capacity for this deployment (budget, start-up numbers, pools);
        NoKVMemoryError when the weights leave nothing for the KV cache."""
        if self.start.capacity is not None:
            return self.start.capacity
        from kvplan.planning.plan import capacity

        return capacity(self.deployment)  # raises the budget's own error

    def verdict(self, context: Tokens | None = None, concurrency: int | None = None,
                requests: str | Workload | None = None) -> Verdict:
        """Does it serve the target: `fits` (the engine starts and `concurrency` requests of
        `context` tokens, or the mix of `requests`, fit at once; without a target one request
        of max_model_len), `engine_starts`, and the `reason` when not. `kvplan plan` and
        `kvplan check` exit 1 exactly when `fits` is False."""
        from kvplan.planning.plan import Target
        from kvplan.planning.verdict import target_verdict

        target = Target(_tokens(context, "context"), concurrency,
                        workload(requests) if requests is not None else None)
        return target_verdict(self.start, target)

    def max_concurrency(self, context: Tokens | None = None) -> ConcurrencyResult:
        """How many requests of `context` tokens ("32k") fit at once (default: the engine's
        maximum length)."""
        from kvplan.planning.plan import max_concurrency

        tokens = _tokens(context, "context") or self.deployment.context_limit()
        return max_concurrency(self.capacity, tokens)

    def max_context(self, concurrency: int) -> ContextResult:
        """The longest request such that `concurrency` of them fit at once."""
        from kvplan.planning.plan import max_context

        return max_context(self.capacity, concurrency)

    def fits(self, requests: str | Workload, shared_prefix: Tokens = 0,
             samples: int = 1) -> WorkloadResult:
        """Whether a mix of requests fits at once: "64x(2k+512),8x(32k+1k)" (count x
        (prompt + output)), a .jsonl/.csv file of lengths, or a parsed Workload. The result's
        `fits` says yes or no; `max_scale` how many times over the mix would fit."""
        from kvplan.planning.plan import check_workload

        return check_workload(self.capacity, workload(requests, shared_prefix, samples))

    def fewest_gpus(self, context: Tokens | None = None, concurrency: int | None = None,
                    requests: str | Workload | None = None,
                    max_gpus: int = 64) -> LayoutResult:
        """The fewest GPUs of this kind (and their TP x PP split) that meet a target:
        `concurrency` requests of `context` tokens, or a mix of `requests`."""
        from kvplan.core.errors import BadInputError
        from kvplan.planning.plan import Target, fewest_gpus

        target = Target(_tokens(context, "context"), concurrency,
                        workload(requests) if requests is not None else None)
        if target.context_tokens is None and target.workload is None and \
                target.concurrency is None:
            raise BadInputError("--find-gpus needs a target",
                                "give --context and/or --concurrency, or --requests")
        return fewest_gpus(self.deployment, target, max_gpus)


    def traffic(self, rate: str | float | Fraction, requests: str | Workload, *,
                ttft: str | float | None = None, itl: str | float | None = None,
                efficiency: str | float | None = None, compute_dtype: str | None = None,
                shared_prefix: Tokens = 0, samples: int = 1,
                find_gpus: bool = False) -> TrafficPlan | TrafficLayouts:
        """Replicas of this deployment that `rate` requests/s ("5/s", 5) of `requests` (a
        mix, "2k+512", or a file) need by memory, bandwidth and compute, aggregated and split
        into prefill and decode pools, at `ttft` / `itl` targets ("500ms", 0.05 s): bounds
        (kvplan.planning.traffic). find_gpus: the same for replicas of each layout of 1, 2, 4
        and 8 GPUs, and the one that needs the fewest GPUs in all (TrafficLayouts)."""
        from kvplan.planning.traffic import parse_rate, parse_seconds, size_for_traffic

        def seconds(value: str | float | None, flag: str) -> Fraction | None:
            if value is None:
                return None
            return parse_seconds(value if isinstance(value, str) else repr(value), flag)

        share = Fraction(1, 2)
        if efficiency is not None:
            from kvplan.core.errors import BadInputError

            try:
                share = Fraction(str(efficiency).strip())
            except (ValueError, ZeroDivisionError):
                raise BadInputError(f"--efficiency must be a number in (0, 1], got "
                                    f"{efficiency!r}") from None
            if not 0 < share <= 1:
                raise BadInputError(f"--efficiency must be in (0, 1], got {efficiency!r}")
        per_s = parse_rate(rate if isinstance(rate, str) else str(Fraction(rate)))
        mix = workload(requests, shared_prefix, samples)
        if find_gpus:
            from kvplan.planning.traffic import fewest_gpus_for_traffic

            return fewest_gpus_for_traffic(self.deployment, mix, per_s, seconds(ttft, "--ttft"),
                                           seconds(itl, "--itl"), share, compute_dtype)
        return size_for_traffic(self.capacity, mix, per_s, seconds(ttft, "--ttft"),
                                seconds(itl, "--itl"), share, compute_dtype)


def workload(requests: str | Workload, shared_prefix: Tokens = 0, samples: int = 1) -> Workload:
    """A request mix: "64x(2k+512),8x(32k+1k)" or a .jsonl/.csv file, with an optional
    shared prefix (tokens every request shares) and parallel samples per request."""
    if not isinstance(requests, str):
        return requests
    from kvplan.sources.workload import parse_workload

    return parse_workload(requests, _tokens(shared_prefix, "shared_prefix") or 0, samples)


def as_dict(result: Any) -> dict[str, Any]:
    """Any result of the front door (a Model, SizeResult, Deployed, Capacity,
    ConcurrencyResult, ContextResult, WorkloadResult, Workload, LayoutResult, TrafficPlan,
    TrafficLayouts, KVFormat) as a dict json.dumps writes: its fields by name, exact ints as
    ints, Fractions as 'a/b' strings (the CLI's `-f json` convention), an engine by its name.
    A Deployed also gives its capacity and a Capacity the engine's start-up numbers."""
    from kvplan.core.record import plain
    from kvplan.engines.base import Capacity

    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        raise TypeError(f"as_dict takes a kvplan result, not {type(result).__name__}")
    out: dict[str, Any] = plain(result)
    if isinstance(result, Capacity):
        out["engine_numbers"] = plain(result.engine_numbers)
    elif isinstance(result, Deployed):
        out["capacity"] = as_dict(result.capacity)
    return out


def to_json(result: Any, indent: int | None = None) -> str:
    """as_dict(result) written as JSON text."""
    import json

    return json.dumps(as_dict(result), indent=indent)


def deploy(model_ref: str | Path | ModelSpec | Model, /, *, gpu: Any = None,
           count: int | None = None, engine: str | None = None, kv_dtype: str | KVFormat = "auto",
           assume_standard_attention: bool = False, **settings: Any) -> Deployed:
    """A model on GPUs under an engine: `deploy(m, gpu="h100", count=4, engine="vllm")`.

    gpu: a catalog name or GPU object (or gpu_memory="24GiB" for one not in the catalog);
    count / tp / pp / dp: GPUs and their split; kv_dtype: a name or KVFormat. Every other
    `kvplan plan` setting by its flag name: max_model_len="32k", kv_memory="57.65GiB",
    gpu_memory_utilization=0.9, weights_dtype="fp8", weights_memory, block_size, ...
    (kvplan.planning.deployment.deployment lists them)."""
    from kvplan.planning.deployment import deployment

    spec = model(model_ref, assume_standard_attention=assume_standard_attention).spec
    return Deployed(deployment(spec, gpu=gpu, count=count, engine=engine, kv_dtype=kv_dtype,
                               **settings))


__all__ = ["Deployed", "Model", "as_dict", "deploy", "kv_format", "model", "to_json",
           "workload"]
