"""Scalar expressions evaluated in process, on Arrow arrays, with Spark SQL's meaning.

:func:`evaluate` computes a typed tree (:mod:`.functions` built it) over a batch of
columns. Where a pyarrow kernel means what Spark means it is used (wrapping integer
arithmetic, Kleene AND / OR, ``coalesce``, string lengths in characters, calendar fields);
elsewhere the value is computed as Spark computes it, per value in Python (string
functions, casts from strings, time zones). Spark's choices followed, with
``spark.sql.ansi.enabled=false``:

* division and remainder by zero are NULL; integral overflow wraps; ``/`` is DOUBLE;
* floating comparisons order NaN above every number and equal to itself, and -0.0 equals 0.0;
* ``GREATEST`` / ``LEAST`` skip nulls; ``isnan(NULL)`` is false; a null condition of
  ``CASE`` / ``IF`` takes the next branch;
* ``trim`` removes spaces only; ``substring`` counts characters from 1 (0 is 1, negative
  positions from the end); ``round`` is half up on the value's shortest decimal form.
"""

from __future__ import annotations

import decimal
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.expressions import ast
from lakehouse_index.expressions.casts import cast, instants_to_local, locals_to_instant
from lakehouse_index.expressions.functions import TRUNC_UNITS
from lakehouse_index.expressions.sparktypes import INSTANT, common_type

__all__ = ["evaluate"]

Kernel = Callable[[ast.Call, list[pa.Array], str], pa.Array]
#: Enough digits for any double's decimal form (up to 1e308) to round without an error.
_WIDE = decimal.Context(prec=400)
_INT_MAX = 2**31 - 1


def evaluate(e: ast.Scalar, columns: Mapping[str, pa.Array], length: int, zone: str) -> pa.Array:
    """The values of ``e`` on a batch of ``length`` rows (``columns`` by name), in time zone ``zone``."""
    if isinstance(e, ast.Field):
        values = columns[e.name]
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        return values if values.type.equals(e.type) else values.cast(e.type)
    if isinstance(e, ast.Lit):
        return pa.repeat(pa.scalar(e.value, e.type), length)
    if length > 1 and _constant(e):  # CAST('2023-11-14' AS DATE): computed once, not per row
        return pa.repeat(evaluate(e, columns, 1, zone)[0], length)
    args = [evaluate(a, columns, length, zone) for a in e.args]
    out = _KERNELS[e.fn](e, args, zone)
    return out if out.type.equals(e.type) else out.cast(e.type)


def _constant(e: ast.Scalar) -> bool:
    """Whether ``e`` reads no column (every function here is deterministic)."""
    return not isinstance(e, ast.Field) and (isinstance(e, ast.Lit) or all(_constant(a) for a in e.args))


def _null_where(mask: Any, values: Any) -> Any:
    """``values`` with NULL where ``mask`` is true (a null mask keeps the value)."""
    return pc.if_else(pc.fill_null(mask, False), pa.scalar(None, values.type), values)


def _rows(fn: Callable[..., Any]) -> Kernel:
    """A kernel applying ``fn`` to each row's non-null argument values (a null argument gives NULL)."""

    def kernel(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
        columns = [a.to_pylist() for a in args]
        out = [None if any(v is None for v in row) else fn(*row) for row in zip(*columns, strict=True)]
        return pa.array(out, call.type)

    return kernel


# --------------------------------------------------------------------------- arithmetic


def _divide(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    a, b = args
    zero = pc.equal(b, pa.scalar(0, b.type))
    safe = pc.if_else(zero, pa.scalar(1, b.type), b)
    return _null_where(zero, pc.divide(a, safe))


def _integral_divide(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    a, b = args
    zero = pc.equal(b, pa.scalar(0, b.type))
    minus_one = pc.equal(b, pa.scalar(-1, b.type))
    safe = pc.if_else(pc.or_(zero, minus_one), pa.scalar(1, b.type), b)
    quotient = pc.if_else(minus_one, pc.negate(a), pc.divide(a, safe))
    return _null_where(zero, quotient)


def _remainder(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    a, b = args
    zero = pc.equal(b, pa.scalar(0, b.type))
    if pa.types.is_floating(b.type):
        x = a.to_numpy(zero_copy_only=False).astype(np.float64)
        y = b.to_numpy(zero_copy_only=False).astype(np.float64)
        with np.errstate(all="ignore"):
            r = np.fmod(x, np.where(y == 0, 1.0, y))
        mask = pc.or_kleene(a.is_null(), b.is_null()).to_numpy(zero_copy_only=False)
        return _null_where(zero, pa.array(r, pa.float64(), mask=mask).cast(b.type))
    unit = pc.or_(zero, pc.equal(b, pa.scalar(-1, b.type)))
    safe = pc.if_else(unit, pa.scalar(1, b.type), b)
    r = pc.subtract(a, pc.multiply(pc.divide(a, safe), safe))
    return _null_where(zero, r)


def _binary(fn: Callable[[Any, Any], Any]) -> Kernel:
    return lambda call, args, zone: fn(args[0], args[1])


# --------------------------------------------------------------------------- comparisons


def _float_parts(
    a: pa.Array, b: pa.Array
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x = a.to_numpy(zero_copy_only=False).astype(np.float64)
    y = b.to_numpy(zero_copy_only=False).astype(np.float64)
    null = pc.or_kleene(a.is_null(), b.is_null()).to_numpy(zero_copy_only=False)
    return x, y, np.isnan(x), np.isnan(y), null


def _spark_order(op: str, a: pa.Array, b: pa.Array) -> pa.Array:
    """``a op b`` for two arrays of one type, NaN largest and equal to itself (floats)."""
    if not pa.types.is_floating(a.type):
        fn = {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater}
        return fn.get(op, pc.greater_equal)(a, b)
    x, y, nx, ny, null = _float_parts(a, b)
    with np.errstate(invalid="ignore"):
        eq = (nx & ny) | (~nx & ~ny & (x == y))
        lt = (~nx & ny) | (~nx & ~ny & (x < y))
    gt = ~eq & ~lt
    out = {"=": eq, "!=": ~eq, "<": lt, "<=": lt | eq, ">": gt, ">=": gt | eq}[op]
    return pa.array(out, pa.bool_(), mask=null)


def _compare(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    a, b = args
    if call.fn == "<=>":
        both = pc.and_(a.is_null(), b.is_null())
        either = pc.or_(a.is_null(), b.is_null())
        return pc.if_else(either, both, pc.fill_null(_spark_order("=", a, b), False))
    return _spark_order(call.fn, a, b)


def _in(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    x, *values = args
    return functools.reduce(pc.or_kleene, [_spark_order("=", x, v) for v in values])


def _pick(op: str) -> Kernel:
    """GREATEST (``op`` ``>``) or LEAST (``<``): nulls skipped, the first of equal values kept."""

    def kernel(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
        out = args[0]
        for x in args[1:]:
            better = pc.fill_null(_spark_order(op, x, out), False)
            take = pc.or_(out.is_null(), pc.and_(x.is_valid(), better))
            out = pc.if_else(take, x, out)
        return out

    return kernel


# --------------------------------------------------------------------------- conditionals


def _if(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    c, a, b = args
    return pc.if_else(pc.fill_null(c, False), a, b)


def _case(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    out = args[-1]
    for i in range(len(args) - 3, -1, -2):
        out = pc.if_else(pc.fill_null(args[i], False), args[i + 1], out)
    return out


def _nullif(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    a, b = args
    t = common_type(a.type, b.type)
    return _null_where(_spark_order("=", cast(a, a.type, t, zone), cast(b, b.type, t, zone)), a)


# --------------------------------------------------------------------------- strings


def _substring(s: str, pos: int, length: int = _INT_MAX) -> str:
    n = len(s)
    start = pos - 1 if pos > 0 else n + pos if pos < 0 else 0
    end = start + length
    start = max(start, 0)
    return "" if start >= end else s[start:end]


def _pad(left: bool) -> Callable[..., str]:
    def pad(s: str, n: int, fill: str = " ") -> str:
        if n <= 0:
            return ""
        room = n - len(s)
        if room <= 0 or not fill:
            return s[:n]
        filler = (fill * (room // len(fill) + 1))[:room]
        return filler + s if left else s + filler

    return pad


def _replace(s: str, search: str, rep: str = "") -> str:
    return s if not search else s.replace(search, rep)


@functools.lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _concat_ws(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    columns = [a.to_pylist() for a in args]
    out = [
        None if row[0] is None else row[0].join(v for v in row[1:] if v is not None)
        for row in zip(*columns, strict=True)
    ]
    return pa.array(out, pa.string())


def _concat(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    return pc.binary_join_element_wise(*args, "", null_handling="emit_null")


def _like(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    pattern = call.args[1]
    assert isinstance(pattern, ast.Lit)
    return pc.match_like(args[0], pattern.value)


def _length(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    (a,) = args
    return pc.utf8_length(a) if pa.types.is_string(a.type) else pc.binary_length(a)


# --------------------------------------------------------------------------- date and time


def _in_zone(values: pa.Array, zone: str) -> pa.Array:
    """Instants as wall-clock times of ``zone`` (wall-clock times as they are)."""
    return instants_to_local(values, zone) if values.type.equals(INSTANT) else values


def _case_map(python: Callable[[str], str], ascii_kernel: Callable[[pa.Array], pa.Array]) -> Kernel:
    """``lower`` / ``upper``: pyarrow's ASCII kernel on ASCII text (Java's mapping there), else per value."""
    per_value = _rows(python)

    def kernel(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
        if pc.all(pc.fill_null(pc.string_is_ascii(args[0]), True)).as_py():
            return ascii_kernel(args[0])
        return per_value(call, args, zone)

    return kernel


def _field(fn: Callable[[pa.Array], pa.Array]) -> Kernel:
    return lambda call, args, zone: fn(_in_zone(args[0], zone))


def _date_add(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    d, n = args
    return pc.add(d.cast(pa.int32()), n).cast(pa.date32())


def _datediff(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    end, start = args
    return pc.subtract(end.cast(pa.int32()), start.cast(pa.int32()))


def _date_trunc(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    """Spark's ``truncTimestamp``: below a minute on the instant; minutes, hours and days on the
    wall-clock time, keeping the instant's offset where it is still valid (Java's
    ``ZonedDateTime.truncatedTo``); weeks (from Monday) and longer from the start of the day."""
    unit_lit = call.args[0]
    assert isinstance(unit_lit, ast.Lit)
    unit = TRUNC_UNITS[str(unit_lit.value).upper()]
    values = args[1]
    micros = pa.int64()
    if unit in ("microsecond", "millisecond", "second"):
        step = {"microsecond": 1, "millisecond": 1000, "second": 1_000_000}[unit]
        raw = values.cast(micros)
        toward_zero = pc.multiply(pc.divide(raw, step), step)
        floored = pc.if_else(pc.greater(toward_zero, raw), pc.subtract(toward_zero, step), toward_zero)
        return floored.cast(INSTANT)
    local = instants_to_local(values, zone)
    truncated = pc.floor_temporal(local, unit=unit, week_starts_monday=True)
    if unit not in ("minute", "hour", "day"):
        return locals_to_instant(truncated, zone)
    offset = pc.subtract(local.cast(micros), values.cast(micros))
    same_offset = pc.subtract(truncated.cast(micros), offset).cast(INSTANT)
    valid = pc.fill_null(pc.equal(instants_to_local(same_offset, zone), truncated), True)
    return pc.if_else(valid, same_offset, locals_to_instant(truncated, zone))


# --------------------------------------------------------------------------- math


def _round_value(x: Any, scale: int, t: pa.DataType) -> Any:
    if isinstance(x, float):
        if x != x or x in (float("inf"), float("-inf")):
            return x
        exact = decimal.Decimal(repr(x))
        return float(exact.quantize(decimal.Decimal(1).scaleb(-scale), decimal.ROUND_HALF_UP, _WIDE))
    if scale >= 0:
        return x
    unit = 10**-scale
    q, r = divmod(abs(x), unit)
    rounded = (q + (1 if 2 * r >= unit else 0)) * unit * (1 if x >= 0 else -1)
    bits = t.bit_width
    return (rounded + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)


def _round(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    scale = call.args[1].value if len(call.args) > 1 else 0  # type: ignore[union-attr]
    t = call.type
    values = [None if v is None else _round_value(v, scale, t) for v in args[0].to_pylist()]
    return pa.array(values, t)


def _floor_ceil(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    (a,) = args
    if not pa.types.is_floating(a.type):
        return a
    rounded = pc.floor(a) if call.fn == "floor" else pc.ceil(a)
    return cast(rounded, pa.float64(), pa.int64(), zone)


def _isnan(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    return pc.fill_null(pc.is_nan(args[0]), False)


def _unary(fn: Callable[[Any], Any]) -> Kernel:
    return lambda call, args, zone: fn(args[0])


def _cast(call: ast.Call, args: list[pa.Array], zone: str) -> pa.Array:
    return cast(args[0], call.args[0].type, call.type, zone)


_KERNELS: dict[str, Kernel] = {
    "cast": _cast,
    "+": _binary(pc.add),
    "-": _binary(pc.subtract),
    "*": _binary(pc.multiply),
    "/": _divide,
    "div": _integral_divide,
    "%": _remainder,
    "negative": _unary(pc.negate),
    **{op: _compare for op in ("=", "!=", "<", "<=", ">", ">=", "<=>")},
    "and": _binary(pc.and_kleene),
    "or": _binary(pc.or_kleene),
    "not": _unary(pc.invert),
    "isnull": _unary(pc.is_null),
    "isnotnull": _unary(pc.is_valid),
    "in": _in,
    "like": _like,
    "rlike": _rows(lambda s, p: _regex(p).search(s) is not None),
    "lower": _case_map(str.lower, pc.ascii_lower),
    "upper": _case_map(str.upper, pc.ascii_upper),
    "trim": _unary(lambda a: pc.utf8_trim(a, characters=" ")),
    "ltrim": _unary(lambda a: pc.utf8_ltrim(a, characters=" ")),
    "rtrim": _unary(lambda a: pc.utf8_rtrim(a, characters=" ")),
    "length": _length,
    "substring": _rows(_substring),
    "concat": _concat,
    "concat_ws": _concat_ws,
    "replace": _rows(_replace),
    "lpad": _rows(_pad(left=True)),
    "rpad": _rows(_pad(left=False)),
    "startswith": _rows(str.startswith),
    "endswith": _rows(str.endswith),
    "contains": _rows(lambda s, x: x in s),
    "to_date": _unary(lambda a: a),
    "year": _field(pc.year),
    "month": _field(pc.month),
    "day": _field(pc.day),
    "dayofweek": _field(lambda a: pc.day_of_week(a, count_from_zero=False, week_start=7)),
    "hour": _field(pc.hour),
    "minute": _field(pc.minute),
    "second": _field(pc.second),
    "date_trunc": _date_trunc,
    "date_add": _date_add,
    "datediff": _datediff,
    "if": _if,
    "case": _case,
    "coalesce": lambda call, args, zone: pc.coalesce(*args),
    "nullif": _nullif,
    "greatest": _pick(">"),
    "least": _pick("<"),
    "abs": _unary(pc.abs),
    "round": _round,
    "floor": _floor_ceil,
    "ceil": _floor_ceil,
    "sign": _unary(pc.sign),
    "isnan": _isnan,
}


def kernel_names() -> Sequence[str]:
    """The calls this module evaluates (every catalogue function and ``cast``)."""
    return tuple(_KERNELS)
