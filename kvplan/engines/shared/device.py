"""Device facts every engine meets on a CUDA GPU, which no model config can give.

The CUDA context and the kernels/library workspaces a forward pass loads on first use, one
NCCL communicator's buffers, and the compute capability a GPU catalog entry names. vLLM's
profile run (kvplan.engines.vllm.memory) counts them by release; TensorRT-LLM, transformers
and TGI see the context and kernels beside torch's pool. Where each value comes from is
stated beside it (the vLLM logs that print a non-torch line; NCCL's NCCL_BUFFSIZE docs).
"""

from __future__ import annotations

GIB = 2**30
MIB = 2**20

# Device constants. The CUDA context of a CUDA 12 process with lazy module loading, and the
# kernels/library workspaces a forward pass loads on first use: the two vLLM logs that print
# a non-torch line give 0.35 GiB absolute (RTX 3090, V0: context + kernels) and 0.06 GiB of
# growth (RTX 4080, 0.26: kernels only); kvplan splits them so.
CUDA_CONTEXT_BYTES = 296 * MIB
KERNELS_BYTES = 64 * MIB
# One NCCL communicator's buffers: NCCL_BUFFSIZE (4 MiB) for the Simple protocol plus
# LL/LL128 buffers, send and receive, over a handful of channels (NCCL docs, env NCCL_BUFFSIZE);
# vLLM sets up one per TP group (pynccl, plus the custom all-reduce's 8 MiB IPC buffer) and per
# PP group.
NCCL_COMMUNICATOR_BYTES = 64 * MIB
CUSTOM_ALLREDUCE_BYTES = 8 * MIB

# CUDA memory outside torch that TRT-LLM, transformers and TGI see: the CUDA context and the
# kernels a forward pass loads
NON_TORCH_BYTES = CUDA_CONTEXT_BYTES + KERNELS_BYTES


def compute_capability(gpu_arch: str) -> tuple[int, int] | None:
    """'hopper sm9.0' (Deployment.gpu_arch, written by with_gpu; 'hopper 9.0' too) -> (9, 0);
    None for ROCm targets ('cdna3 smgfx942') and unknown GPUs. The one reader of that string."""
    import re

    found = re.search(r"(?:\bsm|\s|^)(\d+)\.(\d+)\b", gpu_arch or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


# --- how requests use memory --------------------------------------------------------------
