"""Typing literals for the column they are compared with (shared by every binder)."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pyarrow as pa

from lakehouse_index.expressions.ast import Lit
from lakehouse_index.expressions.types import Family, family

__all__ = [
    "Mismatch",
    "between_integers",
    "coerce",
    "compare_integers",
    "decimal_literal",
    "exact",
    "number",
    "parse_timestamp",
]


def number(text: str) -> int | decimal.Decimal:
    """A numeric literal's value: int when it has no fraction or exponent, else its exact decimal.

    Exact, as Spark reads an unsuffixed ``1.5`` (a DECIMAL): a literal with more digits than
    a double holds (``-312345678901234567890.0123456789``) must still equal the decimal or
    integer column value it spells. Comparisons with float columns convert it to a double
    (:func:`coerce`), as Spark does.
    """
    try:
        return int(text)
    except ValueError:
        return decimal.Decimal(text)


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


#: Arithmetic context wide enough that no operation on a literal of up to 38 digits rounds
#: (the default context keeps 28 digits).
_EXACT = decimal.Context(prec=80, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def decimal_literal(v: decimal.Decimal | int) -> Lit | None:
    """``v`` as an exact decimal literal (its own precision and scale), or None.

    None for NaN, the infinities and values of more than 38 digits (beyond ``decimal128``).
    """
    d = decimal.Decimal(v)
    if not d.is_finite():
        return None
    _, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    if exponent > 0:  # 1E+3: an integer, scale 0
        if len(digits) + exponent > 38:
            return None
        d = d.quantize(decimal.Decimal(1), context=_EXACT)
        _, digits, exponent = d.as_tuple()
        assert isinstance(exponent, int)
    scale = -exponent
    precision = max(len(digits), scale, 1)
    if precision > 38:
        return None
    return Lit(d, pa.decimal128(precision, scale))


def _number(v: Any, target: pa.DataType) -> Lit:
    if isinstance(v, bool) or not isinstance(v, (int, float, decimal.Decimal)):
        raise _refuse(v)
    exact_target = pa.types.is_integer(target) or pa.types.is_decimal(target)
    if isinstance(v, int):
        if exact_target:
            if -(2**63) <= v < 2**63:
                return Lit(v, pa.int64())
            if pa.types.is_unsigned_integer(target) and 0 <= v < 2**64:
                return Lit(v, pa.uint64())
            if pa.types.is_decimal(target):
                # Beyond int64 but within a decimal column's reach: keep it exact.
                as_decimal = decimal_literal(v)
                if as_decimal is not None:
                    return as_decimal
            if pa.types.is_integer(target) and float(v) == -(2.0**63):
                # Below int64's range, but the nearest double is its minimum: take the next
                # double down, which compares with every integer column value as v does.
                return Lit(math.nextafter(-(2.0**63), -math.inf), pa.float64())
        return Lit(float(v), pa.float64())
    if isinstance(v, decimal.Decimal) and exact_target:
        # Integer and decimal columns compare with a decimal literal exactly (as Spark
        # does): a double would round 312345678901234567890.5 and 9007199254740993.0.
        as_decimal = decimal_literal(v)
        if as_decimal is not None and _comparable_decimals(as_decimal.type, target):
            return as_decimal
    return Lit(float(v), pa.float64())


def _comparable_decimals(lit_type: pa.DataType, target: pa.DataType) -> bool:
    """Whether pyarrow compares a decimal literal of ``lit_type`` with a ``target`` column:
    their common decimal type (integer digits and scale of both) fits in 38 digits.

    Integer columns are always fine: :func:`compare_integers` rewrites such comparisons.
    """
    if not pa.types.is_decimal(target):
        return True
    assert isinstance(lit_type, pa.Decimal128Type)
    assert isinstance(target, (pa.Decimal128Type, pa.Decimal256Type))
    scale = max(lit_type.scale, target.scale)
    integer_digits = max(lit_type.precision - lit_type.scale, target.precision - target.scale)
    return integer_digits + scale <= 38


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
    IN drops it; comparisons with a float or decimal column widen the column, as Spark
    does; comparisons with an integer column are rewritten by :func:`compare_integers`
    and :func:`between_integers` into exact ones with a value of the column type.
    """
    if lit.type.equals(target):
        return lit
    try:
        src = pa.array([lit.value], type=lit.type)
        if pa.types.is_integer(lit.type) and pa.types.is_decimal(target):
            # int64 → decimal(p, s) refuses p < 19 + s outright; go through decimal(38, 0).
            src = src.cast(pa.decimal128(38, 0))
        cast = src.cast(target, safe=True)
        if pa.types.is_decimal(lit.type):
            # A safe cast of a decimal refuses to drop digits; compare exactly in Python
            # (int64 → decimal(2, 1), the way back for 3.0, is refused outright).
            back_value = cast[0].as_py()
        else:
            back_value = cast.cast(lit.type, safe=True)[0].as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
        return lit
    # The round trip catches float32 columns: 0.1 is no float32 value, and Spark
    # compares such columns widened to double.
    if back_value != lit.value:
        return lit
    return Lit(cast[0].as_py(), target)


def _integer_range(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    if pa.types.is_signed_integer(t):
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1


def _rational(v: Any) -> Fraction | float:
    """A finite number as its exact rational value; NaN and the infinities as they are."""
    if isinstance(v, float) and not math.isfinite(v):
        return v
    if isinstance(v, decimal.Decimal) and not v.is_finite():
        return float(v)
    return Fraction(v)


def _isnan(x: float | int) -> bool:
    return isinstance(x, float) and math.isnan(x)


def _floor(q: Fraction | float) -> float | int:
    return q if isinstance(q, float) else math.floor(q)


def _ceil(q: Fraction | float) -> float | int:
    return q if isinstance(q, float) else math.ceil(q)


def _needs_rewrite(lit: Lit, target: pa.DataType) -> bool:
    """Whether ``lit`` is a number an integer column of type ``target`` does not compare exactly."""
    return (
        pa.types.is_integer(target)
        and not lit.type.equals(target)
        and family(lit.type) in (Family.INTEGER, Family.FLOAT, Family.DECIMAL)
    )


def compare_integers(op: str, lit: Lit, target: pa.DataType) -> tuple[str, Lit]:
    """``column op lit`` as ``column op' n``, ``n`` a value of the column's type ``target``.

    For integer columns compared with a number they cannot hold (1.5, 1e30, -1 for an
    unsigned column); every other comparison comes back as it is. Neither engine
    compares such a mix exactly: pyarrow casts the column to float32 or float64 and
    refuses values beyond 2**24 or 2**53, Spark widens to double. The rewrite is exact on
    every value: ``id > 2.5`` is ``id >= 3``, ``id < 2.5`` is ``id <= 2``. A comparison no
    value satisfies (``id = 1.5``, ``id > 1e30``) becomes ``id > max``, one every value
    satisfies (``id != 1.5``, ``id < 1e30``) ``id >= min``: both still null on a null, as
    SQL wants the original to be (``NOT (id = 1.5)`` drops null rows). NaN compares as in
    Python and pyarrow: unequal to every number, neither smaller nor larger.
    """
    if not _needs_rewrite(lit, target):
        return op, lit
    lo, hi = _integer_range(target)
    never, always = (">", Lit(hi, target)), (">=", Lit(lo, target))
    q = _rational(lit.value)

    def at_least(m: float | int) -> tuple[str, Lit]:
        if m <= lo:
            return always
        return never if m > hi or _isnan(m) else (">=", Lit(int(m), target))

    def at_most(m: float | int) -> tuple[str, Lit]:
        if m >= hi:
            return always
        return never if m < lo or _isnan(m) else ("<=", Lit(int(m), target))

    if op in ("=", "!="):
        held = isinstance(q, Fraction) and q.denominator == 1 and lo <= q <= hi
        if held:
            return op, Lit(int(q), target)
        return never if op == "=" else always
    if op == ">":
        return at_least(_floor(q) + 1)
    if op == ">=":
        return at_least(_ceil(q))
    if op == "<":
        return at_most(_ceil(q) - 1)
    assert op == "<=", op
    return at_most(_floor(q))


def between_integers(low: Lit, high: Lit, target: pa.DataType) -> tuple[Lit, Lit]:
    """The bounds of ``column BETWEEN low AND high`` as values of integer type ``target``.

    The same rewrite as :func:`compare_integers` for each bound (``BETWEEN 0.5 AND 2.5`` is
    ``BETWEEN 1 AND 2``); a range no value is in becomes ``BETWEEN max AND min``. Bounds
    the column compares exactly already, and every other column type, come back as they are.
    """
    if not (_needs_rewrite(low, target) or _needs_rewrite(high, target)):
        return low, high
    lo, hi = _integer_range(target)
    a, b = _ceil(_rational(low.value)), _floor(_rational(high.value))
    if _isnan(a) or _isnan(b) or a > hi or b < lo or a > b:
        return Lit(hi, target), Lit(lo, target)
    return Lit(int(max(a, lo)), target), Lit(int(min(b, hi)), target)
