"""Sweep speed: a 100,000-row grid computed and written as CSV.

Two measurements, median of --runs:
- in-process: kvplan.planning.sweep.sweep() rows written as CSV to /dev/null (rows per second);
- end to end: a cold `python -m kvplan sweep ...` process writing the CSV to /dev/null.
Target (issue 6): the 100,000-row grid in under 1 second.

    .venv/bin/python benchmarks/sweep.py [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# Each grid as CLI arguments: models first, then --flag value pairs.
# Worst case: every row a distinct length (no reuse across batch sizes).
DISTINCT = ["llama-3.1-8b", "--tokens", "1..100000:1"]
# A planning grid: 4 models x 3 dtypes x 4 TP x 256 lengths x 8 batches = 98,304 rows.
GRID = ["llama-3.1-70b", "gemma-3-27b", "deepseek-v3", "qwen3-next-80b-a3b",
        "--tokens", "512..128k:512", "--batch", "1,2,4,8,16,32,64,128", "--kv-dtype",
        "bf16,fp8,int4:g64", "--tp", "1,2,4,8"]


def _split(args: list[str]) -> tuple[list[str], dict[str, str]]:
    first_flag = next(i for i, a in enumerate(args) if a.startswith("--"))
    flags = args[first_flag:]
    return args[:first_flag], dict(zip(flags[::2], flags[1::2], strict=True))


def in_process(args: list[str]) -> tuple[float, int]:
    """Seconds to compute the grid and write it as CSV to /dev/null, and the row count."""
    from kvplan.core.dtypes import parse_format
    from kvplan.output.stream import write_rows
    from kvplan.planning.sweep import count_rows, parse_int_values, parse_token_range, sweep
    from kvplan.sources.library import resolve

    names, opts = _split(args)
    specs = [resolve(n) for n in names]
    formats = [parse_format(d) for d in opts.get("--kv-dtype", "bf16").split(",")]
    tokens = parse_token_range(opts["--tokens"])
    batches = parse_int_values(opts.get("--batch", "1"), "--batch")
    tps = parse_int_values(opts.get("--tp", "1"), "--tp")
    rows = count_rows(specs, formats, tps, tokens, batches)
    start = time.perf_counter()
    with open(os.devnull, "w") as out:
        write_rows(out, sweep(specs, formats, tps, tokens, batches), "csv", rows)
    return time.perf_counter() - start, rows


def end_to_end(args: list[str]) -> float:
    start = time.perf_counter()
    with open(os.devnull, "w") as out:
        subprocess.run([sys.executable, "-m", "kvplan", "sweep", *args], stdout=out, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    results = {}
    for label, args in (("distinct-lengths", DISTINCT), ("planning-grid", GRID)):
        inproc = [in_process(args) for _ in range(opts.runs)]
        rows = inproc[0][1]
        seconds = statistics.median(t for t, _ in inproc)
        cold = statistics.median(end_to_end(args) for _ in range(opts.runs))
        results[label] = {"rows": rows, "in_process_s": round(seconds, 4),
                          "rows_per_s": int(rows / seconds), "cold_process_s": round(cold, 4)}
    if opts.json:
        print(json.dumps({"schema": "kvplan.sweep-bench/1", "runs": opts.runs,
                          "results": results}, indent=2))
        return
    print(f"{'grid':<18} {'rows':>8} {'in-process s':>13} {'rows/s':>11} {'cold process s':>15}")
    for label, r in results.items():
        print(f"{label:<18} {r['rows']:>8,} {r['in_process_s']:>13.3f} {r['rows_per_s']:>11,} "
              f"{r['cold_process_s']:>15.3f}")


if __name__ == "__main__":
    main()
