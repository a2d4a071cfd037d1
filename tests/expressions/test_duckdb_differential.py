"""Scalar expressions evaluated in process equal DuckDB's evaluation where the two SQLs agree.

No JVM: many more trees than the Spark test runs. The trees use what DuckDB means as Spark SQL
does (sqlglot transpiles the text from Spark's dialect): integer arithmetic within range,
``/`` and ``%`` with NULL for a zero divisor (``error_on_division_by_zero=false``),
comparisons, ``IN``, ``BETWEEN``, ``CASE`` / ``if`` / ``coalesce`` / ``nullif`` /
``greatest`` / ``least``, ``abs``, and ASCII string functions (``lower``, ``upper``,
``length``, ``trim``, ``concat``, ``startswith``, ``contains``, ``LIKE``). ``substring``
(DuckDB reads position 0 otherwise) and everything Spark-specific is left to
``test_spark_differential.py``.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import pyarrow as pa
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse_index.expressions import Predicate
from lakehouse_index.expressions.binder import Binder
from lakehouse_index.expressions.kernels import evaluate

SCHEMA = pa.schema(
    [("id", pa.int64()), ("a", pa.int32()), ("b", pa.int64()), ("s", pa.string()), ("u", pa.string())]
)
ROWS = pa.table(
    [
        list(range(10)),
        [0, 1, -1, 7, -7, None, 3, 12, -20, 5],
        [3, 0, None, -2, 2, 9, -9, 4, 0, 1],
        ["abc", " Ab ", "", None, "xyz", "ABC", "a%b", "b_c", "hello world", "Zed"],
        ["a", "b", None, "", "xy", "c", "%", "_", "o w", "Z"],
    ],
    schema=SCHEMA,
)


@st.composite
def ints(draw: st.DrawFn, depth: int = 3) -> str:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(["a", "b", "id", "(0)", "(2)", "(-3)", "(10)"]))
    i = ints(depth - 1)
    kind = draw(
        st.sampled_from(["arith", "arith", "mod", "abs", "length", "coalesce", "case", "pick", "nullif"])
    )
    if kind == "arith":
        # Products only at the top: DuckDB refuses an integer overflow that Spark wraps.
        ops = ["+", "-", "*"] if depth == 3 else ["+", "-"]
        return f"({draw(i)} {draw(st.sampled_from(ops))} {draw(i)})"
    if kind == "mod":
        return f"({draw(i)} % {draw(i)})"
    if kind == "abs":
        return f"abs({draw(i)})"
    if kind == "length":
        return f"length({draw(strings(depth - 1))})"
    if kind == "coalesce":
        return f"{draw(st.sampled_from(['coalesce', 'nvl']))}({draw(i)}, {draw(i)})"
    if kind == "case":
        return f"CASE WHEN {draw(bools(depth - 1))} THEN {draw(i)} ELSE {draw(i)} END"
    if kind == "pick":
        return f"{draw(st.sampled_from(['greatest', 'least']))}({draw(i)}, {draw(i)})"
    return f"nullif({draw(i)}, {draw(i)})"


@st.composite
def strings(draw: st.DrawFn, depth: int = 3) -> str:
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(["s", "u", "'ab'", "''", "' x '"]))
    s = strings(depth - 1)
    kind = draw(st.sampled_from(["lower", "upper", "trim", "concat", "if"]))
    if kind == "concat":
        return f"concat({draw(s)}, {draw(s)})"
    if kind == "if":
        return f"if({draw(bools(depth - 1))}, {draw(s)}, {draw(s)})"
    return f"{kind}({draw(s)})"


@st.composite
def bools(draw: st.DrawFn, depth: int = 3) -> str:
    if depth == 0:
        return draw(st.sampled_from(["(a > b)", "(s = u)", "TRUE"]))
    kind = draw(
        st.sampled_from(["cmp", "cmp", "scmp", "null", "str", "like", "logic", "not", "in", "between"])
    )
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "<=>"]))
        return f"({draw(ints(depth - 1))} {op} {draw(ints(depth - 1))})"
    if kind == "scmp":
        op = draw(st.sampled_from(["=", "<", ">=", "<=>"]))
        return f"({draw(strings(depth - 1))} {op} {draw(strings(depth - 1))})"
    if kind == "null":
        return f"({draw(ints(depth - 1))} IS {draw(st.sampled_from(['', 'NOT ']))}NULL)"
    if kind == "str":
        fn = draw(st.sampled_from(["startswith", "contains"]))
        return f"{fn}({draw(strings(depth - 1))}, {draw(strings(depth - 1))})"
    if kind == "like":
        pattern = draw(st.sampled_from(["'%b%'", "'_'", "'a%'", "'%'"]))
        return f"({draw(strings(depth - 1))} LIKE {pattern})"
    if kind == "logic":
        return f"({draw(bools(depth - 1))} {draw(st.sampled_from(['AND', 'OR']))} {draw(bools(depth - 1))})"
    if kind == "not":
        return f"(NOT {draw(bools(depth - 1))})"
    i = ints(depth - 1)
    if kind == "in":
        return f"({draw(i)} IN ({draw(i)}, {draw(i)}))"
    return f"({draw(i)} BETWEEN {draw(i)} AND {draw(i)})"


def _duckdb(sql: str) -> list[Any]:
    con = duckdb.connect()
    con.execute("SET error_on_division_by_zero = false")
    con.register("t", ROWS)
    query = sqlglot.transpile(f"SELECT {sql} AS v FROM t ORDER BY id", read="spark", write="duckdb")[0]
    return [r[0] for r in con.execute(query).fetchall()]


def _ours(sql: str) -> list[Any]:
    scalar = Binder(SCHEMA, sql).scalars.bind(sqlglot.parse_one(sql, read="spark"))
    return evaluate(scalar, {n: ROWS.column(n) for n in SCHEMA.names}, ROWS.num_rows, "UTC").to_pylist()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return a == b


@settings(max_examples=400, deadline=None)
@given(sql=st.one_of(ints(), strings(), bools()))
def test_values_equal_duckdb(sql: str) -> None:
    ours, theirs = _ours(sql), _duckdb(sql)
    assert all(_same(a, b) for a, b in zip(ours, theirs, strict=True)), (sql, ours, theirs)


@settings(max_examples=200, deadline=None)
@given(where=bools())
def test_filters_equal_duckdb(where: str) -> None:
    kept = ROWS.filter(Predicate.parse(where, SCHEMA).to_pyarrow()).column("id").to_pylist()
    con = duckdb.connect()
    con.execute("SET error_on_division_by_zero = false")
    con.register("t", ROWS)
    query = sqlglot.transpile(f"SELECT id FROM t WHERE {where} ORDER BY id", read="spark", write="duckdb")[0]
    assert kept == [r[0] for r in con.execute(query).fetchall()], where
