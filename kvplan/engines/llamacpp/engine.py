"""llama.cpp: the K and V buffers `llama_kv_cache` allocates, as its log line prints them
("llama_kv_cache: size = 448.00 MiB (4096 cells, 28 layers, 1/1 seqs), K (f16): ...").

Cells are the context padded to 256 (`GGML_PAD(n_ctx, 256)`, per stream with `--parallel`);
a row is stored in ggml blocks (`ggml_row_size`); iSWA layers keep a window of cells unless
`--swa-full`; MLA keeps the latent in K and no V; recurrent layers keep f32 state per
sequence (llama_memory_recurrent). With partial offload (`-ngl N`) each layer's cache lives
with its layer. Beside the cache, `compute_buffers` models the graph buffer reserved at
start-up, which a plan subtracts from the GPU's memory. MiB = 2^20 bytes; values are exact
for the llama.cpp log lines in tests/fixtures/engines. The rules in full:
docs/engine-kv-sizing.md §7.2 and §7.3.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvplan.core.dtypes import KVFormat, cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.launch import EngineLog
from kvplan.core.layers import ATTENTION_KINDS, MLA, NoCache, RecurrentState
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec
from kvplan.core.units import MIB
from kvplan.engines.base import (
    BaseEngine,
    Capacity,
    Constraint,
    Deployment,
    Need,
    Pool,
    StartCheck,
    weights_per_gpu,
)
from kvplan.engines.llamacpp.overrides import Moved
from kvplan.engines.llamacpp.text import LOG_FORMAT, launch_flags

SCHEMA = "kvplan.engine.llamacpp/1"
CELL_PAD = 256
N_UBATCH = 512  # llama-server / llama-cli default physical batch
KQ_MASK_PAD = 64  # GGML_KQ_MASK_PAD (ggml.h): the mask's token rows are padded to this
F32 = 4  # graph intermediates are float32

# ggml block types: (bits per value, values per block, bytes of scale (+min) per block)
GGML_TYPES: dict[str, KVFormat] = {
    "f32": KVFormat("f32", 32, description="float32"),
    "f16": KVFormat("f16", 16, description="float16"),
    "bf16": KVFormat("bf16", 16, description="bfloat16"),
    "q8_0": KVFormat("q8_0", 8, group_size=32, scale_bytes=2,
                     description="ggml q8_0: 32 int8 + fp16 scale = 34 bytes per 32"),
    "q4_0": KVFormat("q4_0", 4, group_size=32, scale_bytes=2,
                     description="ggml q4_0: 32 4-bit + fp16 scale = 18 bytes per 32"),
    "q4_1": KVFormat("q4_1", 4, group_size=32, scale_bytes=2, zero_point=True,
                     description="ggml q4_1: 32 4-bit + fp16 scale and min = 20 bytes per 32"),
    "q5_0": KVFormat("q5_0", 5, group_size=32, scale_bytes=2,
                     description="ggml q5_0: 32 5-bit + fp16 scale = 22 bytes per 32"),
    "q5_1": KVFormat("q5_1", 5, group_size=32, scale_bytes=2, zero_point=True,
                     description="ggml q5_1: 32 5-bit + fp16 scale and min = 24 bytes per 32"),
    "iq4_nl": KVFormat("iq4_nl", 4, group_size=32, scale_bytes=2,
                       description="ggml iq4_nl: 18 bytes per 32"),
}
CACHE_TYPES = tuple(GGML_TYPES)
SMALLER_KV_DTYPES = ("q8_0", "q4_0")


def cache_type(name: str) -> KVFormat:
    key = name.strip().lower()
    if key not in GGML_TYPES:
        raise BadInputError(f"llama.cpp has no cache type {name!r}",
                            "valid: " + ", ".join(CACHE_TYPES))
    return GGML_TYPES[key]


def pad_cells(n: int, pad: int = CELL_PAD) -> int:
    return cdiv(n, pad) * pad


def ggml_row_bytes(fmt: KVFormat, n: int) -> int:
    """ggml_row_size: whole blocks only (llama.cpp requires rows to be a multiple of 32)."""
    if fmt.group_size and n % fmt.group_size:
        raise BadInputError(f"cache type {fmt.name} needs rows that are a multiple of "
                            f"{fmt.group_size} values, got {n}", "use f16 or q8_0")
    return fmt.row_bytes(n)


@record
class LlamacppConfig:
    ctx: int  # --ctx-size (total over all sequences)
    parallel: int = 1  # --parallel: sequences (server slots)
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    # one cache shared by all sequences (--kv-unified); llama.cpp's default is a cache per
    # sequence (common/common.h kv_unified = false; llama-server turns it on only when -np
    # is left at auto)
    kv_unified: bool = False
    swa_full: bool = False
    n_ubatch: int = N_UBATCH
    flash_attn: bool = True  # -fa: "auto" (the default since mid-2025) enables it on CUDA
    n_gpu_layers: int | None = None  # -ngl: None (or negative) = every layer
    no_kv_offload: bool = False  # -nkvo: every layer's KV cache in host memory
    output_first: bool = True  # builds from 2025-12 (PR #18148): -ngl counts the output first
    # ik_llama.cpp -mla (None: llama.cpp's latent-only MLA cache, as -mla 2 and 3 keep it)
    mla_attn: int | None = None
    # builds from 2026-05-27 (PR #23764) build the flash-attention mask in f16 directly;
    # older ones copied an f32 mask and cast it
    f16_mask: bool = True


def offload(n_layer: int, n_gpu_layers: int | None, output_first: bool = True
            ) -> tuple[int, bool]:
    """(repeating layers on the GPU, output layer on the GPU) for `-ngl n_gpu_layers`.

    llama.cpp (`src/llama-model.cpp::load_tensors`) numbers the repeating layers 0..n_layer-1
    and the output layer n_layer, and puts layer `il` on a GPU when `il >= i_gpu_start` (and
    `il - i_gpu_start < act_gpu_layers = min(N, n_layer + 1)`): the LAST layers go first.
    Since PR #18148 (2025-12-17) `i_gpu_start = max(n_layer + 1 - N, 0)`, so N >= 1 offloads
    the output layer and N - 1 repeating layers; before it `i_gpu_start = max(n_layer - N, 0)`:
    N repeating layers, the output layer only when N > n_layer. The input layer (token
    embeddings) always stays on the CPU. A negative N (-1) is every layer."""
    if n_gpu_layers is None or n_gpu_layers < 0 or n_gpu_layers > n_layer:
        return n_layer, True
    if output_first:
        return max(0, n_gpu_layers - 1), n_gpu_layers >= 1
    return n_gpu_layers, False


@record
class LlamacppProfile:
    schema: str
    model: str
    cells: int  # all streams together
    cells_per_seq: int  # the most one sequence can hold (server slot context)
    num_layers: int  # layers with a KV cache
    swa_layers: int  # of which in the sliding-window cache (iSWA)
    streams: int  # 1 unified cache, else one per sequence (`n_stream`)
    seqs: int
    k_bytes: int
    v_bytes: int
    swa_k_bytes: int
    swa_v_bytes: int
    swa_cells: int
    recurrent_bytes: int  # R + S states, all sequences
    cache_type_k: str
    cache_type_v: str
    compute: ComputeBuffers | None = None  # None when the model's shapes are unknown
    layer_bytes: tuple[int, ...] = ()  # KV (or recurrent state) of each layer, in order
    gpu_layers: int = 0  # repeating layers on the GPU(s) (-ngl)
    output_on_gpu: bool = True
    gpu_kv_bytes: int = 0  # the KV of the layers on the GPU(s); 0 with --no-kv-offload
    # the weights -ngl and the tensor overrides (-ot, --cpu-moe, --n-cpu-moe) leave in host
    # memory, token embeddings included (the engine's capacity places them once: `place_weights`,
    # `host_overrides`); None: no -ngl and no override
    host_weights_bytes: int | None = None

    @property
    def host_kv_bytes(self) -> int:
        return self.total_bytes - self.gpu_kv_bytes

    @property
    def total_bytes(self) -> int:
        return (self.k_bytes + self.v_bytes + self.swa_k_bytes + self.swa_v_bytes
                + self.recurrent_bytes)

    @property
    def k_mib(self) -> float:
        return self.k_bytes / MIB

    @property
    def v_mib(self) -> float:
        return self.v_bytes / MIB

    @property
    def kv_mib(self) -> float:
        return (self.k_bytes + self.v_bytes) / MIB

    def log_line(self) -> str:
        """The first cache's line as `llama_kv_cache` prints it (src/llama-kv-cache.cpp):
        one stream's cells, its layers, "n_seq_max/n_stream seqs", K and V over all streams."""
        return (f"llama_kv_cache: size = {self.kv_mib:7.2f} MiB ("
                f"{self.cells // self.streams:6d} cells, "
                f"{self.num_layers - self.swa_layers:3d} layers, {self.seqs:2d}/{self.streams} "
                f"seqs), K ({self.cache_type_k}): {self.k_mib:7.2f} MiB, "
                f"V ({self.cache_type_v}): {self.v_mib:7.2f} MiB")


@record
class ComputeBuffers:
    """The compute buffers llama.cpp reserves beside the KV cache (`compute_buffers`)."""

    gpu_bytes: int  # "CUDA0 compute buffer size" (each GPU holding layers)
    host_bytes: int  # "CUDA_Host compute buffer size" (pinned host memory, not on the GPU)
    phase: str  # the part of the graph that sets the GPU buffer: output, attention or ffn
    n_tokens: int  # the reserved micro-batch: min(n_ctx, n_ubatch)
    n_kv: int  # KV cells one attention reads at reserve (the whole stream)
    flash_attn: bool
    phases: tuple[tuple[str, int], ...]  # every phase's estimate, bytes

    @property
    def gpu_mib(self) -> float:
        return self.gpu_bytes / MIB

    @property
    def host_mib(self) -> float:
        return self.host_bytes / MIB

    def log_lines(self, device: str = "CUDA0") -> list[str]:
        return [f"llama_context: {device:>10} compute buffer size = {self.gpu_mib:8.2f} MiB",
                f"llama_context: {device.rstrip('0123456789') + '_Host':>10} compute buffer "
                f"size = {self.host_mib:8.2f} MiB"]


def compute_buffers(spec: ModelSpec, n_kv: int, config: LlamacppConfig,
                    n_ctx: int | None = None) -> ComputeBuffers | None:
    """The compute buffers of a fully offloaded model, from its shapes (None without them).

    llama.cpp reserves the graph of one worst-case micro-batch over the whole KV cache
    (`src/llama-context.cpp::llama_context::sched_reserve`, 2025-2026 master) and ggml-alloc's
    planner (`ggml/src/ggml-alloc.c::ggml_gallocr_reserve_n`) sizes each backend's buffer as
    the largest set of intermediates alive at one point. kvplan takes the largest of three
    candidates for that point (the output logits, attention with or without flash attention,
    the feed-forward) on the GPU, and the CPU-side inputs on the host. Checked against real logs
    in docs/engine-accuracy.md (exact for 7 of 9 GPU buffers); not modelled: partial offload,
    pipeline-parallel copies, recurrent scan buffers. The derivation: docs/engine-kv-sizing.md §7.3.
    """
    from kvplan.engines.shared.weights import dims_of

    if not (spec.hidden_size and spec.vocab_size and spec.num_attention_heads):
        return None
    dims = dims_of(spec)
    n_tokens = min(n_ctx if n_ctx is not None else n_kv, config.n_ubatch)
    hidden = dims.hidden_size * n_tokens * F32
    logits = dims.vocab_size * n_tokens * F32
    mask = n_kv * cdiv(n_tokens, KQ_MASK_PAD) * KQ_MASK_PAD * F32
    kq = n_kv * n_tokens * spec.num_attention_heads * F32
    ffn = 3 * dims.intermediate_size * n_tokens * F32
    held_mask = mask // 2 if config.flash_attn else mask
    if config.flash_attn and config.f16_mask:
        # the mask input is built in f16 (llama-graph.cpp build_attn_inp_kq_mask): no f32
        # copy, no cast
        attention = held_mask + 4 * hidden
        host_mask = held_mask
    elif config.flash_attn:
        attention = mask + held_mask + 4 * hidden
        host_mask = mask
    else:
        attention = kq + mask + 4 * hidden
        host_mask = mask
    phases = (
        ("output", logits + hidden),
        ("attention", attention),
        ("ffn", ffn + 2 * hidden + held_mask),
    )
    phase, gpu = max(phases, key=lambda x: x[1])
    return ComputeBuffers(gpu_bytes=gpu, host_bytes=hidden + host_mask, phase=phase,
                          n_tokens=n_tokens, n_kv=n_kv, flash_attn=config.flash_attn,
                          phases=phases)


def keeps_windows(spec: ModelSpec) -> bool:
    """Whether llama.cpp gives this model's sliding/chunked layers their own smaller cache:
    only architectures whose `load_arch_hparams` sets `swa_type` (src/models/gemma2.cpp and
    the others; the spec's traits.llamacpp_swa, kvplan.sources.families lists them). Every
    other architecture attends over the whole context whatever the config's sliding_window
    says: Mistral 7B converts to LLM_ARCH_LLAMA, whose loader never reads the key, and
    phi3.cpp reads it and turns SWA off ("Phi SWA is currently disabled")."""
    return spec.traits.llamacpp_swa


def check_cache_types(spec: ModelSpec, k_fmt: KVFormat, v_fmt: KVFormat, flash_attn: bool
                      ) -> None:
    """The settings llama.cpp refuses at start-up (`llama_init_from_model`,
    src/llama-context.cpp): a quantized V cache without flash attention ("quantized V cache
    requires flash_attn to be enabled"; -fa auto turns it on), and K and V in different types
    for MLA models."""
    if v_fmt.group_size and not flash_attn:
        raise BadInputError(
            f"llama.cpp refuses a quantized V cache (-ctv {v_fmt.name}) without flash "
            "attention: 'quantized V cache requires flash_attn to be enabled'",
            "use -fa on (or auto), or an f16 V cache")
    if spec.is_mla and k_fmt.name != v_fmt.name:
        raise BadInputError(
            f"llama.cpp refuses different K ({k_fmt.name}) and V ({v_fmt.name}) cache types for "
            f"MLA models such as {spec.name}", "give -ctk and -ctv the same type")


def ik_mla_v_row(layer: MLA, v_fmt: KVFormat, config: LlamacppConfig) -> int:
    """ik_llama.cpp's MLA cache beside the latent (src/llama.cpp `llama_kv_cache_init`): -mla 1
    without flash attention also keeps the latent transposed, kv_lora_rank values a cell in
    the V type ("kv^T (f16): ..."); -mla 2 and 3 (its default) keep the latent alone, as
    llama.cpp does. -mla 0 keeps every head's K and V uncompressed, which kvplan does not
    model."""
    if config.mla_attn == 0:
        raise BadInputError("-mla 0: ik_llama.cpp's uncompressed MLA cache (every head's K and "
                            "V) is not modelled by kvplan", "plan with -mla 2 or 3")
    if config.mla_attn == 1 and not config.flash_attn:
        return ggml_row_bytes(v_fmt, layer.kv_lora_rank)
    return 0


def profile(spec: ModelSpec, config: LlamacppConfig) -> LlamacppProfile:
    if config.ctx <= 0 or config.parallel <= 0:
        raise BadInputError("--ctx and --parallel must be positive")
    k_fmt, v_fmt = cache_type(config.cache_type_k), cache_type(config.cache_type_v)
    check_cache_types(spec, k_fmt, v_fmt, config.flash_attn)
    seqs = config.parallel
    if config.kv_unified:
        cells = pad_cells(config.ctx)
        per_seq = cells // seqs if seqs > 1 else cells
        streams, stream_cells = 1, cells
    else:
        # llama_context: n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256), integer division
        stream_cells = pad_cells(config.ctx // seqs)
        if stream_cells == 0:
            raise BadInputError(f"--ctx-size {config.ctx} is too small for --parallel {seqs}: "
                                "llama.cpp stops with 'n_ctx_seq == 0'")
        cells, per_seq, streams = stream_cells * seqs, stream_cells, seqs
    windows = keeps_windows(spec) and not config.swa_full
    k = v = swa_k = swa_v = recurrent = 0
    swa_cells = 0
    num_layers = swa_layers = 0
    per_layer: list[int] = []
    for layer in spec.layers:
        before = k + v + swa_k + swa_v + recurrent
        if isinstance(layer, RecurrentState):
            # f32 conv (R) and SSM (S) states, one per sequence
            recurrent += sum(t.elements_per_rank(1) * 4 for t in layer.tensors) \
                * max(1, seqs)
        elif isinstance(layer, MLA):
            num_layers += 1
            k += cells * ggml_row_bytes(k_fmt, layer.kv_lora_rank + layer.qk_rope_head_dim)
            v += cells * ik_mla_v_row(layer, v_fmt, config)
        elif not isinstance(layer, NoCache):
            if not isinstance(layer, ATTENTION_KINDS):
                raise BadInputError(
                    f"kvplan's llamacpp profile does not model {layer.kind} layers")
            num_layers += 1
            k_row = ggml_row_bytes(k_fmt, layer.num_kv_heads * layer.head_dim)
            v_row = ggml_row_bytes(v_fmt, layer.num_kv_heads * layer.value_dim)
            window = layer.window_tokens if windows else None
            if window:
                swa_layers += 1
                per_stream = min(stream_cells, pad_cells(
                    window * (seqs if config.kv_unified else 1) + config.n_ubatch))
                swa_cells = per_stream * streams
                swa_k += swa_cells * k_row
                swa_v += swa_cells * v_row
            else:
                k += cells * k_row
                v += cells * v_row
        per_layer.append(k + v + swa_k + swa_v + recurrent - before)
    gpu_layers, output_on_gpu = offload(len(per_layer), config.n_gpu_layers,
                                        config.output_first)
    # each layer's cache lives on its layer's device (`llama_kv_cache` constructor:
    # `model.dev_layer(il)` when offloading, the CPU buffer type otherwise)
    gpu_kv = 0 if config.no_kv_offload else sum(per_layer[len(per_layer) - gpu_layers:])
    return LlamacppProfile(
        schema=SCHEMA, model=spec.name, cells=cells, cells_per_seq=per_seq,
        num_layers=num_layers, swa_layers=swa_layers, streams=streams, seqs=seqs,
        k_bytes=k, v_bytes=v, swa_k_bytes=swa_k,
        swa_v_bytes=swa_v, swa_cells=swa_cells, recurrent_bytes=recurrent,
        cache_type_k=k_fmt.name, cache_type_v=v_fmt.name,
        compute=compute_buffers(spec, stream_cells, config, cells),
        layer_bytes=tuple(per_layer), gpu_layers=gpu_layers, output_on_gpu=output_on_gpu,
        gpu_kv_bytes=gpu_kv,
    )


# --- the engine plugin ---------------------------------------------------------------------

def split_gpus(dep: Deployment) -> int:
    """The GPUs llama.cpp splits the layers over (-sm layer, the default): kvplan's --tp x
    --pp, at least one."""
    return max(1, dep.tp * dep.pp)


def compute_per_gpu(prof: LlamacppProfile) -> int:
    """Compute-buffer bytes on each GPU holding layers (0 when kvplan cannot estimate them:
    the fit check then counts weights and KV only)."""
    return prof.compute.gpu_bytes if prof.compute is not None else 0


def kv_per_gpu(prof: LlamacppProfile, dep: Deployment) -> int:
    """KV bytes on one GPU: with several GPUs llama.cpp splits the layers (-sm layer, the
    default) and each layer's cache lives with it; kvplan splits evenly (equal GPUs). Only
    the offloaded layers' caches (-ngl), none with --no-kv-offload."""
    return cdiv(prof.gpu_kv_bytes, split_gpus(dep))


@record
class WeightPlacement:
    """The model's weights on the GPU(s) and in host memory under -ngl (`place_weights`)."""

    gpu_bytes: int  # all GPUs together
    host_bytes: int
    output_bytes: int  # the output layer (its own copy when the embeddings are tied)
    embedding_bytes: int  # token embeddings: always in host memory


def host_overrides(dep: Deployment, prof: LlamacppProfile) -> Moved | None:
    """What -ot / --cpu-moe / --n-cpu-moe move between the GPU and host memory, in bytes of
    the deployment's weights (the inventory's share scaled to its total: a measured
    --weights-memory, or the format's), None without overrides."""
    from kvplan.engines.llamacpp.overrides import deployment_overrides, moved_bytes
    from kvplan.engines.shared.weights import stage_weights

    overrides = deployment_overrides(dep.tensor_overrides, dep.cpu_moe, dep.n_cpu_moe)
    if not overrides:
        return None
    flag = "--override-tensor" if dep.tensor_overrides else \
        ("--cpu-moe" if dep.cpu_moe else "--n-cpu-moe")
    moved = moved_bytes(dep.spec, overrides, prof.gpu_layers, prof.output_on_gpu,
                        gpu_layer_count(dep.n_gpu_layers) is None, dep.weights_dtype, flag)
    total = stage_weights(dep.spec, dep.weights_dtype, dep.weights_bytes, 1, 1, dep.dims)[0][0]
    if total == moved.inventory_bytes or not moved.inventory_bytes:
        return moved
    return replace(moved, to_host_bytes=moved.to_host_bytes * total // moved.inventory_bytes,
                   to_gpu_bytes=moved.to_gpu_bytes * total // moved.inventory_bytes,
                   inventory_bytes=total)


def place_weights(dep: Deployment, gpu_layers: int, output_on_gpu: bool,
                  moved: Moved | None = None) -> WeightPlacement:
    """Split the model's weights as llama.cpp's `load_tensors` places them: the token
    embeddings (`dev_input`) always on the CPU, the output layer (norm + `output`; with tied
    embeddings a duplicate of `token_embd`, TENSOR_DUPLICATED) on the GPU when offloaded, and
    the last `gpu_layers` repeating layers on the GPU (layers sized by their parameter share
    when they differ, kvplan.engines.shared.weights.layer_weight_shares)."""
    from kvplan.engines.shared.weights import (
        as_weight_format,
        dims_of,
        layer_weight_shares,
        stage_weights,
        weight_split,
    )

    spec = dep.spec
    try:
        total = stage_weights(spec, dep.weights_dtype, dep.weights_bytes, 1, 1, dep.dims)[0][0]
        # in a format kvplan knows, token_embd (and an untied output) hold their own bytes,
        # vocab x hidden values, and the repeating layers the rest. A measured total (a GGUF
        # file, whose token_embd may be block-quantized: Q4_K in a Q4_K_M file) is spread in
        # proportion, as kvplan does not read the file's tensor types.
        split = weight_split(spec, as_weight_format(spec, dep.weights_dtype),
                             dep.dims or dims_of(spec), total,
                             exact_tables=dep.weights_bytes is None)
    except BadInputError:
        if spec.num_params is None and dep.weights_bytes is None:
            return WeightPlacement(0, 0, 0, 0)
        raise
    output = split.lm_head_bytes or split.embedding_bytes
    shares = list(layer_weight_shares(spec) or [1] * spec.num_layers)
    on_gpu = sum(shares[len(shares) - gpu_layers:]) if gpu_layers else 0
    layers_gpu = split.layer_bytes * on_gpu // max(1, sum(shares))
    gpu = layers_gpu + (output if output_on_gpu else 0)
    host = split.embedding_bytes + split.layer_bytes - layers_gpu + \
        (0 if output_on_gpu or not split.lm_head_bytes else split.lm_head_bytes)
    if moved is not None:  # -ot / --cpu-moe / --n-cpu-moe (`host_overrides`)
        shift = min(moved.to_host_bytes, gpu) - min(moved.to_gpu_bytes, host)
        gpu, host = gpu - shift, host + shift
    return WeightPlacement(gpu, host, output, split.embedding_bytes)


SCHED_COPIES = 4  # GGML_SCHED_MAX_COPIES (ggml/src/ggml-backend.cpp), a compile-time default


def pipeline_parallel(num_gpus: int, n_layer: int, n_gpu_layers: int | None,
                      no_kv_offload: bool) -> bool:
    """Whether llama.cpp turns on pipeline parallelism (`src/llama-context.cpp`, the
    llama_context constructor): more than one device, every layer offloaded
    (`n_gpu_layers() > n_layer`), `-sm layer` (kvplan's only split), the KV cache offloaded
    and no tensor overrides (-ot, --cpu-moe: checked by the caller). The scheduler then
    keeps `n_copies = GGML_SCHED_MAX_COPIES` (4) copies of the graph inputs
    (`ggml_backend_sched_new(..., parallel)`), which enlarges the compute buffers."""
    every_layer = n_gpu_layers is None or n_gpu_layers > n_layer
    return num_gpus > 1 and every_layer and not no_kv_offload


def gpu_layer_count(value: str | int | None) -> int | None:
    """-ngl N / all / auto (common/arg.cpp) -> a layer count, None for every layer. "auto"
    (the 2026 default, with --fit) is read as every layer: kvplan then says whether it fits."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in ("all", "auto", "max"):
        return None
    try:
        count = int(text)
    except ValueError:
        raise BadInputError(f"--n-gpu-layers must be a number, 'all' or 'auto', got {value!r}",
                            "e.g. -ngl 20 (the last 20 layers on the GPU), -ngl 99 (all)"
                            ) from None
    return None if count < 0 else count


def _cache_type_of(kv_dtype: str) -> str:
    """kvplan's KV dtype -> a ggml cache type (auto and 16-bit formats: f16, the default)."""
    return "f16" if kv_dtype in ("auto", "fp16", "bf16") else kv_dtype


_FLASH_ATTN = {"on": True, "1": True, "true": True, "enabled": True, "auto": True,
               "off": False, "0": False, "false": False, "disabled": False}


def flash_attn_on(value: str | None) -> bool:
    """-fa on|off|auto (common/arg.cpp): "auto", the default since mid-2025, turns flash
    attention on when the GPU backend supports it (`llama_context::resolve_fused_ops`), as CUDA,
    Metal and Vulkan do for common head sizes; builds before that defaulted to off."""
    if value is None:
        return True
    key = value.strip().lower()
    if key not in _FLASH_ATTN:
        raise BadInputError(f"--flash-attn must be on, off or auto, got {value!r}")
    return _FLASH_ATTN[key]


class LlamacppEngine(BaseEngine):
    name = "llamacpp"
    display_name = "llama.cpp"
    start_log: EngineLog | None = LOG_FORMAT
    launch_table = launch_flags
    budget_figure = "total_bytes"
    tokens_figure = "cells"
    kv_dtypes = ("auto", *CACHE_TYPES)
    smaller_kv_dtypes = SMALLER_KV_DTYPES
    needs_memory = False  # it allocates --ctx cells whatever the GPU has

    def capacity(self, dep: Deployment) -> Capacity:
        kv = _cache_type_of(dep.kv_dtype)
        ctx = dep.context_limit()
        if dep.n_ubatch is not None and dep.n_ubatch <= 0:
            raise BadInputError(f"--ubatch-size must be positive, got {dep.n_ubatch}")
        ngl = gpu_layer_count(dep.n_gpu_layers)
        config = LlamacppConfig(ctx=ctx, parallel=dep.parallel, cache_type_k=kv,
                                cache_type_v=_cache_type_of(dep.kv_dtype_v or dep.kv_dtype),
                                kv_unified=bool(dep.kv_unified),
                                n_ubatch=dep.n_ubatch or N_UBATCH,
                                flash_attn=flash_attn_on(dep.flash_attn), n_gpu_layers=ngl,
                                mla_attn=dep.mla_attn,
                                no_kv_offload=dep.no_kv_offload)
        prof = profile(dep.spec, config)
        # one cell per token; each slot holds at most cells_per_seq
        pool = Pool(self.name, (Constraint("cells", "cell", prof.cells, (Need("full", 1),)),),
                    prof.cells_per_seq, max_requests=dep.parallel)
        notes = [f"llama.cpp allocates all {prof.cells:,} cells (--ctx {ctx:,}) at start-up"]
        gpus = split_gpus(dep)
        moved = host_overrides(dep, prof)
        if ngl is None:
            weights = weights_per_gpu(dep) - (moved.to_host_bytes // gpus if moved else 0)
            host_weights = moved.to_host_bytes if moved else 0
            if moved is not None:
                prof = replace(prof, host_weights_bytes=host_weights)
        else:
            placed = place_weights(dep, prof.gpu_layers, prof.output_on_gpu, moved)
            weights = cdiv(placed.gpu_bytes, gpus)
            host_weights = placed.host_bytes - placed.embedding_bytes  # a lookup, not a read
            prof = replace(prof, host_weights_bytes=placed.host_bytes)
            n_layer = len(prof.layer_bytes)
            notes.append(
                f"-ngl {ngl}: {prof.gpu_layers} of {n_layer} repeating layers (the last ones) "
                f"{'and the output layer ' if prof.output_on_gpu else ''}on the GPU "
                f"(offloaded {prof.gpu_layers + prof.output_on_gpu}/{n_layer + 1} layers); "
                f"in host memory: {placed.host_bytes:,} bytes of weights (token embeddings "
                f"always) and {prof.host_kv_bytes:,} bytes of KV cache")
        if moved is not None:
            notes.append(
                f"tensor overrides (-ot / --cpu-moe / --n-cpu-moe): {moved.to_host_tensors:,} "
                f"tensors, {moved.to_host_bytes:,} bytes of weights, stay in host memory"
                + (f"; {moved.to_gpu_bytes:,} bytes move to the GPU" if moved.to_gpu_bytes
                   else "") + " (by the model's GGUF tensor names)")
        if dep.no_kv_offload:
            notes.append(f"--no-kv-offload: the whole KV cache ({prof.total_bytes:,} bytes) "
                         "stays in host memory; attention runs on the CPU")
        compute = compute_per_gpu(prof)
        if prof.compute is not None:
            c = prof.compute
            notes.append(
                f"compute buffers: {c.gpu_bytes:,} bytes on each GPU ({c.phase} of a "
                f"{c.n_tokens:,}-token micro-batch over {c.n_kv:,} cells, flash attention "
                f"{'on' if c.flash_attn else 'off'}) besides {c.host_bytes:,} bytes of pinned "
                "host memory; the GPU's memory must hold weights + KV cache + compute buffers"
                + ("" if ngl is None and not dep.no_kv_offload else
                   " (as fully offloaded: kvplan does not model how partial offload or "
                   "--no-kv-offload moves them)"))
        else:
            notes.append("compute buffers not estimated (the model's hidden size, vocabulary "
                         "or heads are unknown); the fit check counts weights and KV only")
        memory = dep.gpu_memory_bytes
        kv_bytes = kv_per_gpu(prof, dep)
        if gpus > 1:
            pp_on = pipeline_parallel(gpus, len(prof.layer_bytes), ngl, dep.no_kv_offload) \
                and moved is None
            notes.append(f"layer split over {gpus} GPUs (-sm layer): each holds "
                         f"its layers' KV cache, about {kv_bytes:,} bytes (an even split), and "
                         "a compute buffer of the size above" + (
                             f" (pipeline parallelism on: the scheduler keeps {SCHED_COPIES} "
                             "copies of each split's inputs, not counted)" if pp_on else
                             " (pipeline parallelism off: not every layer is offloaded, the "
                             "KV cache is not, or tensors are overridden)"))
        if memory is not None and weights + kv_bytes + compute > memory:
            notes.append(f"weights ({weights:,} bytes) + KV ({kv_bytes:,} bytes) + "
                         f"compute buffers ({compute:,} bytes) do not fit in {memory:,} bytes: "
                         "offload fewer layers (-ngl), shrink --ctx or -ub")
            pool = replace(pool, constraints=(replace(pool.constraints[0], capacity=0),))
        per_token = prof.total_bytes // max(1, prof.cells)
        return Capacity(dep, self, None, prof, pool, prof.cache_type_k, weights, per_token,
                        tuple(notes), host_weights_bytes=host_weights)

    def numbers(self, cap: Capacity) -> dict[str, Any]:
        p: LlamacppProfile = cap.engine_profile
        # cells of all streams (explain multiplies the log's per-stream cells by its streams);
        # swa_cells as llama_kv_cache_iswa prints them, one stream's
        out = {"cells": p.cells, "cells_per_seq": p.cells_per_seq, "k_bytes": p.k_bytes,
               "v_bytes": p.v_bytes, "total_bytes": p.total_bytes,
               "k_mib": p.k_mib, "v_mib": p.v_mib, "kv_mib": p.kv_mib}
        if p.swa_cells:
            out["swa_cells"] = p.swa_cells // p.streams
        if p.compute is not None:
            out.update(compute_buffer_bytes=p.compute.gpu_bytes,
                       host_compute_buffer_bytes=p.compute.host_bytes,
                       compute_mib=p.compute.gpu_mib)
        if cap.deployment.n_gpu_layers is not None or cap.deployment.no_kv_offload:
            out.update(gpu_layers=p.gpu_layers, output_on_gpu=p.output_on_gpu,
                       gpu_kv_bytes=p.gpu_kv_bytes, host_kv_bytes=p.host_kv_bytes)
        return out

    def memory_rows(self, cap: Capacity) -> list[tuple[str, int]] | None:
        """What one GPU holds at start-up: weights, the KV cache and the compute buffers,
        and what is left of the GPU's reported memory (negative: it does not fit)."""
        p: LlamacppProfile = cap.engine_profile
        memory = cap.deployment.gpu_memory_bytes
        if memory is None:
            return None
        compute = compute_per_gpu(p)
        kv = kv_per_gpu(p, cap.deployment)
        rows = [("GPU memory (reported)", memory),
                ("- weights", cap.weights_per_gpu_bytes),
                ("- KV cache", kv),
                ("- compute buffers", compute),
                ("= left", memory - cap.weights_per_gpu_bytes - kv - compute)]
        if p.host_weights_bytes is not None or cap.deployment.no_kv_offload:
            # what partial offload (-ngl), the tensor overrides and --no-kv-offload leave in
            # host memory (all GPUs)
            rows += [("host memory: weights", p.host_weights_bytes or 0),
                     ("host memory: KV cache", p.host_kv_bytes)]
        return rows

    def log_lines(self, cap: Capacity) -> list[str]:
        p: LlamacppProfile = cap.engine_profile
        return [p.log_line(), *(p.compute.log_lines() if p.compute is not None else [])]

    def start_check(self, cap: Capacity) -> StartCheck:
        """llama.cpp allocates the weights, all --ctx cells and the compute buffers at start-up
        (`llama_model_load`, `llama_kv_cache` constructor, `ggml_backend_sched_reserve`): when
        they exceed the GPU's memory an allocation fails and the server exits."""
        rows = self.memory_rows(cap)
        left = dict(rows).get("= left") if rows is not None else None
        if left is not None and left < 0:
            memory = cap.deployment.gpu_memory_bytes or 0
            return StartCheck(False, 0, f"weights, KV cache and compute buffers need "
                              f"{memory - left:,} bytes of the GPU's {memory:,}",
                              "offload fewer layers (-ngl), a smaller -c or -ub, or more GPUs")
        return StartCheck(True, cap.pool.max_request_tokens)

    def sizing_format(self, cap: Capacity) -> KVFormat:
        return cache_type(cap.kv_format)

    def concurrency_limit(self, dep: Deployment) -> tuple[int, str] | None:
        return dep.parallel, "parallel"

    def defaults(self, spec: ModelSpec, gpu_name: str | None = None,
                 gpu_memory_bytes: int | None = None,
                 version: str | None = None) -> dict[str, Any]:
        return {"cache_type_k": "f16", "cache_type_v": "f16", "parallel": 1,
                "cell_pad": CELL_PAD, "n_ubatch": N_UBATCH, "flash_attn": "auto"}

ENGINE = LlamacppEngine()
