"""One forward pass's transient buffers: what an engine's profile run sees at its peak.

Per token, the widest layer's buffers (a dense MLP's gate/up output and activation, or the
fused-MoE caches of vLLM's `fused_moe.py::fused_experts_impl`) plus three hidden-size
buffers, in the activation dtype. vLLM's profile run (kvplan.engines.vllm.memory) adds the
sampler and CUDA graphs; TensorRT-LLM's dummy requests, transformers' and TGI's prefill use
the forward pass alone. The MoE details follow vLLM's fused_moe.py (0.10.1 and 0.33), the
kernel SGLang and TensorRT-LLM's PyTorch flow share in shape.
"""

from __future__ import annotations

from kvplan.core.record import record
from kvplan.core.spec import ModelSpec
from kvplan.engines.shared.weights import ModelDims, estimate_dims

ACTIVATION_BYTES = 2  # bf16/fp16 activations

MOE_CHUNK_TOKENS = 32768  # envs.py VLLM_FUSED_MOE_CHUNK_SIZE default (0.10-0.11.2)
FP8_BYTES = 1  # moe_kernel_quantize_input: the W8A8 kernels' fp8 copy of their input



@record
class Shapes:
    """The model sizes the profile run's buffers depend on (config.json)."""

    hidden_size: int
    vocab_size: int
    intermediate_size: int = 0  # a dense MLP layer's width (0: none)
    moe_intermediate_size: int = 0  # one routed expert's width
    num_experts_per_token: int = 0
    shared_intermediate_size: int = 0  # the shared experts' MLP together
    estimated: bool = False


def moe_bytes_per_token(shapes: Shapes, tp: int = 1, ep: int = 1, fp8: bool = False) -> int:
    """One token's fused-MoE buffers (`fused_moe.py::fused_experts_impl`, 0.10 / 0.10.1):
    `cache13`, shared by the gate/up output and the down output, `topk x max(2N, hidden)`, and
    the activation `cache2`, `topk x N`, with N the expert width on this rank (split by TP,
    whole under expert parallelism); the shared experts' gate/up and activation beside them.
    `fp8`: W8A8 experts (`use_fp8_w8a8`) -- `moe_kernel_quantize_input` makes an fp8 copy of
    the chunk's input (hidden) and of `cache2` (topk x N), both alive at the down GEMM."""
    if not (shapes.num_experts_per_token and shapes.moe_intermediate_size):
        return 0
    n = shapes.moe_intermediate_size // (1 if ep > 1 else tp)
    routed = shapes.num_experts_per_token * (max(2 * n, shapes.hidden_size) + n)
    quantized = (shapes.num_experts_per_token * n + shapes.hidden_size) * FP8_BYTES if fp8 \
        else 0
    return (routed + 3 * shapes.shared_intermediate_size // tp) * ACTIVATION_BYTES + quantized


def forward_bytes_per_token(shapes: Shapes, tp: int = 1, ep: int = 1, fp8_moe: bool = False
                            ) -> int:
    """The widest layer's transient buffers plus three hidden-size ones, per token."""
    h = shapes.hidden_size
    dense = 3 * shapes.intermediate_size // tp * ACTIVATION_BYTES
    return max(dense, moe_bytes_per_token(shapes, tp, ep, fp8_moe)) + 3 * h * ACTIVATION_BYTES


def forward_bytes(shapes: Shapes, tokens: int, tp: int = 1, ep: int = 1, dp: int = 1,
                  moe_unchunked: bool = False, fp8_moe: bool = False,
                  moe_chunk_tokens: int = MOE_CHUNK_TOKENS) -> int:
    """The forward pass's peak over `tokens` tokens. With data-parallel ranks under expert
    parallelism the all-to-all gathers every rank's tokens before the experts, so each rank's
    MoE buffers hold `tokens x dp` rows beside the gathered hidden states. 0.10.1: the default
    `VLLM_ALL2ALL_BACKEND` "naive" (`FusedMoE.forward_impl` -> `NaiveAll2AllManager.dispatch`,
    whose `naive_multicast` broadcasts every rank's rows into one gathered buffer; the
    pplx / DeepEP modular kernels only on request) and then the plain `fused_experts` (no
    prepare/finalize kernel; DeepGEMM off by default, `VLLM_USE_DEEP_GEMM` "0"), whose
    `fused_experts_impl` runs `VLLM_FUSED_MOE_CHUNK_SIZE` (32,768) rows at a time: the
    caches are sized `M = min(num_tokens, CHUNK_SIZE)`. In 0.33 `fused_experts_impl` sizes
    its caches for every row at once (`M = num_tokens`, the variable is gone from envs.py):
    `moe_unchunked` (kvplan.engines.vllm.config.Rules.moe_unchunked). The chunk,
    `moe_chunk_tokens`, is 16,384 rows in 0.12-0.17 (Rules.moe_chunk_tokens)."""
    own = tokens * forward_bytes_per_token(shapes, tp, ep, fp8_moe)
    if dp <= 1 or ep <= 1 or not moe_bytes_per_token(shapes, tp, ep):
        return own
    gathered = tokens * dp
    rows = gathered if moe_unchunked else min(gathered, moe_chunk_tokens)
    moe = rows * moe_bytes_per_token(shapes, tp, ep, fp8_moe)
    return max(own, tokens * 3 * shapes.hidden_size * ACTIVATION_BYTES + moe
               + gathered * shapes.hidden_size * ACTIVATION_BYTES)


def shapes_of(spec: ModelSpec) -> Shapes | None:
    """The spec's own shapes (config.json), or None when it lacks hidden size or vocabulary."""
    if not spec.hidden_size or not spec.vocab_size:
        return None
    return Shapes(spec.hidden_size, spec.vocab_size, spec.intermediate_size or 0,
                  spec.moe_intermediate_size or 0, spec.num_experts_per_token or 0,
                  spec.shared_expert_intermediate_size or 0)


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


def forward_activation_bytes(dims: ModelDims, num_tokens: int, tp: int = 1) -> int:
    """Peak of one forward pass over `num_tokens` tokens (`forward_bytes_per_token`:
    the MLP's gate/up output and activation, three hidden-size buffers, in bf16)."""
    shapes = Shapes(dims.hidden_size, dims.vocab_size, dims.intermediate_size)
    return num_tokens * forward_bytes_per_token(shapes, tp)
