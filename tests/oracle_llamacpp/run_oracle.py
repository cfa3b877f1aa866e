"""Differential test: kvplan's llama.cpp engine against llama.cpp's own binary.

Runs `llama-completion` (built by tests/oracle_llamacpp/setup.sh from the llama.cpp that the
llama-cpp-python 0.3.36 sdist vendors) on tiny GGUF models written with the `gguf` package
(make_ggufs.py: every architecture kvplan reads from GGUF headers) for a grid of settings:
`-c` x `-np` x `--kv-unified` x `-fa` x `-ctk`/`-ctv` x `-ub`, each run `-n 1` on the CPU.

From each run's log it reads every `llama_kv_cache: size = ...` line (the full-attention
cache and, for iSWA models, the sliding-window cache: cells per stream, layers, seqs, K and
V in MiB as printed), the CPU compute buffer, and whether llama.cpp refused the settings.
kvplan's side: the spec read from the same GGUF file and kvplan.engines.llamacpp.profile with
the same settings. Equal means every printed figure equals kvplan's figure printed the same
way (two decimals of MiB), and a refusal is a refusal on both sides. Then `kvplan explain`
reads every log and must report it as matching.

Prints "N of N equal"; exits 1 on any difference not listed in KNOWN_DIFFERENCES (each
explained in docs/engine-accuracy.md).

Usage: python tests/oracle_llamacpp/run_oracle.py [--binary PATH] [--quick] [-v]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
MIB = 2**20

# Differences that are understood and documented in docs/engine-accuracy.md: (model,
# figure) -> reason.
KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {}

KV_LINE = re.compile(
    r"llama_kv_cache: size = +([\d.]+) MiB \( *(\d+) cells, +(\d+) layers, +(\d+)/ *(\d+) seqs\), "
    r"K \((\w+)\): +([\d.]+) MiB, V \((\w+)\): +([\d.]+) MiB")
COMPUTE_LINE = re.compile(r"llama_context: +CPU compute buffer size = +([\d.]+) MiB")


@dataclass(frozen=True)
class Run:
    model: str
    ctx: int
    parallel: int
    unified: bool
    flash_attn: bool
    ctk: str
    ctv: str
    ubatch: int = 512

    @property
    def id(self) -> str:
        return (f"{self.model} -c {self.ctx} -np {self.parallel}"
                f"{' -kvu' if self.unified else ''} -fa {'on' if self.flash_attn else 'off'} "
                f"-ctk {self.ctk} -ctv {self.ctv} -ub {self.ubatch}")

    def args(self) -> list[str]:
        out = ["-c", str(self.ctx), "-np", str(self.parallel), "-fa",
               "on" if self.flash_attn else "off", "-ctk", self.ctk, "-ctv", self.ctv,
               "-ub", str(self.ubatch), "-b", str(max(self.ubatch, 512))]
        return out + (["-kvu"] if self.unified else [])


def runs(models: list[str], quick: bool) -> list[Run]:
    out = []
    types = (("f16", "f16"), ("q8_0", "q8_0"), ("q8_0", "f16"), ("f16", "q4_0"))
    for m in models:
        for ctx, np_, unified, fa, (ctk, ctv) in itertools.product(
                (1000, 4096, 5000), (1, 4), (False, True), (True, False), types):
            if np_ == 1 and unified:
                continue  # one sequence: unified or not is the same cache
            if (ctk, ctv) != ("f16", "f16") and ctx != 4096:
                continue
            out.append(Run(m, ctx, np_, unified, fa, ctk, ctv))
        out.append(Run(m, 4096, 1, False, True, "f16", "f16", ubatch=128))
    if quick:
        out = out[::7]
    return out


def run_binary(binary: Path, gguf: Path, run: Run, log_dir: Path) -> tuple[int, str, Path]:
    cmd = [str(binary), "-m", str(gguf), *run.args(), "-ngl", "0", "-n", "1", "-p", "hi",
           "-t", "2", "--no-warmup", "-no-cnv", "--seed", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    text = proc.stdout + proc.stderr
    log = log_dir / (re.sub(r"[^\w.-]+", "_", run.id) + ".log")
    log.write_text(text)
    return proc.returncode, text, log


def real_figures(rc: int, text: str) -> dict[str, str]:
    if rc != 0:
        return {"refused": "yes"}
    out: dict[str, str] = {}
    lines = KV_LINE.findall(text)
    for i, (size, cells, layers, seqs, streams, tk, k, tv, v) in enumerate(lines):
        tag = "kv" if i == 0 else "swa"
        out.update({f"{tag}.size_mib": size, f"{tag}.cells": cells, f"{tag}.layers": layers,
                    f"{tag}.seqs": f"{seqs}/{streams}", f"{tag}.k": f"{tk} {k}",
                    f"{tag}.v": f"{tv} {v}"})
    m = COMPUTE_LINE.search(text)
    if m:
        out["compute_mib"] = m.group(1)
    return out


def kvplan_figures(spec, run: Run) -> dict[str, str]:
    from kvplan.core.errors import BadInputError
    from kvplan.engines.llamacpp import engine as ll

    config = ll.LlamacppConfig(ctx=run.ctx, parallel=run.parallel, cache_type_k=run.ctk,
                               cache_type_v=run.ctv, kv_unified=run.unified,
                               n_ubatch=run.ubatch, flash_attn=run.flash_attn)
    try:
        p = ll.profile(spec, config)
    except BadInputError:
        return {"refused": "yes"}
    streams = 1 if run.unified else run.parallel
    out: dict[str, str] = {}
    caches = [("kv", p.k_bytes, p.v_bytes, p.cells // streams, p.num_layers - p.swa_layers)]
    if p.swa_cells:
        caches.append(("swa", p.swa_k_bytes, p.swa_v_bytes, p.swa_cells // streams,
                       p.swa_layers))
    for tag, k, v, cells, layers in caches:
        out.update({f"{tag}.size_mib": f"{(k + v) / MIB:.2f}", f"{tag}.cells": str(cells),
                    f"{tag}.layers": str(layers), f"{tag}.seqs": f"{run.parallel}/{streams}",
                    f"{tag}.k": f"{run.ctk} {k / MIB:.2f}", f"{tag}.v": f"{run.ctv} {v / MIB:.2f}"})
    if p.compute is not None:
        out["compute_mib"] = f"{p.compute.cpu_bytes / MIB:.2f}"
    return out


def explain_ok(log: Path, gguf: Path) -> str | None:
    """`kvplan explain` on the log: None when it matches, else its complaint."""
    cmd = [sys.executable, "-m", "kvplan", "explain", str(log), "--model", str(gguf),
           "--format", "json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if proc.returncode != 0:
        return (proc.stdout[-400:] + proc.stderr[-400:]).strip()
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=str(ROOT / ".oracle-llamacpp" / "llama-completion"))
    parser.add_argument("--quick", action="store_true", help="every 7th run")
    parser.add_argument("--model", help="one tiny model by name")
    parser.add_argument("--no-explain", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--json", help="write every run's figures here")
    args = parser.parse_args()

    import make_ggufs

    from kvplan.api import model as kv_model

    start = time.monotonic()
    binary = Path(args.binary)
    work = Path(tempfile.mkdtemp(prefix="kvplan-llamacpp-oracle-"))
    names = [m.name for m in make_ggufs.MODELS if args.model in (None, m.name)]
    for m in make_ggufs.MODELS:
        if m.name in names:
            make_ggufs.write(m, work / f"{m.name}.gguf")
    specs = {n: kv_model(str(work / f"{n}.gguf")).spec for n in names}
    equal = explained = 0
    failures: list[str] = []
    rows = []
    todo = runs(names, args.quick)
    for run in todo:
        gguf = work / f"{run.model}.gguf"
        rc, text, log = run_binary(binary, gguf, run, work)
        real = real_figures(rc, text)
        ours = kvplan_figures(specs[run.model], run)
        rows.append({"run": run.id, "llama.cpp": real, "kvplan": ours})
        diff = sorted(k for k in set(real) | set(ours) if real.get(k) != ours.get(k))
        known = [KNOWN_DIFFERENCES[(run.model, k)] for k in diff
                 if (run.model, k) in KNOWN_DIFFERENCES]
        if not diff or len(known) == len(diff):
            equal += 1
            if args.verbose:
                print(f"  equal {run.id}: {real}")
        else:
            failures.append(f"{run.id}: " + "; ".join(
                f"{k}: llama.cpp {real.get(k)}, kvplan {ours.get(k)}" for k in diff))
        if rc == 0 and not args.no_explain:
            complaint = explain_ok(log, gguf)
            if complaint is None:
                explained += 1
            else:
                failures.append(f"{run.id}: kvplan explain: {complaint}")
    for line in failures:
        print(f"DIFFERENT {line}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    ran = sum(1 for r in rows if "refused" not in r["llama.cpp"])
    print(f"llama.cpp oracle: {equal} of {len(todo)} equal; kvplan explain matched {explained} "
          f"of {ran} logs ({time.monotonic() - start:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
