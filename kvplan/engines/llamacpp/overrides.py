"""llama.cpp's tensor buffer-type overrides: which weights stay in host memory.

`-ot PATTERN=BUFT[,...]` (common/arg.cpp, PR #11397; ik_llama.cpp common/common.cpp
`parse_buft_overrides`), given any number of times: each entry is tried in order on a
tensor's GGUF name with `std::regex_search` and the first match places it (src/llama-model.cpp
`load_tensors`; ik_llama.cpp src/llama-load-tensors.cpp, which logs "buffer type overridden
to CPU"). `--cpu-moe` (PR #14992) adds common/common.h's LLM_FFN_EXPS_REGEX with the CPU
buffer type, `--n-cpu-moe N` (PR #15077, b6089) the same for layers 0..N-1, after any -ot
before them (ik_llama.cpp's port, PR #672, counts from the last layer on one GPU; kvplan
follows llama.cpp). Tensors are named as the GGUF converter names them (`gguf_name`; one
kvplan cannot spell keeps its Hugging Face suffix after `blk.N.`); patterns run through
Python's `re.search` after kvplan.core.patterns.pattern_problem bounds their cost.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kvplan.core.errors import BadInputError
from kvplan.core.patterns import pattern_problem
from kvplan.core.record import record

if TYPE_CHECKING:
    from kvplan.core.spec import ModelSpec
    from kvplan.core.weights import WeightTensor

# common/common.h LLM_FFN_EXPS_REGEX: the routed experts (merged gate_up and chunked too)
EXPERTS_PATTERN = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
HOST_BUFFERS = ("CPU",)  # CPU, CPU_REPACK, CPU_Mapped, ... and the *_Host pinned buffers
GPU_BUFFERS = ("CUDA", "ROCm", "Vulkan", "Metal", "SYCL", "MUSA", "CANN", "OpenCL", "RPC")

# Hugging Face -> GGUF tensor names (gguf-py/gguf/tensor_mapping.py, convert_hf_to_gguf.py)
_LAYER_NAMES = (
    ("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm"),
    ("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"),
    ("self_attn.v_proj", "attn_v"), ("self_attn.o_proj", "attn_output"),
    ("self_attn.q_norm", "attn_q_norm"), ("self_attn.k_norm", "attn_k_norm"),
    ("self_attn.sinks", "attn_sinks"),
    ("self_attn.q_a_proj", "attn_q_a"), ("self_attn.q_a_layernorm", "attn_q_a_norm"),
    ("self_attn.q_b_proj", "attn_q_b"), ("self_attn.kv_a_proj_with_mqa", "attn_kv_a_mqa"),
    ("self_attn.kv_a_layernorm", "attn_kv_a_norm"), ("self_attn.kv_b_proj", "attn_kv_b"),
    ("mlp.experts.gate_proj", "ffn_gate_exps"), ("mlp.experts.up_proj", "ffn_up_exps"),
    ("mlp.experts.down_proj", "ffn_down_exps"),
    ("mlp.shared_experts.gate_proj", "ffn_gate_shexp"),
    ("mlp.shared_experts.up_proj", "ffn_up_shexp"),
    ("mlp.shared_experts.down_proj", "ffn_down_shexp"),
    ("mlp.shared_expert.gate_proj", "ffn_gate_shexp"),
    ("mlp.shared_expert.up_proj", "ffn_up_shexp"),
    ("mlp.shared_expert.down_proj", "ffn_down_shexp"),
    ("mlp.gate.e_score_correction_bias", "exp_probs_b"),
    ("mlp.gate_proj", "ffn_gate"), ("mlp.up_proj", "ffn_up"), ("mlp.down_proj", "ffn_down"),
    ("mlp.gate", "ffn_gate_inp"), ("mlp.router", "ffn_gate_inp"),
)
_PLACE_NAMES = {"embed": "token_embd", "final": "output_norm", "head": "output"}
_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")


def gguf_name(t: WeightTensor) -> str:
    """The tensor's name in a GGUF file: `blk.3.ffn_up_exps.weight`, `token_embd.weight`. A
    quantized checkpoint's parts of one weight (fp8 `weight_scale_inv`, mxfp4 `blocks` and
    `scales`) are one GGUF tensor, its `.weight`."""
    if t.place in _PLACE_NAMES:
        return f"{_PLACE_NAMES[t.place]}.weight"
    found = _LAYER.match(t.name)
    if found is None:
        return t.name
    layer, rest = found.group(1), found.group(2)
    if rest == "mlp.gate.e_score_correction_bias":
        return f"blk.{layer}.exp_probs_b.bias"
    for hf, gguf in _LAYER_NAMES:
        if rest == hf or rest.startswith(hf + "."):
            return f"blk.{layer}.{gguf}.{'bias' if rest.endswith('.bias') else 'weight'}"
    return f"blk.{layer}.{rest}"


@record
class Override:
    pattern: str
    buffer: str  # llama.cpp's buffer-type name as given (CPU, CUDA0, ...)

    @property
    def host(self) -> bool:
        return self.buffer.startswith(HOST_BUFFERS) or self.buffer.endswith("_Host")


def parse_overrides(text: str, flag: str = "--override-tensor") -> tuple[Override, ...]:
    """`PATTERN=BUFT[,PATTERN=BUFT...]` -> overrides, in order; a bad entry is refused by the
    flag's name (llama.cpp: "error: Invalid tensor buffer type override")."""
    out = []
    for entry in text.split(","):
        pattern, eq, buffer = entry.partition("=")
        if not eq or not pattern:
            raise BadInputError(f"{flag} {entry!r}: not PATTERN=BUFFER_TYPE",
                                "e.g. -ot exps=CPU, or -ot \"blk\\.(1[0-9])\\.ffn_.*_exps\\.=CPU\"")
        if not buffer.startswith(HOST_BUFFERS + GPU_BUFFERS) and not buffer.endswith("_Host"):
            raise BadInputError(f"{flag} {entry!r}: {buffer!r} is not a llama.cpp buffer type",
                                "CPU for host memory, or a device: CUDA0, ROCm0, Vulkan0, "
                                "Metal, SYCL0")
        problem = pattern_problem(pattern)
        if problem:
            raise BadInputError(f"{flag} pattern {pattern[:80]!r} {problem}",
                                "write a plainer regular expression, e.g. exps=CPU")
        out.append(Override(pattern, buffer))
    return tuple(out)


def deployment_overrides(tensor_overrides: str | None, cpu_moe: bool,
                         n_cpu_moe: int | None) -> tuple[Override, ...]:
    """The overrides a launch gives: its -ot entries first, then --cpu-moe's and
    --n-cpu-moe's (llama.cpp: an -ot before them takes priority)."""
    out = list(parse_overrides(tensor_overrides)) if tensor_overrides else []
    if cpu_moe:
        out.append(Override(EXPERTS_PATTERN, "CPU"))
    for i in range(n_cpu_moe or 0):
        out.append(Override(rf"blk\.{i}{EXPERTS_PATTERN}", "CPU"))
    return tuple(out)


@record
class Moved:
    """Inventory bytes an override moves: GPU -> host and host -> GPU (all GPUs together)."""

    to_host_bytes: int
    to_gpu_bytes: int
    inventory_bytes: int  # the whole inventory, to scale the moves to a format's total
    to_host_tensors: int


def moved_bytes(spec: ModelSpec, overrides: tuple[Override, ...], gpu_layers: int,
                output_on_gpu: bool, embed_on_gpu: bool, weights: str = "auto",
                flag: str = "--override-tensor") -> Moved:
    """What the overrides move, by the model's tensor inventory (kvplan.core.weights) in its
    format (`weights`, --weights-dtype; no MTP layer): a tensor of one of the last
    `gpu_layers` layers (or the output layer when it is offloaded) whose first matching
    override is a host buffer stays in host memory; one elsewhere whose first match is a
    device goes to the GPU."""
    from kvplan.core.weights import inventory, load_format

    try:
        loaded, q, _ = load_format(spec, weights)
        inv = inventory(loaded, q, include_mtp=False)
    except BadInputError as exc:
        raise BadInputError(f"{flag}: kvplan has no tensor list for {spec.name} ({exc})",
                            f"leave {flag} out, or give the model's config") from None
    n_layer = spec.num_layers
    compiled = [(re.compile(o.pattern), o.host) for o in overrides]
    to_host = to_gpu = tensors = 0
    for t in inv.tensors:
        name = gguf_name(t)
        host = next((h for rx, h in compiled if rx.search(name)), None)
        if host is None:
            continue
        if t.place == "embed":
            on_gpu = embed_on_gpu
        elif t.place in ("final", "head"):
            on_gpu = output_on_gpu
        else:
            layer = t.layer if t.layer is not None else n_layer - 1
            on_gpu = layer >= n_layer - gpu_layers
        if host and on_gpu:
            to_host += t.num_bytes
            tensors += t.count
        elif not host and not on_gpu:
            to_gpu += t.num_bytes
    return Moved(to_host, to_gpu, inv.total_bytes, tensors)


__all__ = ["EXPERTS_PATTERN", "Moved", "Override", "deployment_overrides", "gguf_name",
           "moved_bytes", "parse_overrides"]
