"""Qwen3-VL's part of vLLM V1's multimodal profile, per release: the dummy video the profile
run encodes, what it leaves held through the dummy forward, and the buffers the model
allocates at load.

`gpu_model_runner.py::profile_run` (0.11.0-0.14.0) encodes `max(1, min(encoder budget //
tokens per item, max_num_seqs x items per prompt))` items of the modality with the most
tokens per item and keeps their outputs in `encoder_cache` through the forward and the
sampler warm-up; up to 0.12 each output is widened to the item's tokens, and the raw output
and the pixel values stay alive too. Qwen3-VL's largest item is a video of 24,576 frames of
32 x 32 pixels (`qwen3_vl.py` `_MAX_FRAMES_PER_VIDEO`, the checkpoints' video longest_edge):
12,288 merged tokens, counted as 12.5 x that in 0.11-0.12. The source read, what is not
modelled and the logs it was checked against: docs/engine-kv-sizing.md §7.12.

Every other tower left unsized (memory.encoder_profile sizes SigLIP, CLIP and Llama 4) is
named in the budget's notes: `encoder_profile_note`, the Omni thinkers `omni_profile_note`.
"""

from __future__ import annotations

from kvplan.core.record import record
from kvplan.core.spec import ModelSpec, VisionTower
from kvplan.engines.shared.activations import ACTIVATION_BYTES
from kvplan.engines.shared.releases import release

# qwen3_vl.py _MAX_FRAMES_PER_VIDEO and its video processor's longest_edge (24,576 x 32 x 32)
QWEN3_VL_MAX_FRAMES = 24576
QWEN3_VL_RESIZE_FACTOR = 32  # patch_size x spatial_merge_size of the checkpoints read
# get_max_video_tokens: soft tokens x 12.5 (as 25 / 2) up to 0.12.x; the soft tokens from 0.13
QWEN3_VL_FORMATTED_NUM, QWEN3_VL_FORMATTED_DEN = 25, 2
QWEN3_VL_SOFT_TOKENS_FROM = (0, 13, 0)
# profile_run widens each output to the encoder budget (0.11) or to the item's tokens (0.12)
QWEN3_VL_WIDEN_TO_ITEM_FROM = (0, 12, 0)
QWEN3_VL_READ_FROM = (0, 11, 0)  # qwen3_vl.py first ships in 0.11.0
QWEN3_VL_READ_UNTIL = (0, 14, 99)  # the last line read (0.14.0)
# Below this model length the frame search of get_num_frames_with_most_features stops early:
# a video of n frames has at most 4/3 x 12,288 soft tokens (n = 3, t rounded up to 4)
QWEN3_VL_MIN_MODEL_LEN = 16384


@record
class MmItemProfile:
    """One release's multimodal profile of a model: the modality profiled, its tokens per item
    as the encoder budget counts them, the items encoded, and the bytes held through the dummy
    forward (the widened cache, the encoder's own output, the pixel values)."""

    modality: str
    tokens_per_item: int
    soft_tokens_per_item: int
    num_items: int
    cache_bytes: int
    output_bytes: int
    pixel_bytes: int

    @property
    def held_bytes(self) -> int:
        return self.cache_bytes + self.output_bytes + self.pixel_bytes


def qwen3_vl_read(version: tuple[int, ...]) -> bool:
    """Whether `version` is a release whose Qwen3-VL profile kvplan has read (0.11-0.14)."""
    return QWEN3_VL_READ_FROM <= release(version) <= QWEN3_VL_READ_UNTIL


def qwen3_vl_video(vision: VisionTower, max_model_len: int) -> tuple[int, int] | None:
    """(soft tokens, patches) of Qwen3-VL's dummy video: 24,576 frames of 32 x 32 pixels,
    `frames / temporal_patch_size` merged tokens of `spatial_merge_size^2` patches each.
    None where the model length stops the frame search early or the patch grid is not the
    checkpoints' 16-pixel patch merged 2 x 2."""
    merge = 2
    if vision.patch_size * merge != QWEN3_VL_RESIZE_FACTOR or not vision.temporal_patch_size:
        return None
    if max_model_len < QWEN3_VL_MIN_MODEL_LEN:
        return None
    soft = QWEN3_VL_MAX_FRAMES // vision.temporal_patch_size
    return soft, soft * merge * merge


def qwen3_vl_profile(vision: VisionTower, max_model_len: int, max_num_batched_tokens: int,
                     max_num_seqs: int, version: tuple[int, ...],
                     video_limit: int = 999, chunked_prefill: bool = True
                     ) -> MmItemProfile | None:
    """Qwen3-VL's dummy video batch and what it leaves held through the forward (module
    docstring), for a release read; None where kvplan has not read the release, the model
    length stops the frame search early, or video is off (the image item's size needs the
    image processor's longest_edge, which config.json does not give)."""
    if vision.kind != "qwen3_vl" or not qwen3_vl_read(version) or video_limit <= 0:
        return None
    video = qwen3_vl_video(vision, max_model_len)
    if video is None:
        return None
    soft, patches = video
    formatted = release(version) < QWEN3_VL_SOFT_TOKENS_FROM
    tokens = soft * QWEN3_VL_FORMATTED_NUM // QWEN3_VL_FORMATTED_DEN if formatted else soft
    # compute_mm_encoder_budget: max(max_num_batched_tokens, tokens per item), both budgets
    budget = max(max_num_batched_tokens, tokens)
    # MultiModalBudget.get_max_items
    per_prompt = max(1, min(video_limit, max_model_len // tokens))
    seqs = max_num_seqs if chunked_prefill else \
        min(max_num_seqs, max_num_batched_tokens // tokens)
    items = max(1, min(budget // tokens, seqs * per_prompt))
    width = vision.output_dim * (1 + vision.num_deepstack)
    output = items * soft * width * ACTIVATION_BYTES
    if not formatted:  # 0.13 on: the outputs are the cache
        cache, output = output, 0
    else:
        rows = tokens if release(version) >= QWEN3_VL_WIDEN_TO_ITEM_FROM else budget
        cache = items * max(rows, soft) * width * ACTIVATION_BYTES
    pixel_row = vision.num_channels * vision.temporal_patch_size * vision.patch_size ** 2
    pixels = items * patches * pixel_row * ACTIVATION_BYTES
    return MmItemProfile("video", tokens, soft, items, cache, output, pixels)


def qwen3_vl_profile_note(spec: ModelSpec, version: tuple[int, ...]) -> str | None:
    """What the budget says where a Qwen3-VL tower's profile is not modelled."""
    vision = spec.vision
    if vision is None or vision.kind != "qwen3_vl":
        return None
    named = ".".join(map(str, version))
    return (f"Qwen3-VL's multimodal profile under vLLM {named} is not modelled (read: "
            "0.11-0.14 with video on and max_model_len >= 16,384): the encoder cache of the "
            "dummy video, its encoder output and pixel values are missing from the activation "
            "peak, as are the deepstack input buffers from the weights, and the KV cache may "
            "be smaller by as much")


# the Omni thinkers' tower kinds (kvplan.core.weights: thinker.audio_tower, thinker.visual)
OMNI_KINDS = {"qwen2_5_omni": "Qwen2.5-Omni", "qwen3_omni": "Qwen3-Omni"}


def omni_profile_note(kind: str, version: tuple[int, ...]) -> str:
    """What the budget says of an Omni thinker's multimodal profile, which kvplan does not
    model: with any modality above 0 vLLM's profile run (0.33.0 v1/worker/gpu_model_runner.py
    `profile_run`) encodes a dummy batch of the modality with the most tokens per item
    (`get_modality_with_max_tokens`: audio, image or video) through the thinker's audio tower
    or vision encoder and keeps its outputs in the encoder cache."""
    named = ".".join(map(str, version))
    return (f"{OMNI_KINDS[kind]}'s multimodal profile under vLLM {named} is not modelled: "
            "the profile run encodes a dummy batch of the modality with the most tokens per "
            "item (audio, image or video) through the thinker's audio tower or vision "
            "encoder; that pass, its encoder cache and its inputs are missing from the "
            "activation peak, and the KV cache may be smaller by as much")


# --skip-mm-profiling (ModelConfig / MultiModalConfig skip_mm_profiling) first in the 0.10.1 wheel
SKIP_MM_PROFILING_FROM = (0, 10, 1)


def unmodelled_towers(spec: ModelSpec, profiled: VisionTower | None, v1_run: bool,
                      modelled: bool) -> list[str]:
    """The towers whose encoder the profile run passes a dummy batch through that kvplan does
    not model, by kind or config key: the profiled vision tower unless `modelled` (V1 only:
    kvplan.engines.vllm.memory.encoder_profile knows its tokens per item),
    a decoder's audio tower (Voxtral; Whisper's encoder is the model's own), and the
    config's vision towers the weights leave out (ModelSpec.uncounted_towers)."""
    towers = []
    if profiled is not None and not (v1_run and modelled):
        towers.append(f"{profiled.kind} vision tower")
    audio = spec.audio_encoder
    if audio is not None and not spec.layout.encoder_decoder:
        towers.append(f"{audio.kind} audio tower")
    if profiled is None:
        towers.extend(f"{name} tower" for name in spec.uncounted_towers
                      if name.startswith("vision_config"))
    return towers


def encoder_profile_note(towers: list[str], version: tuple[int, ...], v1_run: bool
                         ) -> str | None:
    """What the budget says where a multimodal model's encoder profile is not modelled
    (`unmodelled_towers`). V1 (0.33.0 v1/worker/gpu_model_runner.py `profile_run`,
    `_get_mm_dummy_batch`): with any modality above 0 the profile run encodes a dummy batch
    of the modality with the most tokens per item (the model's processing info
    `get_mm_max_tokens_per_item`, its `get_dummy_mm_data`) and keeps the outputs in the
    encoder cache through the dummy forward. V0 (worker/model_runner.py `profile_run`) puts
    the dummy multimodal data into its dummy sequences, so the forward runs the encoder.
    From 0.10.1 --skip-mm-profiling (config `skip_mm_profiling`) skips the V1 pass."""
    if not towers:
        return None
    named = ".".join(map(str, version))
    skip = " (unless --skip-mm-profiling, which kvplan does not read)" \
        if v1_run and release(version) >= SKIP_MM_PROFILING_FROM else ""
    how = (f"{skip} encodes a dummy batch of the modality with the most tokens per item "
           "through it and keeps the outputs in the encoder cache" if v1_run else
           " puts dummy multimodal data into its dummy sequences, which the forward encodes")
    return (f"the multimodal encoder profile of the {', '.join(towers)} under vLLM {named} "
            f"is not modelled: the profile run{how}; that pass, its cache and its inputs "
            "are missing from the activation peak, and the KV cache may be smaller by as "
            "much")


def deepstack_buffer_bytes(spec: ModelSpec, max_num_batched_tokens: int,
                           version: tuple[int, ...]) -> int:
    """Qwen3-VL's deepstack input buffers, allocated in `__init__` and so counted in the
    weights vLLM logs: one (max_num_batched_tokens, text hidden) tensor per deepstack level
    in the model dtype (`Qwen3VLForConditionalGeneration.__init__`, 0.11.0-0.14.0); 0 for
    other models and releases not read."""
    vision = spec.vision
    if vision is None or vision.kind != "qwen3_vl" or not vision.num_deepstack:
        return 0
    if not qwen3_vl_read(version):
        return 0
    hidden = spec.hidden_size or vision.output_dim  # the merger projects into the text width
    return vision.num_deepstack * max_num_batched_tokens * hidden * ACTIVATION_BYTES
