"""SGLang: `max_total_num_tokens` from the mem_fraction_static rule (SGLang 0.4-0.5.23).

    rest = free_after_load - free_before_load x (1 - mem_fraction_static)     (GB floats)
    max_total_num_tokens = int(rest x 2^30 // cell_size), rounded down to page_size

`model_runner.py::profile_max_num_token` (classic) and 0.5.23
`kv_cache_configurator.py` / `pool_configurator.py`. The cell is the bytes of one token on
one GPU over all its layers: `kv_heads_per_rank x (head_dim + v_head_dim) x layers x bytes`
with `kv_heads_per_rank = max(1, kv_heads // tp)`; MLA `(kv_lora_rank + qk_rope_head_dim) x
layers x bytes` (no x2, not split by TP). Each K/V buffer holds `tokens + page_size` rows
(one padding page for dummy writes), which is what "K size: X GB" prints (GB = 2^30 bytes).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.core.dtypes import BF16, FP8_DS_MLA, FP8_E4M3, FP8_E5M2, FP16, FP32, KVFormat
from kvplan.core.errors import BadInputError, NoKVMemoryError
from kvplan.core.layers import (
    ATTENTION_KINDS,
    MLA,
    ChunkedLocal,
    Layer,
    NoCache,
    RecurrentState,
    SlidingWindow,
    indexer_key_bytes,
)
from kvplan.core.record import record
from kvplan.core.sizing import pp_stages
from kvplan.core.spec import ModelSpec
from kvplan.core.units import GIB, human_bytes
from kvplan.engines import named_kv_format
from kvplan.engines.cache import STATE_DTYPES, CacheLayout, StateBuffer, dense_layers, spec_state
from kvplan.engines.sglang.memory import rest_gb

SCHEMA = "kvplan.engine.sglang/1"
SWA_FULL_TOKENS_RATIO = 0.8  # arg_groups/fields/schedule.py default
MAMBA_FULL_MEMORY_RATIO = 0.9  # _handle_max_mamba_cache default r
SSM_STATE_NAMES = ("ssm", "recurrent", "temporal")  # kept in float32 by default
DSA_INDEXER_BYTES = indexer_key_bytes(128)  # DeepSeek-V3.2 indexer: 128 fp8 + fp32 scale
# The NSA pool's "KV size" (mem_cache/memory_pool.py _finalize_allocation_log) counts the
# indexer keys it holds, and the profile's cell counts them (SglangConfig.
# profile_counts_indexer), from sglang#11309 (NSATokenToKVPool.get_kv_size_bytes,
# profile_max_num_token; in the 0.5.3.post1 wheel, not in 0.5.3's, where MLATokenToKVPool's
# line and the profile count the latent records alone). kvplan reads a release's first three
# parts, so 0.5.3.post1 reads as 0.5.3: a log or a plan of it takes --engine-version 0.5.4.
NSA_INDEXER_IN_KV_SIZE = (0, 5, 4)

KV_DTYPES = ("auto", "bf16", "bfloat16", "fp16", "float16", "fp8_e4m3", "fp8_e5m2")
SMALLER_KV_DTYPES = ("fp8_e4m3",)
_FORMATS = {"bf16": BF16, "bfloat16": BF16, "fp16": FP16, "float16": FP16, "fp32": FP32,
            "fp8": FP8_E4M3, "fp8_e4m3": FP8_E4M3, "fp8_e5m2": FP8_E5M2,
            # the torch dtype the start-up log names ("Using KV cache dtype:
            # torch.float8_e4m3fn", model_executor/model_runner.py), read from a log
            "float8_e4m3fn": FP8_E4M3, "float8_e5m2": FP8_E5M2}


def kv_format(spec: ModelSpec, kv_cache_dtype: str = "auto") -> KVFormat:
    return named_kv_format(spec, kv_cache_dtype, _FORMATS, "SGLang", KV_DTYPES)


def kv_cache_dtype_from_checkpoint(spec: ModelSpec, kv_cache_dtype: str,
                                   configs: tuple[str, ...]) -> str:
    """`--kv-cache-dtype` as SGLang resolves it before it sizes the pool: "auto" becomes
    fp8_e4m3 when the model's quant_config has kv_cache_quant_algo "FP8" (upper-cased;
    mem_cache/kv_cache_dtype.py configure_kv_cache_dtype in 0.5.23, model_runner.py
    before). `configs` is the release's (memory.Rules.kv_dtype_from_checkpoint): the config
    kinds that carry the attribute; checkpoint_kv_algo says what each stores. Any other
    dtype is returned as given."""
    if kv_cache_dtype.strip().lower() == "auto" and checkpoint_kv_algo(spec, configs) == "FP8":
        return "fp8_e4m3"
    return kv_cache_dtype


def checkpoint_kv_algo(spec: ModelSpec, configs: tuple[str, ...]) -> str | None:
    """The kv_cache_quant_algo (upper-cased) SGLang's quant config holds for the checkpoint's
    KV request (spec.quantization.kv_cache), in a release whose quant configs in `configs`
    store it (0.5.23 layers/quantization/):
    - ModelOpt (modelopt_quant.py from_config): a flat config.json block reads a
      `kv_cache_scheme` mapping first, float 8-bit -> "FP8" whatever `dynamic` says (a
      mapping of other bits is never FP8), else `kv_cache_quant_algo`; an
      {"quantization": ...} block (hf_quant_config.json's shape) only that block's
      kv_cache_quant_algo, not one beside it.
      "modelopt-nvfp4": only the NVFP4 config (ModelOptFp4Config, 0.5.3) stores it.
    - Fp8Config (fp8.py from_config, 0.5.18 on): `kv_cache_quant_algo` as written.
    - compressed-tensors (compressed_tensors.py kv_cache_quant_algo, 0.5.19 on): "FP8" for
      a `kv_cache_scheme` of type float, 8 bits, strategy "tensor", symmetric (default
      true) and not dynamic (default false) (CompressedTensorsKVCacheMethod
      .is_supported_scheme); None otherwise.
    None where the config does not carry one."""
    req = spec.quantization.kv_cache
    if req is None:
        return None
    s = req.scheme
    if req.config == "modelopt":
        nvfp4 = spec.quantization.layout == "nvfp4"
        if "modelopt" not in configs and not ("modelopt-nvfp4" in configs and nvfp4):
            return None
        if not req.nested and s is not None:
            return "FP8" if s.type == "float" and s.num_bits == 8 else None
        if req.beside_nested:
            return None
        return req.algo.upper() if req.algo is not None else None
    if req.config == "fp8" and "fp8" in configs:
        return req.algo.upper() if req.algo is not None else None
    if req.config == "compressed-tensors" and "compressed-tensors" in configs and s is not None:
        ok = (s.type == "float" and s.num_bits == 8 and s.strategy == "tensor"
              and s.symmetric is not False and not s.dynamic)
        return "FP8" if ok else None
    return None


# tokens per page unless --page-size (arg_groups/overrides.py::_page_size_default)
DEFAULT_PAGE_SIZE = 1


@record
class SglangConfig:
    tp: int = 1
    pp: int = 1
    kv_cache_dtype: str = "auto"
    page_size: int = DEFAULT_PAGE_SIZE
    max_total_tokens: int | None = None  # --max-total-tokens cap
    hybrid_swa: bool | None = None  # None: by architecture (spec.traits.sglang_hybrid_swa)
    swa_full_tokens_ratio: float = SWA_FULL_TOKENS_RATIO
    mamba_full_memory_ratio: float = MAMBA_FULL_MEMORY_RATIO
    max_mamba_cache_size: int | None = None
    mamba_ssm_dtype_bytes: int = 4  # float32 unless mamba_ssm_dtype / SGLANG_MAMBA_SSM_DTYPE
    num_draft_layers: int = 0  # EAGLE/MTP: cell x draft_layers / layers more per token
    # a DSA model's tokens counted with the pool's fp8 record (memory.Rules.dsa_profile_record:
    # 0.5.17 on); False: with kv_lora_rank + qk_rope_head_dim at the cache dtype, as before
    dsa_profile_record: bool = True
    # the profile's cell counts the NSA indexer keys (sglang#11309: model_runner.py
    # profile_max_num_token adds index_head_dim + index_head_dim // 128 x 4 bytes a layer in
    # the 0.5.3.post1 and 0.5.4 wheels; 0.5.3's counts kv_lora_rank + qk_rope_head_dim alone
    # while the NSA pool still allocates the keys): False before NSA_INDEXER_IN_KV_SIZE
    profile_counts_indexer: bool = True
    # the budget is a log's "KV size" of a release whose NSA pool line leaves out the indexer
    # keys (NSA_INDEXER_IN_KV_SIZE): the tokens are that budget over the latent records alone
    kv_size_without_indexer: bool = False


@record
class SglangProfile:
    schema: str
    model: str
    kv_cache_dtype: str
    tp: int
    pp: int
    page_size: int
    cell_size_bytes: int  # bytes per token on one GPU, all its layers
    available_bytes: int  # rest, as bytes
    mamba_state_bytes_per_request: int
    max_mamba_cache_size: int | None  # requests whose state fits (hybrids), else None
    max_total_num_tokens: int  # "KV Cache is allocated. #tokens: N"
    swa_max_total_num_tokens: int | None  # hybrid SWA pool
    k_size_bytes: int  # one K pool (all layers), page padding included
    v_size_bytes: int  # 0 for MLA (a single "KV size")
    num_layers: int  # on the limiting GPU

    def log_line(self) -> str:
        if self.v_size_bytes == 0:
            return (f"KV Cache is allocated. #tokens: {self.max_total_num_tokens}, "
                    f"KV size: {self.k_size_bytes / GIB:.2f} GB")
        return (f"KV Cache is allocated. #tokens: {self.max_total_num_tokens}, K size: "
                f"{self.k_size_bytes / GIB:.2f} GB, V size: {self.v_size_bytes / GIB:.2f} GB")


def _is_hybrid_swa(spec: ModelSpec, config: SglangConfig) -> bool:
    """configs/model_config.py::is_hybrid_swa_model: only the architectures it lists
    (spec.traits.sglang_hybrid_swa) get a separate SWA pool; other sliding-window models
    (Gemma 2/3) give their sliding layers full-length KV."""
    if config.hybrid_swa is not None:
        return config.hybrid_swa
    return spec.traits.sglang_hybrid_swa


def _k_v_bytes(layer: Layer, fmt: KVFormat, tp: int, sparse: bool = False) -> tuple[int, int]:
    """Bytes per token of one layer's K and V buffers on one GPU (MLA: the latent and the DSA
    indexer keys in K, no V)."""
    if isinstance(layer, MLA):
        index = layer.index_token_bytes()
        if sparse and layer.index_head_dim is None:
            index = DSA_INDEXER_BYTES  # a DeepSeek-V3.2 spec that does not name its indexer
        return layer.latent_token_bytes(fmt) + index, 0
    if not isinstance(layer, ATTENTION_KINDS):
        raise BadInputError(f"kvplan's sglang profile does not model {layer.kind} layers")
    return layer.kv_token_bytes(fmt, tp)


def _indexer(layer: Layer, fmt: KVFormat, tp: int, sparse: bool = False) -> int:
    """The indexer keys' bytes per token in an MLA layer's K buffer (_k_v_bytes); 0 for any
    other layer."""
    if not isinstance(layer, MLA):
        return 0
    return _k_v_bytes(layer, fmt, tp, sparse)[0] - layer.latent_token_bytes(fmt)


def mamba_state_bytes(layer: RecurrentState, tp: int, ssm_bytes: int) -> int:
    """SGLang's per-request state: conv in the model dtype, the SSM state in float32."""
    total = 0
    for t in layer.tensors:
        b = ssm_bytes if t.name in SSM_STATE_NAMES else t.dtype_bytes
        total += t.elements_per_rank(tp) * b
    return total


def profile(spec: ModelSpec, config: SglangConfig, free_before_load_bytes: int,
            free_after_load_bytes: int, mem_fraction_static: float) -> SglangProfile:
    """SGLang's token capacity on the limiting GPU (the min over ranks)."""
    if not 0 < mem_fraction_static < 1:
        raise BadInputError(f"--mem-fraction-static must be in (0, 1), got {mem_fraction_static}")
    fmt = kv_format(spec, config.kv_cache_dtype)
    sparse = spec.is_mla and spec.traits.sparse_mla  # DSA (DeepSeek-V3.2, GLM-5)
    counted = fmt  # the format the profile counts the tokens with
    if sparse and fmt.bits == 8:
        fmt = FP8_DS_MLA  # DSA + fp8: kv_lora_rank + kv_lora_rank//128*4 + rope*2 = 656
        if config.dsa_profile_record:
            counted = fmt
    rest = rest_gb(free_before_load_bytes, free_after_load_bytes, mem_fraction_static)
    best: SglangProfile | None = None
    for a, b in pp_stages(spec.num_layers, config.pp):
        layers = [x for x in spec.layers[a:b] if not isinstance(x, NoCache)]
        result = _stage(spec, layers, fmt, config, rest, sparse, counted)
        if best is None or result.max_total_num_tokens < best.max_total_num_tokens:
            best = result
    assert best is not None
    return best


def _stage(spec: ModelSpec, layers: Sequence[Layer], fmt: KVFormat, config: SglangConfig,
           rest: float, sparse: bool, counted: KVFormat) -> SglangProfile:
    tp, page = config.tp, config.page_size
    hybrid_swa = _is_hybrid_swa(spec, config)
    states = [x for x in layers if isinstance(x, RecurrentState)]
    attn = [x for x in layers if not isinstance(x, RecurrentState)]
    full = [x for x in attn if not (hybrid_swa and isinstance(x, (SlidingWindow, ChunkedLocal)))]
    swa = [x for x in attn if x not in full]
    draft = attn[:1] * config.num_draft_layers
    full_k = sum(_k_v_bytes(x, fmt, tp, sparse)[0] for x in full)
    full_k += sum(_k_v_bytes(x, fmt, tp)[0] for x in draft)
    full_v = sum(_k_v_bytes(x, fmt, tp)[1] for x in full + draft)
    swa_cell = sum(sum(_k_v_bytes(x, fmt, tp)) for x in swa)
    available = int(rest * GIB)

    per_req = sum(mamba_state_bytes(s, tp, config.mamba_ssm_dtype_bytes) for s in states)
    mamba_slots = None
    if states:
        if config.max_mamba_cache_size is not None:
            mamba_slots = config.max_mamba_cache_size
        else:
            r = config.mamba_full_memory_ratio
            budget = int(available * r / (1 + r))
            mamba_slots = max(0, (budget - per_req) // per_req)
        if mamba_slots <= 0:
            # kv_cache_configurator.py `_handle_max_mamba_cache` (0.5.23) refuses to start:
            # "Not enough GPU memory for hybrid (mamba/linear-attention) state cache"
            raise NoKVMemoryError(
                f"SGLang's state pool gets no request slot: one request's state is "
                f"{human_bytes(per_req)} and the state share of the "
                f"{human_bytes(available)} KV budget "
                f"({config.mamba_full_memory_ratio} / (1 + {config.mamba_full_memory_ratio}))"
                f" holds the padding slot at most",
                "use more GPUs (--tp/--pp), a larger --mem-fraction-static or --kv-memory",
                engine="SGLang", left_bytes=0, memory_bytes=available)
        available -= (mamba_slots + 1) * per_req  # the pool holds one extra slot

    cell = full_k + full_v
    if counted is not fmt:  # a DSA pool counted at the dense latent (memory.Rules)
        cell = (sum(_k_v_bytes(x, counted, tp, sparse)[0] for x in full)
                + sum(_k_v_bytes(x, counted, tp)[0] for x in draft) + full_v)
    if not config.profile_counts_indexer:  # 0.5.3: the tokens over the latent records alone
        cell -= (sum(_indexer(x, fmt, tp, sparse) for x in full)
                 + sum(_indexer(x, fmt, tp) for x in draft))
    if config.kv_size_without_indexer:  # the pool line's bytes: the latent records alone
        full_k -= (sum(_indexer(x, fmt, tp, sparse) for x in full)
                   + sum(_indexer(x, fmt, tp) for x in draft))
        cell = full_k + full_v
    swa_tokens = None
    if swa:
        ratio = config.swa_full_tokens_ratio
        mixed = cell + ratio * swa_cell  # a float, as HybridSWAPoolConfigurator computes it
        tokens = int(available // mixed) if mixed else 0
        tokens -= tokens % page
        swa_tokens = int(tokens * ratio)
        swa_tokens -= swa_tokens % page
    else:
        tokens = int(rest * GIB // cell) if not states and cell else \
            (available // cell if cell else 0)
        tokens -= tokens % page
    if config.max_total_tokens is not None:
        tokens = min(tokens, config.max_total_tokens)
    tokens = max(0, tokens)
    rows = tokens + page  # + one padding page per buffer
    return SglangProfile(
        schema=SCHEMA, model=spec.name, kv_cache_dtype=fmt.name, tp=tp, pp=config.pp,
        page_size=page, cell_size_bytes=cell + (swa_cell if not swa else 0),
        available_bytes=int(rest * GIB), mamba_state_bytes_per_request=per_req,
        max_mamba_cache_size=mamba_slots, max_total_num_tokens=tokens,
        swa_max_total_num_tokens=swa_tokens, k_size_bytes=rows * full_k,
        v_size_bytes=rows * full_v, num_layers=len(layers),
    )


def max_running_requests(max_total_num_tokens: int, context_len: int,
                         flag: int | None = None, dp_attention_size: int = 1) -> int:
    """Requests one scheduler runs at once (0.5.3): the request-to-token pool holds
    `max_num_reqs = min(max(int(tokens / context_len x 512), 2048), 4096)` rows
    (`model_executor/model_runner.py::init_memory_pool`) and the scheduler takes
    `min(tokens // 2, or --max-running-requests // dp with DP attention, max_num_reqs)`
    (`managers/tp_worker.py`). Older builds had one more pool row (the 2025-03 QwQ log
    prints 2,049)."""
    rows = min(max(int(max_total_num_tokens / max(1, context_len) * 512), 2048), 4096)
    want = max_total_num_tokens // 2 if flag is None else flag // max(1, dp_attention_size)
    return max(1, min(want, rows))


# --- the cache as allocated (what `kvplan validate` builds with torch) ---------------------

CACHE_NOTE = ("SGLang: one token pool, {batch} x {tokens:,} tokens rounded to pages of "
              "{block_size} plus one padding page; state pool batch + 1 slots.")


def cache_layout(spec: ModelSpec, fmt: KVFormat, tokens: int, batch: int, *, tp: int = 1,
                 page_size: int | None = None) -> CacheLayout:
    """SGLang's pools for `batch` requests of `tokens` tokens: per attention layer one token
    pool (MHATokenToKVPool / MLATokenToKVPool) of the batch's pages plus one padding page
    (its buffers hold size + page_size rows); every attention layer keeps every token (the
    hybrid-SWA pool of gpt-oss and Llama 4 is not modelled); the state pool has
    max_mamba + 1 slots, the SSM state in float32 (mamba2_state_dtype)."""
    from kvplan.core.dtypes import cdiv
    from kvplan.core.layers import CrossAttention

    page = page_size or DEFAULT_PAGE_SIZE
    ssm_bytes = SglangConfig().mamba_ssm_dtype_bytes

    def slots(layer: Layer) -> int:
        held = layer.encoder_tokens if isinstance(layer, CrossAttention) else tokens
        return batch * cdiv(held, page) * page + page

    def state(layer: RecurrentState) -> tuple[tuple[StateBuffer, ...], int]:
        return (tuple(StateBuffer(b.name, STATE_DTYPES[ssm_bytes], b.shape)
                      if b.name in SSM_STATE_NAMES else b for b in spec_state(layer, tp)),
                mamba_state_bytes(layer, tp, ssm_bytes))

    return CacheLayout(paged=False, block_tokens=page, batch=batch, axes="pool",
                       layers=dense_layers(spec, slots, batch + 1, state), whole_tokens=True,
                       note=CACHE_NOTE)
