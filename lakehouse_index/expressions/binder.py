"""SQL text → typed AST: sqlglot parses (Spark dialect), :class:`Binder` checks and types.

Backticks quote identifiers and backslashes escape in strings, as in Spark. Every
column must exist in the table schema and every literal is typed for the column it
meets (:mod:`.literals`), so that the renderings agree on the rows they select.
Conditions that are not a column against literals (``id % 7 = 1``, ``lower(email) =
'a@b'``, ``a < b + 1``) become :class:`~.ast.Test` atoms, their scalar expressions typed
by :mod:`.scalar_binder` with Spark SQL's rules.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp

from lakehouse_index.errors import QueryError
from lakehouse_index.expressions import ast
from lakehouse_index.expressions.literals import (
    Mismatch,
    between_integers,
    coerce,
    compare_integers,
    exact,
    number,
    parse_timestamp,
)
from lakehouse_index.expressions.scalar_binder import ScalarBinder
from lakehouse_index.expressions.spark import COMPARE_NODES
from lakehouse_index.expressions.types import comparison_class

__all__ = ["Binder", "parse_sql"]

#: sqlglot comparison node → our operator (the inverse of the Spark renderer's table).
_COMPARISONS: dict[type[exp.Binary], str] = {node: op for op, node in COMPARE_NODES.items()}


def parse_sql(text: str, schema: pa.Schema, zone: str = "UTC") -> ast.Node:
    """The bound AST of SQL boolean expression ``text``; QueryError on bad SQL, columns or types.

    ``zone`` is the session time zone of its expressions (:class:`~.ast.Test`).
    """
    if not text or not text.strip():
        raise QueryError("empty where expression")
    return Binder(schema, text, zone).predicate(parse_expression(text, "where expression"))


def parse_expression(text: str, what: str) -> exp.Expression:
    """Spark SQL expression ``text`` as sqlglot's tree; QueryError naming ``what`` if it does not parse.

    Parsed as an expression, not a statement: one starting with a column named like a
    statement keyword (``comment = 'x'``, ``set = 1``) would otherwise be a Command.
    """
    try:
        tree: exp.Expression = sqlglot.parse_one(text, read="spark", into=exp.Condition)  # type: ignore[assignment]
    except (sqlglot.errors.SqlglotError, ValueError) as e:  # sqlglot raises ValueError for a few
        raise QueryError(f"cannot parse {what} {text!r}: {e}") from e
    return tree


class Binder:
    """Turns a sqlglot tree into the typed AST, checking columns and literal types.

    ``schema`` is the table's; ``text`` the SQL the tree was parsed from (for messages);
    ``zone`` the session time zone of its expressions.
    """

    def __init__(self, schema: pa.Schema, text: str, zone: str = "UTC") -> None:
        self.schema = schema
        self.text = text
        self.zone = zone
        self.scalars = ScalarBinder(schema, self.fail)

    def fail(self, msg: str) -> QueryError:
        """A QueryError naming the where expression."""
        return QueryError(f"{msg} (in where expression {self.text!r})")

    def predicate(self, e: exp.Expression) -> ast.Node:
        """The AST of a boolean expression."""
        if isinstance(e, exp.Paren):
            return self.predicate(e.this)
        if isinstance(e, exp.And):
            return ast.And(tuple(self.predicate(p) for p in _flatten(e, exp.And)))
        if isinstance(e, exp.Or):
            return ast.Or(tuple(self.predicate(p) for p in _flatten(e, exp.Or)))
        if isinstance(e, exp.Not):
            inner = e.this
            while isinstance(inner, exp.Paren):
                inner = inner.this
            negated = self.negatable(inner, negated=True)
            return negated if negated is not None else ast.Not(self.predicate(inner))
        if isinstance(e, exp.Boolean):
            return ast.Const(bool(e.this))
        for cls, op in _COMPARISONS.items():
            if isinstance(e, cls):
                if self.simple(e.this, e.expression):
                    return self.compare(op, e.this, e.expression)
                return self.test(e)
        node = self.negatable(e, negated=False)
        if node is not None:
            return node
        if isinstance(e, exp.Like) and _is_column(e.this) and self.is_literal(e.expression):
            col = self.column(e.this)
            pattern = self.literal(e.expression, pa.string(), col.name)
            if e.args.get("escape") is not None:
                raise self.fail("LIKE ... ESCAPE is not supported")
            return ast.Like(col, str(pattern.value), negated=bool(e.args.get("negate")))
        if isinstance(e, exp.Column):
            col = self.column(e)
            if not pa.types.is_boolean(self.schema.field(col.name).type):
                raise self.fail(f"column {col.name!r} is not boolean and cannot be a condition")
            return ast.Compare("=", col, ast.Lit(True, pa.bool_()))
        return self.test(e)

    def test(self, e: exp.Expression) -> ast.Test:
        """Condition ``e`` as a scalar expression (it must be BOOLEAN)."""
        scalar = self.scalars.bind(e)
        if not (pa.types.is_boolean(scalar.type) or pa.types.is_null(scalar.type)):
            raise self.fail(f"{e.sql(dialect='spark')!r} is not a condition (it is not BOOLEAN)")
        return ast.Test(scalar, self.zone)

    def is_literal(self, e: exp.Expression) -> bool:
        """Whether ``e`` is a literal the column atoms take (``NULL`` included: they refuse it)."""
        try:
            self.raw_literal(e)
        except QueryError as err:
            return "NULL literal" in str(err)
        return True

    def simple(self, left: exp.Expression, right: exp.Expression) -> bool:
        """Whether a comparison is a column against a literal, or two comparable columns (an atom)."""
        lcol, rcol = _is_column(left), _is_column(right)
        if lcol and rcol:
            # Two float columns compare as Spark orders them (NaN = NaN): an expression.
            ta, tb = (self.schema.field(self.column(x).name).type for x in (left, right))
            floats = pa.types.is_floating(ta) or pa.types.is_floating(tb)
            return comparison_class(ta) == comparison_class(tb) and not floats
        return (lcol and self.is_literal(right)) or (rcol and self.is_literal(left))

    def negatable(self, e: exp.Expression, negated: bool) -> ast.Node | None:
        """``e`` (IS, IN, BETWEEN) as one atom, negated or not; None for other expressions."""
        if not isinstance(e, (exp.Is, exp.In, exp.Between)):
            return None
        literals = [e.expression] if isinstance(e, exp.Is) else []
        if isinstance(e, exp.In):
            literals = list(e.expressions)
        if isinstance(e, exp.Between):
            literals = [e.args["low"], e.args["high"]]
        is_target = isinstance(e, exp.Is) and isinstance(e.expression, (exp.Null, exp.Boolean))
        if not _is_column(e.this) or not (is_target or all(self.is_literal(x) for x in literals)):
            test = self.test(e)
            return ast.Not(test) if negated else test
        if isinstance(e, exp.Is):
            return self.is_(e, negated)
        if isinstance(e, exp.In):
            return self.in_(e, negated)
        return self.between(e, negated)

    def column(self, e: exp.Expression) -> ast.Col:
        while isinstance(e, exp.Paren):
            e = e.this
        if not isinstance(e, exp.Column) or e.table:
            raise self.fail(f"expected a column name, got {e.sql(dialect='spark')!r}")
        name = e.name
        if name not in self.schema.names:
            raise self.fail(f"unknown column {name!r}; the table has {', '.join(self.schema.names)}")
        return ast.Col(name)

    def is_(self, e: exp.Is, negated: bool) -> ast.Node:
        col = self.column(e.this)
        target = e.expression
        if isinstance(target, exp.Null):
            return ast.IsNull(col, negated)
        if isinstance(target, exp.Boolean):
            # x IS TRUE / IS FALSE: never null, so spell it with IS NULL explicitly.
            self.need_type(col, pa.bool_())
            equal = ast.Compare("=", col, ast.Lit(bool(target.this), pa.bool_()))
            test: ast.Node = ast.And((ast.IsNull(col, True), equal))
            return ast.Not(test) if negated else test
        raise self.fail(f"unsupported IS {target.sql(dialect='spark')}")

    def need_type(self, col: ast.Col, t: pa.DataType) -> None:
        if not self.schema.field(col.name).type.equals(t):
            raise self.fail(f"column {col.name!r} is {self.schema.field(col.name).type}, not {t}")

    def compare(self, op: str, left: exp.Expression, right: exp.Expression) -> ast.Node:
        lcol, rcol = _is_column(left), _is_column(right)
        if lcol and rcol:
            a, b = self.column(left), self.column(right)
            ta, tb = self.schema.field(a.name).type, self.schema.field(b.name).type
            if comparison_class(ta) != comparison_class(tb):
                raise self.fail(f"cannot compare {a.name!r} ({ta}) with {b.name!r} ({tb})")
            return ast.Compare(op, a, b)
        if rcol and not lcol:
            left, right, op = right, left, ast.FLIP[op]
        col = self.column(left)
        t = self.schema.field(col.name).type
        op, lit = compare_integers(op, self.literal(right, t, col.name), t)
        return ast.Compare(op, col, lit)

    def in_(self, e: exp.In, negated: bool) -> ast.Node:
        if e.args.get("query") is not None or e.args.get("unnest") is not None:
            raise self.fail("IN (subquery) is not supported")
        col = self.column(e.this)
        t = self.schema.field(col.name).type
        values = tuple(self.literal(v, t, col.name) for v in e.expressions)
        if not values:
            raise self.fail("empty IN list")
        return ast.In(col, values, t, negated)

    def between(self, e: exp.Between, negated: bool) -> ast.Node:
        col = self.column(e.this)
        t = self.schema.field(col.name).type
        low, high = self.literal(e.args["low"], t, col.name), self.literal(e.args["high"], t, col.name)
        return ast.Between(col, *between_integers(low, high, t), negated)

    def literal(self, e: exp.Expression, target: pa.DataType, column: str) -> ast.Lit:
        """A literal typed for a column of type ``target``."""
        raw = self.raw_literal(e)
        try:
            lit = coerce(raw, target)
        except Mismatch as m:
            raise self.fail(f"cannot compare column {column!r} ({target}) with {m}") from None
        return exact(lit, target)

    def raw_literal(self, e: exp.Expression) -> Any:
        while isinstance(e, exp.Paren):
            e = e.this
        if isinstance(e, exp.Null):
            raise self.fail("NULL literal in a comparison or IN list selects nothing in SQL; use IS NULL")
        if isinstance(e, exp.Boolean):
            return bool(e.this)
        if isinstance(e, exp.Neg):
            v = self.raw_literal(e.this)
            if isinstance(v, decimal.Decimal):
                # Exact: unary minus would round to the context's 28 digits.
                return v.copy_negate()
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return -v
            raise self.fail(f"cannot negate {e.this.sql(dialect='spark')}")
        if isinstance(e, exp.Literal):
            if e.is_string:
                return str(e.this)
            return number(str(e.this))
        if type(e) is exp.Concat and all(isinstance(p, exp.Literal) and p.is_string for p in e.expressions):
            # Spark reads adjacent string literals ('a' 'b', or 'it''s') as one string.
            return "".join(str(p.this) for p in e.expressions)
        if isinstance(e, exp.Cast) and isinstance(e.this, exp.Literal) and e.this.is_string:
            kind = e.to.this
            text = str(e.this.this)
            try:
                if kind == exp.DataType.Type.DATE:
                    return dt.date.fromisoformat(text.strip())
                if kind in (
                    exp.DataType.Type.TIMESTAMP,
                    exp.DataType.Type.TIMESTAMPTZ,
                    exp.DataType.Type.TIMESTAMPLTZ,
                    exp.DataType.Type.TIMESTAMPNTZ,
                    exp.DataType.Type.DATETIME,
                ):
                    return parse_timestamp(text)
            except ValueError as err:
                raise self.fail(f"bad {kind.value} literal {text!r}") from err
        raise self.fail(f"expected a literal, got {e.sql(dialect='spark')!r}")


def _flatten(e: exp.Expression, cls: type[exp.Expression]) -> list[exp.Expression]:
    out: list[exp.Expression] = []
    stack = [e]
    while stack:
        cur = stack.pop()
        if isinstance(cur, cls):
            stack.append(cur.expression)
            stack.append(cur.this)
        else:
            out.append(cur)
    return out


def _is_column(e: exp.Expression) -> bool:
    while isinstance(e, exp.Paren):
        e = e.this
    return isinstance(e, exp.Column)
