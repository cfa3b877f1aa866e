"""vLLM's start-up profile run as a model, per release: what it reserves besides the KV cache.

vLLM sizes the KV cache as `requested - weights - torch peak increase - non-torch - CUDA graphs`
(kvplan.engines.vllm.budget); the last three are what the engine measures while it runs a
dummy batch, and this module predicts each from the mechanism that produces it:
`batch_settings` (the dummy batch, engine/arg_utils.py defaults), `activation_peak` (the
forward over max_num_batched_tokens or the sampler warm-up, gpu_model_runner.py::profile_run),
`non_torch_bytes` (cudaMemGetInfo growth since the worker's snapshot, gpu_worker.py::
determine_available_memory) and `cudagraph_bytes` (the estimate subtracted from 0.20,
gpu_model_runner.py::profile_cudagraph_memory). The source read, release by release, and the
logs each rule was checked against: docs/engine-kv-sizing.md §7.8. The device/driver
constants (CUDA context, lazily loaded kernels, NCCL buffers) cannot be derived from a
model's config; their values and sources are stated below.
"""

from __future__ import annotations

from kvplan.core.layers import ATTENTION_KINDS, MLA, RecurrentState
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec, VisionTower
from kvplan.core.units import MIB
from kvplan.engines.settings import MM_DEFAULT_LIMIT
from kvplan.engines.shared.activations import (
    ACTIVATION_BYTES,
    Shapes,
    forward_bytes,
    forward_bytes_per_token,
)
from kvplan.engines.shared.device import (
    CUDA_CONTEXT_BYTES,
    CUSTOM_ALLREDUCE_BYTES,
    KERNELS_BYTES,
    NCCL_COMMUNICATOR_BYTES,
    nccl_init_bytes,
)
from kvplan.engines.shared.releases import release, row_for
from kvplan.engines.vllm.config import (
    default_max_num_batched_tokens,
    default_max_num_seqs,
    rules_for,
)

# What changes between releases is in kvplan.engines.vllm.config.RULES (rules_for).

V0_LONG_CONTEXT = 32768  # arg_utils: use_long_context = max_model_len > 32768
V0_MIN_TOKENS = 2048  # max(max_model_len, 2048) without chunked prefill
V0_MAX_NUM_SEQS = 256

# Per logit of the sampler warm-up (see the module docstring, item 2).
SAMPLER_SORT_BYTES_PER_LOGIT = 2 + 4 + (4 + 8) + (8 + 4 + 8)
# one Triton pass: logits, fp32 copy, softmax probabilities, exponential noise
SAMPLER_TRITON_BYTES_PER_LOGIT = 2 + 4 + 4 + 4
# FlashInfer's from-logits path: logits, fp32 copy, masked fp32 logits, softmax probabilities
SAMPLER_FLASHINFER_BYTES_PER_LOGIT = 2 + 4 + 4 + 4
# FlashInfer's sampler is the default whenever flashinfer is importable in V1 up to 0.11.0
# ("is not False"); opt-in (VLLM_USE_FLASHINFER_SAMPLER=1) from 0.11.1; from 0.21 the
# profile also warms the native path, so it no longer lowers the peak (RULES:
# flashinfer_sampler_default, native_sampler_warmup).

CUDAGRAPH_MIN_PER_GRAPH = MIB  # profile_cudagraph_memory: "at least 1 MiB per graph"
BLACKWELL_CAPTURE_CEILING = 1024  # 0.33 config/vllm.py: device capability family 100
# Device memory one more captured graph adds per decoder layer (the instantiated executable
# graph's kernel nodes and their parameters): a driver property, not derivable from
# config.json. Read off the one shared log that prints graph memory (RTX 4080, 0.26,
# Qwen2.5-7B-AWQ, 28 layers: a 0.48 GiB estimate for 51 piecewise + 35 full graphs, less
# twice the 512-token forward, is 4.3 MiB per graph); the held-out RTX A5000 log
# (LMCache#3430, 0.21, Qwen3-8B, 36 layers: 0.52 GiB for the same 51 + 35 graphs) gives
# 144 KiB.
CUDAGRAPH_BYTES_PER_LAYER = 156 * 1024

# Gemma 3's image embeddings per image: its SigLIP's 64 x 64 patch grid average-pooled 4 x 4
# (config.json mm_tokens_per_image 256; gemma3_mm.py::get_num_image_tokens without pan and
# scan, the default: (0 crops + 1) x image_seq_length)
GEMMA3_POOL = 4
# Llama 4's largest image (mllama4.py::get_image_size_with_most_features: 16:1) is
# max_patches = 16 tiles (preprocessor_config.json of Scout and Maverick) plus the global
# tile the processor adds to a multi-tile image; per tile the 24 x 24 patch grid shrinks 4x
# in the pixel shuffle (config.json pixel_shuffle_ratio 0.5: get_patch_per_chunk = 144)
LLAMA4_MAX_TILES = 16
LLAMA4_SHUFFLE = 4


# --- 1. the dummy batch -------------------------------------------------------------------

@record
class BatchSettings:
    max_num_batched_tokens: int
    max_num_seqs: int
    chunked_prefill: bool
    engine: str  # "V0" | "V1"


def is_v1(version: tuple[int, ...], v1: bool | None = None) -> bool:
    """Whether `version` runs V1 (`v1`: VLLM_USE_V1 where set, config.rules_for)."""
    return rules_for(version, v1).v1


# gemma4_mm.py Gemma4ProcessingInfo.get_mm_max_tokens_per_item (the wheels of 0.22.0-0.25.1,
# 0.28.0, 0.33.0): a video item is _VIDEO_MAX_FRAMES = 32 frames of _VIDEO_MAX_SOFT_TOKENS = 70
# soft tokens, a begin and an end token and about 6 timestamp tokens each; an image is the
# vision config's default_output_length (280), 1,120 soft tokens at most. A video limit
# object with `num_frames` lowers it; kvplan's --limit-mm-per-prompt keeps only the counts.
PREFIX_LM_VIDEO_ITEM_TOKENS = 32 * (70 + 2 + 6)


def mm_item_tokens_floor(spec: ModelSpec, version: tuple[int, ...], v1: bool | None = None
                         ) -> int:
    """The floor vLLM puts under a default max_num_batched_tokens so that one multimodal item
    fits a batch (0 where none): engine/arg_utils.py
    _set_default_max_num_seqs_and_batched_tokens_args raises the default to
    `_get_min_mm_batched_tokens`, the largest item's tokens, for a multimodal model that is a
    prefix LM (config/model.py is_multimodal_model and is_mm_prefix_lm: Gemma 4's
    use_bidirectional_attention "vision", transformers_utils/model_arch_config_convertor.py
    Gemma4ModelArchConfigConvertor), from 0.22 (Rules.mm_prefix_lm_batch_floor). The model is
    multimodal with a vision tower in its config, counted or not."""
    if not rules_for(version, v1).mm_prefix_lm_batch_floor or not spec.vision_prefix_lm:
        return 0
    return PREFIX_LM_VIDEO_ITEM_TOKENS if _multimodal(spec) else 0


def _multimodal(spec: ModelSpec) -> bool:
    """config/model.py is_multimodal_model as kvplan sees it: a vision tower in the config,
    counted or not."""
    return spec.vision is not None or any(
        tower.startswith("vision_config") for tower in spec.uncounted_towers)


def batch_settings(version: tuple[int, ...], gpu_memory_bytes: int | None,
                   gpu_name: str | None, max_model_len: int, *, usage: str = "server",
                   max_num_batched_tokens: int | None = None, max_num_seqs: int | None = None,
                   enable_chunked_prefill: bool | None = None, v1: bool | None = None,
                   spec: ModelSpec | None = None) -> BatchSettings:
    """The profile batch vLLM `version` runs with these settings (None = engine default;
    `v1`: VLLM_USE_V1 where set; `spec`: the model, whose multimodal item may raise a default
    max_num_batched_tokens, `mm_item_tokens_floor`)."""
    if not is_v1(version, v1):
        rules = rules_for(version, v1)
        # engine/arg_utils.py create_engine_config, whatever the usage context (the LLM
        # class too); a multimodal model keeps it off from 0.6.2 ("disabled for multimodal
        # models by default")
        long_context = rules.v0_long_context_chunked and max_model_len > V0_LONG_CONTEXT and \
            not (rules.v0_long_context_skips_multimodal and spec is not None
                 and _multimodal(spec))
        chunked = long_context if enable_chunked_prefill is None else enable_chunked_prefill
        chunk = rules.v0_chunked_prefill_tokens
        tokens = max_num_batched_tokens or (
            chunk if chunked else max(max_model_len, V0_MIN_TOKENS))
        seqs = max_num_seqs or V0_MAX_NUM_SEQS
        return BatchSettings(tokens, seqs, chunked, "V0")
    chunked = True if enable_chunked_prefill is None else enable_chunked_prefill
    if max_num_batched_tokens:
        tokens = max_num_batched_tokens
    elif not chunked:
        tokens = max_model_len
    else:
        tokens = default_max_num_batched_tokens(gpu_memory_bytes, gpu_name, usage,
                                                version=version, v1=v1)
    if not max_num_batched_tokens:
        tokens = max(tokens, mm_item_tokens_floor(spec, version, v1) if spec else 0)
    seqs = max_num_seqs or min(default_max_num_seqs(gpu_memory_bytes, gpu_name, version, v1),
                               tokens)
    return BatchSettings(tokens, seqs, chunked, "V1")


# --- 2. the torch peak --------------------------------------------------------------------

def sampler_bytes_per_logit(version: tuple[int, ...], flashinfer: bool = False) -> int:
    """Bytes per logit of the warm-up's peak; `flashinfer`: the FlashInfer sampler runs (V1
    with flashinfer installed up to 0.11.0, or VLLM_USE_FLASHINFER_SAMPLER=1)."""
    rules = rules_for(version)
    if flashinfer and rules.v1 and not rules.native_sampler_warmup:
        return SAMPLER_FLASHINFER_BYTES_PER_LOGIT
    if not rules.triton_top_k_top_p:
        return SAMPLER_SORT_BYTES_PER_LOGIT
    return SAMPLER_TRITON_BYTES_PER_LOGIT


def sampler_bytes(shapes: Shapes, num_seqs: int, num_tokens: int, version: tuple[int, ...],
                  flashinfer: bool = False) -> int:
    per_logit = sampler_bytes_per_logit(version, flashinfer)
    hidden_alive = num_tokens * shapes.hidden_size * ACTIVATION_BYTES
    return num_seqs * shapes.vocab_size * per_logit + hidden_alive


def all_token_logits_bytes(shapes: Shapes, num_tokens: int, tp: int = 1) -> int:
    """0.7's opt-in V1 `profile_run` (v1/worker/gpu_model_runner.py, 0.7.1): after the dummy
    forward, `compute_logits` over all `num_tokens` hidden states, which stay alive, in the
    model dtype, and no sampler. Under TP each rank's `vocab / tp` columns are all-gathered
    into a new full-vocabulary tensor (`LogitsProcessor.use_all_gather` under VLLM_USE_V1,
    `GroupCoordinator.all_gather`)."""
    full = num_tokens * shapes.vocab_size * ACTIVATION_BYTES
    shard = full // tp if tp > 1 else 0
    return full + shard + num_tokens * shapes.hidden_size * ACTIVATION_BYTES


@record
class ActivationPeak:
    forward_bytes: int
    sampler_bytes: int  # 0 on stages other than the last
    encoder_bytes: int = 0  # a VLM's vision encoder over the profile's dummy images
    encoder_cache_bytes: int = 0  # their embeddings, kept through the forward and sampler
    runner_buffers_bytes: int = 0  # the model runner's persistent buffers, where counted
    pooler_bytes: int = 0  # a pooling model's pooler over the dummy batch (no sampler then)

    @property
    def peak_bytes(self) -> int:
        return self.runner_buffers_bytes + max(
            self.encoder_bytes, max(self.forward_bytes, self.sampler_bytes, self.pooler_bytes)
            + self.encoder_cache_bytes)


# The MoE model types whose architecture is in 0.27's DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES
# (config/vllm.py: DeepseekV2ForCausalLM, Qwen2MoeForCausalLM, GraniteMoeForCausalLM; 0.28
# adds DeepseekV4ForCausalLM). Its Inkling, Kimi-K3 and LongCat-Flash-Ngram entries have no
# model type kvplan reads, so those run V1's runner here.
V2_RUNNER_MOE_TYPES: dict[tuple[int, ...], frozenset[str]] = {
    (0, 27, 0): frozenset({"deepseek_v2", "qwen2_moe", "granitemoe"}),
    (0, 28, 0): frozenset({"deepseek_v2", "qwen2_moe", "granitemoe", "deepseek_v4"})}


def uses_v2_runner(spec: ModelSpec, version: tuple[int, ...], v1: bool | None = None) -> bool:
    """Whether vLLM `version` runs `spec` on Model Runner V2 (config/vllm.py
    use_v2_model_runner, with VLLM_USE_V2_MODEL_RUNNER unset): from 0.29 every model unless a
    feature V2 lacks is on (not modelled); in 0.27-0.28 the models that are neither MoE nor
    hybrid nor attention-free, and the listed MoE architectures. Read only where the runner's
    buffers count (rules.runner_buffers_consumed)."""
    rules = rules_for(version, v1)
    if not rules.runner_buffers_consumed:
        return False
    if rules.v2_runner_for_all:
        return True
    listed = row_for(V2_RUNNER_MOE_TYPES, version)  # 0.27 on here: a row is at or before
    if spec.family in listed:
        return True
    stateless = not any(isinstance(layer, RecurrentState) for layer in spec.layers)
    attends = any(isinstance(layer, (*ATTENTION_KINDS, MLA)) for layer in spec.layers)
    return not spec.is_moe and stateless and attends


def runner_buffers_bytes(shapes: Shapes, batch: BatchSettings, version: tuple[int, ...],
                         v1: bool | None = None, *, v2_runner: bool = False,
                         last_stage: bool = True) -> int:
    """The model runner's persistent buffers that the version's budget subtracts: V1's
    GPUModelRunner.__init__ `inputs_embeds`, (max_num_batched_tokens, hidden) in the model
    dtype (v1/worker/gpu_model_runner.py, 0.7.1-0.33); Model Runner V2's sampler, on the last
    stage, PenaltiesState's `output_bin_counts` (max_num_seqs, vocab) and `prompt_bin_mask`
    (max_num_seqs, cdiv(vocab, 32)), int32 (v1/worker/gpu/sample/penalties.py, 0.27-0.33).
    Counted by 0.7's opt-in V1 and 0.8-0.9.0 (the absolute `allocated_bytes.all.peak`,
    gpu_worker.py::determine_available_memory) and from 0.27 (`total_consumed`, the free
    memory's drop since init_snapshot, utils/mem_utils.py::memory_profiling); not by 0.9.1-0.26
    (the peak's increase during profile_run only). docs/engine-kv-sizing.md §7.8 item 5."""
    rules = rules_for(version, v1)
    embeds = batch.max_num_batched_tokens * shapes.hidden_size * ACTIVATION_BYTES
    if rules.runner_buffers_in_peak:
        return embeds
    if not rules.runner_buffers_consumed:
        return 0
    if not v2_runner:
        return embeds
    if not last_stage:
        return 0
    return batch.max_num_seqs * (shapes.vocab_size + -(-shapes.vocab_size // 32)) * 4


@record
class EncoderProfile:
    """The multimodal part of V1's profile run (`gpu_model_runner.py::profile_run`, 0.10.0;
    the same steps in 0.33 through `mm_budget`): the modality with the most tokens per item,
    `max_tokens_per_mm_item`; the encoder budget `min(max_num_encoder_input_tokens,
    encoder_cache_size)`, both `max(max_num_batched_tokens, max_tokens_per_mm_item)`
    (`encoder_cache_manager.py::_compute_encoder_budget_multimodal`, the scheduler's defaults
    being max_num_batched_tokens); `max(1, min(budget // per item, max_num_seqs x
    items per prompt))` dummy items of the largest size run through the encoder at once
    (`get_multimodal_embeddings`), and their embeddings stay in `encoder_cache` until the
    forward and the sampler warm-up are done."""

    tokens_per_item: int
    num_items: int
    pass_bytes: int
    cache_bytes: int


def mm_tokens_per_item(vision: VisionTower) -> int | None:
    """The text-side embeddings one image of the largest size gives, for the encoders whose
    rule is known: Gemma 3's SigLIP (the patch grid pooled 4 x 4: 256 at 896 px / 14 px) and
    LLaVA's CLIP (one per patch, the class token dropped by the "default" feature select
    strategy: 576 at 336 px / 14 px) and Llama 4 (17 tiles of 144: 2,448, only the patch
    tokens are embeddings, `select_token_ids(img_patch)`). None for the others (mllama's
    cross attention, MoonViT's variable grids): not modelled."""
    side = vision.image_size // vision.patch_size if vision.patch_size else 0
    if not side:
        return None
    if vision.kind == "siglip":
        return (side // GEMMA3_POOL) ** 2
    if vision.kind == "clip":
        return side * side
    if vision.kind == "llama4":
        return tiles_per_item(vision) * side * side // LLAMA4_SHUFFLE
    return None


def tiles_per_item(vision: VisionTower) -> int:
    """Encoder inputs one item of the largest size is cut into: Llama 4's 16 tiles + the
    global one; one image elsewhere."""
    return LLAMA4_MAX_TILES + 1 if vision.kind == "llama4" else 1


def encoder_layer_bytes_per_patch(vision: VisionTower, tp: int = 1) -> int:
    """A ViT encoder layer's peak per patch row (`siglip.py` / `clip.py`: `SiglipEncoderLayer`
    / `CLIPEncoderLayer`): the residual and the norm's output (alive while the MLP runs, the
    caller still holds it) beside the MLP's fc1 output and its activation's output; the
    attention (`MultiHeadAttention`: xFormers or SDPA) keeps no score matrix; Llama 4's
    `Llama4VisionEncoderLayer` has the same shape. fc1 is
    column-parallel: its width splits over TP."""
    return (2 * vision.hidden_size + 2 * vision.intermediate_size // tp) * ACTIVATION_BYTES


def encoder_profile(vision: VisionTower | None, text_hidden_size: int, batch: BatchSettings,
                    version: tuple[int, ...], tp: int = 1, v1: bool | None = None
                    ) -> EncoderProfile | None:
    """The encoder pass and the cached embeddings of V1's profile run (see EncoderProfile);
    None for text-only models, V0 (it profiles images inside its dummy sequences) and
    encoders whose tokens per item kvplan does not know. One item per prompt is the lower
    bound of the per-prompt limit; the encoder budget binds first unless max_num_seqs is tiny."""
    if vision is None or not is_v1(version, v1):
        return None
    per_item = mm_tokens_per_item(vision)
    if not per_item:
        return None
    budget = max(batch.max_num_batched_tokens, per_item)
    items = max(1, min(budget // per_item, batch.max_num_seqs))
    # CLIP and Llama 4's ViT append a class token to each tile's patches
    patches = (vision.image_size // vision.patch_size) ** 2 + \
        (1 if vision.kind in ("clip", "llama4") else 0)
    pixels = vision.num_channels * vision.image_size ** 2 * ACTIVATION_BYTES
    tiles = items * tiles_per_item(vision)
    pass_bytes = tiles * (patches * encoder_layer_bytes_per_patch(vision, tp) + pixels)
    cache = items * per_item * text_hidden_size * ACTIVATION_BYTES
    return EncoderProfile(per_item, items, pass_bytes, cache)


# --- --limit-mm-per-prompt at 0: text-only mode ---------------------------------------------
#
# With every modality the model's processor supports at 0, vLLM runs text-only: from 0.10.1
# multimodal/registry.py `supports_multimodal_inputs` (0.33: config/model.py
# `_supports_multimodal_inputs`) is False and gpu_model_runner.py `profile_run` profiles no
# encoder (no dummy images, no encoder cache); 0.9.2 and 0.10.0 have no such check. Whether
# the tower is built at all is each model class's: 0.10.1-0.14 a class reads
# `multimodal_config.get_limit_per_prompt` in its __init__ and leaves the tower None; from 0.15
# model_executor/models/interfaces.py `_mark_tower_model(vllm_config, modalities)` builds it
# with no weights (StageMissingLayer) when every one of its modalities is 0. A modality left
# out counts 999 (config/multimodal.py `get_limit_per_prompt`).
TEXT_ONLY_FROM = (0, 10, 1)
# --language-model-only: every modality's limit 0 (config/multimodal.py, the 0.17.0 wheel on)
LANGUAGE_MODEL_ONLY_FROM = (0, 17, 0)


@record
class TowerSkip:
    """When a vision kind's vLLM class skips its tower: the modalities it reads, the first
    release read where it does, and the last release before that read where it does not
    (between the two kvplan does not know)."""

    modalities: tuple[str, ...]
    since: tuple[int, int, int]
    not_before: tuple[int, int, int]
    source: str


IMAGE, IMAGE_VIDEO = ("image",), ("image", "video")
# each read in the wheels of 0.9.2, 0.10.0-0.10.2, 0.11.0, 0.12.0, 0.14.0-0.18.0, 0.24.0, 0.33.0
TOWER_SKIPS: dict[str, TowerSkip] = {
    "clip": TowerSkip(IMAGE, (0, 10, 1), (0, 10, 0), "llava.py LlavaForConditionalGeneration"),
    "pixtral": TowerSkip(IMAGE, (0, 10, 1), (0, 10, 0),
                         "mistral3.py Mistral3ForConditionalGeneration"),
    "llama4": TowerSkip(IMAGE, (0, 10, 1), (0, 10, 0), "mllama4.py Llama4ForConditionalGeneration"),
    "qwen2_vl": TowerSkip(IMAGE_VIDEO, (0, 10, 1), (0, 10, 0),
                          "qwen2_vl.py Qwen2VLForConditionalGeneration"),
    "qwen2_5_vl": TowerSkip(IMAGE_VIDEO, (0, 10, 1), (0, 10, 0),
                            "qwen2_5_vl.py Qwen2_5_VLForConditionalGeneration"),
    # qwen3_vl.py first ships in 0.11.0, already with the check
    "qwen3_vl": TowerSkip(IMAGE_VIDEO, (0, 11, 0), (0, 10, 0),
                          "qwen3_vl.py Qwen3VLForConditionalGeneration"),
    "siglip": TowerSkip(IMAGE, (0, 15, 0), (0, 14, 0),
                        "gemma3_mm.py Gemma3ForConditionalGeneration"),
    "siglip2": TowerSkip(IMAGE, (0, 15, 0), (0, 14, 0),
                         "lfm2_vl.py Lfm2VLForConditionalGeneration"),
    "gemma4": TowerSkip(IMAGE_VIDEO, (0, 24, 0), (0, 10, 0),
                        "gemma4_mm.py Gemma4ForConditionalGeneration"),
    "exaone4_5": TowerSkip(IMAGE_VIDEO, (0, 33, 0), (0, 10, 0),
                           "exaone4_5.py Exaone4_5_ForConditionalGeneration"),
    # the Omni thinkers' vision encoders, skipped by image and video together (their audio
    # towers by audio alone: AUDIO_SKIPS). Qwen2.5-Omni: 0.10.1's __init__ reads the limits,
    # 0.10.0's does not; Qwen3-Omni (first in 0.11.1, which builds both towers whatever the
    # limits) by _mark_tower_model in the 0.15.0 and 0.33.0 wheels, 0.12-0.14 not read
    "qwen2_5_omni": TowerSkip(IMAGE_VIDEO, (0, 10, 1), (0, 10, 0),
                              "qwen2_5_omni_thinker.py Qwen2_5OmniThinkerForConditionalGeneration"),
    "qwen3_omni": TowerSkip(IMAGE_VIDEO, (0, 15, 0), (0, 11, 1),
                            "qwen3_omni_moe_thinker.py "
                            "Qwen3OmniMoeThinkerForConditionalGeneration"),
}
# Voxtral's Whisper encoder (voxtral.py, _mark_tower_model(vllm_config, "audio")): read in 0.33
AUDIO_SKIPS: dict[str, TowerSkip] = {
    "voxtral": TowerSkip(("audio",), (0, 33, 0), (0, 10, 0),
                         "voxtral.py VoxtralForConditionalGeneration"),
    "qwen2_5_omni": TowerSkip(("audio",), (0, 10, 1), (0, 10, 0),
                              "qwen2_5_omni_thinker.py Qwen2_5OmniThinkerForConditionalGeneration"),
    "qwen3_omni": TowerSkip(("audio",), (0, 15, 0), (0, 11, 1),
                            "qwen3_omni_moe_thinker.py "
                            "Qwen3OmniMoeThinkerForConditionalGeneration"),
}


def tower_skipped(rule: TowerSkip | None, limits: dict[str, int], version: tuple[int, ...],
                  modalities: tuple[str, ...] = IMAGE) -> bool | None:
    """Whether vLLM `version` builds no tower of this rule under `limits` (modality -> items
    per prompt, --limit-mm-per-prompt): False when a modality it reads is above 0 or the
    release predates the check, None where kvplan has not read the class (a kind with no rule,
    or a release between `not_before` and `since`); `modalities`: those of a kind with no
    rule."""
    modalities = rule.modalities if rule is not None else modalities
    if any(limits.get(m, MM_DEFAULT_LIMIT) for m in modalities):
        return False
    if release(version) < TEXT_ONLY_FROM:
        return False  # no class read the limits before 0.10.1
    if rule is None:
        return None
    if release(version) >= rule.since:
        return True
    return False if release(version) <= rule.not_before else None


def text_only(spec: ModelSpec, limits: dict[str, int]) -> bool:
    """Every modality the model takes at 0 (`supports_multimodal_inputs` False): the towers'
    modalities kvplan knows, image when it knows none."""
    mods: set[str] = set()
    if spec.vision is not None:
        rule = TOWER_SKIPS.get(spec.vision.kind)
        mods.update(rule.modalities if rule is not None else IMAGE)
    if spec.audio_encoder is not None and not spec.layout.encoder_decoder:
        mods.add("audio")
    return bool(mods) and not any(limits.get(m, MM_DEFAULT_LIMIT) for m in mods)


# --- the pooling runner: a pooler where a generating model samples ----------------------------
#
# A pooling model (vLLM's runner "pooling": --runner pooling, --convert embed|classify|reward,
# --task embed|embedding|classify|score|reward before 0.10.2) computes no logits and warms up no
# sampler. V1: v1/worker/gpu_model_runner.py::profile_run (read in 0.9.2, 0.10.1.1, 0.11.0,
# 0.22.1 and 0.32.0; Model Runner V2's v1/worker/gpu/model_runner.py::profile_run in 0.22.1
# alike) calls `_dummy_pooler_run` on the dummy forward's hidden states, every
# token's, in place of `_dummy_sampler_run`; `_dummy_pooler_run_task` splits them over
# min(num_tokens, max_num_seqs) dummy requests and runs the model's pooler once per supported
# task, then again for the task with the largest output, which stays alive with the hidden
# states until the profile ends. V0 runs a pooling model in worker/pooling_model_runner.py,
# whose execute_model calls the pooler where model_runner.py computes logits and samples; no V0
# wheel was read for it, and kvplan applies the V1 rule there too. The adapters' poolers
# (model_executor/models/adapters.py as_embedding_model: DispatchPooler of "encode" and
# "embed"; model_executor/layers/pooler.py, 0.11.0): "embed" pools one row a request (LAST,
# CLS or MEAN; MEAN's cumsum is num_tokens x hidden in fp32) and its EmbeddingPoolerHead
# casts the rows to the head dtype (fp32 for pooling models, config/model.py
# _get_head_dtype) and normalizes them; "encode" (ALL pooling) keeps every token's row, cast
# to fp32 request by request by RewardPoolerHead and softmaxed (PoolingParams softmax True
# for "encode") -- profiled only without chunked prefill (get_supported_pooling_tasks drops
# "encode" when it is on). FP32 per element of the head's copies:
POOLER_HEAD_BYTES = 4


def pooler_bytes(shapes: Shapes, batch: BatchSettings) -> int:
    """What the pooler warm-up holds at its peak beside the forward's hidden states (alive,
    num_tokens x hidden in the model dtype): the larger of "embed" (one row a dummy request:
    the gathered row, its fp32 copy and the normalized copy) and, without chunked prefill,
    "encode" (every token's row in fp32, then its softmax beside it)."""
    tokens, h = batch.max_num_batched_tokens, shapes.hidden_size
    requests = min(tokens, batch.max_num_seqs)
    embed = requests * h * (ACTIVATION_BYTES + 2 * POOLER_HEAD_BYTES)
    encode = 0 if batch.chunked_prefill else tokens * h * 2 * POOLER_HEAD_BYTES
    return tokens * h * ACTIVATION_BYTES + max(embed, encode)


def runs_gptq_exllama(version: tuple[int, ...], compute_capability: tuple[int, int] | None
                      ) -> bool:
    """Whether a GPTQ checkpoint's linears run exllama's `gptq_gemm` (GPTQLinearMethod) in
    `version` on a GPU of `compute_capability` (None: not known, taken as Marlin-capable):
    always before 0.4.2; from 0.4.2 where the checkpoint is not Marlin-compatible, which for
    kvplan's GPTQ format (4 bits, group 128, taken as symmetric) is a GPU below compute
    capability 8.0 (GPTQMarlinConfig.is_marlin_compatible, `get_min_capability` 80). An explicit
    `--quantization gptq` on a newer GPU also forces exllama; kvplan's weights do not say
    whether the flag or the checkpoint named the format, so that case is not modelled."""
    if not rules_for(version).gptq_marlin_auto:
        return True
    return compute_capability is not None and compute_capability < (8, 0)


def gptq_dequant_bytes(shapes: Shapes, tp: int = 1) -> int:
    """exllama's GPTQ GEMM (csrc/quantization/gptq/q_gemm.cu `gptq_gemm`, 0.3.0's sdist and
    every later release read) allocates `temp_dq`, the layer's weight dequantized to the
    activation dtype, `size_k x size_n`, beside its output on every call. At the forward's peak
    (the MLP, with its gate/up output and the activation alive) the down projection runs:
    `intermediate / tp x hidden` of it. Dense MLPs only (0 for MoE shapes, whose expert kernels
    were not read)."""
    if shapes.moe_intermediate_size or not shapes.intermediate_size:
        return 0
    return shapes.intermediate_size // tp * shapes.hidden_size * ACTIVATION_BYTES


def activation_peak(shapes: Shapes, batch: BatchSettings, version: tuple[int, ...], *,
                    tp: int = 1, ep: int = 1, dp: int = 1,
                    last_stage: bool = True, flashinfer_sampler: bool = False,
                    fp8_moe: bool = False, vision: VisionTower | None = None,
                    v1: bool | None = None, v2_runner: bool = False,
                    mm_held_bytes: int = 0, pooling: bool = False,
                    gptq_exllama: bool = False) -> ActivationPeak:
    """The profile run's torch peak on one stage; `mm_held_bytes`: what a model's multimodal
    profile holds through the forward beside the generic encoder profile's cache
    (kvplan.engines.vllm.mm_profile, Qwen3-VL); `pooling`: a pooling model (the pooler where
    the sampler would run, `pooler_bytes`); `gptq_exllama`: GPTQ linears on exllama's kernel
    (`runs_gptq_exllama`), whose dequantized down projection the forward's peak holds
    (`gptq_dequant_bytes`)."""
    rules = rules_for(version, v1)
    fwd = forward_bytes(shapes, batch.max_num_batched_tokens, tp, ep, dp,
                        rules.moe_unchunked, fp8_moe, rules.moe_chunk_tokens)
    if gptq_exllama:
        fwd += gptq_dequant_bytes(shapes, tp)
    enc = encoder_profile(vision, shapes.hidden_size, batch, version, tp, v1)
    enc_pass, enc_cache = (enc.pass_bytes, enc.cache_bytes) if enc else (0, 0)
    enc_cache += mm_held_bytes
    buffers = runner_buffers_bytes(shapes, batch, version, v1, v2_runner=v2_runner,
                                   last_stage=last_stage)
    if not last_stage:
        return ActivationPeak(fwd, 0, enc_pass, enc_cache, buffers)
    if pooling:
        return ActivationPeak(fwd, 0, enc_pass, enc_cache, buffers,
                              pooler_bytes=pooler_bytes(shapes, batch))
    if rules.profile_logits_all_tokens:
        return ActivationPeak(fwd, all_token_logits_bytes(
            shapes, batch.max_num_batched_tokens, tp), enc_pass, enc_cache, buffers)
    rows = min(batch.max_num_seqs, batch.max_num_batched_tokens)
    return ActivationPeak(fwd, sampler_bytes(shapes, rows, batch.max_num_batched_tokens,
                                             version, flashinfer_sampler), enc_pass, enc_cache,
                          buffers)


# --- 3. non-torch memory ------------------------------------------------------------------

def non_torch_bytes(version: tuple[int, ...], tp: int = 1, pp: int = 1, dp: int = 1,
                    moe: bool = False, v1: bool | None = None,
                    nvswitch_hopper: bool = False) -> int:
    """CUDA memory outside torch's pool that the version counts against the KV budget. Before
    0.11 every process group of more than one rank that `initialize_model_parallel` builds
    holds a pynccl communicator, warmed up by an all-reduce at creation (so its buffers are
    allocated): TP (plus the custom all-reduce's IPC buffer from 0.3.0), PP, and in V1 DP
    and -- for MoE models -- EP, which spans the DP x TP ranks
    (`distributed/parallel_state.py`). `v1`: VLLM_USE_V1 where set (0.7's opt-in V1 counts
    absolutely).

    Where NCCL connects everything at init (`Rules.nccl_connects_at_init`) on NVSwitch Hopper
    GPUs, a communicator holds `device.nccl_init_bytes`, and the profile run makes torch's own
    on two groups: TP's, when `_dummy_sampler_run` gathers the logits (`DeviceCommunicatorBase.
    all_gather`), and for MoE models DP's, when the naive all-to-all dispatch broadcasts
    (`NaiveAll2AllManager.naive_multicast`); the logs: docs/engine-accuracy.md section 9."""
    rules = rules_for(version, v1)
    if not rules.non_torch_counted:
        return 0  # 0.2.0-0.2.4: torch.cuda.max_memory_allocated() alone
    counted = KERNELS_BYTES
    if not rules.non_torch_growth_only:
        counted += CUDA_CONTEXT_BYTES  # absolute: mem_get_info used - torch allocated
    at_init = rules.nccl_connects_at_init and nvswitch_hopper

    def communicator(ranks: int) -> int:
        return nccl_init_bytes(ranks) if at_init else NCCL_COMMUNICATOR_BYTES

    if not rules.snapshot_after_nccl:
        if tp > 1:
            counted += communicator(tp) + \
                (CUSTOM_ALLREDUCE_BYTES if rules.custom_allreduce else 0)
            if at_init and rules.v1:
                counted += communicator(tp)  # torch's, for the sampler's logits
        if pp > 1:
            counted += NCCL_COMMUNICATOR_BYTES
        if rules.v1 and dp > 1:
            counted += communicator(dp)
            if at_init and moe:
                counted += communicator(dp)  # torch's, for the naive dispatch's broadcasts
        if rules.v1 and moe and tp * dp > 1:
            counted += NCCL_COMMUNICATOR_BYTES
    if tp > 1 and (not rules.v1 or rules.profile_logits_all_tokens):
        # V0 gathers the logits to the driver with torch.distributed.gather on the TP device
        # group (logits_processor._gather_logits -> GroupCoordinator.gather), 0.7's opt-in V1
        # with all_gather_into_tensor (GroupCoordinator.all_gather); torch creates that
        # group's NCCL communicator lazily at the first call: inside the profile run
        counted += NCCL_COMMUNICATOR_BYTES
    return counted


# --- 4. CUDA graphs -----------------------------------------------------------------------

def subtracts_cudagraphs(version: tuple[int, ...], enforce_eager: bool = False) -> bool:
    """Whether the KV budget loses the CUDA-graph estimate: from 0.20, not with
    --enforce-eager (before, graphs are captured after the KV cache, inside
    1 - gpu_memory_utilization)."""
    return not enforce_eager and rules_for(version).cudagraph_estimate


def capture_sizes(max_num_seqs: int, version: tuple[int, ...], *,
                  max_num_batched_tokens: int | None = None,
                  blackwell: bool = False, num_speculative_tokens: int = 0) -> list[int]:
    """cudagraph_capture_sizes (0.33 `config/vllm.py::_set_cudagraph_sizes`): 1, 2, 4, then
    multiples of 8 below 256 and of 16 from 256, up to max_cudagraph_capture_size =
    min(max_num_seqs x q x 2, 512 -- 1,024 on Blackwell, SM 10.x, in 0.33 --,
    max_num_batched_tokens), q = 1 + num_speculative_tokens (`uniform_decode_query_len`: a
    decode step verifies every draft token and samples one more); max_num_batched_tokens is
    added when it falls under that ceiling. From 0.33 the widest uniform decode batches are
    added too: without drafts max_num_seqs; with drafts q x n for the request counts n (1, 2,
    4, 8..248 step 8, 256.. step 16, and max_num_seqs itself, at most 512 / 1,024) whose q x n
    is under the ceiling before the max_num_batched_tokens cap, and at most
    max_num_batched_tokens. 0.26.0's `_set_cudagraph_sizes` has the same q in the ceiling
    and no decode sizes."""
    rules = rules_for(version)
    default = BLACKWELL_CAPTURE_CEILING if blackwell and rules.big_gpu_tier else 512
    q = 1 + num_speculative_tokens
    ceiling = min(max_num_seqs * q * 2, default)
    if not rules.decode_capture_sizes:
        decode: set[int] = set()
    elif q > 1:
        reqs = min(max_num_seqs, default)
        counts = {n for n in [1, 2, 4] + list(range(8, min(reqs + 1, 256), 8))
                  + list(range(256, reqs + 1, 16)) if n <= reqs} | {reqs}
        decode = {n * q for n in counts if n * q <= ceiling}
    else:
        decode = {max_num_seqs} if max_num_seqs <= ceiling else set()
    tokens = max_num_batched_tokens or ceiling
    top = min(tokens, ceiling)
    sizes = {s for s in [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, top + 1, 16))
             if s <= top}
    if max_num_batched_tokens and max_num_batched_tokens <= top:
        sizes.add(max_num_batched_tokens)
    sizes |= {d for d in decode if d <= tokens}
    return sorted(sizes)


def full_decode_sizes(sizes: list[int], max_num_seqs: int, num_speculative_tokens: int = 0
                      ) -> list[int]:
    """The FULL decode graphs of FULL_AND_PIECEWISE (0.33 `cudagraph_dispatcher.py::
    initialize_cudagraph_keys`): the capture sizes from q to q x max_num_seqs."""
    q = 1 + num_speculative_tokens
    return [s for s in sizes if q <= s <= q * max_num_seqs]


def per_graph_bytes(num_layers: int) -> int:
    """What each capture after a mode's first adds (CUDAGRAPH_BYTES_PER_LAYER per decoder
    layer), at least vLLM's 1 MiB floor."""
    return max(CUDAGRAPH_MIN_PER_GRAPH, num_layers * CUDAGRAPH_BYTES_PER_LAYER)


def cudagraph_bytes(shapes: Shapes, batch: BatchSettings, version: tuple[int, ...], *,
                    tp: int = 1, num_layers: int = 0, enforce_eager: bool = False,
                    blackwell: bool = False, num_speculative_tokens: int = 0) -> int:
    """profile_cudagraph_memory's estimate, subtracted from 0.20 unless --enforce-eager:
    the first capture of the largest size (its eager warm-up's buffers in the regular pool
    and the capture's in the graph pool: twice the forward's) plus, per mode, `n - 1` later
    graphs of `per_graph_bytes` -- piecewise graphs for every capture size, full decode graphs
    for the sizes up to q x max_num_seqs (FULL_AND_PIECEWISE). The drafter's own graphs are
    not in 0.33's estimate (`profile_cudagraph_memory` counts the target's and the encoder's);
    an attention backend that cannot replay multi-token uniform decode (FlashInfer with
    drafts) drops the FULL graphs, which is not modelled."""
    if not subtracts_cudagraphs(version, enforce_eager):
        return 0
    sizes = capture_sizes(batch.max_num_seqs, version,
                          max_num_batched_tokens=batch.max_num_batched_tokens,
                          blackwell=blackwell, num_speculative_tokens=num_speculative_tokens)
    piecewise = len(sizes)
    full = len(full_decode_sizes(sizes, batch.max_num_seqs, num_speculative_tokens))
    first = 2 * sizes[-1] * forward_bytes_per_token(shapes, tp)
    later = (piecewise - 1) + max(0, full - 1)
    return first + later * per_graph_bytes(num_layers)


def eagle_draft_bytes(spec: ModelSpec, num_draft_layers: int) -> int | None:
    """The weights an EAGLE head adds (vLLM `llama_eagle.py`, `spec_decode/eagle.py::
    EagleProposer.load_model`): `num_draft_layers` decoder layers of the target's shape
    (q/k/v/o, gate/up/down, two norms) and `fc`, the 2h -> h projection of the concatenated
    token embedding and target hidden state, in the model dtype; the embeddings and the LM head
    are the target's own (shared when the vocabularies match, so they add nothing). None when
    the spec lacks the shapes."""
    from kvplan.core.layers import FullAttention, SlidingWindow

    h, inter, heads = spec.hidden_size, spec.intermediate_size, spec.num_attention_heads
    attn = next((x for x in spec.layers if isinstance(x, (FullAttention, SlidingWindow))),
                None)
    if not (num_draft_layers and h and inter and heads and attn is not None):
        return None
    q = heads * attn.head_dim
    kv = attn.num_kv_heads * attn.head_dim
    layer = h * q + 2 * h * kv + q * h + 3 * h * inter + 2 * h
    return (num_draft_layers * layer + 2 * h * h) * ACTIVATION_BYTES


# --- 5. pipeline stages' weights --------------------------------------------------------------

# --- LoRA: the adapters' GPU slots -------------------------------------------------------------
#
# With --enable-lora, vLLM wraps every module its LoRA manager supports (lora/utils.py
# get_supported_lora_modules: every linear layer, and the model's `embedding_modules`, embed_tokens
# and lm_head for Llama / Qwen) and each wrapper allocates zeroed slots for `max_loras` adapters of
# `max_lora_rank` in the LoRA dtype (config/lora.py: "auto", the model dtype), inside the
# model load's DeviceMemoryProfiler, so "Model loading took" includes them
# (v1/worker/gpu/model_runner.py load_model -> load_lora_model, 0.22.1). Per slice of a linear
# layer (lora/layers/base_linear.py create_lora_weights): A (rank x input on this rank), B (output
# on this rank x rank); a column-parallel layer (q/k/v, gate/up: one slice each) takes the whole
# input and its output split over TP, a row-parallel one (o, down) its input split and the whole
# output. VocabParallelEmbeddingWithLoRA: A (vocab x rank), B (hidden x rank); LogitsProcessorWith-
# LoRA: A (rank x hidden), B (vocab x rank), each over the whole vocabulary. The punica wrapper's
# index tensors (max_num_batched_tokens int64s) and the dummy run's fp32 shrink buffers (slices x
# tokens x rank) are under a MiB at 2,048 tokens and not counted. Read in 0.22.1; the LoRA of
# fused MoE experts is not modelled.
DEFAULT_MAX_LORAS = 1  # config/lora.py LoRAConfig.max_loras
DEFAULT_MAX_LORA_RANK = 16  # config/lora.py LoRAConfig.max_lora_rank


@record
class LoraSlots:
    """The LoRA slot bytes one rank allocates: per decoder layer (its attention and dense MLP
    projections), the input embedding's and the LM head's."""

    layer_bytes: int
    embedding_bytes: int
    lm_head_bytes: int


def lora_slots(spec: ModelSpec, tp: int = 1, max_loras: int = DEFAULT_MAX_LORAS,
               max_lora_rank: int = DEFAULT_MAX_LORA_RANK) -> LoraSlots | None:
    """What `max_loras` slots of rank `max_lora_rank` hold on one TP rank (see above); None
    when the spec lacks the shapes (hidden, vocabulary, MLP width, an attention layer)."""
    from kvplan.core.layers import FullAttention, SlidingWindow

    h, vocab, inter = spec.hidden_size, spec.vocab_size, spec.intermediate_size
    heads = spec.num_attention_heads
    attn = next((x for x in spec.layers if isinstance(x, (FullAttention, SlidingWindow))), None)
    if not (h and vocab and heads and attn is not None):
        return None
    r = max_lora_rank
    # QKVParallelLinear: KV heads split over TP, replicated when fewer than the ranks
    q, kv = heads * attn.head_dim, max(1, attn.num_kv_heads // tp) * attn.head_dim
    qkv = 3 * r * h + (q // tp + 2 * kv) * r  # three column-parallel slices
    o = r * q // tp + h * r  # row-parallel
    mlp = 2 * r * h + 2 * (inter // tp) * r + r * (inter // tp) + h * r if inter else 0
    embedding = vocab * r + h * r
    lm_head = r * h + vocab * r
    if spec.tie_word_embeddings:
        lm_head += embedding  # the tied head is an embedding module of its own path too
    unit = max_loras * ACTIVATION_BYTES
    return LoraSlots((qkv + o + mlp) * unit, embedding * unit, lm_head * unit)

