"""Issue 13 at its worst case: workloads where every request is a distinct shape, and the
weight replay that every layout `plan --find-gpus` tries runs (kvplan.core.allocator).

Each fast path is held to a slow reference written here: the caching allocator's best fit
as a scan of every block (the rule as c10's CUDACachingAllocator states it), and a workload's
figures request by request."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.core.allocator import (
    MIN_BLOCK_BYTES,
    SMALL_SIZE_BYTES,
    CachingAllocator,
    round_request,
    segment_size,
)


class _SlowAllocator:
    """The allocator's rules with nothing indexed: blocks as [segment, offset, size, free]
    lists in address order, best fit by scanning every block of the pool."""

    def __init__(self) -> None:
        self.allocated = 0
        self.segments: list[list[list[int]]] = []
        self.pools: list[bool] = []  # small?
        self.live: dict[int, list[int]] = {}

    def malloc(self, handle: int, num_bytes: int) -> None:
        rounded = round_request(num_bytes)
        small = rounded <= SMALL_SIZE_BYTES
        best = None
        for seg, blocks in enumerate(self.segments):
            if self.pools[seg] != small:
                continue
            for b in blocks:  # strictly smaller wins: ties go to the lowest address
                if b[3] and b[2] >= rounded and (best is None or b[2] < best[2]):
                    best = b
        if best is None:
            best = [len(self.segments), 0, segment_size(rounded), 1]
            self.segments.append([best])
            self.pools.append(small)
        remaining = best[2] - rounded
        if remaining >= MIN_BLOCK_BYTES if small else remaining > SMALL_SIZE_BYTES:
            blocks = self.segments[best[0]]
            at = next(i for i, b in enumerate(blocks) if b is best)
            blocks.insert(at + 1, [best[0], best[1] + rounded, remaining, 1])
            best[2] = rounded
        best[3] = 0
        self.allocated += best[2]
        self.live[handle] = best

    def free(self, handle: int) -> None:
        block = self.live.pop(handle)
        self.allocated -= block[2]
        block[3] = 1
        blocks = self.segments[block[0]]
        i = next(i for i, b in enumerate(blocks) if b is block)
        if i + 1 < len(blocks) and blocks[i + 1][3]:
            block[2] += blocks.pop(i + 1)[2]
        if i > 0 and blocks[i - 1][3]:
            blocks[i - 1][2] += blocks.pop(i)[2]

    def layout(self) -> list[list[tuple[int, int, bool]]]:
        return [[(b[1], b[2], bool(b[3])) for b in blocks] for blocks in self.segments]

    def live_segments(self) -> int:
        return sum(sum(b[2] for b in blocks) for blocks in self.segments
                   if any(not b[3] for b in blocks))


def _layout(alloc: CachingAllocator) -> list[list[tuple[int, int, bool]]]:
    """Every segment's blocks (offset, size, free): which block each request took."""
    return [[(b.offset, b.size, b.free) for b in blocks] for blocks in alloc._segments]


_SIZES = st.one_of(st.integers(1, 4096), st.integers(1, 3 << 20), st.integers(1, 64 << 20),
                   st.sampled_from([512, 1 << 20, (1 << 20) + 1, 10 << 20, 25 << 20]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), _SIZES, st.integers(0, 10**6)), max_size=120))
def test_indexed_allocator_matches_the_scan(steps):
    fast, slow = CachingAllocator(), _SlowAllocator()
    live: list[int] = []
    for free_one, size, pick in steps:
        if free_one and live:
            handle = live.pop(pick % len(live))
            fast.free(handle)
            slow.free(handle)
        else:
            handle = fast.malloc(size)
            slow.malloc(handle, size)
            live.append(handle)
        assert fast.allocated_bytes == slow.allocated
        assert fast.live_segment_bytes == slow.live_segments()
        assert _layout(fast) == slow.layout()


def test_indexed_allocator_matches_the_scan_on_a_long_replay():
    rng = random.Random(13)
    fast, slow = CachingAllocator(), _SlowAllocator()
    live: list[int] = []
    for _ in range(3000):
        if live and rng.random() < 0.4:
            handle = live.pop(rng.randrange(len(live)))
            fast.free(handle)
            slow.free(handle)
        else:
            size = rng.choice([rng.randint(1, 2048), rng.randint(1, 2 << 20),
                               rng.randint(1, 40 << 20)])
            handle = fast.malloc(size)
            slow.malloc(handle, size)
            live.append(handle)
    assert fast.allocated_bytes == slow.allocated
    assert fast.live_segment_bytes == slow.live_segments()
    assert _layout(fast) == slow.layout()
