"""llama.cpp: the K and V buffers `llama_kv_cache` allocates, as its log line prints them:

    llama_kv_cache: size =  448.00 MiB (  4096 cells,  28 layers,  1/1 seqs),
                    K (f16):  224.00 MiB, V (f16):  224.00 MiB

- cells = the context padded to a multiple of 256 (`GGML_PAD(n_ctx, 256)`); with
  `--parallel N` and a non-unified cache each of the N streams gets `pad(ctx / N)` cells;
- a layer's K row is `n_embd_k_gqa = kv_heads x head_dim` values stored in ggml blocks:
  f16/bf16 2 bytes, f32 4, `q8_0` 34 bytes per 32 values, `q4_0` 18, `q4_1` 20, `q5_0` 22,
  `q5_1` 24, `iq4_nl` 18 (ggml_row_size); V the same with v_head_dim;
- sliding-window layers (iSWA) keep `min(cells, pad(window x seqs + n_ubatch))` cells unless
  `--swa-full`;
- MLA (DeepSeek): K holds the latent (`kv_lora_rank + qk_rope_head_dim`) and V is a view of
  it, so V is 0 bytes (mainline since the MLA rework of 2025; older builds kept a V row of
  kv_lora_rank);
- recurrent layers (Mamba, RWKV) keep their state in f32 per sequence (llama_memory_recurrent).

MiB = 2^20 bytes. Values are exact for the llama.cpp log lines in tests/fixtures/engines.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kvplan.core.dtypes import KVFormat, cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.layers import ATTENTION_KINDS, MLA, NoCache, RecurrentState
from kvplan.core.spec import ModelSpec
from kvplan.engines.base import BaseEngine, Capacity, Constraint, Deployment, Need, Pool

if TYPE_CHECKING:
    from kvplan.core.launch import EngineLaunch

SCHEMA = "kvplan.engine.llamacpp/1"
MIB = 2**20
CELL_PAD = 256
N_UBATCH = 512  # llama-server / llama-cli default physical batch

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


@dataclass(frozen=True)
class LlamacppConfig:
    ctx: int  # --ctx-size (total over all sequences)
    parallel: int = 1  # --parallel: sequences (server slots)
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    kv_unified: bool = True  # one cache shared by all sequences (--kv-unified)
    swa_full: bool = False
    n_ubatch: int = N_UBATCH


@dataclass(frozen=True)
class LlamacppProfile:
    schema: str
    model: str
    cells: int  # all streams together
    cells_per_seq: int  # the most one sequence can hold (server slot context)
    num_layers: int  # layers with a KV cache
    seqs: int
    k_bytes: int
    v_bytes: int
    swa_k_bytes: int
    swa_v_bytes: int
    swa_cells: int
    recurrent_bytes: int  # R + S states, all sequences
    cache_type_k: str
    cache_type_v: str

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
        return (f"llama_kv_cache: size = {self.kv_mib:8.2f} MiB ({self.cells:6d} cells, "
                f"{self.num_layers:3d} layers, {self.seqs:2d}/{self.seqs:2d} seqs), "
                f"K ({self.cache_type_k}): {self.k_mib:8.2f} MiB, "
                f"V ({self.cache_type_v}): {self.v_mib:8.2f} MiB")


def profile(spec: ModelSpec, config: LlamacppConfig) -> LlamacppProfile:
    if config.ctx <= 0 or config.parallel <= 0:
        raise BadInputError("--ctx and --parallel must be positive")
    k_fmt, v_fmt = cache_type(config.cache_type_k), cache_type(config.cache_type_v)
    seqs = config.parallel
    if config.kv_unified:
        cells = pad_cells(config.ctx)
        per_seq = cells // seqs if seqs > 1 else cells
        streams, stream_cells = 1, cells
    else:
        stream_cells = pad_cells(cdiv(config.ctx, seqs))
        cells, per_seq, streams = stream_cells * seqs, stream_cells, seqs
    k = v = swa_k = swa_v = recurrent = 0
    swa_cells = 0
    num_layers = 0
    for layer in spec.layers:
        if isinstance(layer, NoCache):
            continue
        if isinstance(layer, RecurrentState):
            # f32 conv (R) and SSM (S) states, one per sequence
            recurrent += sum(t.elements_per_rank(1) * 4 for t in layer.tensors) \
                * max(1, seqs)
            continue
        num_layers += 1
        if isinstance(layer, MLA):
            k += cells * ggml_row_bytes(k_fmt, layer.kv_lora_rank + layer.qk_rope_head_dim)
            continue
        if not isinstance(layer, ATTENTION_KINDS):
            raise BadInputError(f"kvplan's llamacpp profile does not model {layer.kind} layers")
        k_row = ggml_row_bytes(k_fmt, layer.num_kv_heads * layer.head_dim)
        v_row = ggml_row_bytes(v_fmt, layer.num_kv_heads * layer.value_dim)
        window = layer.window_tokens
        if window and not config.swa_full:
            per_stream = min(stream_cells, pad_cells(
                window * (seqs if config.kv_unified else 1) + config.n_ubatch))
            swa_cells = per_stream * streams
            swa_k += swa_cells * k_row
            swa_v += swa_cells * v_row
        else:
            k += cells * k_row
            v += cells * v_row
    return LlamacppProfile(
        schema=SCHEMA, model=spec.name, cells=cells, cells_per_seq=per_seq,
        num_layers=num_layers, seqs=seqs, k_bytes=k, v_bytes=v, swa_k_bytes=swa_k,
        swa_v_bytes=swa_v, swa_cells=swa_cells, recurrent_bytes=recurrent,
        cache_type_k=k_fmt.name, cache_type_v=v_fmt.name,
    )


# --- the engine plugin ---------------------------------------------------------------------

def _cache_type_of(kv_dtype: str) -> str:
    """kvplan's KV dtype -> a ggml cache type (auto and 16-bit formats: f16, the default)."""
    return "f16" if kv_dtype in ("auto", "fp16", "bf16") else kv_dtype


# --- the launch command (`llama-server`), read by kvplan.sources.launch ------------------------
# Flags from common/arg.cpp (common_params_parser_init); short and long spellings.
@functools.cache
def launch_flags() -> EngineLaunch:
    from kvplan.core.launch import EngineLaunch

    setting = {
        "-m": ("model", "str"), "--model": ("model", "str"),
        "-hf": ("hf_repo", "str"), "--hf-repo": ("hf_repo", "str"),
        "-c": ("max_model_len", "tokens"), "--ctx-size": ("max_model_len", "tokens"),
        "-np": ("parallel", "int"), "--parallel": ("parallel", "int"),
        "-ctk": ("kv_dtype", "str"), "--cache-type-k": ("kv_dtype", "str"),
        "-ctv": ("kv_dtype_v", "str"), "--cache-type-v": ("kv_dtype_v", "str"),
        "-ngl": ("n_gpu_layers", "str"), "--n-gpu-layers": ("n_gpu_layers", "str"),
        "--gpu-layers": ("n_gpu_layers", "str"),
        "-b": ("n_batch", "int"), "--batch-size": ("n_batch", "int"),
        "-ub": ("n_ubatch", "int"), "--ubatch-size": ("n_ubatch", "int"),
        "-fa": ("flash_attn", "optional"), "--flash-attn": ("flash_attn", "optional"),
        "-kvu": ("kv_unified", "flag"), "--kv-unified": ("kv_unified", "flag"),
        "--swa-full": ("swa_full", "flag"), "-sm": ("split_mode", "str"),
        "--split-mode": ("split_mode", "str"), "-ts": ("tensor_split", "str"),
        "--tensor-split": ("tensor_split", "str"),
    }
    ignored = ("--host", "--port", "-t", "--threads", "-tb", "--threads-batch", "-a", "--alias",
               "--api-key", "-n", "--n-predict", "--temp", "--top-k", "--top-p", "--min-p",
               "--seed", "-s", "--chat-template", "--log-file", "--timeout", "--slot-save-path",
               "--rope-scaling", "--rope-freq-base", "--rope-freq-scale")
    ignored_flags = ("--jinja", "--mlock", "--no-mmap", "--metrics", "-cb", "--cont-batching",
                     "--no-webui", "--verbose", "-v", "--embedding", "--embeddings")
    flags = {**setting, **{f: ("", "ignore") for f in ignored},
             **{f: ("", "ignore-flag") for f in ignored_flags}}
    return EngineLaunch("llamacpp", (("llama-server",), ("llama-cli",)),
                        images=("ggml-org/llama.cpp", "ggerganov/llama.cpp"), flags=flags,
                        underscores_match_dashes=False)


class LlamacppEngine(BaseEngine):
    name = "llamacpp"
    display_name = "llama.cpp"
    kv_dtypes = ("auto", *CACHE_TYPES)
    smaller_kv_dtypes = SMALLER_KV_DTYPES
    needs_memory = False  # it allocates --ctx cells whatever the GPU has

    def capacity(self, dep: Deployment) -> Capacity:
        from kvplan.engines.base import weights_per_gpu

        kv = _cache_type_of(dep.kv_dtype)
        ctx = dep.context_limit()
        config = LlamacppConfig(ctx=ctx, parallel=dep.parallel, cache_type_k=kv,
                                cache_type_v=kv)
        prof = profile(dep.spec, config)
        # one cell per token; each slot holds at most cells_per_seq
        pool = Pool(self.name, (Constraint("cells", "cell", prof.cells, (Need("full", 1),)),),
                    prof.cells_per_seq, max_requests=dep.parallel)
        notes = [f"llama.cpp allocates all {prof.cells:,} cells (--ctx {ctx:,}) at start-up"]
        weights = weights_per_gpu(dep)
        memory = dep.gpu_memory_bytes
        if memory is not None and weights + prof.total_bytes > memory:
            notes.append(f"weights ({weights:,} bytes) + KV ({prof.total_bytes:,} bytes) do "
                         f"not fit in {memory:,} bytes: offload layers (-ngl) or shrink --ctx")
            pool = replace(pool, constraints=(replace(pool.constraints[0], capacity=0),))
        per_token = prof.total_bytes // max(1, prof.cells)
        return Capacity(dep, None, prof, pool, prof.cache_type_k, weights, per_token,
                        tuple(notes))

    def numbers(self, cap: Capacity) -> dict[str, Any]:
        p: LlamacppProfile = cap.engine_profile
        return {"cells": p.cells, "cells_per_seq": p.cells_per_seq, "k_bytes": p.k_bytes,
                "v_bytes": p.v_bytes, "total_bytes": p.total_bytes,
                "k_mib": p.k_mib, "v_mib": p.v_mib, "kv_mib": p.kv_mib}

    def kv_budget_bytes(self, cap: Capacity) -> int:
        return int(cap.engine_profile.total_bytes)

    def token_capacity(self, cap: Capacity) -> int:
        return int(cap.engine_profile.cells)

    def sizing_format(self, cap: Capacity) -> KVFormat:
        return cache_type(cap.kv_format)

    def concurrency_limit(self, dep: Deployment) -> tuple[int, str] | None:
        return dep.parallel, "parallel"

    def launch(self) -> EngineLaunch:
        return launch_flags()

    def defaults(self, spec: ModelSpec, gpu_name: str | None = None,
                 gpu_memory_bytes: int | None = None,
                 version: str | None = None) -> dict[str, Any]:
        return {"cache_type_k": "f16", "cache_type_v": "f16", "parallel": 1,
                "cell_pad": CELL_PAD, "n_ubatch": N_UBATCH}


ENGINE = LlamacppEngine()
