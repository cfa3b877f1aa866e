"""PyTorch's CUDA caching allocator as `torch.cuda.memory_allocated` counts it.

Engines built on torch measure "the weights" as the change of memory_allocated across their
model load (vLLM's `DeviceMemoryProfiler`, `platforms/cuda.py get_current_memory_usage`).
That statistic counts the allocator's *blocks*, not the bytes the tensors asked for: a large
tensor in a fresh segment keeps the whole segment when the rest is too small to split off.
This module replays allocations and frees with the allocator's default rules
(`c10/cuda/CUDACachingAllocator.cpp`, no `PYTORCH_CUDA_ALLOC_CONF`) and reports what
memory_allocated would say. Pure arithmetic over ints; the device is never touched. The
rounding, pools, segment sizes and split rule: docs/engine-kv-sizing.md §7.4.
"""

from __future__ import annotations

from bisect import bisect_left, insort

MIN_BLOCK_BYTES = 512  # kMinBlockSize
SMALL_SIZE_BYTES = 1 << 20  # kSmallSize: largest request of the small pool
SMALL_BUFFER_BYTES = 2 << 20  # kSmallBuffer: small pool segment
MIN_LARGE_ALLOC_BYTES = 10 << 20  # kMinLargeAlloc
LARGE_BUFFER_BYTES = 20 << 20  # kLargeBuffer: segment for large requests under 10 MiB
ROUND_LARGE_BYTES = 2 << 20  # kRoundLarge


def round_request(num_bytes: int) -> int:
    """The block size a request is rounded to (`round_size`)."""
    if num_bytes < MIN_BLOCK_BYTES:
        return MIN_BLOCK_BYTES
    return -(-num_bytes // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES


def segment_size(rounded_bytes: int) -> int:
    """The size of the segment cudaMalloc'd for a request no free block fits
    (`get_allocation_size`)."""
    if rounded_bytes <= SMALL_SIZE_BYTES:
        return SMALL_BUFFER_BYTES
    if rounded_bytes < MIN_LARGE_ALLOC_BYTES:
        return LARGE_BUFFER_BYTES
    return -(-rounded_bytes // ROUND_LARGE_BYTES) * ROUND_LARGE_BYTES


# Plain classes, not dataclasses: nothing compares or prints them, and defining a dataclass
# compiles its methods at import (the allocator is on every plan's path).
class _Block:
    """A block of a segment; blocks are found by identity (list.index, free lists)."""

    __slots__ = ("free", "offset", "segment", "size")

    def __init__(self, segment: int, offset: int, size: int, free: bool = True) -> None:
        self.segment = segment
        self.offset = offset
        self.size = size
        self.free = free

    @property
    def fit_key(self) -> tuple[int, int, int]:
        """Best fit's order: the smallest block, then the lowest address."""
        return (self.size, self.segment, self.offset)


class CachingAllocator:
    """A replay of allocations and frees; `allocated_bytes` is memory_allocated."""

    def __init__(self) -> None:
        self.allocated_bytes = 0
        # blocks of every segment, in address order, per pool ("small" / "large")
        self._segments: list[list[_Block]] = []
        self._pools: list[str] = []
        self._live: dict[int, _Block] = {}
        self._next = 0
        # each pool's free blocks by fit_key, kept sorted: best fit is one bisect, not a scan
        self._free: dict[str, list[tuple[int, int, int]]] = {"small": [], "large": []}
        self._free_blocks: dict[tuple[int, int, int], _Block] = {}

    def malloc(self, num_bytes: int) -> int:
        """Allocate a tensor of `num_bytes`; returns a handle for `free`."""
        if num_bytes <= 0:
            raise ValueError("an allocation needs a positive size")
        rounded = round_request(num_bytes)
        pool = "small" if rounded <= SMALL_SIZE_BYTES else "large"
        keys = self._free[pool]
        i = bisect_left(keys, (rounded,))  # best fit: the smallest, then lowest, that fits
        if i < len(keys):
            block = self._free_blocks.pop(keys.pop(i))
        else:
            block = _Block(len(self._segments), 0, segment_size(rounded))
            self._segments.append([block])
            self._pools.append(pool)
        remaining = block.size - rounded
        if remaining >= MIN_BLOCK_BYTES if pool == "small" else remaining > SMALL_SIZE_BYTES:
            blocks = self._segments[block.segment]
            rest = _Block(block.segment, block.offset + rounded, remaining)
            blocks.insert(blocks.index(block) + 1, rest)
            block.size = rounded
            self._list(rest)
        block.free = False
        self.allocated_bytes += block.size
        handle = self._next
        self._next += 1
        self._live[handle] = block
        return handle

    @property
    def live_segment_bytes(self) -> int:
        """`memory_reserved` after `torch.cuda.empty_cache()`: the segments that still hold a
        live block (empty_cache returns wholly free segments to the driver), which is what
        the device's free memory loses."""
        return sum(sum(b.size for b in blocks) for blocks in self._segments
                   if any(not b.free for b in blocks))

    def free(self, handle: int) -> None:
        block = self._live.pop(handle)
        self.allocated_bytes -= block.size
        block.free = True
        blocks = self._segments[block.segment]
        i = blocks.index(block)
        if i + 1 < len(blocks) and blocks[i + 1].free:  # merge with the next free block
            nxt = blocks.pop(i + 1)
            self._unlist(nxt)
            block.size += nxt.size
        if i > 0 and blocks[i - 1].free:  # and with the previous one
            prev = blocks[i - 1]
            self._unlist(prev)
            prev.size += blocks.pop(i).size
            block = prev
        self._list(block)

    def _list(self, block: _Block) -> None:
        key = block.fit_key
        insort(self._free[self._pools[block.segment]], key)
        self._free_blocks[key] = block

    def _unlist(self, block: _Block) -> None:
        key = block.fit_key
        keys = self._free[self._pools[block.segment]]
        del keys[bisect_left(keys, key)]
        del self._free_blocks[key]
