"""The function catalogue of scalar expressions: which calls exist, what they take and return.

:func:`call` builds a typed :class:`~.ast.Call` the way Spark SQL analyses it: it checks
the arity, brings the arguments to the types the function takes (inserting the casts
Spark's implicit coercion would, :mod:`.sparktypes`) and gives the result type. Every
function here is deterministic; the non-deterministic ones Spark has (``current_date``,
``rand``...) are refused by the binder. :data:`SUPPORTED` lists the names users may call
(the guide's table is generated from the same list by its test). Evaluation in process is
:mod:`.kernels`; the Spark rendering is :mod:`.spark`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from lakehouse_index.errors import QueryError
from lakehouse_index.expressions import ast
from lakehouse_index.expressions.casts import check_cast
from lakehouse_index.expressions.sparktypes import (
    INSTANT,
    LOCAL,
    arithmetic_type,
    common_type,
    is_integral,
    is_numeric,
    spark_name,
)

__all__ = ["ALIASES", "COMPARISONS", "SUPPORTED", "TRUNC_UNITS", "call", "cast_to", "type_of"]

Args = list[ast.Scalar]
Typer = Callable[[str, Args], tuple[Args, pa.DataType]]

#: Comparison calls (``<=>`` is null-safe equality).
COMPARISONS = ("=", "!=", "<", "<=", ">", ">=", "<=>")
#: The units ``date_trunc`` takes (Spark's spellings), by the truncation they mean.
TRUNC_UNITS = {
    "YEAR": "year",
    "YYYY": "year",
    "YY": "year",
    "QUARTER": "quarter",
    "MONTH": "month",
    "MM": "month",
    "MON": "month",
    "WEEK": "week",
    "DAY": "day",
    "DD": "day",
    "HOUR": "hour",
    "MINUTE": "minute",
    "SECOND": "second",
    "MILLISECOND": "millisecond",
    "MICROSECOND": "microsecond",
}


def type_of(e: ast.Scalar) -> pa.DataType:
    """The Arrow type of a scalar expression's values."""
    return e.type


def cast_to(e: ast.Scalar, t: pa.DataType) -> ast.Scalar:
    """``e`` as type ``t``: itself when already of it, else a cast (QueryError if unsupported)."""
    if e.type.equals(t):
        return e
    if isinstance(e, ast.Lit) and e.value is None:
        return ast.Lit(None, t)
    check_cast(e.type, t)
    return ast.Call("cast", (e,), t)


def _need(name: str, e: ast.Scalar, test: Callable[[pa.DataType], bool], what: str) -> None:
    if not (test(e.type) or pa.types.is_null(e.type)):
        raise QueryError(f"{name} needs {what}, not {spark_name(e.type)}")


def _common(name: str, args: Sequence[ast.Scalar]) -> pa.DataType:
    t: pa.DataType = pa.null()
    for a in args:
        t = common_type(t, a.type)
    return t


# --------------------------------------------------------------------------- typers


def _arithmetic(name: str, args: Args) -> tuple[Args, pa.DataType]:
    a, b = args
    if pa.types.is_null(a.type):
        a = cast_to(a, b.type if not pa.types.is_null(b.type) else pa.int32())
    if pa.types.is_null(b.type):
        b = cast_to(b, a.type)
    t = arithmetic_type(name, a.type, b.type)
    if pa.types.is_decimal(t) and name in ("+", "-", "*"):
        return [cast_to(x, _as_decimal(x.type)) for x in (a, b)], t
    operand = pa.int64() if name == "div" else t
    return [cast_to(a, operand), cast_to(b, operand)], t


def _as_decimal(t: pa.DataType) -> pa.DataType:
    if pa.types.is_decimal(t):
        return t
    return {8: pa.decimal128(3, 0), 16: pa.decimal128(5, 0), 32: pa.decimal128(10, 0)}.get(
        t.bit_width, pa.decimal128(20, 0)
    )


def _negate(name: str, args: Args) -> tuple[Args, pa.DataType]:
    (a,) = args
    _need(name, a, is_numeric, "a number")
    t = a.type if not pa.types.is_null(a.type) else pa.int32()
    return [cast_to(a, t)], t


def _same(name: str, args: Args) -> tuple[Args, pa.DataType]:
    """Arguments of one common type, result of that type (COALESCE, GREATEST, LEAST)."""
    t = _common(name, args)
    return [cast_to(a, t) for a in args], t


def _compare(name: str, args: Args) -> tuple[Args, pa.DataType]:
    t = _common(name, args)
    return [cast_to(a, t) for a in args], pa.bool_()


def _logic(name: str, args: Args) -> tuple[Args, pa.DataType]:
    return [
        cast_to(a, pa.bool_()) if pa.types.is_null(a.type) else _boolean(name, a) for a in args
    ], pa.bool_()


def _boolean(name: str, a: ast.Scalar) -> ast.Scalar:
    _need(name, a, pa.types.is_boolean, "a condition (BOOLEAN)")
    return a


def _null_test(name: str, args: Args) -> tuple[Args, pa.DataType]:
    return args, pa.bool_()


def _in(name: str, args: Args) -> tuple[Args, pa.DataType]:
    return _compare(name, args)


def _string_args(n_strings: int, ints: int = 0, result: pa.DataType | None = None) -> Typer:
    """``n_strings`` string arguments then ``ints`` INT ones; the result a string unless given."""

    def typer(name: str, args: Args) -> tuple[Args, pa.DataType]:
        out = []
        for i, a in enumerate(args):
            if i < n_strings:
                _need(name, a, pa.types.is_string, "STRING arguments")
                out.append(cast_to(a, pa.string()))
            else:
                _need(name, a, is_integral, "INT arguments after the string")
                out.append(cast_to(a, pa.int32()))
        return out, result if result is not None else pa.string()

    return typer


def _varargs_strings(name: str, args: Args) -> tuple[Args, pa.DataType]:
    for a in args:
        _need(name, a, pa.types.is_string, "STRING arguments")
    return [cast_to(a, pa.string()) for a in args], pa.string()


def _length(name: str, args: Args) -> tuple[Args, pa.DataType]:
    (a,) = args
    _need(name, a, lambda t: pa.types.is_string(t) or pa.types.is_binary(t), "a STRING or BINARY")
    return [cast_to(a, pa.string()) if pa.types.is_null(a.type) else a], pa.int32()


def _temporal_arg(name: str, a: ast.Scalar, to: pa.DataType) -> ast.Scalar:
    ok = (pa.string(), pa.date32(), INSTANT, LOCAL, pa.null())
    if not any(a.type.equals(t) for t in ok):
        raise QueryError(f"{name} needs a DATE, TIMESTAMP or STRING, not {spark_name(a.type)}")
    return cast_to(a, to)


def _date_part(name: str, args: Args) -> tuple[Args, pa.DataType]:
    (a,) = args
    return [_temporal_arg(name, a, pa.date32())], pa.int32()


def _time_part(name: str, args: Args) -> tuple[Args, pa.DataType]:
    (a,) = args
    to = LOCAL if a.type.equals(LOCAL) else INSTANT
    return [_temporal_arg(name, a, to)], pa.int32()


def _to_date(name: str, args: Args) -> tuple[Args, pa.DataType]:
    (a,) = args
    return [_temporal_arg(name, a, pa.date32())], pa.date32()


def _date_add(name: str, args: Args) -> tuple[Args, pa.DataType]:
    d, n = args
    _need(name, n, lambda t: is_integral(t) and t.bit_width <= 32, "an INT number of days")
    return [_temporal_arg(name, d, pa.date32()), cast_to(n, pa.int32())], pa.date32()


def _datediff(name: str, args: Args) -> tuple[Args, pa.DataType]:
    return [_temporal_arg(name, a, pa.date32()) for a in args], pa.int32()


def _date_trunc(name: str, args: Args) -> tuple[Args, pa.DataType]:
    unit, ts = args
    if not (isinstance(unit, ast.Lit) and isinstance(unit.value, str)):
        raise QueryError("date_trunc needs its unit as a string literal ('HOUR', 'DAY', ...)")
    if unit.value.upper() not in TRUNC_UNITS:
        raise QueryError(f"date_trunc unit {unit.value!r} is not one of {', '.join(TRUNC_UNITS)}")
    return [unit, _temporal_arg(name, ts, INSTANT)], INSTANT


def _if(name: str, args: Args) -> tuple[Args, pa.DataType]:
    c, a, b = args
    t = _common(name, [a, b])
    return [_logic(name, [c])[0][0], cast_to(a, t), cast_to(b, t)], t


def _case(name: str, args: Args) -> tuple[Args, pa.DataType]:
    """``args``: condition, value, condition, value, ..., else value."""
    conditions, values = args[:-1:2], [*args[1:-1:2], args[-1]]
    t = _common(name, values)
    out: Args = []
    for c, v in zip(conditions, values, strict=False):
        out += [_logic(name, [c])[0][0], cast_to(v, t)]
    return [*out, cast_to(values[-1], t)], t


def _nullif(name: str, args: Args) -> tuple[Args, pa.DataType]:
    """``nullif(a, b)``: of ``a``'s type (Spark's ``if(a = b, NULL, a)``), compared in the common type."""
    a, b = args
    _common(name, args)  # refuses operands that cannot be compared
    return [a, b], a.type


def _numeric_same(name: str, args: Args) -> tuple[Args, pa.DataType]:
    (a,) = args
    _need(name, a, lambda t: is_integral(t) or pa.types.is_floating(t), "an integral or floating number")
    t = a.type if not pa.types.is_null(a.type) else pa.int32()
    return [cast_to(a, t)], t


def _round(name: str, args: Args) -> tuple[Args, pa.DataType]:
    a, *scale = args
    _need(name, a, lambda t: is_integral(t) or pa.types.is_floating(t), "an integral or floating number")
    if scale and not (isinstance(scale[0], ast.Lit) and isinstance(scale[0].value, int)):
        raise QueryError("round needs its scale as an integer literal")
    t = a.type if not pa.types.is_null(a.type) else pa.int32()
    return [cast_to(a, t), *scale], t


def _floor(name: str, args: Args) -> tuple[Args, pa.DataType]:
    (a,) = args
    _need(name, a, lambda t: is_integral(t) or pa.types.is_floating(t), "an integral or floating number")
    return [cast_to(a, pa.float64() if pa.types.is_floating(a.type) else pa.int64())], pa.int64()


def _to_double(name: str, args: Args) -> tuple[Args, pa.DataType]:
    (a,) = args
    _need(name, a, is_numeric, "a number")
    return [cast_to(a, pa.float64())], pa.float64()


def _isnan(name: str, args: Args) -> tuple[Args, pa.DataType]:
    (a,) = args
    _need(name, a, is_numeric, "a number")
    return [cast_to(a, pa.float64())], pa.bool_()


def _like(name: str, args: Args) -> tuple[Args, pa.DataType]:
    s, pattern = args
    _need(name, s, pa.types.is_string, "a STRING")
    if not (isinstance(pattern, ast.Lit) and isinstance(pattern.value, str)):
        raise QueryError("LIKE needs its pattern as a string literal")
    return [cast_to(s, pa.string()), pattern], pa.bool_()


@dataclass(frozen=True)
class _Function:
    arity: tuple[int, int]  # least and most arguments (-1: any number)
    typer: Typer


_F = _Function
_STR1 = _string_args(1)
_CATALOGUE: dict[str, _Function] = {
    **{op: _F((2, 2), _arithmetic) for op in ("+", "-", "*", "/", "%", "div")},
    "negative": _F((1, 1), _negate),
    **{op: _F((2, 2), _compare) for op in COMPARISONS},
    "and": _F((2, 2), _logic),
    "or": _F((2, 2), _logic),
    "not": _F((1, 1), _logic),
    "isnull": _F((1, 1), _null_test),
    "isnotnull": _F((1, 1), _null_test),
    "in": _F((2, -1), _in),
    "like": _F((2, 2), _like),
    "rlike": _F((2, 2), _string_args(2, result=pa.bool_())),
    "lower": _F((1, 1), _STR1),
    "upper": _F((1, 1), _STR1),
    "trim": _F((1, 1), _STR1),
    "ltrim": _F((1, 1), _STR1),
    "rtrim": _F((1, 1), _STR1),
    "length": _F((1, 1), _length),
    "substring": _F((2, 3), _string_args(1, ints=2)),
    "concat": _F((1, -1), _varargs_strings),
    "concat_ws": _F((1, -1), _varargs_strings),
    "replace": _F((2, 3), _string_args(3)),
    "lpad": _F((2, 3), lambda n, a: _pad(n, a)),
    "rpad": _F((2, 3), lambda n, a: _pad(n, a)),
    "startswith": _F((2, 2), _string_args(2, result=pa.bool_())),
    "endswith": _F((2, 2), _string_args(2, result=pa.bool_())),
    "contains": _F((2, 2), _string_args(2, result=pa.bool_())),
    "to_date": _F((1, 1), _to_date),
    "year": _F((1, 1), _date_part),
    "month": _F((1, 1), _date_part),
    "day": _F((1, 1), _date_part),
    "dayofweek": _F((1, 1), _date_part),
    "hour": _F((1, 1), _time_part),
    "minute": _F((1, 1), _time_part),
    "second": _F((1, 1), _time_part),
    "date_trunc": _F((2, 2), _date_trunc),
    "date_add": _F((2, 2), _date_add),
    "datediff": _F((2, 2), _datediff),
    "if": _F((3, 3), _if),
    "case": _F((2, -1), _case),
    "coalesce": _F((1, -1), _same),
    "nullif": _F((2, 2), _nullif),
    "greatest": _F((2, -1), _same),
    "least": _F((2, -1), _same),
    "abs": _F((1, 1), _numeric_same),
    "round": _F((1, 2), _round),
    "floor": _F((1, 1), _floor),
    "ceil": _F((1, 1), _floor),
    "sign": _F((1, 1), _to_double),
    "isnan": _F((1, 1), _isnan),
}


def _pad(name: str, args: Args) -> tuple[Args, pa.DataType]:
    s, n, *fill = args
    typed, _ = _string_args(1, ints=1)(name, [s, n])
    return [*typed, *_varargs_strings(name, fill)[0]], pa.string()


#: Names the binder accepts for catalogue functions, besides their own.
ALIASES = {
    "substr": "substring",
    "dayofmonth": "day",
    "date": "to_date",
    "nvl": "coalesce",
    "ifnull": "coalesce",
    "signum": "sign",
    "ceiling": "ceil",
    "regexp_like": "rlike",
    "char_length": "length",
    "character_length": "length",
}
#: The function names a ``where`` may call (besides operators, CAST, CASE, IN, LIKE...), sorted.
SUPPORTED: tuple[str, ...] = tuple(
    sorted(
        {n for n in _CATALOGUE if n.isidentifier() and n not in ("and", "or", "not", "in", "like", "case")}
        | {*ALIASES, "cast", "try_cast", "date_sub"}
    )
)


def call(name: str, args: Sequence[ast.Scalar]) -> ast.Call:
    """The typed call of catalogue function ``name`` on ``args`` (QueryError when it does not fit)."""
    f = _CATALOGUE.get(name)
    if f is None:
        raise QueryError(f"unknown function {name!r}; supported: {', '.join(SUPPORTED)}")
    least, most = f.arity
    if len(args) < least or (most >= 0 and len(args) > most):
        want = f"{least}" if least == most else f"{least} or more" if most < 0 else f"{least} to {most}"
        raise QueryError(f"{name} takes {want} argument(s), got {len(args)}")
    typed, t = f.typer(name, list(args))
    return ast.Call(name, tuple(typed), t)
