"""The embedded model library (`model_configs/*.yaml`) and MODEL argument resolution.

A MODEL is a library name (`llama-3.1-8b`), a path to a YAML spec, a local config.json
(or a directory holding one), or a Hugging Face Hub repo (`hf:org/name[@revision]`, or a bare
`org/name[@revision]` that no library model lists as an alias). Looking up a library name
reads one file; only a miss scans the library (for aliases and suggestions).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from kvplan.core.errors import UnknownModelError
from kvplan.core.spec import ModelSpec

if TYPE_CHECKING:
    from collections.abc import Callable

    from kvplan.sources.hubref import HubRef

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # kvplan/


def library_dirs() -> list[Path]:
    """Where library YAMLs live: KVPLAN_MODEL_PATH entries first, then the shipped library
    (inside the wheel as kvplan/model_configs, or model_configs/ beside a source checkout)."""
    dirs = [Path(p) for p in os.environ.get("KVPLAN_MODEL_PATH", "").split(os.pathsep) if p]
    for candidate in (_PACKAGE_DIR / "model_configs", _PACKAGE_DIR.parent / "model_configs"):
        if candidate.is_dir():
            dirs.append(candidate)
            break
    return dirs


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def library_files() -> dict[str, Path]:
    """Stem -> path of every `*.yaml` in the library directories, each directory's in name
    order, the first directory's file winning a stem (one directory listing each, no glob).

    The paths come from Path.iterdir, which builds each child from its parent's parts: `d /
    name` parses every name again (58 files, and `explain` and `--from-command` list them
    twice)."""
    files: dict[str, Path] = {}
    for d in library_dirs():
        found: dict[str, Path] = {}
        try:
            for path in d.iterdir():
                name = path.name
                if name.endswith(".yaml"):
                    found[name] = path
        except OSError:
            continue
        for name in sorted(found):
            if name[:-5] not in files:
                files[name[:-5]] = found[name]
    return files


def load_library() -> list[ModelSpec]:
    from kvplan.sources.yamlspec import load_yaml_file

    return [load_yaml_file(path) for path in library_files().values()]


def filter_models(specs: list[ModelSpec], text: str | None = None, kind: str | None = None
                  ) -> list[ModelSpec]:
    """Models whose name, family, source or an alias contains `text` (any case), and that
    have a layer of `kind` (full, sliding, chunked, mla, cross, state, none)."""
    if text:
        needle = text.lower()
        specs = [s for s in specs if needle in s.name or needle in (s.family or "").lower()
                 or needle in s.source.describe().lower()
                 or any(needle in a.lower() for a in s.aliases)]
    if kind:
        from kvplan.core.errors import BadInputError
        from kvplan.core.layers import LAYER_KINDS

        if kind not in LAYER_KINDS:
            raise BadInputError(f"--kind {kind!r} is not a layer kind",
                                "one of: " + ", ".join(LAYER_KINDS))
        specs = [s for s in specs if kind in s.kind_counts()]
    return list(specs)


def _route(model: str) -> HubRef | Path | ModelSpec | str:
    """Where a MODEL argument points, decided in one place for resolve() and hub_ref_of():
    a Hub ref, an existing file or directory, a library model found by alias, or a name.

    `hf:org/name[@rev]` always goes to the Hub. Otherwise an existing file or directory is
    read; a bare `org/name[@rev]` is first looked up among the library's aliases (offline,
    instant) and only then fetched from the Hub; anything else is a library name."""
    if model.startswith("hf:"):
        from kvplan.sources.hubref import parse_hub_ref

        return parse_hub_ref(model)
    path = Path(model).expanduser()
    try:
        exists = path.exists()
    except (OSError, ValueError):  # a name too long for a path, or with a NUL byte
        exists = False
    if exists:
        return path
    if model.endswith((".yaml", ".yml", ".json", ".gguf")):
        raise UnknownModelError(f"no such file: {model}")
    if "/" in model:
        from kvplan.sources.hubref import bare_hub_ref

        ref = bare_hub_ref(model)
        if ref is not None:
            return find_alias(ref.repo, ref.revision) or ref
    return model


def resolve(model: str, assume_standard_attention: bool = False) -> ModelSpec:
    """A MODEL argument -> ModelSpec (see _route for the order of the rules).

    `assume_standard_attention`: a config.json kvplan would refuse (an architecture without
    a reader, a cache-deciding key it does not model) is sized as plain attention instead,
    the reasons kept in spec.warnings."""
    target = _route(model)
    if isinstance(target, ModelSpec):
        return target
    if isinstance(target, Path):
        return load_path(target, assume_standard_attention)
    if isinstance(target, str):
        return load_named(target)
    from kvplan.sources.hub import load_hub_spec

    return load_hub_spec(target, assume_standard_attention)


def hub_ref_of(model: str) -> HubRef | None:
    """The Hub repo that resolve(model) would fetch, or None (library model, alias or file)."""
    target = _route(model)
    return None if isinstance(target, (ModelSpec, Path, str)) else target


def find_alias(repo: str, revision: str | None = None) -> ModelSpec | None:
    """The library model that lists Hub repo `repo` among its aliases. With a revision, only
    a model pinned to that revision (source.revision) matches. Only the files the index
    names for it are parsed."""
    from kvplan.sources.yamlspec import load_yaml_file

    key = _normalise(repo)
    index = library_index()
    if (key, revision) in index.found:  # explain and --from-command ask twice
        return index.found[key, revision]
    found = None
    for path in index.aliases.get(key, ()):
        spec = load_yaml_file(path)
        if key in {_normalise(a) for a in spec.aliases} and (
                revision is None or spec.source.revision == revision):
            found = spec
            break
    index.found[key, revision] = found
    return found


def find_same_name(repo: str) -> list[ModelSpec]:
    """The library models that list a Hub repo of the same name as `repo` under any owner
    (unsloth/Llama-3.2-3B-Instruct -> the model listing meta-llama/Llama-3.2-3B-Instruct:
    re-uploads keep the name), or, for a bare name, under its owner (a checkpoint directory
    on a serving machine, /models/Meta-Llama-3.1-8B-Instruct). Only the files the index
    names for those aliases are parsed."""
    from kvplan.sources.yamlspec import load_yaml_file

    name = _normalise(repo).rsplit("/", 1)[-1]
    index = library_index()
    paths: list[Path] = []
    for key, found in index.aliases.items():
        if "/" in key and key.rsplit("/", 1)[-1] == name:
            paths += [p for p in found if p not in paths]
    return [load_yaml_file(p) for p in paths]


class LibraryIndex:
    """Every library model's name, and normalised name or alias -> the files that declare
    it, read from each file's `name:` and `aliases: [...]` lines (no YAML parse); a file
    written otherwise is parsed. Built per look-up that misses a file name: 56 small reads."""

    def __init__(self, files: dict[str, Path] | None = None) -> None:
        self.names: list[str] = []
        self.aliases: dict[str, list[Path]] = {}
        # (normalised alias, revision) -> the model find_alias found for it (specs are
        # immutable; the index, and this with it, is rebuilt when a library file changes)
        self.found: dict[tuple[str, str | None], ModelSpec | None] = {}
        for path in (library_files() if files is None else files).values():
            try:
                # bytes, then text (not Path.read_text, nor a file object: 58 files, and
                # a buffered file adds four system calls to each); line ends as a text-mode
                # read leaves them
                text = _read_all(path).decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if "\r" in text:
                text = text.replace("\r\n", "\n").replace("\r", "\n")
            found = _header(text)
            if found is None:
                found = _parsed_header(path)
                if found is None:
                    continue
            name, aliases = found
            self.names.append(name)
            for alias in (name, *aliases):
                paths = self.aliases.setdefault(_normalise(alias), [])
                if path not in paths:
                    paths.append(path)


def _read_all(path: Path) -> bytes:
    """A file's bytes with one open, the reads and one close."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


_INDEX: dict[tuple[tuple[str, int, int], ...], LibraryIndex] = {}


def library_index() -> LibraryIndex:
    """The index of the library files as they are now: built once per process for the same
    files (name, size and modification time; `explain` and `--from-command` resolve a Hub
    name twice), again when one changes."""
    files = library_files()
    state = []
    for path in files.values():
        name = str(path)
        try:
            st = os.stat(name)
        except OSError:
            continue
        state.append((name, st.st_mtime_ns, st.st_size))
    key = tuple(state)
    if key not in _INDEX:
        _INDEX.clear()
        _INDEX[key] = LibraryIndex(files)
    return _INDEX[key]


def _name_line(text: str, at: int) -> tuple[str, int] | None:
    r"""At a line starting `name:`: what `^name:[ \t]*(\S+)[ \t]*$` (MULTILINE) captures, and
    where its match ends; None where it does not match. String operations, not a regular
    expression: compiling one is a tenth of the index's cost, and 58 files are read."""
    eol = text.find("\n", at)
    if eol < 0:
        eol = len(text)
    value = text[at + 5:eol].strip(" \t")
    # \S+ over all of it: not empty and no white space (str.split's white space is \s's)
    return (value, eol) if value.split() == [value] else None


def _aliases_line(text: str, at: int) -> tuple[str, int] | None:
    r"""At a line starting `aliases:`: what `^aliases:[ \t]*\[([^\]]*)\][ \t]*$` (MULTILINE)
    captures (a flow list, on one line or wrapped over several), and where its match ends."""
    n = len(text)
    i = at + 8
    while i < n and text[i] in " \t":
        i += 1
    if i == n or text[i] != "[":
        return None
    close = text.find("]", i + 1)  # [^\]]* stops at the first ]
    if close < 0:
        return None
    j = close + 1
    while j < n and text[j] in " \t":
        j += 1
    return (text[i + 1:close], j) if j == n or text[j] == "\n" else None


def _line_matches(match: Callable[[str, int], tuple[str, int] | None], key: str, text: str
                  ) -> tuple[list[str], bool]:
    """(what findall of `match`'s pattern finds in `text`, whether a line starts with `key`),
    `match` reading one line that starts with `key` (_name_line, _aliases_line): tried only
    where a line starts with `key` (str.find; 58 files per alias look-up)."""
    found: list[str] = []
    seen = False
    end = 0  # findall's matches do not overlap
    line = "\n" + key
    at = 0 if text.startswith(key) else text.find(line) + 1 or -1
    while at >= 0:
        seen = True
        if at >= end:
            m = match(text, at)
            if m is not None:
                found.append(m[0])
                end = m[1]
        at = text.find(line, at) + 1 or -1
    return found, seen


def _header(text: str) -> tuple[str, list[str]] | None:
    """(name, aliases) from a library file's own lines, or None when they are not written as
    the library writes them (one `name:` line, `aliases:` absent or a flow list of plain
    names)."""
    names, _ = _line_matches(_name_line, "name:", text)
    if len(names) != 1 or names[0][0] in "'\"&*!|>{[":
        return None
    lists, declared = _line_matches(_aliases_line, "aliases:", text)
    if len(lists) > 1 or (not lists and declared):
        return None
    aliases = [a.strip() for a in lists[0].split(",")] if lists else []
    if any(not a or a[0] in "'\"&*!|>{[" or "#" in a for a in aliases):
        return None  # quoted or unusual items: let YAML read them
    return names[0], aliases


def _parsed_header(path: Path) -> tuple[str, list[str]] | None:
    from kvplan.core.errors import KvplanError
    from kvplan.sources.yamlspec import load_yaml_file

    try:
        spec = load_yaml_file(path)
    except KvplanError:
        return None
    return spec.name, list(spec.aliases)


def load_path(path: Path, assume_standard_attention: bool = False) -> ModelSpec:
    if path.suffix == ".gguf":
        from kvplan.sources.gguf import load_gguf

        return load_gguf(path)
    if path.is_dir() or path.suffix == ".json":
        from kvplan.sources.hfconfig import load_config_file

        return load_config_file(path, assume_standard_attention)
    from kvplan.sources.yamlspec import load_yaml_file

    return load_yaml_file(path)


def load_named(model: str) -> ModelSpec:
    from kvplan.sources.yamlspec import load_yaml_file

    key = _normalise(model)
    for d in library_dirs():
        candidate = d / f"{key}.yaml"
        try:
            found = candidate.is_file()
        except (OSError, ValueError):  # a name too long for a file name
            found = False
        if found:
            return load_yaml_file(candidate)
    # an alias (e.g. the Hub repo id): the index names the files, only they are parsed
    index = library_index()
    for path in index.aliases.get(key, ()):
        spec = load_yaml_file(path)
        if key in {_normalise(a) for a in spec.aliases} or key == _normalise(spec.name):
            return spec
    names = index.names
    close = difflib.get_close_matches(key, names, n=5, cutoff=0.5)
    close += [n for n in names if key in n and n not in close][: 5 - len(close)]
    hint = ("did you mean: " + ", ".join(close) + "?") if close else (
        "run `kvplan models` to list the library, or pass a YAML spec or config.json path")
    raise UnknownModelError(f"unknown model {model!r}: not in the library and not a file", hint)
