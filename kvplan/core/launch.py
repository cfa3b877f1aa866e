"""What an engine tells the launch-command reader (kvplan.sources.launch): its programs,
Docker images and flag table. A plain description, here in the core so that engines (which
supply it) and sources (which read command lines with it) share it without importing each
other."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field

from kvplan.core.record import record

#: value kinds a flag table may name: how the text after the flag becomes a value
VALUE_KINDS = ("int", "float", "str", "tokens", "bytes", "flag", "no-flag", "ignore",
               "ignore-flag", "optional")  # optional: a value if one follows, else "on"


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
