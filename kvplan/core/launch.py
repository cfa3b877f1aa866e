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
               "json",  # a JSON object ('{"num_speculative_tokens": 3}'), read as a dict
               "append")  # text that may be given again: each value joined after a comma


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
    # environment variables (VAR=value before the program, docker -e) -> (setting, kind), read
    # like flags; others are kept in Launch.env unread
    env: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # the engine's parser takes an unambiguous prefix of a long flag (argparse's allow_abbrev):
    # a flag not in `flags` is read as the one known flag it begins
    abbreviations: bool = False
    # environment variables the engine reads as one of its flags (llama.cpp's LLAMA_ARG_*):
    # variable -> the flag; a flag on the command line wins over its variable
    env_flags: Mapping[str, str] = field(default_factory=dict)
    # every long flag is also read from its variable, the flag's name in upper snake case
    # (clap's `#[clap(long, env)]`: --max-total-tokens <- MAX_TOTAL_TOKENS)
    flags_from_env: bool = False
    # a setting whose value (a flag's) names a YAML file of more options (TensorRT-LLM's
    # --extra_llm_api_options): setting -> {the file's dotted key: (setting, kind)}, kind
    # "ignore" for a key that changes no memory. Read where the launch text writes the file
    # itself (a shell here-document, `cat > FILE <<EOF`); the file's keys win over the flags,
    # as the engine applies the file after them
    option_files: Mapping[str, Mapping[str, tuple[str, str]]] = field(default_factory=dict)
    # values of an `env` variable or a flag that the engine reads as its absence (Ollama's
    # OLLAMA_NUM_PARALLEL=0, llama.cpp's --ctx-size 0): the setting is left to the engine's
    # default, not bounded
    unset_values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # flags that one of `programs` takes beside `flags` (Ollama's runner, which `ollama serve`
    # starts with llama.cpp's context flags that `ollama serve` itself does not take):
    # program -> its own flags, read only after that program's words
    program_flags: Mapping[tuple[str, ...], Mapping[str, tuple[str, str]]] = \
        field(default_factory=dict)


#: how the text a log pattern captures becomes a value: as is, an int ("1,234"), a number,
#: a two-decimal GiB figure turned into bytes (round(x * 2**30)), a token count as vLLM's
#: flags take one ("32K" = 32,768, "32k" = 32,000, "1M" = 2**20: upper case binary), or a
#: size with its binary unit in MiB ("384.0 MiB", "1.9 GiB", "512 B": Ollama's format.HumanBytes2)
LOG_CONVERTERS = ("str", "int", "num", "gib", "tokens", "mib")
#: where a figure goes in kvplan.sources.startlog.LogFacts
LOG_PLACES = ("version", "model", "settings", "weights", "gpu", "terms", "kv")
#: how several lines giving one figure combine: the first line, the sum of all of them
#: (per-device buffers: llama.cpp prints one "KV buffer size" line per device), the least
#: of them (SGLang sizes its pool by the least free memory over its ranks), or the last
#: (TensorRT-LLM's PyTorch backend allocates a small pool to profile with, then the one it
#: serves with, and prints the same lines for each)
LOG_COMBINE = ("first", "sum", "min", "last")
#: whose figure a line states: the whole engine's, one worker's (a TP/PP rank: vLLM's
#: "Available KV cache memory" is its worker's), or one sequence's (llama.cpp's n_ctx_slot)
LOG_SCOPES = ("engine", "worker", "sequence")


@record
class LogLine:
    """One line format of a start-up log, as data: the reader finds `key` (literal text) in a
    line and matches `pattern` (one group) in a bounded window around it, so reading is linear
    in the log's length whatever a line holds."""

    figure: str  # the quantity, under the name kvplan.planning.explain and the engine use
    key: str  # literal text every such line contains
    pattern: str  # a regular expression with one group, matched near `key`
    converter: str  # in LOG_CONVERTERS
    place: str  # in LOG_PLACES
    unit: str = ""  # as printed: "GiB", "GB" (SGLang's: 2^30), "MiB", "tokens", "blocks", "x"
    # the releases that print the line (first, last; "" = open), for dating a log
    releases: tuple[str, str] = ("", "")
    scope: str = "engine"  # in LOG_SCOPES
    combine: str = "first"  # in LOG_COMBINE
    # literal text that, anywhere in the log, shows the line is another tool's and not the
    # engine's own (kvcached's virtual pool printed through SGLang's line): then not read
    unless: str = ""
    # `pattern` reads a key of the dict the engine echoes (EngineLog.echoes_non_defaults):
    # matched only at the dict's top level, never inside a nested value (a 'max_model_len'
    # inside vLLM's 'speculative_config' is the draft's, not the server's)
    echoed: bool = False


@record
class EngineLog:
    """What an engine module tells the start-up log reader."""

    engine: str  # the registry name
    display_name: str
    # a regular expression of literal alternatives: the engine whose markers occur most often
    # wrote the log
    markers: str
    # its line formats; for each figure the first format (in order) that a line matches
    # gives it
    figures: tuple[LogLine, ...]
    # literal text of a line that lists every setting not at its default (vLLM's "non-default
    # args: {...}"): where the log has it, a setting it does not list is at its default
    echoes_non_defaults: str = ""
    # the names that echoed dict gives the launch line's positional argument, which are no
    # flag (vLLM's argparse dest 'model_tag' for `vllm serve MODEL`)
    echoed_positional: tuple[str, ...] = ()
    # lines that show the log's engine ran the way an earlier release models it (vLLM's V0
    # engine under a release whose default is V1): (a regular expression, the release whose
    # model applies, why); explain applies the first that matches unless --engine-version
    # says otherwise, and says so
    modelled_as: tuple[tuple[str, str, str], ...] = ()
    # lines that show the run follows a rule of its own that kvplan does not model (Ollama's
    # own engine under the llama.cpp log format): (a regular expression, the rule); where a
    # KV line differs, explain names the rule of each such line the log has
    unmodelled: tuple[tuple[str, str], ...] = ()
    # the engine whose log lines this engine's log carries (Ollama's: its llama.cpp runner's):
    # a log whose markers are most that engine's, with one of this engine's markers, is this
    # engine's (kvplan.sources.startlog.detect_engine)
    within: str = ""
