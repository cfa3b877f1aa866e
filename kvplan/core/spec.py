"""A model as kvplan sees it: a name, where its numbers came from, and its layers."""

from __future__ import annotations

from collections import Counter
from dataclasses import field

from kvplan.core.layers import ATTENTION_KINDS, MLA, Layer
from kvplan.core.quant import NONE, Quantization
from kvplan.core.record import record


@record
class Source:
    """Where a spec's numbers came from: a Hub repo and revision, a file, or a paper."""

    repo: str | None = None
    revision: str | None = None
    file: str | None = None
    sha256: str | None = None
    paper: str | None = None
    note: str | None = None

    def describe(self) -> str:
        if self.repo:
            rev = f"@{self.revision}" if self.revision else ""
            return f"hf:{self.repo}{rev}" + (f" ({self.file})" if self.file else "")
        return self.paper or self.file or self.note or "unknown"


@record
class Checkpoint:
    """The published checkpoint's weights: bytes per safetensors dtype, summed from its
    headers (or the Hub's listing), and where that figure comes from."""

    bytes_by_dtype: tuple[tuple[str, int], ...]  # (safetensors dtype, bytes), largest first
    source: str

    @property
    def total_bytes(self) -> int:
        return sum(b for _, b in self.bytes_by_dtype)


@record
class Block:
    """The sub-layers of one decoder layer, for models whose layers differ beyond their cache
    kind (ModelSpec.blocks): its token mixer and its feed-forward, each with its own pre-norm.

    mixer: "attention" (the layer's cache kind says which), "ssm" (the model's recurrent
    mixer, ModelSpec.ssm), "parallel_ssm" (the recurrent mixer beside the previous entry's
    attention, on its normed input: Falcon-H1), "linear" (one hidden x hidden matrix:
    Nemotron-NAS replace_with_linear) or None (no mixer: Nemotron-H MLP/MoE layers, NAS
    no_op).
    ffn: "mlp", "moe", "mlp+moe" (a dense MLP beside the experts: Gemma 4's MoE layers),
    "linear" or None; ffn_width: this layer's MLP width where it is not
    the model's intermediate_size (Nemotron-NAS ffn_mult)."""

    mixer: str | None
    ffn: str | None
    ffn_width: int | None = None


@record
class SharedBlocks:
    """Zamba2's shared transformer blocks (vLLM zamba2.py Zamba2AttentionDecoderLayer):
    `count` blocks (num_mem_blocks) that the hybrid layers use in turn, each attention over
    the hidden state concatenated with the embeddings (2 x hidden wide); every hybrid layer
    adds its own LoRA adapters of `adapter_rank` to the MLP's gate_up projection, and to q, k
    and v when `attention_adapters` (use_shared_attention_adapter)."""

    count: int
    adapter_rank: int
    attention_adapters: bool


@record
class SSMShapes:
    """The recurrent token mixer of a hybrid model's state layers, as its checkpoint stores
    it (kvplan.core.weights lists its tensors).

    kind: "mamba1" (Jamba: in_proj 2 x inner, depthwise conv, x_proj / dt_proj with a rank,
    A_log (inner x state), D), "mamba2" (Nemotron-H: heads x head_dim = inner, n_groups B/C
    groups, per-head dt_bias / A_log / D, gated norm), "gated_deltanet" (Qwen3-Next:
    num_heads value heads of inner / num_heads, n_groups key heads of d_state) or "kda"
    (Kimi Delta Attention: num_heads heads of d_state for q, k and v, each with its own short
    convolution, a low-rank forget gate f_a / f_b, a beta projection, an output gate) or
    "short_conv" (LFM2: in_proj to 3 x d_inner, a depthwise d_conv-wide convolution,
    out_proj; conv_bias on all three)."""

    kind: str
    d_inner: int  # mamba: expand x hidden or heads x head_dim; deltanet: value heads x dim
    d_state: int  # mamba: SSM state size; deltanet: key head dim
    d_conv: int  # the depthwise convolution's kernel
    num_heads: int = 0  # mamba2 heads; deltanet value heads
    n_groups: int = 0  # mamba2 B/C groups; deltanet key heads
    dt_rank: int = 0  # mamba1 only
    conv_bias: bool = True
    proj_bias: bool = False  # in_proj / out_proj carry biases
    inner_norms: bool = False  # Jamba: RMSNorms on dt, B and C inside the mixer
    full_rank_gate: bool = False  # KDA: a full-rank output gate g_proj (else g_a / g_b)
    bounded_gate: bool = False  # KDA: the forget gate has a lower bound (gate_lower_bound)
    gated_norm: bool = True  # mamba2: the gated RMSNorm's weight (Falcon-H1: mamba_rms_norm)


@record
class PerLayerInputs:
    """Gemma 3n's per-layer inputs and the modules around its layers, as vLLM gemma3n.py
    builds them (Gemma3nTextModel, Gemma3nDecoderLayer) from Gemma3nTextConfig: a second
    embedding of `vocab` rows (vocab_size_per_layer_input) giving every layer a `width`-wide
    input (hidden_size_per_layer_input), a projection of the hidden state to the same, the
    AltUp streams (altup_num_inputs: the projections into and out of them, per layer its
    router and coefficients) and per layer a LAuReL block of `laurel_rank`
    (kvplan.core.weights lists the tensors)."""

    width: int
    vocab: int
    altup_inputs: int
    laurel_rank: int


@record
class VisionTower:
    """A multimodal checkpoint's vision encoder and the projector into the text model, as its
    checkpoint stores them (kvplan.core.weights lists the tensors; the projector's text side
    is the spec's hidden_size).

    kind: "clip" (LLaVA), "moonvit" (Kimi-K3), "kimi_k25" (Kimi-K2.5's MoonViT), "siglip"
    (Gemma 3), "llama4" (Llama 4),
    "mllama" (Llama 3.2 Vision), "qwen2_vl" (Qwen2-VL), "qwen2_5_vl" (Qwen2.5-VL),
    "qwen3_vl" (Qwen3-VL, Qwen3.5), "qwen3_omni" (Qwen3-Omni's thinker: Qwen3-VL's shapes
    under thinker.visual), "qwen2_5_omni" (Qwen2.5-Omni's thinker: Qwen2.5-VL's),
    "exaone4_5" (EXAONE 4.5), "pixtral" (Mistral 3),
    "siglip2" (LFM2-VL), "radio" (Nemotron Parse) or "gemma4" (Gemma 4); the
    tensors each kind stores:
    docs/model-schema.md, "Vision towers and tensor layouts".
    """

    kind: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    patch_size: int
    image_size: int
    num_channels: int = 3
    num_global_layers: int = 0  # mllama: the gated global encoder
    max_num_tiles: int = 0  # mllama
    num_aspect_ratios: int = 0  # mllama: len(supported_aspect_ratios)
    output_dim: int = 0  # vision_output_dim (mllama, llama4)
    projector_input_dim: int = 0  # llama4 adapter
    projector_output_dim: int = 0  # llama4 adapter
    attention_size: int = 0  # moonvit: q / k / v width (qkv_hidden_size); 0 = hidden_size
    temporal_patch_size: int = 0  # qwen2_vl: frames per Conv3d patch (image_size unused)
    num_cls_tokens: int = 0  # radio: class and register tokens (ClsToken)
    # gemma4, exaone4_5: q heads, k/v heads and their size (q/k/v widths: heads x
    # head_dim); gemma4: the rows of each of its two (x, y) position tables
    # (position_embedding_size), and 1 when the tower stores std_bias / std_scale (config
    # standardize)
    num_heads: int = 0
    num_kv_heads: int = 0
    head_dim: int = 0
    # gemma4; qwen3_vl: num_position_embeddings; siglip2: num_patches
    position_table_size: int = 0
    standardize: int = 0
    num_deepstack: int = 0  # qwen3_vl: deepstack mergers (len(deepstack_visual_indexes))


@record
class AudioEncoder:
    """An audio encoder as its checkpoint stores it (kvplan.core.weights lists the tensors).
    kind "whisper" (Whisper's own encoder, its width the spec's hidden_size) and "voxtral"
    (Voxtral's Whisper encoder beside a decoder, hidden_size wide, and its projector from
    projector_input_dim, four frames' outputs stacked, to the text width): two convolutions
    over num_mel_bins, learned positions for max_positions frames, num_layers pre-LayerNorm
    blocks with biased q / v / out (k without) and an ffn_dim-wide MLP. kind "gemma4"
    (Gemma 4's USM-style conformer, hidden_size wide): two subsampling convolutions of
    conv_channels, num_layers conformer blocks (two feed-forward halves ffn_dim wide, an
    attention of num_heads with relative positions, a light convolution of conv_kernel
    taps), an output projection to projector_input_dim and the projection from it to the
    text width; clipped_linears: each of the blocks' linears stores four clipping bounds.
    kind "gemma3n" (Gemma 3n's conformer of the same family): the subsampling over
    num_mel_bins, the same blocks without clipping bounds or output projection, and the
    embedder's vocab_size hard-token rows, its two norms and the projection to the text
    width. kinds "qwen3_omni", "qwen2_5_omni": the Omni thinkers' (kvplan.core.weights)."""

    kind: str
    num_layers: int
    ffn_dim: int
    num_mel_bins: int
    max_positions: int
    hidden_size: int = 0  # the encoder's width; 0: the spec's (Whisper)
    # voxtral: multi_modal_projector.linear_1's input; gemma4: output_proj_dims (the
    # tower's output, embed_audio's input)
    projector_input_dim: int = 0
    num_heads: int = 0  # gemma4: attention heads (per_dim_scale is one head wide)
    conv_channels: tuple[int, ...] = ()  # gemma4: subsampling_conv_channels
    conv_kernel: int = 0  # gemma4: conv_kernel_size (the light convolution's taps)
    clipped_linears: bool = False  # gemma4: use_clipped_linears
    vocab_size: int = 0  # gemma3n: embed_audio.embedding's rows (audio_config.vocab_size)


@record
class Rope:
    """The rotary embedding as config.json sets it (`rope_scaling` / `rope_parameters`): what
    an engine needs to size the cos/sin caches it builds at load. Only the scaling's kind and
    numbers; the base frequency matters only as "the sliding layers have their own" (`local`,
    Gemma 3's rope_local_base_freq: a second cache, unscaled)."""

    scaling: str = "default"  # rope_type: default, linear, dynamic, yarn, llama3, longrope, ...
    factor: float = 1.0
    original_max_positions: int | None = None  # original_max_position_embeddings
    local: bool = False  # sliding-window layers use an unscaled rope of their own base
    # `mrope_section` present (Qwen2-VL's "type": "mrope"; Qwen2.5-VL, Qwen3-VL, Qwen3.5 and
    # the Omni models with rope_type "default" or "yarn"): the engine builds a multimodal
    # rotary embedding, whose cache an engine may make longer (kvplan.engines.shared.loading)
    mrope: bool = False
    # partial_rotary_factor: the rotary dim is int(head_size x this) (vLLM get_rope)
    partial: float = 1.0


@record
class TensorLayout:
    """How a checkpoint names and shapes a decoder's tensors where it differs from the generic
    decoder's (Llama's: q/k/v/o, a gated gate/up/down MLP, two RMSNorms without bias a layer,
    the router `mlp.gate`): the facts kvplan.core.weights lists tensors from. Set by
    kvplan.sources.families from the model's family (config.json model_type or the YAML's
    `family`); the default is the generic decoder, which `known` False marks as an assumption.
    Fields: `norms`, `qk_norm`, `mtp` and `requires`; their values and the models that use each:
    docs/model-schema.md, "Vision towers and tensor layouts".
    """

    known: bool = False  # kvplan lists this architecture's own tensors (else: generic decoder)
    norms: str = "pre"
    norm_bias: bool = False  # LayerNorms with a bias (GPT-2, Falcon)
    learned_positions: bool = False  # a max_context_tokens x hidden position table (wpe)
    position_offset: int = 0  # position rows beyond max_context_tokens (OPT: 2)
    embed_width: int = 0  # the embedding's width where not hidden (OPT-350m), projected in/out
    final_norm: bool = True  # a norm after the last layer (OPT's post-norm models: none)
    extra_embedding_rows: int = 0  # embedding rows beyond the vocabulary (Mllama: 8)
    fused_qkv: bool = False  # GPT-2's c_attn (3 x hidden) and c_proj, both with biases
    fused_qkv_bias: bool = True  # the fused projections carry biases (MPT no_bias, CodeGen: no)
    qkv_bias: bool = False  # q/k/v biases whatever attention_bias says (ChatGLM)
    o_proj_bias: bool = True  # attention_bias covers o_proj too (Qwen2: q/k/v only)
    dense_bias: bool = False  # o_proj carries a bias whatever attention_bias says (Phi)
    lm_head_bias: bool = False  # the untied LM head carries a bias (Phi)
    layer_scalar: bool = False  # one learned scalar a layer (Gemma 4's layer_scalar)
    attention_output_gate: bool = False  # q_proj also gives a gate: twice as wide (Qwen3-Next)
    attention_gate_proj: bool = False  # a separate self_attn.gate_proj, heads x head_dim (AFMoE)
    qk_norm: str | None = None
    attention_sinks: bool = False  # one learned sink per head (gpt-oss)
    cross_attention_gates: bool = False  # cross-attention q/k norms and tanh gates (Mllama)
    gated_mlp: bool = True  # MLPs and experts have a gate_proj (else up -> act -> down)
    mlp_bias: bool = False  # the MLP's linears carry biases (GPT-2)
    mlp_names: tuple[str, str] = ("up_proj", "down_proj")  # (up, down) of an ungated MLP
    mlp_act_params: tuple[str, ...] = ()  # one-element learned parameters of the MLP's act_fn
    router: str = "gate"  # the router's module under mlp (gpt-oss: router)
    # the router's per-expert fp32 score bias under mlp, where the spec has one (routing_bias)
    routing_bias: str = "gate.e_score_correction_bias"
    expert_bias: bool = False  # the experts' linears and the router carry biases (gpt-oss)
    shared_expert_gate: bool = False  # a sigmoid gate on the shared expert (Qwen2-MoE)
    mixer_module: str = "mixer"  # the recurrent mixer's module name in a layer
    mlp_module: str = "mlp"  # the MoE's module name in a layer (DeepSeek-V4: ffn)
    # the one module a layer's attention, MLP or MoE sits under in the checkpoint, where it is
    # not self_attn / mlp (Nemotron-H: mixer): the name quantization configs give them
    sublayer_module: str = ""
    compressed_blocks: bool = False  # DeepSeek-V4 layers: attn_norm / ffn_norm, hc mixes
    mtp: str = "deepseek_v3"
    # "whisper" (the audio encoder and the decoder's layers) or "mbart" (Nemotron Parse: a
    # RADIO vision encoder, ModelSpec.vision, and an mBART decoder); "" for a decoder only
    encoder_decoder: str = ""
    requires: tuple[str, ...] = ()


@record
class EngineTraits:
    """What an engine decides by the model's architecture (its class or model_type), not by
    a shape the spec carries: set by kvplan.sources.families, each from the rule's home in the
    engine's source; the engine module that reads a field holds what follows from it.

    sparse_mla: DeepSeek sparse attention (a config with index_topk: DeepSeek-V3.2, GLM-5):
    FLASHMLA_SPARSE / the NSA pool, fp8 stored as fp8_ds_mla, an indexer key cache.
    vllm_auto_fp8_ds_mla: vLLM's DeepseekV32ForCausalLM hook makes auto fp8_ds_mla too.
    llamacpp_swa: llama.cpp's loader for the GGUF architecture sets `swa_type`, so sliding or
    chunked layers get their own smaller cache (src/models/gemma2.cpp and the others named in
    kvplan.sources.families); other architectures attend over the whole context.
    sglang_hybrid_swa: SGLang's `is_hybrid_swa_model` lists the architecture: a separate
    sliding-window pool (model_config.py).
    tgi_fallback_attention: TGI's launcher (`resolve_attention`) forces paged /
    flashdecoding attention for the model_type (falcon, deepseek_v2).
    vllm_pp_every_stage_ends: vLLM's class makes embedding and LM head on every PP stage."""

    sparse_mla: bool = False
    # models/config.py MODELS_CONFIG_MAP in the 0.11.0 wheel; other sparse models keep auto as
    # the model dtype (0.33's GlmMoeDsaForCausalLM hook picks fp8 on SM10x only: not modelled)
    vllm_auto_fp8_ds_mla: bool = False
    llamacpp_swa: bool = False
    sglang_hybrid_swa: bool = False
    tgi_fallback_attention: bool = False
    vllm_pp_every_stage_ends: bool = False
    # vLLM does not multiply the model's length by its rope factor: the config's length is
    # already scaled (Gemma 3; kvplan.engines.vllm.config.derived_max_model_len)
    vllm_length_prescaled: bool = False
    # the vision tower's (num_hidden_layers, hidden_size) as SGLang's
    # ServerArgs.adjust_mem_fraction_for_vlm reads them from vision_config (server_args.py,
    # 0.4.10 on), by tower kind (kvplan.sources.families.SGLANG_VIT_READ); () for a text model or
    # a tower kind not listed there. Which releases apply it: the SGLang engine's rule
    sglang_vit: tuple[int, ...] = ()
    # the architecture class SGLang's multimodal_model_archs would name for the model ("": none
    # kvplan ties it to; kvplan.sources.families.SGLANG_VLM_ARCH)
    sglang_vlm_arch: str = ""


GENERIC_LAYOUT = TensorLayout()
NO_TRAITS = EngineTraits()


# What a reader takes as a rope: a factor in (0, MAX_ROPE_FACTOR] and an original context of
# at most MAX_ROPE_ORIGINAL_POSITIONS (real ones: factor <= 64, context <= 2**18)
MAX_ROPE_FACTOR = 1024
MAX_ROPE_ORIGINAL_POSITIONS = 2**24

# The most layers a model may describe, in every reader (config.json, YAML, GGUF): real
# models have at most a few hundred, and 10,000 keeps the layer lists, the weight inventory
# and the plan of an absurd file within about a second and 100 MiB (100,000 layers took
# 10-60 s and up to 1.2 GB)
MAX_LAYERS = 10_000


@record
class ModelSpec:
    name: str
    layers: tuple[Layer, ...]
    source: Source = field(default_factory=Source)
    display_name: str | None = None
    # the architecture's name (config.json model_type): shown and searched; the facts it
    # implies are `layout` and `traits`, which only kvplan.sources derives from it
    family: str | None = None
    # the classes config.json's `architectures` names (() for a YAML spec or a GGUF): what an
    # engine's registry of served architectures is asked (kvplan.engines.vllm.served)
    architectures: tuple[str, ...] = ()
    dtype: str = "bf16"
    max_context_tokens: int | None = None
    num_params: int | None = None
    num_attention_heads: int | None = None
    aliases: tuple[str, ...] = ()
    # --- shapes beyond the KV cache (config.json), for the weights and the budgets --------
    # Read once in kvplan.sources (hfconfig from config.json, yamlspec from the library's
    # `shapes:`); None = unknown (never guessed here).
    hidden_size: int | None = None
    vocab_size: int | None = None
    # Width of a dense MLP layer. MoE models whose every layer is MoE (Mixtral, gpt-oss)
    # have none: their config's intermediate_size is the expert width (moe_intermediate_size).
    intermediate_size: int | None = None
    tie_word_embeddings: bool | None = None
    num_experts: int | None = None  # routed experts of one MoE layer
    num_experts_per_token: int | None = None  # routed experts each token uses
    moe_intermediate_size: int | None = None  # width of one routed expert
    num_shared_experts: int | None = None  # always-on experts beside the routed ones
    # Width of the shared experts' MLP together (Qwen2-MoE shared_expert_intermediate_size;
    # DeepSeek: n_shared_experts x moe_intermediate_size).
    shared_expert_intermediate_size: int | None = None
    # Layer i has an MoE MLP when i >= first_dense_layers and (i + 1) % moe_layer_step == 0
    # (DeepSeek first_k_dense_replace; Llama 4 interleave_moe_layer_step; Qwen
    # decoder_sparse_step); a dense MLP otherwise.
    first_dense_layers: int | None = None
    moe_layer_step: int | None = None
    # the router keeps a per-expert score correction bias (DeepSeek-V3 topk_method noaux_tc,
    # MiniMax use_routing_bias)
    routing_bias: bool | None = None
    # MLA projections (DeepSeek-V2/V3): the query's low rank (None: a full-rank query), the
    # non-rotary part of a query/key head and the value head size.
    q_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    mla_v_head_dim: int | None = None
    index_n_heads: int | None = None  # DeepSeek sparse attention indexer heads (V3.2, GLM-5)
    attention_bias: bool | None = None  # q/k/v (and o) projections carry biases
    num_nextn_predict_layers: int | None = None  # DeepSeek MTP layers stored in the checkpoint
    # per decoder layer, where layers differ beyond their cache kind (Nemotron-H's one
    # sub-layer per layer, Nemotron-NAS's no_op / linear / per-layer widths); None: every
    # layer is its mixer (by cache kind) + an MLP or MoE (is_moe_layer)
    blocks: tuple[Block, ...] | None = None
    ssm: SSMShapes | None = None  # the recurrent mixer of the state layers
    vision: VisionTower | None = None  # a multimodal checkpoint's vision encoder + projector
    # an encoder-decoder's encoder (Whisper) or a decoder's audio tower (Voxtral)
    audio_encoder: AudioEncoder | None = None
    # the config's towers the weights leave out, named by key and model_type ("vision_config
    # (qwen3_vl)"): a tower kvplan does not lay out is said, never guessed
    uncounted_towers: tuple[str, ...] = ()
    shared_blocks: SharedBlocks | None = None  # Zamba2's shared attention blocks
    # (layer, the layer whose K and V it reuses): Gemma 3n's / Gemma 4's KV-shared layers
    # cache nothing (NoCache) but keep q / k / v / o projections of their target's shapes
    kv_shared: tuple[tuple[int, int], ...] = ()
    per_layer_inputs: PerLayerInputs | None = None  # Gemma 3n: per-layer inputs, AltUp, LAuReL
    mla_output_gate: bool | None = None  # MLA with a sigmoid output gate g_proj (Kimi-K3)
    # bidirectional attention over an image's or a video's tokens (Gemma 4 text_config
    # use_bidirectional_attention "vision"): engines that take such a model's largest item
    # in one batch read it (vLLM: kvplan.engines.vllm.memory.mm_item_tokens_floor)
    vision_prefix_lm: bool | None = None
    # attention residuals (Kimi-K3 attn_res_block_size): per layer a norm and a 1 x hidden
    # projection before attention and before the MLP, and one pair at the output
    attention_residuals: bool | None = None
    # latent MoE: routed experts work in this width, with a down / up projection around them
    # (Kimi-K3 routed_expert_hidden_size) and, when moe_latent_norm, a norm on the latent
    moe_latent_size: int | None = None
    moe_latent_norm: bool | None = None
    # DeepSeek-V4: hyper-connections (hc_mult residual streams, hc_* mixing tensors per
    # sub-layer and at the head), a grouped low-rank output projection (o_groups x
    # o_lora_rank), hash routing on the first num_hash_layers layers (a token -> experts
    # table instead of the router's bias), and the routed experts' own format (expert_dtype)
    hyper_connections: int | None = None
    o_groups: int | None = None
    o_lora_rank: int | None = None
    num_hash_layers: int | None = None
    expert_quantization: Quantization | None = None
    rope: Rope | None = None  # rotary scaling (None: unscaled, or not stated)
    # --- facts by architecture (kvplan.sources.families sets them from the family) ------
    layout: TensorLayout = GENERIC_LAYOUT  # how the checkpoint lays out its tensors
    traits: EngineTraits = NO_TRAITS  # what engines decide by the architecture
    # --- the checkpoint ------------------------------------------------------------------
    quantization: Quantization = NONE  # its weight format (config.json quantization_config)
    checkpoint: Checkpoint | None = None  # its published bytes, when known
    # what the reader assumed (--assume-standard-attention): printed with every result
    warnings: tuple[str, ...] = ()
    # fields the config.json leaves out that the reader took, as the engine's config object
    # does, from the model type's config class default ("mamba_expand = 2 (absent:
    # GraniteMoeHybridConfig, transformers 5.19.0 default)"): said in the results' notes
    class_defaults: tuple[str, ...] = ()

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def context_tokens(self, max_model_len: int | None = None) -> int:
        """The context an engine plans for: its max_model_len, else the model's own maximum,
        else 8,192 tokens when the spec states none."""
        return max_model_len or self.max_context_tokens or 8192

    def kind_counts(self) -> dict[str, int]:
        return dict(Counter(layer.kind for layer in self.layers))

    @property
    def attention_layers(self) -> tuple[Layer, ...]:
        return tuple(layer for layer in self.layers if isinstance(layer, ATTENTION_KINDS))

    @property
    def is_mla(self) -> bool:
        return any(isinstance(layer, MLA) for layer in self.layers)

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts)

    def is_moe_layer(self, i: int) -> bool:
        """Whether decoder layer i has a routed-expert MLP (see first_dense_layers)."""
        if not self.num_experts:
            return False
        return i >= (self.first_dense_layers or 0) and (i + 1) % (self.moe_layer_step or 1) == 0

    @property
    def num_moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.num_layers))

    def max_tp(self) -> list[int]:
        """KV-head counts that bound tensor parallelism (empty for pure MLA/state models)."""
        return sorted({layer.num_kv_heads for layer in self.layers
                       if isinstance(layer, ATTENTION_KINDS)})
