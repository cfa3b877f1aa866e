"""What an engine tells the readers of launch commands (kvplan.sources.launch: its programs,
Docker images and flag table) and of start-up logs (kvplan.sources.startlog: the words that
show it wrote a log and the lines that state each figure). Plain descriptions, here in the
core so that engines (which supply them) and sources (which read text with them) share them
without importing each other; planning hands the registry's engines' tables to the readers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field

from kvplan.core.record import record

#: value kinds a flag table may name: how the text after the flag becomes a value
VALUE_KINDS = ("int", "float", "str", "tokens", "bytes", "flag", "no-flag", "ignore",
               "ignore-flag", "optional",  # optional: a value if one follows, else "on"
               "json")  # a JSON object ('{"num_speculative_tokens": 3}'), read as a dict


@record
class EngineLaunch:
    """What an engine module tells the reader: its programs, images and flags."""

    engine: str
    # token sequences that start the program: ("vllm", "serve"), ("-m", "sglang.launch_server")
    programs: tuple[tuple[str, ...], ...]
    # Docker images whose entrypoint is the program (matched on the repository name)
    images: tuple[str, ...] = ()
    # flag -> (setting, kind); setting "" with kind "ignore"/"ignore-flag" = no memory effect
    flags: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # the setting a first positional argument fills (vllm serve MODEL), if any
    positional: str | None = None
    # "--flag value" and "--flag=value" both; flags in underscore_spelling match dashes too
    underscores_match_dashes: bool = True


#: how the text a log pattern captures becomes a value: as is, an int ("1,234"), a number,
#: or a two-decimal GiB figure turned into bytes (round(x * 2**30))
LOG_CONVERTERS = ("str", "int", "num", "gib")
#: where a figure goes in kvplan.sources.startlog.LogFacts
LOG_PLACES = ("version", "model", "settings", "weights", "gpu", "terms", "kv")


@record
class EngineLog:
    """What an engine module tells the start-up log reader."""

    engine: str  # the registry name
    display_name: str
    # a regular expression: the engine whose markers occur most often wrote the log
    markers: str
    # (figure, pattern with one group, converter in LOG_CONVERTERS, place in LOG_PLACES);
    # the first line matching a figure's patterns, in order, gives it
    figures: tuple[tuple[str, str, str, str], ...]
