"""Typing literals for the column they are compared with (shared by every binder)."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from lakehouse_index.expressions.ast import Lit
from lakehouse_index.expressions.types import Family, family

__all__ = ["Mismatch", "coerce", "exact", "number", "parse_timestamp"]


def number(text: str) -> int | float:
    """A numeric literal's value: int when it has no fraction or exponent, else float."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse_timestamp(text: str) -> dt.datetime:
    """An ISO timestamp (space or T, optional Z / offset, date alone means midnight)."""
    t = text.strip().replace(" ", "T", 1)
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    if "T" not in t:
        t += "T00:00:00"
    return dt.datetime.fromisoformat(t)


class Mismatch(Exception):
    """A literal that cannot be compared with a column of the target type (the message says why)."""


def _refuse(v: Any) -> Mismatch:
    return Mismatch(f"{type(v).__name__} literal {v!r}")


def _number(v: Any, target: pa.DataType) -> Lit:
    if isinstance(v, bool) or not isinstance(v, (int, float, decimal.Decimal)):
        raise _refuse(v)
    if isinstance(v, int):
        if pa.types.is_integer(target) or pa.types.is_decimal(target):
            return Lit(v, pa.int64()) if -(2**63) <= v < 2**63 else Lit(float(v), pa.float64())
        return Lit(float(v), pa.float64())
    return Lit(float(v), pa.float64())


def _string(v: Any, target: pa.DataType) -> Lit:
    if not isinstance(v, str):
        raise _refuse(v)
    return Lit(v, pa.string())


def _binary(v: Any, target: pa.DataType) -> Lit:
    if not isinstance(v, str):
        raise _refuse(v)
    return Lit(v.encode(), pa.binary())


def _boolean(v: Any, target: pa.DataType) -> Lit:
    if not isinstance(v, bool):
        raise _refuse(v)
    return Lit(v, pa.bool_())


def _date(v: Any, target: pa.DataType) -> Lit:
    if isinstance(v, dt.datetime):
        raise Mismatch(f"timestamp literal {v!r}")
    if isinstance(v, str):
        try:
            v = dt.date.fromisoformat(v.strip())
        except ValueError:
            raise Mismatch(f"string {v!r}, which is no date") from None
    if not isinstance(v, dt.date):
        raise _refuse(v)
    return Lit(v, pa.date32())


def _timestamp(v: Any, target: pa.DataType) -> Lit:
    if isinstance(v, str):
        try:
            v = parse_timestamp(v)
        except ValueError:
            raise Mismatch(f"string {v!r}, which is no timestamp") from None
    elif isinstance(v, dt.date) and not isinstance(v, dt.datetime):
        v = dt.datetime(v.year, v.month, v.day)
    if not isinstance(v, dt.datetime):
        raise _refuse(v)
    assert isinstance(target, pa.TimestampType)
    # Naive literals mean UTC (the Spark sessions we build run with timeZone=UTC).
    if target.tz is not None:
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.timezone.utc)
        return Lit(v.astimezone(dt.timezone.utc), pa.timestamp("us", tz="UTC"))
    if v.tzinfo is not None:
        v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return Lit(v, pa.timestamp("us"))


_COERCE: dict[Family, Callable[[Any, pa.DataType], Lit]] = {
    Family.INTEGER: _number,
    Family.FLOAT: _number,
    Family.DECIMAL: _number,
    Family.STRING: _string,
    Family.BINARY: _binary,
    Family.BOOLEAN: _boolean,
    Family.DATE: _date,
    Family.TIMESTAMP: _timestamp,
}


def coerce(v: Any, target: pa.DataType) -> Lit:
    """Type literal ``v`` for a comparison with a column of type ``target``.

    Numbers stay numbers (both engines compare int and float columns with any number
    exactly enough); strings become dates / timestamps for such columns (as Spark
    does); every other mix is refused rather than left to two engines' coercion rules.
    """
    fam = family(target)
    if fam not in _COERCE:
        raise Mismatch(f"a literal: columns of type {target} cannot be compared")
    return _COERCE[fam](v, target)


def exact(lit: Lit, target: pa.DataType) -> Lit:
    """``lit`` as a value of the column type when that is exact, else unchanged.

    Comparing in the column's own type is what both engines do best (pyarrow cannot
    compare a decimal column with an int64 scalar). A value the column type cannot
    hold exactly (1.5 for an int column, 0.1 for a float32 column) keeps its own type:
    comparisons then widen the column, as Spark does, and IN drops it.
    """
    if lit.type.equals(target):
        return lit
    try:
        src = pa.array([lit.value], type=lit.type)
        if pa.types.is_integer(lit.type) and pa.types.is_decimal(target):
            # int64 → decimal(p, s) refuses p < 19 + s outright; go through decimal(38, 0).
            src = src.cast(pa.decimal128(38, 0))
        cast = src.cast(target, safe=True)
        back = cast.cast(lit.type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
        return lit
    # The round trip catches float32 columns: 0.1 is no float32 value, and Spark
    # compares such columns widened to double.
    if back[0].as_py() != lit.value:
        return lit
    return Lit(cast[0].as_py(), target)
