"""Parsing of token counts and byte sizes typed by people, and the one byte formatter
(`human_bytes`: the renderer's, and the error messages' that state sizes); every other
human string is made in kvplan.output.

`k` and `m` on token counts are binary (8k = 8,192 tokens, 128k = 131,072), the way context
lengths are quoted; byte sizes must name their unit (GiB = 2**30, GB = 10**9), never a bare
number of "G".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.core.errors import BadInputError
from kvplan.core.patterns import lazy

if TYPE_CHECKING:
    from fractions import Fraction

GIB = 2**30
MIB = 2**20
GB = 10**9

# Upper bounds on what people type: far above any real deployment, low enough that nothing
# sized from them can exhaust memory (a list per request) or overflow an index.
MAX_TOKENS = 2**40  # tokens in one request or one pool
MAX_BATCH = 2**24  # requests sized at once
MAX_BYTES = 2**60  # one size (an exbibyte)
# Digits in one number typed by a person, checked before it is converted: int() of a
# 5,000-digit string raises (Python's 4,300-digit limit) and Fraction("1e-99999999") would
# build a 100-million-digit power of ten. 2^60 has 19 digits; 24 leave room for decimals.
MAX_DIGITS = 24
MAX_EXPONENT = 24  # |e| in 1.5e9, 1e-6

_TOKEN_SUFFIX = {"": 1, "k": 2**10, "m": 2**20}
_TOKEN_RE = lazy(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")

_IEC = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))
_SI = ((10**12, "TB"), (10**9, "GB"), (10**6, "MB"), (10**3, "KB"))


def human_bytes(n: int, units: str = "iec") -> str:
    """1073741824 -> '1.000 GiB' (iec) or '1.074 GB' (si). Exact below 1 KiB/KB."""
    scale = _IEC if units == "iec" else _SI
    sign = "-" if n < 0 else ""
    value = abs(n)
    for factor, label in scale:
        if value >= factor:
            return f"{sign}{value / factor:,.3f} {label}"
    return f"{sign}{value:,} B"


_BYTE_UNITS = {
    "b": 1,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
}
_BYTES_RE = lazy(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def check_digits(number: str, what: str, text: object = None) -> None:
    """Refuse a number with more than MAX_DIGITS digits before anything converts it."""
    digits = sum(c.isdigit() for c in number)
    if digits > MAX_DIGITS:
        shown = str(number if text is None else text)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise BadInputError(f"{what} {shown!r} has {digits:,} digits, more than any value "
                            f"kvplan reads ({MAX_DIGITS})", "check the number")


def whole_digits(text: str, what: str) -> int | None:
    """A run of ASCII digits as an int, its length checked first (check_digits); None for
    anything else. str.isdigit() alone also takes '²' and other digits int() refuses."""
    if not (text.isascii() and text.isdigit()):
        return None
    check_digits(text, what)
    return int(text)


def parse_decimal(text: str, what: str) -> Fraction:
    """'0.8', '80%', '1.5e9', '3/4' -> an exact Fraction, its digits and exponent bounded
    (MAX_DIGITS, MAX_EXPONENT) before it is built; BadInputError naming `what` otherwise."""
    from fractions import Fraction

    raw = text.strip()
    percent = raw.endswith("%")
    body = raw[:-1].strip() if percent else raw
    match = _DECIMAL_RE.fullmatch(body.replace("_", "").replace(",", ""))
    if not match:
        raise BadInputError(f"{what} must be a number such as 0.8 or 80%, got {text[:40]!r}")
    check_digits(body, what, text)
    exponent = match.group("exp")
    if exponent is not None and abs(int(exponent)) > MAX_EXPONENT:
        raise BadInputError(f"{what} {text[:40]!r} has the exponent {exponent}, beyond "
                            f"+-{MAX_EXPONENT}", "check the number")
    try:
        value = Fraction(match.group(0))
    except (ValueError, ZeroDivisionError):
        raise BadInputError(f"{what} must be a number such as 0.8 or 80%, got "
                            f"{text[:40]!r}") from None
    return value / 100 if percent else value


_DECIMAL_RE = lazy(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE](?P<exp>[+-]?\d{1,9}))?"
                         r"|[+-]?\d+/\d+")


def parse_tokens(text: str | int, what: str = "tokens") -> int:
    """'8192', '8,192', '8k' (8,192), '128k' (131,072), '1m' (1,048,576) -> a positive int."""
    if isinstance(text, int):
        value = text
    else:
        check_digits(text, what)
        cleaned = text.replace(",", "").replace("_", "")
        match = _TOKEN_RE.match(cleaned)
        if not match:
            raise BadInputError(
                f"cannot read {what} {text!r}",
                "write a whole number such as 8192, or use k = 1,024 / m = 1,048,576 (8k, 128k)",
            )
        number, suffix = match.groups()
        scaled = _exact_scale(number, _TOKEN_SUFFIX[suffix.lower()])
        if scaled is None:
            raise BadInputError(f"{what} {text!r} is not a whole number of tokens")
        value = scaled
    if value <= 0:
        raise BadInputError(f"{what} must be positive, got {value}")
    if value > MAX_TOKENS:
        raise BadInputError(f"{what} {text!r} is more than the {MAX_TOKENS:,} tokens kvplan "
                            "accepts")
    return value


def byte_count(value: int, what: str = "") -> int:
    """A size given as a whole number of bytes, checked as a size written with a unit is
    (`parse_bytes`): positive, at most an exbibyte. `what` names the flag or field."""
    where = f"{what} " if what else ""
    if value <= 0:
        raise BadInputError(f"{where}must be positive, got {value:,}")
    if value > MAX_BYTES:
        raise BadInputError(f"{where}is {value:,} bytes, more than an exbibyte (2^60 bytes)")
    return value


def parse_bytes(text: str, what: str = "") -> int:
    """'24GiB' -> 25,769,803,776; '80GB' -> 80,000,000,000. A unit is required. `what` names
    the flag or field in the message (like parse_tokens)."""
    where = f"{what}: " if what else ""
    check_digits(text, what or "the size")
    match = _BYTES_RE.match(text.replace(",", "").replace("_", ""))
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _BYTE_UNITS:
        raise BadInputError(
            f"{where}cannot read the size {text!r}",
            "give a number and a unit: B, KiB, MiB, GiB, TiB (powers of 2) or KB, MB, GB, TB "
            "(powers of 10), e.g. 24GiB",
        )
    # A decimal size such as the 57.65 GiB an engine logged is floored to a whole byte.
    whole, _, frac = match.group(1).partition(".")
    scaled = int(whole + frac) * _BYTE_UNITS[unit] // 10 ** len(frac)
    if scaled <= 0:
        raise BadInputError(f"{where}the size {text!r} must be positive")
    if scaled > MAX_BYTES:
        raise BadInputError(f"{where}the size {text!r} is more than an exbibyte (2^60 bytes)")
    return scaled


def _exact_scale(number: str, factor: int) -> int | None:
    """number * factor as an int, or None when that is not a whole number (no float rounding)."""
    whole, _, frac = number.partition(".")
    numerator = int(whole + frac) * factor
    denominator = 10 ** len(frac)
    if numerator % denominator:
        return None
    return numerator // denominator


def parse_int_list(text: str, what: str) -> list[int]:
    """'2048,4096,8k' -> [2048, 4096, 8192] (a batch of requests of different lengths)."""
    parts = text.split(",")
    if not text.strip():
        raise BadInputError(f"{what} is empty")
    if any(not p.strip() for p in parts):
        raise BadInputError(f"{what} {text!r} has an empty item",
                            "separate lengths with single commas: 2k,4k,8k")
    if len(parts) > MAX_BATCH:
        raise BadInputError(f"{what} lists more than {MAX_BATCH:,} lengths")
    return [parse_tokens(p, what) for p in parts]
