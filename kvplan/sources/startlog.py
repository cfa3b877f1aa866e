"""Engine start-up logs as input: the settings, memory terms and KV lines an engine's log
printed, each with the line it came from. A partial log gives what it has; nothing is guessed.

The reader is generic: each engine module declares its log (kvplan.core.launch.EngineLog: the
markers that show it wrote a log, and per figure the patterns of the lines that state it) and
the caller (kvplan.planning.explain) passes the registry's engines' formats in, so adding an
engine does not touch this module, and sources never import engines.

Units as the engines print them: vLLM, SGLang and TRT-LLM print GiB (SGLang writes "GB" but
divides by 2^30), llama.cpp MiB; a two-decimal figure is converted to bytes with
`round(x * 2^30)`, so it carries the log's own rounding (half a hundredth of a GiB).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kvplan.core.errors import BadInputError
from kvplan.core.launch import EngineLog
from kvplan.core.units import GIB

MIB = 2**20
MAX_LOG_BYTES = 64 * MIB


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
    notes: list[str] = field(default_factory=list)


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _gib(text: str) -> int:
    return round(_num(text) * GIB)


_CONVERT: dict[str, Any] = {"str": str, "int": _int, "num": _num, "gib": _gib}
_RANK_BUDGET = re.compile(r"rank=(\d+)[^\n]*Available KV cache memory: ([\d.]+) GiB")


def read_log(text: str, formats: Sequence[EngineLog], engine: str | None = None) -> LogFacts:
    """The facts a start-up log states, read with the engines' `formats` (their markers and
    figure tables). `engine` (a registry name) overrides the detection."""
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
    for figure, pattern, converter, where in known[facts.engine].figures:
        if _have(facts, figure, where):
            continue
        m = re.search(pattern, text)
        if not m:
            continue
        try:
            value = _CONVERT[converter](m.group(1).strip())
        except ValueError:
            continue
        _put(facts, figure, where, value)
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        facts.lines[figure] = text[start:end if end >= 0 else None].strip()
    _rank_budgets(text, facts)  # only vLLM's workers print "rank=N ... Available KV cache"
    if "peak_torch_bytes" in facts.terms and facts.weights_bytes is not None:
        facts.terms["activation_bytes"] = facts.terms["peak_torch_bytes"] - facts.weights_bytes
    return facts


def detect_engine(text: str, formats: Sequence[EngineLog]) -> str | None:
    """The engine whose markers occur most often in `text` (None: no marker at all)."""
    scores = [(len(re.findall(f.markers, text)), f.engine) for f in formats]
    best = max(scores, default=(0, None))
    return best[1] if best[0] else None


def _have(facts: LogFacts, figure: str, where: str) -> bool:
    if where == "settings":
        return figure in facts.settings
    if where == "kv":
        return figure in facts.kv
    if where == "terms":
        return figure in facts.terms
    return getattr(facts, {"model": "model", "version": "version", "weights": "weights_bytes",
                           "gpu": "gpu_total_bytes"}[where]) is not None


def _put(facts: LogFacts, figure: str, where: str, value: Any) -> None:
    if where == "settings":
        facts.settings[figure] = value
    elif where == "kv":
        facts.kv[figure] = value
    elif where == "terms":
        facts.terms[figure] = value
    elif where == "model":
        facts.model = str(value)
    elif where == "version":
        facts.version = str(value)
    elif where == "weights":
        facts.weights_bytes = int(value)
    elif where == "gpu":
        facts.gpu_total_bytes = int(value)


def _rank_budgets(text: str, facts: LogFacts) -> None:
    """With several workers each logs its own budget; the lowest rank's (the first pipeline
    stage's) is the one kvplan applies, and the spread is noted."""
    ranks = {int(r): _gib(v) for r, v in _RANK_BUDGET.findall(text)}
    if len(set(ranks.values())) > 1:
        low = min(ranks)
        facts.kv["available_kv_cache_bytes"] = ranks[low]
        facts.notes.append(f"ranks logged different KV budgets ({len(set(ranks.values()))} "
                           f"values); rank {low}'s is applied to every stage")
