"""``where`` predicates rendered for the format libraries that commit writes.

* :func:`to_datafusion_sql`: SQL text for deltalake (DataFusion dialect: identifiers in
  double quotes; integer, float and timestamp literals cast to the column's exact Arrow
  type, because delta-rs refuses comparisons of Int32 with Int64 or of µs with ns).

It starts from the bound AST of :class:`lakehouse_index.expressions.Predicate`, so a
``where`` means the same rows for ``scan`` and deltalake. Iceberg writes need no
rendering: they find the rows with this library's own reader and rewrite those files
(the Iceberg writer, ``lakehouse_index_iceberg.write``). A ``where`` holding scalar
expressions (:class:`~.ast.Test`: ``id % 7 = 1``) is never rendered: DataFusion gives
division by zero, ``%``, casts and string functions other meanings than Spark SQL, so
such writes find their rows with this library's reader on every format
(``lakehouse_index.workflows.writes``).
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from typing import Any

import pyarrow as pa
from sqlglot import exp

from lakehouse_index.errors import QueryError
from lakehouse_index.expressions import Predicate, ast
from lakehouse_index.expressions.spark import COMPARE_NODES, literal
from lakehouse_index.expressions.types import Family, family

_DIALECT = "postgres"
_UNITS = {"s": "Second", "ms": "Millisecond", "us": "Microsecond", "ns": "Nanosecond"}


# --------------------------------------------------------------------------- DataFusion


def _arrow_rs_type(t: pa.DataType) -> str | None:
    """The arrow-rs name of an integer, float or timestamp type (for ``arrow_cast``)."""
    if pa.types.is_integer(t):
        bits = t.bit_width
        return f"{'Int' if pa.types.is_signed_integer(t) else 'UInt'}{bits}"
    if pa.types.is_floating(t):
        return f"Float{t.bit_width}"
    if isinstance(t, pa.TimestampType):
        tz = f'Some("{t.tz}")' if t.tz else "None"
        return f"Timestamp({_UNITS[t.unit]}, {tz})"
    return None


def _df_literal(value: Any, lit_type: pa.DataType, column_type: pa.DataType | None) -> exp.Expression:
    """A literal typed for DataFusion: cast to the column's exact type when of the same family."""
    f = family(lit_type)
    base: exp.Expression
    if f is Family.TIMESTAMP:
        assert isinstance(value, dt.datetime)
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
            base = exp.Literal.string(value.isoformat() + "Z")
        else:
            base = exp.Literal.string(value.isoformat())
    elif f is Family.INTEGER:
        base = exp.Literal.number(int(value))
    else:
        base = literal(value, lit_type)
    target = column_type if column_type is not None and family(column_type) is f else lit_type
    name = _arrow_rs_type(target)
    if name is None:
        return base
    return exp.Anonymous(this="arrow_cast", expressions=[base, exp.Literal.string(name)])


def _df_column(name: str, qualifier: str | None) -> exp.Column:
    table = exp.to_identifier(qualifier) if qualifier else None
    return exp.Column(this=exp.to_identifier(name, quoted=True), table=table)


def _df_sql_type(t: pa.DataType) -> exp.DataType:
    f = family(t)
    if f is Family.FLOAT:
        return exp.DataType.build("DOUBLE")
    if f is Family.INTEGER:
        return exp.DataType.build("BIGINT")
    if f is Family.DECIMAL:
        assert isinstance(t, (pa.Decimal128Type, pa.Decimal256Type))
        return exp.DataType.build(f"DECIMAL({t.precision}, {t.scale})")
    raise QueryError(f"no DataFusion cast to {t}")


def _is_float(t: pa.DataType) -> bool:
    return family(t) is Family.FLOAT


def _isnan(e: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this="isnan", expressions=[e])


def _paren(e: Any) -> exp.Paren:
    return exp.Paren(this=e)


def _any(parts: list[exp.Expression]) -> exp.Expression:
    return functools.reduce(lambda a, b: exp.Or(this=a, expression=b), parts)


def _never(column: exp.Expression) -> exp.Expression:
    """FALSE for a value, NULL for a null: an atom no value of the column satisfies."""
    return _paren(exp.And(this=exp.Is(this=column, expression=exp.Null()), expression=exp.Null()))


class _DataFusion:
    """Renders the AST so that DataFusion picks the rows our pyarrow evaluator picks.

    Where the engines differ, the rendering says what we mean: DataFusion orders NaN above
    every number and equal to itself, pyarrow compares IEEE (NaN is unequal to everything,
    neither smaller nor larger), so float comparisons carry ``isnan`` guards; a float32
    column meets a double literal it cannot hold as a double (``0.1``), not cast down; IN
    values the column cannot hold match nothing (never cast to the column type, which
    fails or wraps); a float IN list is an OR of guarded equalities; BETWEEN is the two
    comparisons pyarrow evaluates.
    """

    def __init__(self, schema: pa.Schema, qualifier: str | None) -> None:
        self.schema = schema
        self.qualifier = qualifier

    def col_type(self, name: str) -> pa.DataType:
        return self.schema.field(name).type

    def column(self, name: str) -> exp.Column:
        return _df_column(name, self.qualifier)

    def value(self, lit: ast.Lit, column: str) -> exp.Expression:
        return _df_literal(lit.value, lit.type, self.col_type(column))

    def operand_pair(self, left: ast.Operand, right: ast.Operand) -> tuple[exp.Expression, exp.Expression]:
        if isinstance(left, ast.Col) and isinstance(right, ast.Col):
            return self.column(left.name), self.column(right.name)
        col, lit = (left, right) if isinstance(left, ast.Col) else (right, left)
        assert isinstance(col, ast.Col) and isinstance(lit, ast.Lit)
        col_type = self.col_type(col.name)
        col_e: exp.Expression = self.column(col.name)
        if family(col_type) is family(lit.type) and not (
            _is_float(col_type) and not lit.type.equals(col_type)
        ):
            lit_e = self.value(lit, col.name)
        elif _is_float(col_type) and _is_float(lit.type):
            # e.g. float32_col = 0.1 (no float32 value): compare in the literal's (wider) type.
            col_e = exp.Anonymous(this="arrow_cast", expressions=[col_e, exp.Literal.string("Float64")])
            lit_e = _df_literal(lit.value, lit.type, None)
        else:  # e.g. int_col = 1.5: compare as the literal's type
            col_e = exp.Cast(this=col_e, to=_df_sql_type(lit.type))
            lit_e = _df_literal(lit.value, lit.type, None)
        return (col_e, lit_e) if isinstance(left, ast.Col) else (lit_e, col_e)

    def compare(self, node: ast.Compare) -> exp.Expression:
        left, right = self.operand_pair(node.left, node.right)
        e: exp.Expression = _paren(COMPARE_NODES[node.op](this=left, expression=right))
        floats = [
            self.column(o.name)
            for o in (node.left, node.right)
            if isinstance(o, ast.Col) and _is_float(self.col_type(o.name))
        ]
        lits = [o.value for o in (node.left, node.right) if isinstance(o, ast.Lit)]
        if any(isinstance(v, float) and math.isnan(v) for v in lits):
            col = (
                floats[0]
                if floats
                else self.column(next(o.name for o in (node.left, node.right) if isinstance(o, ast.Col)))
            )
            never = _never(col)
            return _paren(exp.Not(this=never)) if node.op == "!=" else never
        if not floats:
            return e
        if len(floats) == 1 and len(lits) == 1:
            # IEEE: NaN != x is TRUE, every other comparison with NaN FALSE; a null stays null.
            nan = _isnan(floats[0])
            if node.op == "!=":
                return _paren(exp.Or(this=e, expression=nan))
            return _paren(exp.And(this=e, expression=exp.Not(this=nan)))
        # Two columns: NULL when either is null, else the IEEE outcome when either is NaN.
        any_null = _any([exp.Is(this=c, expression=exp.Null()) for c in floats])
        any_nan = _any([_isnan(c) for c in floats])
        case = (
            exp.Case()
            .when(any_null, exp.Cast(this=exp.Null(), to=exp.DataType.build("BOOLEAN")))
            .when(any_nan, exp.Boolean(this=node.op == "!="))
            .else_(e)
        )
        return _paren(case)

    def render(self, node: ast.Node) -> exp.Expression:
        if isinstance(node, ast.Const):
            return exp.Boolean(this=node.value)
        if isinstance(node, ast.Not):
            return _paren(exp.Not(this=self.render(node.part)))
        if isinstance(node, ast.And):
            parts = [self.render(p) for p in node.parts]
            return _paren(functools.reduce(lambda a, b: exp.And(this=a, expression=b), parts))
        if isinstance(node, ast.Or):
            parts = [self.render(p) for p in node.parts]
            return _paren(functools.reduce(lambda a, b: exp.Or(this=a, expression=b), parts))
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.Test):
            raise QueryError(
                "a where with expressions is evaluated by this library's reader, not rendered for deltalake"
            )
        name = node.column.name
        col_type = self.col_type(name)
        e: exp.Expression
        if isinstance(node, ast.In):
            # Values of another type than the column's cannot equal any of its values.
            held = [v for v in node.values if v.type.equals(node.column_type)]
            if not held:
                e = _never(self.column(name))
            elif _is_float(col_type):
                eqs = [self.compare(ast.Compare("=", node.column, v)) for v in held]
                e = _paren(_any(eqs))
            else:
                values = [self.value(v, name) for v in held]
                e = _paren(exp.In(this=self.column(name), expressions=values))
        elif isinstance(node, ast.IsNull):
            e = _paren(exp.Is(this=self.column(name), expression=exp.Null()))
        elif isinstance(node, ast.Between):
            low = self.compare(ast.Compare(">=", node.column, node.low))
            high = self.compare(ast.Compare("<=", node.column, node.high))
            e = _paren(exp.And(this=low, expression=high))
        elif isinstance(node, ast.Like):
            e = _paren(exp.Like(this=self.column(name), expression=exp.Literal.string(node.pattern)))
        else:
            raise QueryError(f"cannot render {node!r} for deltalake")
        return _paren(exp.Not(this=e)) if node.negated else e


def to_datafusion_sql(predicate: Predicate, qualifier: str | None = None) -> str:
    """The predicate as DataFusion SQL for deltalake; columns qualified by ``qualifier`` if given."""
    if predicate.node is None:
        raise QueryError("writes need the where clause as SQL text, not a pyarrow Expression")
    return _DataFusion(predicate.schema, qualifier).render(predicate.node).sql(dialect=_DIALECT)


def column_sql(name: str, qualifier: str | None = None) -> str:
    """A column reference in DataFusion SQL (double-quoted, optionally qualified)."""
    return _df_column(name, qualifier).sql(dialect=_DIALECT)


def sql_value(value: Any, t: pa.DataType) -> str:
    """DataFusion SQL text of a Python value for a column of type ``t`` (``NULL`` for None)."""
    if value is None:
        return "NULL"
    return _df_literal(value, t, t).sql(dialect=_DIALECT)
