"""transformers' memory: nothing is reserved up front, so the cache may grow into what the
weights, the forward pass and the CUDA context leave.
"""

from __future__ import annotations

from kvplan.core.spec import ModelSpec
from kvplan.engines.shared.activations import forward_activation_bytes
from kvplan.engines.shared.budget import check_positive
from kvplan.engines.shared.device import NON_TORCH_BYTES
from kvplan.engines.shared.weights import ModelDims, estimate_dims, stage_weights


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
    check_positive("transformers", [free], gpu_memory_bytes, [w],
                    "use a larger GPU or a smaller weight format")
    return free
