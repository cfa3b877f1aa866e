"""Prefill beside decode: the FLOPs a prompt costs and the bytes a decode step reads.

Prefill is compute-bound: its time is FLOPs over the GPU's dense tensor throughput at a stated
efficiency. Decode is memory-bound: each step reads the weights it uses and the batch's KV cache,
so its floor is bytes over HBM bandwidth. Both count only the experts a MoE model routes to.
Linear layers cost 2 FLOPs per active non-embedding parameter per token (Kaplan et al.,
arXiv:2001.08361, section 2.1), attention 2 H_q (d_qk + d_v) per key a query sees, and a
decode step touches E (1 - (1 - k/E)^B) experts a layer under uniform routing (an assumption;
real routers are skewed). The derivation: docs/formulas.md §7.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from kvplan.core.errors import BadInputError
from kvplan.core.layers import MLA, ChunkedLocal, CrossAttention, FullAttention, SlidingWindow
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec

if TYPE_CHECKING:
    from kvplan.engines.base import Deployment


def _sum_to(n: int) -> int:
    return n * (n + 1) // 2


def keys_attended(layer: object, tokens: int) -> int:
    """sum over queries 1..n of the keys each attends to, for one layer kind."""
    if isinstance(layer, SlidingWindow):
        w = layer.window
        return _sum_to(tokens) if tokens <= w else _sum_to(w) + (tokens - w) * w
    if isinstance(layer, ChunkedLocal):
        full, rest = divmod(tokens, layer.chunk)
        return full * _sum_to(layer.chunk) + _sum_to(rest)
    if isinstance(layer, CrossAttention):
        return tokens * layer.encoder_tokens
    if isinstance(layer, (FullAttention, MLA)):
        return _sum_to(tokens)
    return 0


@record
class ParamSplit:
    """A model's parameters as compute sees them: all of them, and the routed experts'."""

    total_params: int
    routed_expert_params: int = 0  # every routed expert of every MoE layer
    num_experts: int = 0
    experts_per_token: int = 0
    source: str = "dense"  # dense | the spec's MoE shapes | given
    # vocab x hidden: the input embedding table (a lookup: no FLOPs, B rows read a step) and
    # the output head (one matmul per sampled token); 0 when the shapes are unknown
    table_params: int = 0
    tied_embeddings: bool = False

    @property
    def active_params(self) -> int:
        if not self.num_experts:
            return self.total_params
        return (self.total_params - self.routed_expert_params
                + self.routed_expert_params * self.experts_per_token // self.num_experts)

    def experts_touched(self, batch: int) -> Fraction:
        """Expected distinct experts one MoE layer reads for `batch` tokens (uniform routing)."""
        if not self.num_experts:
            return Fraction(0)
        e, k = self.num_experts, self.experts_per_token
        return e * (1 - Fraction(e - k, e) ** batch)

    @property
    def body_params(self) -> int:
        """Active parameters a token's matmuls use, less the embedding table and output head
        (Kaplan et al.'s non-embedding N); the head is counted per sampled token instead."""
        tables = self.table_params * (1 if self.tied_embeddings else 2)
        return self.active_params - tables

    def read_fraction(self, batch: int) -> Fraction:
        """The share of the weights one decode step of `batch` tokens reads: everything but the
        routed experts no token chose and, when untied, the input embedding rows not looked up."""
        if not self.total_params:
            return Fraction(1)
        # an untied input table is looked up, not read: its `batch` rows are negligible
        skipped = 0 if self.tied_embeddings else self.table_params
        dense = self.total_params - self.routed_expert_params - skipped
        per_expert = (Fraction(self.routed_expert_params, self.num_experts)
                      if self.num_experts else Fraction(0))
        return (dense + per_expert * self.experts_touched(batch)) / self.total_params


def param_split(spec: ModelSpec, active_params: int | None = None) -> ParamSplit:
    """Total and routed-expert parameters of what the engine runs, from the weight inventory
    (kvplan.core.weights: every tensor of the architecture; DeepSeek's MTP layers left out,
    as engines load them only for speculative decoding), the one estimate `plan`, `import`
    and the front door share: a spec without a published num_params whose shapes the
    inventory lays out (a config.json) is counted tensor by tensor, as `import` counts it.
    `active_params` (a published figure) overrides the split."""
    from kvplan.core.weights import estimable, inventory, supported, unsized_weights

    counted = spec.num_params is None and estimable(spec) is None
    if not spec.num_params and not counted:
        raise BadInputError(unsized_weights(spec),
                            "add num_params to its YAML model spec, or use a library model "
                            "that has one")
    experts = spec.num_experts or 0
    per_token = spec.num_experts_per_token or 0
    tables = (spec.vocab_size or 0) * (spec.hidden_size or 0)
    tied = bool(spec.tie_word_embeddings)
    if active_params is not None:
        total_params = spec.num_params or sum(
            t.num_params for t in inventory(spec, include_mtp=False).tensors)
        if not 0 < active_params <= total_params:
            raise BadInputError(f"--active-params must be between 1 and {total_params:,}")
        if not experts or not per_token or experts == per_token:
            return ParamSplit(total_params, 0, 0, 0, "given", tables, tied)
        # routed = (total - active) x E / (E - k): the experts a token does not use
        routed = (total_params - active_params) * experts // (experts - per_token)
        return ParamSplit(total_params, routed, experts, per_token, "given", tables, tied)
    if supported(spec) is None or counted:
        tensors = inventory(spec, include_mtp=False).tensors
        total = sum(t.num_params for t in tensors)
        routed = sum(t.num_params for t in tensors if ".experts." in t.name)
        if experts and not per_token:
            raise BadInputError(f"{spec.name}: experts per token unknown",
                                "give --active-params (the published active count)")
        return ParamSplit(total, routed, experts, per_token, "the weight inventory", tables,
                          tied)
    if not experts and spec.num_params:
        return ParamSplit(spec.num_params, table_params=tables, tied_embeddings=tied)
    raise BadInputError(f"{spec.name} is a mixture of experts whose expert shapes are not "
                        "known", "give --active-params (the published active count)")


@record
class PrefillFlops:
    prompt_tokens: int
    active_params: int
    linear_flops: int  # 2 x active parameters x prompt tokens
    attention_flops: int  # 2 x H_q x (d_qk + d_v) x keys attended, summed over layers
    total_flops: int
    assumptions: tuple[str, ...]


def prefill_flops(spec: ModelSpec, prompt_tokens: int, split: ParamSplit) -> PrefillFlops:
    """FLOPs of one prompt's forward pass (prefill), from the model's shapes."""
    if prompt_tokens < 1:
        raise BadInputError("the prompt must be at least 1 token")
    notes: list[str] = []
    heads = spec.num_attention_heads
    attention = 0
    for layer in spec.layers:
        keys = keys_attended(layer, prompt_tokens)
        if not keys:
            continue
        if isinstance(layer, MLA):
            nope = spec.qk_nope_head_dim
            v = spec.mla_v_head_dim
            if nope and v:
                dims = nope + layer.qk_rope_head_dim + v  # prefill runs MLA as plain MHA
            else:
                dims = 2 * layer.kv_lora_rank + layer.qk_rope_head_dim  # the absorbed form
                if not notes or "absorbed" not in notes[-1]:
                    notes.append("MLA attention counted in its absorbed form (query-key over "
                                 "the latent and rope dims, values over the latent)")
            q_heads = heads or 1
        else:
            dims = layer.head_dim + layer.value_dim  # type: ignore[union-attr]
            q_heads = heads or layer.num_kv_heads  # type: ignore[union-attr]
        attention += 2 * q_heads * dims * keys
    if not heads:
        notes.append("the query-head count is unknown: attention counted with one query head "
                     "per KV head")
    # the head computes logits for the sampled (last) position only, as engines do in prefill
    linear = 2 * split.body_params * prompt_tokens + 2 * split.table_params
    if not split.table_params:
        linear = 2 * split.active_params * prompt_tokens
        notes.append("embedding shapes unknown: every active parameter counted per token")
    if split.num_experts:
        notes.append(f"{split.active_params:,} active of {split.total_params:,} parameters "
                     f"({split.experts_per_token} of {split.num_experts} routed experts, from "
                     f"{split.source})")
    return PrefillFlops(prompt_tokens, split.active_params, linear, attention, linear + attention,
                        tuple(notes))


# --- the prefill model shared by `plan --rate` and `whatif --prefill` ----------------------

#: checkpoint layouts whose linear layers run FP8 x FP8 GEMMs on a GPU with FP8 tensor cores
#: (vLLM Fp8LinearMethod / CompressedTensorsW8A8Fp8 / ModelOptFp8LinearMethod quantize the
#: activations dynamically and call an FP8 scaled matmul; on GPUs without FP8 tensor cores
#: they fall back to weight-only Marlin kernels, bf16 math)
FP8_MATH_LAYOUTS = frozenset({"fp8", "fp8-ct", "fp8-modelopt"})


def default_compute_dtype(spec: ModelSpec, weights_dtype: str, gpu_dtypes: frozenset[str]
                          ) -> tuple[str, str]:
    """(math dtype, why) for prefill's peak: FP8 for an FP8 checkpoint (or `--weights-dtype
    fp8`, vLLM's dynamic FP8) on a GPU the catalog gives FP8 throughput for; else bf16 (fp16
    runs at the same tensor-core rate on every catalog GPU)."""
    fp8_weights = (spec.quantization.layout in FP8_MATH_LAYOUTS
                   or weights_dtype.strip().lower() in ("fp8", "fp8_e4m3"))
    if fp8_weights and "fp8" in gpu_dtypes:
        return "fp8", "the checkpoint's FP8 weights run FP8 GEMMs"
    if fp8_weights:
        return "bf16", "FP8 weights, but no FP8 tensor-core figure for this GPU (weight-only)"
    return "bf16", f"the checkpoint's {spec.dtype} weights"


@record
class Prefill:
    """One prompt's prefill: FLOPs over the tensor-parallel GPUs' dense peak at an efficiency."""

    flops: PrefillFlops
    compute_dtype: str
    compute_dtype_why: str
    peak_flops_per_s: int  # one GPU, dense
    efficiency: Fraction  # the share of peak the kernels reach (a stated assumption)
    gpus: int  # tensor-parallel GPUs sharing one prompt's FLOPs
    seconds: float  # FLOPs / (gpus x peak x efficiency): time to first token, queueing aside
    gpu_seconds: float  # FLOPs / (peak x efficiency): what one prompt costs a pool


def prefill(spec: ModelSpec, split: ParamSplit, prompt_tokens: int, peak_flops_per_s: int,
            compute_dtype: str, why: str, efficiency: Fraction, gpus: int) -> Prefill:
    """The prefill model: compute-bound, FLOPs (prefill_flops) / (gpus x peak x efficiency)."""
    if not 0 < efficiency <= 1:
        raise BadInputError(f"--efficiency must be in (0, 1], got {float(efficiency)}")
    if peak_flops_per_s <= 0:
        raise BadInputError("the GPU's dense throughput must be known", "give --tflops")
    if gpus < 1:
        raise BadInputError("prefill needs at least one GPU")
    flops = prefill_flops(spec, prompt_tokens, split)
    per_gpu = Fraction(flops.total_flops) / (peak_flops_per_s * efficiency)
    return Prefill(flops, compute_dtype, why, peak_flops_per_s, efficiency, gpus,
                   float(per_gpu / gpus), float(per_gpu))


def deployment_prefill(dep: Deployment, prompt_tokens: int, compute_dtype: str | None = None,
                       tflops: Fraction | None = None, efficiency: Fraction = Fraction(1, 2),
                       active_params: int | None = None) -> Prefill:
    """`prefill` on a deployment: its GPU's catalog peak for the math dtype (default_compute_
    dtype unless `compute_dtype` is given; `tflops` overrides the catalog), its TP ranks."""
    from kvplan.sources.gpus import find_gpu

    spec = dep.spec
    split = param_split(spec, active_params)
    if tflops is not None:
        dtype, why = compute_dtype or "given", "--tflops"
        return prefill(spec, split, prompt_tokens, int(tflops * 10**12), dtype, why,
                       efficiency, dep.tp)
    if not dep.gpu_name:
        raise BadInputError("the prefill time needs a catalog GPU", "give --gpu, or --tflops")
    gpu = find_gpu(dep.gpu_name)
    if compute_dtype is None:
        dtype, why = default_compute_dtype(spec, dep.weights_dtype,
                                           frozenset(gpu.dense_flops_per_s))
    else:
        dtype = compute_dtype.strip().lower()
        dtype, why = ("bf16" if dtype == "fp16" else dtype), "--compute-dtype"
    if dtype not in gpu.dense_flops_per_s:
        known = ", ".join(sorted(gpu.dense_flops_per_s)) or "none"
        raise BadInputError(f"the catalog has no dense {dtype} throughput for {gpu.name} "
                            f"(it has: {known})", "give --tflops, the dense TFLOP/s to assume")
    return prefill(spec, split, prompt_tokens, gpu.dense_flops_per_s[dtype], dtype, why,
                   efficiency, dep.tp)
