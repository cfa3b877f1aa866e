"""`lazy(pattern)`: a regular expression compiled the first time it is used, not when its
module is imported. Compiling one costs 50-200 us; a command imports modules with dozens of
patterns it never runs (a plan reads no launch line, a log no byte sizes), and those were a
tenth of its start-up over the floor (benchmarks/README.md).
"""

from __future__ import annotations

import re
from typing import Any


class LazyPattern:
    """Stands for `re.compile(pattern, flags)`: its methods and attributes (match, search,
    findall, sub, pattern, ...) are the compiled pattern's, compiled on the first use."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(*self._args)
        return getattr(compiled, name)


def lazy(pattern: str, flags: int = 0) -> Any:
    """A pattern compiled on its first use (LazyPattern), typed as the compiled one."""
    return LazyPattern(pattern, flags)


# A module or tensor pattern (a quantization config's `re:` entries, llama.cpp's
# --override-tensor) is tried on every name (a few dozen characters) of every layer, by
# Python's backtracking matcher: a repeated group that itself repeats or branches
# ("(.*.*)*x", "(\\w+\\.?)+x") takes exponential time on a name it does not match, and each
# unbounded repeat in sequence multiplies the work by the name's length. Real patterns
# (".*lm_head", "model.layers.*.self_attn.*", ".*mlp.gate$") have neither.
_MAX_PATTERN_CHARS = 256
MAX_UNBOUNDED_REPEATS = 3
_SHORT_REPEAT = 8  # a repeat of at most this many steps costs no more than a few letters
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def pattern_problem(pattern: str) -> str | None:
    """Why a module- or tensor-name regular expression cannot be matched in bounded time (or
    at all), else None."""
    if len(pattern) > _MAX_PATTERN_CHARS:
        return f"is longer than {_MAX_PATTERN_CHARS} characters"
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"is not a regular expression ({exc})"
    try:
        tree = _Syntax(pattern).tree()
    except (re.error, IndexError, ValueError):  # a syntax _Syntax does not know
        return "uses a syntax kvplan cannot check for matching time"
    unbounded = 0
    stack: list[tuple[Any, bool]] = [(tree, False)]  # (items, inside a repeat of more than 1)
    while stack:
        items, repeated = stack.pop()
        for op, av in items:
            name = str(op)
            if name in _REPEATS:
                low, high, body = av
                many = high > 1
                if many and repeated:
                    return "repeats a group that itself repeats (exponential matching time)"
                unbounded += high > _SHORT_REPEAT
                stack.append((body, repeated or many))
            elif name == "BRANCH":
                if repeated:
                    return "repeats a group that branches (exponential matching time)"
                stack.extend((b, repeated) for b in av[1])
            elif name == "SUBPATTERN":
                stack.append((av[-1], repeated))
            elif name in ("ASSERT", "ASSERT_NOT", "ATOMIC_GROUP"):
                stack.append((av[-1] if name != "ATOMIC_GROUP" else av, repeated))
            elif name == "GROUPREF_EXISTS":
                stack.extend((b, repeated) for b in av[1:] if b is not None)
    if unbounded > MAX_UNBOUNDED_REPEATS:
        return (f"has {unbounded} unbounded repeats ('*', '+', '{{0,99}}'; at most "
                f"{MAX_UNBOUNDED_REPEATS}: each multiplies the matching time by a name's "
                "length)")
    return None


_UNBOUNDED = 2**32  # a repeat with no upper bound ('*', '+', '{2,}')
_QUANTIFIER = re.compile(r"\{(\d*)(,(\d*))?\}")
_FLAGS = re.compile(r"\?([aiLmsux]*)(?:-([imsx]+))?([:)])")
_LEADING = re.compile(r"\(\?(?:([aiLmsux]+)|#[^)]*)\)")  # the pattern's flags, comments
_ESCAPED = {"n": 10, "t": 9, "r": 13, "f": 12, "v": 11, "a": 7}
_NUMBERED = {"x": 2, "u": 4, "U": 8}
_NESTED = ("SUBPATTERN", "BRANCH", "ASSERT", "ASSERT_NOT", "ATOMIC_GROUP", "GROUPREF_EXISTS",
           *_REPEATS)


class _Syntax:
    """A pattern's syntax tree in the shape `pattern_problem` reads (the standard library's
    own, whose parser is private): a list of (operation, argument) items, a repeat
    ("MAX_REPEAT", (low, high, items)), a group ("SUBPATTERN", (..., items)), alternatives
    ("BRANCH", (None, [items, ...])), lookarounds, atomic and conditional groups; every other
    item an atom, named as sre names it where `_branch` compares atoms. The pattern has
    compiled, so its syntax is valid; reading is linear in its length."""

    def __init__(self, pattern: str) -> None:
        self.text, self.pos = pattern, 0

    def tree(self) -> list[tuple[str, Any]]:
        # (?x) at the start (the only place global flags may stand, with comments) makes the
        # whole pattern verbose: whitespace and '#' comments are no part of it
        at, verbose = 0, False
        while (m := _LEADING.match(self.text, at)) is not None:
            verbose, at = verbose or "x" in (m.group(1) or ""), m.end()
        return self._alternatives(verbose)

    def _alternatives(self, verbose: bool) -> list[tuple[str, Any]]:
        alts = [self._sequence(verbose)]
        while self.text.startswith("|", self.pos):
            self.pos += 1
            alts.append(self._sequence(verbose))
        return _branch(alts)

    def _sequence(self, verbose: bool) -> list[tuple[str, Any]]:
        items: list[tuple[str, Any]] = []
        text = self.text
        while self.pos < len(text) and text[self.pos] not in "|)":
            c = text[self.pos]
            if verbose and (c.isspace() or c == "#"):
                end = text.find("\n", self.pos) if c == "#" else self.pos
                self.pos = len(text) if end < 0 else end + 1
                continue
            bounds = self._quantifier()
            if bounds is not None:  # applies to the item before it, as in sre
                op = "MAX_REPEAT"
                if text.startswith("?", self.pos):
                    op, self.pos = "MIN_REPEAT", self.pos + 1
                elif text.startswith("+", self.pos):
                    op, self.pos = "POSSESSIVE_REPEAT", self.pos + 1
                items[-1] = (op, (*bounds, [items[-1]]))
                continue
            if c == "(":
                group = self._group(verbose)
                if group is not None:
                    items.append(group)
            elif c == "[":
                items.append(self._set())
            elif c == "\\":
                items.append(self._escape())
            else:
                self.pos += 1
                items.append(("ANY", None) if c == "." else ("AT", c) if c in "^$" else
                             ("LITERAL", ord(c)))
        return items

    def _quantifier(self) -> tuple[int, int] | None:
        """(low, high) of the repeat at the reading position ('*', '+', '?', '{m,n}'), read;
        None where there is none ('{' that opens no count is a literal)."""
        text, at = self.text, self.pos
        c = text[at]
        if c in "*+?":
            self.pos += 1
            return {"*": (0, _UNBOUNDED), "+": (1, _UNBOUNDED), "?": (0, 1)}[c]
        m = _QUANTIFIER.match(text, at) if not text.startswith("{}", at) else None
        if m is None:
            return None
        self.pos = m.end()
        low = int(m.group(1)) if m.group(1) else 0
        return low, (int(m.group(3)) if m.group(3) else _UNBOUNDED) if m.group(2) else low

    def _group(self, verbose: bool) -> tuple[str, Any] | None:
        """The group at '('; None for a comment or the pattern's flags."""
        text = self.text
        self.pos += 1
        kind, inner = "SUBPATTERN", verbose
        if text.startswith("?", self.pos):
            head = text[self.pos:self.pos + 4]
            if head.startswith("?#"):
                self.pos = text.index(")", self.pos) + 1
                return None
            if head.startswith("?P="):
                end = text.index(")", self.pos)
                ref, self.pos = text[self.pos + 3:end], end + 1
                return "GROUPREF", ref
            if head.startswith("?P<"):
                self.pos = text.index(">", self.pos) + 1
            elif head.startswith(("?=", "?!", "?<=", "?<!")):
                kind = "ASSERT_NOT" if "!" in head[:3] else "ASSERT"
                self.pos += 3 if head.startswith("?<") else 2
            elif head.startswith("?>"):
                kind, self.pos = "ATOMIC_GROUP", self.pos + 2
            elif head.startswith("?("):
                self.pos = text.index(")", self.pos) + 1
                yes, no = self._sequence(verbose), None
                if text.startswith("|", self.pos):
                    self.pos += 1
                    no = self._sequence(verbose)
                self.pos += 1
                return "GROUPREF_EXISTS", (None, yes, no)
            else:
                m = _FLAGS.match(text, self.pos)
                if m is None:
                    raise re.error("unknown group", text, self.pos)
                self.pos = m.end()
                if m.group(3) == ")":  # the pattern's flags: read by tree()
                    return None
                inner = (verbose or "x" in m.group(1)) and "x" not in (m.group(2) or "")
        body = self._alternatives(inner)
        self.pos += 1  # ')'
        if kind == "ATOMIC_GROUP":
            return kind, body
        return kind, (None, 0, 0, body) if kind == "SUBPATTERN" else (1, body)

    def _set(self) -> tuple[str, Any]:
        """A character set: a literal where it holds one character, as sre reads '[a]'."""
        text = self.text
        start = self.pos
        i = start + 1 + text.startswith("^", start + 1)
        i += text.startswith("]", i)  # a first ']' is a member
        while text[i] != "]":
            i += 2 if text[i] == "\\" else 1
        self.pos = i + 1
        negated = text.startswith("^", start + 1)
        body = text[start + 1 + negated:i]
        one = len(body) == 1 or (len(body) == 2 and body[0] == "\\" and
                                 not body[1].isalnum())
        if one:
            return ("NOT_LITERAL" if negated else "LITERAL", ord(body[-1]))
        return ("NOT_IN" if negated else "IN", body)

    def _escape(self) -> tuple[str, Any]:
        text = self.text
        e = text[self.pos + 1]
        self.pos += 2
        if e in "dDwWsS":
            return "IN", "\\" + e
        if e in "bBAZ":
            return "AT", e
        if e in _NUMBERED:
            digits = _NUMBERED[e]
            self.pos += digits
            return "LITERAL", int(text[self.pos - digits:self.pos], 16)
        if e == "N":
            end = text.index("}", self.pos)
            name, self.pos = text[self.pos + 1:end], end + 1
            return "LITERAL", name
        if e.isdigit():
            octal = re.match(r"[0-7]{0,2}", text[self.pos:]) if e == "0" else \
                re.match(r"[0-7]{2}", text[self.pos:]) if e in "01234567" else None
            if octal is not None and (e == "0" or octal.group()):
                self.pos += octal.end()
                return "LITERAL", int(e + octal.group(), 8)
            ref = e + (text[self.pos] if text[self.pos:self.pos + 1].isdigit() else "")
            self.pos += len(ref) - 1
            return "GROUPREF", ref
        return "LITERAL", _ESCAPED.get(e, ord(e))


def _branch(alts: list[list[tuple[str, Any]]]) -> list[tuple[str, Any]]:
    """Alternatives as sre's parser leaves them (_parse_sub): a first item they all share
    moved in front, alternatives of one character each made a set, else a BRANCH."""
    if len(alts) == 1:
        return alts[0]
    items: list[tuple[str, Any]] = []
    while all(alts) and alts[0][0][0] not in _NESTED and \
            all(alt[0] == alts[0][0] for alt in alts[1:]):
        items.append(alts[0][0])
        alts = [alt[1:] for alt in alts]
    if all(len(alt) == 1 and alt[0][0] in ("LITERAL", "IN") for alt in alts):
        return [*items, ("IN", tuple(alt[0] for alt in alts))]
    return [*items, ("BRANCH", (None, alts))]
