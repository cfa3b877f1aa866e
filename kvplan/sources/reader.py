"""The one reader for text from outside kvplan: model specs, plan files, config.json, workload
files and the GPU catalog all pass through here, and every limit is checked before anything
is expanded.

    text = read_text(path, "the plan file")          # size-capped, UTF-8, errors name the file
    data = parse_yaml(text, path)                     # safe, depth/alias/expansion-capped
    node = compose_yaml(text, path)                   # the same, as PyYAML nodes (line numbers)
    data = parse_json(raw_bytes, path)                # depth-capped JSON

PyYAML's libyaml parser yields events and a composer of ours builds nodes from them, counting
depth, aliases and expanded size, so a "billion laughs" or deeply nested file stops at a limit
(MAX_DEPTH, ...) instead of growing or overflowing the stack; SafeConstructor makes the values.
Why PyYAML and this composer (not ruamel.yaml): docs/architecture.md, "Notes on single modules".
"""

from __future__ import annotations

import math
import os
from typing import Any, TypeGuard

from kvplan.core.errors import BadInputError, SpecError

MAX_FILE_BYTES = 16 * 2**20      # a spec, plan or config.json (real ones: < 100 KB)
MAX_WORKLOAD_BYTES = 256 * 2**20  # a JSONL/CSV request trace
MAX_DEPTH = 64                   # nesting of mappings and lists (real files: < 8)
MAX_ALIASES = 1_000              # `*name` references in one YAML document
MAX_NODES = 100_000              # values in a document with every alias expanded


def read_bytes(path: str, what: str = "", max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """At most `max_bytes` of a file; larger (or endless, like /dev/zero) is an error, and
    only max_bytes + 1 bytes are ever read."""
    import stat

    label = f"{what} {path}".strip()
    try:
        # a FIFO would block at open(), a device (/dev/zero) never ends: plain files only
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise BadInputError(f"cannot read {label}: not a regular file",
                                "give the path of a file")
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except (OSError, ValueError) as exc:
        raise BadInputError(f"cannot read {label}: {getattr(exc, 'strerror', None) or exc}"
                            ) from None
    if len(data) > max_bytes:
        raise BadInputError(f"{label} is larger than {max_bytes // 2**20} MiB, too large to "
                            "be one", "check the path")
    return data


def read_text(path: str, what: str = "", max_bytes: int = MAX_FILE_BYTES) -> str:
    """read_bytes decoded as UTF-8 (a leading BOM is dropped)."""
    data = read_bytes(path, what, max_bytes)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        label = f"{what} {path}".strip()
        raise BadInputError(f"cannot read {label}: not UTF-8 text ({exc.reason} at byte "
                            f"{exc.start})") from None


def read_stdin(what: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """Standard input with a file's limits (read_text): at most `max_bytes` (only max_bytes + 1
    bytes are ever read), UTF-8, a leading BOM dropped; `what` names it in every error (e.g.
    "--lengths @-"). A closed standard input (kvplan started with it closed: sys.stdin is
    None) is one error, not a traceback."""
    import sys

    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise BadInputError(f"{what}: standard input is closed",
                            "pipe the input in, or give a file's path")
    try:
        data = stream.read(max_bytes + 1)
    except (OSError, ValueError) as exc:
        raise BadInputError(f"{what}: cannot read standard input: "
                            f"{getattr(exc, 'strerror', None) or exc}") from None
    if len(data) > max_bytes:
        raise BadInputError(f"{what}: standard input is larger than {max_bytes // 2**20} MiB",
                            "give a file's path, or less input")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{what}: standard input is not UTF-8 text ({exc.reason} at byte "
                            f"{exc.start})") from None


# --- YAML ----------------------------------------------------------------------------------

def _guarded_loader(text: str, source: str) -> Any:
    import yaml
    from yaml.composer import Composer
    from yaml.constructor import SafeConstructor
    from yaml.resolver import Resolver

    parser: Any
    try:  # libyaml's parser (C), when PyYAML was built with it
        from yaml._yaml import CParser as parser
    except ImportError:
        parser = None

    alias_event = yaml.AliasEvent
    scalar_event = yaml.ScalarEvent
    scalar_node: Any = yaml.ScalarNode

    class _Limited(Composer):
        """PyYAML's composer, counting depth, aliases and expanded size as it goes.

        The expanded size is one count for the whole document: each node composed adds one,
        and each alias adds the expanded size of the value it names (measured as the count's
        growth while that anchored value was composed, its own aliases included). The count
        is the root's expanded size, so passing MAX_NODES anywhere is caught, with one
        addition a node instead of a sum over every node's children."""

        _depth: int
        _aliases: int
        _count: int
        _anchored: dict[str, int]  # anchor -> the expanded size of the value it names
        # no path resolvers (yaml.add_path_resolver): a scalar's tag depends on it alone
        _plain: bool
        check_event: Any  # from the parser this is mixed with
        peek_event: Any
        get_event: Any
        resolve: Any  # from the Resolver

        def _grow(self, size: int, event: Any) -> None:
            """Add `size` values to the document's expanded size; past MAX_NODES, stop."""
            self._count += size
            if self._count > MAX_NODES:
                raise _limit(source, event, f"expands to more than {MAX_NODES:,} values "
                             "(YAML aliases repeat what they point to)")

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if event.__class__ is scalar_event and event.anchor is None and self._plain:
                # most of a document: a scalar without an anchor, composed here as
                # Composer.compose_scalar_node would (a third of the time), the same limits
                if self._depth >= MAX_DEPTH:
                    raise _limit(source, event, f"nests deeper than {MAX_DEPTH} levels")
                self._grow(1, event)
                self.get_event()
                tag = event.tag
                if tag is None or tag == "!":
                    tag = self.resolve(scalar_node, event.value, event.implicit)
                return scalar_node(tag, event.value, event.start_mark, event.end_mark,
                                   style=event.style)
            if event.__class__ is alias_event:
                self._aliases += 1
                if self._aliases > MAX_ALIASES:
                    raise _limit(source, event, f"uses more than {MAX_ALIASES:,} aliases")
                node = super().compose_node(parent, index)  # an undefined alias: its error
                size = self._anchored.get(event.anchor or "")
                if size is None:  # `&a [*a]`: a value that contains itself
                    raise _limit(source, event, f"alias *{event.anchor} refers to a value that "
                                 "contains it")
                self._grow(size, event)
                return node
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise _limit(source, event, f"nests deeper than {MAX_DEPTH} levels")
            self._grow(1, event)
            anchor = getattr(event, "anchor", None)
            if anchor is None:
                node = super().compose_node(parent, index)
            else:
                before = self._count - 1
                node = super().compose_node(parent, index)
                self._anchored[anchor] = self._count - before
            self._depth -= 1
            return node

    if parser is not None:
        class _Loader(_Limited, parser, SafeConstructor, Resolver):
            def __init__(self, stream: str) -> None:
                parser.__init__(self, stream)
    else:  # PyYAML without libyaml: the pure-Python parser is iterative too
        from yaml.parser import Parser
        from yaml.reader import Reader
        from yaml.scanner import Scanner

        class _Loader(_Limited, Reader, Scanner, Parser,  # type: ignore[no-redef]
                      SafeConstructor, Resolver):
            def __init__(self, stream: str) -> None:
                Reader.__init__(self, stream)
                Scanner.__init__(self)
                Parser.__init__(self)

    class _Guarded(_Loader):
        def __init__(self, stream: str) -> None:
            _Loader.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self._depth = 0
            self._aliases = 0
            self._count = 0
            self._anchored = {}
            self._plain = not self.yaml_path_resolvers

    return _Guarded(text)


class _LimitError(Exception):
    def __init__(self, error: SpecError) -> None:
        self.error = error


def _limit(source: str, at: Any, problem: str) -> _LimitError:
    mark = getattr(at, "start_mark", None)
    where = f"{source} line {mark.line + 1}" if mark is not None else source
    return _LimitError(SpecError(where, None, problem, "no kvplan file needs this much; "
                                 "check that it is the file you meant"))


def compose_yaml(text: str, source: str) -> tuple[Any, Any]:
    """(the document's root node or None, the loader that built it). The caller constructs
    values with `loader.construct_document(node)` and must call `loader.dispose()`."""
    import yaml

    loader = _guarded_loader(text, source)
    try:
        return loader.get_single_node(), loader
    except _LimitError as exc:
        loader.dispose()
        raise exc.error from None
    except yaml.YAMLError as exc:
        loader.dispose()
        raise _yaml_error(exc, source) from None
    except (ValueError, OverflowError, RecursionError, MemoryError) as exc:
        loader.dispose()
        raise SpecError(source, None, f"is not usable YAML: {exc}") from None


def construct_yaml(node: Any, loader: Any, source: str) -> Any:
    """Python values of a composed document (safe tags only)."""
    import yaml

    try:
        return loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source) from None
    except (ValueError, OverflowError, RecursionError, MemoryError, TypeError) as exc:
        # e.g. an integer longer than Python converts, a timestamp out of range, a merge
        # key of the wrong kind
        raise SpecError(source, None, f"is not usable YAML: {exc}") from None
    finally:
        loader.dispose()


def parse_yaml(text: str, source: str) -> Any:
    """YAML text -> Python values, with every limit checked before anything is built. Text in
    the plain subset kvplan's own files use is read without PyYAML (kvplan.sources.plainyaml:
    the same values, and importing PyYAML is a fifth of a command's start-up)."""
    from kvplan.sources.plainyaml import parse

    done, value = parse(text)
    if done:
        return value
    node, loader = compose_yaml(text, source)
    return construct_yaml(node, loader, source)


def load_yaml(path: str, what: str = "") -> Any:
    return parse_yaml(read_text(path, what), path)


def _yaml_error(exc: Any, source: str) -> SpecError:
    mark = getattr(exc, "problem_mark", None)
    where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return SpecError(f"{source}{where}", None, f"is not valid YAML: {problem}")


# --- JSON ----------------------------------------------------------------------------------

def parse_json(data: bytes | str, source: str) -> Any:
    """JSON bytes -> Python values, nesting checked. The bare Infinity/NaN Python's json
    writes (Nemotron-H's "time_step_limit") are accepted here; fields that must be finite
    numbers refuse them where they are read."""
    import json  # here: the library's YAML path never needs it

    try:
        text = data.decode("utf-8-sig") if isinstance(data, bytes) else data
        value = json.loads(text)
    except UnicodeDecodeError as exc:
        raise SpecError(source, None, f"is not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise SpecError(f"{source} line {exc.lineno}, column {exc.colno}", None,
                        f"is not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise SpecError(source, None, f"nests deeper than {MAX_DEPTH} levels") from None
    except (ValueError, MemoryError) as exc:  # an integer longer than Python will convert
        raise SpecError(source, None, f"is not a usable JSON file: {exc}") from None
    check_depth(value, source)
    return value


def check_depth(value: Any, source: str, max_depth: int = MAX_DEPTH) -> None:
    """Refuse data nested deeper than max_depth (iterative: never recurses itself)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            raise SpecError(source, None, f"nests deeper than {max_depth} levels")
        stack.extend((child, depth + 1) for child in children)


def finite_number(value: Any) -> TypeGuard[int | float]:
    """A real int or float (not a bool) that is finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return not isinstance(value, float) or math.isfinite(value)
