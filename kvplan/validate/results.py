"""validate's inputs and results: frozen records of ints (the report is built in
kvplan.output.validate)."""

from __future__ import annotations

from kvplan.core.dtypes import KVFormat
from kvplan.core.record import record
from kvplan.core.spec import ModelSpec
from kvplan.engines.registry import DEFAULT

SCHEMA = "kvplan.validate/1"
SCHEMA_ALL = "kvplan.validate-all/1"
DEVICES = ("auto", "cuda", "cpu")
# kvplan is not on PyPI: the validate extra's own requirement, which pip installs anywhere
INSTALL_HINT = "pip install 'torch>=2.1'"
# Refuse to allocate more than this share of the free memory: the rest is for the allocator,
# the decode check's queries and everything else running on the device.
SAFETY_FRACTION = 0.9
# --all: every library model and layout at this probe size, on the CPU.
PROBE_TOKENS = 100  # not a multiple of 16: the last block of every request is partly empty
PROBE_BATCH = 2
PROBE_MAX_LEN = 128  # static layouts preallocate more than the tokens
RANK_TIMEOUT_S = 300

# --- results: frozen records of ints ----------------------------------------------------

@record
class KindResult:
    """One row: a layer kind (vLLM adds 'null block' and 'padding')."""

    kind: str
    num_layers: int
    predicted_bytes: int
    measured_bytes: int  # storage bytes of the tensors (vLLM: this kind's pages of the pools)
    diff_bytes: int  # measured - predicted
    allocated_bytes: int | None  # CUDA memory_allocated() change; CPU: resident-memory change
    overhead_bytes: int | None  # allocated - measured: the allocator's rounding


@record
class DecodeResult:
    steps: int
    ns_per_step: int
    bytes_per_step: int  # K/V bytes the attention calls read per step
    achieved_bytes_per_s: int
    predicted_bytes_per_step: int  # kvplan: the batch's attention-cache bytes
    gpu: str | None
    floor_ns_per_step: int | None  # predicted bytes / the catalog's HBM bandwidth


@record
class RankResult:
    rank: int
    device: str
    predicted_bytes: int
    measured_bytes: int
    diff_bytes: int
    num_tensors: int
    allocated_bytes: int | None  # CUDA: torch.cuda.memory_allocated() change
    device_free_drop_bytes: int | None  # CUDA: drop of mem_get_info()'s free memory
    resident_bytes: int | None  # CPU: the process's resident-memory change
    kinds: tuple[KindResult, ...]
    decode: DecodeResult | None


@record
class ValidateRequest:
    spec: ModelSpec
    fmt: KVFormat
    tokens: int
    batch: int
    layout: str = DEFAULT  # a --layout name (kvplan.validate.predict.layouts())
    block_size: int | None = None  # None: the layout's default (vLLM 16, SGLang 1)
    max_len: int | None = None  # static layouts; None: tokens
    tp: int = 1
    device: str = "auto"
    layers: int | None = None  # validate this many of the model's layers, then scale up
    decode_steps: int = 0


@record
class ValidateResult:
    model: str
    layout: str
    tokens: int
    batch: int
    kv_dtype: str
    tp: int
    block_size: int
    max_len: int
    device: str
    num_layers: int
    layers_validated: int
    predicted_bytes: int  # per rank
    measured_bytes: int  # the minimum over ranks, as engines take it
    diff_bytes: int  # the largest |difference| over ranks, with its sign
    ranks: tuple[RankResult, ...]
    full_predicted_bytes: int | None  # --layers: kvplan's figure for every layer
    scaled_measured_bytes: int | None  # --layers: the measurement scaled up per kind
    # the layout as the engine describes it (CacheLayout.note): a sentence whose {batch},
    # {tokens}, {block_size} and {max_len} the report fills in
    layout_note: str = ""

    @property
    def ok(self) -> bool:
        return all(r.diff_bytes == 0 and all(k.diff_bytes == 0 for k in r.kinds)
                   for r in self.ranks)


@record
class AllRow:
    model: str
    layout: str
    predicted_bytes: int | None
    measured_bytes: int | None
    diff_bytes: int | None
    status: str  # ok | DIFF | skipped: <why>


@record
class AllResult:
    tokens: int
    batch: int
    max_len: int
    kv_dtype: str
    rows: tuple[AllRow, ...]
    elapsed_ms: int

    @property
    def ok(self) -> bool:
        return all(r.status != "DIFF" for r in self.rows)


@record
class AllocationPlan:
    """What a rank is about to allocate, stated before it allocates anything."""

    device: str
    num_tensors: int
    total_bytes: int
    free_bytes: int | None  # what the device had free when checked


@record
class Progress:
    """One step of long work done (validate --all: one model and layout)."""

    done: int
    total: int
    label: str
