"""Time and peak memory of `kvplan validate`, each against a baseline run in the same session.

Cases (median of --runs, each a fresh process; wall seconds and peak resident memory):
- floor:      `python -c "import torch"` (every validate pays for torch's import);
- all:        `kvplan validate --all` (every library model x layout at the probe size, CPU);
- 70b-32k:    `kvplan validate llama-3.1-70b --tokens 32k` (vllm layout, 10 GiB of cache, CPU).

Issue 13's targets on 2 cores: --all under 20 s with peak RSS under 1 GiB; a 70B x 32k
validate under 3 s on the CPU. Results are written in benchmarks/README.md.

    .venv/bin/python benchmarks/validate_all.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

CASES = {
    "floor": [sys.executable, "-c", "import torch"],
    "all": [sys.executable, "-m", "kvplan", "validate", "--all", "-f", "json"],
    "70b-32k": [sys.executable, "-m", "kvplan", "validate", "llama-3.1-70b", "--tokens", "32k",
                "-f", "json"],
}


def run(cmd: list[str]) -> tuple[float, int]:
    """(wall seconds, peak resident bytes) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[2:])} exited {proc.returncode}: {err.strip()}")
    return wall, usage.ru_maxrss * 1024  # Linux reports KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    opts = parser.parse_args()
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in CASES}
    for _ in range(opts.runs):  # interleaved, so load on the machine hits every case alike
        for name, cmd in CASES.items():
            results[name].append(run(cmd))
    floor = statistics.median(w for w, _ in results["floor"])
    print(f"{'case':<10} {'median s':>9} {'min s':>7} {'max s':>7} {'x floor':>8} "
          f"{'peak RSS MiB':>13}")
    for name, rows in results.items():
        walls = [w for w, _ in rows]
        median = statistics.median(walls)
        rss = max(r for _, r in rows) / 2**20
        print(f"{name:<10} {median:9.2f} {min(walls):7.2f} {max(walls):7.2f} "
              f"{median / floor:8.2f} {rss:13.0f}")


if __name__ == "__main__":
    main()
