"""The memory budget: how many bytes each engine leaves for the KV cache on one GPU.

    vLLM     total x gpu_memory_utilization - weights - activation peak - non-torch
             (- CUDA graphs from 0.20, unless --enforce-eager)
    SGLang   free_after_load - free_before_load x (1 - mem_fraction_static)
    TRT-LLM  (total - profiled peak) x free_gpu_memory_fraction
    HF       total - weights - activations (nothing is reserved up front)

or a measured budget given directly (`--kv-memory 57.65GiB`, vLLM's
`--kv-cache-memory-bytes`). "total" is the memory the device reports to the framework
(kvplan.sources.gpus `memory_bytes`), never the marketing figure.
engine-kv-sizing.md §1.6, §2.1-2.2, §3.

Estimating what only a profile run measures (documented in docs/engine-accuracy.md):

- Weights per rank: `num_params` in the weight format; 4-bit and 8-bit formats keep the
  embeddings and LM head in 16 bit (AWQ/GPTQ/FP8 checkpoints do); the layers are split
  over pipeline stages as `get_pp_indices` splits them, the input embedding sits on the first
  stage and the LM head on the last; tensor parallelism divides everything (vocab-parallel
  embeddings included).
- vLLM's profile run (activation peak, non-torch memory, CUDA graphs, the dummy batch's
  defaults by version and GPU): kvplan.engines.vllm_profile, each term citing the vLLM
  source it follows.

When the model's hidden size, MLP width and vocabulary are unknown they are estimated
(`estimate_dims`): hidden = attention heads x head_dim, MLP width from the parameters per
layer, vocabulary 128,256 (Llama 3's). Specs read from config.json carry the real ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from kvplan.core.errors import BadInputError, NoKVMemoryError
from kvplan.core.layers import MLA, FullAttention
from kvplan.core.record import record
from kvplan.core.sizing import pp_stages
from kvplan.core.units import human_bytes
from kvplan.core.spec import ModelSpec
from kvplan.core.weights import ExpertLoad, VocabSplit
from kvplan.engines.vllm_profile import (
    CUDA_CONTEXT_BYTES,
    KERNELS_BYTES,
    Shapes,
    forward_bytes,
    forward_bytes_per_token,
    shapes_of,
)

SCHEMA = "kvplan.budget/1"
GIB = 2**30

# CUDA memory outside torch that TRT-LLM and transformers see (the CUDA context and the
# kernels a forward pass loads): vllm_profile's device constants.
NON_TORCH_BYTES = CUDA_CONTEXT_BYTES + KERNELS_BYTES
ACTIVATION_BYTES = 2  # activations in bf16/fp16
DEFAULT_VOCAB = 128_256  # Llama 3's vocabulary, when the model's is unknown
SGLANG_INIT_BYTES = int(0.5 * GIB)  # CUDA context + NCCL before SGLang measures free memory


# --- model dimensions ---------------------------------------------------------------------

@record
class ModelDims:
    """The sizes the budget needs besides the KV layers (config.json: hidden_size,
    intermediate_size (MoE: the active experts' width), vocab_size, tie_word_embeddings)."""

    hidden_size: int
    intermediate_size: int
    vocab_size: int
    tied_embeddings: bool = False
    estimated: bool = False

    @property
    def embedding_params(self) -> int:
        """Input embedding plus LM head (one matrix when tied)."""
        return self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)


def estimate_dims(spec: ModelSpec) -> ModelDims:
    """Dimensions guessed from the spec (see the module docstring); `estimated=True`."""
    attn = next((x for x in spec.layers if isinstance(x, FullAttention)), None)
    heads = spec.num_attention_heads or 32
    if attn is not None:
        hidden = heads * attn.head_dim
        q_kv_params = 2 * hidden * hidden + 2 * hidden * attn.num_kv_heads * attn.head_dim
    elif spec.is_mla:
        mla = next(x for x in spec.layers if isinstance(x, MLA))
        hidden = heads * 128  # DeepSeek-V2/V3: 128-wide value heads
        q_kv_params = 2 * hidden * hidden + hidden * (mla.kv_lora_rank + mla.qk_rope_head_dim)
    else:
        hidden = heads * 128
        q_kv_params = 4 * hidden * hidden
    vocab = DEFAULT_VOCAB
    inter = round(3.5 * hidden)  # Llama's ratio when the parameter count is unknown
    if spec.num_params:
        per_layer = (spec.num_params - 2 * vocab * hidden) / max(1, spec.num_layers)
        guess = (per_layer - q_kv_params) / (3 * hidden)
        # MoE layers hold every expert; the activations see only the active ones, so the
        # width is clipped to what dense models use (2.5 to 6 x hidden).
        inter = int(min(max(guess, 2.5 * hidden), 6 * hidden))
    return ModelDims(hidden, inter, vocab, tied_embeddings=False, estimated=True)


# --- weights ------------------------------------------------------------------------------

@record
class WeightFormat:
    """How checkpoint weights are stored: bits per weight plus per-group scales/zeros."""

    name: str
    bits: int
    group_size: int = 0
    group_bits: int = 0  # scale (+ zero-point) bits per group
    keeps_embeddings_16bit: bool = False
    description: str = ""

    def bits_per_weight(self) -> Fraction:
        extra = Fraction(self.group_bits, self.group_size) if self.group_size else Fraction(0)
        return self.bits + extra


WEIGHT_FORMATS: dict[str, WeightFormat] = {f.name: f for f in (
    WeightFormat("bf16", 16, description="bfloat16"),
    WeightFormat("fp16", 16, description="float16"),
    WeightFormat("fp32", 32, description="float32 (vLLM serves it in bf16 with dtype=auto)"),
    WeightFormat("fp8", 8, keeps_embeddings_16bit=True,
                 description="fp8 e4m3, per-channel/tensor scales (negligible)"),
    WeightFormat("int8", 8, keeps_embeddings_16bit=True, description="int8 (W8A8/W8A16)"),
    WeightFormat("awq", 4, 128, 16 + 4, True,
                 description="AWQ int4, group 128: fp16 scale + 4-bit zero per group"),
    WeightFormat("gptq", 4, 128, 16 + 4, True,
                 description="GPTQ int4, group 128: fp16 scale + packed 4-bit zero per group"),
    WeightFormat("int4", 4, 128, 16, True, description="int4, group 128, fp16 scale"),
    WeightFormat("mxfp4", 4, 32, 8, True,
                 description="MXFP4: e2m1 values, one e8m0 scale per 32 (gpt-oss experts)"),
    WeightFormat("nvfp4", 4, 16, 8, True,
                 description="NVFP4: e2m1 values, one fp8 scale per 16"),
    # bitsandbytes NF4 + double quantization: a uint8 absmax per 64 (the fp32 absmax per
    # 256 blocks, 1/8 bit a block, is left out of this spread-from-a-count estimate)
    WeightFormat("bnb-4bit", 4, 64, 8, True,
                 description="bitsandbytes NF4, blocksize 64, double quantization"),
    WeightFormat("bnb-8bit", 8, keeps_embeddings_16bit=True,
                 description="bitsandbytes LLM.int8: int8 weights, fp32 row scales"),
)}
_WEIGHT_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32",
                   "auto": "auto", "int4-awq": "awq", "awq-int4": "awq", "int4-gptq": "gptq",
                   "fp8_e4m3": "fp8", "w8a8": "int8", "w4a16": "int4",
                   "bitsandbytes": "bnb-4bit", "bnb": "bnb-4bit", "nf4": "bnb-4bit",
                   "bnb-nf4": "bnb-4bit", "bnb-int8": "bnb-8bit", "llm.int8": "bnb-8bit"}


def weight_format(name: str, model_dtype: str = "bf16") -> WeightFormat:
    key = _WEIGHT_ALIASES.get(name.strip().lower(), name.strip().lower())
    if key == "auto":
        key = "bf16" if model_dtype == "fp32" else model_dtype
    if key not in WEIGHT_FORMATS:
        raise BadInputError(f"unknown weights dtype {name!r}",
                            "valid: auto, " + ", ".join(WEIGHT_FORMATS))
    return WEIGHT_FORMATS[key]


@record
class WeightSplit:
    """Weight bytes of the whole model split into embeddings/LM head and the layers."""

    embedding_bytes: int  # input embedding (+ LM head when tied)
    lm_head_bytes: int  # the untied LM head (0 when tied)
    layer_bytes: int  # all decoder layers together

    @property
    def total_bytes(self) -> int:
        return self.embedding_bytes + self.lm_head_bytes + self.layer_bytes


def weight_split(spec: ModelSpec, fmt: WeightFormat, dims: ModelDims | None = None,
                 total_bytes: int | None = None) -> WeightSplit:
    """Weights of the model in `fmt` (or a measured total, split in the same proportions)."""
    if spec.num_params is None and total_bytes is None:
        raise BadInputError(
            f"{spec.name} has no parameter count, so its weights cannot be estimated",
            "give the weights' size (--weights-memory 15GiB, as the engine logged 'Model "
            "loading took'), or the KV budget itself (--kv-memory)")
    dims = dims or estimate_dims(spec)
    vocab_hidden = dims.vocab_size * dims.hidden_size
    num_params = spec.num_params or 0
    emb_bits = 16 if fmt.keeps_embeddings_16bit else fmt.bits
    emb_params = min(vocab_hidden, num_params)
    head_params = 0 if dims.tied_embeddings else min(vocab_hidden, num_params - emb_params)
    layer_params = max(0, num_params - emb_params - head_params)
    embedding = emb_params * emb_bits // 8
    head = head_params * emb_bits // 8
    layers = math.ceil(layer_params * fmt.bits_per_weight() / 8)
    if total_bytes is not None:
        whole = embedding + head + layers
        if whole <= 0:
            return WeightSplit(0, 0, total_bytes)
        embedding = total_bytes * embedding // whole
        head = total_bytes * head // whole
        layers = total_bytes - embedding - head
    return WeightSplit(embedding, head, layers)


def stage_weight_bytes(spec: ModelSpec, split: WeightSplit, tp: int = 1, pp: int = 1,
                       shares: Sequence[int] | None = None) -> tuple[int, ...]:
    """Weight bytes on one GPU of each pipeline stage (layers as get_pp_indices splits them,
    in proportion to `shares` when the layers differ; the input embedding on the first stage,
    the LM head on the last; all divided by TP)."""
    stages = pp_stages(spec.num_layers, pp)
    weights = list(shares) if shares else [1] * spec.num_layers
    whole = max(1, sum(weights))
    out = []
    for i, (a, b) in enumerate(stages):
        part = split.layer_bytes * sum(weights[a:b]) // whole
        if i == 0:
            part += split.embedding_bytes
        if i == pp - 1:
            tied_copy = pp > 1 and not split.lm_head_bytes  # tied: the last stage's own copy
            part += split.embedding_bytes if tied_copy else split.lm_head_bytes
        out.append(part // tp)
    return tuple(out)


def stage_weights(spec: ModelSpec, weights: str | WeightFormat = "auto",
                  weights_bytes: int | None = None, tp: int = 1, pp: int = 1,
                  dims: ModelDims | None = None, ep: int = 1,
                  expert_load: ExpertLoad | None = None, vocab: VocabSplit | None = None
                  ) -> tuple[tuple[int, ...], str]:
    """Weight bytes on one GPU of each pipeline stage, and the format assumed and why: the
    one place every engine's weights term comes from.

    In order: a measured total (`weights_bytes`, --weights-memory) spread as `weight_split`
    spreads it; else the tensor inventory (kvplan.core.weights) in the checkpoint's own format
    (its quantization_config) or the one `weights` names (--weights-dtype: an engine
    quantizing at load), tensor by tensor as the engine places them; else, for families the
    inventory does not model, the published checkpoint total or `num_params` in the format,
    spread over embeddings and layers."""
    from kvplan.core.weights import weight_plan

    fmt = _format(spec, weights)
    shares = layer_weight_shares(spec)
    if weights_bytes is None:
        plan = weight_plan(spec, _load_name(spec, weights), tp, pp, ep, expert_load,
                           vocab=vocab)
        if plan is not None:
            return plan.stage_bytes, f"{plan.format}, from {plan.why}, {_TENSOR_BY_TENSOR}"
        if weights == "auto" and spec.checkpoint is not None:
            split = weight_split(spec, fmt, dims, spec.checkpoint.total_bytes)
            return (stage_weight_bytes(spec, split, tp, pp, shares=shares),
                    f"the published checkpoint's {spec.checkpoint.total_bytes:,} bytes "
                    f"({spec.checkpoint.source})")
    split = weight_split(spec, fmt, dims or dims_of(spec), weights_bytes)
    how = "measured" if weights_bytes else f"{fmt.description}, from num_params"
    return stage_weight_bytes(spec, split, tp, pp, shares=shares), how


# --- activations --------------------------------------------------------------------------

def forward_activation_bytes(dims: ModelDims, num_tokens: int, tp: int = 1) -> int:
    """Peak of one forward pass over `num_tokens` tokens (vllm_profile.forward_bytes_per_token:
    the MLP's gate/up output and activation, three hidden-size buffers, in bf16)."""
    shapes = Shapes(dims.hidden_size, dims.vocab_size, dims.intermediate_size)
    return num_tokens * forward_bytes_per_token(shapes, tp)


# --- budgets ------------------------------------------------------------------------------

@record
class Budget:
    """The KV budget of each pipeline stage (per GPU) and how it was reached."""

    schema: str
    engine: str
    version: str
    method: str  # "estimated" | "measured"
    total_memory_bytes: int  # what the GPU reports (0 when the budget was given)
    utilization: float  # gpu_memory_utilization / mem_fraction_static / free fraction
    requested_bytes: int  # the memory the engine lets itself use (total x utilization)
    weights_bytes: tuple[int, ...]  # per stage, per GPU
    activation_bytes: tuple[int, ...]
    non_torch_bytes: int
    cudagraph_bytes: int
    available_kv_cache_bytes: tuple[int, ...]  # per stage ("Available KV cache memory")
    notes: tuple[str, ...] = ()
    max_num_seqs: int | None = None  # the engine's sequence cap (vLLM max_num_seqs)
    max_num_batched_tokens: int | None = None

    @property
    def available(self) -> int:
        """The smallest stage's budget (the one that limits a shared block count)."""
        return min(self.available_kv_cache_bytes)


def measured_budget(kv_bytes: int, engine: str = "vllm", version: str = "", pp: int = 1
                    ) -> Budget:
    """A budget the engine printed (or --kv-cache-memory-bytes): used as is on every stage."""
    if kv_bytes <= 0:
        raise BadInputError(f"the KV budget must be positive, got {kv_bytes:,} bytes")
    return Budget(SCHEMA, engine, version, "measured", 0, 0.0, 0, (0,) * pp, (0,) * pp, 0, 0,
                  (kv_bytes,) * pp, ("KV budget given directly; no profiling estimate",))


def _check_positive(engine: str, stages: Sequence[int], total: int, weights: Sequence[int],
                    hint: str) -> None:
    """The "no memory left" check: a budget (GPU less weights and reserves) of zero or less
    on any pipeline stage is a NoKVMemoryError naming the worst stage."""
    worst = min(range(len(stages)), key=lambda i: stages[i])
    left, w = stages[worst], weights[worst]
    if left <= 0:
        raise NoKVMemoryError(
            f"no memory is left for the KV cache: {engine} budget on stage {worst} is "
            f"{human_bytes(left)} after {human_bytes(w)} of weights on a "
            f"{human_bytes(total)} GPU", hint, engine=engine, left_bytes=left,
            weights_bytes=w, memory_bytes=total)


def dims_of(spec: ModelSpec) -> ModelDims:
    """The spec's own shapes (config.json) when it has them, else `estimate_dims`."""
    if spec.hidden_size and spec.vocab_size:
        inter = spec.intermediate_size or 0
        if not inter and spec.num_experts_per_token and spec.moe_intermediate_size:
            inter = spec.num_experts_per_token * spec.moe_intermediate_size + \
                (spec.shared_expert_intermediate_size or 0)
        return ModelDims(spec.hidden_size, inter or round(3.5 * spec.hidden_size),
                         spec.vocab_size, bool(spec.tie_word_embeddings))
    return estimate_dims(spec)


def profile_shapes(spec: ModelSpec, dims: ModelDims | None) -> Shapes:
    """What vLLM's profile run allocates by: given dims, else the spec's shapes (MoE
    layers included), else the estimate."""
    if dims is None:
        own = shapes_of(spec)
        if own is not None:
            return own
        dims = estimate_dims(spec)
    return Shapes(dims.hidden_size, dims.vocab_size, dims.intermediate_size,
                  estimated=dims.estimated)


def layer_weight_shares(spec: ModelSpec) -> tuple[int, ...] | None:
    """Relative parameter counts of the decoder layers when they differ (DeepSeek's dense
    first layers beside MoE ones, interleaved MoE): attention is the same in every layer, the
    MLP is dense (3 x hidden x I) or MoE (experts x 3 x hidden x N + shared + router). None
    when every layer is alike or the shapes are unknown."""
    h, experts = spec.hidden_size, spec.num_experts
    if not (h and experts and spec.moe_intermediate_size and spec.intermediate_size
            and spec.num_params and spec.vocab_size):
        return None
    first = spec.first_dense_layers or 0
    step = spec.moe_layer_step or 1
    moe_mlp = experts * 3 * h * spec.moe_intermediate_size + experts * h + \
        3 * h * (spec.shared_expert_intermediate_size or 0)
    dense_mlp = 3 * h * spec.intermediate_size
    is_moe = [i >= first and (i + 1) % step == 0 for i in range(spec.num_layers)]
    if all(is_moe) or not any(is_moe):
        return None
    embeddings = spec.vocab_size * h * (1 if spec.tie_word_embeddings else 2)
    mlp_total = sum(moe_mlp if m else dense_mlp for m in is_moe)
    attention = max(0, spec.num_params - embeddings - mlp_total) // spec.num_layers
    return tuple(attention + (moe_mlp if m else dense_mlp) for m in is_moe)


_TENSOR_BY_TENSOR = "tensor by tensor"  # how `stage_weights` says it used the inventory


def _from_inventory(weights_how: str) -> bool:
    """Whether `stage_weights` summed the tensor inventory (the engines then replay the
    allocator over it) rather than a measured or published total."""
    return weights_how.endswith(_TENSOR_BY_TENSOR)


def _format(spec: ModelSpec, weights: str | WeightFormat) -> WeightFormat:
    """The weights argument (a format or a --weights-dtype name) as a WeightFormat."""
    return weights if isinstance(weights, WeightFormat) else weight_format(weights, spec.dtype)


def _load_name(spec: ModelSpec, weights: str | WeightFormat) -> str:
    """The weights argument as `stage_weights` hands it to the inventory."""
    fmt = _format(spec, weights)
    return "auto" if weights == "auto" and spec.dtype != "fp32" else fmt.name


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
                ep: int = 1, dp: int = 1, num_draft_layers: int = 0,
                num_speculative_tokens: int = 0, check: bool = True) -> Budget:
    """vLLM's "Available KV cache memory" per stage (gpu_worker.determine_available_memory):
    `total x gpu_memory_utilization - (weights + activation peak + non-torch)` (0.11:
    one float, `int` at the end; 0.33: `ceil(total x util) - ...`), minus the CUDA-graph
    estimate from 0.20 (not with enforce_eager). The reserves are kvplan.engines.vllm_profile's
    model of the profile run unless given. `weights_bytes` is the whole model's measured size;
    `stage_weights_bytes` the bytes one GPU of each stage holds (overrides the estimate);
    `ep` the expert-parallel size (whole experts over `ep` GPUs: tp x dp with
    --enable-expert-parallel), `dp` the data-parallel ranks (their process groups' NCCL
    communicators count before 0.11). `num_draft_layers`: an EAGLE head's layers, whose weights
    (`vllm_profile.eagle_draft_bytes`) join the last stage unless `extra_weights_bytes` gives
    the draft's bytes; `num_speculative_tokens` widens the CUDA-graph capture sizes (from
    0.20's estimate). `check=False` returns a budget at or below zero instead of
    raising (vLLM logs such a value before it refuses to start)."""
    from kvplan.engines import vllm as engine
    from kvplan.engines import vllm_profile as vp

    ver = version or engine.LATEST
    util = gpu_memory_utilization if gpu_memory_utilization is not None else \
        engine.default_gpu_memory_utilization(ver)
    if not 0 < util <= 1:
        raise BadInputError(f"--gpu-memory-utilization must be in (0, 1], got {util}")
    if stage_weights_bytes is not None:
        per_stage, weights_how = list(stage_weights_bytes), "given per stage"
    else:
        expert_load = engine.mxfp4_expert_load(gpu_arch)
        stages, weights_how = stage_weights(spec, weights, weights_bytes, tp, pp, dims, ep=ep,
                                            expert_load=expert_load)
        per_stage = list(stages)
        if _from_inventory(weights_how):
            # what vLLM subtracts: the weights as memory_allocated counts them (allocator
            # blocks, rotary caches), not the tensors' own bytes
            per_stage = list(engine.loaded_weights(spec, _load_name(spec, weights), tp, pp,
                                                   ep, expert_load))
            weights_how += ", with vLLM's rotary caches and the allocator's rounding"
    if not extra_weights_bytes and num_draft_layers:
        extra_weights_bytes = vp.eagle_draft_bytes(spec, num_draft_layers) or 0
    per_stage[-1] += extra_weights_bytes // tp  # draft model on the last stage
    batch = vp.batch_settings(ver, gpu_memory_bytes, gpu_name,
                              spec.context_tokens(max_model_len), usage=usage,
                              max_num_batched_tokens=max_num_batched_tokens,
                              max_num_seqs=max_num_seqs,
                              enable_chunked_prefill=enable_chunked_prefill)
    shapes = profile_shapes(spec, dims)
    if activation_bytes is not None:
        acts = [activation_bytes] * pp
    else:
        fmt = _format(spec, weights)
        # W8A8 fp8 experts quantize their input (fused_experts_impl, use_fp8_w8a8)
        fp8_moe = fmt.name == "fp8" or (weights == "auto" and spec.quantization.method == "fp8")
        acts = [vp.activation_peak(shapes, batch, ver, tp=tp, ep=ep, dp=max(1, ep // tp),
                                   last_stage=i == pp - 1,
                                   flashinfer_sampler=flashinfer_sampler, fp8_moe=fp8_moe,
                                   vision=spec.vision).peak_bytes
                for i in range(pp)]
    data_parallel = max(dp, ep // tp)
    non_torch = vp.non_torch_bytes(ver, tp, pp, data_parallel, bool(spec.num_experts)) \
        if non_torch_bytes is None else non_torch_bytes
    if not vp.subtracts_cudagraphs(ver, enforce_eager):
        graphs = 0  # even when given: this version or mode does not subtract them
    elif cudagraph_bytes is not None:
        graphs = cudagraph_bytes
    else:
        from kvplan.engines.base import compute_capability

        capability = compute_capability(gpu_arch)
        graphs = vp.cudagraph_bytes(shapes, batch, ver, tp=tp, num_layers=max(
            b - a for a, b in pp_stages(spec.num_layers, pp)),
            blackwell=capability is not None and capability[0] == 10,
            num_speculative_tokens=num_speculative_tokens)
    requested = gpu_memory_bytes * util  # 0.11 keeps the float until the final int()
    requested_int = math.ceil(requested) if ver >= engine.V033 else int(requested)
    base = requested_int if ver >= engine.V033 else requested  # 0.33 request_memory: ceil
    available = tuple(int(base - (w + a + non_torch) - graphs)
                      for w, a in zip(per_stage, acts, strict=True))
    if check:
        _check_positive("vLLM", available, gpu_memory_bytes, per_stage,
                        "use more GPUs (--tp/--pp), a smaller weight format, a larger "
                        "--gpu-memory-utilization, or give --kv-memory as vLLM logged it")
    notes = [f"gpu_memory_utilization {util} ({'given' if gpu_memory_utilization else 'default'} "
             f"for vLLM {'.'.join(map(str, ver))})",
             f"weights: {weights_how}",
             f"activations: {'given' if activation_bytes is not None else 'estimated'} "
             f"({batch.engine} profile batch: max_num_batched_tokens "
             f"{batch.max_num_batched_tokens:,}, max_num_seqs {batch.max_num_seqs:,}, chunked "
             f"prefill {'on' if batch.chunked_prefill else 'off'})"]
    if graphs:
        notes.append(f"CUDA graphs: {'given' if cudagraph_bytes is not None else 'estimated'},"
                     " subtracted from vLLM 0.20 (--enforce-eager: none)")
    encoder = vp.encoder_profile(spec.vision, shapes.hidden_size, batch, ver, tp) \
        if activation_bytes is None else None
    if encoder is not None:
        notes.append(f"VLM encoder profile: {encoder.num_items:,} dummy images of "
                     f"{encoder.tokens_per_item:,} embeddings (encoder pass "
                     f"{encoder.pass_bytes:,} B; their {encoder.cache_bytes:,} B of embeddings "
                     "held through the forward and sampler)")
    if shapes.estimated and activation_bytes is None:
        notes.append("model dimensions estimated from the spec (hidden = heads x head_dim)")
    return Budget(SCHEMA, "vllm", ".".join(map(str, ver)), "estimated", gpu_memory_bytes, util,
                  requested_int, tuple(per_stage), tuple(acts), non_torch, graphs,
                  available, tuple(notes), max_num_seqs=batch.max_num_seqs,
                  max_num_batched_tokens=batch.max_num_batched_tokens)


# --- SGLang ---------------------------------------------------------------------------------

def prefill_graph_sizes(max_tokens: int) -> int:
    """How many prefill CUDA graphs SGLang captures up to `max_tokens` (its chunked prefill
    size): `generate_prefill_cuda_graph_batch_sizes` (0.5.23), 4..32 step 4, 48..256 step
    16, 288..512 step 32, 576..1024 step 64, 1280..4096 step 256, then step 512. 58 for
    8,192 (the 2026-08 H100 log lists them)."""
    steps = (range(4, 33, 4), range(48, 257, 16), range(288, 513, 32), range(576, 1025, 64),
             range(1280, 4097, 256), range(4608, max_tokens + 1, 512))
    return sum(1 for r in steps for size in r if size <= max_tokens)


SGLANG_PREFILL_GRAPHS = (0, 5, 23)  # the first version read that captures prefill graphs


def sglang_default_mem_fraction(gpu_memory_bytes: int, tp: int = 1, pp: int = 1,
                                version: tuple[int, ...] | None = None, dp: int = 1,
                                dp_attention: bool = False, mla: bool = False,
                                prefill_cuda_graph: bool | None = None) -> float:
    """mem_fraction_static when unset (engine-kv-sizing.md §2.2).

    Classic (<= 0.4): tp >= 16: 0.79, >= 8: 0.81, >= 4: 0.85, >= 2: 0.87, else 0.88.
    0.5.x: `round((gpu_MB - reserved_MB) / gpu_MB, 3)` with
    `reserved_MB = 512 + max(chunked_prefill, 2048) x 1.5 + tp x pp / 8 x 1024 + 2 x max_bs`,
    at least 10 GiB on GPUs > 60 GiB. With --enable-dp-attention (0.5.3
    `server_args.py::_handle_gpu_memory_settings`, "DP attention needs more padding")
    `+ max_bs x dp x 3`, and `+ max_bs x dp x 1.5` more when max_bs > 300 (before the floor).
    From 0.5.23 (`arg_groups` memory hook, `reserve_for_graph_mb`) the prefill CUDA graphs
    add `8 MB x len(prefill graph sizes)` (`prefill_graph_sizes`; MLA backends 1.5 GiB)
    before the floor; `prefill_cuda_graph=False` (--disable-prefill-cuda-graph) drops it.
    """
    if version is not None and version < (0, 5):
        for limit, fraction in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87)):
            if tp >= limit:
                return fraction
        return 0.88
    gpu_mb = gpu_memory_bytes / 2**20
    gib = gpu_memory_bytes / GIB
    chunked, max_bs = ((2048, 8) if gib < 20 else
                       (4096, 160 if tp >= 4 else 48) if gib < 35 else
                       (4096, 32) if gib < 60 else
                       (8192, 512 if tp >= 4 else 256) if gib < 90 else
                       (8192, 256) if gib < 160 else (16384, 512))
    reserved = 512 + max(chunked, 2048) * 1.5 + tp * pp / 8 * 1024 + 2 * max_bs
    if dp_attention and dp > 1:
        reserved += max_bs * dp * 3 + (max_bs * dp * 1.5 if max_bs > 300 else 0)
    if prefill_cuda_graph is None:
        prefill_cuda_graph = version is None or version >= SGLANG_PREFILL_GRAPHS
    if prefill_cuda_graph:
        reserved += 1.5 * 1024 if mla else prefill_graph_sizes(chunked) * 8
    if gib > 60:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mb - reserved) / gpu_mb, 3)


@record
class SglangMemory:
    """The two free-memory readings SGLang's profile_max_num_token uses (per GPU)."""

    free_before_load_bytes: int  # "Load weight begin. avail mem=..."
    free_after_load_bytes: int  # "Load weight end. ... avail mem=..."
    mem_fraction_static: float
    weights_bytes: int


def sglang_memory(spec: ModelSpec, gpu_memory_bytes: int, *, tp: int = 1, pp: int = 1,
                  version: tuple[int, ...] | None = None,
                  mem_fraction_static: float | None = None, weights: str = "auto",
                  weights_bytes: int | None = None, init_bytes: int | None = None,
                  dims: ModelDims | None = None, dp: int = 1,
                  dp_attention: bool = False) -> SglangMemory:
    """Predicted free memory before and after loading the weights on the fullest GPU. With
    DP attention the attention weights are split over tp // dp ranks only (replicated across
    the DP groups) while the MoE layers still span all tp ranks."""
    attn_tp = tp // dp if dp_attention and dp > 1 else tp
    ep = tp if attn_tp != tp and spec.num_experts else 1
    stages, weights_how = stage_weights(spec, weights, weights_bytes, attn_tp, pp, dims, ep=ep)
    if _from_inventory(weights_how):
        # what SGLang subtracts: profile_max_num_token reads free memory after the load
        # (get_available_gpu_memory: empty_cache, then mem_get_info), so the allocator's
        # segments holding the weights and the fp32 rotary caches, not the tensors' bytes
        from kvplan.engines import sglang as engine

        stages = engine.loaded_weight_bytes(spec, attn_tp, pp, _load_name(spec, weights), ep)
    per_gpu = max(stages)
    before = gpu_memory_bytes - (SGLANG_INIT_BYTES if init_bytes is None else init_bytes)
    fraction = mem_fraction_static if mem_fraction_static is not None else \
        sglang_default_mem_fraction(gpu_memory_bytes, tp, pp, version, dp, dp_attention,
                                    mla=spec.is_mla)
    after = before - per_gpu
    if after - before * (1 - fraction) <= 0:
        # SGLang keeps 1 - mem_fraction_static of the free memory back; the weights take
        # the rest
        raise NoKVMemoryError(
            f"no memory is left for the KV cache: SGLang keeps {1 - fraction:.0%} of "
            f"{human_bytes(before)} free and the weights take {human_bytes(per_gpu)} per GPU",
            "use more GPUs (--tp/--pp), a smaller weight format, or a larger "
            "--mem-fraction-static", engine="SGLang",
            left_bytes=int(after - before * (1 - fraction)), weights_bytes=per_gpu,
            memory_bytes=before)
    return SglangMemory(before, after, fraction, per_gpu)


# --- TensorRT-LLM -----------------------------------------------------------------------------
# The PyTorch backend (the default of `trtllm-serve` and the LLM API from 1.0) sizes the pool in
# `tensorrt_llm/_torch/pyexecutor/_util.py::KvCacheCreator.configure_kv_cache_capacity`
# (1.1-1.3, same in 2026 main): after loading the weights, autotuning and capturing the CUDA
# graphs it resets torch's peak, runs dummy context requests holding `max_num_tokens` tokens
# together (`_create_dummy_context_requests`: requests of min(max_num_tokens, max_seq_len - 1)
# tokens until the total is reached, one output token each), then
#     peak = torch allocated peak (weights + graphs + the forward's activations)
#            + max(device used - torch allocated, 0)  (CUDA context, cuBLAS, NCCL, the
#              temporary KV pool of the dummy requests)
#     available_kv = (total - peak + temporary KV) x free_gpu_memory_fraction   (_cal_max_memory)
# so the temporary pool cancels and kvplan's free memory is total - weights - activations -
# non-torch. The TRT-engine flow (C++ runtime, `trtllm-build` engines) measures free device
# memory after the engine, its execution context (activations sized by the builder for the
# engine's max_num_tokens) and the runtime/decoder buffers (sized by max_batch_size,
# max_seq_len and the vocabulary) are allocated (`kvCacheManager.cpp::calculateFreeMemBytes`);
# those are not modelled (docs/engine-accuracy.md section 7).
# llmapi/llm_args.py BaseLlmArgs.max_num_tokens default (the 1.1.0rc3 gpt-oss log prints
# "max_num_tokens=8192" with it unset)
TRTLLM_MAX_NUM_TOKENS = 8192
# TRT-LLM's PyTorch flow splits the embedding and LM head by vocabulary rows with no padding
# to 64: ceil(vocab / tp) rows a rank, the last one padded (tensorrt_llm/_torch/modules/
# embedding.py LMHead / Embedding with TensorParallelMode.COLUMN), so any TP starts
TRTLLM_VOCAB = VocabSplit(pad_to=1, exact=False)


def trtllm_allreduce_workspace_bytes(tp: int) -> int:
    """The custom all-reduce workspace each GPU allocates outside torch when TP > 1
    (`_torch/distributed/ops.py::AllReduce.__init__` -> `get_allreduce_workspace`, once per
    mapping): `tensorrt_llm/plugin/plugin.py::CustomAllReduceHelper.
    allocate_allreduce_fusion_workspace` holds an IPC buffer of `size x tp`, barriers of
    `256 x tp` and three Lamport buffers of `size x tp`, with `size` from
    `max_workspace_size_auto`: 16,000,000 B up to TP 2, 8,000,000 B beyond (1.0-1.2; 2026 main
    raises it to 64 MiB, not modelled: the release it lands in is not known)."""
    if tp <= 1:
        return 0
    size = 16_000_000 if tp <= 2 else 8_000_000
    return 4 * size * tp + 256 * tp


@record
class TrtllmMemory:
    """The terms of TensorRT-LLM's profiled peak on the fullest GPU (PyTorch backend)."""

    total_bytes: int  # "device total memory"
    weights_bytes: int  # "Memory used after loading model weights (inside torch)"
    activation_bytes: int  # "Memory dynamically allocated during inference (inside torch)"
    non_torch_bytes: int  # "Memory used outside torch" less the temporary KV pool
    max_num_tokens: int  # the dummy requests' tokens together

    @property
    def peak_bytes(self) -> int:
        """The logged "Peak memory during memory usage profiling (torch + non-torch)" less
        the temporary KV pool (which `_cal_max_memory` adds back)."""
        return self.weights_bytes + self.activation_bytes + self.non_torch_bytes

    @property
    def free_bytes(self) -> int:
        """`total - peak + temporary KV`: the memory the fraction is applied to."""
        return self.total_bytes - self.peak_bytes


def trtllm_memory(spec: ModelSpec, gpu_memory_bytes: int, *, tp: int = 1, pp: int = 1,
                  weights: str = "auto", weights_bytes: int | None = None,
                  activation_bytes: int | None = None, non_torch_bytes: int | None = None,
                  max_num_tokens: int = TRTLLM_MAX_NUM_TOKENS,
                  dims: ModelDims | None = None) -> TrtllmMemory:
    """The profiled peak's terms: the weights on the fullest GPU, one forward pass over the
    dummy requests' `max_num_tokens` tokens with the model's own shapes (hidden, MLP or the
    active experts; logits only for each request's last token, so no vocabulary-sized term)
    and the CUDA context with its kernels (+ the all-reduce workspace with TP)."""
    per_gpu = max(stage_weights(spec, weights, weights_bytes, tp, pp, dims,
                                vocab=TRTLLM_VOCAB)[0])
    acts = forward_bytes(profile_shapes(spec, dims), max_num_tokens, tp) \
        if activation_bytes is None else activation_bytes
    non_torch = NON_TORCH_BYTES + trtllm_allreduce_workspace_bytes(tp) \
        if non_torch_bytes is None else non_torch_bytes
    mem = TrtllmMemory(gpu_memory_bytes, per_gpu, acts, non_torch, max_num_tokens)
    _check_positive("TensorRT-LLM", [mem.free_bytes], gpu_memory_bytes, [per_gpu],
                    "use more GPUs (--tp/--pp) or a smaller weight format")
    return mem


def trtllm_free_bytes(spec: ModelSpec, gpu_memory_bytes: int, *, tp: int = 1, pp: int = 1,
                      weights: str = "auto", weights_bytes: int | None = None,
                      activation_bytes: int | None = None, non_torch_bytes: int | None = None,
                      max_num_tokens: int = TRTLLM_MAX_NUM_TOKENS,
                      dims: ModelDims | None = None) -> int:
    """`total - profiled peak + temporary KV` on the fullest GPU: what TRT-LLM multiplies by
    free_gpu_memory_fraction (`trtllm_memory`)."""
    return trtllm_memory(spec, gpu_memory_bytes, tp=tp, pp=pp, weights=weights,
                         weights_bytes=weights_bytes, activation_bytes=activation_bytes,
                         non_torch_bytes=non_torch_bytes, max_num_tokens=max_num_tokens,
                         dims=dims).free_bytes


def hf_free_bytes(spec: ModelSpec, gpu_memory_bytes: int, *, weights: str = "auto",
                  weights_bytes: int | None = None, activation_bytes: int | None = None,
                  batch_tokens: int = 2048, dims: ModelDims | None = None) -> int:
    """transformers reserves nothing: the cache may grow into whatever the weights and the
    forward pass leave (plus the CUDA context, counted as non-torch)."""
    dims = dims or estimate_dims(spec)
    w = sum(stage_weights(spec, weights, weights_bytes, 1, 1, dims)[0])
    acts = forward_activation_bytes(dims, batch_tokens) if activation_bytes is None \
        else activation_bytes
    free = gpu_memory_bytes - w - acts - NON_TORCH_BYTES
    _check_positive("transformers", [free], gpu_memory_bytes, [w],
                    "use a larger GPU or a smaller weight format")
    return free
