"""Weight bytes on each GPU of each pipeline stage: the one place every engine's weights
term comes from.

In order: a measured total (--weights-memory) spread over embeddings and layers; else the
tensor inventory (kvplan.core.weights) in the checkpoint's own format or the one
--weights-dtype names, tensor by tensor as the engine places them; else, for families the
inventory does not model, the published checkpoint total or `num_params` in the format.
4-bit and 8-bit formats keep the embeddings and LM head in 16 bit (AWQ/GPTQ/FP8 checkpoints
do); the layers are split over pipeline stages as vLLM's `get_pp_indices` splits them, the
input embedding on the first stage and the LM head on the last; TP divides everything.

When the model's hidden size, MLP width and vocabulary are unknown they are estimated
(`estimate_dims`): hidden = attention heads x head_dim, MLP width from the parameters per
layer, vocabulary 128,256 (Llama 3's). Specs read from config.json carry the real ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from kvplan.core.errors import BadInputError
from kvplan.core.layers import MLA, FullAttention
from kvplan.core.record import record
from kvplan.core.sizing import pp_stages
from kvplan.core.spec import ModelSpec
from kvplan.core.weights import ExpertLoad, VocabSplit

DEFAULT_VOCAB = 128_256  # Llama 3's vocabulary, when the model's is unknown


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
                 total_bytes: int | None = None, exact_tables: bool = False) -> WeightSplit:
    """Weights of the model in `fmt` (or a measured total, split in the same proportions).

    `exact_tables`: with a total and the model's own shapes (not estimated), the embedding
    and an untied LM head keep their own bytes, vocab x hidden values each at the width
    `fmt` keeps embeddings in, and the layers take the rest of the total (llama.cpp, whose
    token_embd tensor is exactly that); without, all three are scaled alike."""
    if spec.num_params is None and total_bytes is None:
        from kvplan.core.weights import unsized_weights, unsized_weights_hint

        raise BadInputError(unsized_weights(spec),
                            unsized_weights_hint("--weights-memory 15GiB", "--kv-memory"))
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
    if total_bytes is not None and exact_tables and not dims.estimated:
        table = vocab_hidden * emb_bits // 8
        tables = table if dims.tied_embeddings else 2 * table
        if tables <= total_bytes:
            return WeightSplit(table, tables - table, total_bytes - tables)
    if total_bytes is not None:
        whole = embedding + head + layers
        if whole <= 0:
            return WeightSplit(0, 0, total_bytes)
        embedding = total_bytes * embedding // whole
        head = total_bytes * head // whole
        layers = total_bytes - embedding - head
    return WeightSplit(embedding, head, layers)


def stage_weight_bytes(spec: ModelSpec, split: WeightSplit, tp: int = 1, pp: int = 1,
                       shares: Sequence[int] | None = None,
                       partition: Sequence[int] | None = None,
                       every_stage_ends: bool = False) -> tuple[int, ...]:
    """Weight bytes on one GPU of each pipeline stage (layers as get_pp_indices splits them,
    in proportion to `shares` when the layers differ; the input embedding on the first stage,
    the LM head on the last, or both on every stage with `every_stage_ends`; all divided by
    TP; `partition`: VLLM_PP_LAYER_PARTITION's layer counts)."""
    stages = pp_stages(spec.num_layers, pp, partition)
    weights = list(shares) if shares else [1] * spec.num_layers
    whole = max(1, sum(weights))
    out = []
    for i, (a, b) in enumerate(stages):
        part = split.layer_bytes * sum(weights[a:b]) // whole
        if every_stage_ends:
            part += split.embedding_bytes + split.lm_head_bytes
        elif i == 0:
            part += split.embedding_bytes
        if i == pp - 1 and not every_stage_ends:
            tied_copy = pp > 1 and not split.lm_head_bytes  # tied: the last stage's own copy
            part += split.embedding_bytes if tied_copy else split.lm_head_bytes
        out.append(part // tp)
    return tuple(out)


def stage_weights(spec: ModelSpec, weights: str | WeightFormat = "auto",
                  weights_bytes: int | None = None, tp: int = 1, pp: int = 1,
                  dims: ModelDims | None = None, ep: int = 1,
                  expert_load: ExpertLoad | None = None, vocab: VocabSplit | None = None,
                  partition: Sequence[int] | None = None,
                  every_stage_ends: bool = False) -> tuple[tuple[int, ...], str]:
    """Weight bytes on one GPU of each pipeline stage, and the format assumed and why: the
    one place every engine's weights term comes from.

    In order: a measured total (`weights_bytes`, --weights-memory) spread as `weight_split`
    spreads it; else the tensor inventory (kvplan.core.weights) in the checkpoint's own format
    (its quantization_config) or the one `weights` names (--weights-dtype: an engine
    quantizing at load), tensor by tensor as the engine places them; else, for families the
    inventory does not model, the published checkpoint total or `num_params` in the format,
    spread over embeddings and layers. `every_stage_ends`: the embedding and LM head on every
    pipeline stage (stage_weight_bytes)."""
    from kvplan.core.weights import weight_plan

    fmt = as_weight_format(spec, weights)
    shares = layer_weight_shares(spec)
    if weights_bytes is None:
        plan = weight_plan(spec, load_name(spec, weights), tp, pp, ep, expert_load,
                           vocab=vocab, partition=partition,
                           every_stage_ends=every_stage_ends)
        if plan is not None:
            return plan.stage_bytes, f"{plan.format}, from {plan.why}, {_TENSOR_BY_TENSOR}"
        if weights == "auto" and spec.checkpoint is not None:
            split = weight_split(spec, fmt, dims, spec.checkpoint.total_bytes)
            return (stage_weight_bytes(spec, split, tp, pp, shares=shares,
                                       partition=partition,
                                       every_stage_ends=every_stage_ends),
                    f"the published checkpoint's {spec.checkpoint.total_bytes:,} bytes "
                    f"({spec.checkpoint.source})")
    split = weight_split(spec, fmt, dims or dims_of(spec), weights_bytes)
    how = "measured" if weights_bytes else f"{fmt.description}, from num_params"
    return stage_weight_bytes(spec, split, tp, pp, shares=shares, partition=partition,
                              every_stage_ends=every_stage_ends), how


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


def from_inventory(weights_how: str) -> bool:
    """Whether `stage_weights` summed the tensor inventory (the engines then replay the
    allocator over it) rather than a measured or published total."""
    return weights_how.endswith(_TENSOR_BY_TENSOR)


def as_weight_format(spec: ModelSpec, weights: str | WeightFormat) -> WeightFormat:
    """The weights argument (a format or a --weights-dtype name) as a WeightFormat."""
    return weights if isinstance(weights, WeightFormat) else weight_format(weights, spec.dtype)


def load_name(spec: ModelSpec, weights: str | WeightFormat) -> str:
    """The weights argument as `stage_weights` hands it to the inventory."""
    fmt = as_weight_format(spec, weights)
    return "auto" if weights == "auto" and spec.dtype != "fp32" else fmt.name
