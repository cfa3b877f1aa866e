"""A reader for the plain subset of YAML kvplan's own files are written in, so that reading
the packaged library or GPU catalog does not import PyYAML (a fifth of `kvplan plan`'s
start-up: docs/architecture.md, "kvplan/sources/reader.py").

`parse(text)` returns `(True, value)` with exactly the value PyYAML's safe loader gives the
same text, or `(False, None)` when the text uses anything outside the subset; the caller
(kvplan.sources.reader.parse_yaml) then reads it with PyYAML and its guarded composer, which
also gives every error. The subset: ASCII without tabs or control characters; block mappings
of plain word keys, each key once; block sequences; flow collections; plain scalars and
single- or double-quoted ones (no escapes), folded over lines; `>`, `>-`, `|` and `|-` blocks
of one indent; comments. Plain scalars get YAML 1.1's types (null, bool, int, float, str);
one whose type is not certain (octal, hex, base 60, timestamps, .inf) is left to PyYAML.
tests/sources/test_plainyaml.py compares the two readers.
"""

from __future__ import annotations

import itertools
from typing import Any

# as kvplan.sources.reader.MAX_DEPTH / MAX_NODES: past them, the guarded reader reports it
_MAX_DEPTH = 64
_MAX_NODES = 100_000
_MAX_FLOW_LINES = 64  # a flow collection over more lines is left to PyYAML

# every character YAML 1.1's int, float and timestamp patterns use: a plain scalar starting
# like a number with any other character in it is text
_NUMBERISH = frozenset("0123456789_+-.:abcdefABCDEFxinINTtZ ")
_TRUE = frozenset({"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"})
_FALSE = frozenset({"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"})
_NULL = frozenset({"", "~", "null", "Null", "NULL"})
# (no regular expressions: compiling this module's four was half its import)
_DIGITS = frozenset("0123456789")
_KEY_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_KEY_CHARS = _KEY_FIRST | _DIGITS | frozenset(".-/ ")


class _Decline(Exception):
    """The text is outside the subset: PyYAML reads it."""


def parse(text: str) -> tuple[bool, Any]:
    """(True, the document's value) or (False, None): see the module docstring."""
    # ASCII without control characters other than the newline
    if not text.isascii() or not text.replace("\n", "").isprintable():
        return False, None
    try:
        return True, _Parser(text).document()
    except _Decline:
        return False, None
    except (ValueError, IndexError, RecursionError, MemoryError, OverflowError):
        return False, None  # whatever this reader did not foresee: PyYAML decides


def scalar(text: str) -> Any:
    """A plain scalar's value as PyYAML's resolver and safe constructor make it."""
    if text in _NULL:
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    first = text[0]
    if first in "-+.0123456789":
        if _is_int(text):
            return int(text.replace("_", ""))
        if _is_float(text):
            return float(text.replace("_", ""))
        if _NUMBERISH.issuperset(text):
            raise _Decline  # might be octal, hex, base 60, a timestamp, .inf or .nan
        return text
    if first in "<=":
        raise _Decline  # a merge key or a value key
    return text


def _key(content: str) -> tuple[str, int] | None:
    """A block mapping entry's plain key and where its value starts: a word of letters,
    digits, `_`, `.`, `-`, `/` and spaces, starting with a letter or `_`, then `:` and a
    space or the end of the line; None for a line that does not start so."""
    colon = content.find(":")
    if colon < 1 or content[colon + 1:colon + 2] not in ("", " ") \
            or content[0] not in _KEY_FIRST or not _KEY_CHARS.issuperset(content[:colon]):
        return None
    return content[:colon].rstrip(" "), colon + 1 + (content[colon + 1:colon + 2] == " ")


def _is_int(text: str) -> bool:
    """YAML 1.1's decimal int, as PyYAML's resolver writes it: [-+]?(0|[1-9][0-9_]*)."""
    body = text[1:] if text[:1] in ("-", "+") else text
    return body == "0" or (body[:1] in _DIGITS and body[0] != "0"
                           and _DIGITS.union("_").issuperset(body))


def _is_float(text: str) -> bool:
    """YAML 1.1's float without a leading dot: [-+]?[0-9][0-9_]*\\.[0-9_]*([eE][-+][0-9]+)?"""
    body = text[1:] if text[:1] in ("-", "+") else text
    whole, dot, rest = body.partition(".")
    if not dot or whole[:1] not in _DIGITS or not _DIGITS.union("_").issuperset(whole):
        return False
    at = next((i for i, c in enumerate(rest) if c in "eE"), len(rest))
    fraction, exponent = rest[:at], rest[at:]
    if not _DIGITS.union("_").issuperset(fraction):
        return False
    return exponent == "" or (len(exponent) >= 3 and exponent[1] in "-+"
                              and _DIGITS.issuperset(exponent[2:]))


class _Parser:
    def __init__(self, text: str) -> None:
        self.raw = text.split("\n")
        self.i = 0  # the next raw line
        self.nodes = 0

    # --- lines ---------------------------------------------------------------------------

    def _peek(self) -> tuple[int, str] | None:
        """(indent, content) of the next line with content, skipping blank and comment
        lines; None at the end."""
        while self.i < len(self.raw):
            line = self.raw[self.i]
            content = line.lstrip(" ")
            if content and not content.startswith("#"):
                if content.startswith(("---", "...", "%")) and len(line) == len(content):
                    raise _Decline  # document markers and directives
                return len(line) - len(content), content
            self.i += 1
        return None

    def _next_indent(self) -> int:
        """The indent of the next raw line that is not blank (-1 at the end)."""
        for line in itertools.islice(self.raw, self.i, None):
            body = line.lstrip(" ")
            if body:
                return len(line) - len(body)
        return -1

    def _count(self) -> None:
        self.nodes += 1
        if self.nodes > _MAX_NODES:
            raise _Decline

    # --- block structure -----------------------------------------------------------------

    def document(self) -> Any:
        first = self._peek()
        if first is None:
            return None
        indent, content = first
        value = self._block(indent, content, 1)
        if self._peek() is not None:
            raise _Decline  # content left over at a smaller indent
        return value

    def _block(self, indent: int, content: str, depth: int) -> Any:
        """The collection whose first line (at `indent`) is the next line."""
        if depth > _MAX_DEPTH:
            raise _Decline
        if content == "-" or content.startswith("- "):
            return self._sequence(indent, depth)
        if _key(content) is not None:
            return self._mapping(indent, depth)
        raise _Decline  # a scalar document, a complex key, ...

    def _mapping(self, indent: int, depth: int, first: str | None = None) -> dict[Any, Any]:
        """A block mapping at `indent`; `first`: its first entry's text when it follows a
        sequence item's dash on the same line."""
        out: dict[Any, Any] = {}
        self._count()
        while True:
            if first is not None:
                content, first = first, None
            else:
                at = self._peek()
                if at is None or at[0] < indent:
                    return out
                if at[0] > indent or at[1] == "-" or at[1].startswith("- "):
                    if at[0] == indent:
                        return out  # a sequence item of the enclosing sequence
                    raise _Decline
                content = at[1]
            found = _key(content)
            if found is None:
                raise _Decline
            key = scalar(found[0])
            if key in out or isinstance(key, (float, type(None))):
                raise _Decline  # a repeated key: PyYAML keeps the last; left to it
            rest = content[found[1]:]
            self.i += 1
            out[key] = self._value(indent, rest, depth, in_mapping=True)

    def _sequence(self, indent: int, depth: int) -> list[Any]:
        out: list[Any] = []
        self._count()
        while True:
            at = self._peek()
            if at is None or at[0] < indent:
                return out
            if at[0] > indent or not (at[1] == "-" or at[1].startswith("- ")):
                if at[0] == indent and _key(at[1]) is not None:
                    return out  # the next key of a mapping whose value this sequence was
                raise _Decline
            rest = at[1][2:]
            inner = rest.lstrip(" ")
            item_indent = indent + 2 + len(rest) - len(inner)
            if inner and not inner.startswith("#") and _key(inner) is not None:
                out.append(self._mapping(item_indent, depth + 1, first=inner))
            elif inner.startswith(("- ", "-#")) or inner == "-":
                raise _Decline  # a sequence inside a sequence on one line
            else:
                self.i += 1
                out.append(self._value(indent, inner, depth, in_mapping=False))

    def _value(self, indent: int, rest: str, depth: int, in_mapping: bool) -> Any:
        """The value after `key:` or `- ` (`rest`: the line's remaining text) of an entry at
        `indent`: inline, a nested block below it, or null."""
        text = rest.lstrip(" ")
        if not text or text.startswith("#"):
            at = self._peek()
            if at is not None and (at[0] > indent or (
                    in_mapping and at[0] == indent and (at[1] == "-"
                                                        or at[1].startswith("- ")))):
                return self._block(at[0], at[1], depth + 1)
            self._count()
            return None
        self._count()
        first = text[0]
        if first in "[{":
            value = self._flow(text, indent, depth)
        elif first in "'\"":
            value = self._quoted(text, indent)
        elif first in ">|":
            value = self._block_scalar(text, indent)
        elif first in "&*!%@`?:,]}#" or (first == "-" and text[1:2] in ("", " ")):
            raise _Decline
        else:
            value = scalar(self._plain_lines(text, indent))
        return value

    def _continuation(self, indent: int) -> str | None:
        """The next raw line's text when it continues a scalar or flow collection of an
        entry at `indent` (more indented, not blank); None when the value has ended. A
        blank line followed by more of the value (a kept newline) is left to PyYAML."""
        if self.i >= len(self.raw):
            return None
        line = self.raw[self.i]
        body = line.strip(" ")
        if not body:
            if self._next_indent() > indent:
                raise _Decline
            return None
        if len(line) - len(line.lstrip(" ")) <= indent:
            return None
        self.i += 1
        return body

    def _plain_lines(self, text: str, indent: int) -> str:
        """A plain scalar: this line's text and the more-indented lines that continue it,
        folded with single spaces."""
        parts = [_plain(text)]
        while (more := self._continuation(indent)) is not None:
            if more.startswith("#") or " #" in parts[-1] or " #" in text:
                raise _Decline  # a comment inside or before the rest: left to PyYAML
            text = more
            parts.append(_plain(more))
        return " ".join(parts)

    def _flow(self, text: str, indent: int, depth: int) -> Any:
        """A flow collection, over as many lines as it takes (a line break inside one is a
        space)."""
        nodes = self.nodes
        for _ in range(_MAX_FLOW_LINES):
            self.nodes = nodes
            try:
                value, end = _Flow(text, depth + 1, self).parse()
            except IndexError:  # not closed on this line
                more = self._continuation(indent)
                if more is None:
                    raise _Decline from None
                text += " " + more
                continue
            _end_of_line(text[end:])
            return value
        raise _Decline  # each line parses the collection again: a long one is PyYAML's

    def _quoted(self, text: str, indent: int) -> str:
        """A quoted scalar starting `text` (the current line's rest), folded over the
        following lines when it does not close on this one."""
        quote = text[0]
        parts: list[str] = []
        body = text[1:]
        while True:
            value, end = _close_quote(body, quote)
            if end is not None:
                parts.append(value)
                _end_of_line(body[end:])
                break
            parts.append(value.rstrip(" "))
            if not parts[-1] or self.i >= len(self.raw):
                raise _Decline
            line = self.raw[self.i]
            self.i += 1
            body = line.lstrip(" ")
            if not body or len(line) - len(body) <= indent:
                raise _Decline  # a blank line (a newline) or a dedent: left to PyYAML
        return " ".join(parts)

    def _block_scalar(self, header: str, indent: int) -> str:
        """`>`, `>-`, `|` or `|-` and the lines below it, all at one indent. A blank line
        inside the block (a kept newline) is left to PyYAML; blank lines after it do not
        change these four (clip keeps one newline, strip none)."""
        if header not in (">", ">-", "|", "|-"):
            raise _Decline
        lines: list[str] = []
        inner = -1
        while self.i < len(self.raw):
            line = self.raw[self.i]
            body = line.lstrip(" ")
            at = len(line) - len(body)
            if not body or at <= indent:
                break
            if inner < 0:
                inner = at
            if at != inner or body.endswith(" "):
                raise _Decline  # more-indented lines, trailing spaces
            lines.append(body)
            self.i += 1
        if not lines or self.i == len(self.raw):
            raise _Decline  # no line break after the block: PyYAML's chomping reads that
        if self._next_indent() > indent:
            raise _Decline  # the block goes on after a blank line
        joined = (" " if header[0] == ">" else "\n").join(lines)
        return joined if header.endswith("-") else joined + "\n"


class _Flow:
    """A flow collection on one line: `[a, 'b', {k: v}]`."""

    def __init__(self, text: str, depth: int, parser: _Parser) -> None:
        self.text = text
        self.depth = depth
        self.parser = parser

    def parse(self) -> tuple[Any, int]:
        return self._node(0, self.depth)

    def _skip(self, at: int) -> int:
        while at < len(self.text) and self.text[at] == " ":
            at += 1
        return at

    def _node(self, at: int, depth: int) -> tuple[Any, int]:
        if depth > _MAX_DEPTH:
            raise _Decline
        self.parser._count()
        at = self._skip(at)
        char = self.text[at]
        if char == "[":
            return self._collection(at + 1, depth, "]")
        if char == "{":
            return self._collection(at + 1, depth, "}")
        if char in "'\"":
            value, end = _close_quote(self.text[at + 1:], char)
            if end is None:
                raise _Decline
            return value, at + 1 + end
        if char in "&*!%@`?:,]}#|>" or (char == "-" and self.text[at + 1:at + 2] in ("", " ")):
            raise _Decline
        end = at
        while end < len(self.text):
            c = self.text[end]
            if c in ",[]{}" or (c == ":" and self.text[end + 1:end + 2] in (" ", ",", "}", "]",
                                                                          "")):
                break
            if c == "#" and self.text[end - 1] == " ":
                raise _Decline
            end += 1
        return scalar(self.text[at:end].rstrip(" ")), end

    def _collection(self, at: int, depth: int, close: str) -> tuple[Any, int]:
        items: list[Any] = []
        mapping: dict[Any, Any] = {}
        at = self._skip(at)
        if self.text[at] == close:
            return (mapping if close == "}" else items), at + 1
        while True:
            value, at = self._node(at, depth + 1)
            at = self._skip(at)
            if close == "}":
                if self.text[at] != ":" or isinstance(value, (dict, list)):
                    raise _Decline  # a key without a value, a complex key
                if value in mapping or isinstance(value, (float, type(None))):
                    raise _Decline
                item, at = self._node(at + 1, depth + 1)
                mapping[value] = item
                at = self._skip(at)
            else:
                if self.text[at] == ":":
                    raise _Decline  # a single-pair mapping inside a sequence
                items.append(value)
            if self.text[at] == close:
                return (mapping if close == "}" else items), at + 1
            if self.text[at] != ",":
                raise _Decline
            at = self._skip(at + 1)
            if self.text[at] == close:
                raise _Decline  # a trailing comma: PyYAML's call


def _plain(text: str) -> str:
    """A block plain scalar's text: up to a comment, without trailing spaces."""
    cut = text.find(" #")
    value = (text if cut < 0 else text[:cut]).rstrip(" ")
    if ": " in value or value.endswith(":") or " #" in value:
        raise _Decline
    return value


def _close_quote(body: str, quote: str) -> tuple[str, int | None]:
    """(the scalar's text, the index after its closing quote) of a quoted scalar whose
    opening quote came before `body`; (the text so far, None) when the line ends first."""
    if quote == "'":
        out = []
        at = 0
        while True:
            end = body.find("'", at)
            if end < 0:
                out.append(body[at:])
                return "".join(out), None
            out.append(body[at:end])
            if body[end + 1:end + 2] == "'":
                out.append("'")
                at = end + 2
                continue
            return "".join(out), end + 1
    end = body.find('"')
    if "\\" in (body if end < 0 else body[:end]):
        raise _Decline  # escapes: left to PyYAML
    return (body, None) if end < 0 else (body[:end], end + 1)


def _end_of_line(rest: str) -> None:
    stripped = rest.lstrip(" ")
    if stripped and not (stripped.startswith("#") and len(stripped) < len(rest)):
        raise _Decline
