"""Request mixes: `64x(2k+512),8x(32k+1k)` or a .jsonl/.csv file of prompt/output lengths.

A workload is reduced once, as it is read, to its distinct request shapes - a histogram
(prompt, output, samples) -> count - so that everything after (each layout `plan --find-gpus`
tries, each KV dtype a suggestion tries) costs as many steps as there are distinct shapes,
not requests. A file of 100,000 requests drawn from 72 shapes is 72 groups; a file of random
lengths is at most one group per distinct length pair. Identical lines are parsed once.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import field
from functools import cached_property
from itertools import chain, repeat
from operator import add, itemgetter, mul
from pathlib import Path
from typing import Any

from kvplan.core.errors import BadInputError
from kvplan.core.record import record


@record
class RequestGroup:
    count: int
    prompt_tokens: int
    output_tokens: int
    n: int = 1  # parallel samples sharing the prompt

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


@record
class Workload:
    """A request mix as a histogram: ((prompt, output, samples), count) per distinct shape."""

    shapes: tuple[tuple[tuple[int, int, int], int], ...]
    shared_prefix_tokens: int = 0
    source: str = ""
    # sums over the sequences already asked for, by the caller's key (see sum_over_sequences)
    _sums: dict[Hashable, int] = field(default_factory=dict, init=False, repr=False,
                                       compare=False, hash=False)

    @classmethod
    def of(cls, groups: Iterable[RequestGroup], shared_prefix_tokens: int = 0,
           source: str = "") -> Workload:
        """From groups (the same shape twice is one shape with the counts added)."""
        hist: dict[tuple[int, int, int], int] = {}
        for g in groups:
            key = (g.prompt_tokens, g.output_tokens, g.n)
            hist[key] = hist.get(key, 0) + g.count
        return cls(tuple(hist.items()), shared_prefix_tokens, source)

    @cached_property
    def groups(self) -> tuple[RequestGroup, ...]:
        return tuple(RequestGroup(c, p, o, n) for (p, o, n), c in self.shapes)

    @cached_property
    def _columns(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...],
                                tuple[int, ...]]:
        """prompts, outputs, samples, counts: one column per field, so that the figures
        below are C loops (map, Counter) over the shapes, not Python per shape."""
        keys = tuple(map(itemgetter(0), self.shapes))
        return (tuple(map(itemgetter(0), keys)), tuple(map(itemgetter(1), keys)),
                tuple(map(itemgetter(2), keys)), tuple(map(itemgetter(1), self.shapes)))

    @cached_property
    def num_requests(self) -> int:
        return sum(self._columns[3])

    @cached_property
    def num_sequences(self) -> int:
        _, _, samples, counts = self._columns
        return sum(map(mul, counts, samples))

    @cached_property
    def longest(self) -> int:
        prompts, outputs, _, _ = self._columns
        return max(map(add, prompts, outputs))

    @cached_property
    def sequences_by_tokens(self) -> tuple[tuple[int, int], ...]:
        """(length in tokens, sequences of that length): every sample is a sequence."""
        prompts, outputs, samples, counts = self._columns
        weights = list(map(mul, counts, samples))  # sequences of each shape
        if len(weights) > 256 and sum(weights) <= 4 * len(weights):
            # many shapes of few sequences each (e.g. random lengths): each sequence's length
            # once, counted in C
            lengths = map(add, prompts, outputs)
            return tuple(Counter(chain.from_iterable(map(repeat, lengths, weights))).items())
        hist: dict[int, int] = {}
        for (p, o, n), c in self.shapes:
            hist[p + o] = hist.get(p + o, 0) + c * n
        return tuple(hist.items())

    @cached_property
    def extra_samples_by_prompt(self) -> tuple[tuple[int, int], ...]:
        """(prompt tokens, samples beyond the first): the sequences that can share their
        request's prompt. Empty when every request has one sample."""
        if not self.shapes or max(self._columns[2]) == 1:
            return ()
        hist: dict[int, int] = {}
        for (p, _, n), c in self.shapes:
            if n > 1:
                hist[p] = hist.get(p, 0) + c * (n - 1)
        return tuple(hist.items())

    def sum_over_sequences(self, key: Hashable, per_sequence: Callable[[int], int]) -> int:
        """sum over sequences of per_sequence(length), computed once per `key` (a caller's
        hashable description of `per_sequence`, e.g. a frozen Need)."""
        total = self._sums.get(key)
        if total is None:
            total = sum(c * per_sequence(t) for t, c in self.sequences_by_tokens)
            self._sums[key] = total
        return total


_MIX_RE = re.compile(r"^\s*(\d+)\s*[x*]\s*\(\s*([\w.,]+)\s*\+\s*([\w.,]+)\s*\)\s*$", re.I)
_ONE_RE = re.compile(r"^\s*\(?\s*([\w.,]+)\s*\+\s*([\w.,]+)\s*\)?\s*$")


def parse_workload(text: str, shared_prefix: int = 0, n: int = 1) -> Workload:
    """'64x(2k+512)', '64x(2k+512),8x(32k+1k)', '(4k+256)', or a .jsonl/.csv file of
    prompt/output lengths (one request per line)."""
    from kvplan.core.units import check_digits, parse_tokens

    path = Path(text)
    if text.endswith((".jsonl", ".csv", ".json")) or _is_file(path):
        return _read_workload_file(path, shared_prefix, n)
    parts = _split_mix(text)
    if not any(p.strip() for p in parts):
        raise BadInputError("the request mix is empty",
                            "write COUNTx(PROMPT+OUTPUT), e.g. 64x(2k+512),8x(32k+1k), "
                            "or give a .jsonl/.csv file")
    if not all(p.strip() for p in parts):  # refused as --lengths refuses one (not dropped)
        raise BadInputError(f"the request mix {text!r} has an empty item",
                            "remove the extra comma: 64x(2k+512),8x(32k+1k)")
    groups: dict[tuple[int, int, int], int] = {}
    for part in parts:
        m = _MIX_RE.match(part) or _ONE_RE.match(part)
        if not m:
            raise BadInputError(f"cannot read the request mix {part!r}",
                                "write COUNTx(PROMPT+OUTPUT), e.g. 64x(2k+512),8x(32k+1k), "
                                "or give a .jsonl/.csv file")
        if len(m.groups()) == 3:
            check_digits(m.group(1), "the request count in", part.strip())
        count = int(m.group(1)) if len(m.groups()) == 3 else 1
        prompt, output = m.groups()[-2:]
        if count <= 0:
            raise BadInputError(f"the request count in {part!r} must be positive")
        key = (parse_tokens(prompt, "prompt tokens"), _tokens_or_zero(output), n)
        groups[key] = groups.get(key, 0) + count
    return _workload(groups, shared_prefix, text)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a long mix is not a file name (ENAMETOOLONG)
        return False


def _split_mix(text: str) -> list[str]:
    """Split on commas outside parentheses (8,192 inside a group stays one number)."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def _tokens_or_zero(text: str) -> int:
    from kvplan.core.units import parse_tokens

    return 0 if text.strip() == "0" else parse_tokens(text, "output tokens")


PROMPT_KEYS = ("prompt_tokens", "prompt", "input_tokens", "input", "prompt_len", "input_len")
OUTPUT_KEYS = ("output_tokens", "output", "max_tokens", "completion_tokens", "output_len")


def _read_workload_file(path: Path, shared_prefix: int, n: int) -> Workload:
    from kvplan.sources.reader import MAX_WORKLOAD_BYTES, read_text

    try:
        text = read_text(str(path), "the workload file", MAX_WORKLOAD_BYTES)
    except BadInputError as exc:
        raise BadInputError(exc.message, "give COUNTx(PROMPT+OUTPUT) or an existing "
                            ".jsonl/.csv file") from None
    import csv

    from kvplan.core.units import MAX_BATCH, MAX_TOKENS

    groups = _plain_numbers(text, path.suffix == ".csv", n)
    if groups is None:  # not the plain shape: every line parsed, each error named
        try:
            rows = _CsvRows(text) if path.suffix == ".csv" else _JsonlRows(text, path)
        except csv.Error as exc:  # e.g. a field over csv's 128 KiB limit
            raise BadInputError(f"{path}: not a usable CSV file ({exc})") from None
        groups = _columns(rows, n)
        if groups is None:
            groups = _row_by_row(rows, n, path)
    if not groups:
        raise BadInputError(f"{path} holds no requests")
    beyond = (max(map(add, map(itemgetter(0), groups), map(itemgetter(1), groups)))
              > MAX_TOKENS or max(map(itemgetter(2), groups)) > MAX_BATCH)
    for prompt, output, samples in groups if beyond else ():  # which one, for the message
        if prompt + output > MAX_TOKENS or samples > MAX_BATCH:
            raise BadInputError(f"{path}: a request of {prompt:,} + {output:,} tokens x "
                                f"{samples:,} samples is beyond any deployment (at most "
                                f"{MAX_TOKENS:,} tokens, {MAX_BATCH:,} samples)")
    return _workload(groups, shared_prefix, str(path))


# The plain file, almost every workload file: each line the same object of whole numbers
# (JSONL: `{"prompt_tokens": 812, "output_tokens": 96}`; CSV: a header of names, then
# digits and commas). Its shape is checked without a string per line: with every digit 1-9
# written as 1 (bytes.translate), a file of random lengths has a few dozen distinct lines,
# and each is matched once against the line's pattern (which tells digits apart only as 0
# or not, so the mapped line matches exactly when the line does). The numbers then come out
# of one translate + split: C loops over the text, no Python per request. A file of any
# other shape, or with any value not accepted here (a 0 prompt, 0 samples, a number of over
# 18 digits), is read line by line as before, so every message still names file and line.
_WS = "[ \t]*"
_JSON_NUMBER = "(?:0|[1-9][0-9]{0,17})"  # JSON's integer syntax, at most 18 digits
_CSV_NUMBER = "[0-9]{1,18}"  # what _digits accepts, at most 18 digits
_PLAIN_KEY = re.compile(r"[A-Za-z_]+")  # no digits: every digit in a line is a value
_CSV_HEADER = re.compile(r"([A-Za-z_][A-Za-z_0-9]*(?:,[A-Za-z_][A-Za-z_0-9]*)*)\r?")
_DIGITS_AS_01 = bytes(49 if 49 <= c <= 57 else c for c in range(256))
_NOT_DIGIT = bytes(c if 48 <= c <= 57 else 32 for c in range(256))
_MAX_LINE_SHAPES = 2000  # more distinct shapes than this: not a plain file


class _Pairs(list[tuple[str, Any]]):
    """A JSON object's (key, value) pairs in order, duplicates kept."""


def _plain_numbers(text: str, csv_file: bool, n: int) -> dict[tuple[int, int, int], int] | None:
    """The histogram of a plain file (see above), or None when the file is not plain - or
    when its first lines repeat (a file of few shapes: counting its lines as strings and
    parsing each distinct one is cheaper still)."""
    sample = text.split("\n", 2048)[:2048]
    if len(set(sample)) * 2 < len(sample):
        return None
    if csv_file:
        first, _, body = text.partition("\n")
        head = _CSV_HEADER.fullmatch(first)
        if head is None:
            return None
        keys = head.group(1).split(",")
        line = ",".join([_CSV_NUMBER] * len(keys))
        line = f"(?:{line})?\r?"  # csv skips blank lines
    else:
        import json

        body = text
        first = next((line for line in text.split("\n", 64) if line.strip()), "")
        try:
            pairs = json.loads(first, object_pairs_hook=_Pairs)
        except (ValueError, RecursionError):
            return None
        if type(pairs) is not _Pairs or not pairs or any(
                type(v) is not int or not _PLAIN_KEY.fullmatch(k) for k, v in pairs):
            return None
        keys = [k for k, _ in pairs]
        obj = f",{_WS}".join(f'"{k}"{_WS}:{_WS}{_JSON_NUMBER}{_WS}' for k in keys)
        line = f"{_WS}(?:\\{{{_WS}{obj}\\}}{_WS})?\r?"  # blank lines are skipped
    if len(set(keys)) != len(keys):
        return None
    pk, ok, nk = (_first_key(tuple(keys), PROMPT_KEYS), _first_key(tuple(keys), OUTPUT_KEYS),
                  _first_key(tuple(keys), ("n",)))
    if pk is None or ok is None:
        return None
    data = body.encode()
    shapes = set(data.translate(_DIGITS_AS_01).split(b"\n"))
    if len(shapes) > _MAX_LINE_SHAPES:
        return None
    pattern = re.compile(line.encode())
    if not all(map(pattern.fullmatch, shapes)):
        return None
    from kvplan.core.units import MAX_DIGITS

    fields = data.translate(_NOT_DIGIT).split()
    if any(len(f) > MAX_DIGITS for f in fields):
        return None  # the line-by-line reader names the number
    numbers = list(map(int, fields))
    width = len(keys)
    prompts, outputs = numbers[keys.index(pk)::width], numbers[keys.index(ok)::width]
    if not prompts or min(prompts) <= 0:
        return None
    if nk is None:
        return dict(Counter(zip(prompts, outputs, repeat(n))))
    samples = numbers[keys.index(nk)::width]
    if min(samples) <= 0:
        return None
    return dict(Counter(zip(prompts, outputs, samples, strict=True)))


def _columns(rows: _Lines, n: int) -> dict[tuple[int, int, int], int] | None:
    """The usual file read a column at a time (C loops, no Python per row): every row has
    the same keys and plain whole numbers in range. None when not: read row by row."""
    if not rows.rows:
        return {}
    keysets = set(map(tuple, rows.rows))
    if len(keysets) != 1:
        return None
    keys = keysets.pop()
    pk, ok, nk = (_first_key(keys, PROMPT_KEYS), _first_key(keys, OUTPUT_KEYS),
                  _first_key(keys, ("n",)))
    if pk is None or ok is None:
        return None
    columns = [list(map(itemgetter(k), rows.rows)) for k in (pk, ok, nk) if k is not None]
    if rows.text_values:
        columns = [list(map(_digits, col)) for col in columns]
    if any(set(map(type, col)) != {int} for col in columns):
        return None
    if min(columns[0]) <= 0 or min(columns[1]) < 0 or (nk is not None and min(columns[2]) <= 0):
        return None
    shapes = zip(columns[0], columns[1], columns[2] if nk is not None else repeat(n),
                 strict=False)
    if max(rows.counts) == 1:
        return dict(Counter(shapes))
    groups: dict[tuple[int, int, int], int] = {}
    for key, count in zip(shapes, rows.counts, strict=False):
        groups[key] = groups.get(key, 0) + count
    return groups


def _row_by_row(rows: _Lines, n: int, path: Path) -> dict[tuple[int, int, int], int]:
    groups: dict[tuple[int, int, int], int] = {}
    # which of the accepted names each distinct set of keys uses (files use one naming)
    plans: dict[tuple[Any, ...], tuple[str | None, str | None, str | None]] = {}
    for i, row in enumerate(rows.rows):
        keys = tuple(row)
        plan = plans.get(keys)
        if plan is None:
            plan = plans[keys] = (_first_key(keys, PROMPT_KEYS), _first_key(keys, OUTPUT_KEYS),
                                  _first_key(keys, ("n",)))
        pk, ok, nk = plan
        # the common case, plain whole numbers under the file's usual names, read inline;
        # anything else (strings, floats, nulls, other names, errors) by _field
        prompt = row[pk] if pk is not None else None
        output = row[ok] if ok is not None else None
        samples = row[nk] if nk is not None else n
        if rows.text_values:  # CSV: every value is text
            prompt, output, samples = _digits(prompt), _digits(output), _digits(samples)
        if type(prompt) is not int or type(output) is not int or type(samples) is not int \
                or prompt <= 0 or output < 0 or samples <= 0:
            line_no = rows.line_of(i)
            prompt = _field(row, PROMPT_KEYS, path, line_no, "prompt")
            output = _field(row, OUTPUT_KEYS, path, line_no, "output")
            samples = _field(row, ("n",), path, line_no, "n", default=n)
            if prompt <= 0 or output < 0 or samples <= 0:
                raise BadInputError(f"{path} line {line_no}: lengths must be positive "
                                    f"(prompt {prompt}, output {output}, n {samples})")
        key = (prompt, output, samples)
        groups[key] = groups.get(key, 0) + rows.counts[i]
    return groups


def _digits(value: Any) -> Any:
    """'123' -> 123; anything else as it is (for _field to accept or name)."""
    from kvplan.core.units import MAX_DIGITS

    return (int(value) if type(value) is str and value.isascii() and value.isdigit()
            and len(value) <= MAX_DIGITS else value)


def _first_key(keys: tuple[Any, ...], names: Sequence[str]) -> str | None:
    return next((name for name in names if name in keys), None)


# A line whose only braces are one '{' then one '}', with no brackets, is at most one flat
# JSON object: such lines can be parsed together as one JSON array (one C call instead of
# one per line) with no risk of one line's text running into the next.
_FLAT_LINE = re.compile(r"[^{}\[\]]*\{[^{}\[\]]*\}[^{}\[\]]*")


class _Lines:
    """A file's distinct lines, each read once: `rows[i]` was found on `counts[i]` lines,
    first on line `line_of(i)`."""

    rows: list[dict[str, Any]]
    counts: list[int]
    text_values = False

    def __init__(self, lines: list[str], distinct: list[str], offset: int = 0) -> None:
        self._lines, self._distinct, self._offset = lines, distinct, offset
        self._first: dict[str, int] | None = None

    def line_of(self, i: int) -> int:
        if self._first is None:  # only for a message: no cost while all is well
            self._first = {}
            for no, line in enumerate(self._lines, start=1 + self._offset):
                self._first.setdefault(line, no)
        return self._first[self._distinct[i]]


class _JsonlRows(_Lines):
    def __init__(self, text: str, path: Path) -> None:
        import json

        lines = text.splitlines()
        counts = Counter(lines)  # identical lines are one row, counted
        distinct = [line for line in counts if line.strip()]
        super().__init__(lines, distinct)
        self.counts = list(map(counts.__getitem__, distinct))
        parsed: Any = None
        if all(map(_FLAT_LINE.fullmatch, distinct)):
            try:
                parsed = json.loads("[" + ",\n".join(distinct) + "]")
            except (json.JSONDecodeError, RecursionError):
                parsed = None  # some line is not JSON: line by line says which
        if parsed is None or len(parsed) != len(distinct) or \
                (parsed and set(map(type, parsed)) != {dict}):
            parsed = [self._one(i, path) for i in range(len(distinct))]
        self.rows = parsed

    def _one(self, i: int, path: Path) -> dict[str, Any]:
        import json

        try:
            obj = json.loads(self._distinct[i])
        except (json.JSONDecodeError, RecursionError) as exc:
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise BadInputError(f"{path} line {self.line_of(i)}: not valid JSON ({why})"
                                ) from None
        if not isinstance(obj, dict):
            raise BadInputError(f"{path} line {self.line_of(i)}: expected an object with "
                                "prompt and output lengths")
        return obj


class _CsvRows(_Lines):
    text_values = True

    def __init__(self, text: str) -> None:
        import csv

        lines = text.splitlines()
        if '"' in text or not lines:
            # quoted fields may span lines: every record on its own (numbered from line 2)
            records = [dict(row) for row in csv.DictReader(lines)]
            super().__init__([str(i) for i in range(len(records))],
                             [str(i) for i in range(len(records))], offset=1)
            self.rows, self.counts = records, [1] * len(records)
            return
        header = next(csv.reader(lines[:1]))
        counts = Counter(lines[1:])
        distinct = [line for line in counts if line]  # csv skips blank lines too
        super().__init__(lines[1:], distinct, offset=1)
        self.counts = list(map(counts.__getitem__, distinct))
        self.rows = []
        for fields in csv.reader(distinct):
            row: dict[Any, Any] = dict(zip(header, fields, strict=False))
            if len(fields) > len(header):
                row[None] = fields[len(header):]  # as csv.DictReader keeps extra fields
            self.rows.append(row)


def _field(row: dict[str, Any], keys: Sequence[str], path: Path, line: int, what: str,
           default: int | None = None) -> int:
    from kvplan.core.units import MAX_DIGITS, MAX_TOKENS

    for key in keys:
        if key in row and row[key] not in (None, ""):
            value = row[key]
            try:
                if isinstance(value, bool):
                    raise ValueError
                if isinstance(value, str):
                    value = value.strip()
                    if not (value.isascii() and value.isdigit()) or len(value) > MAX_DIGITS:
                        raise ValueError
                elif isinstance(value, float) and not value.is_integer():
                    raise ValueError
                number = int(value)
            except (TypeError, ValueError, OverflowError):
                shown = repr(row[key]) if len(repr(row[key])) <= 40 else repr(row[key])[:37] + "..."
                raise BadInputError(f"{path} line {line}: {key} must be a whole number of "
                                    f"tokens, got {shown}") from None
            if number > MAX_TOKENS:
                raise BadInputError(f"{path} line {line}: {key} is {number:,}, more than the "
                                    f"{MAX_TOKENS:,} tokens kvplan accepts")
            return number
    if default is not None:
        return default
    raise BadInputError(f"{path} line {line}: no {what} length",
                        f"name it one of: {', '.join(keys)}")


def _workload(groups: dict[tuple[int, int, int], int], shared_prefix: int,
              source: str) -> Workload:
    if shared_prefix < 0:
        raise BadInputError("--shared-prefix cannot be negative")
    shortest = min(map(itemgetter(0), groups))
    if shared_prefix > shortest:
        raise BadInputError(f"--shared-prefix {shared_prefix:,} is longer than the shortest "
                            f"prompt ({shortest:,} tokens)")
    return Workload(tuple(groups.items()), shared_prefix, source)
