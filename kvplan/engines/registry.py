"""The engine registry: names -> Engine objects (kvplan.engines.base.Engine).

    from kvplan.engines import registry
    registry.get("vllm").capacity(dep)
    registry.register(MyEngine())          # a plugin, for this process
    registry.names()                       # the --engine choices

The built-in engines are imported on first use (`get`), so listing names costs no import.
Third-party engines can also be installed as Python entry points in the group
`kvplan.engines` (each pointing to an Engine object); they are looked up only when a name is
not already known, so start-up never scans installed packages.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvplan.core.launch import EngineLaunch, EngineLog
    from kvplan.engines.base import Engine

ENTRY_POINT_GROUP = "kvplan.engines"
DEFAULT = "vllm"  # the engine a deployment names when it names none

# name -> the module whose ENGINE attribute is the engine (imported on first use)
_BUILTIN: dict[str, str] = {
    "vllm": "kvplan.engines.vllm",
    "sglang": "kvplan.engines.sglang",
    "trtllm": "kvplan.engines.trtllm",
    "llamacpp": "kvplan.engines.llamacpp",
    "hf": "kvplan.engines.hf",
    "tgi": "kvplan.engines.tgi",
    # a server in front of llama.cpp: its settings planned by the llama.cpp engine
    "ollama": "kvplan.engines.llamacpp.ollama",
}
# A built-in engine's launch flag table (`launch_flags()`) and start-up log lines
# (`LOG_FORMAT`) live in its package's `text` module, data that imports none of the engine's
# code: the launch-line and log readers need every engine's tables, but only the engine they
# find needs its code. The engines listed here have no such module (kvplan reads no launch
# line or log of them). A plugin is asked through its `launch()` / `log_format()`;
# tests/engines/test_registry_tables.py checks both ways agree.
_WITHOUT_TABLES = frozenset({"hf"})


def _tables_module(name: str) -> str | None:
    return None if name in _WITHOUT_TABLES else f"{_BUILTIN[name]}.text"


_LOADED: dict[str, Engine] = {}
_REGISTERED: dict[str, Engine] = {}


def register(engine: Engine, *, replace: bool = False) -> Engine:
    """Make `engine` available under `engine.name` (the --engine value)."""
    from kvplan.core.errors import BadInputError
    from kvplan.engines.base import Engine as EngineProtocol

    if not isinstance(engine, EngineProtocol):
        raise TypeError(f"{engine!r} does not implement kvplan.engines.base.Engine")
    name = engine.name
    if not name or name != name.strip() or "," in name:
        raise BadInputError(f"an engine name must be a non-empty word, got {name!r}")
    if not replace and (name in _REGISTERED or name in _BUILTIN):
        raise BadInputError(f"an engine named {name!r} is already registered",
                            "pass replace=True to override it")
    _REGISTERED[name] = engine
    return engine


def unregister(name: str) -> None:
    """Forget an engine registered with `register` (built-ins stay)."""
    _REGISTERED.pop(name, None)


def names() -> tuple[str, ...]:
    """Every engine known without importing one: the built-ins, then registered plugins."""
    return tuple(_BUILTIN) + tuple(n for n in _REGISTERED if n not in _BUILTIN)


def get(name: str) -> Engine:
    """The engine called `name`; an unknown name is a BadInputError listing the known ones."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in _LOADED:
        return _LOADED[name]
    if name in _BUILTIN:
        engine: Engine = importlib.import_module(_BUILTIN[name]).ENGINE
        _LOADED[name] = engine
        return engine
    found = _from_entry_points(name)
    if found is not None:
        return register(found)
    from kvplan.core.errors import BadInputError

    raise BadInputError(f"unknown engine {name!r}", "one of: " + ", ".join(names()))


def log_format(name: str) -> EngineLog | None:
    """The start-up log format of the engine called `name` (None: kvplan reads no log of it),
    from its tables module when it has one, without importing the engine."""
    if name not in _REGISTERED and name in _BUILTIN:
        module = _tables_module(name)
        found: EngineLog | None = (importlib.import_module(module).LOG_FORMAT
                                   if module is not None else None)
        return found
    declared = getattr(get(name), "log_format", None)  # optional for a plugin
    return declared() if declared is not None else None


def launch_table(name: str) -> EngineLaunch | None:
    """The launch programs and flag table of the engine called `name` (None: kvplan reads no
    launch command of it), from its tables module when it has one."""
    if name not in _REGISTERED and name in _BUILTIN:
        module = _tables_module(name)
        table: EngineLaunch | None = (importlib.import_module(module).launch_flags()
                                      if module is not None else None)
        return table
    launch = getattr(get(name), "launch", None)  # optional for a plugin
    return launch() if callable(launch) else None


def all_engines() -> tuple[Engine, ...]:
    return tuple(get(n) for n in names())


def _from_entry_points(name: str) -> Engine | None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            obj = ep.load()
            return obj() if isinstance(obj, type) else obj
    return None
