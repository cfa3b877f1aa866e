"""vLLM's "Available KV cache memory": the memory it lets itself use less what the profile
run measured.

    total x gpu_memory_utilization - weights - activation peak - non-torch
    (- CUDA graphs from 0.20, unless --enforce-eager)

`gpu_worker.py::determine_available_memory` (0.11: one float, `int` at the end; 0.33:
`ceil(total x util) - ...`). The weights are what `memory_allocated` counts after the load
(kvplan.engines.shared.loading); the activation peak, non-torch memory and CUDA graphs are
kvplan.engines.vllm.memory's model of the profile run, each term citing the vLLM source it
follows; docs/engine-accuracy.md compares the result with vLLM's logs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kvplan.core.errors import BadInputError
from kvplan.core.sizing import pp_stages
from kvplan.core.spec import ModelSpec, VisionTower
from kvplan.engines.shared.activations import profile_shapes
from kvplan.engines.shared.budget import SCHEMA, Budget, check_positive
from kvplan.engines.shared.device import compute_capability
from kvplan.engines.shared.loading import loaded_weights
from kvplan.engines.shared.releases import release
from kvplan.engines.shared.weights import (
    ModelDims,
    WeightFormat,
    as_weight_format,
    from_inventory,
    load_name,
    stage_weights,
)
from kvplan.engines.vllm import memory as vp
from kvplan.engines.vllm.backends import mxfp4_expert_load
from kvplan.engines.vllm.config import (
    INTEGRATED_CAPABILITIES,
    LATEST,
    default_gpu_memory_utilization,
    rules_for,
    unified_memory_note,
)
from kvplan.engines.vllm.mm_profile import (
    OMNI_KINDS,
    MmItemProfile,
    deepstack_buffer_bytes,
    encoder_profile_note,
    omni_profile_note,
    qwen3_vl_profile,
    qwen3_vl_profile_note,
    unmodelled_towers,
)


def vllm_budget(spec: ModelSpec, gpu_memory_bytes: int, *, version: tuple[int, ...] | None = None,
                tp: int = 1, pp: int = 1, gpu_memory_utilization: float | None = None,
                weights: str | WeightFormat = "auto", weights_bytes: int | None = None,
                extra_weights_bytes: int = 0, activation_bytes: int | None = None,
                non_torch_bytes: int | None = None, cudagraph_bytes: int | None = None,
                max_num_batched_tokens: int | None = None, max_num_seqs: int | None = None,
                dims: ModelDims | None = None, gpu_name: str | None = None,
                max_model_len: int | None = None, enforce_eager: bool = False,
                enable_chunked_prefill: bool | None = None, usage: str = "server",
                flashinfer_sampler: bool = False,
                stage_weights_bytes: Sequence[int] | None = None, gpu_arch: str = "",
                mxfp4_backend: str | None = None,
                ep: int = 1, dp: int = 1, num_draft_layers: int = 0,
                num_speculative_tokens: int = 0, pp_layers: Sequence[int] | None = None,
                stage_gpu_memory_bytes: Sequence[int] | None = None, cpu_offload_bytes: int = 0,
                v1: bool | None = None, mm_limits: str | None = None,
                pooling: bool = False, max_loras: int = 0,
                max_lora_rank: int = vp.DEFAULT_MAX_LORA_RANK, nvswitch_hopper: bool = False,
                check: bool = True) -> Budget:
    """vLLM's "Available KV cache memory" per stage (gpu_worker.determine_available_memory):
    `total x gpu_memory_utilization - (weights + activation peak + non-torch)` (0.11: one float,
    `int` at the end; 0.33: `ceil(total x util) - ...`), minus the CUDA-graph estimate from
    0.20 (not with enforce_eager). The reserves are kvplan.engines.vllm.memory's model of the
    profile run unless given. With unequal stages (`pp_layers`, `stage_gpu_memory_bytes`) each
    worker requests its own GPU x utilization and the engine takes the fewest blocks over the
    workers (v1/core/kv_cache_utils.get_kv_cache_configs). `check=False` returns a budget at or
    below zero instead of raising (vLLM logs such a value before it refuses to start). `v1`:
    VLLM_USE_V1 where set (0.7's opt-in V1: config.V1_OPT_IN). `mm_limits`: --limit-mm-per-prompt
    as kvplan.engines.settings.parse_mm_limits holds it (`text_only_towers`). `pooling`: a
    pooling model (vLLM's runner "pooling"), whose profile runs a pooler and no sampler.
    `max_loras`: --enable-lora's adapter slots (0: LoRA off), of rank `max_lora_rank`, counted
    with the weights (`lora_weights`); `nvswitch_hopper`: Deployment.nvswitch_hopper. Every
    parameter, with the vLLM source it follows: docs/engine-kv-sizing.md §7.9."""

    ver = version or LATEST
    spec, profiled_vision, mm_notes = text_only_towers(spec, mm_limits, ver)
    util = gpu_memory_utilization if gpu_memory_utilization is not None else \
        default_gpu_memory_utilization(ver)
    if not 0 < util <= 1:
        raise BadInputError(f"--gpu-memory-utilization must be in (0, 1], got {util}")
    summed = False  # the weights summed from the tensor inventory
    if stage_weights_bytes is not None:
        per_stage, weights_how = list(stage_weights_bytes), "given per stage"
    else:
        expert_load = mxfp4_expert_load(gpu_arch, mxfp4_backend,
                                        rules_for(ver).triton_kernels_installed)
        # a class that builds its embedding and LM head on every stage (not for a measured
        # total, which already holds what the stages hold)
        ends = pp > 1 and weights_bytes is None and spec.traits.vllm_pp_every_stage_ends
        stages, weights_how = stage_weights(spec, weights, weights_bytes, tp, pp, dims, ep=ep,
                                            expert_load=expert_load, partition=pp_layers,
                                            every_stage_ends=ends)
        per_stage = list(stages)
        summed = from_inventory(weights_how)
        if summed:
            # what vLLM subtracts: the weights as memory_allocated counts them (allocator
            # blocks, rotary caches), not the tensors' own bytes
            per_stage = list(loaded_weights(spec, load_name(spec, weights), tp, pp, ep,
                                            expert_load, partition=pp_layers,
                                            every_stage_ends=ends,
                                            mrope_factor=rules_for(ver).mrope_cache_factor))
            weights_how += ", with vLLM's rotary caches and the allocator's rounding"
        if ends:
            weights_how += ("; vLLM's model class for it builds the embedding, final norm and "
                            "LM head on every pipeline stage")
    if not extra_weights_bytes and num_draft_layers:
        extra_weights_bytes = vp.eagle_draft_bytes(spec, num_draft_layers) or 0
    per_stage[-1] += extra_weights_bytes // tp  # draft model on the last stage
    lora_notes = lora_weights(spec, per_stage, tp, pp, pp_layers, max_loras, max_lora_rank)
    offloaded = offloaded_weights(spec, weights, weights_bytes, dims, tp, pp, per_stage,
                                  cpu_offload_bytes)
    per_stage = [w - o for w, o in zip(per_stage, offloaded, strict=True)]
    batch = vp.batch_settings(ver, gpu_memory_bytes, gpu_name,
                              spec.context_tokens(max_model_len), usage=usage,
                              max_num_batched_tokens=max_num_batched_tokens,
                              max_num_seqs=max_num_seqs,
                              enable_chunked_prefill=enable_chunked_prefill, v1=v1,
                              spec=spec)
    shapes = profile_shapes(spec, dims)
    mm, mm_buffers, mm_note = multimodal_profile(spec, profiled_vision, mm_limits, ver, batch,
                                                 spec.context_tokens(max_model_len), v1)
    if summed and mm_buffers:
        # allocated in the model's __init__, on every rank: inside the load vLLM measures
        per_stage = [w + mm_buffers for w in per_stage]
    if activation_bytes is not None:
        acts = [activation_bytes] * pp
    else:
        fmt = as_weight_format(spec, weights)
        # W8A8 fp8 experts quantize their input (fused_experts_impl, use_fp8_w8a8)
        fp8_moe = fmt.name == "fp8" or (weights == "auto" and spec.quantization.method == "fp8")
        gptq = fmt.name == "gptq" or (weights == "auto" and spec.quantization.method == "gptq")
        gptq_exllama = gptq and vp.runs_gptq_exllama(ver, compute_capability(gpu_arch))
        acts = [vp.activation_peak(shapes, batch, ver, tp=tp, ep=ep, dp=max(1, ep // tp),
                                   last_stage=i == pp - 1,
                                   flashinfer_sampler=flashinfer_sampler, fp8_moe=fp8_moe,
                                   vision=profiled_vision, v1=v1,
                                   v2_runner=vp.uses_v2_runner(spec, ver, v1),
                                   mm_held_bytes=mm.held_bytes if mm else 0,
                                   pooling=pooling, gptq_exllama=gptq_exllama).peak_bytes
                for i in range(pp)]
    data_parallel = max(dp, ep // tp)
    non_torch = vp.non_torch_bytes(ver, tp, pp, data_parallel, bool(spec.num_experts), v1,
                                   nvswitch_hopper=nvswitch_hopper) \
        if non_torch_bytes is None else non_torch_bytes
    if not vp.subtracts_cudagraphs(ver, enforce_eager):
        graphs = 0  # even when given: this version or mode does not subtract them
    elif cudagraph_bytes is not None:
        graphs = cudagraph_bytes
    else:
        capability = compute_capability(gpu_arch)
        graphs = vp.cudagraph_bytes(shapes, batch, ver, tp=tp, num_layers=max(
            b - a for a, b in pp_stages(spec.num_layers, pp, pp_layers)),
            blackwell=capability is not None and capability[0] == 10,
            num_speculative_tokens=num_speculative_tokens)
    totals = list(stage_gpu_memory_bytes) if stage_gpu_memory_bytes else [gpu_memory_bytes] * pp
    if len(totals) != pp:
        raise BadInputError(f"{len(totals)} GPUs given for {pp} pipeline stages",
                            "give one GPU per stage (--gpu a,b with --pp 2)")
    requested = [total * util for total in totals]  # 0.11 keeps the float until the int()
    ceil = rules_for(ver).ceil_requested_memory  # 0.33 request_memory: ceil
    requested_ints = [math.ceil(r) if ceil else int(r) for r in requested]
    bases = requested_ints if ceil else requested
    available = tuple(int(base - (w + a + non_torch) - graphs)
                      for base, w, a in zip(bases, per_stage, acts, strict=True))
    # one GPU and request for the Budget's totals: the stage left with the least
    worst = min(range(pp), key=lambda i: available[i])
    requested_int = requested_ints[worst]
    if check:
        check_positive("vLLM", available, totals[worst], per_stage,
                        "use more GPUs (--tp/--pp), a smaller weight format, a larger "
                        "--gpu-memory-utilization, or give --kv-memory as vLLM logged it")
    notes = [f"gpu_memory_utilization {util} ({'given' if gpu_memory_utilization else 'default'} "
             f"for vLLM {'.'.join(map(str, ver))})",
             f"weights: {weights_how}",
             f"activations: {'given' if activation_bytes is not None else 'estimated'} "
             f"({batch.engine} profile batch: max_num_batched_tokens "
             f"{batch.max_num_batched_tokens:,}, max_num_seqs {batch.max_num_seqs:,}, chunked "
             f"prefill {'on' if batch.chunked_prefill else 'off'})"]
    if pooling:
        notes.append("pooling model (runner pooling): the profile runs the pooler over the "
                     "dummy batch's hidden states, no logits and no sampler "
                     "(gpu_model_runner.py _dummy_pooler_run)")
    elif rules_for(ver, v1).profile_logits_all_tokens:
        notes.append(f"VLLM_USE_V1=1: vLLM {'.'.join(map(str, ver))}'s opt-in V1 engine: the "
                     "profile computes the logits of every dummy token (no sampler warm-up) "
                     "and counts non-torch memory absolutely")
    if stage_gpu_memory_bytes:
        notes.append("a GPU per stage: " + ", ".join(
            f"stage {i} {total:,} B x {util} = {req:,} B" for i, (total, req)
            in enumerate(zip(totals, requested_ints, strict=True))) + f"; stage {worst}'s shown")
    if pp_layers:
        notes.append(f"layers per stage {'+'.join(map(str, pp_layers))} "
                     "(VLLM_PP_LAYER_PARTITION)")
    if cpu_offload_bytes:
        notes.append(f"--cpu-offload-gb: {max(offloaded):,} bytes of decoder-layer weights per "
                     "GPU in CPU memory (read over UVA), not counted in the weights above; vLLM "
                     "offloads whole parameters, so up to one parameter more")
    if graphs:
        notes.append(f"CUDA graphs: {'given' if cudagraph_bytes is not None else 'estimated'},"
                     " subtracted from vLLM 0.20 (--enforce-eager: none)")
    notes.extend(mm_notes)
    notes.extend(lora_notes)
    encoder = vp.encoder_profile(profiled_vision, shapes.hidden_size, batch, ver, tp, v1) \
        if activation_bytes is None else None
    if encoder is not None:
        notes.append(f"VLM encoder profile: {encoder.num_items:,} dummy images of "
                     f"{encoder.tokens_per_item:,} embeddings (encoder pass "
                     f"{encoder.pass_bytes:,} B; their {encoder.cache_bytes:,} B of embeddings "
                     "held through the forward and sampler)")
    if activation_bytes is None and mm is not None:
        notes.append(f"VLM encoder profile: {mm.num_items:,} dummy {mm.modality} item(s) of "
                     f"{mm.tokens_per_item:,} tokens ({mm.soft_tokens_per_item:,} embeddings); "
                     f"held through the forward: the encoder cache {mm.cache_bytes:,} B, the "
                     f"encoder output {mm.output_bytes:,} B, the pixel values "
                     f"{mm.pixel_bytes:,} B (the encoder pass's own peak not modelled)")
    if summed and mm_buffers:
        notes.append(f"weights: with the model's deepstack input buffers ({mm_buffers:,} B, "
                     "allocated at load)")
    if mm_note and activation_bytes is None:
        notes.append(mm_note)
    if shapes.estimated and activation_bytes is None:
        notes.append("model dimensions estimated from the spec (hidden = heads x head_dim)")
    if compute_capability(gpu_arch) in INTEGRATED_CAPABILITIES and non_torch_bytes is None:
        notes.append(unified_memory_note(ver))
    return Budget(SCHEMA, "vllm", ".".join(map(str, ver)), "estimated", totals[worst], util,
                  requested_int, tuple(per_stage), tuple(acts), non_torch, graphs,
                  available, tuple(notes), max_num_seqs=batch.max_num_seqs,
                  max_num_batched_tokens=batch.max_num_batched_tokens,
                  offloaded_weights_bytes=tuple(offloaded) if any(offloaded) else ())


def multimodal_profile(spec: ModelSpec, profiled: VisionTower | None, mm_limits: str | None,
                       version: tuple[int, ...], batch: vp.BatchSettings, max_model_len: int,
                       v1: bool | None = None
                       ) -> tuple[MmItemProfile | None, int, str | None]:
    """A model-specific multimodal profile (kvplan.engines.vllm.mm_profile: Qwen3-VL): the
    items V1's profile run encodes and what they hold, the buffers the model allocates at
    load, and a note naming what is not modelled (an Omni thinker's profile, whatever its
    items: mm_profile.omni_profile_note; any other tower whose encoder pass neither this nor
    memory.encoder_profile models: mm_profile.encoder_profile_note); (None, 0, None) for a
    text-only model or run."""
    from kvplan.engines.settings import MM_DEFAULT_LIMIT
    from kvplan.engines.settings import mm_limits as held_limits

    held = held_limits(mm_limits)
    omni = next((t.kind for t in (profiled, spec.audio_encoder)
                 if t is not None and t.kind in OMNI_KINDS), None)
    if omni is not None:  # unless every modality is 0 (text-only: no encoder profiled)
        text_only = release(version) >= vp.TEXT_ONLY_FROM and vp.text_only(spec, held)
        return None, 0, None if text_only else omni_profile_note(omni, version)
    v1_run = vp.is_v1(version, v1)
    if profiled is None or profiled.kind != "qwen3_vl" or not v1_run:
        uncounted_off = not any(held.get(m, MM_DEFAULT_LIMIT) for m in vp.IMAGE_VIDEO)
        if release(version) >= vp.TEXT_ONLY_FROM and (
                vp.text_only(spec, held) or (profiled is None and uncounted_off)):
            return None, 0, None
        # memory.encoder_profile models the towers whose tokens per item it knows
        modelled = profiled is not None and vp.mm_tokens_per_item(profiled) is not None
        towers = unmodelled_towers(spec, profiled, v1_run, modelled)
        return None, 0, encoder_profile_note(towers, version, v1_run)
    video = held.get("video", MM_DEFAULT_LIMIT)
    mm = qwen3_vl_profile(profiled, max_model_len, batch.max_num_batched_tokens,
                          batch.max_num_seqs, version, video, batch.chunked_prefill)
    buffers = deepstack_buffer_bytes(spec, batch.max_num_batched_tokens, version)
    return mm, buffers, None if mm is not None else qwen3_vl_profile_note(spec, version)


def text_only_towers(spec: ModelSpec, mm_limits: str | None, version: tuple[int, ...]
                     ) -> tuple[ModelSpec, VisionTower | None, list[str]]:
    """The spec as vLLM `version` builds it under --limit-mm-per-prompt (`mm_limits`, the held
    key=value list), the vision tower its profile run encodes, and what the budget says of
    them: a tower whose model class skips it at 0 (kvplan.engines.vllm.memory.TOWER_SKIPS) is
    left out of the spec, so its weights leave the budget; with every modality at 0 (0.10.1
    on) no encoder is profiled; a tower whose class kvplan has not read is kept and named."""
    from dataclasses import replace

    from kvplan.engines.settings import mm_limits as held_limits
    from kvplan.engines.settings import parse_mm_limits

    limits = held_limits(mm_limits)
    if not limits or (spec.vision is None and spec.audio_encoder is None):
        return spec, spec.vision, []
    shown = f"--limit-mm-per-prompt {parse_mm_limits(mm_limits)}"  # sorted key=value pairs
    named = ".".join(map(str, version))
    notes: list[str] = []
    vision, audio = spec.vision, spec.audio_encoder
    towers = []
    if vision is not None:
        towers.append(("vision", vision.kind, vp.TOWER_SKIPS.get(vision.kind), vp.IMAGE))
    # Whisper's encoder is the model's own, not a tower
    if audio is not None and not spec.layout.encoder_decoder:
        towers.append(("audio", audio.kind, vp.AUDIO_SKIPS.get(audio.kind), ("audio",)))
    for place, kind, rule, modalities in towers:
        skipped = vp.tower_skipped(rule, limits, version, modalities)
        if skipped:
            assert rule is not None  # only a rule says True
            vision, audio = (None, audio) if place == "vision" else (vision, None)
            notes.append(f"{shown}: vLLM {named} builds no {kind} {place} tower "
                         f"({rule.source}, from {'.'.join(map(str, rule.since))}); its "
                         "weights are not counted")
        elif skipped is None:
            notes.append(f"{shown}: kvplan has not read whether vLLM {named} builds the "
                         f"{kind} {place} tower with its modalities at 0; its weights are "
                         "counted, and the KV cache may be larger by as much")
    profiled = spec.vision
    if release(version) >= vp.TEXT_ONLY_FROM and vp.text_only(spec, limits):
        profiled = None
        if spec.vision is not None and vp.mm_tokens_per_item(spec.vision):
            notes.append(f"{shown}: every modality at 0, vLLM {named} runs text-only and "
                         "profiles no encoder (multimodal/registry.py supports_multimodal_inputs)")
    return replace(spec, vision=vision, audio_encoder=audio), profiled, notes


def lora_weights(spec: ModelSpec, per_stage: list[int], tp: int, pp: int,
                 pp_layers: Sequence[int] | None, max_loras: int, max_lora_rank: int
                 ) -> list[str]:
    """Adds --enable-lora's adapter slots to each stage's weights, in place (its decoder
    layers', the embedding's on the first stage, the LM head's on the last:
    kvplan.engines.vllm.memory.lora_slots), and says what it counted."""
    if not max_loras:
        return []
    slots = vp.lora_slots(spec, tp, max_loras, max_lora_rank)
    if slots is None:
        raise BadInputError("--enable-lora: kvplan needs the model's hidden size, vocabulary and "
                            "attention shapes to size vLLM's LoRA slots",
                            "give the model as a config.json or a YAML spec with `shapes:`")
    for i, (start, end) in enumerate(pp_stages(spec.num_layers, pp, pp_layers)):
        per_stage[i] += (end - start) * slots.layer_bytes \
            + (slots.embedding_bytes if i == 0 else 0) \
            + (slots.lm_head_bytes if i == pp - 1 else 0)
    notes = [f"LoRA: {max_loras} adapter slot{'s' if max_loras > 1 else ''} of rank "
             f"{max_lora_rank} in the model dtype, {slots.layer_bytes:,} B a decoder layer, "
             f"{slots.embedding_bytes:,} B the embedding, {slots.lm_head_bytes:,} B the LM head "
             "per GPU, counted with the weights (vLLM 0.22.1 lora/layers create_lora_weights)"]
    if spec.is_moe:
        notes.append("LoRA: the fused MoE experts' adapter slots are not counted")
    return notes


def offloaded_weights(spec: ModelSpec, weights: str | WeightFormat, weights_bytes: int | None,
                      dims: ModelDims | None, tp: int, pp: int, per_stage: Sequence[int],
                      cpu_offload_bytes: int) -> list[int]:
    """Weight bytes each stage's GPU keeps in CPU memory under --cpu-offload-gb.

    vLLM sets the limit to `int(cpu_offload_gb * 1024**3)` per worker and offloads the
    parameters of the decoder layers that `make_layers` builds, one after another, until the
    limit is reached (0.6-0.10: `model_executor/models/utils.py::maybe_offload_to_cpu`;
    0.11+: `config/offload.py::UVAOffloadConfig` and `model_executor/offloader/uva.py`,
    `UVAOffloader.wrap_modules`). The embedding and the LM head stay on the GPU, so a stage
    offloads at most its layers' share. Whole parameters are moved: the last may take up to
    one parameter past the limit, which this leaves out (a lower bound of what moves)."""
    if not cpu_offload_bytes:
        return [0] * len(per_stage)
    from dataclasses import replace

    from kvplan.engines.shared.weights import dims_of, stage_weight_bytes, weight_split

    try:
        split = weight_split(spec, as_weight_format(spec, weights), dims or dims_of(spec),
                             weights_bytes)
        outside = stage_weight_bytes(spec, replace(split, layer_bytes=0), tp, pp)
    except BadInputError:  # no parameter count: the stage's whole weights bound it
        outside = (0,) * len(per_stage)
    return [min(cpu_offload_bytes, max(0, w - o))
            for w, o in zip(per_stage, outside, strict=True)]
