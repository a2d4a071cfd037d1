"""``CAST`` as Spark SQL evaluates it with ``spark.sql.ansi.enabled=false`` (pyspark 3.5's default).

A value that does not convert gives NULL (``CAST('x' AS INT)``, ``CAST('2023-02-30' AS
DATE)``), never an error; integral narrowing wraps (``CAST(300 AS TINYINT)`` is 44) and a
floating value cast to an integral type truncates toward zero, NaN giving 0 and values
beyond the range its bound (Java's conversions). Strings are trimmed of white space and
control characters first, as Spark does. Timestamps (instants) meet dates, strings and
wall-clock times in the session time zone ``zone``; a wall-clock time that the zone skips
(a DST gap) moves forward by the gap, one it repeats takes the earlier instant, as in Java.

:func:`check_cast` says which casts are supported (others are a QueryError naming them);
:func:`cast` converts an Arrow array.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import unicodedata
import zoneinfo
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.errors import QueryError
from lakehouse_index.expressions.sparktypes import INSTANT, LOCAL, is_integral, is_numeric, spark_name

__all__ = ["cast", "check_cast", "instants_to_local", "java_trim", "local_to_instant", "locals_to_instant"]

_UTC = dt.timezone.utc
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=_UTC)
_DATE = re.compile(r"([+-]?\d{4})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T].*)?)?)?", re.DOTALL)
_TIMESTAMP = re.compile(
    r"([+-]?\d{4})(?:-(\d{1,2})(?:-(\d{1,2})"
    r"(?:[ T](\d{1,2})(?::(\d{1,2})(?::(\d{1,2})(?:\.(\d{0,9}))?)?)?)?)?)?"
    r"\s*(Z|UTC|[+-]\d{1,2}(?::?\d{2})?)?"
)
_INTEGRAL = re.compile(r"[+-]?\d*(?:\.\d*)?")
_FLOAT = re.compile(r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)")
_FLOAT_SPECIALS = {
    "inf": float("inf"),
    "+inf": float("inf"),
    "infinity": float("inf"),
    "+infinity": float("inf"),
    "-inf": float("-inf"),
    "-infinity": float("-inf"),
    "nan": float("nan"),
}
_TRUE = frozenset(["t", "true", "y", "yes", "1"])
_FALSE = frozenset(["f", "false", "n", "no", "0"])
_NOT_WHITESPACE = frozenset("\xa0\u2007\u202f")


def _is_trimmed(c: str) -> bool:
    o = ord(c)
    if o <= 0x20 or 0x7F <= o <= 0x9F:
        return True
    return unicodedata.category(c) in ("Zs", "Zl", "Zp") and c not in _NOT_WHITESPACE


def java_trim(s: str) -> str:
    """``s`` without leading and trailing white space and control characters (Spark's ``trimAll``)."""
    start, end = 0, len(s)
    while start < end and _is_trimmed(s[start]):
        start += 1
    while end > start and _is_trimmed(s[end - 1]):
        end -= 1
    return s[start:end]


def local_to_instant(local: dt.datetime, zone: str) -> dt.datetime:
    """The instant (aware, UTC) of wall-clock time ``local`` in ``zone``: a skipped time moves
    forward by the gap, a repeated one takes the earlier offset (``fold=0``), as Java does."""
    return local.replace(tzinfo=zoneinfo.ZoneInfo(zone), fold=0).astimezone(_UTC)


def _instant_to_local(instant: dt.datetime, zone: str) -> dt.datetime:
    return instant.astimezone(zoneinfo.ZoneInfo(zone)).replace(tzinfo=None)


def instants_to_local(values: pa.Array, zone: str) -> pa.Array:
    """Instants as the wall-clock times of ``zone`` (``TIMESTAMP_NTZ`` values)."""
    return pc.local_timestamp(values.cast(pa.timestamp("us", tz=zone)))


def locals_to_instant(values: pa.Array, zone: str) -> pa.Array:
    """Wall-clock times of ``zone`` as instants, as :func:`local_to_instant` resolves them.

    pyarrow resolves every time but those a DST gap skips as Java does (a repeated one: the
    earlier instant); the skipped ones, recognised by not coming back, move forward by the gap.
    """
    instants = pc.assume_timezone(values, zone, ambiguous="earliest", nonexistent="earliest")
    skipped = pc.fill_null(pc.not_equal(pc.local_timestamp(instants), values), False)
    out = instants.cast(INSTANT)
    if not pc.any(skipped).as_py():
        return out
    moved = [
        local_to_instant(v, zone) if gap else x
        for v, x, gap in zip(values.to_pylist(), out.to_pylist(), skipped.to_pylist(), strict=True)
    ]
    return pa.array(moved, INSTANT)


def _bits(t: pa.DataType) -> int:
    return int(t.bit_width)


def _range(t: pa.DataType) -> tuple[int, int]:
    return -(2 ** (_bits(t) - 1)), 2 ** (_bits(t) - 1) - 1


# --------------------------------------------------------------------------- string parsers


def _parse_integral(s: str, t: pa.DataType) -> int | None:
    s = java_trim(s)
    if not s or s in ("+", "-") or _INTEGRAL.fullmatch(s) is None:
        return None
    whole = s.split(".", 1)[0]
    value = int(whole) if whole not in ("", "+", "-") else 0
    lo, hi = _range(t)
    return value if lo <= value <= hi else None


def _parse_float(s: str) -> float | None:
    stripped = s.strip("".join(chr(i) for i in range(33)))
    if _FLOAT.fullmatch(stripped):
        return float(stripped.rstrip("fFdD"))
    return _FLOAT_SPECIALS.get(java_trim(s).lower())


def _parse_bool(s: str) -> bool | None:
    v = java_trim(s).lower()
    return True if v in _TRUE else False if v in _FALSE else None


def _parse_date(s: str) -> dt.date | None:
    m = _DATE.fullmatch(java_trim(s))
    if m is None:
        return None
    try:
        return dt.date(int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1))
    except ValueError:
        return None


def _offset(text: str) -> dt.timezone:
    if text in ("Z", "UTC"):
        return _UTC
    sign = -1 if text[0] == "-" else 1
    body = text[1:].replace(":", "")
    hours, minutes = (body, "0") if len(body) <= 2 else (body[:-2], body[-2:])
    return dt.timezone(sign * dt.timedelta(hours=int(hours), minutes=int(minutes)))


def _parse_timestamp(s: str, zone: str, instant: bool) -> dt.datetime | None:
    """The instant (aware) or wall-clock time (naive) a string spells, or None."""
    m = _TIMESTAMP.fullmatch(java_trim(s))
    if m is None:
        return None
    year, month, day, hour, minute, second, frac, off = m.groups()
    try:
        local = dt.datetime(
            int(year),
            int(month or 1),
            int(day or 1),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            int(((frac or "") + "000000")[:6]),
        )
        if not instant:
            return local
        if off is not None:
            return local.replace(tzinfo=_offset(off)).astimezone(_UTC)
        return local_to_instant(local, zone)
    except (ValueError, OverflowError):
        return None


# --------------------------------------------------------------------------- to string


def _timestamp_text(local: dt.datetime) -> str:
    text = local.strftime("%Y-%m-%d %H:%M:%S")
    if local.microsecond:
        text += f".{local.microsecond:06d}".rstrip("0")
    return text


def _to_string(v: Any, src: pa.DataType, zone: str) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if src.equals(INSTANT):
        return _timestamp_text(_instant_to_local(v, zone))
    if src.equals(LOCAL):
        return _timestamp_text(v)
    if isinstance(v, dt.date):
        return f"{v.year:04d}-{v.month:02d}-{v.day:02d}"
    return str(v)


# --------------------------------------------------------------------------- numbers


def _float_to_integral(values: pa.Array, t: pa.DataType) -> pa.Array:
    """Java's ``(long) d`` / ``(int) d`` (NaN → 0, beyond the range → its bound), then narrowing."""
    x = values.to_numpy(zero_copy_only=False).astype(np.float64)
    mask = values.is_null().to_numpy(zero_copy_only=False)
    x = np.where(np.isnan(x) | mask, 0.0, np.trunc(x))
    wide = 64 if _bits(t) == 64 else 32
    lo, hi = -(2 ** (wide - 1)), 2 ** (wide - 1) - 1
    with np.errstate(invalid="ignore"):
        inside = np.clip(x, lo, hi).astype(np.int64)
    ints = np.where(x >= float(hi), hi, np.where(x <= float(lo), lo, inside))
    out = pa.array(ints.astype(np.int64), pa.int64(), mask=mask)
    return out.cast(t, safe=False)


def _decimal_value(v: decimal.Decimal | int, t: pa.DataType) -> decimal.Decimal | None:
    """``v`` rounded half up to the scale of decimal type ``t``; None when its precision overflows."""
    scale, precision = t.scale, t.precision
    q = decimal.Decimal(v).quantize(decimal.Decimal(1).scaleb(-scale), decimal.ROUND_HALF_UP, _WIDE)
    return q if q.adjusted() < precision - scale or q == 0 else None


_WIDE = decimal.Context(prec=100)


def _per_value(values: pa.Array, t: pa.DataType, fn: Callable[[Any], Any]) -> pa.Array:
    out = []
    for v in values.to_pylist():
        out.append(None if v is None else fn(v))
    return pa.array(out, t)


# --------------------------------------------------------------------------- the casts


def check_cast(src: pa.DataType, dst: pa.DataType) -> None:
    """QueryError unless casting ``src`` to ``dst`` is supported (both normal types)."""
    if _converter(src, dst) is None:
        raise QueryError(f"CAST from {spark_name(src)} to {spark_name(dst)} is not supported")


def cast(values: pa.Array, src: pa.DataType, dst: pa.DataType, zone: str) -> pa.Array:
    """``values`` (of type ``src``) cast to ``dst`` as Spark casts, in session time zone ``zone``."""
    if src.equals(dst):
        return values
    if pa.types.is_null(src):
        return pa.nulls(len(values), dst)
    convert = _converter(src, dst)
    assert convert is not None, (src, dst)
    return convert(values, zone)


_Convert = Callable[[pa.Array, str], pa.Array]


def _converter(src: pa.DataType, dst: pa.DataType) -> _Convert | None:
    if src.equals(dst) or pa.types.is_null(src):
        return lambda v, z: v
    string, date, boolean = pa.string(), pa.date32(), pa.bool_()
    if src.equals(string):
        if is_integral(dst):
            return lambda v, z: _per_value(v, dst, lambda s: _parse_integral(s, dst))
        if pa.types.is_floating(dst):
            return lambda v, z: _per_value(v, pa.float64(), _parse_float).cast(dst)
        if dst.equals(boolean):
            return lambda v, z: _per_value(v, dst, _parse_bool)
        if dst.equals(date):
            return lambda v, z: _per_value(v, dst, _parse_date)
        if dst.equals(INSTANT) or dst.equals(LOCAL):
            instant = dst.equals(INSTANT)
            return lambda v, z: _per_value(v, dst, lambda s: _parse_timestamp(s, z, instant))
        if pa.types.is_decimal(dst):
            return None
        if dst.equals(pa.binary()):
            return lambda v, z: v.cast(dst)
        return None
    if dst.equals(string):
        if pa.types.is_floating(src) or pa.types.is_decimal(src) or pa.types.is_binary(src):
            return None  # Java's number formatting: not reproduced
        if is_integral(src) or src.equals(boolean) or src.equals(date):
            return lambda v, z: v.cast(dst)  # the same digits, true/false, yyyy-mm-dd
        return lambda v, z: _per_value(v, dst, lambda x: _to_string(x, src, z))
    if src.equals(boolean) and is_numeric(dst):
        return lambda v, z: pc.if_else(v, pa.scalar(1, dst), pa.scalar(0, dst))
    if dst.equals(boolean) and is_numeric(src):
        return lambda v, z: pc.not_equal(v, pa.scalar(0, src))
    if is_integral(src) and (is_integral(dst) or pa.types.is_floating(dst)):
        return lambda v, z: v.cast(dst, safe=False)
    if pa.types.is_floating(src) and pa.types.is_floating(dst):
        return lambda v, z: v.cast(dst, safe=False)
    if pa.types.is_floating(src) and is_integral(dst):
        return lambda v, z: _float_to_integral(v, dst)
    if pa.types.is_decimal(dst) and (is_integral(src) or pa.types.is_decimal(src)):
        return lambda v, z: _per_value(v, dst, lambda x: _decimal_value(x, dst))
    if pa.types.is_decimal(src) and pa.types.is_floating(dst):
        return lambda v, z: _per_value(v, pa.float64(), float).cast(dst)
    return _temporal(src, dst)


def _temporal(src: pa.DataType, dst: pa.DataType) -> _Convert | None:
    date = pa.date32()
    if src.equals(INSTANT) and dst.equals(date):
        return lambda v, z: instants_to_local(v, z).cast(date)
    if src.equals(LOCAL) and dst.equals(date):
        return lambda v, z: v.cast(date)
    if src.equals(date) and dst.equals(INSTANT):
        return lambda v, z: locals_to_instant(v.cast(LOCAL), z)
    if src.equals(date) and dst.equals(LOCAL):
        return lambda v, z: v.cast(LOCAL)
    if src.equals(INSTANT) and dst.equals(LOCAL):
        return lambda v, z: instants_to_local(v, z)
    if src.equals(LOCAL) and dst.equals(INSTANT):
        return lambda v, z: locals_to_instant(v, z)
    if src.equals(INSTANT) and dst.equals(pa.int64()):
        return lambda v, z: _per_value(v, dst, lambda x: (x - _EPOCH) // dt.timedelta(seconds=1))
    return None
