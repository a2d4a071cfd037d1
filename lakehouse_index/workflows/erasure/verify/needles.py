"""The values a residue scan looks for, in every form a file can hold them, and the matchers.

The matching policy is described in :mod:`lakehouse_index.workflows.erasure.verify.residue`; this
module implements it. Each value becomes:

* a **typed key** (``("num", 12)``, ``("str", "a")``, ``("date", d)``, ``("ts", micros)`` …)
  that decoded values are compared with by equality. Numbers compare by numeric value across
  int, float and Decimal (``12 == 12.0 == Decimal("12.00")``); booleans only with booleans;
  naive and aware datetimes by their UTC wall clock in microseconds;
* **words**: its text forms (the string itself and its JSON- and SQL-escaped spellings, ISO
  dates and times, UUID text, hex of bytes) found in free text at token boundaries (the
  characters around it are not letters or digits);
* **numerals**: the text forms of a number, found in free text as whole numeric tokens: not
  next to a ``.`` that continues the number (``12`` is not in ``3.12`` nor ``12.5``), nor
  joined to a letter or digit by ``-`` or ``_`` (not in ``subject-12``, ``2024-01-12``);
* **raw forms**: the UTF-8 bytes of the words, found in raw bytes at ASCII token boundaries,
  and a bytes value itself (4 bytes or more) anywhere. Numbers are never searched in raw
  bytes (their binary forms are too short to mean anything there);
* **Iceberg bound forms**: its Iceberg single-value binary serializations (little-endian
  int/long/float/double, days, microseconds, nanoseconds, UTF-8, big-endian unscaled
  decimals at every scale, UUID bytes) and, for strings and bytes longer than 16, the
  16-character truncations Iceberg writes as lower and upper bounds. A bytes field equal to
  one of them is a hit.

Free text and raw bytes are matched columnar, with RE2 through pyarrow's ``extract_regex``
on whole arrays: one combined pattern for all values whose capture names the value found,
repeated only over the rows that matched (without the values already found in them).
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import math
import re
import struct
import urllib.parse
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Needles", "typed_key"]

#: A value's identity for equality with decoded values.
TypedKey = tuple[str, Any]

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DAY = dt.date(1970, 1, 1)
#: Raw forms shorter than this are not searched in raw bytes (they would be everywhere).
MIN_RAW_BYTES = 4
#: Literals per combined RE2 pattern.
_CHUNK = 256
#: Iceberg truncates string and binary bounds to this many characters (bytes).
ICEBERG_TRUNCATE = 16

# RE2 boundaries (head, tail) around the literals. Text: letters and digits continue a token.
# Numbers: a '.' next to a digit continues the number too, and a '-' or '_' joining it to a
# letter or digit makes it part of a word (subject-12, 2024-01-12, file_12). Raw bytes
# (pyarrow matches binary arrays in Latin-1 mode): ASCII letters and digits.
#: Letters and digits: ASCII, and the Unicode blocks of letters and digits (not the
#: punctuation, symbol and space blocks). RE2's ``\pL\pN`` would be exact but costs ~12 ms
#: to compile, and pyarrow compiles a pattern on every call.
_ALNUM = (
    r"0-9A-Za-z\x{aa}\x{b5}\x{ba}\x{c0}-\x{d6}\x{d8}-\x{f6}\x{f8}-\x{1fff}\x{2070}-\x{218f}"
    r"\x{2c00}-\x{2dff}\x{3040}-\x{d7ff}\x{f900}-\x{fdff}\x{fe70}-\x{fefe}\x{ff10}-\x{ff19}"
    r"\x{ff21}-\x{ff3a}\x{ff41}-\x{ff5a}\x{ff66}-\x{ffdc}\x{10000}-\x{10ffff}"
)
_WORD = (rf"(?:^|[^{_ALNUM}])", rf"(?:$|[^{_ALNUM}])")
_NUMERAL = (
    rf"(?:^|[^{_ALNUM}.\-_]|[^0-9]\.|(?:^|[^{_ALNUM}])[\-_])",
    rf"(?:$|[^{_ALNUM}.\-_]|\.[^0-9]|\.$|[\-_](?:$|[^{_ALNUM}]))",
)
_RAW_WORD = (r"(?:^|[^0-9A-Za-z])", r"(?:$|[^0-9A-Za-z])")
_RAW_ANY = ("", "")
_RAW_NUMERAL = (r"(?:^|[^0-9A-Za-z.\-_])", r"(?:$|[^0-9A-Za-z.\-_])")
#: A text spelled as a number ("1", "00042", "-2.5"). A string value spelled so is matched
#: in free text and raw bytes as a number is: as a whole numeric token (not in
#: ``00000-1-<uuid>.parquet``, ``subject-12``, ``0.1.0``), and not where numbers are
#: bookkeeping (Delta's ``operationMetrics`` and Iceberg's ``summary`` keep counts as text).
_NUMERAL_TEXT = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")


def _is_numeral(text: str) -> bool:
    """Whether ``text`` is spelled as a number (:data:`_NUMERAL_TEXT`)."""
    return _NUMERAL_TEXT.fullmatch(text) is not None


def _micros(value: dt.datetime) -> int:
    """Microseconds since the epoch of the value's UTC wall clock (naive values taken as UTC)."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _time_micros(value: dt.time) -> int:
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


def _plain(value: Any) -> Any:
    """numpy scalars and bytes-likes as the Python values they stand for."""
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    item = getattr(value, "item", None)
    if item is not None and type(value).__module__ == "numpy":
        return item()
    return value


def typed_key(value: Any) -> TypedKey | None:
    """The key a decoded value is compared by (None for a value that never matches: null, NaN)."""
    value = _plain(value)
    if value is None:
        return None
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float, decimal.Decimal)):
        try:
            finite = math.isfinite(value)
        except (TypeError, ValueError):  # signalling NaN Decimals
            return None
        if not finite:
            return None
        # A float by its shortest repr, so that 0.1 equals the 0.1 of JSON or Decimal text.
        return ("num", decimal.Decimal(repr(value)) if isinstance(value, float) else value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, bytes):
        return ("bytes", value)
    if isinstance(value, uuid.UUID):
        return ("bytes", value.bytes)
    if isinstance(value, dt.datetime):
        return ("ts", _micros(value))
    if isinstance(value, dt.date):
        return ("date", value)
    if isinstance(value, dt.time):
        return ("time", _time_micros(value))
    return None


_SUPPORTED = (bool, int, float, decimal.Decimal, str, bytes, uuid.UUID, dt.date, dt.time)


def _is_binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t))


def _re2_text(s: str) -> str:
    """``s`` as an RE2 literal (UTF-8 mode)."""
    return "".join(c if c.isalnum() or ord(c) > 127 else f"\\x{{{ord(c):02x}}}" for c in s)


def _re2_bytes(b: bytes) -> str:
    """``b`` as an RE2 literal in Latin-1 mode (pyarrow matches binary arrays byte-wise)."""
    return "".join(chr(c) if chr(c).isascii() and chr(c).isalnum() else f"\\x{c:02x}" for c in b)


def _number_texts(value: int | float | decimal.Decimal) -> list[str]:
    if isinstance(value, int):
        return [str(value)]
    forms = [str(value)] if isinstance(value, decimal.Decimal) else [repr(value)]
    d = decimal.Decimal(value)
    if d == d.to_integral_value():
        forms.append(str(int(d)))
    forms.append(format(d.normalize(), "f"))
    return forms


def _fraction_forms(base: str, micros: int) -> list[str]:
    if micros == 0:
        return [base]
    six = f"{micros:06d}"
    forms = [f"{base}.{six}", f"{base}.{six.rstrip('0')}"]
    if micros % 1000 == 0:
        forms.append(f"{base}.{six[:3]}")
    return forms


def _words(value: Any) -> list[str]:
    """Text forms of a value found at token boundaries (numbers have numerals instead)."""
    if isinstance(value, str):
        forms = [value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]]
        if "'" in value:
            forms.append(value.replace("'", "''"))
        return forms
    if isinstance(value, uuid.UUID):
        return [str(value), str(value).upper(), value.hex]
    if isinstance(value, bytes):
        return [value.hex(), value.hex().upper()] if len(value) >= MIN_RAW_BYTES else []
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc)
        forms = []
        for sep in ("T", " "):
            forms += _fraction_forms(value.strftime(f"%Y-%m-%d{sep}%H:%M:%S"), value.microsecond)
        return forms
    if isinstance(value, dt.date):
        return [value.isoformat()]
    if isinstance(value, dt.time):
        return _fraction_forms(value.strftime("%H:%M:%S"), value.microsecond)
    return []


def _signed(n: int) -> bytes:
    """Minimal big-endian two's complement (Iceberg's decimal bound form)."""
    length = max(1, (n + (n < 0)).bit_length() // 8 + 1)
    return n.to_bytes(length, "big", signed=True)


def _iceberg_forms(value: Any) -> list[tuple[bytes, str]]:
    """Iceberg single-value binary serializations of a value, each with a note on its form."""
    forms: list[tuple[bytes, str]] = []
    if isinstance(value, bool):
        return forms
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            forms.append((struct.pack("<i", value), ""))
        if -(2**63) <= value < 2**63:
            forms.append((struct.pack("<q", value), ""))
    elif isinstance(value, float):
        if abs(value) < 3.4e38 and struct.unpack("<f", struct.pack("<f", value))[0] == value:
            forms.append((struct.pack("<f", value), ""))
        forms.append((struct.pack("<d", value), ""))
    elif isinstance(value, decimal.Decimal):
        exponent = value.as_tuple().exponent
        assert isinstance(exponent, int)  # finite (checked by typed_key)
        for scale in range(max(0, -exponent), 39):
            forms.append((_signed(int(value.scaleb(scale))), ""))
    elif isinstance(value, (str, bytes)):
        raw = value.encode() if isinstance(value, str) else value
        forms.append((raw, ""))
        if len(value) > ICEBERG_TRUNCATE:
            lower = value[:ICEBERG_TRUNCATE]
            note = f" (bound truncated to {ICEBERG_TRUNCATE})"
            forms.append((lower.encode() if isinstance(lower, str) else lower, note))
            if isinstance(value, str) and ord(value[ICEBERG_TRUNCATE - 1]) < 0x10FFFF:
                upper = value[: ICEBERG_TRUNCATE - 1] + chr(ord(value[ICEBERG_TRUNCATE - 1]) + 1)
                forms.append((upper.encode(errors="surrogatepass"), note))
            elif isinstance(value, bytes) and value[ICEBERG_TRUNCATE - 1] < 255:
                forms.append((value[: ICEBERG_TRUNCATE - 1] + bytes([value[ICEBERG_TRUNCATE - 1] + 1]), note))
    elif isinstance(value, uuid.UUID):
        forms.append((value.bytes, ""))
    elif isinstance(value, dt.datetime):
        micros = _micros(value)
        forms += [(struct.pack("<q", n), "") for n in (micros, micros * 1000) if -(2**63) <= n < 2**63]
    elif isinstance(value, dt.date):
        forms.append((struct.pack("<i", (value - _EPOCH_DAY).days), ""))
    elif isinstance(value, dt.time):
        forms.append((struct.pack("<q", _time_micros(value)), ""))
    return forms


#: A literal form of a value: text (strings, text arrays) or bytes (binary arrays).
Literal = str | bytes


@dataclass(frozen=True)
class _Matcher:
    """Every value's literal forms of one kind, between one kind of boundaries.

    :meth:`hits` runs one combined pattern with a capture group over an array; the captured
    literal names the value. The rows that matched are searched again without the values
    found in them until nothing more matches, so a row holding several values yields each.
    """

    bounds: tuple[str, str]
    #: Literal form → the value numbers spelled that way.
    forms: dict[Literal, tuple[int, ...]]

    @classmethod
    def build(cls, literals: dict[int, list[Literal]], bounds: tuple[str, str]) -> _Matcher:
        forms: dict[Literal, list[int]] = {}
        for number, lits in literals.items():
            for lit in lits:
                forms.setdefault(lit, []).append(number)
        return cls(bounds, {lit: tuple(numbers) for lit, numbers in forms.items()})

    @functools.cached_property
    def all_patterns(self) -> list[str]:
        """The combined patterns of every literal."""
        return self._patterns(list(self.forms))

    def _patterns(self, literals: list[Literal]) -> list[str]:
        """Combined patterns (longest literals first), at most ``_CHUNK`` literals each."""
        ordered = sorted(literals, key=len, reverse=True)
        escaped = [_re2_bytes(lit) if isinstance(lit, bytes) else _re2_text(lit) for lit in ordered]
        head, tail = self.bounds
        return [
            f"{head}(?P<m>{'|'.join(escaped[i : i + _CHUNK])}){tail}" for i in range(0, len(escaped), _CHUNK)
        ]

    def hits(self, array: pa.Array) -> list[tuple[int, int]]:
        """(row, value number) for every value held by a row of ``array``."""
        return self._hits(array, np.arange(len(array)), list(self.forms), self.all_patterns)

    def _hits(
        self, array: pa.Array, rows: np.ndarray, remaining: list[Literal], patterns: list[str]
    ) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        by_row: dict[int, set[int]] = {}
        for pattern in patterns:
            extracted = pc.extract_regex(array, pattern)
            at = pc.indices_nonzero(extracted.is_valid())
            if len(at) == 0:
                continue
            texts = pc.struct_field(extracted.take(at), [0]).to_pylist()
            for i, text in zip(at.to_numpy(), texts, strict=True):
                by_row.setdefault(int(i), set()).update(self.forms[text])
        # Search the rows again for the other values, grouped by the values found in them.
        groups: dict[frozenset[int], list[int]] = {}
        for i, numbers in by_row.items():
            found += [(int(rows[i]), n) for n in numbers]
            groups.setdefault(frozenset(numbers), []).append(i)
        for seen, members in groups.items():
            rest = [lit for lit in remaining if seen.isdisjoint(self.forms[lit])]
            if rest:
                keep = np.array(sorted(members))
                found += self._hits(array.take(pa.array(keep)), rows[keep], rest, self._patterns(rest))
        return found

    def first_offset(self, data: bytes, number: int) -> int:
        """Byte offset of the first match of value ``number`` in raw ``data``."""
        literals = [lit for lit, numbers in self.forms.items() if number in numbers]
        pattern = self._patterns(literals)[0]
        pos = int(pc.find_substring_regex(pa.array([data], pa.large_binary()), pattern)[0].as_py())
        return pos if any(isinstance(f, bytes) and data.startswith(f, pos) for f in literals) else pos + 1


class Needles:
    """Every form of the values to find (see the module docstring), by value number."""

    def __init__(self, values: Sequence[object]) -> None:
        if not values:
            raise ValueError("find_residue needs at least one value to look for")
        self.count = len(values)
        self.typed: dict[TypedKey, list[int]] = {}
        self.iceberg: dict[bytes, list[tuple[int, str, bool]]] = {}
        words: dict[int, list[Literal]] = {}
        self._redactors: list[tuple[re.Pattern[str], int]] = []
        numerals: dict[int, list[Literal]] = {}
        raw_words: dict[int, list[Literal]] = {}
        raw_numerals: dict[int, list[Literal]] = {}
        raw_any: dict[int, list[Literal]] = {}
        for number, original in enumerate(values):
            value = _plain(original)
            # Messages name the position and type, never the value (reports are audited).
            if value is not None and not isinstance(value, _SUPPORTED):
                raise TypeError(f"value #{number} has a type the residue scan cannot look for: {type(value)}")
            key = typed_key(value)
            if key is None:
                raise ValueError(f"value #{number} ({type(original).__name__}) can never match: null or NaN")
            self.typed.setdefault(key, []).append(number)
            if isinstance(value, uuid.UUID):
                self.typed.setdefault(("str", str(value)), []).append(number)
            numeric = isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool)
            for form, note in _iceberg_forms(value):
                self.iceberg.setdefault(form, []).append((number, note, numeric))
            text = [w for w in dict.fromkeys(_words(value)) if w]
            words[number] = [w for w in text if not _is_numeral(w)]
            spelled = _number_texts(value) if isinstance(value, (int, float, decimal.Decimal)) else []
            if numeric:
                numerals[number] = list(dict.fromkeys(spelled))
            elif len(words[number]) < len(text):  # a string spelled as a number: matched as one
                numerals[number] = [w for w in text if _is_numeral(w)]
            if text:
                alternatives = "|".join(re.escape(t) for t in sorted(text, key=len, reverse=True))
                self._redactors.append((re.compile(rf"(?<![^\W_])(?:{alternatives})(?![^\W_])"), number))
            if numeric:
                # A number is redacted only as a whole name or value ("g=12", "$.12"), not in
                # the report's own numbers ("row group 0", "line 12").
                alternatives = "|".join(re.escape(t) for t in sorted(set(spelled), key=len, reverse=True))
                self._redactors.append(
                    (re.compile(rf"(?<=[=./])(?:{alternatives})(?=$|[/ \[]|\.[^\d])"), number)
                )
            if not isinstance(value, bytes):
                raws = [w.encode("utf-8", errors="surrogatepass") for w in text]
                raw_words[number] = [
                    r
                    for w, r in zip(text, raws, strict=True)
                    if len(r) >= MIN_RAW_BYTES and not _is_numeral(w)
                ]
                raw_numerals[number] = [
                    r for w, r in zip(text, raws, strict=True) if len(r) >= MIN_RAW_BYTES and _is_numeral(w)
                ]
            elif len(value) >= MIN_RAW_BYTES:
                raw_any[number] = [value]
        self.words = _Matcher.build(words, _WORD)
        self.numerals = _Matcher.build(numerals, _NUMERAL)
        #: Typed strings equal to a value's text form (with numbers' forms, without them).
        self._equal: dict[bool, dict[str, list[int]]] = {True: {}, False: {}}
        for with_numbers, kinds in ((False, (words,)), (True, (words, numerals))):
            for kind in kinds:
                for number, lits in kind.items():
                    for lit in lits:
                        self._equal[with_numbers].setdefault(str(lit), []).append(number)
        self.raw_words = _Matcher.build(raw_words, _RAW_WORD)
        self.raw_numerals = _Matcher.build(raw_numerals, _RAW_NUMERAL)
        self.raw_any = _Matcher.build(raw_any, _RAW_ANY)
        self.has_raw = bool(self.raw_words.forms or self.raw_numerals.forms or self.raw_any.forms)
        self._arrow: dict[pa.DataType, list[tuple[int, pa.Scalar]]] = {}

    def redact(self, text: str) -> str:
        """``text`` (a path or location) with every value's text forms replaced by its number.

        A percent-encoded path is decoded first when that reveals a value.
        """
        decoded = urllib.parse.unquote(text)
        for source in (text, decoded) if decoded != text else (text,):
            out = source
            for pattern, number in self._redactors:
                out = pattern.sub(f"<value #{number}>", out)
            if out != source:
                return out
        return text

    # ------------------------------------------------------------------ typed values

    def numbers_of(self, value: Any, *, numbers: bool = True) -> list[int]:
        """Value numbers equal to one decoded Python value (numbers skipped unless ``numbers``)."""
        key = typed_key(value)
        if key is None or (key[0] == "num" and not numbers):
            return []
        return self.typed.get(key, [])

    def bound_numbers(self, data: bytes, *, numbers: bool = True) -> list[tuple[int, str]]:
        """Value numbers whose Iceberg single-value form is exactly ``data``, with a note on the
        form (numbers' forms skipped unless ``numbers``)."""
        return [(n, note) for n, note, numeric in self.iceberg.get(data, []) if numbers or not numeric]

    def _scalars(self, t: pa.DataType) -> list[tuple[int, pa.Scalar]]:
        """The values comparable with an Arrow column of type ``t``, as scalars of that type."""
        found = self._arrow.get(t)
        if found is not None:
            return found
        found = []
        for (kind, v), numbers in self.typed.items():
            candidate: Any = None
            if kind == "num" and pa.types.is_integer(t) and v == int(v):
                candidate = int(v)
            elif kind == "num" and pa.types.is_floating(t) and decimal.Decimal(repr(float(v))) == v:
                candidate = float(v)
            elif kind == "num" and pa.types.is_decimal(t):
                candidate = decimal.Decimal(v)
            elif (
                (kind == "bool" and pa.types.is_boolean(t))
                or (kind == "date" and pa.types.is_date(t))
                or (kind == "bytes" and (_is_binary(t)))
            ):
                candidate = v
            if candidate is None:
                continue
            try:
                scalar = pa.scalar(candidate, t)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
                continue
            found += [(n, scalar) for n in numbers]
        self._arrow[t] = found
        return found

    def arrow_numbers(self, array: pa.Array, *, numbers: bool = True, free_text: bool = False) -> set[int]:
        """Value numbers held by a flat (non-nested) Arrow array, typed or as text.

        Strings are typed values (a string must be a value's text form), or with ``free_text``
        (metadata strings such as Delta checkpoint paths) free text: see :meth:`text_hits`.
        """
        t = array.type
        if pa.types.is_dictionary(t):
            return self.arrow_numbers(array.dictionary, numbers=numbers, free_text=free_text)
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
            if pa.types.is_string_view(t):
                array = array.cast(pa.large_string())
            return {n for _, n in self.text_hits(array, numbers=numbers, free_text=free_text)}
        if pa.types.is_timestamp(t) or pa.types.is_time(t):
            return self._temporal_numbers(array)
        found = set()
        if _is_binary(t):
            as_binary = array.cast(pa.large_binary())
            found |= {n for _, n, _ in self.raw_hits(as_binary, offsets=False)}
        numeric = pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
        scalars = self._scalars(t) if numbers or not numeric else []
        if scalars:
            value_set = pa.array([s.as_py() for _, s in scalars], t)
            present = pc.unique(array.filter(pc.is_in(array, value_set=value_set)))
            for n, s in scalars:
                if len(present) and pc.any(pc.equal(present, s)).as_py():
                    found.add(n)
        return found

    def _temporal_numbers(self, array: pa.Array) -> set[int]:
        t = array.type
        kind = "ts" if pa.types.is_timestamp(t) else "time"
        per_micro = {"s": None, "ms": None, "us": 1, "ns": 1000}[t.unit]
        divisor = {"s": 1_000_000, "ms": 1000}.get(t.unit)
        wanted: dict[int, list[int]] = {}
        for (k, micros), numbers in self.typed.items():
            if k != kind:
                continue
            if per_micro is not None:
                wanted.setdefault(micros * per_micro, []).extend(numbers)
            elif divisor is not None and micros % divisor == 0:
                wanted.setdefault(micros // divisor, []).extend(numbers)
        if not wanted:
            return set()
        ints = array.cast(pa.int64() if t.bit_width == 64 else pa.int32()).cast(pa.int64())
        present = pc.unique(ints.filter(pc.is_in(ints, value_set=pa.array(list(wanted), pa.int64()))))
        return {n for v in present.to_pylist() for n in wanted[v]}

    # ------------------------------------------------------------------ free text and raw bytes

    def text_hits(self, strings: pa.Array, *, numbers: bool, free_text: bool) -> list[tuple[int, int]]:
        """(row, value number) of the strings holding a value.

        Free text holds a value's text form at token boundaries, or a number as a numeric
        token (with ``numbers``). Otherwise the strings are typed values: one must *be* a
        value's text form (its string, ISO date, UUID, number spelled out with ``numbers``).
        A string value spelled as a number ("1") is matched as a number is.
        """
        if not free_text:
            forms = self._equal[numbers]
            rows = pc.indices_nonzero(pc.is_in(strings, value_set=pa.array(list(forms), strings.type)))
            values = strings.take(rows).to_pylist()
            return [(r, n) for r, v in zip(rows.to_pylist(), values, strict=True) for n in forms[v]]
        found = self.words.hits(strings)
        return found + self.numerals.hits(strings) if numbers else found

    def raw_hits(self, blobs: pa.Array, *, offsets: bool = True) -> list[tuple[int, int, int]]:
        """(row, value number, byte offset or -1) of the binary ``blobs`` holding a value's raw form."""
        out = []
        for matcher in (self.raw_words, self.raw_numerals, self.raw_any):
            for row, number in matcher.hits(blobs):
                offset = matcher.first_offset(blobs[row].as_py(), number) if offsets else -1
                out.append((row, number, offset))
        return out
