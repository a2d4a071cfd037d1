"""The Spark SQL renderer: sqlglot reads back what it wrote, and Spark selects pyarrow's rows."""

from __future__ import annotations

import datetime as dt
import decimal
import os
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from lakehouse_index.expressions import Predicate, ast, quote_identifier, sql_literal
from lakehouse_index.expressions.spark import to_spark, to_spark_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

UTC = dt.timezone.utc
D = decimal.Decimal
LITERALS: dict[pa.DataType, st.SearchStrategy[object]] = {
    pa.int64(): st.integers(-(2**63), 2**63 - 1),
    pa.float64(): st.floats(),
    pa.string(): st.text(),
    pa.binary(): st.binary(),
    pa.bool_(): st.booleans(),
    pa.date32(): st.dates(),
    pa.timestamp("us", tz="UTC"): st.datetimes(timezones=st.just(UTC)),
    pa.timestamp("us"): st.datetimes(),
    pa.decimal128(10, 2): st.decimals(places=2, min_value=-(10**7), max_value=10**7, allow_nan=False),
}
TYPES = list(LITERALS)


@st.composite
def atoms(draw: st.DrawFn) -> ast.Node:
    t = draw(st.sampled_from(TYPES))
    col = ast.Col(draw(st.text(min_size=1, max_size=8)))

    def lit() -> ast.Lit:
        return ast.Lit(draw(LITERALS[t]), t)

    negated = draw(st.booleans())
    kind = draw(st.sampled_from(["cmp", "in", "null", "between", "like"]))
    if kind == "cmp":
        return ast.Compare(draw(st.sampled_from(ast.COMPARISONS)), col, lit())
    if kind == "in":
        return ast.In(col, tuple(lit() for _ in range(draw(st.integers(1, 3)))), t, negated)
    if kind == "null":
        return ast.IsNull(col, negated)
    if kind == "between":
        return ast.Between(col, lit(), lit(), negated)
    return ast.Like(col, draw(st.text()), negated)


@st.composite
def trees(draw: st.DrawFn, depth: int = 2) -> ast.Node:
    if depth == 0 or draw(st.booleans()):
        return draw(st.one_of(atoms(), st.booleans().map(ast.Const)))
    kind = draw(st.sampled_from(["and", "or", "not"]))
    if kind == "not":
        return ast.Not(draw(trees(depth - 1)))
    parts = tuple(draw(trees(depth - 1)) for _ in range(draw(st.integers(2, 3))))
    return ast.And(parts) if kind == "and" else ast.Or(parts)


def _as_cast(e: exp.Expression) -> exp.Expression:
    # sqlglot reads Spark's CAST as TryCast (it yields null on failure outside ANSI mode).
    return exp.Cast(**e.args) if isinstance(e, exp.TryCast) else e


@settings(max_examples=300, deadline=None)
@given(tree=trees())
def test_sqlglot_reads_back_what_it_wrote(tree: ast.Node) -> None:
    sql = to_spark_sql(tree)
    back = sqlglot.parse_one(sql, read="spark")
    assert back.sql(dialect="spark") == sql
    assert back.transform(_as_cast) == to_spark(tree)


@settings(max_examples=200, deadline=None)
@given(name=st.text(min_size=1), text=st.text())
def test_identifiers_and_strings_survive(name: str, text: str) -> None:
    column = sqlglot.parse_one(quote_identifier(name), read="spark")
    assert isinstance(column, exp.Column) and column.name == name
    literal = sqlglot.parse_one(sql_literal(text, pa.string()), read="spark")
    assert isinstance(literal, exp.Literal) and literal.is_string and literal.this == text


def test_literal_spellings() -> None:
    assert sql_literal(-5, pa.int8()) == "CAST(-5 AS BIGINT)"
    assert sql_literal(0.1, pa.float32()) == "CAST('0.1' AS DOUBLE)"
    assert sql_literal(float("-inf"), pa.float64()) == "CAST('-Infinity' AS DOUBLE)"
    assert sql_literal(float("nan"), pa.float64()) == "CAST('NaN' AS DOUBLE)"
    assert sql_literal(decimal.Decimal("1.50"), pa.decimal128(5, 2)) == "CAST('1.50' AS DECIMAL(5, 2))"
    assert sql_literal(b"\x01\xff", pa.binary()) == "X'01FF'"
    assert sql_literal(dt.date(2024, 2, 29), pa.date32()) == "CAST('2024-02-29' AS DATE)"
    aware = dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert sql_literal(aware, pa.timestamp("us", tz="UTC")) == (
        "CAST('2024-01-01 10:00:00+00:00' AS TIMESTAMP)"
    )
    assert sql_literal(dt.datetime(2024, 1, 1), pa.timestamp("us")) == (
        "CAST('2024-01-01 00:00:00' AS TIMESTAMP_NTZ)"
    )
    assert quote_identifier("a`b") == "`a``b`"


ODD = "we`ird col"
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("k", pa.int64()),
        ("x", pa.float64()),
        (ODD, pa.string()),
        ("d", pa.date32()),
        ("t", pa.timestamp("us", tz="UTC")),
        ("m", pa.decimal128(6, 2)),
        ("b", pa.bool_()),
    ]
)
ROWS = [
    (1, 1, 0.1, "it's", dt.date(2024, 1, 1), dt.datetime(2024, 1, 1, 10, tzinfo=UTC), D("1.50"), True),
    (2, None, 0.30000000000000004, "a\\b", dt.date(2024, 1, 2), None, D("2.00"), False),
    (3, 3, -1.5, "50%", None, dt.datetime(2024, 1, 2, tzinfo=UTC), None, None),
    (4, -2, None, "a_b", dt.date(2024, 3, 1), dt.datetime(2023, 12, 31, 23, tzinfo=UTC), D("-3.25"), True),
    (5, 5, 1e300, None, dt.date(2024, 1, 1), dt.datetime(2024, 1, 1, 10, tzinfo=UTC), D("0.01"), False),
    (6, 0, 2.5, "ünï\ncode", dt.date(2024, 2, 29), None, D("9999.99"), None),
    (7, 2**53 + 1, -0.0, "", None, None, None, None),
    (8, -(2**63), 0.0, "", None, None, None, None),
]
WHERES = [
    "k NOT IN (1, 5)",
    "k IN (1, 3) OR k IS NULL",
    "x = 0.30000000000000004",
    "x > 0.1 AND x < 1e301",
    "x NOT BETWEEN -1 AND 1",
    f"`{ODD.replace('`', '``')}` = 'it\\'s'",
    f"`{ODD.replace('`', '``')}` LIKE 'a\\\\\\\\%'",
    f"`{ODD.replace('`', '``')}` LIKE '%\\\\%'",
    f"`{ODD.replace('`', '``')}` NOT LIKE 'a\\\\_b'",
    f"`{ODD.replace('`', '``')}` LIKE '%\\ncode'",
    "d BETWEEN '2024-01-01' AND DATE '2024-01-31'",
    "t < '2024-01-01 11:00:00+01:00'",
    "t >= TIMESTAMP '2024-01-01 10:00:00'",
    "m = 1.5 OR m IN (2, -3.25, 1.555)",
    "m > 9999",
    "b OR NOT (k > 0)",
    "b IS NOT TRUE AND NOT (m < 0)",
    # integer columns against numbers they do not hold, and signed zeros
    "k > 2.5 OR k <= -0.5",
    "k = 1.5 OR k BETWEEN 0.5 AND 3.5",
    "NOT (k != 1.5) OR k >= 9007199254740992.5",
    "k < 1e30 AND k > -9223372036854775809",
    "x IN (0, 2.5)",
    "x NOT IN (-0.0)",
    "x IN (-0.0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)",  # Spark's InSet past 10 values
]


@pytest.mark.spark
def test_spark_selects_the_rows_pyarrow_selects(spark: SparkSession, tmp_path: os.PathLike[str]) -> None:
    columns = list(zip(*ROWS, strict=True))
    data = {f.name: pa.array(list(c), type=f.type) for f, c in zip(SCHEMA, columns, strict=True)}
    table = pa.table(data, schema=SCHEMA)
    path = os.path.join(tmp_path, "t.parquet")
    pq.write_table(table, path)
    frame = spark.read.parquet(path)
    for where in WHERES:
        pred = Predicate.parse(where, SCHEMA)
        want = sorted(table.filter(pred.to_pyarrow()).column("id").to_pylist())
        got = sorted(r["id"] for r in frame.filter(pred.to_spark_sql()).select("id").collect())
        assert got == want, (where, pred.to_spark_sql())
