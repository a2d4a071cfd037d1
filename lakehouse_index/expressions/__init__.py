"""Row predicates: a SQL boolean expression parsed once into a small typed AST.

``where`` arguments of the public API are SQL text (``"country = 'DE' AND amount > 10"``),
a :class:`pyarrow.compute.Expression`, or an already built :class:`Predicate`.
:meth:`Predicate.parse` reads SQL with sqlglot (Spark dialect: backticks quote
identifiers, backslash escapes in strings), checks every column against the table
schema and types every literal against the column it is compared with, so that the
two renderings agree on the rows they select:

* :meth:`Predicate.to_pyarrow` for the pyarrow executors (scan, lookup fast path),
* :meth:`Predicate.to_spark_sql` for Spark reads.

Both use SQL three-valued logic: a comparison with a null is null and a row is kept
only when the predicate is true. ``x NOT IN (...)`` is null for a null ``x``, as in SQL.
Literal ``NULL`` is only accepted in ``IS [NOT] NULL`` (``x = NULL`` selects nothing in
SQL and is almost always a mistake, so it is refused). NaN ordering differs between
pyarrow and Spark; predicates on NaN values are not supported.

Two helpers serve the planner and the scans:

* :meth:`Predicate.might_match` evaluates the predicate on the constant columns of a
  file (partition values), treating every other column as unknown; False means no
  row of the file can satisfy it, so the file is pruned.
* :meth:`Predicate.key_values` extracts the finite set of key tuples an
  equality / IN predicate restricts a set of key columns to (None when it does not).
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from lakehouse_index.errors import QueryError

__all__ = [
    "And",
    "Between",
    "Col",
    "Compare",
    "In",
    "IsNull",
    "Like",
    "Lit",
    "Node",
    "Not",
    "Or",
    "Predicate",
    "Where",
]

# --------------------------------------------------------------------------- AST

#: Comparison operators, in their SQL spelling.
COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True)
class Col:
    """A reference to a top-level column by its logical name."""

    name: str


@dataclass(frozen=True)
class Lit:
    """A literal, already typed for the column it is compared with.

    ``value`` is a Python value (str, int, float, bool, Decimal, date, datetime, bytes);
    ``type`` the Arrow type both engines compare it as.
    """

    value: Any
    type: pa.DataType


Operand: TypeAlias = Col | Lit


@dataclass(frozen=True)
class Compare:
    """``left op right`` with op one of :data:`COMPARISONS`."""

    op: str
    left: Operand
    right: Operand


@dataclass(frozen=True)
class In:
    """``column [NOT] IN (values...)`` (values never null).

    ``column_type`` is the column's Arrow type; values of another type cannot equal
    any value of the column (``int_col IN (1.5)``) and only matter to Spark's rendering.
    """

    column: Col
    values: tuple[Lit, ...]
    column_type: pa.DataType
    negated: bool = False


@dataclass(frozen=True)
class IsNull:
    """``column IS [NOT] NULL``."""

    column: Col
    negated: bool = False


@dataclass(frozen=True)
class Between:
    """``column [NOT] BETWEEN low AND high`` (inclusive)."""

    column: Col
    low: Lit
    high: Lit
    negated: bool = False


@dataclass(frozen=True)
class Like:
    """``column [NOT] LIKE pattern`` (``%`` any run, ``_`` one character, ``\\`` escapes)."""

    column: Col
    pattern: str
    negated: bool = False


@dataclass(frozen=True)
class And:
    """Conjunction of two or more predicates."""

    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    """Disjunction of two or more predicates."""

    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    """Negation."""

    part: Node


@dataclass(frozen=True)
class Const:
    """``TRUE`` or ``FALSE``."""

    value: bool


Node: TypeAlias = Compare | In | IsNull | Between | Like | And | Or | Not | Const


# --------------------------------------------------------------------------- Predicate


@dataclass(frozen=True)
class Predicate:
    """A row predicate bound to a table schema. Build with :meth:`parse` or :meth:`of`.

    ``node`` is the typed AST, or None when the predicate was given as a pyarrow
    Expression (``arrow``), which only the pyarrow executors can evaluate.
    """

    node: Node | None
    schema: pa.Schema
    arrow: pc.Expression | None = None
    text: str | None = None

    # ----------------------------------------------------------------- construction

    @classmethod
    def of(cls, where: Where | None, schema: pa.Schema) -> Predicate | None:
        """A predicate from any accepted ``where`` form (None stays None).

        A Predicate bound to another schema (an older table version) is re-bound.
        """
        if where is None:
            return None
        if isinstance(where, Predicate):
            if where.schema.equals(schema):
                return where
            if where.text is not None:
                return cls.parse(where.text, schema)
            assert where.arrow is not None
            return cls.from_arrow(where.arrow, schema)
        if isinstance(where, str):
            return cls.parse(where, schema)
        if isinstance(where, pc.Expression):
            return cls.from_arrow(where, schema)
        raise QueryError(f"where must be a SQL string or a pyarrow Expression, not {type(where).__name__}")

    @classmethod
    def parse(cls, text: str, schema: pa.Schema) -> Predicate:
        """Parse a SQL boolean expression; QueryError on bad SQL, unknown columns or types."""
        if not text or not text.strip():
            raise QueryError("empty where expression")
        try:
            tree: exp.Expression = sqlglot.parse_one(text, read="spark")  # type: ignore[assignment]
        except sqlglot.errors.SqlglotError as e:
            raise QueryError(f"cannot parse where expression {text!r}: {e}") from e
        node = _Builder(schema, text).predicate(tree)
        return cls(node, schema, text=text)

    @classmethod
    def from_arrow(cls, expression: pc.Expression, schema: pa.Schema) -> Predicate:
        """Wrap a pyarrow Expression (checked against ``schema`` once)."""
        try:
            schema.empty_table().filter(expression)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError) as e:
            raise QueryError(f"where expression {expression} does not fit the table schema: {e}") from e
        return cls(None, schema, arrow=expression)

    # ----------------------------------------------------------------- properties

    @property
    def columns(self) -> frozenset[str]:
        """Logical names of the columns the predicate reads."""
        cached = self.__dict__.get("_columns")
        if cached is None:
            cached = _columns(self.node) if self.node is not None else self._arrow_columns()
            object.__setattr__(self, "_columns", cached)
        return cached

    def _arrow_columns(self) -> frozenset[str]:
        # pyarrow offers no public walk over an Expression's field references; a
        # column is referenced exactly when the expression no longer binds without it.
        assert self.arrow is not None
        used = []
        for i, name in enumerate(self.schema.names):
            try:
                self.schema.remove(i).empty_table().filter(self.arrow)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError):
                used.append(name)
        return frozenset(used)

    # ----------------------------------------------------------------- renderings

    def to_pyarrow(self) -> pc.Expression:
        """The predicate as a pyarrow compute Expression (for ``Table.filter``, datasets)."""
        if self.node is None:
            assert self.arrow is not None
            return self.arrow
        return _to_arrow(self.node)

    def to_spark_sql(self) -> str:
        """The predicate as Spark SQL text (identifiers in backticks, typed literals)."""
        if self.node is None:
            raise QueryError(
                "a pyarrow Expression cannot run on Spark; pass the where clause as a SQL string"
            )
        return _to_sql(self.node)

    def __str__(self) -> str:
        if self.text is not None:
            return self.text
        return str(self.arrow)

    # ----------------------------------------------------------------- analysis

    def might_match(self, constants: Mapping[str, Any]) -> bool:
        """False when no row whose ``constants`` columns hold these values can match.

        ``constants`` maps column names to Python values (a file's partition values);
        columns not in it are unknown. Used to prune files; never prunes wrongly: an
        uncomparable value makes the result unknown (True).
        """
        if self.node is None or not constants:
            return True
        return True in _eval(self.node, constants)

    def key_values(self, key_columns: Sequence[str]) -> list[tuple[Any, ...]] | None:
        """The key tuples the predicate restricts ``key_columns`` to, or None.

        Returns a sorted list of distinct tuples (values in ``key_columns`` order) such
        that every row satisfying the predicate has its key in the list. None when the
        predicate does not pin every key column to finitely many values by = / IN
        (combined with AND / OR), e.g. ranges, negations or a key column left free.
        """
        if self.node is None:
            return None
        rel = _relation(self.node)
        if rel is None or not set(key_columns) <= set(rel.columns):
            return None
        idx = [rel.columns.index(c) for c in key_columns]
        rows = {tuple(r[i] for i in idx) for r in rel.rows}
        return sorted(rows, key=_sort_key)


Where: TypeAlias = str | pc.Expression | Predicate


# --------------------------------------------------------------------------- SQL → AST


class _Builder:
    """Turns a sqlglot tree into the typed AST, checking columns and literal types."""

    def __init__(self, schema: pa.Schema, text: str) -> None:
        self.schema = schema
        self.text = text

    def fail(self, msg: str) -> QueryError:
        return QueryError(f"{msg} (in where expression {self.text!r})")

    def predicate(self, e: exp.Expression) -> Node:
        if isinstance(e, exp.Paren):
            return self.predicate(e.this)
        if isinstance(e, exp.And):
            return And(tuple(self.predicate(p) for p in _flatten(e, exp.And)))
        if isinstance(e, exp.Or):
            return Or(tuple(self.predicate(p) for p in _flatten(e, exp.Or)))
        if isinstance(e, exp.Not):
            inner = e.this
            while isinstance(inner, exp.Paren):
                inner = inner.this
            if isinstance(inner, exp.Is):
                return self.is_(inner, negated=True)
            if isinstance(inner, exp.In):
                return self.in_(inner, negated=True)
            if isinstance(inner, exp.Between):
                return self.between(inner, negated=True)
            return Not(self.predicate(inner))
        if isinstance(e, exp.Boolean):
            return Const(bool(e.this))
        ops: dict[type[exp.Expression], str] = {
            exp.EQ: "=",
            exp.NEQ: "!=",
            exp.LT: "<",
            exp.LTE: "<=",
            exp.GT: ">",
            exp.GTE: ">=",
        }
        for cls, op in ops.items():
            if isinstance(e, cls):
                return self.compare(op, e.this, e.expression)
        if isinstance(e, exp.In):
            return self.in_(e, negated=False)
        if isinstance(e, exp.Is):
            return self.is_(e, negated=False)
        if isinstance(e, exp.Between):
            return self.between(e, negated=False)
        if isinstance(e, exp.Like):
            col = self.column(e.this)
            pattern = self.literal(e.expression, pa.string(), col.name)
            if e.args.get("escape") is not None:
                raise self.fail("LIKE ... ESCAPE is not supported")
            return Like(col, str(pattern.value), negated=bool(e.args.get("negate")))
        if isinstance(e, exp.Column):
            col = self.column(e)
            if not pa.types.is_boolean(self.schema.field(col.name).type):
                raise self.fail(f"column {col.name!r} is not boolean and cannot be a condition")
            return Compare("=", col, Lit(True, pa.bool_()))
        raise self.fail(f"unsupported expression {e.sql(dialect='spark')!r}")

    def column(self, e: exp.Expression) -> Col:
        while isinstance(e, exp.Paren):
            e = e.this
        if not isinstance(e, exp.Column) or e.table:
            raise self.fail(f"expected a column name, got {e.sql(dialect='spark')!r}")
        name = e.name
        if name not in self.schema.names:
            raise self.fail(f"unknown column {name!r}; the table has {', '.join(self.schema.names)}")
        return Col(name)

    def is_(self, e: exp.Is, negated: bool) -> Node:
        col = self.column(e.this)
        target = e.expression
        if isinstance(target, exp.Null):
            return IsNull(col, negated)
        if isinstance(target, exp.Boolean):
            # x IS TRUE / IS FALSE: never null, so spell it with IS NULL explicitly.
            self.need_type(col, pa.bool_())
            test: Node = And((IsNull(col, True), Compare("=", col, Lit(bool(target.this), pa.bool_()))))
            return Not(test) if negated else test
        raise self.fail(f"unsupported IS {target.sql(dialect='spark')}")

    def need_type(self, col: Col, t: pa.DataType) -> None:
        if not self.schema.field(col.name).type.equals(t):
            raise self.fail(f"column {col.name!r} is {self.schema.field(col.name).type}, not {t}")

    def compare(self, op: str, left: exp.Expression, right: exp.Expression) -> Node:
        lcol, rcol = _is_column(left), _is_column(right)
        if lcol and rcol:
            a, b = self.column(left), self.column(right)
            ta, tb = self.schema.field(a.name).type, self.schema.field(b.name).type
            if _family(ta) != _family(tb):
                raise self.fail(f"cannot compare {a.name!r} ({ta}) with {b.name!r} ({tb})")
            return Compare(op, a, b)
        if rcol and not lcol:
            left, right, op = right, left, _FLIP[op]
        elif not lcol:
            raise self.fail(f"a comparison needs a column: {left.sql(dialect='spark')} {op} ...")
        col = self.column(left)
        lit = self.literal(right, self.schema.field(col.name).type, col.name)
        return Compare(op, col, lit)

    def in_(self, e: exp.In, negated: bool) -> Node:
        if e.args.get("query") is not None or e.args.get("unnest") is not None:
            raise self.fail("IN (subquery) is not supported")
        col = self.column(e.this)
        t = self.schema.field(col.name).type
        values = tuple(self.literal(v, t, col.name) for v in e.expressions)
        if not values:
            raise self.fail("empty IN list")
        return In(col, values, t, negated)

    def between(self, e: exp.Between, negated: bool) -> Node:
        col = self.column(e.this)
        t = self.schema.field(col.name).type
        return Between(
            col, self.literal(e.args["low"], t, col.name), self.literal(e.args["high"], t, col.name), negated
        )

    def literal(self, e: exp.Expression, target: pa.DataType, column: str) -> Lit:
        """A literal typed for a column of type ``target``."""
        raw = self.raw_literal(e)
        try:
            lit = _coerce(raw, target)
        except _Mismatch as m:
            raise self.fail(f"cannot compare column {column!r} ({target}) with {m}") from None
        return _exact(lit, target)

    def raw_literal(self, e: exp.Expression) -> Any:
        while isinstance(e, exp.Paren):
            e = e.this
        if isinstance(e, exp.Null):
            raise self.fail("NULL literal in a comparison or IN list selects nothing in SQL; use IS NULL")
        if isinstance(e, exp.Boolean):
            return bool(e.this)
        if isinstance(e, exp.Neg):
            v = self.raw_literal(e.this)
            if isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool):
                return -v
            raise self.fail(f"cannot negate {e.this.sql(dialect='spark')}")
        if isinstance(e, exp.Literal):
            if e.is_string:
                return str(e.this)
            return _number(str(e.this))
        if isinstance(e, exp.Concat) and all(
            isinstance(p, exp.Literal) and p.is_string for p in e.expressions
        ):
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
                    return _parse_timestamp(text)
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


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def _parse_timestamp(text: str) -> dt.datetime:
    t = text.strip().replace(" ", "T", 1)
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    if "T" not in t:
        t += "T00:00:00"
    return dt.datetime.fromisoformat(t)


class _Mismatch(Exception):
    pass


def _family(t: pa.DataType) -> str:
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    return str(t)


def _coerce(v: Any, target: pa.DataType) -> Lit:
    """Type literal ``v`` for a comparison with a column of type ``target``.

    Numbers stay numbers (both engines compare int and float columns with any number
    exactly enough); strings become dates / timestamps for such columns (as Spark
    does); every other mix is refused rather than left to two engines' coercion rules.
    """
    fam = _family(target)
    if fam == "number":
        if isinstance(v, bool) or not isinstance(v, (int, float, decimal.Decimal)):
            raise _Mismatch(f"{type(v).__name__} literal {v!r}")
        if isinstance(v, int):
            if pa.types.is_integer(target) or pa.types.is_decimal(target):
                return Lit(v, pa.int64()) if -(2**63) <= v < 2**63 else Lit(float(v), pa.float64())
            return Lit(float(v), pa.float64())
        if isinstance(v, decimal.Decimal):
            return Lit(float(v), pa.float64())
        return Lit(v, pa.float64())
    if fam == "string":
        if not isinstance(v, str):
            raise _Mismatch(f"{type(v).__name__} literal {v!r}")
        return Lit(v, pa.string())
    if fam == "binary":
        if isinstance(v, str):
            return Lit(v.encode(), pa.binary())
        raise _Mismatch(f"{type(v).__name__} literal {v!r}")
    if fam == "bool":
        if not isinstance(v, bool):
            raise _Mismatch(f"{type(v).__name__} literal {v!r}")
        return Lit(v, pa.bool_())
    if fam == "date":
        if isinstance(v, dt.datetime):
            raise _Mismatch(f"timestamp literal {v!r}")
        if isinstance(v, str):
            try:
                v = dt.date.fromisoformat(v.strip())
            except ValueError:
                raise _Mismatch(f"string {v!r}, which is no date") from None
        if not isinstance(v, dt.date):
            raise _Mismatch(f"{type(v).__name__} literal {v!r}")
        return Lit(v, pa.date32())
    if fam == "timestamp":
        if isinstance(v, str):
            try:
                v = _parse_timestamp(v)
            except ValueError:
                raise _Mismatch(f"string {v!r}, which is no timestamp") from None
        elif isinstance(v, dt.date) and not isinstance(v, dt.datetime):
            v = dt.datetime(v.year, v.month, v.day)
        if not isinstance(v, dt.datetime):
            raise _Mismatch(f"{type(v).__name__} literal {v!r}")
        assert isinstance(target, pa.TimestampType)
        # Naive literals mean UTC (the Spark sessions we build run with timeZone=UTC).
        if target.tz is not None:
            if v.tzinfo is None:
                v = v.replace(tzinfo=dt.timezone.utc)
            return Lit(v.astimezone(dt.timezone.utc), pa.timestamp("us", tz="UTC"))
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return Lit(v, pa.timestamp("us"))
    raise _Mismatch(f"a literal: columns of type {target} cannot be compared")


def _exact(lit: Lit, target: pa.DataType) -> Lit:
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


# --------------------------------------------------------------------------- AST → pyarrow


def _arrow_operand(o: Operand) -> Any:
    if isinstance(o, Col):
        return pc.field(o.name)
    return pc.scalar(pa.scalar(o.value, type=o.type))


def _to_arrow(n: Node) -> pc.Expression:
    if isinstance(n, Compare):
        a, b = _arrow_operand(n.left), _arrow_operand(n.right)
        fn: dict[str, Callable[[Any, Any], pc.Expression]] = {
            "=": pc.equal,
            "!=": pc.not_equal,
            "<": pc.less,
            "<=": pc.less_equal,
            ">": pc.greater,
            ">=": pc.greater_equal,
        }
        return fn[n.op](a, b)
    if isinstance(n, In):
        t = n.column_type
        value_set = pa.array([v.value for v in n.values if v.type.equals(t)], type=t)
        f = pc.field(n.column.name)
        e = pc.is_in(f, value_set=value_set)
        if n.negated:
            e = ~e
        # SQL: a null input gives null, so NOT IN drops rows whose value is null.
        return pc.if_else(f.is_null(), pa.scalar(None, pa.bool_()), e)
    if isinstance(n, IsNull):
        e = pc.field(n.column.name).is_null()
        return ~e if n.negated else e
    if isinstance(n, Between):
        f = pc.field(n.column.name)
        e = (f >= _arrow_operand(n.low)) & (f <= _arrow_operand(n.high))
        return ~e if n.negated else e
    if isinstance(n, Like):
        e = pc.match_like(pc.field(n.column.name), n.pattern)
        return ~e if n.negated else e
    if isinstance(n, And):
        out = _to_arrow(n.parts[0])
        for p in n.parts[1:]:
            out = out & _to_arrow(p)  # Kleene and
        return out
    if isinstance(n, Or):
        out = _to_arrow(n.parts[0])
        for p in n.parts[1:]:
            out = out | _to_arrow(p)
        return out
    if isinstance(n, Not):
        return ~_to_arrow(n.part)
    if isinstance(n, Const):
        return pc.scalar(n.value)
    raise AssertionError(n)


# --------------------------------------------------------------------------- AST → Spark SQL


def quote_identifier(name: str) -> str:
    """A Spark SQL identifier in backticks (backticks inside doubled)."""
    return "`" + name.replace("`", "``") + "`"


def _sql_string(s: str) -> str:
    # Spark string literals use backslash escapes (spark.sql.parser.escapedStringLiterals=false).
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_literal(value: Any, t: pa.DataType) -> str:
    """A Spark SQL literal for ``value`` of Arrow type ``t``."""
    if pa.types.is_boolean(t):
        return "true" if value else "false"
    if pa.types.is_integer(t):
        return f"{int(value)}L"
    if pa.types.is_floating(t):
        f = float(value)
        if f != f or f in (float("inf"), float("-inf")):
            return f"CAST('{f!r}' AS DOUBLE)".replace("inf", "Infinity").replace("nan", "NaN")
        return f"{f!r}D"
    if pa.types.is_decimal(t):
        return f"{value}BD"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return _sql_string(str(value))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "X'" + bytes(value).hex().upper() + "'"
    if pa.types.is_date(t):
        return f"DATE '{value.isoformat()}'"
    if pa.types.is_timestamp(t):
        assert isinstance(t, pa.TimestampType)
        if t.tz is not None:
            utc = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
            return f"TIMESTAMP '{utc.isoformat(sep=' ')}+00:00'"
        return f"TIMESTAMP_NTZ '{value.isoformat(sep=' ')}'"
    raise QueryError(f"no Spark literal for type {t}")


def _sql_operand(o: Operand) -> str:
    if isinstance(o, Col):
        return quote_identifier(o.name)
    return sql_literal(o.value, o.type)


def _to_sql(n: Node) -> str:
    if isinstance(n, Compare):
        op = "<>" if n.op == "!=" else n.op
        return f"({_sql_operand(n.left)} {op} {_sql_operand(n.right)})"
    if isinstance(n, In):
        vals = ", ".join(_sql_operand(v) for v in n.values)
        return f"({quote_identifier(n.column.name)} {'NOT IN' if n.negated else 'IN'} ({vals}))"
    if isinstance(n, IsNull):
        return f"({quote_identifier(n.column.name)} IS {'NOT NULL' if n.negated else 'NULL'})"
    if isinstance(n, Between):
        kw = "NOT BETWEEN" if n.negated else "BETWEEN"
        return f"({quote_identifier(n.column.name)} {kw} {_sql_operand(n.low)} AND {_sql_operand(n.high)})"
    if isinstance(n, Like):
        kw = "NOT LIKE" if n.negated else "LIKE"
        return f"({quote_identifier(n.column.name)} {kw} {_sql_string(n.pattern)})"
    if isinstance(n, And):
        return "(" + " AND ".join(_to_sql(p) for p in n.parts) + ")"
    if isinstance(n, Or):
        return "(" + " OR ".join(_to_sql(p) for p in n.parts) + ")"
    if isinstance(n, Not):
        return f"(NOT {_to_sql(n.part)})"
    if isinstance(n, Const):
        return "true" if n.value else "false"
    raise AssertionError(n)


# --------------------------------------------------------------------------- analysis


def _columns(n: Node) -> frozenset[str]:
    if isinstance(n, Compare):
        return frozenset(o.name for o in (n.left, n.right) if isinstance(o, Col))
    if isinstance(n, (In, IsNull, Between, Like)):
        return frozenset([n.column.name])
    if isinstance(n, (And, Or)):
        return frozenset().union(*(_columns(p) for p in n.parts))
    if isinstance(n, Not):
        return _columns(n.part)
    return frozenset()


# Three-valued evaluation over partially known rows: each node evaluates to the set
# of SQL truth values (True, False, None=null) it can take; an unknown column makes
# every outcome possible. Exact for And/Or/Not by evaluating over the product.
_ANY: frozenset[bool | None] = frozenset([True, False, None])


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def _value(o: Operand, row: Mapping[str, Any]) -> tuple[bool, Any]:
    """(known, value) of an operand in a partial row."""
    if isinstance(o, Lit):
        return True, o.value
    if o.name in row:
        return True, row[o.name]
    return False, None


def _cmp(op: str, a: Any, b: Any) -> bool | None:
    if a is None or b is None:
        return None
    a, b = _comparable(a), _comparable(b)
    if op == "=":
        return bool(a == b)
    if op == "!=":
        return bool(a != b)
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


def _comparable(v: Any) -> Any:
    # Partition values may be naive or aware datetimes; literals follow the column's
    # tz-ness. Compare instants in UTC.
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return v


def _eval(n: Node, row: Mapping[str, Any]) -> frozenset[bool | None]:
    try:
        return _eval_inner(n, row)
    except (TypeError, ValueError, decimal.InvalidOperation):
        return _ANY


def _eval_inner(n: Node, row: Mapping[str, Any]) -> frozenset[bool | None]:
    if isinstance(n, Compare):
        ka, a = _value(n.left, row)
        kb, b = _value(n.right, row)
        return frozenset([_cmp(n.op, a, b)]) if ka and kb else _ANY
    if isinstance(n, In):
        known, v = _value(n.column, row)
        if not known:
            return _ANY
        if v is None:
            return frozenset([None])
        hit = any(_cmp("=", v, x.value) for x in n.values)
        return frozenset([hit != n.negated])
    if isinstance(n, IsNull):
        known, v = _value(n.column, row)
        return frozenset([(v is None) != n.negated]) if known else _ANY
    if isinstance(n, Between):
        known, v = _value(n.column, row)
        if not known:
            return _ANY
        r = _and(_cmp(">=", v, n.low.value), _cmp("<=", v, n.high.value))
        return frozenset([None if r is None else r != n.negated])
    if isinstance(n, Like):
        known, v = _value(n.column, row)
        if not known:
            return _ANY
        if v is None:
            return frozenset([None])
        return frozenset([bool(_like_regex(n.pattern).fullmatch(str(v))) != n.negated])
    if isinstance(n, (And, Or)):
        combine = _and if isinstance(n, And) else _or
        acc = _eval_inner(n.parts[0], row)
        for p in n.parts[1:]:
            nxt = _eval_inner(p, row)
            acc = frozenset(combine(a, b) for a, b in itertools.product(acc, nxt))
        return acc
    if isinstance(n, Not):
        return frozenset(None if v is None else not v for v in _eval_inner(n.part, row))
    if isinstance(n, Const):
        return frozenset([n.value])
    raise AssertionError(n)


def _like_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


@dataclass(frozen=True)
class _Relation:
    """A finite set of value tuples for some columns that every matching row satisfies."""

    columns: tuple[str, ...]
    rows: frozenset[tuple[Any, ...]]


_MAX_KEYS = 1_000_000


def _relation(n: Node) -> _Relation | None:
    if isinstance(n, Compare) and n.op == "=":
        if isinstance(n.left, Col) and isinstance(n.right, Lit):
            return _Relation((n.left.name,), frozenset([(n.right.value,)]))
        return None
    if isinstance(n, In) and not n.negated:
        return _Relation((n.column.name,), frozenset((v.value,) for v in n.values))
    if isinstance(n, And):
        rels = [r for r in (_relation(p) for p in n.parts) if r is not None]
        if not rels:
            return None
        out = rels[0]
        for r in rels[1:]:
            joined = _join(out, r)
            if joined is None:
                return None
            out = joined
        return out
    if isinstance(n, Or):
        parts = [_relation(p) for p in n.parts]
        if any(r is None for r in parts):
            return None
        rels = [r for r in parts if r is not None]
        common = set(rels[0].columns).intersection(*(r.columns for r in rels[1:]))
        if not common:
            return None
        cols = tuple(c for c in rels[0].columns if c in common)
        rows: set[tuple[Any, ...]] = set()
        for r in rels:
            idx = [r.columns.index(c) for c in cols]
            rows.update(tuple(row[i] for i in idx) for row in r.rows)
        return _Relation(cols, frozenset(rows))
    return None


def _join(a: _Relation, b: _Relation) -> _Relation | None:
    shared = [c for c in a.columns if c in b.columns]
    extra = [c for c in b.columns if c not in a.columns]
    ai = [a.columns.index(c) for c in shared]
    bi = [b.columns.index(c) for c in shared]
    be = [b.columns.index(c) for c in extra]
    index: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for row in b.rows:
        index.setdefault(tuple(row[i] for i in bi), []).append(tuple(row[i] for i in be))
    rows = set()
    for row in a.rows:
        for tail in index.get(tuple(row[i] for i in ai), ()):
            rows.add(row + tail)
            if len(rows) > _MAX_KEYS:
                return None
    return _Relation(a.columns + tuple(extra), frozenset(rows))


def _sort_key(row: Iterable[Any]) -> tuple[Any, ...]:
    return tuple((type(v).__name__, v) for v in row)
