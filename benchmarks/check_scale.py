"""`kvplan check` over a plan of 10,000 requirements, as ratios to baselines in the same run.

The plan names 2,500 deployments over two models (a library name and a spec file beside the
plan), four requirements each (min_concurrency, min_context, max_kv_bytes_per_request and a
workload's headroom): the shape of a large CI plan, where thousands of deployments repeat a
few models and settings. Each command is one cold process (`python -m kvplan check PLAN -f
json`), timed spawn to exit, round-robin after one discarded warm-up round, bytecode compiled
into a private cache (startup.py's rules). Baselines, measured in the same rounds:

- the same plan cut to 100 requirements (25 deployments): the ratio says how the cost grows
  with the plan (linear = about 100x less the start-up both share);
- `python -c "import typer, rich.console, rich.table, yaml"`: the libraries every kvplan
  command loads (startup.py --floor), so the ratio is in start-ups.

Usage (from the repository root):

    .venv/bin/python benchmarks/check_scale.py --runs 5
    .venv/bin/python benchmarks/check_scale.py --runs 5 --json

Target (issue 25): under 2 s for the 10,000-requirement plan; quoted as CPU seconds, since a
shared machine's wall time includes waiting for a core.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import startup
from startup import FLOOR_CODE, REPO_ROOT, machine, run_once

SPEC = REPO_ROOT / "model_configs" / "qwen3-8b.yaml"


def write_plan(folder: Path, deployments: int) -> Path:
    """A plan of `deployments` deployments, four requirements each, over two models."""
    (folder / "mine.yaml").write_text(SPEC.read_text(encoding="utf-8"), encoding="utf-8")
    lines = ["schema: kvplan.capacity/1", "deployments:"]
    for i in range(deployments):
        lines += [f"  - name: d{i}", f"    model: {'llama-3.1-8b' if i % 2 else 'mine.yaml'}",
                  "    gpu: h100", "    max_model_len: 32k", "    workload: 8x(2k+512)",
                  "    requires:",
                  f"      min_concurrency: {{concurrency: {1 + i % 16}, context: 8k}}",
                  f"      min_context: {{concurrency: {1 + i % 8}, context: 4k}}",
                  "      max_kv_bytes_per_request: {bytes: 4GiB, context: 8k}",
                  "      headroom_percent: 10"]
    path = folder / f"plan-{deployments * 4}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="kvplan-check-scale-") as tmp:
        startup._BYTECODE["prefix"] = str(Path(tmp) / "pyc")
        big, small = write_plan(Path(tmp), 2500), write_plan(Path(tmp), 25)
        cmds = [("floor (typer, rich, yaml imported)", [py, "-c", FLOOR_CODE]),
                ("check, 100 requirements", [py, "-m", "kvplan", "check", str(small), "-f",
                                             "json"]),
                ("check, 10,000 requirements", [py, "-m", "kvplan", "check", str(big), "-f",
                                                "json"])]
        for _, argv in cmds:
            run_once(argv, ok=(0, 1))
        wall: list[list[float]] = [[] for _ in cmds]
        cpu: list[list[float]] = [[] for _ in cmds]
        for _ in range(opts.runs):
            for i, (_, argv) in enumerate(cmds):
                w, c = run_once(argv, ok=(0, 1))
                wall[i].append(w)
                cpu[i].append(c)

    def ratio(times: list[list[float]], a: int, b: int) -> float:
        return statistics.median(x / y for x, y in zip(times[a], times[b], strict=True))

    rows = [{"command": label, "wall_median_s": statistics.median(wall[i]),
             "cpu_median_s": statistics.median(cpu[i]),
             "cpu_x_floor": ratio(cpu, i, 0), "cpu_x_100": ratio(cpu, i, 1)}
            for i, (label, _) in enumerate(cmds)]
    if opts.json:
        print(json.dumps({"schema": "kvplan.check-scale-bench/1", "machine": machine(),
                          "runs": opts.runs, "rows": rows}, indent=2))
        return 0
    print(f"kvplan check PLAN -f json: {opts.runs} cold runs each, round-robin; ratios taken "
          "round by round")
    print(f"{'command':<46} {'wall s':>7} {'CPU s':>6} {'CPU/floor':>9} {'CPU/100 req':>11}")
    for r in rows:
        print(f"{r['command']:<46} {r['wall_median_s']:>7.3f} {r['cpu_median_s']:>6.3f} "
              f"{r['cpu_x_floor']:>9.2f} {r['cpu_x_100']:>11.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
