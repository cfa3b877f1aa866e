"""What the differential tests against real engines share (tests/oracle*/run_oracle.py).

Each harness runs with its own environment's python (the engine's venv, not the project's),
as `python tests/oracle_<engine>/run_oracle.py`, so it finds this module by putting tests/
first on sys.path; `setup()` then puts the repository itself there (kvplan from this tree)
and sets the offline defaults. Only the standard library is imported here.

- `parser`, `imported`, `library_specs`: the options every oracle takes, the engine's import
  timed, the library models it runs;
- `config_dir`: a library model's config.json from the repository's own copies;
- `Tally`: every case compared, counted as equal, listed (a difference
  docs/engine-accuracy.md explains), unexplained, or an error; the case lines; the rows for
  --json; the closing "N of N equal" line and the exit status (1 on anything unexplained).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Each harness put tests/ first on sys.path to import this module: taken off again, so that
# no module of tests/ (paths, probes, ...) can stand in for one the engine imports.
_TESTS = str(Path(__file__).resolve().parent)
while _TESTS in sys.path:
    sys.path.remove(_TESTS)
FIXTURES = ROOT / "tests" / "fixtures" / "hf-configs"
ORACLE_CONFIGS = ROOT / "tests" / "oracle" / "configs"  # the copies no fixture holds
# library models whose config.json is an architecture fixture (tests/fixtures/hf-configs/families)
FAMILY_FIXTURES = frozenset({"deepseek-v4-flash", "kimi-k3"})
SHOWN = 40  # unexplained cases printed whole, unless -v


def setup(**env: str) -> Path:
    """Hub offline, transformers quiet, `env` (each only where not set already); the
    repository first on sys.path. Returns the repository root."""
    for name, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error",
                        **env}.items():
        os.environ.setdefault(name, value)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return ROOT


def parser(doc: str | None, quick: str) -> argparse.ArgumentParser:
    """The options every oracle takes: --quick (`quick` says what it leaves out), --model
    (repeatable), --json, -v."""
    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=quick)
    ap.add_argument("--model", action="append", help="only these models (repeatable)")
    ap.add_argument("--json", help="write every case's figures to this file")
    ap.add_argument("-v", "--verbose", action="store_true")
    return ap


def imported(label: str, load: Callable[[], Any]) -> Any:
    """`load()` (the engine's import, often minutes on 2 cores), its time printed."""
    t0 = time.time()
    engine = load()
    print(f"{label} imported in {time.time() - t0:.1f} s", flush=True)
    return engine


def library_specs(skipped: Iterable[str], models: list[str] | None) -> list[Any]:
    """The library's models, less `skipped`; only `models` when given (--model)."""
    from kvplan.sources.library import load_library

    leave_out = set(skipped)
    return [s for s in load_library()
            if s.name not in leave_out and (not models or s.name in models)]


def config_dir(spec: Any, tmp: Path) -> Path | None:
    """A folder holding a library model's config.json, from the repository's copies: a
    fixture named after its source repo or an alias (tests/fixtures/hf-configs, its
    families/ folder for FAMILY_FIXTURES, tests/oracle/configs). None: no copy."""
    candidates = ([spec.source.repo] if spec.source.repo else []) + list(spec.aliases)
    for repo in candidates:
        name = repo.replace("/", "--")
        family = FIXTURES / "families" / f"{name}.json"
        if spec.name in FAMILY_FIXTURES and family.exists():
            return _copy(family, tmp / name)
        if (ORACLE_CONFIGS / name / "config.json").exists():
            return ORACLE_CONFIGS / name
        if (FIXTURES / f"{name}.json").exists():
            return _copy(FIXTURES / f"{name}.json", tmp / name)
    return None


def _copy(config: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_bytes(config.read_bytes())
    return folder


class Tally:
    """The cases of one oracle run and what became of each."""

    def __init__(self, verbose: bool = False) -> None:
        self.verbose = verbose
        self.rows: list[dict[str, Any]] = []
        self.equal = self.known = self.unexplained = self.errors = 0

    def add(self, row: dict[str, Any], differences: Iterable[str] = (),
            reason: str | None = None, label: str | None = None) -> None:
        """One case: `row` its figures (written by --json), `differences` what disagrees
        (none: equal), `reason` the listed explanation of them (None: unexplained). `label`
        is how the case prints (default: the row as JSON)."""
        self.rows.append(row)
        diffs = list(differences)
        text = label if label is not None else json.dumps(row, default=str)
        if not diffs:
            self.equal += 1
            if self.verbose:
                print(f"  equal  {text}", flush=True)
        elif reason:
            self.known += 1
            print(f"  known  {text}: {'; '.join(diffs)} -- {reason}", flush=True)
        else:
            self.unexplained += 1
            if self.verbose or self.unexplained <= SHOWN:
                print(f"DIFF {text}: {'; '.join(diffs)}", flush=True)

    def error(self, text: str, exc: BaseException | None = None) -> None:
        """A case that could not be compared (the engine or kvplan failed to set it up):
        `text` says which, `exc` what went wrong."""
        self.errors += 1
        cause = "" if exc is None else f": {type(exc).__name__}: {exc}"
        print(f"ERROR {text}{cause}"[:400], flush=True)

    def finish(self, title: str, detail: str, seconds: float,
               json_path: str | Path | None = None) -> int:
        """Writes the rows (--json), prints the closing line, returns the exit status."""
        if json_path:
            Path(json_path).write_text(json.dumps(self.rows, indent=1, default=str))
        total = len(self.rows)
        print(f"\n{title}: {self.equal} of {total} equal ({detail}); {self.known} known "
              f"differences (docs/engine-accuracy.md), {self.unexplained} unexplained, "
              f"{self.errors} errors; {seconds:.0f} s", flush=True)
        return 1 if self.unexplained or self.errors else 0
