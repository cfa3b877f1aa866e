"""`kvplan plan`, registered in kvplan.cli.app (its options shared with other commands are
declared in kvplan.cli.options).

The command checks its flags, asks the front door (kvplan.api: deploy() and the Deployed
questions), and renders the View that kvplan.output.plan builds from the results.
Exit codes: 1 when a stated target is not met, 2 for bad input.
"""

# No `from __future__ import annotations` here: typer reads each command's signature four
# times as it starts (inspect.signature(eval_str=True) and get_type_hints, twice), and an
# annotation kept as a string is compiled at every read (~3 ms of `plan`'s start-up for its
# ~50 options). Names imported only for type checking are quoted instead.

from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli.options import (
    DEFAULT_ENGINE,
    AssumeStandardOpt,
    ConcurrencyOpt,
    ContextOpt,
    CountOpt,
    EngineOpt,
    EngineVersionOpt,
    FormatOpt,
    GpuMemoryOpt,
    GpuOpt,
    KVDtypeOpt,
    MaxModelLenOpt,
    PPOptional,
    TPOptional,
    UnitsOpt,
    WeightsDtypeOpt,
    emit,
    handle_errors,
    tokens_flag,
    warn,
)
from kvplan.cli.settings import engine_options, option

if TYPE_CHECKING:
    from kvplan.api import Deployed
    from kvplan.output.render import Table, View
    from kvplan.planning.plan import Target
    from kvplan.planning.verdict import Verdict

def _bytes(text: str | None) -> int | None:
    from kvplan.planning.deployment import memory

    return memory(text)


def _cache_types(kv_dtype: str, k: str | None, v: str | None) -> tuple[str, str | None]:
    """llama.cpp's -ctk/-ctv as kvplan's --kv-dtype (the K type) and the V type when it
    differs (None otherwise). Each flag alone leaves the other cache in f16, llama.cpp's
    default for both (common/common.h cache_type_k / cache_type_v)."""
    from kvplan.core.errors import BadInputError

    if k is None and v is None:
        return kv_dtype, None
    if kv_dtype != "auto":
        raise BadInputError(f"--kv-dtype {kv_dtype} and -ctk/-ctv {k or v} both name the "
                            "cache type; give one")
    key, value = k or "f16", v or "f16"
    return key, (value if value != key else None)


# --- the plan command ---------------------------------------------------------------------

@handle_errors
@engine_options(before="cache_type_k")
def plan(
    model: Annotated[str | None, typer.Argument(
        help="Library name (llama-3.1-8b), a YAML spec, a config.json / directory holding one, "
        "or a Hugging Face Hub repo: hf:org/name[@revision]. With --from-command it is where "
        "the command's model is read from (a local path in the command, a config here).",
        show_default=False)] = None,
    from_command: Annotated[str | None, typer.Option(
        "--from-command", help="The engine's launch command as you run it (vllm serve ..., "
        "python -m sglang.launch_server ..., llama-server ..., trtllm-serve ..., "
        "text-generation-launcher ..., OLLAMA_NUM_PARALLEL=4 ollama serve, or inside docker "
        "run ...); @FILE reads it (or a container's command:/args:) from a file. Its memory "
        "flags and variables set the deployment.",
        show_default=False)] = None,
    gpu: GpuOpt = None,
    count: CountOpt = None,
    tp: TPOptional = None,
    pp: PPOptional = None,
    engine: EngineOpt = DEFAULT_ENGINE,
    engine_version: EngineVersionOpt = None,
    max_model_len: MaxModelLenOpt = None,
    context: ContextOpt = None,
    concurrency: ConcurrencyOpt = None,
    requests: Annotated[str | None, typer.Option(
        "--requests", help="A mix like 64x(2k+512),8x(32k+1k), or a .jsonl/.csv file with "
        "prompt and output lengths per line.", show_default=False)] = None,
    shared_prefix: Annotated[str | None, typer.Option(
        "--shared-prefix", help="Tokens every request shares (whole blocks are cached once).",
        show_default=False)] = None,
    samples: Annotated[int, typer.Option(
        "--samples", help="Parallel samples per request (n), sharing the prompt.")] = 1,
    find_gpus: Annotated[bool, typer.Option(
        "--find-gpus", help="Find the fewest GPUs (and the TP x PP layout) meeting the "
        "target.")] = False,
    kv_dtype: KVDtypeOpt = "auto",
    gpu_memory: GpuMemoryOpt = None,
    weights_dtype: WeightsDtypeOpt = "auto",
    weights_memory: Annotated[str | None, typer.Option(
        "--weights-memory", help="The whole model's measured weight size (vLLM 'Model loading "
        "took').", show_default=False)] = None,
    dp: option("dp") = 1,  # type: ignore[valid-type]
    dcp: option("dcp") = 1,  # type: ignore[valid-type]
    cache_type_k: Annotated[str | None, typer.Option(
        "--cache-type-k", "-ctk", help="llama.cpp's K cache type (f16, q8_0, ...); V stays "
        "f16 unless -ctv says.", show_default=False)] = None,
    cache_type_v: Annotated[str | None, typer.Option(
        "--cache-type-v", "-ctv", help="llama.cpp's V cache type; K stays f16 unless -ctk "
        "says. A quantized V needs flash attention.", show_default=False)] = None,
    host_memory: Annotated[str | None, typer.Option(
        "--host-memory", help="Host memory per GPU for KV offload, e.g. 64GiB.",
        show_default=False)] = None,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Also print the inputs, the engine's log lines and the "
        "formulas under the tables.")] = False,
    fmt: FormatOpt = "table",
    units: UnitsOpt = "iec",
    assume_standard: AssumeStandardOpt = False,
    # --- sizing from traffic (kvplan.planning.traffic): one block, read by _traffic ---
    rate: Annotated[str | None, typer.Option(
        "--rate", help="Size for traffic: requests per second (5, 5/s, 300/min) of the "
        "--requests mix; gives replicas by memory, bandwidth and compute (bounds).",
        show_default=False)] = None,
    ttft: Annotated[str | None, typer.Option(
        "--ttft", help="With --rate: the time-to-first-token target (500ms, 2s).",
        show_default=False)] = None,
    itl: Annotated[str | None, typer.Option(
        "--itl", help="With --rate: the inter-token latency target (50ms).",
        show_default=False)] = None,
    efficiency: Annotated[str | None, typer.Option(
        "--efficiency", help="With --rate: the share of the dense peak prefill reaches "
        "(default 0.5).", show_default=False)] = None,
    settings: dict[str, Any] | None = None,
) -> None:
    """Capacity of one serving instance: what the engine will print, how many requests fit,
    how long they can be, whether a workload fits, and the fewest GPUs for a target.

    Exit 1 when the deployment does not fit (a stated target: --context with --concurrency,
    --requests, --find-gpus, --ttft/--itl with --rate; without one, a request of max_model_len)
    or the engine would not start; exit 2 for bad input.

    Examples:

      kvplan plan llama-3.1-8b --gpu h100 --context 32k

      kvplan plan llama-3.1-70b --gpu h100 --count 4 --concurrency 64

      kvplan plan qwen3-32b --gpu a100-80gb --requests "64x(2k+512),8x(32k+1k)"

      kvplan plan llama-3.1-8b --kv-memory 57.65GiB --max-model-len 131072

      kvplan plan deepseek-v3 --gpu h200 --context 128k --concurrency 32 --find-gpus

      kvplan plan deepseek-v3 --gpu h200 --count 8 --dp 8 --enable-expert-parallel

      kvplan plan deepseek-v3 --gpu h200 --tp 8 --dcp 8 --context 128k

      kvplan plan llama-3.1-70b --gpu h100 -n 4 --rate 20 --requests 2k+256 --ttft 1s --itl 40ms
    """

    from kvplan.api import deploy
    from kvplan.core.errors import BadInputError, UnavailableError, UnknownModelError
    from kvplan.engines.registry import get as get_engine

    engine_given = settings or {}
    overrides: dict[str, Any] = {}
    launch_warnings: list[str] = []
    model_given = model is not None
    if from_command is not None:
        from kvplan.planning.launch import from_command as read_command

        launched = read_command(_command_text(from_command), model)
        model, engine, overrides = launched.model, launched.engine, launched.overrides
        launch_warnings = list(launched.warnings)
        # the command's settings, beside the flags that set the same things
        _given_once(overrides, {
            "tp": tp, "pp": pp, "kv_dtype": None if kv_dtype == "auto" else kv_dtype,
            "max_model_len": max_model_len, "dp": dp if dp != 1 else None,
            "dcp": dcp if dcp != 1 else None}, engine_given)
    elif model is None:
        raise BadInputError("MODEL is missing", "give a model, or --from-command \"vllm serve "
                            "MODEL ...\"")
    get_engine(engine)  # an unknown --engine is an error naming the registered engines
    if requests is not None and (context is not None or concurrency is not None):
        raise BadInputError("--requests replaces --context and --concurrency; give one or "
                            "the other")
    if samples < 1:
        raise BadInputError(f"--samples must be at least 1, got {samples}")
    kv_dtype, kv_dtype_v = _cache_types(kv_dtype, cache_type_k, cache_type_v)
    given = dict(
        gpu=gpu, gpu_memory=gpu_memory, count=count, tp=tp, pp=pp, engine=engine,
        engine_version=engine_version, kv_dtype=kv_dtype, max_model_len=max_model_len,
        weights_dtype=weights_dtype, weights_memory=weights_memory, dp=dp, dcp=dcp,
        assume_standard_attention=assume_standard, **engine_given,
        **({"kv_dtype_v": kv_dtype_v} if kv_dtype_v is not None else {}))
    # the command's settings go through the same builder (and its checks) as the flags; a
    # setting given both ways was refused above
    given.update(overrides)
    try:
        d = deploy(model, **given)
    except (UnknownModelError, UnavailableError) as exc:
        if from_command is not None and not model_given:
            # the model as the line names it: say how to give it another way
            exc.hint = (f"{exc.hint}; or " if exc.hint else "") + "give the model as MODEL " \
                "beside --from-command (a library name, a config.json or its directory)"
        raise
    warn(d.deployment.spec.warnings)  # --assume-standard-attention's assumptions
    if rate is not None or ttft is not None or itl is not None or efficiency is not None:
        return _traffic(d, rate, requests, shared_prefix, samples, ttft, itl, efficiency,
                        find_gpus, context is not None or concurrency is not None, fmt, units,
                        verbose)
    question = _Question(tokens_flag(context, "--context"), concurrency, requests,
                         tokens_flag(shared_prefix, "--shared-prefix") or 0, samples, find_gpus,
                         _bytes(host_memory))
    report, verdict, hint = question.answer(d)
    report.warnings[:0] = launch_warnings
    emit(report, fmt, units, verbose)
    _exit(verdict, d.deployment.engine, hint)


def _exit(verdict: "Verdict", engine: str, hint: str = "") -> None:
    """Exit 1 when the engine would not start or the target does not fit (as `check`)."""
    from kvplan.engines.registry import get as get_engine

    if not verdict.engine_starts:
        label = get_engine(engine).display_name or engine
        typer.echo(f"kvplan: error: {label} would not start: {verdict.reason}", err=True)
        if hint:
            typer.echo(f"  hint: {hint}", err=True)
        raise typer.Exit(1)
    if not verdict.fits:
        typer.echo("kvplan: the target is not met (exit 1)", err=True)
        raise typer.Exit(1)


def _given_once(overrides: dict[str, Any], common: dict[str, Any],
                engine_given: dict[str, Any]) -> None:
    """A setting given both as a flag and in --from-command is a usage error (the command's
    value would silently win). `common`: the common settings' values by row name (None: not
    given); `engine_given`: the engine settings given as flags, by row name."""
    from kvplan.core.errors import BadInputError
    from kvplan.engines.settings import BY_NAME

    both = [BY_NAME[name].flag for name, value in common.items()
            if BY_NAME[name].field_name in overrides and value is not None]
    both += [BY_NAME[name].flag for name in engine_given
             if BY_NAME[name].field_name in overrides]
    if both:
        raise BadInputError(f"{', '.join(both)} given both as a flag and in --from-command",
                            "give each setting once: in the command, or as a flag")


def _command_text(value: str) -> str:
    """--from-command's text: as given, or read from the file after @."""
    if not value.startswith("@"):
        return value
    from kvplan.sources.reader import read_text

    return read_text(value[1:], "the launch command file")


class _Question:
    """The flags that pick the question; `answer` calls the core and builds the View."""

    def __init__(self, context: int | None, concurrency: int | None, requests: str | None,
                 shared_prefix: int, samples: int, find_gpus: bool, host: int | None):
        self.context, self.concurrency, self.requests = context, concurrency, requests
        self.shared_prefix, self.samples, self.find_gpus, self.host = (
            shared_prefix, samples, find_gpus, host)

    def target(self) -> "Target":
        from kvplan.planning.plan import Target

        workload = None
        if self.requests is not None:  # the workload reader is imported only to read one
            from kvplan.sources.workload import parse_workload

            workload = parse_workload(self.requests, self.shared_prefix, self.samples)
        return Target(self.context, self.concurrency, workload)

    def answer(self, d: "Deployed") -> "tuple[View, Verdict, str]":
        """The View, the verdict (kvplan.planning.verdict) and a hint when it does not start."""
        from kvplan.api import Deployed
        from kvplan.output.plan import layout_table, name_value_table, plan_view, refused_view
        from kvplan.planning import plan as core
        from kvplan.planning.verdict import Verdict, target_verdict

        target = self.target()
        warnings: list[str] = []
        extra: list[Table] = []
        layout = None
        if self.find_gpus:
            layout = d.fewest_gpus(target.context_tokens, target.concurrency, target.workload)
            extra.append(layout_table(layout))
            shown = layout.best or layout.closest
            if shown is None:
                from kvplan.core.errors import TargetNotMetError

                raise TargetNotMetError(
                    f"no layout of up to {layout.options[-1].num_gpus} GPUs meets "
                    f"{layout.target}: {layout.options[-1].error}",
                    "a larger GPU (--gpu), a smaller weight or KV format, or a shorter "
                    "--max-model-len")
            if layout.best is None:
                warnings.append(
                    f"no layout of up to {shown.num_gpus} GPUs meets {layout.target}; the "
                    f"figures below are for the largest one tried (TP {shown.tp} x PP "
                    f"{shown.pp})")
            from dataclasses import replace

            d = Deployed(replace(d.deployment, tp=shown.tp, pp=shown.pp, dp=shown.dp,
                                 dcp=shown.dcp))
        start = d.start
        verdict = target_verdict(start, target)
        if start.capacity is None:  # nothing to measure: the reason and the budget terms
            return refused_view(d.deployment, start, extra, warnings), verdict, start.hint
        cap = start.capacity
        answer, met = self._ask(d, target, extra)
        if layout is not None:
            answer = {"fewest_gpus": layout.best.num_gpus if layout.best else None,
                      "tp": layout.best.tp if layout.best else None,
                      "pp": layout.best.pp if layout.best else None, **answer}
            met = met if layout.best is not None else False
        if met is False and verdict.fits:
            verdict = Verdict(False, True, f"no layout of up to {layout.options[-1].num_gpus} "
                              f"GPUs meets {layout.target}" if layout is not None else
                              "the target is not met")
        if met is False:
            tips = core.suggestions(cap, target)
            extra.append(name_value_table("What fits instead", {
                "max_context_at_concurrency": tips.max_context_at_concurrency,
                "max_concurrency_at_context": tips.max_concurrency_at_context,
                "kv_dtype_that_fits": tips.kv_dtype_that_fits}))
        return (plan_view(cap, answer, met, extra, warnings, start, verdict), verdict,
                start.hint)

    def _ask(self, d: "Deployed", target: "Target", extra: "list[Table]"
             ) -> tuple[dict[str, Any], bool | None]:
        from kvplan.output.plan import name_value_table, uses_table
        from kvplan.planning import plan as core

        cap = d.capacity
        answer: dict[str, Any] = {}
        met: bool | None = None
        batch, ctx = None, None
        if target.workload is not None:
            result = d.fits(target.workload)
            answer = {"requests": result.num_requests, "sequences": result.num_sequences,
                      "longest_tokens": result.longest_tokens, "fits": result.fits,
                      "headroom_factor": float(result.max_scale), "reason": result.reason}
            extra.append(uses_table(result))
            met = result.fits
            batch, ctx = result.num_sequences, result.longest_tokens
        elif target.context_tokens is not None:
            c = d.max_concurrency(target.context_tokens)
            answer = {"context_tokens": c.context_tokens, "max_concurrency": c.max_requests,
                      "limited_by": c.limited_by, "engine_concurrency": c.engine_concurrency,
                      "units_per_request": list(c.units_per_request)}
            want = target.concurrency or 1
            met = c.max_requests >= want
            if target.concurrency is not None:
                answer["target_concurrency"] = target.concurrency
            batch, ctx = (target.concurrency or c.max_requests), target.context_tokens
        elif target.concurrency is not None:
            r = d.max_context(target.concurrency)
            answer = {"concurrency": r.concurrency, "max_context_tokens": r.max_context_tokens,
                      "limited_by": r.limited_by}
            met = r.max_context_tokens > 0
            batch, ctx = target.concurrency, r.max_context_tokens
        else:
            limit = cap.deployment.context_limit()
            c = d.max_concurrency(limit)
            answer = {"context_tokens": limit, "max_concurrency": c.max_requests,
                      "limited_by": c.limited_by}
            batch, ctx = c.max_requests, limit
        if batch and ctx and cap.deployment.gpu_bandwidth_bytes_per_s:
            floor = core.decode_floor(cap, batch, ctx)
            host = {"host_weights_bytes_not_timed": floor.host_weights_bytes} \
                if floor.host_weights_bytes else {}
            extra.append(name_value_table(
                f"Decode floor (memory-bound, batch {batch}, {ctx:,} tokens"
                + (", the GPUs' reads alone: weights in host memory not timed" if host else "")
                + ")", {
                "weights_read_bytes_per_gpu": floor.weights_read_bytes_per_gpu,
                "kv_bytes_per_gpu": floor.kv_bytes_per_gpu,
                "bytes_per_step": floor.bytes_per_step,
                "ms_per_token": round(floor.ms_per_token, 3),
                "tokens_per_s": round(floor.tokens_per_s, 1), **host}))
        if self.host:
            o = core.offload_capacity(cap, self.host, ctx)
            extra.append(name_value_table("KV offload to host memory (per GPU)", asdict(o)))
        return answer, met


def _traffic(d: "Deployed", rate: str | None, requests: str | None, shared_prefix: str | None,
             samples: int, ttft: str | None, itl: str | None, efficiency: str | None,
             find_gpus: bool, other_target: bool, fmt: str, units: str, verbose: bool) -> None:
    """`plan --rate`: replicas for a request rate (kvplan.planning.traffic); with --find-gpus,
    for each layout of 1-8 GPUs, and the one needing the fewest GPUs."""
    from kvplan.core.errors import BadInputError, TargetNotMetError
    from kvplan.output.traffic import traffic_view
    from kvplan.planning.traffic import TrafficLayouts

    if rate is None:
        raise BadInputError("--ttft, --itl and --efficiency size a deployment for traffic",
                            "add --rate (requests per second) and --requests")
    if requests is None:
        raise BadInputError("--rate needs the requests' lengths",
                            "add --requests 2k+512 (prompt + output), a mix such as "
                            "\"3x(2k+512),1x(8k+1k)\", or a .jsonl/.csv file")
    if other_target:
        raise BadInputError("--rate sizes replicas for traffic; --context and --concurrency "
                            "ask other questions", "give them in another run")
    result = d.traffic(rate, requests, ttft=ttft, itl=itl, efficiency=efficiency,
                       shared_prefix=tokens_flag(shared_prefix, "--shared-prefix") or 0,
                       samples=samples, find_gpus=find_gpus)
    dep = d.deployment
    layouts = None
    if isinstance(result, TrafficLayouts):
        layouts = result
        if result.best is None or result.best.plan is None:
            why = "; ".join(sorted({o.error for o in result.options if o.error})) or "none fit"
            raise TargetNotMetError(f"no layout of 1 to 8 {dep.gpu_name} GPUs per replica can "
                                    f"meet the targets: {why}",
                                    "relax --ttft / --itl, or a faster GPU")
        best = result.best
        assert best.plan is not None
        plan, where = best.plan, f"TP {best.tp} x PP {best.pp} on {dep.gpu_name}, {dep.engine}"
    else:
        plan, where = result, f"{dep.tp * dep.pp}x {dep.gpu_name}, {dep.engine}"
    view = traffic_view(plan, where, layouts)
    emit(view, fmt, units, verbose)
    if plan.infeasible:
        typer.echo("kvplan: the latency targets are not met (exit 1)", err=True)
        raise typer.Exit(1)
