"""Device facts every engine meets on a CUDA GPU, which no model config can give.

The CUDA context and the kernels/library workspaces a forward pass loads on first use, one
NCCL communicator's buffers, and the compute capability a GPU catalog entry names. vLLM's
profile run (kvplan.engines.vllm.memory) counts them by release; TensorRT-LLM, transformers
and TGI see the context and kernels beside torch's pool. Where each value comes from is
stated beside it (the vLLM logs that print a non-torch line; NCCL's NCCL_BUFFSIZE docs).
"""

from __future__ import annotations

from kvplan.core.units import MIB

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

# One NCCL 2.26 communicator that connects everything at ncclCommInitRank, on GPUs joined by
# NVSwitch with 18 NVLink4 links each (HGX H100 / H200 / H20). NCCL connects at init, not at
# first use, when cuMem is off (init.cc: runtimeConn = cuMemSupport && NCCL_RUNTIME_CONNECT).
# From NCCL 2.26.2's source, per rank inside the chain of ranks (every rank but the first and
# the last, whose fewer tree links hold less; the engine keeps the fewest blocks over ranks):
# - 24 channels ("24 coll channels" in NCCL's INFO log of a single 8x H100 node); on each a
#   ring connection (send to the next rank, receive from the previous one) and a tree
#   connection each way (generic.cc ncclTransportRingConnect / TreeConnect); with 3 ranks or
#   more the tree's other neighbours add as much again (with 2 the tree reuses the ring's).
#   A connection holds a send buffer of ncclSendMem (4 KiB) and a receive buffer of
#   ncclRecvMem (4 KiB) + LL 512 KiB + LL128 4,800 KiB + Simple 4 MiB, each rounded up to
#   CUDA_IPC_MIN, 2 MiB (p2p.cc p2pSendSetup / p2pRecvSetup): 2 + 10 MiB.
# - NVLink SHARP buffers with 3 GPUs or more (nvls.cc ncclNvlsInit: gpuCount <= 2 has none):
#   16 channels (NVLS_NCHANNELS_SM90) x 2 x 1 MiB (a 128 KiB chunk x 8 steps) per rank of
#   the node (ncclNvlsBufferSetup), and the credits rounded up to 2 MiB (ncclNvlsSetup).
# - the network proxy's shared send buffer, allocated at init even on one node (init.cc
#   ncclProxyMsgSharedInit -> net.cc sharedNetBuffersInit): 32 p2p channels x 16 steps x
#   the 512 KiB NVLink p2p chunk.
NCCL_HOPPER_CHANNELS = 24
NCCL_CONNECTION_BYTES = (2 + 10) * MIB
NCCL_NVLS_BYTES_PER_RANK = 16 * 2 * MIB
NCCL_NVLS_CREDIT_BYTES = 2 * MIB
NCCL_SHARED_NET_BYTES = 32 * 16 * 512 * 1024

# CUDA memory outside torch that TRT-LLM, transformers and TGI see: the CUDA context and the
# kernels a forward pass loads
NON_TORCH_BYTES = CUDA_CONTEXT_BYTES + KERNELS_BYTES


def on_nvswitch_hopper(interconnect: str | None, gpu_arch: str) -> bool:
    """Whether a GPU sits on an HGX Hopper board's NVSwitch, where the NCCL terms above hold:
    the GPU catalog's `interconnect` (Deployment.gpu_interconnect, kvplan/data/gpus.yaml) is
    "nvswitch" and its compute capability (Deployment.gpu_arch) is 9.x. Blackwell's NVLink5
    boards and the PCIe / NVL Hopper parts are not modelled."""
    capability = compute_capability(gpu_arch)
    return interconnect == "nvswitch" and capability is not None and capability[0] == 9


def nccl_init_bytes(ranks: int, nvls: bool = True) -> int:
    """What one NCCL 2.26 communicator of `ranks` GPUs on one NVSwitch Hopper node holds on a
    rank inside its chain when it connects at init (the terms above). `nvls=False` where the
    engine sets NCCL_NVLS_ENABLE=0: ncclNvlsInit then returns before it sets nvlsSupport, and
    no NVLink SHARP buffer is made (nvls.cc)."""
    if ranks < 2:
        return 0
    links = 2 if ranks > 2 else 1  # the ring's connection, and the tree's other one
    nvls_bytes = NCCL_NVLS_BYTES_PER_RANK * ranks + NCCL_NVLS_CREDIT_BYTES \
        if nvls and ranks > 2 else 0
    return NCCL_HOPPER_CHANNELS * links * NCCL_CONNECTION_BYTES + nvls_bytes + \
        NCCL_SHARED_NET_BYTES


def compute_capability(gpu_arch: str) -> tuple[int, int] | None:
    """'hopper sm9.0' (Deployment.gpu_arch, written by with_gpu; 'hopper 9.0' too) -> (9, 0);
    None for ROCm targets ('cdna3 smgfx942') and unknown GPUs. The one reader of that string."""
    import re

    found = re.search(r"(?:\bsm|\s|^)(\d+)\.(\d+)\b", gpu_arch or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def is_rocm(gpu_arch: str) -> bool:
    """Whether Deployment.gpu_arch names an AMD GPU's gfx target ('cdna3 smgfx942')."""
    return "gfx" in (gpu_arch or "").lower()


# --- how requests use memory --------------------------------------------------------------
