"""Capture the output of every README example and docs sample, to show that a refactor kept it.

    python scripts/json_identity.py capture OUT.json            # run them all with this tree
    PYTHONPATH=OLD python scripts/json_identity.py capture B.json   # ... with another checkout
    python scripts/json_identity.py compare B.json OUT.json     # exit 1 on any difference

The commands are read from the ```sh blocks of README.md (every line that starts with
`kvplan `) plus the docs samples (scripts/regen_docs.py's `report` command and
`check docs/capacity.example.yaml`). Each runs in a fresh interpreter (`python -m kvplan`,
so PYTHONPATH picks the checkout), from a scratch folder that holds a copy of docs/, with
HF_HUB_OFFLINE=1. A command that accepts `--format json` runs a second time with it; its
stdout is parsed and kept as JSON (key order included), with the kvplan version masked.
Files a command writes (-o, --junit, --chart) are kept as text, or as a sha256 for binaries.
Table and Markdown output is kept too, but `compare` reports text changes separately from
JSON changes: the JSON is the contract; tables may change on purpose.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# commands whose --format takes json
JSON_COMMANDS = {"size", "models", "show", "gpus", "plan", "compare", "sweep", "validate",
                 "check"}
# masked before comparing: they change with every release or every run, not with the maths
# (validate on the CPU measures the process's resident-memory change, which varies by a few KB)
VOLATILE_KEYS = {"kvplan_version", "resident_bytes", "allocated_bytes",
                 "overhead_bytes"}  # allocated - measured: as noisy as the resident change
TIMING_KEY = re.compile(r"(^|_)(ms|seconds|s_per|elapsed|time|wall)(_|$)")


def readme_commands(readme: Path = ROOT / "README.md") -> list[str]:
    commands, in_sh, pending = [], False, ""
    for line in readme.read_text().splitlines():
        if line.startswith("```"):
            in_sh, pending = line.strip() == "```sh", ""
            continue
        if not in_sh or not (pending or line.startswith("kvplan ")):
            continue
        if line.rstrip().endswith("\\"):  # continued on the next line
            pending += line.rstrip()[:-1]
            continue
        text = pending + line
        pending = ""
        commands.append(text.split(" #", 1)[0].strip())
    return commands


def docs_commands() -> list[str]:
    sys.path.insert(0, str(ROOT / "scripts"))
    from regen_docs import CHART, REPORT, command

    report = ["kvplan", *command(Path("docs"))]
    report = [a.replace(f"docs/{REPORT}", REPORT).replace(f"docs/{CHART}", CHART)
              for a in report]
    return [shlex.join(report), "kvplan check docs/capacity.example.yaml --junit capacity.xml"]


def _argv(command: str) -> list[str]:
    argv = shlex.split(command)[1:]
    if ">" in argv:  # `> grid.csv`: keep stdout instead
        argv = argv[:argv.index(">")]
    return argv


def _masked(value: object) -> object:
    if isinstance(value, dict):
        return {k: ("<masked>" if k in VOLATILE_KEYS or TIMING_KEY.search(k) else _masked(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _run(argv: list[str], cwd: Path) -> dict[str, object]:
    before = {p: p.stat().st_mtime_ns for p in cwd.rglob("*") if p.is_file()}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "100", "NO_COLOR": "1",
           "GITHUB_STEP_SUMMARY": ""}
    env.pop("GITHUB_STEP_SUMMARY")
    proc = subprocess.run([sys.executable, "-m", "kvplan", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    out: dict[str, object] = {"exit": proc.returncode}
    try:
        out["json"] = _masked(json.loads(proc.stdout))
    except ValueError:
        out["text"] = proc.stdout
    if proc.returncode not in (0, 1):
        out["stderr"] = proc.stderr.strip().splitlines()[-1:]
    files = {}
    for path in sorted(p for p in cwd.rglob("*") if p.is_file()):
        if before.get(path) == path.stat().st_mtime_ns:
            continue
        data = path.read_bytes()
        name = str(path.relative_to(cwd))
        try:
            files[name] = data.decode()
        except UnicodeDecodeError:
            files[name] = "sha256:" + hashlib.sha256(data).hexdigest()
        path.unlink()
    if files:
        out["files"] = files
    return out


def capture(commands: list[str]) -> dict[str, object]:
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(ROOT / "docs", work / "docs")
        (work / "reports").mkdir()
        for command in commands:
            argv = _argv(command)
            results[command] = _run(argv, work)
            if argv and argv[0] in JSON_COMMANDS and not {"-f", "--format"} & set(argv):
                results[command + " --format json"] = _run([*argv, "--format", "json"], work)
            print(f"{results[command]['exit']}  {command}", file=sys.stderr)  # type: ignore[index]
    return results


def _text(result: dict) -> str | None:
    text = result.get("text")
    return _MS.sub("<ms>", text) if isinstance(text, str) else text


_MS = re.compile(r"[\d,.]+ ms\b")


def compare(base: dict[str, dict], new: dict[str, dict]) -> tuple[list[str], list[str]]:
    """(JSON differences, text/file differences), one line each."""
    json_diffs, text_diffs = [], []
    for command in sorted(set(base) | set(new)):
        a, b = base.get(command), new.get(command)
        if a is None or b is None:
            json_diffs.append(f"only in {'new' if a is None else 'base'}: {command}")
            continue
        if a.get("exit") != b.get("exit"):
            json_diffs.append(f"exit {a.get('exit')} -> {b.get('exit')}: {command}")
        if _masked(a.get("json")) != _masked(b.get("json")):
            json_diffs.append(f"JSON differs: {command}")
        if _text(a) != _text(b) or a.get("files") != b.get("files"):
            text_diffs.append(f"text or files differ: {command}")
    return json_diffs, text_diffs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    cap = sub.add_parser("capture")
    cap.add_argument("out", type=Path)
    cap.add_argument("--skip", action="append", default=[], metavar="COMMAND",
                     help="leave out a command (e.g. validate, which takes minutes)")
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("base", type=Path)
    cmp_.add_argument("new", type=Path)
    args = parser.parse_args(argv)
    if args.what == "capture":
        results = capture([c for c in readme_commands() + docs_commands()
                           if c.split()[1] not in args.skip])
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        return 0
    json_diffs, text_diffs = compare(json.loads(args.base.read_text()),
                                     json.loads(args.new.read_text()))
    for line in json_diffs + text_diffs:
        print(line)
    print(f"{len(json.loads(args.new.read_text()))} outputs: {len(json_diffs)} JSON "
          f"difference(s), {len(text_diffs)} text/file difference(s)")
    return 1 if json_diffs else 0


if __name__ == "__main__":
    sys.exit(main())
