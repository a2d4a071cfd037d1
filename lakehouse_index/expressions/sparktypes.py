"""Spark SQL's types and coercion rules, as the scalar expressions of a ``where`` follow them.

Every value of a scalar expression has one of the Arrow types Spark has a type for
(:func:`normal`): ``int8/16/32/64`` (TINYINT … BIGINT), ``float32``/``float64`` (FLOAT,
DOUBLE), ``decimal128(p, s)``, ``string``, ``binary``, ``bool``, ``date32``, ``timestamp[us,
tz=UTC]`` (TIMESTAMP, an instant) and ``timestamp[us]`` (TIMESTAMP_NTZ), and ``null`` for
a bare ``NULL``. :func:`common_type` is Spark's rule for the type two operands of a
comparison, ``CASE``, ``COALESCE`` or ``GREATEST`` are brought to; :func:`arithmetic_type`
its rule for ``+ - * / % div``.
"""

from __future__ import annotations

import pyarrow as pa

from lakehouse_index.errors import QueryError
from lakehouse_index.expressions.types import Family, family

__all__ = [
    "INSTANT",
    "LOCAL",
    "arithmetic_type",
    "common_type",
    "is_integral",
    "is_numeric",
    "normal",
    "spark_name",
]

#: Spark's TIMESTAMP (an instant) and TIMESTAMP_NTZ (a wall-clock time).
INSTANT = pa.timestamp("us", tz="UTC")
LOCAL = pa.timestamp("us")

#: Integral and floating types, narrowest first (Spark's numeric precedence).
_NUMERIC = (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64())
#: The decimal an integral type widens to (Spark's ``DecimalType.forType``).
_INT_DECIMAL = {
    8: pa.decimal128(3, 0),
    16: pa.decimal128(5, 0),
    32: pa.decimal128(10, 0),
    64: pa.decimal128(20, 0),
}


def normal(t: pa.DataType) -> pa.DataType:
    """The Spark-typed Arrow type values of a column of type ``t`` take in an expression."""
    f = family(t)
    if pa.types.is_null(t):
        return t
    if f is Family.INTEGER and pa.types.is_signed_integer(t):
        return t
    if f is Family.FLOAT and not pa.types.is_float16(t):
        return t
    if f is Family.DECIMAL and t.precision <= 38:
        return pa.decimal128(t.precision, t.scale)
    if f is Family.STRING:
        return pa.string()
    if f is Family.BINARY:
        return pa.binary()
    if f is Family.BOOLEAN:
        return t
    if f is Family.DATE:
        return pa.date32()
    if f is Family.TIMESTAMP:
        return INSTANT if t.tz is not None else LOCAL
    raise QueryError(f"columns of type {t} cannot be used in expressions")


def spark_name(t: pa.DataType) -> str:
    """The Spark SQL name of (normal) type ``t``."""
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    names = {
        pa.int8(): "TINYINT",
        pa.int16(): "SMALLINT",
        pa.int32(): "INT",
        pa.int64(): "BIGINT",
        pa.float32(): "FLOAT",
        pa.float64(): "DOUBLE",
        pa.string(): "STRING",
        pa.binary(): "BINARY",
        pa.bool_(): "BOOLEAN",
        pa.date32(): "DATE",
        INSTANT: "TIMESTAMP",
        LOCAL: "TIMESTAMP_NTZ",
        pa.null(): "VOID",
    }
    for arrow, name in names.items():
        if t.equals(arrow):
            return name
    raise QueryError(f"no Spark type for {t}")


def is_integral(t: pa.DataType) -> bool:
    """TINYINT, SMALLINT, INT or BIGINT."""
    return pa.types.is_signed_integer(t)


def is_numeric(t: pa.DataType) -> bool:
    """An integral, floating or decimal type."""
    return is_integral(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _decimal_of(t: pa.DataType) -> pa.DataType:
    return _INT_DECIMAL[t.bit_width] if is_integral(t) else t


def _wider_decimal(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    a, b = _decimal_of(a), _decimal_of(b)
    scale = max(a.scale, b.scale)
    digits = max(a.precision - a.scale, b.precision - b.scale)
    return pa.decimal128(min(digits + scale, 38), min(scale, 38))


def _wider_number(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    if pa.types.is_decimal(a) or pa.types.is_decimal(b):
        if pa.types.is_floating(a) or pa.types.is_floating(b):
            return pa.float64()
        return _wider_decimal(a, b)
    return max(a, b, key=lambda t: next(i for i, n in enumerate(_NUMERIC) if n.equals(t)))


def common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The type Spark brings ``a`` and ``b`` to before comparing or choosing between them.

    Numbers widen (integral → decimal → double); a date meets a timestamp as a timestamp;
    a string meets a date or timestamp as one; TIMESTAMP_NTZ meets TIMESTAMP as TIMESTAMP;
    NULL takes the other type. Any other mix (a string with a number) is refused: cast it.
    """
    if a.equals(b):
        return a
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    if is_numeric(a) and is_numeric(b):
        return _wider_number(a, b)
    temporal = (pa.date32(), INSTANT, LOCAL)
    if any(a.equals(t) for t in temporal) and any(b.equals(t) for t in temporal):
        if (a.equals(LOCAL) and b.equals(pa.date32())) or (b.equals(LOCAL) and a.equals(pa.date32())):
            return LOCAL
        return INSTANT
    for s, other in ((a, b), (b, a)):
        if s.equals(pa.string()) and any(other.equals(t) for t in temporal):
            return other
    raise QueryError(f"cannot compare {spark_name(a)} with {spark_name(b)}; cast one of them")


def arithmetic_type(op: str, a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The result type of ``a op b`` for ``op`` in ``+ - * / % div`` (the operands are cast to it,
    except for decimal ``+ - *``, whose operands keep their own precision and scale)."""
    if not (is_numeric(a) or pa.types.is_null(a)) or not (is_numeric(b) or pa.types.is_null(b)):
        raise QueryError(f"{op} needs numbers, not {spark_name(a)} and {spark_name(b)}")
    t = common_type(a, b)
    if pa.types.is_null(t):
        t = pa.int32()
    if op == "div":
        if not is_integral(t):
            raise QueryError("div needs integral operands; cast them to BIGINT")
        return pa.int64()
    if op == "/":
        if pa.types.is_decimal(t):
            raise QueryError("/ on decimals is not supported; cast the operands to DOUBLE")
        return pa.float64()
    if not pa.types.is_decimal(t):
        return t
    if op == "%":
        raise QueryError("% on decimals is not supported; cast the operands to DOUBLE")
    da, db = (
        _decimal_of(a if not pa.types.is_null(a) else t),
        _decimal_of(b if not pa.types.is_null(b) else t),
    )
    pa_, sa, pb, sb = da.precision, da.scale, db.precision, db.scale
    if op in ("+", "-"):
        scale = max(sa, sb)
        precision = max(pa_ - sa, pb - sb) + scale + 1
    else:
        precision, scale = pa_ + pb + 1, sa + sb
    if precision > 38:
        raise QueryError(
            f"decimal {op} of DECIMAL({pa_}, {sa}) and DECIMAL({pb}, {sb}) needs more than 38 digits"
            " (Spark would round it); cast the operands to DOUBLE"
        )
    return pa.decimal128(precision, scale)
