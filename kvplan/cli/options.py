"""Options and helpers every command shares: declared once (Annotated aliases), the error
mapping to exit codes, and the one path from a View to stdout."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer

from kvplan.cli.settings import option
from kvplan.core.errors import KvplanError
from kvplan.engines import registry
from kvplan.engines.settings import BY_NAME as _ROWS

P = ParamSpec("P")
R = TypeVar("R")

# --- shared options, declared once ------------------------------------------------------
def engine_name(value: str) -> str:
    """`--engine vLLM` is vllm: a name in another case than a known engine's is that engine
    (a registered engine's own spelling wins). The one reading of an engine's name that
    plan, compare and explain give their --engine."""
    from kvplan.engines.registry import names

    known = names()
    if value in known:
        return value
    return next((n for n in known if n.lower() == value.lower()), value)


ModelArg = Annotated[str, typer.Argument(
    help="Library name (llama-3.1-8b), a YAML spec, a config.json / directory holding one, "
    "or a Hugging Face Hub repo: hf:org/name[@revision] (a bare org/name tries the library's "
    "aliases first).",
    show_default=False)]

ModelsArg = Annotated[list[str], typer.Argument(
    help="One or more models: library names, YAML specs, config.json files or hf:org/name.",
    show_default=False)]


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    """An option callback: checked while the flags are parsed, before any work (exit 2).
    Any case is accepted (`-f JSON`), as `--gpu H100` and `--kv-dtype FP8` are."""

    def check(value: str) -> str:
        if value.lower() not in choices:
            raise typer.BadParameter(f"must be one of {', '.join(choices)}, got {value!r}")
        return value.lower()

    # typer reads a callback's signature as the command is built: real types, not the
    # strings this module's annotations are (each would be compiled at every read)
    check.__annotations__ = {"value": str, "return": str}
    return check


FormatOpt = Annotated[str, typer.Option(
    "--format", "-f", help="Output: table, markdown, csv or json.",
    callback=_one_of(("table", "markdown", "csv", "json")))]
UnitsOpt = Annotated[str, typer.Option(
    "--units", help="iec: KiB/MiB/GiB (powers of 2); si: KB/MB/GB (powers of 10).",
    callback=_one_of(("iec", "si")))]
# its flags and help are the KV dtype's row (kvplan.engines.settings)
KVDtypeOpt = Annotated[str, typer.Option(*_ROWS["kv_dtype"].flags, help=_ROWS["kv_dtype"].help)]
# the flags of the settings' rows (kvplan.engines.settings); vLLM's spellings are among them
TPOpt = Annotated[int, typer.Option(*_ROWS["tp"].flags,
                                    help="Tensor-parallel GPUs (KV heads split).")]
AssumeStandardOpt = Annotated[bool, typer.Option(
    "--assume-standard-attention",
    help="Size a config.json kvplan would refuse (an architecture it has no reader for, or a "
    "cache-deciding key it does not model) as plain attention on every layer, with a warning. "
    "See docs/architectures.md.")]
PPOpt = Annotated[int, typer.Option(*_ROWS["pp"].flags, help=_ROWS["pp"].help)]

# --- options of plan, compare, whatif, plot and report ---------------------------------------
DEFAULT_ENGINE = registry.DEFAULT  # the engine planned for without --engine
GpuOpt = Annotated[str | None, typer.Option(
    "--gpu", help="A catalog GPU (h100, a100-40gb, rtx-4090; `kvplan gpus` lists them); "
    "vLLM: one per pipeline stage, comma-separated (rtx-5070-ti,rtx-5090).",
    show_default=False)]
# plot and report: several GPUs, one chart line or table row each
GpusOpt = Annotated[str | None, typer.Option(
    "--gpu", help="Comma-separated catalog GPUs: h100,a100-80gb (`kvplan gpus` lists them).",
    show_default=False)]
CountOpt = Annotated[int | None, typer.Option(
    "--count", "-n", help="GPUs in the instance; default TP = count, PP = 1.",
    show_default=False)]
# the common settings' flags and help, from their declarations (kvplan.engines.settings)
TPOptional = option("tp")
PPOptional = option("pp")
EngineOpt = Annotated[str, typer.Option(
    "--engine", help=f"{', '.join(registry.names()[:-1])} or {registry.names()[-1]} (or an "
    "engine registered with kvplan.engines.registry).", callback=engine_name)]
EngineVersionOpt = Annotated[str | None, typer.Option(
    "--engine-version", help="The engine's version (vLLM: 0.11, 0.21, ...; default: newest "
    "read).", show_default=False)]
MaxModelLenOpt = option("max_model_len")
# two declared settings (kvplan.engines.settings) other commands take on their own
KVMemoryOpt = option("kv_memory")
UtilOpt = option("gpu_memory_utilization")
GpuMemoryOpt = Annotated[str | None, typer.Option(
    "--gpu-memory", help="A GPU not in the catalog: the memory it reports, e.g. 24GiB.",
    show_default=False)]
WeightsDtypeOpt = Annotated[str, typer.Option(
    "--weights-dtype", help="auto, bf16, fp16, fp8, int8, awq, gptq, int4, mxfp4, nvfp4, "
                         "bnb-4bit, bnb-8bit.")]
WeightsMemoryOpt = Annotated[str | None, typer.Option(
    "--weights-memory", help="The whole model's weight size, for models without a parameter "
    "count: 15GiB.", show_default=False)]
ContextOpt = Annotated[str | None, typer.Option(
    "--context", help="Tokens per request: 8k, 32768.", show_default=False)]
ConcurrencyOpt = Annotated[int | None, typer.Option(
    "--concurrency", help="Requests at once.", show_default=False)]


def tokens_flag(text: str | None, what: str) -> int | None:
    """A token-count flag's text (8k, 32768) as tokens; `what` names the flag in errors."""
    from kvplan.planning.deployment import tokens

    return tokens(text, what.lstrip("-").replace("-", "_"))


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn core errors into one message on stderr and the documented exit code."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except KvplanError as exc:
            if os.environ.get("KVPLAN_DEBUG"):
                raise
            typer.echo(f"kvplan: error: {exc.message}", err=True)
            if exc.hint:
                typer.echo(f"  hint: {exc.hint}", err=True)
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def check_choice(value: str, choices: tuple[str, ...], flag: str) -> str:
    from kvplan.core.errors import BadInputError

    if value not in choices:
        raise BadInputError(f"{flag} must be one of {', '.join(choices)}, got {value!r}")
    return value


def warn(warnings: Iterable[str]) -> None:
    """Each warning once, on stderr, as every command prints them."""
    for warning in dict.fromkeys(warnings):
        typer.echo(f"kvplan: warning: {warning}", err=True)


def emit(report: Any, fmt: str, units: str, verbose: bool = False) -> None:
    from kvplan.output.render import render

    warn(report.warnings)
    width = None if fmt != "table" else _terminal_width()
    sys.stdout.write(render(report, fmt, units, width, verbose))


def _terminal_width() -> int:
    """COLUMNS, else the width of whichever of stdout, stderr or stdin is a terminal (piped
    output still fits the terminal it is read on), else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
        if columns > 0:
            return max(columns, 40)
    except (KeyError, ValueError):
        pass
    for stream in (sys.stdout, sys.stderr, sys.stdin):
        try:
            return max(os.get_terminal_size(stream.fileno()).columns, 40)
        except (OSError, ValueError, AttributeError):
            continue
    return 80


def output_target(path: Path | str) -> Path | None:
    """Where `-o PATH` writes: None for `-` (stdout); a regular file (existing or not); the
    file a symbolic link points to when that is a regular file. Anything else (a FIFO, a
    device, a directory, a socket, a link to /proc/self/fd/1 such as /dev/stdout) is
    refused: writing a temporary file and renaming it over such an entry would replace it."""
    import stat

    from kvplan.core.errors import BadInputError

    if str(path) == "-":
        return None
    if "\x00" in str(path):  # no file system takes one; os calls raise ValueError
        raise BadInputError(f"cannot write {str(path)!r}: a file name cannot hold a NUL byte",
                            "give a file name, or -o - for standard output")
    target = Path(path)
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise BadInputError(f"cannot write {path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(mode):
        hop = _through_proc(target)
        if hop is not None:  # /dev/stdout, /proc/self/fd/1: another process's open file
            raise BadInputError(f"cannot write {path}: it is a link to {hop}, an open file "
                                "of a process, not a regular file",
                                "give a file name, or -o - for standard output")
        real = Path(os.path.realpath(target))
        try:
            real_mode = os.stat(real).st_mode
        except FileNotFoundError:
            # a link to a file not yet written: write that file, in a folder that exists
            # (the folders a link names are not created, as they are for a plain path)
            if not real.parent.is_dir():
                raise BadInputError(f"cannot write {path}: it is a link to {real}, whose "
                                    "folder does not exist",
                                    "give a file name, or -o - for standard output") from None
            real_mode = stat.S_IFREG
        except OSError as exc:
            raise BadInputError(f"cannot write {path}: {exc.strerror or exc}") from None
        if stat.S_ISREG(real_mode):
            return real
        kind = _file_kind(real_mode)
        raise BadInputError(f"cannot write {path}: it is a link to {real}, {kind}, not a "
                            "regular file", "give a file name, or -o - for standard output")
    if not stat.S_ISREG(mode):
        raise BadInputError(f"cannot write {path}: it is {_file_kind(mode)}, not a regular "
                            "file", "give a file name, or -o - for standard output")
    return target


def _through_proc(link: Path) -> str | None:
    """The first step of a chain of symbolic links that lies in /proc (None: no such step)."""
    current = os.path.abspath(link)
    for _ in range(40):
        if current == "/proc" or current.startswith("/proc/"):
            return current
        try:
            nxt = os.readlink(current)
        except OSError:  # not a link (or gone): the chain ends here
            return None
        current = os.path.normpath(os.path.join(os.path.dirname(current), nxt))
    return None  # a loop of links: os.stat names it (too many levels of links)


def _file_kind(mode: int) -> str:
    import stat

    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a special file")


def write_atomic(path: Path | str, text: str) -> None:
    """Write to a temporary file beside `path`, then rename it over `path`: a reader (or a
    failure half-way) never sees half a file. `-` writes standard output; special files are
    refused (output_target)."""
    import tempfile

    from kvplan.core.errors import BadInputError

    target = output_target(path)
    if target is None:
        sys.stdout.write(text)
        return
    tmp: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)  # as `report -o`, `import -o`
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, target)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise BadInputError(f"cannot write {path}: {exc.strerror or exc}") from None
