"""The budget record every engine fills, and the "no memory left" check.

A `Budget` is the KV budget of each pipeline stage (per GPU) and the terms that reached it:
the memory the engine lets itself use, the weights, the activation peak, non-torch memory
and CUDA graphs, or a budget the engine printed given directly (`--kv-memory 57.65GiB`,
vLLM's `--kv-cache-memory-bytes`). "total" is the memory the device reports to the
framework (kvplan.sources.gpus `memory_bytes`), never the marketing figure. Each engine's
own budget rule lives in its package (kvplan.engines.vllm.memory, kvplan.engines.sglang.
memory, kvplan.engines.trtllm, kvplan.engines.hf); docs/engine-accuracy.md says how close
each comes to the engines' logs.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.core.errors import BadInputError, NoKVMemoryError
from kvplan.core.record import record
from kvplan.core.units import human_bytes

SCHEMA = "kvplan.budget/1"


# --- budgets ------------------------------------------------------------------------------

@record
class Budget:
    """The KV budget of each pipeline stage (per GPU) and how it was reached."""

    schema: str
    engine: str
    version: str
    method: str  # "estimated" | "measured"
    total_memory_bytes: int  # what the GPU reports (0 when the budget was given)
    utilization: float  # gpu_memory_utilization / mem_fraction_static / free fraction
    requested_bytes: int  # the memory the engine lets itself use (total x utilization)
    weights_bytes: tuple[int, ...]  # per stage, per GPU
    activation_bytes: tuple[int, ...]
    non_torch_bytes: int
    cudagraph_bytes: int
    available_kv_cache_bytes: tuple[int, ...]  # per stage ("Available KV cache memory")
    notes: tuple[str, ...] = ()
    max_num_seqs: int | None = None  # the engine's sequence cap (vLLM max_num_seqs)
    max_num_batched_tokens: int | None = None
    # per stage, per GPU: decoder-layer weights kept in CPU memory (vLLM --cpu-offload-gb),
    # not in weights_bytes; () for none
    offloaded_weights_bytes: tuple[int, ...] = ()

    @property
    def available(self) -> int:
        """The smallest stage's budget (the one that limits a shared block count)."""
        return min(self.available_kv_cache_bytes)


def measured_budget(kv_bytes: int, engine: str = "vllm", version: str = "", pp: int = 1
                    ) -> Budget:
    """A budget the engine printed (or --kv-cache-memory-bytes): used as is on every stage."""
    if kv_bytes <= 0:
        raise BadInputError(f"the KV budget must be positive, got {kv_bytes:,} bytes")
    return Budget(SCHEMA, engine, version, "measured", 0, 0.0, 0, (0,) * pp, (0,) * pp, 0, 0,
                  (kv_bytes,) * pp, ("KV budget given directly; no profiling estimate",))


def check_positive(engine: str, stages: Sequence[int], total: int, weights: Sequence[int],
                    hint: str) -> None:
    """The "no memory left" check: a budget (GPU less weights and reserves) of zero or less
    on any pipeline stage is a NoKVMemoryError naming the worst stage."""
    worst = min(range(len(stages)), key=lambda i: stages[i])
    left, w = stages[worst], weights[worst]
    if left <= 0:
        raise NoKVMemoryError(
            f"no memory is left for the KV cache: {engine} budget on stage {worst} is "
            f"{human_bytes(left)} after {human_bytes(w)} of weights on a "
            f"{human_bytes(total)} GPU", hint, engine=engine, left_bytes=left,
            weights_bytes=w, memory_bytes=total)
