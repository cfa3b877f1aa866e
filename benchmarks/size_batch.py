"""`kvplan size llama-3.1-8b --tokens 8k --batch 1000000` against `--batch 1` in the same run,
as a table and as JSON.

Issue 13's figure: under 0.2 s (it took 114 s when a batch was a list of a million lengths,
each summed layer by layer). A batch is now one length times a count, so the ratio to a
batch of one should be about 1. Cold processes, round-robin, one discarded round first; the
library rows time kvplan.core.sizing.size in this process (no interpreter start-up).

    .venv/bin/python benchmarks/size_batch.py [--runs 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile

import startup
from startup import REPO_ROOT, median_call_s, run_once

TARGET_S = 0.2
BATCHES = (1, 1_000_000)
FORMATS = ("table", "json")  # JSON states the batch as [length, count] (kvplan.size/2)


def in_process(batch: int, runs: int = 20) -> float:
    from kvplan.core.dtypes import parse_format
    from kvplan.core.sizing import size
    from kvplan.sources.library import resolve

    spec = resolve("llama-3.1-8b")
    fmt = parse_format("auto", spec.dtype)
    return median_call_s(lambda: size(spec, fmt, tokens=8192, batch=batch), runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    opts = parser.parse_args()
    sys.path.insert(0, str(REPO_ROOT))
    with tempfile.TemporaryDirectory(prefix="kvplan-pycache-") as prefix:
        startup._BYTECODE["prefix"] = prefix  # compiled once, as an installed tool runs
        return _run(opts)


def _run(opts: argparse.Namespace) -> int:
    cases = [(b, fmt) for fmt in FORMATS for b in BATCHES]
    argv = {(b, fmt): [sys.executable, "-m", "kvplan", "size", "llama-3.1-8b", "--tokens", "8k",
                       "--batch", str(b), "--format", fmt] for b, fmt in cases}
    for case in cases:
        run_once(argv[case])
    wall: dict[tuple[int, str], list[float]] = {case: [] for case in cases}
    cpu: dict[tuple[int, str], list[float]] = {case: [] for case in cases}
    for _ in range(opts.runs):
        for case in cases:
            w, c = run_once(argv[case])
            wall[case].append(w)
            cpu[case].append(c)
    print(f"kvplan size llama-3.1-8b --tokens 8k --batch B --format F: {opts.runs} cold runs "
          "each, round-robin")
    print(f"{'batch':>9} {'format':>6} {'wall s':>7} {'CPU s':>6} {'wall/B=1':>8} "
          f"{'CPU/B=1':>7} {'library ms':>10}")
    for b, fmt in cases:
        base = (1, fmt)
        ratio_w = statistics.median(x / y for x, y in zip(wall[b, fmt], wall[base], strict=True))
        ratio_c = statistics.median(x / y for x, y in zip(cpu[b, fmt], cpu[base], strict=True))
        print(f"{b:>9,} {fmt:>6} {statistics.median(wall[b, fmt]):>7.3f} "
              f"{statistics.median(cpu[b, fmt]):>6.3f} {ratio_w:>8.2f} {ratio_c:>7.2f} "
              f"{1000 * in_process(b):>10.3f}")
    for fmt in FORMATS:
        big = statistics.median(wall[BATCHES[-1], fmt])
        big_cpu = statistics.median(cpu[BATCHES[-1], fmt])
        print(f"target ({fmt}): --batch 1000000 under {TARGET_S} s: "
              f"{'met' if big < TARGET_S else 'MISSED'} (median {big:.3f} s wall, {big_cpu:.3f} "
              "s CPU; on a busy machine wall time also counts waiting for a core)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
