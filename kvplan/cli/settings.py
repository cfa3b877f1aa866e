"""The engine settings' options, made from their declarations (kvplan.engines.settings): one
option per `Setting` row, added to a command by `engine_options`, so that a new row is a new
option of `plan` and `compare` without a line here."""

# No `from __future__ import annotations`: the annotations built here are objects typer reads.

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

# the option's Python type by the row's kind (bytes: text such as 24GiB, parsed by the row)
_TYPES: dict[str, Any] = {"int": int, "float": float, "gib": float, "bytes": str,
                          "tokens": str, "str": str}


def _annotation(row: Any) -> Any:
    if row.kind == "bool" and row.off_flag:  # unset: the engine's own default
        return Annotated[bool | None, typer.Option(f"{row.flag}/{row.off_flag}", help=row.help,
                                                   show_default=False)]
    if row.kind == "bool":
        return Annotated[bool, typer.Option(*row.flags, help=row.help)]
    kind = _TYPES[row.kind]
    return Annotated[kind | None, typer.Option(
        *row.flags, help=row.help, show_default=False)]


def option(name: str) -> Any:
    """One declared setting as an option type, for a command that takes only some of them
    (`whatif`, `plot`): `kv_memory: option("kv_memory") = None`."""
    from kvplan.engines.settings import BY_NAME

    return _annotation(BY_NAME[name])


def _parameter(row: Any) -> inspect.Parameter:
    return inspect.Parameter(row.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                             annotation=_annotation(row),
                             default=False if row.kind == "bool" and not row.off_flag
                             else None)


def engine_options(before: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add one option per engine setting to a command, in --help before its parameter
    `before`; the command receives the ones given as `settings` (row name -> value)."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        from kvplan.engines.settings import ENGINE_SETTINGS

        signature = inspect.signature(fn)
        own = [p for p in signature.parameters.values() if p.name != "settings"]
        at = next(i for i, p in enumerate(own) if p.name == before)
        added = [_parameter(row) for row in ENGINE_SETTINGS]
        names = [row.name for row in ENGINE_SETTINGS]
        # a switch with an off flag: False given is kept (the engine's default is None)
        both_ways = {row.name for row in ENGINE_SETTINGS if row.off_flag}

        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            given = {}
            for name in names:
                value = kwargs.pop(name, None)
                if value is not None and (value is not False or name in both_ways):
                    given[name] = value
            return fn(*args, settings=given, **kwargs)

        command.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*own[:at], *added, *own[at:]])
        return command

    return decorate
