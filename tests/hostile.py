"""What the hostile-input and fuzz tests (tests/contracts/test_hostile*.py, test_fuzz*.py)
share: the CLI run in process, the "one message, exit 2" check every refusal must pass, a
time limit that fails a hang instead of hanging the suite, and a benchmark script loaded as
a module (a test builds its inputs with the benchmark's own generator)."""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from paths import ROOT
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()


def invoke(*args: str, input: str | bytes | None = None):  # noqa: A002
    return runner.invoke(app, list(args), env={"COLUMNS": "100"}, input=input)


def one_message(res, needle: str, code: int = 2) -> None:
    """The command refused with `code`, one `kvplan: error:` line naming `needle` (and at
    most a hint line), no traceback."""
    assert res.exit_code == code, (res.exit_code, res.output)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    lines = res.stderr.splitlines()
    assert lines and lines[0].startswith("kvplan: error:"), res.stderr
    assert all(line.lstrip().startswith("hint:") for line in lines[1:]) and len(lines) <= 2, \
        res.stderr
    assert needle in res.stderr, res.stderr


def benchmark(name: str) -> ModuleType:
    """benchmarks/NAME.py as a module (benchmarks/ on sys.path while it loads: the scripts
    import startup.py beside them)."""
    path = ROOT / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


@contextlib.contextmanager
def alarm(seconds: int) -> Iterator[None]:
    """Fail (instead of hanging the suite) when the block takes longer than `seconds`."""

    def expired(signum: int, frame: Any) -> None:
        raise AssertionError(f"still running after {seconds} s: something hangs")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def change_field(draw: Any, target: dict[Any, Any], key: Any, op: str, values: Any,
                 numbers: Any) -> bool:
    """One field mutation of the config fuzzers (`draw` a hypothesis draw): "drop" the key,
    "set" it to one of `values`, a "number" from `numbers`, or "null". False for another op,
    which the caller applies itself."""
    if op == "drop":
        target.pop(key, None)
    elif op == "set":
        target[key] = draw(values)
    elif op == "number":
        target[key] = draw(numbers)
    elif op == "null":
        target[key] = None
    else:
        return False
    return True
