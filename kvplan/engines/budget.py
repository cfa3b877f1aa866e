"""The memory budget: how many bytes each engine leaves for the KV cache on one GPU.

    vLLM     total x gpu_memory_utilization - weights - activation peak - non-torch
             (- CUDA graphs from 0.21, when an estimate is given)
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
- Activation peak of vLLM's profile run = the larger of
  * the forward pass over `max_num_batched_tokens` tokens: per token the MLP's gate/up output,
    its activation and the hidden states, `(3 x intermediate / tp + 3 x hidden) x 2` bytes
    (Llama-3.1-8B: 110,592 B/token; the RTX 3090 log measured 2.99 GiB at 29,000 tokens =
    110,700 B/token), and
  * the sampler's dummy run (last stage only): `max_num_seqs x vocab x 28.69` bytes (fp32
    logits plus the sampler's sort/softmax temporaries; calibrated on the RTX 4080 log,
    1.04 GiB for 256 sequences x 152,064 vocabulary).
- Non-torch memory (CUDA context growth, cuBLAS/attention workspaces, NCCL): 0.35 GiB, the
  RTX 3090 log's value.
- CUDA graphs: vLLM >= 0.21 subtracts its profiled estimate when
  VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is on; kvplan has no config-only model of graph
  memory and the one log of such a version (0.26.0, RTX 4080) shows none subtracted
  (8.0 = 7.52 + 0.48 GiB), so the default is 0; give a measured value to subtract it.

When the model's hidden size, MLP width and vocabulary are unknown they are estimated
(`estimate_dims`): hidden = attention heads x head_dim, MLP width from the parameters per
layer, vocabulary 128,256 (Llama 3's). Give ModelDims for better numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from kvplan.core.errors import BadInputError, NoKVMemoryError
from kvplan.core.layers import MLA, FullAttention
from kvplan.core.sizing import pp_stages
from kvplan.core.spec import ModelSpec

SCHEMA = "kvplan.budget/1"
GIB = 2**30

NON_TORCH_BYTES = int(0.35 * GIB)  # RTX 3090 log (issue 10517): non_torch_memory=0.35GiB
SAMPLER_BYTES_PER_LOGIT = Fraction(2869, 100)  # RTX 4080 log: 1.04 GiB / (256 x 152,064)
ACTIVATION_BYTES = 2  # activations in bf16/fp16
DEFAULT_VOCAB = 128_256  # Llama 3's vocabulary, when the model's is unknown
SGLANG_INIT_BYTES = int(0.5 * GIB)  # CUDA context + NCCL before SGLang measures free memory


# --- model dimensions ---------------------------------------------------------------------

@dataclass(frozen=True)
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

@dataclass(frozen=True)
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
)}
_WEIGHT_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32",
                   "auto": "auto", "int4-awq": "awq", "awq-int4": "awq", "int4-gptq": "gptq",
                   "fp8_e4m3": "fp8", "w8a8": "int8", "w4a16": "int4"}


def weight_format(name: str, model_dtype: str = "bf16") -> WeightFormat:
    key = _WEIGHT_ALIASES.get(name.strip().lower(), name.strip().lower())
    if key == "auto":
        key = "bf16" if model_dtype == "fp32" else model_dtype
    if key not in WEIGHT_FORMATS:
        raise BadInputError(f"unknown weights dtype {name!r}",
                            "valid: auto, " + ", ".join(WEIGHT_FORMATS))
    return WEIGHT_FORMATS[key]


@dataclass(frozen=True)
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


def stage_weight_bytes(spec: ModelSpec, split: WeightSplit, tp: int = 1, pp: int = 1
                       ) -> tuple[int, ...]:
    """Weight bytes on one GPU of each pipeline stage (layers as get_pp_indices splits them;
    the input embedding on the first stage, the LM head on the last; all divided by TP)."""
    stages = pp_stages(spec.num_layers, pp)
    out = []
    for i, (a, b) in enumerate(stages):
        part = split.layer_bytes * (b - a) // max(1, spec.num_layers)
        if i == 0:
            part += split.embedding_bytes
        if i == pp - 1:
            tied_copy = pp > 1 and not split.lm_head_bytes  # tied: the last stage's own copy
            part += split.embedding_bytes if tied_copy else split.lm_head_bytes
        out.append(part // tp)
    return tuple(out)


# --- activations --------------------------------------------------------------------------

def forward_activation_bytes(dims: ModelDims, num_tokens: int, tp: int = 1) -> int:
    """Peak of one forward pass over `num_tokens` tokens: the MLP's gate/up output (2 x
    intermediate), its activation (intermediate) and ~3 hidden-sized buffers, in bf16."""
    per_token = (3 * dims.intermediate_size // tp + 3 * dims.hidden_size) * ACTIVATION_BYTES
    return num_tokens * per_token


def sampler_activation_bytes(dims: ModelDims, num_seqs: int) -> int:
    """vLLM V1's dummy sampler run over `num_seqs` rows of logits (fp32 + temporaries)."""
    return int(num_seqs * dims.vocab_size * SAMPLER_BYTES_PER_LOGIT)


# --- budgets ------------------------------------------------------------------------------

@dataclass(frozen=True)
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
    worst = min(range(len(stages)), key=lambda i: stages[i])
    if stages[worst] <= 0:
        from kvplan.output.render import human_bytes

        raise NoKVMemoryError(
            f"no memory is left for the KV cache: {engine} budget on stage {worst} is "
            f"{human_bytes(stages[worst])} after {human_bytes(weights[worst])} of weights "
            f"on a {human_bytes(total)} GPU", hint)


def vllm_budget(spec: ModelSpec, gpu_memory_bytes: int, *, version: tuple[int, ...] | None = None,
                tp: int = 1, pp: int = 1, gpu_memory_utilization: float | None = None,
                weights: str | WeightFormat = "auto", weights_bytes: int | None = None,
                extra_weights_bytes: int = 0, activation_bytes: int | None = None,
                non_torch_bytes: int | None = None, cudagraph_bytes: int | None = None,
                max_num_batched_tokens: int | None = None, max_num_seqs: int | None = None,
                dims: ModelDims | None = None, gpu_name: str | None = None) -> Budget:
    """vLLM's "Available KV cache memory" per stage (gpu_worker.determine_available_memory):
    `total x gpu_memory_utilization - (weights + activation peak + non-torch)` (0.11:
    one float, `int` at the end; 0.33: `ceil(total x util) - ...`), minus CUDA graphs from
    0.21 when an estimate is given. `weights_bytes` is the whole model's measured size."""
    from kvplan.engines import vllm as engine

    ver = version or engine.LATEST
    util = gpu_memory_utilization if gpu_memory_utilization is not None else \
        engine.default_gpu_memory_utilization(ver)
    if not 0 < util <= 1:
        raise BadInputError(f"--gpu-memory-utilization must be in (0, 1], got {util}")
    fmt = weights if isinstance(weights, WeightFormat) else weight_format(weights, spec.dtype)
    dims = dims or estimate_dims(spec)
    split = weight_split(spec, fmt, dims, weights_bytes)
    stage_weights = list(stage_weight_bytes(spec, split, tp, pp))
    stage_weights[-1] += extra_weights_bytes // tp  # draft model on the last stage
    tokens = max_num_batched_tokens or engine.default_max_num_batched_tokens(
        gpu_memory_bytes, gpu_name, version=ver)
    seqs = max_num_seqs or engine.default_max_num_seqs(gpu_memory_bytes, gpu_name)
    if activation_bytes is not None:
        acts = [activation_bytes] * pp
    else:
        fwd = forward_activation_bytes(dims, tokens, tp)
        acts = [fwd] * pp
        acts[-1] = max(fwd, sampler_activation_bytes(dims, seqs))
    non_torch = NON_TORCH_BYTES if non_torch_bytes is None else non_torch_bytes
    graphs = 0
    if cudagraph_bytes and ver >= engine.TOKEN_LINE_FROM_CONCURRENCY:
        graphs = cudagraph_bytes  # subtracted from 0.21 (profiler estimate on by default)
    requested = gpu_memory_bytes * util  # 0.11 keeps the float until the final int()
    requested_int = math.ceil(requested) if ver >= engine.V033 else int(requested)
    base = requested_int if ver >= engine.V033 else requested  # 0.33 request_memory: ceil
    available = tuple(int(base - (w + a + non_torch) - graphs)
                      for w, a in zip(stage_weights, acts, strict=True))
    _check_positive("vLLM", available, gpu_memory_bytes, stage_weights,
                    "use more GPUs (--tp/--pp), a smaller weight format, a larger "
                    "--gpu-memory-utilization, or give --kv-memory as vLLM logged it")
    notes = [f"gpu_memory_utilization {util} ({'given' if gpu_memory_utilization else 'default'} "
             f"for vLLM {'.'.join(map(str, ver))})",
             f"weights: {'measured' if weights_bytes else fmt.description}",
             f"activations: {'given' if activation_bytes is not None else 'estimated'} "
             f"(max_num_batched_tokens {tokens:,}, max_num_seqs {seqs:,})"]
    if dims.estimated and activation_bytes is None:
        notes.append("model dimensions estimated from the spec (hidden = heads x head_dim)")
    return Budget(SCHEMA, "vllm", ".".join(map(str, ver)), "estimated", gpu_memory_bytes, util,
                  requested_int, tuple(stage_weights), tuple(acts), non_torch, graphs,
                  available, tuple(notes))


# --- SGLang ---------------------------------------------------------------------------------

def sglang_default_mem_fraction(gpu_memory_bytes: int, tp: int = 1, pp: int = 1,
                                version: tuple[int, ...] | None = None) -> float:
    """mem_fraction_static when unset (engine-kv-sizing.md §2.2).

    Classic (<= 0.4): tp >= 16: 0.79, >= 8: 0.81, >= 4: 0.85, >= 2: 0.87, else 0.88.
    0.5.x: `round((gpu_MB - reserved_MB) / gpu_MB, 3)` with
    `reserved_MB = 512 + max(chunked_prefill, 2048) x 1.5 + tp x pp / 8 x 1024 + 2 x max_bs`,
    at least 10 GiB on GPUs > 60 GiB.
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
    if gib > 60:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mb - reserved) / gpu_mb, 3)


@dataclass(frozen=True)
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
                  dims: ModelDims | None = None) -> SglangMemory:
    """Predicted free memory before and after loading the weights on the fullest GPU."""
    fmt = weight_format(weights, spec.dtype)
    split = weight_split(spec, fmt, dims, weights_bytes)
    per_gpu = max(stage_weight_bytes(spec, split, tp, pp))
    before = gpu_memory_bytes - (SGLANG_INIT_BYTES if init_bytes is None else init_bytes)
    fraction = mem_fraction_static if mem_fraction_static is not None else \
        sglang_default_mem_fraction(gpu_memory_bytes, tp, pp, version)
    after = before - per_gpu
    if after - before * (1 - fraction) <= 0:
        from kvplan.output.render import human_bytes

        raise NoKVMemoryError(
            f"no memory is left for the KV cache: SGLang keeps {1 - fraction:.0%} of "
            f"{human_bytes(before)} free and the weights take {human_bytes(per_gpu)} per GPU",
            "use more GPUs (--tp/--pp), a smaller weight format, or a larger "
            "--mem-fraction-static")
    return SglangMemory(before, after, fraction, per_gpu)


# --- TensorRT-LLM -----------------------------------------------------------------------------

def trtllm_free_bytes(spec: ModelSpec, gpu_memory_bytes: int, *, tp: int = 1, pp: int = 1,
                      weights: str = "auto", weights_bytes: int | None = None,
                      activation_bytes: int | None = None, non_torch_bytes: int | None = None,
                      max_num_tokens: int = 8192, dims: ModelDims | None = None) -> int:
    """`total - profiled peak` (weights + activations + non-torch) on the fullest GPU:
    the "available" TRT-LLM logs before applying free_gpu_memory_fraction."""
    dims = dims or estimate_dims(spec)
    fmt = weight_format(weights, spec.dtype)
    per_gpu = max(stage_weight_bytes(spec, weight_split(spec, fmt, dims, weights_bytes), tp, pp))
    acts = forward_activation_bytes(dims, max_num_tokens, tp) if activation_bytes is None \
        else activation_bytes
    non_torch = NON_TORCH_BYTES if non_torch_bytes is None else non_torch_bytes
    free = gpu_memory_bytes - per_gpu - acts - non_torch
    _check_positive("TensorRT-LLM", [free], gpu_memory_bytes, [per_gpu],
                    "use more GPUs (--tp/--pp) or a smaller weight format")
    return free


def hf_free_bytes(spec: ModelSpec, gpu_memory_bytes: int, *, weights: str = "auto",
                  weights_bytes: int | None = None, activation_bytes: int | None = None,
                  batch_tokens: int = 2048, dims: ModelDims | None = None) -> int:
    """transformers reserves nothing: the cache may grow into whatever the weights and the
    forward pass leave (plus the CUDA context, counted as non-torch)."""
    dims = dims or estimate_dims(spec)
    fmt = weight_format(weights, spec.dtype)
    w = weight_split(spec, fmt, dims, weights_bytes).total_bytes
    acts = forward_activation_bytes(dims, batch_tokens) if activation_bytes is None \
        else activation_bytes
    free = gpu_memory_bytes - w - acts - NON_TORCH_BYTES
    _check_positive("transformers", [free], gpu_memory_bytes, [w],
                    "use a larger GPU or a smaller weight format")
    return free
