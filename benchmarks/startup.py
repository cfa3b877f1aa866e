"""Start-up benchmark: how long a fresh `kvplan` process takes, against `python -c pass`.

Each measurement is one cold process (a new interpreter, nothing imported yet), timed from
spawn to exit; one discarded warm-up round first warms the disk cache and, by default, fills a
private bytecode cache (see --bytecode). The commands run round-robin. Commands:

- `python -c pass`                                  the interpreter floor
- `python -m kvplan --help`                         CLI set-up only
- `python -m kvplan size llama-3.1-8b --format json` the target: a pure calculation
- the same two through the `kvplan` console script, when one sits next to `python`

Usage (from the repository root, with the venv that has kvplan installed):

    .venv/bin/python benchmarks/startup.py                 # 15 runs each, a table
    .venv/bin/python benchmarks/startup.py --runs 30 --json
    .venv/bin/python benchmarks/startup.py --importtime    # which imports cost the time
    .venv/bin/python benchmarks/startup.py --ladder        # what each layer of the CLI costs
    .venv/bin/python benchmarks/startup.py --floor         # size/plan as ratios to the floor
    .venv/bin/python benchmarks/startup.py --instructions  # the same, instructions (valgrind)
    .venv/bin/python benchmarks/startup.py --check         # exit 1 when the target is missed
    .venv/bin/python benchmarks/startup.py --bytecode as-is # keep PYTHONDONTWRITEBYTECODE etc.

Target (benchmarks/README.md): median <= 0.15 s for `kvplan size llama-3.1-8b --format json`
on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

TARGET_S = 0.15
TARGET_ARGS = ("size", "llama-3.1-8b", "--format", "json")
REPO_ROOT = Path(__file__).resolve().parent.parent

# Variables that would change what a cold start does (or make it print import timings).
_STRIP_ENV = ("PYTHONPROFILEIMPORTTIME", "PYTHONVERBOSE", "PYTHONDEVMODE", "PYTHONTRACEMALLOC",
              "PYTHONSTARTUP", "KVPLAN_DEBUG")


@dataclass(frozen=True)
class Timing:
    name: str
    argv: list[str]
    runs: int
    median_s: float
    min_s: float
    max_s: float
    is_target: bool
    # user + system CPU seconds of the process: less sensitive to other load than wall time
    cpu_median_s: float


# How bytecode is handled, set by main(): "cached" = what an installed tool sees from its second
# run on (compiled .pyc files, kept under a private PYTHONPYCACHEPREFIX so that the source tree
# stays clean); "as-is" = this shell's environment (PYTHONDONTWRITEBYTECODE=1 makes Python
# recompile every module that has no .pyc, e.g. an editable install's own sources, every run).
_BYTECODE = {"mode": "cached", "prefix": ""}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _STRIP_ENV}
    env["COLUMNS"] = "120"
    if _BYTECODE["mode"] == "cached":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = _BYTECODE["prefix"]
    return env


def console_script() -> Path | None:
    """The `kvplan` entry point installed beside this interpreter, if any."""
    bindir = Path(sys.executable).parent
    for name in ("kvplan", "kvplan.exe"):
        candidate = bindir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def commands() -> list[tuple[str, list[str], bool]]:
    """(label, argv, is_target) for every command measured."""
    py = sys.executable
    out = [
        ("python -c pass (floor)", [py, "-c", "pass"], False),
        ("python -m kvplan --help", [py, "-m", "kvplan", "--help"], False),
        ("python -m kvplan " + " ".join(TARGET_ARGS), [py, "-m", "kvplan", *TARGET_ARGS], True),
    ]
    script = console_script()
    if script is not None:
        out += [
            ("kvplan --help", [str(script), "--help"], False),
            ("kvplan " + " ".join(TARGET_ARGS), [str(script), *TARGET_ARGS], True),
        ]
    return out


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one process, spawn to exit (exit codes in `ok`)."""
    cpu_before = _children_cpu_s()
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          cwd=REPO_ROOT, env=_env(), check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"command failed (exit {proc.returncode}): {' '.join(argv)}\n"
                         + proc.stderr.decode(errors="replace"))
    return elapsed, _children_cpu_s() - cpu_before


def median_call_s(call: Callable[[], object], runs: int) -> float:
    """Median wall seconds of `call()` run `runs` times in this process (no spawn)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(runs: int, warmup: int,
            cmds: list[tuple[str, list[str], bool]] | None = None) -> list[Timing]:
    """Round-robin over the commands, so that a burst of load elsewhere on the machine
    spreads over all of them instead of skewing one."""
    cmds = commands() if cmds is None else cmds
    for _ in range(warmup):
        for _, argv, _ in cmds:
            run_once(argv)
    wall: list[list[float]] = [[] for _ in cmds]
    cpu: list[list[float]] = [[] for _ in cmds]
    for _ in range(runs):
        for i, (_, argv, _) in enumerate(cmds):
            w, c = run_once(argv)
            wall[i].append(w)
            cpu[i].append(c)
    return [Timing(name, argv, runs, statistics.median(w), min(w), max(w), is_target,
                   statistics.median(c))
            for (name, argv, is_target), w, c in zip(cmds, wall, cpu, strict=True)]


def machine() -> dict[str, object]:
    return {
        "date": time.strftime("%Y-%m-%d"),
        "bytecode": _BYTECODE["mode"],
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "executable": sys.executable,
    }


def print_table(results: list[Timing], info: dict[str, object], target_s: float) -> None:
    print(f"kvplan start-up, {results[0].runs} cold runs each, bytecode {info['bytecode']}; "
          f"{info['date']}, nproc {info['nproc']}, Python {info['python']} "
          f"({info['platform']})")
    width = max(len(r.name) for r in results)
    print(f"{'command':<{width}}  {'median s':>9}  {'min s':>7}  {'max s':>7}  {'CPU s':>6}")
    print(f"{'-' * width}  {'-' * 9}  {'-' * 7}  {'-' * 7}  {'-' * 6}")
    for r in results:
        print(f"{r.name:<{width}}  {r.median_s:>9.3f}  {r.min_s:>7.3f}  {r.max_s:>7.3f}  "
              f"{r.cpu_median_s:>6.3f}")
    print("(wall seconds, spawn to exit; CPU s = median user + system seconds)")
    floor = results[0].median_s
    for r in results:
        if r.is_target:
            verdict = "met" if r.median_s <= target_s else "MISSED"
            print(f"target median <= {target_s:.3f} s for `{r.name}`: {r.median_s:.3f} s, "
                  f"{verdict} ({r.median_s - floor:.3f} s above the interpreter floor)")


# --- import-time mode -------------------------------------------------------------------

_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)\s*$")


def importtime_once(args: tuple[str, ...]) -> list[tuple[str, int, int, int]]:
    """(module, self_us, cumulative_us, depth) per import line of one -X importtime run."""
    argv = [sys.executable, "-X", "importtime", "-m", "kvplan", *args]
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          cwd=REPO_ROOT, env=_env(), check=False)
    if proc.returncode != 0:
        raise SystemExit(f"command failed (exit {proc.returncode}): {' '.join(argv)}")
    rows = []
    for line in proc.stderr.decode(errors="replace").splitlines():
        m = _LINE.match(line)
        if m:
            depth = (len(m.group(3)) - 1) // 2
            rows.append((m.group(4), int(m.group(1)), int(m.group(2)), depth))
    return rows


def importtime_report(runs: int, top: int, as_json: bool) -> None:
    samples = [importtime_once(TARGET_ARGS) for _ in range(runs)]
    # Median per module over the runs (the same modules import in the same order each time).
    by_module: dict[str, dict[str, list[int]]] = {}
    depth: dict[str, int] = {}
    for rows in samples:
        for name, self_us, cum_us, d in rows:
            entry = by_module.setdefault(name, {"self": [], "cum": []})
            entry["self"].append(self_us)
            entry["cum"].append(cum_us)
            depth.setdefault(name, d)
    med = {name: (int(statistics.median(v["self"])), int(statistics.median(v["cum"])))
           for name, v in by_module.items()}
    total_us = sum(med[n][1] for n in med if depth[n] == 0)
    per_package: dict[str, int] = {}
    for name, (self_us, _) in med.items():
        package = name.split(".")[0]
        per_package[package] = per_package.get(package, 0) + self_us
    top_cum = sorted(med.items(), key=lambda kv: -kv[1][1])[:top]
    top_pkg = sorted(per_package.items(), key=lambda kv: -kv[1])[:top]
    if as_json:
        print(json.dumps({
            "command": ["python", "-X", "importtime", "-m", "kvplan", *TARGET_ARGS],
            "runs": runs, "machine": machine(), "total_import_us": total_us,
            "top_cumulative": [{"module": n, "self_us": s, "cumulative_us": c, "depth": depth[n]}
                               for n, (s, c) in top_cum],
            "by_package_self_us": dict(top_pkg),
        }, indent=2))
        return
    print(f"python -X importtime -m kvplan {' '.join(TARGET_ARGS)}: median of {runs} runs")
    print(f"all imports together: {total_us / 1e6:.3f} s (sum of top-level cumulative times)\n")
    print(f"top {top} imports by cumulative time (an import's own time plus what it imports):")
    print(f"{'cumulative ms':>13}  {'self ms':>8}  module")
    for name, (self_us, cum_us) in top_cum:
        print(f"{cum_us / 1e3:>13.1f}  {self_us / 1e3:>8.1f}  {'  ' * depth[name]}{name}")
    print(f"\ntop {top} top-level packages by their modules' own (self) time:")
    print(f"{'self ms':>8}  {'share':>6}  package")
    for package, self_us in top_pkg:
        share = self_us / total_us if total_us else 0.0
        print(f"{self_us / 1e3:>8.1f}  {share:>6.1%}  {package}")


# --- floor mode: ratios against typer + rich + PyYAML ----------------------------------------

FLOOR_CODE = "import typer, rich.console, rich.table, yaml"
# (label, kvplan arguments, the most its median ratio to the floor may be: issue 13)
LAUNCH_LINE = ("vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 2 "
               "--gpu-memory-utilization 0.9")
START_LOG = str(REPO_ROOT / "tests" / "fixtures" / "logs" / "vllm-v1-llama-3.1-8b.log")
FLOOR_TARGETS = (
    ("size --format json", ("size", "llama-3.1-8b", "--format", "json"), 1.0),
    ("size (table)", ("size", "llama-3.1-8b"), 1.0),
    ("plan (table)", ("plan", "llama-3.1-8b", "--gpu", "h100", "--context", "8k"), 1.0),
    ("plan --from-command", ("plan", "--from-command", LAUNCH_LINE, "--gpu", "h100"), 1.0),
    ("explain (a vLLM log)", ("explain", START_LOG), 1.0),
)


def floor_report(runs: int, warmup: int, as_json: bool) -> bool:
    """Each command against `python -c "import typer, rich.console, rich.table, yaml"` (the
    libraries every kvplan command loads, with nothing of kvplan's): the ratio is taken
    round by round, the command and the floor run back to back, so that load elsewhere on
    the machine moves both; the median over rounds is reported. True when all are met."""
    py = sys.executable
    cmds = [("floor: python -c '" + FLOOR_CODE + "'", [py, "-c", FLOOR_CODE])]
    cmds += [(label, [py, "-m", "kvplan", *args]) for label, args, _ in FLOOR_TARGETS]
    for _ in range(warmup):
        for _, argv in cmds:
            run_once(argv)
    wall: list[list[float]] = [[] for _ in cmds]
    cpu: list[list[float]] = [[] for _ in cmds]
    for _ in range(runs):
        for i, (_, argv) in enumerate(cmds):
            w, c = run_once(argv)
            wall[i].append(w)
            cpu[i].append(c)
    rows = []
    for i, (label, argv) in enumerate(cmds):
        target = FLOOR_TARGETS[i - 1][2] if i else None
        rw = statistics.median(x / y for x, y in zip(wall[i], wall[0], strict=True))
        rc = statistics.median(x / y for x, y in zip(cpu[i], cpu[0], strict=True))
        rows.append({"command": label, "argv": argv, "median_s": statistics.median(wall[i]),
                     "cpu_median_s": statistics.median(cpu[i]), "wall_ratio": rw,
                     "cpu_ratio": rc, "target_ratio": target,
                     "met": None if target is None else rw <= target})
    met = all(r["met"] is not False for r in rows)
    if as_json:
        print(json.dumps({"schema": "kvplan.startup-floor/1", "machine": machine(),
                          "runs": runs, "rows": rows, "met": met}, indent=2))
        return met
    print(f"start-up against the floor, median of {runs} rounds (ratios taken round by round)")
    width = max(len(str(r["command"])) for r in rows)
    print(f"{'command':<{width}}  {'wall s':>7}  {'CPU s':>6}  {'wall x':>6}  {'CPU x':>6}  "
          f"{'target':>6}")
    for r in rows:
        target = "" if r["target_ratio"] is None else (
            f"{r['target_ratio']:.1f} " + ("met" if r["met"] else "MISSED"))
        print(f"{r['command']:<{width}}  {r['median_s']:>7.3f}  {r['cpu_median_s']:>6.3f}  "
              f"{r['wall_ratio']:>6.2f}  {r['cpu_ratio']:>6.2f}  {target}")
    return met


# --- instructions mode: the floor commands' instruction counts (valgrind) --------------------

_COLLECTED = re.compile(r"Collected : (\d+)")


def instructions_once(argv: list[str]) -> int:
    """Instructions one process executes (valgrind's callgrind tool, user space), which
    unlike its time does not move with other load on the machine; about 100x slower."""
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv]
    env = {**_env(), "PYTHONHASHSEED": "0"}  # the same set and dict orders every run
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          cwd=REPO_ROOT, env=env, check=False)
    found = _COLLECTED.search(proc.stderr.decode(errors="replace"))
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"valgrind failed (exit {proc.returncode}): {' '.join(argv)}\n"
                         + proc.stderr.decode(errors="replace")[-1000:])
    return int(found.group(1))


def instructions_report(as_json: bool) -> None:
    """The --floor commands once each under valgrind, as ratios of instructions to the
    floor's: a measure for a busy machine, where the wall and CPU ratios spread by +-0.05."""
    import shutil

    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind on PATH")
    py = sys.executable
    cmds = [("floor: python -c '" + FLOOR_CODE + "'", [py, "-c", FLOOR_CODE])]
    cmds += [(label, [py, "-m", "kvplan", *args]) for label, args, _ in FLOOR_TARGETS]
    if _BYTECODE["mode"] == "cached":
        for _, argv in cmds:
            run_once(argv)  # compile into the private bytecode cache first
    counts = [instructions_once(argv) for _, argv in cmds]
    rows = [{"command": label, "argv": argv, "instructions": n, "ratio": n / counts[0]}
            for (label, argv), n in zip(cmds, counts, strict=True)]
    if as_json:
        print(json.dumps({"schema": "kvplan.startup-instructions/1", "machine": machine(),
                          "rows": rows}, indent=2))
        return
    print("instructions against the floor (valgrind --tool=callgrind, one run each)")
    width = max(len(str(r["command"])) for r in rows)
    print(f"{'command':<{width}}  {'instructions':>13}  {'x floor':>7}")
    for r in rows:
        print(f"{r['command']:<{width}}  {r['instructions']:>13,}  {r['ratio']:>7.3f}")


# --- ladder mode ------------------------------------------------------------------------

# The size command's work without the CLI: the same library calls and JSON text, no typer.
_CORE = (
    "import sys\n"
    "{pre}"
    "from kvplan.sources.library import resolve\n"
    "from kvplan.core.dtypes import parse_format\n"
    "from kvplan.core.sizing import size\n"
    "from kvplan.output.tables import size_view\n"
    "from kvplan.output.render import render\n"
    "spec = resolve('llama-3.1-8b')\n"
    "fmt = parse_format('auto', spec.dtype)\n"
    "result = size(spec, fmt, tokens=spec.max_context_tokens)\n"
    "sys.stdout.write(render(size_view(result, spec, fmt, []), 'json'))\n"
)


def ladder_commands() -> list[tuple[str, list[str], bool]]:
    """Cumulative steps from the bare interpreter to the full CLI: each row's extra time over
    the row above is what that step costs."""
    py = sys.executable
    steps = [
        ("python -c pass", [py, "-c", "pass"], False),
        ("+ the size calculation and JSON, no CLI", [py, "-c", _CORE.format(pre="")], False),
        ("+ import typer", [py, "-c", _CORE.format(pre="import typer\n")], False),
    ]
    if _has_module("typer._adapters"):  # typer's pydantic adapters: only some releases
        steps.append(("+ import typer._adapters (pydantic)",
                      [py, "-c", _CORE.format(pre="import typer, typer._adapters\n")], False))
    steps.append(("= python -m kvplan " + " ".join(TARGET_ARGS),
                  [py, "-m", "kvplan", *TARGET_ARGS], True))
    return steps


def _has_module(name: str) -> bool:
    """Whether the interpreter the steps run in can import `name` (without importing it)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def print_ladder(results: list[Timing]) -> None:
    print(f"start-up ladder, median of {results[0].runs} cold runs each (round-robin)")
    width = max(len(r.name) for r in results)
    print(f"{'step':<{width}}  {'median s':>9}  {'step costs s':>12}  {'CPU s':>6}")
    previous = None
    for r in results:
        step = "" if previous is None else f"{r.median_s - previous:+12.3f}"
        print(f"{r.name:<{width}}  {r.median_s:>9.3f}  {step:>12}  {r.cpu_median_s:>6.3f}")
        previous = r.median_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=None,
                        help="cold runs per command (15; 5 with --importtime)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="discarded runs per command before timing (1)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--target", type=float, default=TARGET_S,
                        help=f"target median in seconds for the size command ({TARGET_S})")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a size command's median misses the target")
    parser.add_argument("--importtime", action="store_true",
                        help="instead: the top imports of `python -X importtime -m kvplan "
                        + " ".join(TARGET_ARGS) + "`")
    parser.add_argument("--ladder", action="store_true",
                        help="instead: time the size command's steps (bare calculation, "
                        "+ typer, + typer's pydantic adapters, the CLI) to see what each costs")
    parser.add_argument("--floor", action="store_true",
                        help="instead: size (JSON and table) and plan as ratios to `python -c "
                        f"\"{FLOOR_CODE}\"` (every target 1.0)")
    parser.add_argument("--instructions", action="store_true",
                        help="instead: the --floor commands' instruction counts under "
                        "valgrind, as ratios to the floor's (steady on a busy machine)")
    parser.add_argument("--top", type=int, default=15, help="rows in --importtime (15)")
    parser.add_argument("--bytecode", choices=("cached", "as-is"), default="cached",
                        help="cached: compiled .pyc in a private cache, as an installed tool "
                        "runs (default); as-is: this shell's environment, e.g. "
                        "PYTHONDONTWRITEBYTECODE=1")
    args = parser.parse_args(argv)
    if args.runs is None:
        args.runs = 5 if args.importtime else 15
    if args.runs < 1 or args.warmup < 0 or args.top < 1:
        parser.error("--runs and --top must be at least 1, --warmup at least 0")

    _BYTECODE["mode"] = args.bytecode
    with tempfile.TemporaryDirectory(prefix="kvplan-pycache-") as prefix:
        _BYTECODE["prefix"] = prefix
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    if args.importtime:
        if _BYTECODE["mode"] == "cached":
            run_once([sys.executable, "-m", "kvplan", *TARGET_ARGS])  # fill the bytecode cache
        importtime_report(args.runs, args.top, args.json)
        return 0

    if args.instructions:
        instructions_report(args.json)
        return 0
    # In "cached" mode the first run of each command compiles into the fresh private cache.
    warmup = max(args.warmup, 1) if _BYTECODE["mode"] == "cached" else args.warmup
    if args.floor:
        met = floor_report(args.runs, warmup, args.json)
        return 1 if (args.check and not met) else 0
    if args.ladder:
        steps = measure(args.runs, warmup, ladder_commands())
        if args.json:
            print(json.dumps({"schema": "kvplan.startup-ladder/1", "machine": machine(),
                              "results": [asdict(r) for r in steps]}, indent=2))
        else:
            print_ladder(steps)
        return 0
    results = measure(args.runs, warmup)
    info = machine()
    missed = any(r.is_target and r.median_s > args.target for r in results)
    if args.json:
        print(json.dumps({
            "schema": "kvplan.startup-bench/1", "machine": info, "target_s": args.target,
            "target_met": not missed,
            "results": [asdict(r) for r in results],
        }, indent=2))
    else:
        print_table(results, info, args.target)
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
