"""Engine start-up logs as input: the settings, memory terms and KV lines an engine's log
printed, each with the line it came from and the precision it was printed with. A partial log
gives what it has; nothing is guessed.

The reader is generic: each engine module declares its log (kvplan.core.launch.EngineLog and
its LogLine data) and the caller (kvplan.planning.explain) passes the registry's formats in, so
sources never import engines. Reading is linear in the log's length (MAX_LINE_CHARS,
KEY_TRIES, WINDOW_CHARS). Figures become bytes with `round(x * 2^30)` (MiB for llama.cpp;
SGLang's "GB" is GiB) and keep their printed precision in `LogFacts.precision`. More:
docs/architecture.md, "Notes on single modules".
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvplan.core.errors import BadInputError
from kvplan.core.launch import EngineLog, LogLine
from kvplan.core.units import GIB, MAX_DIGITS, MIB

MAX_LOG_BYTES = 64 * MIB
MAX_LINE_CHARS = 64 * 1024  # a longer line is read up to here (config dumps are ~10 KiB)
WINDOW_CHARS = 512  # a pattern is matched within this many characters after its key
BACK_CHARS = 96  # ... and this many before it (patterns may start before the key)
KEY_TRIES = 4  # occurrences of a key tried in one line
# a worker's rank in a line's prefix: "rank=3", "(VllmWorker rank=1 ...)", "[... TP0]",
# "[... DP1 TP1 EP1]" (SGLang), "(Worker_TP3_EP3 pid=...)", "(Worker_PP1_TP0 pid=...)" (vLLM
# V1's multiproc_executor.py worker process names, whose parts '_' joins)
_RANK = re.compile(r"\brank[= ](\d+)|(?<![A-Za-z0-9])(DP|PP|TP)(\d+)(?![0-9])")


def _rank(text: str, end: int) -> tuple[int, int, int] | None:
    """The rank a line's prefix (up to `end`) names, as (data-parallel, pipeline, tensor)
    ranks, so that the lowest is the first stage's first worker; None when it names none."""
    parts = {"DP": 0, "PP": 0, "TP": 0}
    found = False
    for m in _RANK.finditer(text, 0, end):
        found = True
        if m.group(1) is not None:
            parts["TP"] = int(m.group(1))
        else:
            parts[m.group(2)] = int(m.group(3))
    return (parts["DP"], parts["PP"], parts["TP"]) if found else None


@dataclass
class LogFacts:
    engine: str | None = None
    version: str | None = None
    model: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # launch-style setting names
    gpu_total_bytes: int | None = None
    weights_bytes: int | None = None
    terms: dict[str, int] = field(default_factory=dict)  # activation/non-torch/cudagraph
    kv: dict[str, Any] = field(default_factory=dict)  # the engine's own KV figures
    lines: dict[str, str] = field(default_factory=dict)  # figure -> the log line it came from
    # figure -> half a unit of its last printed digit, in the figure's own unit (bytes for a
    # GiB figure): the log's rounding; 0 for a count
    precision: dict[str, float] = field(default_factory=dict)
    # figure -> the releases that print the line it came from (first, last; "" = open)
    releases: dict[str, tuple[str, str]] = field(default_factory=dict)
    scopes: dict[str, str] = field(default_factory=dict)  # figure -> "engine"/"worker"/...
    notes: list[str] = field(default_factory=list)
    # figure -> a line whose pattern matched but whose figure would not convert (1e999, 5,000
    # digits): the line is there, its figure is unreadable
    unreadable: dict[str, str] = field(default_factory=dict)


def _num(text: str) -> float:
    value = float(text.replace(",", ""))
    if not math.isfinite(value):  # '1e999' or 400 digits: not a figure (the line is skipped)
        raise ValueError(text[:40])
    return value


def _int(text: str) -> int:
    digits = text.replace(",", "")
    if len(digits) > MAX_DIGITS:  # 400 digits: no count a log prints (the line is unreadable)
        raise ValueError(text[:40])
    return int(digits)


def _gib(text: str) -> int:
    return round(_num(text) * GIB)


_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}


def _tokens(text: str) -> int:
    """'32768', '32K' (32,768), '32k' (32,000): vLLM's human-readable integers
    (vllm/engine/arg_utils.py human_readable_int: lower case decimal, upper case binary)."""
    text = text.replace(",", "").strip()
    if text and text[-1] in _SUFFIX:
        return round(_num(text[:-1]) * _SUFFIX[text[-1]])
    return _int(text)


# binary size units as a size is printed with one ("384.0 MiB"), in bytes
_UNITS = {"B": 1, "KiB": 2**10, "MiB": MIB, "GiB": GIB, "TiB": 2**40}


def _split_size(text: str) -> tuple[str, int]:
    number, _, unit = text.strip().partition(" ")
    if unit not in _UNITS:
        raise ValueError(text[:40])
    return number, _UNITS[unit]


def _mib(text: str) -> float:
    """'384.0 MiB' -> 384.0; '1.9 GiB' -> 1945.6 (a size in MiB)."""
    number, unit = _split_size(text)
    return _num(number) * unit / MIB


_CONVERT: dict[str, Any] = {"str": str, "int": _int, "num": _num, "gib": _gib,
                            "tokens": _tokens, "mib": _mib}


def _precision(text: str, converter: str) -> float:
    """Half a unit of the last digit `text` prints, in the converted value's unit."""
    if converter == "mib":
        number, unit = _split_size(text)
        return _precision(number, "num") * unit / MIB
    if converter not in ("num", "gib") or "." not in text:
        return 0.0 if converter != "num" else 0.5
    half = 0.5 * 10.0 ** -len(text.strip().split(".")[1])
    return half * GIB if converter == "gib" else half


def _lines(text: str, facts: LogFacts) -> list[str]:
    out = []
    cut = 0
    for line in text.splitlines():
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS]
            cut += 1
        out.append(line)
    if cut:
        facts.notes.append(f"{cut} line(s) longer than {MAX_LINE_CHARS:,} characters were read "
                           "only up to there")
    return out


def echoed_dict(text: str, marker: str) -> tuple[str, dict[str, int]]:
    """The dict an engine echoes after `marker` (EngineLog.echoes_non_defaults: vLLM's
    "non-default args: {'model': ..., 'enable_lora': True, 'lora_modules':
    [LoRAModulePath(name='a', ...)]}"), the first in `text`: its line from the start to the
    closing brace, with the lines a terminal wrapped it over joined back, and its top-level
    keys, each with the offset of its opening quote there. Nested objects and quoted strings
    are skipped, so a key inside a value is not one. Read up to MAX_LINE_CHARS, linear in them.
    The one reader of that dict's structure: `read_log` matches `LogLine.echoed` patterns at
    these keys only, and kvplan.planning.explain names the keys kvplan does not know."""
    at = text.find(marker)
    if at < 0:
        return "", {}
    start = text.rfind("\n", 0, at) + 1
    line = re.sub(r"[\r\n]", "", text[start:start + MAX_LINE_CHARS])
    i = at - start + len(marker) - 1  # the dict's opening brace
    keys: dict[str, int] = {}
    depth, quote, last = 0, "", ""
    while i < len(line):
        c = line[i]
        if quote:
            i += 2 if c == "\\" else 1
            quote, last = ("", c) if c == quote else (quote, last)
            continue
        if c in "'\"":
            m = _ECHOED_KEY.match(line, i) if depth == 1 and c == "'" and last in ("{", ",") \
                else None
            if m:
                keys.setdefault(m.group(1), i)
                i, last = m.end(), ":"
                continue
            quote = c
        elif c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
            if depth == 0:
                return line[:i + 1], keys
        if not c.isspace():
            last = c
        i += 1
    return line, keys


def echoed_keys(text: str, marker: str) -> list[str]:
    """The top-level keys of the dict an engine echoes after `marker` (`echoed_dict`)."""
    return list(echoed_dict(text, marker)[1])


_ECHOED_KEY = re.compile(r"'(\w+)': ")


def _matches(lines: Sequence[str], fmt: LogLine, compiled: re.Pattern[str],
             tops: Sequence[int] | None = None) -> Iterator[tuple[str, re.Match[str]]]:
    """(line, match) for every line where `fmt`'s pattern matches near its key; with `tops`
    (the offsets of an echoed dict's top-level keys, `echoed_keys`) only a match starting at
    one of them."""
    for line in lines:
        if tops is not None:
            at = next((m for pos in tops if line.startswith(fmt.key, pos) and (
                m := compiled.match(line, pos, pos + len(fmt.key) + WINDOW_CHARS))), None)
            if at:
                yield line, at
            continue
        pos = line.find(fmt.key)
        tries = 0
        while pos >= 0 and tries < KEY_TRIES:
            m = compiled.search(line, max(0, pos - BACK_CHARS), pos + len(fmt.key) + WINDOW_CHARS)
            if m:
                yield line, m
                break
            pos = line.find(fmt.key, pos + 1)
            tries += 1


def read_log(text: str, formats: Sequence[EngineLog], engine: str | None = None) -> LogFacts:
    """The facts a start-up log states, read with the engines' `formats` (their markers and
    line formats). `engine` (a registry name) overrides the detection."""
    if len(text) > MAX_LOG_BYTES:
        raise BadInputError(f"the log is larger than {MAX_LOG_BYTES // MIB} MiB",
                            "give the start-up part (up to the KV cache lines)")
    known = {f.engine: f for f in formats}
    facts = LogFacts(engine=engine or detect_engine(text, formats))
    if facts.engine is None:
        names = [f.display_name for f in formats]
        either = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
        raise BadInputError(f"no {either} start-up lines found in the log",
                            "give the log from the engine's start-up, or --engine to say "
                            "which engine wrote it")
    if facts.engine not in known:
        raise BadInputError(f"kvplan reads no {facts.engine} start-up log",
                            "one of: " + ", ".join(known))
    lines = _lines(text, facts)
    unmatched: list[LogLine] = []  # KV formats no line matched
    # the dict of non-default settings the engine echoes (the first, its wrapped lines
    # joined): an `echoed` format reads it at its top-level keys only
    echo = known[facts.engine].echoes_non_defaults
    echo_line, echo_keys = echoed_dict(text, echo) if echo else ("", {})
    echo_lines, tops = [echo_line] if echo_line else [], sorted(echo_keys.values())
    for fmt in known[facts.engine].figures:
        scan, at = (echo_lines, tops) if fmt.echoed else (lines, None)
        if fmt.combine == "first" and _have(facts, fmt.figure, fmt.place):
            continue
        if fmt.key not in text:  # no line can match: nothing to compile (most formats)
            continue
        compiled = re.compile(fmt.pattern)
        if fmt.unless and fmt.unless in text:
            # said only where such a line is there to be left unread
            if next(_matches(scan, fmt, compiled, at), None) is not None:
                note = (f"{fmt.figure}: the '{fmt.key}' line is not read: the log shows "
                        f"'{fmt.unless}', whose figure it then is")
                if note not in facts.notes:
                    facts.notes.append(note)
            continue
        total: float = 0
        found = 0
        ranks: dict[tuple[int, int, int], Any] = {}
        for line, m in _matches(scan, fmt, compiled, at):
            raw = m.group(1).strip()
            try:
                value = _CONVERT[fmt.converter](raw)
            except ValueError:
                facts.unreadable.setdefault(fmt.figure, line.strip())
                continue
            if not found:
                facts.lines[fmt.figure] = line.strip()
                facts.releases[fmt.figure] = fmt.releases
                facts.scopes[fmt.figure] = fmt.scope
            found += 1
            if fmt.scope == "worker":
                rank = _rank(line, m.start())
                if rank is not None:
                    ranks.setdefault(rank, value)
            if fmt.combine == "min":
                if found == 1 or value < _value(facts, fmt.figure, fmt.place):
                    _put(facts, fmt.figure, fmt.place, value)
                    facts.precision[fmt.figure] = _precision(raw, fmt.converter)
                    facts.lines[fmt.figure] = line.strip()
                continue
            if fmt.combine == "last":
                _put(facts, fmt.figure, fmt.place, value)
                facts.precision[fmt.figure] = _precision(raw, fmt.converter)
                facts.lines[fmt.figure] = line.strip()
                continue
            if fmt.combine == "first":
                if found == 1:
                    _put(facts, fmt.figure, fmt.place, value)
                    facts.precision[fmt.figure] = _precision(raw, fmt.converter)
                if fmt.scope != "worker":
                    break
                continue
            total += value
            facts.precision[fmt.figure] = (facts.precision.get(fmt.figure, 0.0)
                                           + _precision(raw, fmt.converter))
        if not found and fmt.place == "kv":
            unmatched.append(fmt)
        if found and fmt.combine == "sum" and not _have(facts, fmt.figure, fmt.place):
            _put(facts, fmt.figure, fmt.place, total)
            if found > 1:
                facts.lines[fmt.figure] += f" (+ {found - 1} more line(s), summed)"
        if found > 1 and fmt.combine == "min" and len(set(ranks.values())) > 1:
            facts.notes.append(f"workers logged different {fmt.figure} "
                               f"({len(set(ranks.values()))} values); the least is applied, "
                               "as the engine takes it")
        elif len(set(ranks.values())) > 1:
            # each worker logs its own figure: the lowest rank's (the first pipeline stage's)
            # is the one kvplan applies, and the spread is noted
            low = min(ranks)
            _put(facts, fmt.figure, fmt.place, ranks[low])
            where = " ".join(f"{k}{v}" for k, v in zip(("DP", "PP", "TP"), low, strict=True)
                             if v or k == "TP")
            facts.notes.append(f"workers logged different {fmt.figure} ({len(set(ranks.values()))}"
                               f" values); the lowest rank's ({where}) is applied to every stage")
    _misprinted(lines, unmatched, facts)
    _tp_from_ranks(lines, facts)
    if "peak_torch_bytes" in facts.terms and facts.weights_bytes is not None:
        facts.terms["activation_bytes"] = facts.terms["peak_torch_bytes"] - facts.weights_bytes
    return facts


# how far into a line its prefix may name the worker ("[2026-02-26 05:35:08 TP7] ...",
# "(Worker_TP3_EP3 pid=4312) ...")
PREFIX_CHARS = 80


def _tp_from_ranks(lines: Sequence[str], facts: LogFacts) -> None:
    """The tensor-parallel size where the log prints none but its lines' prefixes name the
    workers' tensor ranks (SGLang's "[... TP7]", vLLM V1's "Worker_TP3"): at least one more
    than the highest, which is applied and said. A rank named "rank=N" is not read here (vLLM
    V0 counts its workers over every stage)."""
    if "tp" in facts.settings:
        return
    highest = -1
    for line in lines:
        for m in _RANK.finditer(line, 0, min(len(line), PREFIX_CHARS)):
            if m.group(2) == "TP":
                highest = max(highest, int(m.group(3)))
    if highest >= 1:
        facts.settings["tp"] = highest + 1
        facts.notes.append(f"the log prints no TP size; its workers' prefixes name tensor ranks "
                           f"0-{highest}, so TP {highest + 1} is applied (--tp says otherwise)")


def _relaxed(pattern: str) -> str | None:
    """`pattern` with its capture group taking any run of non-space characters: the line's
    text around the figure, whatever stands where the figure should. None when the pattern
    has no plain group."""
    depth, i, start = 0, 0, -1
    klass = False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if klass:
            klass = ch != "]"
        elif ch == "[":
            klass = True
        elif ch == "(":
            depth += 1
            if start < 0 and not pattern.startswith("(?", i):
                start, level = i, depth
        elif ch == ")":
            if start >= 0 and depth == level:
                return pattern[:start] + r"(\S*)" + pattern[i + 1:]
            depth -= 1
        i += 1
    return None


def _misprinted(lines: Sequence[str], formats: Sequence[LogLine], facts: LogFacts) -> None:
    """A KV line the log prints whose figure is not in the form its format reads ("GPU KV
    cache size: 0.0 tokens", an empty or negative count): the line is there, so its figure is
    unreadable (a difference in explain), never silently absent. Found with each unmatched
    format's pattern relaxed (_relaxed) around the same key, when no format gave the
    figure."""
    for fmt in formats:
        if fmt.figure in facts.kv or fmt.figure in facts.unreadable:
            continue
        relaxed = _relaxed(fmt.pattern)
        if relaxed is None:
            continue
        for line, _ in _matches(lines, fmt, re.compile(relaxed)):
            facts.unreadable[fmt.figure] = line.strip()
            break


def detect_engine(text: str, formats: Sequence[EngineLog]) -> str | None:
    """The engine whose markers occur most often in `text` (None: no marker at all), or the
    engine whose log carries that one's lines (EngineLog.within) where one of its own markers
    is there: an Ollama log is mostly its llama.cpp runner's lines. An excerpt of that
    engine's own lines alone (Ollama's scheduler lines without its runner's) is that engine's."""
    scores = [(len(re.findall(f.markers, text)), f.engine) for f in formats
              if not f.within]
    best = max(scores, default=(0, None))
    if not best[0]:
        return next((f.engine for f in formats if f.within and re.search(f.markers, text)),
                    None)
    return next((f.engine for f in formats if f.within == best[1]
                 and re.search(f.markers, text)), best[1])


def _have(facts: LogFacts, figure: str, where: str) -> bool:
    if where == "settings":
        return figure in facts.settings
    if where == "kv":
        return figure in facts.kv
    if where == "terms":
        return figure in facts.terms
    return getattr(facts, {"model": "model", "version": "version", "weights": "weights_bytes",
                           "gpu": "gpu_total_bytes"}[where]) is not None


def _value(facts: LogFacts, figure: str, where: str) -> Any:
    """The value `_put` stored for `figure` (None: none yet)."""
    if where in ("settings", "kv", "terms"):
        return getattr(facts, where).get(figure)
    return getattr(facts, {"model": "model", "version": "version", "weights": "weights_bytes",
                           "gpu": "gpu_total_bytes"}[where])


def _put(facts: LogFacts, figure: str, where: str, value: Any) -> None:
    if where == "settings":
        facts.settings[figure] = value
    elif where == "kv":
        facts.kv[figure] = value
    elif where == "terms":
        facts.terms[figure] = int(value)
    elif where == "model":
        facts.model = str(value)
    elif where == "version":
        facts.version = str(value)
    elif where == "weights":
        facts.weights_bytes = int(value)
    elif where == "gpu":
        facts.gpu_total_bytes = int(value)


