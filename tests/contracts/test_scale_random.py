"""Issue 13 at its worst case: workloads where every request is a distinct shape, and the
weight replay that every layout `plan --find-gpus` tries runs (kvplan.core.allocator).

Each fast path is held to a slow reference written here: the caching allocator's best fit
as a scan of every block (the rule as c10's CUDACachingAllocator states it), and a workload's
figures request by request."""

from __future__ import annotations

import csv
import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
from factories import dense
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.core.allocator import (
    MIN_BLOCK_BYTES,
    SMALL_SIZE_BYTES,
    CachingAllocator,
    round_request,
    segment_size,
)
from kvplan.core.errors import BadInputError
from kvplan.planning import plan
from kvplan.sources import workload
from kvplan.sources.workload import RequestGroup, Workload, parse_workload


def llama70b_on_h100() -> plan.Deployment:
    spec = replace(dense(layers=80, heads=64), name="llama-3.1-70b", num_params=70553706496)
    return plan.Deployment(spec, gpu_name="H100 SXM", gpu_memory_bytes=85028896768,
                           max_model_len=131072)


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


def _step(fast: CachingAllocator, slow: _SlowAllocator, live: list[int], free_one: bool,
          size: int, pick: int) -> None:
    """One replay step on both allocators: free live[pick % len(live)], or allocate `size`."""
    if free_one and live:
        handle = live.pop(pick % len(live))
        fast.free(handle)
        slow.free(handle)
    else:
        handle = fast.malloc(size)
        slow.malloc(handle, size)
        live.append(handle)


def _assert_same_state(fast: CachingAllocator, slow: _SlowAllocator) -> None:
    assert fast.allocated_bytes == slow.allocated
    assert fast.live_segment_bytes == slow.live_segments()
    assert _layout(fast) == slow.layout()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), _SIZES, st.integers(0, 10**6)), max_size=120))
def test_indexed_allocator_matches_the_scan(steps):
    fast, slow = CachingAllocator(), _SlowAllocator()
    live: list[int] = []
    for free_one, size, pick in steps:
        _step(fast, slow, live, free_one, size, pick)
        _assert_same_state(fast, slow)


def test_indexed_allocator_matches_the_scan_on_a_long_replay():
    rng = random.Random(13)
    fast, slow = CachingAllocator(), _SlowAllocator()
    live: list[int] = []
    for _ in range(3000):
        free_one = bool(live) and rng.random() < 0.4
        size = 0 if free_one else rng.choice([rng.randint(1, 2048), rng.randint(1, 2 << 20),
                                              rng.randint(1, 40 << 20)])
        pick = rng.randrange(len(live)) if free_one else 0  # the draws in their old order
        _step(fast, slow, live, free_one, size, pick)
    _assert_same_state(fast, slow)


# --- workload files of distinct shapes ---------------------------------------------------------

def _slow_histogram(path: Path, n: int = 1) -> dict[tuple[int, int, int], int]:
    """The file read the slow way: one json.loads / csv row per line, one request at a time."""
    rows: list[dict[str, object]]
    if path.suffix == ".csv":
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    else:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    hist: dict[tuple[int, int, int], int] = {}
    for row in rows:
        key = (int(row["prompt_tokens"]), int(row["output_tokens"]),  # type: ignore[call-overload]
               int(row.get("n", n)))  # type: ignore[call-overload]
        hist[key] = hist.get(key, 0) + 1
    return hist


def _random_requests(count: int, seed: int) -> list[tuple[int, int, int]]:
    rng = random.Random(seed)
    return [(rng.randint(100, 8000), rng.randint(0, 1000), rng.choice((1, 1, 1, 2, 4)))
            for _ in range(count)]


def _write(path: Path, requests: list[tuple[int, int, int]], with_n: bool) -> Path:
    if path.suffix == ".csv":
        head = "prompt_tokens,output_tokens" + (",n" if with_n else "")
        path.write_text(head + "\n" + "".join(
            f"{p},{o},{s}\n" if with_n else f"{p},{o}\n" for p, o, s in requests))
    else:
        path.write_text("".join(json.dumps({"prompt_tokens": p, "output_tokens": o,
                                            **({"n": s} if with_n else {})}) + "\n"
                                for p, o, s in requests))
    return path


@pytest.mark.parametrize("name", ["r.jsonl", "r.csv"])
def test_100k_random_requests_answer_as_the_slow_reference(tmp_path, name):
    # every request a distinct shape (the worst case for the histogram); the figures are
    # checked against the file read line by line and summed request by request
    requests = _random_requests(100_000, 17)
    path = _write(tmp_path / name, requests, with_n=False)
    w = parse_workload(str(path))
    slow = _slow_histogram(path)
    assert dict(w.shapes) == slow and len(slow) > 90_000
    assert w.num_requests == w.num_sequences == 100_000
    assert w.longest == max(p + o for p, o, _ in requests)
    by_length: dict[int, int] = {}
    for p, o, _ in requests:
        by_length[p + o] = by_length.get(p + o, 0) + 1
    assert dict(w.sequences_by_tokens) == by_length
    assert w.extra_samples_by_prompt == ()
    # the same answer as the workload built from the slow histogram, one group per request
    ref = Workload.of(RequestGroup(1, p, o) for p, o, _ in requests)
    dep = llama70b_on_h100()
    a = plan.fewest_gpus(dep, plan.Target(workload=w))
    b = plan.fewest_gpus(dep, plan.Target(workload=ref))
    assert a.options == b.options and a.best == b.best
    assert len([o for o in a.options if not o.error]) > 10


@pytest.mark.parametrize("name", ["s.jsonl", "s.csv"])
def test_random_samples_per_request_as_the_slow_reference(tmp_path, name):
    requests = _random_requests(20_000, 5)
    path = _write(tmp_path / name, requests, with_n=True)
    w = parse_workload(str(path))
    assert dict(w.shapes) == _slow_histogram(path)
    assert w.num_sequences == sum(s for _, _, s in requests)
    by_length: dict[int, int] = {}
    extra: dict[int, int] = {}
    for p, o, s in requests:
        by_length[p + o] = by_length.get(p + o, 0) + s
        if s > 1:
            extra[p] = extra.get(p, 0) + s - 1
    assert dict(w.sequences_by_tokens) == by_length
    assert dict(w.extra_samples_by_prompt) == extra
    # --n applies to rows without an n field: every sequence counted n times
    w3 = parse_workload(str(_write(tmp_path / ("3" + name), requests, with_n=False)), n=3)
    assert dict(w3.sequences_by_tokens) == {t: 3 * c for t, c in
                                            _lengths(requests).items()}


def _lengths(requests: list[tuple[int, int, int]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for p, o, _ in requests:
        out[p + o] = out.get(p + o, 0) + 1
    return out


# Lines near the plain shape: each file is read with and without the plain-numbers path, and
# both must give the same workload or the same message (file and line named).
_JSON_LINES = st.sampled_from([
    '{"prompt_tokens": 812, "output_tokens": 96}',
    '{"prompt_tokens":812,"output_tokens":96}',
    '  {"prompt_tokens": 812 ,  "output_tokens": 96 }  ',
    '{"prompt_tokens": 812, "output_tokens": 96}\r',
    '{"output_tokens": 96, "prompt_tokens": 812}',
    '{"prompt_tokens": 812, "output_tokens": 0}',
    '{"prompt_tokens": 0, "output_tokens": 96}',
    '{"prompt_tokens": 0812, "output_tokens": 96}',
    '{"prompt_tokens": -812, "output_tokens": 96}',
    '{"prompt_tokens": 812.0, "output_tokens": 96}',
    '{"prompt_tokens": 8e2, "output_tokens": 96}',
    '{"prompt_tokens": "812", "output_tokens": 96}',
    '{"prompt_tokens": 812, "output_tokens": }',
    '{"prompt_tokens": 812, "output_tokens": 96',
    '{"prompt_tokens1": 812, "output_tokens": 96}',
    '{"prompt_tokens1": , "output_tokens": 96}',
    '{"prompt_tokens": 812, "output_tokens": 96, "n": 2}',
    '{"prompt_tokens": 812, "output_tokens": 96, "n": 0}',
    '{"prompt_tokens": 1234567890123456789012, "output_tokens": 96}',
    '{"prompt": 700, "output": 50}',
    '{"prompt_tokens": 812, "output_tokens": 96}{"prompt_tokens": 1, "output_tokens": 1}',
    '[812, 96]',
    '{"prompt_tokens": 812, "prompt_tokens": 9, "output_tokens": 96}',
    '{"prompt_tokens": true, "output_tokens": 96}',
    "",
    "   ",
    "\x0c",
    "garbage",
])
_CSV_LINES = st.sampled_from([
    "812,96", "812,96\r", "0812,96", "812,0", "0,96", "812,", ",96", "812,96,1", "812",
    " 812,96", "812.5,96", "-812,96", "abc,96", "", "1234567890123456789012,96",
])


def _outcome(path: Path, n: int = 1) -> object:
    try:
        return parse_workload(str(path), n=n)
    except BadInputError as exc:
        return ("error", exc.message, exc.hint)


def _both_ways(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    fast = _outcome(path)
    with monkeypatch.context() as m:
        m.setattr(workload, "_plain_numbers", lambda *a: None)
        slow = _outcome(path)
    return fast, slow


@settings(max_examples=200, deadline=None)
@given(head=st.lists(st.tuples(st.integers(1, 99_999), st.integers(0, 9_999)), min_size=1,
                     max_size=4, unique=True).map(
           lambda ps: [f'{{"prompt_tokens": {p}, "output_tokens": {o}}}' for p, o in ps]),
       odd=st.lists(_JSON_LINES, max_size=4), end=st.sampled_from(["\n", "", "\r\n"]))
def test_plain_jsonl_path_agrees_with_the_line_by_line_reader(tmp_path_factory, head, odd, end):
    path = tmp_path_factory.mktemp("w") / "w.jsonl"
    path.write_bytes((("\n".join(head + odd)) + end).encode())
    with pytest.MonkeyPatch.context() as mp:
        fast, slow = _both_ways(path, mp)
    assert fast == slow


@settings(max_examples=150, deadline=None)
@given(header=st.sampled_from(["prompt_tokens,output_tokens", "prompt,output",
                               "prompt_tokens,output_tokens,n", "p1,output_tokens",
                               "prompt_tokens,prompt_tokens", "prompt_tokens,output_tokens\r"]),
       head=st.lists(st.tuples(st.integers(1, 99_999), st.integers(0, 9_999)), min_size=1,
                     max_size=4, unique=True).map(lambda ps: [f"{p},{o}" for p, o in ps]),
       rows=st.lists(_CSV_LINES, max_size=5), end=st.sampled_from(["\n", ""]))
def test_plain_csv_path_agrees_with_the_line_by_line_reader(tmp_path_factory, header, head,
                                                             rows, end):
    path = tmp_path_factory.mktemp("w") / "w.csv"
    path.write_bytes(("\n".join([header, *head, *rows]) + end).encode())
    with pytest.MonkeyPatch.context() as mp:
        fast, slow = _both_ways(path, mp)
    assert fast == slow


def test_a_bad_line_in_a_plain_file_is_still_named(tmp_path):
    lines = ['{"prompt_tokens": 812, "output_tokens": 96}'] * 5000
    lines[3120] = '{"prompt_tokens": 0, "output_tokens": 96}'
    path = tmp_path / "w.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(BadInputError, match=r"w\.jsonl line 3121: lengths must be positive"):
        parse_workload(str(path))
    lines[3120] = '{"prompt_tokens": 812, "output_tokens": }'
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(BadInputError, match=r"w\.jsonl line 3121: not valid JSON"):
        parse_workload(str(path))
