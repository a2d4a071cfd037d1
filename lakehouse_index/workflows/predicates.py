"""``where`` predicates rendered for the format libraries that commit writes.

* :func:`to_datafusion_sql`: SQL text for deltalake (DataFusion dialect: identifiers in
  double quotes; integer, float and timestamp literals cast to the column's exact Arrow
  type, because delta-rs refuses comparisons of Int32 with Int64 or of µs with ns);
* :func:`to_iceberg`: a pyiceberg ``BooleanExpression`` that is true exactly where the
  SQL predicate is TRUE. SQL's three-valued logic is kept by pushing negations down
  with explicit ``NotNull`` guards (Iceberg's own ``notEqual``/``notIn`` match nulls).

Both start from the bound AST of :class:`lakehouse_index.expressions.Predicate`, so a
``where`` means the same rows for ``scan``, deltalake and pyiceberg.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

import pyarrow as pa
from sqlglot import exp

from lakehouse_index.errors import QueryError
from lakehouse_index.expressions import Predicate, ast
from lakehouse_index.expressions.spark import COMPARE_NODES, literal
from lakehouse_index.expressions.types import Family, LikePattern, family

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


class _DataFusion:
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
        if family(col_type) is family(lit.type):
            lit_e = self.value(lit, col.name)
        else:  # e.g. int_col = 1.5: compare as the literal's type
            col_e = exp.Cast(this=col_e, to=_df_sql_type(lit.type))
            lit_e = _df_literal(lit.value, lit.type, None)
        return (col_e, lit_e) if isinstance(left, ast.Col) else (lit_e, col_e)

    def render(self, node: ast.Node) -> exp.Expression:
        if isinstance(node, ast.Const):
            return exp.Boolean(this=node.value)
        if isinstance(node, ast.Not):
            return exp.Paren(this=exp.Not(this=self.render(node.part)))
        if isinstance(node, ast.And):
            parts = [self.render(p) for p in node.parts]
            return exp.Paren(this=functools.reduce(lambda a, b: exp.And(this=a, expression=b), parts))
        if isinstance(node, ast.Or):
            parts = [self.render(p) for p in node.parts]
            return exp.Paren(this=functools.reduce(lambda a, b: exp.Or(this=a, expression=b), parts))
        if isinstance(node, ast.Compare):
            left, right = self.operand_pair(node.left, node.right)
            return exp.Paren(this=COMPARE_NODES[node.op](this=left, expression=right))
        name = node.column.name
        e: exp.Expression
        if isinstance(node, ast.In):
            values = [self.operand_pair(node.column, v)[1] for v in node.values]
            e = exp.In(this=self.column(name), expressions=values)
        elif isinstance(node, ast.IsNull):
            e = exp.Is(this=self.column(name), expression=exp.Null())
        elif isinstance(node, ast.Between):
            e = exp.Between(
                this=self.column(name), low=self.value(node.low, name), high=self.value(node.high, name)
            )
        elif isinstance(node, ast.Like):
            e = exp.Like(this=self.column(name), expression=exp.Literal.string(node.pattern))
        else:
            raise QueryError(f"cannot render {node!r} for deltalake")
        e = exp.Paren(this=e)
        return exp.Paren(this=exp.Not(this=e)) if node.negated else e


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


# --------------------------------------------------------------------------- pyiceberg


def _ice_value(lit: ast.Lit, column_type: pa.DataType) -> Any:
    if family(lit.type) is not family(column_type):
        raise QueryError(
            f"comparing a {column_type} column with {lit.value!r} ({lit.type}) cannot be written to "
            "Iceberg exactly; compare with a literal of the column's type"
        )
    v = lit.value
    if isinstance(v, dt.datetime):
        return v.isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    return v


class _Iceberg:
    """Builds an expression true exactly where the SQL node is TRUE (``want=True``) or FALSE."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        from pyiceberg import expressions as ie

        self.ie: Any = ie

    def guard(self, name: str, e: Any) -> Any:
        return self.ie.And(self.ie.NotNull(name), e)

    def compare(self, op: str, name: str, value: Any) -> Any:
        ie = self.ie
        cls = {
            "=": ie.EqualTo,
            "!=": ie.NotEqualTo,
            "<": ie.LessThan,
            "<=": ie.LessThanOrEqual,
            ">": ie.GreaterThan,
            ">=": ie.GreaterThanOrEqual,
        }[op]
        return self.guard(name, cls(name, value))

    def build(self, node: ast.Node, want: bool) -> Any:
        ie = self.ie
        if isinstance(node, ast.Const):
            return ie.AlwaysTrue() if node.value == want else ie.AlwaysFalse()
        if isinstance(node, ast.Not):
            return self.build(node.part, not want)
        if isinstance(node, (ast.And, ast.Or)):
            parts = [self.build(p, want) for p in node.parts]
            conj = isinstance(node, ast.And) == want
            return functools.reduce(ie.And if conj else ie.Or, parts)
        if isinstance(node, ast.Compare):
            if not (isinstance(node.left, ast.Col) ^ isinstance(node.right, ast.Col)):
                raise QueryError("Iceberg writes support comparisons of a column with a literal only")
            flipped = not isinstance(node.left, ast.Col)
            col, lit = (node.right, node.left) if flipped else (node.left, node.right)
            op = ast.FLIP[node.op] if flipped else node.op
            assert isinstance(col, ast.Col) and isinstance(lit, ast.Lit)
            negate = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
            value = _ice_value(lit, self.schema.field(col.name).type)
            return self.compare(op if want else negate[op], col.name, value)
        name = node.column.name
        col_type = self.schema.field(name).type
        positive = want != node.negated
        if isinstance(node, ast.IsNull):
            return ie.IsNull(name) if positive else ie.NotNull(name)
        if isinstance(node, ast.In):
            values = {_ice_value(v, col_type) for v in node.values}
            return self.guard(name, ie.In(name, values) if positive else ie.NotIn(name, values))
        if isinstance(node, ast.Between):
            low, high = _ice_value(node.low, col_type), _ice_value(node.high, col_type)
            if positive:
                return self.guard(
                    name, ie.And(ie.GreaterThanOrEqual(name, low), ie.LessThanOrEqual(name, high))
                )
            return self.guard(name, ie.Or(ie.LessThan(name, low), ie.GreaterThan(name, high)))
        if isinstance(node, ast.Like):
            tokens = LikePattern(node.pattern).tokens
            if all(tokens):  # no wildcard: equality
                literal_text = "".join(t for t in tokens if t)
                eq = ie.EqualTo(name, literal_text) if positive else ie.NotEqualTo(name, literal_text)
                return self.guard(name, eq)
            prefix = LikePattern(node.pattern).prefix
            if not (tokens[-1] is None and all(tokens[:-1])):
                raise QueryError(
                    f"LIKE {node.pattern!r}: Iceberg writes support prefix patterns ('abc%') only"
                )
            return self.guard(
                name, ie.StartsWith(name, prefix) if positive else ie.NotStartsWith(name, prefix)
            )
        raise QueryError(f"cannot render {node!r} for pyiceberg")


def to_iceberg(predicate: Predicate) -> Any:
    """A pyiceberg BooleanExpression selecting exactly the rows where the predicate is TRUE."""
    if predicate.node is None:
        raise QueryError("writes need the where clause as SQL text, not a pyarrow Expression")
    return _Iceberg(predicate.schema).build(predicate.node, True)
