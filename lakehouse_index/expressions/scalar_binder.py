"""sqlglot expressions → typed scalar trees (:class:`~.ast.Field`, :class:`~.ast.Lit`, :class:`~.ast.Call`).

The binder (:mod:`.binder`) keeps column-against-literal atoms for the planner and hands
every other condition here. sqlglot's Spark reader already names the function of each
node (``Lower``, ``TsOrDsToDate`` for ``to_date``, ``TryCast`` for Spark's lenient
``CAST``); this module maps each to the catalogue (:mod:`.functions`), which types it.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from sqlglot import exp

from lakehouse_index.errors import QueryError
from lakehouse_index.expressions import ast
from lakehouse_index.expressions.functions import ALIASES, call, cast_to
from lakehouse_index.expressions.literals import decimal_literal, number
from lakehouse_index.expressions.sparktypes import INSTANT, LOCAL, normal

__all__ = ["ScalarBinder"]

_T = exp.DataType.Type
_TYPES: dict[Any, pa.DataType] = {
    _T.TINYINT: pa.int8(),
    _T.SMALLINT: pa.int16(),
    _T.INT: pa.int32(),
    _T.BIGINT: pa.int64(),
    _T.FLOAT: pa.float32(),
    _T.DOUBLE: pa.float64(),
    _T.TEXT: pa.string(),
    _T.VARCHAR: pa.string(),
    _T.CHAR: pa.string(),
    _T.BOOLEAN: pa.bool_(),
    _T.DATE: pa.date32(),
    _T.TIMESTAMP: INSTANT,
    _T.TIMESTAMPLTZ: INSTANT,
    _T.TIMESTAMPTZ: INSTANT,
    _T.TIMESTAMPNTZ: LOCAL,
    _T.DATETIME: LOCAL,
    _T.BINARY: pa.binary(),
    _T.VARBINARY: pa.binary(),
}

#: sqlglot nodes → (catalogue function, how its arguments are read off the node).
_BINARY: dict[type[exp.Expression], str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
    exp.IntDiv: "div",
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.NullSafeEQ: "<=>",
    exp.And: "and",
    exp.Or: "or",
    exp.RegexpLike: "rlike",
    exp.StartsWith: "startswith",
    exp.EndsWith: "endswith",
    exp.Contains: "contains",
    exp.DateDiff: "datediff",
    exp.Nullif: "nullif",
}
_UNARY: dict[type[exp.Expression], str] = {
    exp.Neg: "negative",
    exp.Not: "not",
    exp.Lower: "lower",
    exp.Upper: "upper",
    exp.Length: "length",
    exp.Year: "year",
    exp.Month: "month",
    exp.Day: "day",
    exp.DayOfMonth: "day",
    exp.DayOfWeek: "dayofweek",
    exp.Hour: "hour",
    exp.Minute: "minute",
    exp.Second: "second",
    exp.Abs: "abs",
    exp.Floor: "floor",
    exp.Ceil: "ceil",
    exp.Sign: "sign",
    exp.IsNan: "isnan",
}
_VARARGS: dict[type[exp.Expression], str] = {
    exp.Coalesce: "coalesce",
    exp.Greatest: "greatest",
    exp.Least: "least",
    exp.Concat: "concat",
    exp.ConcatWs: "concat_ws",
    exp.DPipe: "concat",
}
_TRIMS = {None: "trim", "BOTH": "trim", "LEADING": "ltrim", "TRAILING": "rtrim"}
#: Spark functions whose value changes between evaluations: never in a where of this library.
_NONDETERMINISTIC: tuple[type[exp.Expression], ...] = (
    exp.CurrentDate,
    exp.CurrentTimestamp,
    exp.CurrentTime,
    exp.Rand,
    exp.Uuid,
)
_NONDETERMINISTIC_NAMES = frozenset(
    [
        "now",
        "current_date",
        "current_timestamp",
        "localtimestamp",
        "rand",
        "random",
        "randn",
        "uuid",
        "monotonically_increasing_id",
        "spark_partition_id",
        "input_file_name",
        "shuffle",
        "unix_timestamp",
        "current_timezone",
        "curdate",
    ]
)


def arrow_type(dtype: exp.DataType) -> pa.DataType:
    """The Arrow type of a Spark SQL type name (QueryError for types expressions do not take)."""
    if dtype.this == _T.DECIMAL:
        params = [int(p.name) for p in dtype.expressions]
        precision, scale = (params + [10, 0][len(params) :])[:2]
        if not 0 < precision <= 38 or not 0 <= scale <= precision:
            raise QueryError(f"bad decimal type {dtype.sql(dialect='spark')}")
        return pa.decimal128(precision, scale)
    t = _TYPES.get(dtype.this)
    if t is None:
        raise QueryError(f"CAST to {dtype.sql(dialect='spark')} is not supported")
    return t


class ScalarBinder:
    """Binds scalar sqlglot expressions against ``schema``; ``fail`` makes its errors."""

    def __init__(self, schema: pa.Schema, fail: Callable[[str], QueryError]) -> None:
        self.schema = schema
        self.fail = fail

    def call(self, name: str, args: list[ast.Scalar]) -> ast.Call:
        try:
            return call(name, args)
        except QueryError as e:
            raise self.fail(str(e)) from None

    def bind(self, e: exp.Expression | None) -> ast.Scalar:
        """The typed tree of scalar expression ``e`` (None: a function's missing argument)."""
        if e is None:
            raise self.fail("a function call lacks an argument")
        if isinstance(e, exp.Paren):
            return self.bind(e.this)
        if isinstance(e, exp.Column):
            if e.table:
                raise self.fail(f"expected a column name, got {e.sql(dialect='spark')!r}")
            if e.name not in self.schema.names:
                raise self.fail(f"unknown column {e.name!r}; the table has {', '.join(self.schema.names)}")
            try:
                return ast.Field(e.name, normal(self.schema.field(e.name).type))
            except QueryError as err:
                raise self.fail(f"column {e.name!r}: {err}") from None
        literal = self.literal(e)
        if literal is not None:
            return literal
        if isinstance(e, _NONDETERMINISTIC) or (
            isinstance(e, exp.Anonymous) and str(e.this).lower() in _NONDETERMINISTIC_NAMES
        ):
            raise self.fail(
                f"{e.sql(dialect='spark')} is not deterministic: a where or an index key "
                "must mean the same each time"
            )
        if isinstance(e, (exp.Cast, exp.TryCast)):
            try:
                return cast_to(self.bind(e.this), arrow_type(e.to))
            except QueryError as err:
                raise self.fail(str(err)) from None
        if isinstance(e, exp.NullSafeNEQ):
            return self.call("not", [self.call("<=>", [self.bind(e.this), self.bind(e.expression)])])
        for cls, name in _BINARY.items():
            if type(e) is cls:
                return self.call(name, [self.bind(e.this), self.bind(e.expression)])
        for cls, name in _UNARY.items():
            if type(e) is cls:
                return self.call(name, [self.bind(e.this)])
        for cls, name in _VARARGS.items():
            if type(e) is cls:
                parts = [e.this, *e.expressions] if e.this is not None else list(e.expressions)
                return self.call(name, [self.bind(p) for p in parts])
        return self.special(e)

    def special(self, e: exp.Expression) -> ast.Scalar:
        """Nodes whose arguments are not ``this`` / ``expression`` / ``expressions``."""
        b = self.bind
        if isinstance(e, exp.TsOrDsToDate):
            if e.args.get("format") is not None:
                raise self.fail("to_date with a format is not supported")
            return self.call("to_date", [b(e.this)])
        if isinstance(e, exp.Is):
            if isinstance(e.expression, exp.Null):
                return self.call("isnull", [b(e.this)])
            raise self.fail(f"unsupported IS {e.expression.sql(dialect='spark')}")
        if isinstance(e, exp.In):
            if e.args.get("query") is not None or e.args.get("unnest") is not None:
                raise self.fail("IN (subquery) is not supported")
            return self.call("in", [b(e.this), *(b(v) for v in e.expressions)])
        if isinstance(e, exp.Between):
            x = b(e.this)
            low, high = self.call(">=", [x, b(e.args["low"])]), self.call("<=", [x, b(e.args["high"])])
            return self.call("and", [low, high])
        if isinstance(e, exp.Like):
            if e.args.get("escape") is not None:
                raise self.fail("LIKE ... ESCAPE is not supported")
            like = self.call("like", [b(e.this), b(e.expression)])
            return self.call("not", [like]) if e.args.get("negate") else like
        if isinstance(e, exp.Trim):
            if e.expression is not None:
                raise self.fail("trim with characters to remove is not supported (it removes spaces)")
            return self.call(_TRIMS[e.args.get("position")], [b(e.this)])
        if isinstance(e, exp.Substring):
            rest = [e.args[k] for k in ("start", "length") if e.args.get(k) is not None]
            return self.call("substring", [b(e.this), *(b(x) for x in rest)])
        if isinstance(e, exp.Replace):
            rest = [e.args[k] for k in ("expression", "replacement") if e.args.get(k) is not None]
            return self.call("replace", [b(e.this), *(b(x) for x in rest)])
        if isinstance(e, exp.Pad):
            rest = [e.args[k] for k in ("expression", "fill_pattern") if e.args.get(k) is not None]
            return self.call("lpad" if e.args.get("is_left") else "rpad", [b(e.this), *(b(x) for x in rest)])
        if isinstance(e, exp.TimestampTrunc):
            unit = ast.Lit(e.unit.name if isinstance(e.unit, exp.Var) else str(e.text("unit")), pa.string())
            return self.call("date_trunc", [unit, b(e.this)])
        if isinstance(e, exp.TsOrDsAdd):
            if e.text("unit").upper() not in ("DAY", ""):
                raise self.fail(f"unsupported date arithmetic {e.sql(dialect='spark')!r}")
            return self.call("date_add", [b(e.this), b(e.expression)])
        if isinstance(e, exp.If):
            default = e.args.get("false")
            return self.call("if", [self.bind(e.this), b(e.args["true"]), self.null_or(default)])
        if isinstance(e, exp.Case):
            if e.this is not None:
                raise self.fail("CASE <value> WHEN ... is not supported; write CASE WHEN <condition>")
            args: list[ast.Scalar] = []
            for branch in e.args.get("ifs") or []:
                args += [self.bind(branch.this), b(branch.args["true"])]
            return self.call("case", [*args, self.null_or(e.args.get("default"))])
        if isinstance(e, exp.Round):
            decimals = e.args.get("decimals")
            return self.call("round", [b(e.this), *([b(decimals)] if decimals is not None else [])])
        if isinstance(e, exp.Anonymous):
            name = str(e.this).lower()
            return self.call(ALIASES.get(name, name), [b(x) for x in e.expressions])
        if isinstance(e, exp.Func):
            name = e.sql_name().lower()
            nodes = [v for v in e.args.values() if isinstance(v, exp.Expression)]
            nodes += [x for v in e.args.values() if isinstance(v, list) for x in v]
            return self.call(ALIASES.get(name, name), [b(x) for x in nodes])
        raise self.fail(f"unsupported expression {e.sql(dialect='spark')!r}")

    def null_or(self, e: exp.Expression | None) -> ast.Scalar:
        return ast.Lit(None, pa.null()) if e is None else self.bind(e)

    def literal(self, e: exp.Expression) -> ast.Lit | None:
        """A literal as Spark types it: INT, then BIGINT, then DECIMAL for integers; DECIMAL for
        ``1.5``, DOUBLE for ``1e3``; STRING, BOOLEAN, BINARY (``X'..'``), NULL; None if ``e`` is none."""
        if isinstance(e, exp.Null):
            return ast.Lit(None, pa.null())
        if isinstance(e, exp.Boolean):
            return ast.Lit(bool(e.this), pa.bool_())
        if isinstance(e, exp.HexString):
            return ast.Lit(bytes.fromhex(str(e.this)), pa.binary())
        if type(e) is exp.Concat and all(isinstance(p, exp.Literal) and p.is_string for p in e.expressions):
            return ast.Lit("".join(str(p.this) for p in e.expressions), pa.string())
        sign = ""
        if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal) and not e.this.is_string:
            sign, e = "-", e.this  # Spark reads -2147483648 as one INT literal
        if not isinstance(e, exp.Literal):
            return None
        if e.is_string:
            return ast.Lit(str(e.this), pa.string())
        text = sign + str(e.this)
        if "e" in text.lower():
            return ast.Lit(float(text), pa.float64())
        v = number(text)
        if isinstance(v, int):
            if -(2**31) <= v < 2**31:
                return ast.Lit(v, pa.int32())
            if -(2**63) <= v < 2**63:
                return ast.Lit(v, pa.int64())
        lit = decimal_literal(decimal.Decimal(v))
        if lit is None:
            raise self.fail(f"number {text} has more than 38 digits")
        return lit
