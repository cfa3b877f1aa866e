"""`kvplan whatif`: cache policies, prefix reuse, prefill beside decode, offload tiers and
disaggregated serving, each beside the exact baseline (kvplan.planning.whatif)."""

# No `from __future__ import annotations` here: typer reads each command's signature four
# times as it starts, and an annotation kept as a string is compiled at every read (as in
# kvplan.cli.plan).

from fractions import Fraction
from typing import Annotated

import typer

from kvplan.cli.options import (
    DEFAULT_ENGINE,
    CountOpt,
    EngineOpt,
    EngineVersionOpt,
    FormatOpt,
    GpuMemoryOpt,
    GpuOpt,
    KVDtypeOpt,
    KVMemoryOpt,
    MaxModelLenOpt,
    ModelArg,
    PPOptional,
    TPOptional,
    UnitsOpt,
    UtilOpt,
    WeightsDtypeOpt,
    emit,
    handle_errors,
)


def _fraction(text: str | None, flag: str, default: Fraction) -> Fraction:

    from kvplan.core.units import parse_decimal

    if text is None:
        return default
    return parse_decimal(text, flag)


@handle_errors
def whatif(
    model: ModelArg,
    policy: Annotated[list[str] | None, typer.Option(
        "--policy", "-p", help="A cache policy beside the baseline (repeat for more rows): "
        "sinks+window:S,W  budget:N  snapkv:N[,window=W]  pyramid:N[,beta=B,window=W]  "
        "share:K  turboquant:B  kvtc:R[,sinks=S,window=W]  cachegen:R; join with & "
        "(share:2&budget:2048&turboquant:3).", show_default=False)] = None,
    tokens: Annotated[str | None, typer.Option(
        "--tokens", "-t", help="Tokens per request (all prompt). Default: 32k.",
        show_default=False)] = None,
    prompt: Annotated[str | None, typer.Option(
        "--prompt", help="Prompt tokens per request (with --output).", show_default=False)] = None,
    output: Annotated[str | None, typer.Option(
        "--output", help="Generated tokens per request.", show_default=False)] = None,
    kv_dtype: KVDtypeOpt = "auto",
    gpu: GpuOpt = None,
    count: CountOpt = None,
    tp: TPOptional = None,
    pp: PPOptional = None,
    engine: EngineOpt = DEFAULT_ENGINE,
    engine_version: EngineVersionOpt = None,
    max_model_len: MaxModelLenOpt = None,
    kv_memory: KVMemoryOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    gpu_memory_utilization: UtilOpt = None,
    weights_dtype: WeightsDtypeOpt = "auto",
    shared_prefix: Annotated[str | None, typer.Option(
        "--shared-prefix", help="Prefix reuse: tokens of a system prompt every request starts "
        "with.", show_default=False)] = None,
    hit_rate: Annotated[str | None, typer.Option(
        "--hit-rate", help="Share of requests that find the prefix cached (0.8 or 80%; "
        "default 1).", show_default=False)] = None,
    turns: Annotated[int | None, typer.Option(
        "--turns", help="Multi-turn reuse: a conversation of this many turns, each --prompt "
        "new tokens in and --output out; prefill computes what the prefix cache lacks.",
        show_default=False)] = None,
    prefill: Annotated[bool, typer.Option(
        "--prefill", help="Time to first token from FLOPs beside the decode floor.")] = False,
    efficiency: Annotated[str | None, typer.Option(
        "--efficiency", help="Share of the GPU's peak dense FLOP/s prefill reaches (default "
        "0.5).", show_default=False)] = None,
    compute_dtype: Annotated[str | None, typer.Option(
        "--compute-dtype", help="Math dtype for the peak: bf16, fp8, fp4 (default: fp8 for "
        "an FP8 checkpoint on a GPU with FP8 tensor cores, else bf16).",
        show_default=False)] = None,
    tflops: Annotated[str | None, typer.Option(
        "--tflops", help="Peak dense TFLOP/s per GPU, for a GPU the catalog has no figure for.",
        show_default=False)] = None,
    active_params: Annotated[str | None, typer.Option(
        "--active-params", help="Published active parameters of a MoE model, e.g. 37e9 or "
        "37000000000.", show_default=False)] = None,
    decode_batch: Annotated[int | None, typer.Option(
        "--decode-batch", help="Requests per decode step (default: as many as fit).",
        show_default=False)] = None,
    tier: Annotated[list[str] | None, typer.Option(
        "--tier", help="An offload tier NAME:SIZE@BANDWIDTH (repeat): host:512GiB@50GB/s, "
        "ssd:4TB@7GB/s.", show_default=False)] = None,
    link: Annotated[str | None, typer.Option(
        "--link", help="Plan disaggregated prefill/decode over this interconnect: nvlink4, "
        "nvlink5, ib-ndr, ib-hdr, roce-400, roce-200, eth-100, eth-25, pcie5, pcie4, or "
        "25GB/s.", show_default=False)] = None,
    decode_gpu: Annotated[str | None, typer.Option(
        "--decode-gpu", help="The decode pool's GPU (default: --gpu).", show_default=False)] = None,
    decode_count: Annotated[int | None, typer.Option(
        "--decode-count", help="GPUs per decode instance (default: --count).",
        show_default=False)] = None,
    decode_kv_dtype: Annotated[str | None, typer.Option(
        "--decode-kv-dtype", help="The decode pool's KV dtype (default: --kv-dtype).",
        show_default=False)] = None,
    fmt: FormatOpt = "table",
    units: UnitsOpt = "iec",
) -> None:
    """What-if planning beside the exact baseline: cache eviction and compression policies
    (StreamingLLM, H2O, SnapKV, PyramidKV, cross-layer sharing, TurboQuant, KVTC, CacheGen) in
    any KV format, prefix and multi-turn reuse, prefill time beside the decode floor, offload
    tiers, and disaggregated prefill/decode.
    These are what-ifs: the engine must implement the policy.

    Examples:

      kvplan whatif llama-3.1-8b --tokens 32k -p sinks+window:4,1020 -p budget:2048 --gpu h100

      kvplan whatif llama-3.1-8b --tokens 32k -p pyramid:512 --kv-dtype int2:g32:kivi:r128

      kvplan whatif llama-3.1-70b --gpu h100 -n 4 --prompt 2k --output 512 --shared-prefix 1k
      --hit-rate 0.9

      kvplan whatif deepseek-v3 --gpu h200 -n 8 --prompt 8k --output 1k --prefill --link ib-ndr

      kvplan whatif llama-3.1-8b --gpu h100 --tokens 32k --tier host:512GiB@50GB/s

      kvplan whatif gemma-2-9b --gpu h100 --prompt 1k --output 256 --turns 4 --prefill
    """
    from dataclasses import replace

    from kvplan.cli.options import tokens_flag
    from kvplan.core.errors import BadInputError
    from kvplan.core.units import MAX_BATCH, parse_tokens
    from kvplan.output.whatif import whatif_view
    from kvplan.planning.deployment import deployment, layout
    from kvplan.planning.policies import parse_policy
    from kvplan.planning.whatif import WhatIfQuestion, parse_tier, run

    if tokens is not None and (prompt is not None or output is not None):
        raise BadInputError("--tokens is the whole request; give it or --prompt/--output")
    if decode_batch is not None and not 1 <= decode_batch <= MAX_BATCH:
        raise BadInputError(f"--decode-batch must be between 1 and {MAX_BATCH:,} requests, "
                            f"got {decode_batch:,}", "or leave it out: as many as fit")
    prompt_tokens = parse_tokens(prompt if prompt is not None else tokens or "32k",
                                 "--prompt" if prompt is not None else "--tokens")
    output_tokens = tokens_flag(output, "--output") or 0
    dep = deployment(model, gpu=gpu, gpu_memory=gpu_memory, count=count, tp=tp, pp=pp,
                     engine=engine, engine_version=engine_version, kv_dtype=kv_dtype,
                     max_model_len=max_model_len, kv_memory=kv_memory,
                     gpu_memory_utilization=gpu_memory_utilization, weights_dtype=weights_dtype)
    decode = None
    if link is not None and (decode_gpu or decode_count or decode_kv_dtype):
        dtp, dpp = layout(decode_count) if decode_count else (dep.tp, dep.pp)
        base = deployment(dep.spec, gpu=decode_gpu or gpu, gpu_memory=gpu_memory, tp=dtp,
                          pp=dpp, engine=engine, engine_version=engine_version,
                          kv_dtype=decode_kv_dtype or kv_dtype,
                          max_model_len=dep.max_model_len,
                          gpu_memory_utilization=dep.memory_fraction,
                          weights_dtype=weights_dtype)
        decode = replace(base, spec=dep.spec)
    elif decode_gpu or decode_count or decode_kv_dtype:
        raise BadInputError("--decode-gpu, --decode-count and --decode-kv-dtype describe the "
                            "decode pool of a disaggregated plan", "add --link")
    active = None
    if active_params is not None:
        from kvplan.core.units import parse_decimal

        active = int(parse_decimal(active_params, "--active-params"))
    rate = _fraction(hit_rate, "--hit-rate", Fraction(1))
    if not 0 <= rate <= 1:
        raise BadInputError(f"--hit-rate must be between 0 and 1 (or 0% and 100%), got "
                            f"{hit_rate!r}")
    if hit_rate is not None and shared_prefix is None:
        raise BadInputError("--hit-rate is the share of requests that find --shared-prefix "
                            "cached", "add --shared-prefix")
    peak = _fraction(tflops, "--tflops", Fraction(0)) if tflops is not None else None
    if peak is not None and peak <= 0:
        raise BadInputError("--tflops must be positive")
    question = WhatIfQuestion(
        prompt_tokens=prompt_tokens, output_tokens=output_tokens,
        policies=tuple(parse_policy(p) for p in policy or ()),
        shared_prefix_tokens=tokens_flag(shared_prefix, "--shared-prefix"),
        hit_rate=rate, prefill=prefill,
        compute_dtype=compute_dtype, tflops=peak,
        efficiency=_fraction(efficiency, "--efficiency", Fraction(1, 2)),
        active_params=active, decode_batch=decode_batch,
        tiers=tuple(parse_tier(t) for t in tier or ()), link=link, decode=decode,
        turns=turns)
    emit(whatif_view(run(dep, question)), fmt, units)
