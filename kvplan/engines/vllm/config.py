"""vLLM's settings that change the KV-cache layout, and the defaults each release gives them.

`VllmConfig` holds the flags as vLLM names them (`--max-model-len`, `--kv-cache-dtype`,
`--block-size`, ...); `LATEST` is the newest release whose sizing code was read, the
default. The defaults by release and GPU class follow vLLM's `engine/arg_utils.py`
(`max_num_batched_tokens`, `max_num_seqs`) and `config/cache.py`
(`gpu_memory_utilization`); the release boundaries below name the release whose source
showed each change (0.11.0 is the "classic" V1 code; 0.20, 0.21 and 0.33 are where the
sizing changed).
"""

from __future__ import annotations

from kvplan.core.errors import BadInputError
from kvplan.core.record import record

SCHEMA = "kvplan.engine.vllm/1"
LATEST = (0, 33, 0)
"""The newest vLLM whose sizing code was read (its source distribution); the default."""

DEFAULT_BLOCK_SIZE = 16  # CUDA platform default (0.11 platforms/cuda.py; 0.33 DEFAULT_BLOCK_SIZE)
HYBRID_ALIGN_BLOCK = 16  # 0.11 HybridAttentionMambaModelConfig aligns to multiples of 16

# Version boundaries (tuples compare element-wise), each the first release read with the change.
TOKEN_LINE_FROM_CONCURRENCY = (0, 21)  # "GPU KV cache size" = int(concurrency * max_model_len)
GMU_092 = (0, 20)  # gpu_memory_utilization default 0.9 -> 0.92
# Newer grouping picks the largest bucket as group size when max < 1.5 * min (read in 2026 main
# and 0.33.0; kvplan applies it from 0.33, the first release read with it).
LARGEST_BUCKET_GROUPING = (0, 33)
# Mamba "align" cache mode (2 pages per request with prefix caching), async scheduling that
# doubles the sliding-window lookahead, page-size unification: read in 0.33.0.
V033 = (0, 33)
V1 = (0, 8)  # envs.py VLLM_USE_V1 defaults to "1"
SEQS_BY_GPU = (0, 8, 3)  # arg_utils: max_num_seqs 1024 / 256 by GPU class (after 0.8.2)
# config/cache.py `BlockSize`: Literal[1, 8, 16, 32, 64, 128] up to 0.10, with 256 added by
# 0.11.1 (the Literal of 0.11.1 and 0.16.0). 256 tokens a block needs a backend that takes
# multiples of 16 (FlashAttention: get_kv_cache_shape raises "Block size must be a multiple
# of 16"; Triton; FA3 and Triton MLA); FlashMLA (64 only) and CUTLASS MLA (128 only) refuse it.
BLOCK_256 = (0, 11, 1)


def check_block_size(block_size: int | None, version: tuple[int, ...]) -> None:
    """Refuse a --block-size the release's CacheConfig does not accept (256 before 0.11.1)."""
    if block_size == 256 and version < BLOCK_256:
        raise BadInputError(
            f"vLLM {'.'.join(map(str, version))} has no block size 256 (--block-size): its "
            "config/cache.py BlockSize is 1, 8, 16, 32, 64 or 128",
            "256 is accepted from vLLM 0.11.1 (--engine-version 0.11.1 or newer), or give a "
            "smaller --block-size")


def default_max_num_batched_tokens(gpu_memory_bytes: int | None, gpu_name: str | None = None,
                                   usage: str = "server", version: tuple[int, ...] = LATEST
                                   ) -> int:
    """V1 defaults with chunked prefill (0.11 engine/arg_utils.py): GPUs with >= 70 GiB that
    are not A100: 16384 (LLM class) / 8192 (OpenAI server); others 8192 / 2048. 0.33 adds a
    >= 160 GiB tier with 16384 for both."""
    big = _big_gpu(gpu_memory_bytes, gpu_name)
    if version >= V033 and gpu_memory_bytes is not None and gpu_memory_bytes >= 160 * 2**30:
        return 16384
    if big:
        return 16384 if usage == "llm" else 8192
    return 8192 if usage == "llm" else 2048


def default_max_num_seqs(gpu_memory_bytes: int | None, gpu_name: str | None = None,
                         version: tuple[int, ...] = LATEST) -> int:
    """1024 on >= 70 GiB GPUs that are not A100, else 256 (0.11 engine/arg_utils.py). V1 up to
    0.8.2 gave every GPU 1,024 (vllm#15617, 0.8.2 on an RTX 4090: "CUDA out of memory
    occurred when warming up sampler with 1024 dummy requests"; 0.8.5 reads by GPU class);
    V0 256 (`SchedulerConfig.max_num_seqs`)."""
    if V1 <= version < SEQS_BY_GPU:
        return 1024
    if version < V1:
        return 256
    return 1024 if _big_gpu(gpu_memory_bytes, gpu_name) else 256


def _big_gpu(gpu_memory_bytes: int | None, gpu_name: str | None) -> bool:
    """The larger default tier of arg_utils.py: >= 70 GiB and not an A100."""
    return gpu_memory_bytes is not None and gpu_memory_bytes >= 70 * 2**30 and \
        "a100" not in (gpu_name or "").lower()


def default_gpu_memory_utilization(version: tuple[int, ...] = LATEST) -> float:
    """0.9 up to 0.19; 0.92 from 0.20 (config/cache.py)."""
    return 0.92 if version >= GMU_092 else 0.9


# --- settings -------------------------------------------------------------------------------

@record
class VllmConfig:
    """The vLLM settings that change the KV-cache layout (names as vLLM's flags)."""

    max_model_len: int
    version: tuple[int, ...] = LATEST
    kv_cache_dtype: str = "auto"
    block_size: int | None = None  # None: the platform/backend default
    tp: int = 1
    pp: int = 1
    max_num_batched_tokens: int = 8192
    # 0.33 schedules two batches ahead (async scheduling, PP=1): sliding layers keep
    # 2 x max_num_batched_tokens in flight. None: on from 0.33.
    async_scheduling: bool | None = None
    disable_hybrid_kv_cache_manager: bool | None = None  # None: vLLM's automatic choice
    mamba_cache_mode: str | None = None  # "none" | "align"; None: version default
    num_speculative_tokens: int = 0
    num_draft_layers: int = 0  # EAGLE/MTP draft layers sharing the pool (last PP stage)
    num_gpu_blocks_override: int | None = None
    gpu_name: str | None = None  # picks the MLA backend's block size
    # decode context parallel: the TP group's ranks split each request's tokens instead of
    # each holding all of them (config/parallel.py decode_context_parallel_size; tp % dcp == 0)
    dcp: int = 1
    # the GPU's compute capability ("9.0", "10.0"; catalog field compute_capability): picks
    # the attention backend and with it the block size, and the GDN prefill kernel (0.33)
    compute_capability: str | None = None

    def in_flight_tokens(self) -> int:
        """T in the sliding/chunked per-request need (SlidingWindowSpec.max_memory_usage)."""
        async_on = self.version >= V033 if self.async_scheduling is None else \
            self.async_scheduling
        return self.max_num_batched_tokens * (2 if async_on and self.pp == 1 else 1)

    def mamba_cache_mode_resolved(self) -> str:
        """"align" from 0.33 (prefix caching on: models/config.py MambaModelConfig), the
        0.11 one-page "legacy" before."""
        return self.mamba_cache_mode or ("align" if self.version >= V033 else "legacy")

    def mamba_pages_per_request(self, checkpoint_blocks: int = 0) -> int:
        """MambaSpec.max_memory_usage_bytes in pages: 1 + spec ("none"), 2 + spec + the
        layer's prefill-checkpoint blocks ("align", 0.33), 1 (0.11)."""
        mode = self.mamba_cache_mode_resolved()
        if mode == "legacy":  # 0.11: the spec's block_size is max_model_len, one page
            return 1
        if mode == "none":
            return 1 + self.num_speculative_tokens
        if mode == "align":
            return 2 + self.num_speculative_tokens + checkpoint_blocks
        raise BadInputError(f"unknown mamba cache mode {mode!r}", "use none or align")
