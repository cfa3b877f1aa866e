"""One frozen spec per layer kind; each owns its byte formula.

Plain values in (`tokens`, `block_size`, a KVFormat, the tensor-parallel degree), ints out.
Every kind answers the same questions:
- `token_bytes(fmt, tp)`   bytes one more token adds while the layer still grows;
- `held_tokens(tokens)`    how many token slots a request of `tokens` holds at most;
- `request_bytes(tokens, fmt, tp)`  exact bytes for one request of `tokens` tokens;
- `paged_tokens(tokens, block_size)` token slots when allocated in whole blocks;
- `contiguous_tokens(max_len)` token slots when preallocated for the maximum length.

"At most" matters for windows and chunks: a request that reached N tokens has passed through
every shorter length, so its peak is what capacity must hold (and sizes never fall as N grows).
"""

from __future__ import annotations

from dataclasses import field
from math import gcd, prod
from typing import TYPE_CHECKING

from kvplan.core.dtypes import MLA_ONLY, KVFormat, cdiv
from kvplan.core.errors import BadInputError
from kvplan.core.record import record


def _plain_attention_only(fmt: KVFormat, kind: str) -> None:
    if fmt.name in MLA_ONLY:
        raise BadInputError(
            f"KV dtype {fmt.name} is an MLA-only record and cannot store {kind} attention",
            "use fp8, nvfp4 or a group-wise format for this model",
        )


class _KeepsEveryToken:
    """Token slots of a layer that keeps every token: full attention and MLA."""

    def held_tokens(self, tokens: int) -> int:
        return tokens

    def paged_tokens(self, tokens: int, block_size: int) -> int:
        return cdiv(tokens, block_size) * block_size

    def contiguous_tokens(self, max_len: int) -> int:
        return max_len

    @property
    def grows(self) -> bool:
        return True


@record
class _Attention(_KeepsEveryToken):
    """Shared maths of K/V attention layers: K rows of head_dim, V rows of v_head_dim."""

    if TYPE_CHECKING:
        kind: str  # each subclass's own dataclass field
    num_kv_heads: int
    head_dim: int
    v_head_dim: int | None = None

    @property
    def value_dim(self) -> int:
        return self.head_dim if self.v_head_dim is None else self.v_head_dim

    def heads_per_rank(self, tp: int) -> int:
        # vLLM ModelConfig.get_num_kv_heads: max(1, heads // tp); heads are replicated
        # (not split into fractions) once tp exceeds the KV-head count.
        return max(1, self.num_kv_heads // tp)

    @property
    def window_tokens(self) -> int:
        """The span a local layer attends within (the sliding window or the chunk); 0 for a
        layer that attends to every token (full) or to a fixed set of them (cross)."""
        return 0

    def kv_token_bytes(self, fmt: KVFormat, tp: int = 1) -> tuple[int, int]:
        """(K bytes, V bytes) of one stored token on one rank: a key row and a value row per
        head. For cross attention this is per encoder token (its token_bytes is 0)."""
        _plain_attention_only(fmt, self.kind)
        heads = self.heads_per_rank(tp)
        return (heads * fmt.token_row_bytes(self.head_dim, "key"),
                heads * fmt.token_row_bytes(self.value_dim, "value"))

    def token_bytes(self, fmt: KVFormat, tp: int = 1) -> int:
        # the factor 2 of the classic formula: one key row and one value row per head
        return sum(self.kv_token_bytes(fmt, tp))

    def bytes_for_tokens(self, tokens: int, fmt: KVFormat, tp: int = 1) -> int:
        """Exact bytes of `tokens` cached tokens (residual windows and KIVI scales included)."""
        _plain_attention_only(fmt, self.kind)
        heads = self.heads_per_rank(tp)
        return (fmt.tensor_bytes(tokens, heads, self.head_dim, "key")
                + fmt.tensor_bytes(tokens, heads, self.value_dim, "value"))

    def request_bytes(self, tokens: int, fmt: KVFormat, tp: int = 1) -> int:
        held = self.held_tokens(tokens)
        now = self.bytes_for_tokens(held, fmt, tp)
        # a KIVI key cache shrinks when a group is flushed: the request held its last peak
        peak = fmt.last_flush_peak(held)
        return max(now, self.bytes_for_tokens(peak, fmt, tp)) if peak else now

    def describe(self) -> str:
        v = f"/{self.v_head_dim}" if self.v_head_dim not in (None, self.head_dim) else ""
        return f"{self.num_kv_heads} KV heads x {self.head_dim}{v}"


@record
class FullAttention(_Attention):
    """MHA, GQA and MQA: every token is kept (they differ only in num_kv_heads)."""

    kind: str = field(default="full", init=False)


@record
class SlidingWindow(_Attention):
    """Attends to the last `window` tokens; a request never holds more than that."""

    window: int = 0
    kind: str = field(default="sliding", init=False)

    @property
    def window_tokens(self) -> int:
        return self.window

    def held_tokens(self, tokens: int) -> int:
        return min(tokens, self.window)

    def paged_tokens(self, tokens: int, block_size: int) -> int:
        # Blocks wholly before the window are freed; a block the window still touches is kept.
        # W tokens starting mid-block span cdiv(W + block - 1, block) blocks: one more than
        # they fill when block divides W (vLLM SlidingWindowSpec: "+ 1"), reached once the
        # request is that long.
        return cdiv(min(tokens, self.window + block_size - 1), block_size) * block_size

    def contiguous_tokens(self, max_len: int) -> int:
        # HF StaticSlidingWindowLayer allocates min(window, max_cache_len) slots.
        return min(self.window, max_len)

    def describe(self) -> str:
        return f"{super().describe()}, window {self.window:,}"


@record
class ChunkedLocal(_Attention):
    """Llama 4 local layers: attend within fixed chunks of `chunk` tokens."""

    chunk: int = 0
    kind: str = field(default="chunked", init=False)

    @property
    def window_tokens(self) -> int:
        return self.chunk

    def held_tokens(self, tokens: int) -> int:
        # at the end of each full chunk the layer holds `chunk` tokens; never more
        return min(tokens, self.chunk)

    def paged_tokens(self, tokens: int, block_size: int) -> int:
        # The blocks the current chunk touches (earlier chunks' blocks are freed, a block
        # shared with the previous chunk is kept); the most over every chunk reached so far.
        # Chunk starts fall at the same block offsets every block // gcd(chunk, block) chunks.
        c = self.chunk
        if tokens <= c:
            return cdiv(tokens, block_size) * block_size
        full_chunks, rest = divmod(tokens, c)
        starts = [k * c for k in range(min(full_chunks, block_size // gcd(c, block_size)))]
        spans = [(start + c - 1) // block_size - start // block_size + 1 for start in starts]
        if rest:  # the unfinished last chunk
            start = full_chunks * c
            spans.append((tokens - 1) // block_size - start // block_size + 1)
        return max(spans) * block_size

    def contiguous_tokens(self, max_len: int) -> int:
        return min(self.chunk, max_len)

    def describe(self) -> str:
        return f"{super().describe()}, chunk {self.chunk:,}"


@record
class CrossAttention(_Attention):
    """Decoder layers attending to a fixed set of encoder tokens (Mllama images, Whisper)."""

    encoder_tokens: int = 0
    kind: str = field(default="cross", init=False)

    def token_bytes(self, fmt: KVFormat, tp: int = 1) -> int:
        return 0  # independent of the text length

    def held_tokens(self, tokens: int) -> int:
        return self.encoder_tokens

    def paged_tokens(self, tokens: int, block_size: int) -> int:
        return cdiv(self.encoder_tokens, block_size) * block_size

    def contiguous_tokens(self, max_len: int) -> int:
        return self.encoder_tokens

    @property
    def grows(self) -> bool:
        return False

    def describe(self) -> str:
        return f"{super().describe()}, {self.encoder_tokens:,} encoder tokens"


def indexer_key_bytes(index_head_dim: int) -> int:
    """Bytes per token of a DeepSeek sparse-attention indexer key of `index_head_dim` values:
    fp8 values (1 byte each) + one fp32 scale (4 bytes) per group of 128 values."""
    return index_head_dim + cdiv(index_head_dim, 128) * 4


@record
class MLA(_KeepsEveryToken):
    """Multi-head latent attention (DeepSeek V2/V3/R1, Kimi K2).

    One latent of kv_lora_rank + qk_rope_head_dim elements per token: no separate K and V
    (so no factor 2), and the same latent on every tensor-parallel rank (not split by TP).

    `index_head_dim` (optional; None = no indexer, the default) adds the key cache of the
    DeepSeek sparse-attention indexer (DeepSeek-V3.2, GLM-5): per token, `index_head_dim` fp8
    values plus one fp32 scale per 128 of them, i.e. `index_head_dim + ceil(index_head_dim /
    128) * 4` bytes (132 B for 128; vLLM DeepseekV32IndexerCache, SGLang's indexer pool). The
    indexer keeps that format whatever --kv-dtype is, and, like the latent, one copy per rank.
    """

    kv_lora_rank: int
    qk_rope_head_dim: int
    index_head_dim: int | None = None
    kind: str = field(default="mla", init=False)

    def index_token_bytes(self) -> int:
        """Bytes the indexer key cache adds per token (0 without an indexer)."""
        if self.index_head_dim is None:
            return 0
        return indexer_key_bytes(self.index_head_dim)

    def latent_token_bytes(self, fmt: KVFormat) -> int:
        """Bytes of one token's latent record alone (the indexer keys not included)."""
        return fmt.latent_bytes(self.kv_lora_rank, self.qk_rope_head_dim)

    def token_bytes(self, fmt: KVFormat, tp: int = 1) -> int:
        return self.latent_token_bytes(fmt) + self.index_token_bytes()

    def bytes_for_tokens(self, tokens: int, fmt: KVFormat, tp: int = 1) -> int:
        residual = min(tokens, fmt.residual_tokens) if fmt.residual is not None else 0
        full = (fmt.residual.latent_bytes(self.kv_lora_rank, self.qk_rope_head_dim)
                if residual and fmt.residual else 0)
        latent = self.latent_token_bytes(fmt)
        return ((tokens - residual) * latent + residual * full
                + tokens * self.index_token_bytes())

    def request_bytes(self, tokens: int, fmt: KVFormat, tp: int = 1) -> int:
        return self.bytes_for_tokens(tokens, fmt, tp)

    def describe(self) -> str:
        index = f", indexer {self.index_head_dim}" if self.index_head_dim is not None else ""
        return f"latent {self.kv_lora_rank}+{self.qk_rope_head_dim}{index}"


@record
class StateTensor:
    """One recurrent-state tensor of a layer: its shape, element size, and the axis TP splits."""

    name: str
    shape: tuple[int, ...]
    dtype_bytes: int
    tp_axis: int | None = None

    def elements_per_rank(self, tp: int) -> int:
        """Elements one rank holds (engines that store the state in another dtype count these)."""
        dims = list(self.shape)
        if self.tp_axis is not None:
            dims[self.tp_axis] = cdiv(dims[self.tp_axis], tp)
        return prod(dims)

    def bytes_per_rank(self, tp: int) -> int:
        return self.elements_per_rank(tp) * self.dtype_bytes


@record
class RecurrentState:
    """Mamba/Mamba2 or linear-attention (gated delta-net) layers: a fixed state per sequence.

    The state has its own dtype (often fp32 for the SSM part), independent of --kv-dtype.
    """

    variant: str
    tensors: tuple[StateTensor, ...]
    kind: str = field(default="state", init=False)

    def token_bytes(self, fmt: KVFormat, tp: int = 1) -> int:
        return 0

    def state_bytes(self, tp: int = 1) -> int:
        return sum(t.bytes_per_rank(tp) for t in self.tensors)

    def bytes_for_tokens(self, tokens: int, fmt: KVFormat, tp: int = 1) -> int:
        return self.state_bytes(tp)

    def request_bytes(self, tokens: int, fmt: KVFormat, tp: int = 1) -> int:
        return self.state_bytes(tp)

    def held_tokens(self, tokens: int) -> int:
        return 0

    def paged_tokens(self, tokens: int, block_size: int) -> int:
        return 0

    def contiguous_tokens(self, max_len: int) -> int:
        return 0

    @property
    def grows(self) -> bool:
        return False

    def describe(self) -> str:
        parts = ", ".join(
            f"{t.name} {'x'.join(map(str, t.shape))} @ {t.dtype_bytes} B" for t in self.tensors
        )
        return f"{self.variant}: {parts}"


@record
class NoCache:
    """A layer without attention (Nemotron-Super's skipped attention): caches nothing."""

    kind: str = field(default="none", init=False)

    def token_bytes(self, fmt: KVFormat, tp: int = 1) -> int:
        return 0

    def bytes_for_tokens(self, tokens: int, fmt: KVFormat, tp: int = 1) -> int:
        return 0

    def request_bytes(self, tokens: int, fmt: KVFormat, tp: int = 1) -> int:
        return 0

    def held_tokens(self, tokens: int) -> int:
        return 0

    def paged_tokens(self, tokens: int, block_size: int) -> int:
        return 0

    def contiguous_tokens(self, max_len: int) -> int:
        return 0

    @property
    def grows(self) -> bool:
        return False

    def describe(self) -> str:
        return "no cache"


@record
class CompressedAttention:
    """DeepSeek-V4 attention: one shared K=V row of `head_dim` per cached entry, kept for
    the last `window` tokens of every layer, plus, on layers with a `compress_ratio` of 4 or
    128, one compressed entry per `compress_ratio` tokens of the whole history; ratio-4 layers
    also keep indexer keys (one per compressed entry), and each compressing layer keeps its
    compressor's running fp32 state per request.

    As the engines allocate it (SGLang `pool_configurator.py` DSV4PoolConfigurator; vLLM
    `models/deepseek_v4/attention.py`) and DeepSeek-V4's reference `inference/model.py`
    Compressor states it. An entry is `head_dim` bf16 values, or in fp8 the 584-byte
    fp8_ds_mla V4 row; indexer keys keep indexer_key_bytes whatever --kv-dtype is. The formulas,
    a worked example and the sources: docs/formulas.md §1.6b.
    """

    head_dim: int
    rope_dim: int
    window: int
    compress_ratio: int = 0  # 0 or 1: the window only
    index_head_dim: int | None = None
    kind: str = field(default="compressed", init=False)

    @property
    def ratio(self) -> int:
        """Tokens per compressed entry; 0 for a window-only layer."""
        return self.compress_ratio if self.compress_ratio > 1 else 0

    def entry_bytes(self, fmt: KVFormat) -> int:
        """Bytes of one cached entry (a window token or a compressed one)."""
        if fmt.bits == 16 and fmt.group_size == 0 and fmt.residual is None:
            return self.head_dim * 2
        if fmt.bits == 8 and fmt.residual is None and not fmt.per_channel_keys:
            # fp8_ds_mla V4 row: NoPE in fp8, RoPE in bf16, 8 bytes of UE8M0 scales
            return (self.head_dim - self.rope_dim) + self.rope_dim * 2 + 8
        raise BadInputError(
            f"KV dtype {fmt.name} is not a DeepSeek-V4 cache format",
            "the engines store it in bf16 (auto) or their fp8 record: use auto or fp8")

    def _coff(self) -> int:
        return 2 if self.ratio == 4 else 1

    def compressed_entries(self, tokens: int) -> int:
        return tokens // self.ratio if self.ratio else 0

    def index_entry_bytes(self) -> int:
        return indexer_key_bytes(self.index_head_dim) if self.index_head_dim else 0

    def state_bytes(self, tp: int = 1) -> int:
        """Per request: the compressors' fp32 kv and score buffers (none without a ratio)."""
        if not self.ratio:
            return 0
        rows = self._coff() * self.ratio
        state = 2 * rows * self._coff() * self.head_dim * 4
        if self.index_head_dim:
            state += 2 * rows * self._coff() * self.index_head_dim * 4
        return state

    def token_bytes(self, fmt: KVFormat, tp: int = 1) -> int:
        # one window entry per token while the window fills, plus the compressed entries
        # (and indexer keys) averaged over their ratio, rounded up
        if not self.ratio:
            return self.entry_bytes(fmt)
        return (self.entry_bytes(fmt)
                + cdiv(self.entry_bytes(fmt) + self.index_entry_bytes(), self.ratio))

    def bytes_for_tokens(self, tokens: int, fmt: KVFormat, tp: int = 1) -> int:
        """Bytes of a request that has seen `tokens` tokens (window, history, state)."""
        compressed = self.compressed_entries(tokens)
        return (min(tokens, self.window) * self.entry_bytes(fmt)
                + compressed * (self.entry_bytes(fmt) + self.index_entry_bytes())
                + self.state_bytes(tp))

    def request_bytes(self, tokens: int, fmt: KVFormat, tp: int = 1) -> int:
        return self.bytes_for_tokens(tokens, fmt, tp)

    def held_tokens(self, tokens: int) -> int:
        return min(tokens, self.window)

    def paged_tokens(self, tokens: int, block_size: int) -> int:
        return 0  # not one slot per token: sized by request_bytes

    def contiguous_tokens(self, max_len: int) -> int:
        return 0

    @property
    def grows(self) -> bool:
        return self.ratio > 0

    def describe(self) -> str:
        parts = [f"1 x {self.head_dim} (rope {self.rope_dim}), window {self.window:,}"]
        if self.ratio:
            parts.append(f"1 entry per {self.ratio} tokens")
        if self.index_head_dim:
            parts.append(f"indexer {self.index_head_dim}")
        return ", ".join(parts)


Layer = (FullAttention | SlidingWindow | ChunkedLocal | CrossAttention | MLA | RecurrentState
         | NoCache | CompressedAttention)
AttentionLayer = FullAttention | SlidingWindow | ChunkedLocal | CrossAttention
ATTENTION_KINDS = (FullAttention, SlidingWindow, ChunkedLocal, CrossAttention)
# every layer's `kind`, in the order docs and --kind list them
LAYER_KINDS = ("full", "sliding", "chunked", "mla", "cross", "state", "compressed", "none")
