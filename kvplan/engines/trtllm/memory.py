"""TensorRT-LLM's memory budget: the free memory its profiling run leaves (PyTorch backend).

The weights on the fullest GPU, one forward pass over `max_num_tokens` and the CUDA context
with the all-reduce workspace; TensorRT-LLM multiplies what is left by
free_gpu_memory_fraction (`_torch/pyexecutor/_util.py::KvCacheCreator`, 1.1-1.3).
"""

from __future__ import annotations

from kvplan.core.record import record
from kvplan.core.spec import ModelSpec
from kvplan.core.weights import VocabSplit
from kvplan.engines.shared.activations import forward_bytes, profile_shapes
from kvplan.engines.shared.budget import check_positive
from kvplan.engines.shared.device import NON_TORCH_BYTES
from kvplan.engines.shared.weights import ModelDims, stage_weights

# --- its memory budget --------------------------------------------------------------------
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
    check_positive("TensorRT-LLM", [mem.free_bytes], gpu_memory_bytes, [per_gpu],
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
