"""Scalar expressions evaluated in process equal Spark SQL's own evaluation of the same text.

Hypothesis builds expression trees over typed columns (nulls, NaN, ±0.0, integral extremes,
unicode, strings that casts may or may not read, timestamps around both DST changes of
America/New_York); Spark evaluates the user's SQL text itself on the same rows, in a session
whose time zone is America/New_York and with ``spark.sql.ansi.enabled=false``; the values
must be equal row by row. Conditions are also checked as filters: our evaluator, Spark on
the text, and Spark on our rendering (:meth:`Predicate.to_spark_sql`) keep the same rows.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_index.errors import QueryError
from lakehouse_index.expressions import Predicate
from lakehouse_index.expressions.binder import Binder
from lakehouse_index.expressions.kernels import evaluate
from lakehouse_index.expressions.sparktypes import INSTANT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ZONE = "America/New_York"
UTC = dt.timezone.utc
D = decimal.Decimal
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("a", pa.int32()),
        ("b", pa.int64()),
        ("x", pa.float64()),
        ("y", pa.float32()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("t", pa.timestamp("us", tz="UTC")),
        ("l", pa.timestamp("us")),
        ("m", pa.decimal128(10, 2)),
        ("f", pa.bool_()),
    ]
)


def _utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


A = [0, 1, -1, 7, -7, 2**31 - 1, -(2**31), 3, None, 100, -13, 2, 5, None]
B = [0, 3, -2, 2**63 - 1, -(2**63), 10, None, -1, 7, 1_000_000_007, 42, -3, 0, 8]
X = [0.0, -0.0, math.nan, 1.5, -2.5, math.inf, -math.inf, None, 1e308, 0.1, 2.0, -0.5, 3.0, 7.25]
Y = [0.5, -0.0, None, math.nan, 3.0, -1.25, 0.0, 2.5, 1e30, -7.0, 1.0, None, 4.0, 0.25]
S = [
    "12",
    " 7 ",
    "1.5",
    "abc",
    "2023-03-12",
    "2023-11-05 01:30:00",
    "ünïcødé",
    "",
    None,
    "NaN",
    "-0",
    "Hello World",
    "a_b%c",
    "true",
]
DATES = [
    dt.date(2023, 3, 12),
    dt.date(2023, 11, 5),
    dt.date(1970, 1, 1),
    None,
    dt.date(2024, 2, 29),
    dt.date(2000, 12, 31),
    dt.date(1999, 1, 3),
    dt.date(2023, 3, 11),
    dt.date(2023, 11, 4),
    dt.date(2038, 1, 19),
    None,
    dt.date(2023, 7, 4),
    dt.date(2023, 1, 1),
    dt.date(2023, 12, 31),
]
TIMES = [
    _utc(2023, 3, 12, 6, 30),  # 01:30 EST, before the spring gap
    _utc(2023, 3, 12, 7, 30),  # 03:30 EDT, after it
    _utc(2023, 11, 5, 5, 30),  # 01:30 EDT, the first of the repeated hour
    _utc(2023, 11, 5, 6, 30),  # 01:30 EST, the second
    None,
    _utc(1970, 1, 1),
    _utc(2023, 11, 5, 4, 59, 59, 999999),
    _utc(2024, 2, 29, 23, 59),
    _utc(2000, 1, 1, 5),
    _utc(2023, 3, 12, 7, 0),
    _utc(2038, 1, 19, 3, 14, 7),
    None,
    _utc(2023, 6, 30, 12, 0, 0, 500000),
    _utc(2023, 12, 31, 23, 0),
]
LOCALS = [None if v is None else v.replace(tzinfo=None) for v in reversed(TIMES)]
M = [D("1.50"), D("-3.25"), None, D("0.00"), D("99999999.99"), D("-0.01"), D("7.00")] * 2
F = [True, False, None, True, False, None, True] * 2
ROWS = pa.table(
    [list(range(len(A))), A, B, X, Y, S, DATES, TIMES, LOCALS, M, F],
    schema=SCHEMA,
)

# --------------------------------------------------------------------------- expression trees


def _lit_int(draw: st.DrawFn) -> str:
    v = draw(st.sampled_from([0, 1, -1, 2, 3, 7, -7, 10, 2**31 - 1, 100]))
    return f"({v})"


@st.composite
def ints(draw: st.DrawFn, depth: int = 2) -> str:
    """An INT or BIGINT expression."""
    leaves = ["a", "b", "id"]
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(leaves)) if draw(st.booleans()) else _lit_int(draw)
    i = ints(depth - 1)
    kind = draw(
        st.sampled_from(
            [
                "arith",
                "arith",
                "neg",
                "abs",
                "length",
                "datepart",
                "timepart",
                "datediff",
                "castd",
                "casts",
                "floor",
                "coalesce",
                "if",
                "case",
                "greatest",
                "nullif",
                "round",
                "div",
            ]
        )
    )
    if kind == "arith":
        return f"({draw(i)} {draw(st.sampled_from(['+', '-', '*', '%']))} {draw(i)})"
    if kind == "div":
        return f"({draw(i)} div {draw(i)})"
    if kind == "neg":
        return f"(-{draw(i)})"
    if kind == "abs":
        return f"abs({draw(i)})"
    if kind == "length":
        return f"length({draw(strings(depth - 1))})"
    if kind == "datepart":
        fn = draw(st.sampled_from(["year", "month", "day", "dayofmonth", "dayofweek"]))
        return f"{fn}({draw(st.one_of(dates(depth - 1), times(depth - 1)))})"
    if kind == "timepart":
        fn = draw(st.sampled_from(["hour", "minute", "second"]))
        return f"{fn}({draw(st.one_of(times(depth - 1), st.just('l')))})"
    if kind == "datediff":
        return f"datediff({draw(dates(depth - 1))}, {draw(dates(depth - 1))})"
    if kind == "castd":
        return f"CAST({draw(doubles(depth - 1))} AS {draw(st.sampled_from(['INT', 'BIGINT', 'TINYINT']))})"
    if kind == "casts":
        return f"CAST({draw(strings(depth - 1))} AS {draw(st.sampled_from(['INT', 'BIGINT', 'SMALLINT']))})"
    if kind == "floor":
        return f"{draw(st.sampled_from(['floor', 'ceil']))}({draw(doubles(depth - 1))})"
    if kind == "coalesce":
        return f"coalesce({draw(i)}, {draw(i)})"
    if kind == "if":
        return f"if({draw(bools(depth - 1))}, {draw(i)}, {draw(i)})"
    if kind == "case":
        first, second = draw(bools(depth - 1)), draw(bools(depth - 1))
        return f"CASE WHEN {first} THEN {draw(i)} WHEN {second} THEN {draw(i)} END"
    if kind == "greatest":
        return f"{draw(st.sampled_from(['greatest', 'least']))}({draw(i)}, {draw(i)}, {draw(i)})"
    if kind == "nullif":
        return f"nullif({draw(i)}, {draw(i)})"
    return f"round({draw(i)}, {draw(st.sampled_from(['-1', '-2', '0', '1']))})"


@st.composite
def doubles(draw: st.DrawFn, depth: int = 2) -> str:
    """A DOUBLE or FLOAT expression."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        lits = [
            "CAST('NaN' AS DOUBLE)",
            "CAST('-Infinity' AS DOUBLE)",
            "(-0.0D)",
            "(0.5D)",
            "(2.0D)",
            "(1e10)",
        ]
        return draw(st.sampled_from(["x", "y", "x", *lits]))
    x = doubles(depth - 1)
    kind = draw(
        st.sampled_from(["arith", "div", "mod", "sign", "round", "abs", "casts", "casti", "greatest", "if"])
    )
    if kind == "arith":
        return f"({draw(x)} {draw(st.sampled_from(['+', '-', '*']))} {draw(st.one_of(x, ints(depth - 1)))})"
    if kind == "div":
        return f"({draw(st.one_of(x, ints(depth - 1)))} / {draw(st.one_of(x, ints(depth - 1)))})"
    if kind == "mod":
        return f"({draw(x)} % {draw(x)})"
    if kind == "sign":
        return f"sign({draw(x)})"
    if kind == "round":
        return f"round({draw(x)}, {draw(st.sampled_from(['0', '1', '2']))})"
    if kind == "abs":
        return f"abs({draw(x)})"
    if kind == "casts":
        return f"CAST({draw(strings(depth - 1))} AS DOUBLE)"
    if kind == "casti":
        return f"CAST({draw(ints(depth - 1))} AS DOUBLE)"
    if kind == "greatest":
        return f"{draw(st.sampled_from(['greatest', 'least']))}({draw(x)}, {draw(x)})"
    return f"if({draw(bools(depth - 1))}, {draw(x)}, {draw(x)})"


_STRING_LITERALS = ["'ab'", "'ü'", "''", "' x '", "'2023-11-05'", "'%'", "'_'", "'World'", "'7'"]


@st.composite
def strings(draw: st.DrawFn, depth: int = 2) -> str:
    """A STRING expression."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(["s", "s", *_STRING_LITERALS]))
    s = strings(depth - 1)
    small = st.sampled_from(["0", "1", "2", "-1", "-3", "5", "(a % 8)"])
    kind = draw(
        st.sampled_from(
            [
                "case",
                "trim",
                "substring",
                "concat",
                "concat_ws",
                "replace",
                "pad",
                "casti",
                "castd",
                "castt",
                "if",
            ]
        )
    )
    if kind == "case":
        return f"{draw(st.sampled_from(['lower', 'upper']))}({draw(s)})"
    if kind == "trim":
        return f"{draw(st.sampled_from(['trim', 'ltrim', 'rtrim']))}({draw(s)})"
    if kind == "substring":
        fn = draw(st.sampled_from(["substring", "substr"]))
        if draw(st.booleans()):
            return f"{fn}({draw(s)}, {draw(small)})"
        return f"{fn}({draw(s)}, {draw(small)}, {draw(small)})"
    if kind == "concat":
        return f"concat({draw(s)}, {draw(s)})"
    if kind == "concat_ws":
        return f"concat_ws({draw(st.sampled_from(_STRING_LITERALS))}, {draw(s)}, {draw(s)})"
    if kind == "replace":
        return f"replace({draw(s)}, {draw(st.sampled_from(_STRING_LITERALS))}, {draw(s)})"
    if kind == "pad":
        fn = draw(st.sampled_from(["lpad", "rpad"]))
        return f"{fn}({draw(s)}, {draw(small)}, {draw(st.sampled_from(_STRING_LITERALS))})"
    if kind == "casti":
        return f"CAST({draw(ints(depth - 1))} AS STRING)"
    if kind == "castd":
        return f"CAST({draw(dates(depth - 1))} AS STRING)"
    if kind == "castt":
        return f"CAST({draw(st.one_of(times(depth - 1), st.just('l')))} AS STRING)"
    return f"if({draw(bools(depth - 1))}, {draw(s)}, {draw(s)})"


@st.composite
def dates(draw: st.DrawFn, depth: int = 2) -> str:
    """A DATE expression."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(["d", "d", "DATE '2023-03-12'", "DATE '1999-12-31'"]))
    kind = draw(st.sampled_from(["to_date", "date", "add", "sub", "casts", "castt", "coalesce"]))
    if kind == "to_date":
        return f"to_date({draw(st.one_of(times(depth - 1), st.just('l')))})"
    if kind == "date":
        return f"date({draw(times(depth - 1))})"
    if kind in ("add", "sub"):
        days = draw(st.sampled_from(["1", "-1", "31", "365", "a % 100"]))
        return f"date_{kind}({draw(dates(depth - 1))}, {days})"
    if kind == "casts":  # of the rows' and literal strings (see the guide on lenient parsing)
        return f"CAST({draw(st.sampled_from(['s', *_STRING_LITERALS]))} AS DATE)"
    if kind == "castt":
        return f"CAST({draw(times(depth - 1))} AS DATE)"
    return f"coalesce({draw(dates(depth - 1))}, DATE '2000-01-01')"


@st.composite
def times(draw: st.DrawFn, depth: int = 2) -> str:
    """A TIMESTAMP expression."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(
            st.sampled_from(["t", "t", "TIMESTAMP '2023-11-05 01:30:00'", "TIMESTAMP '2023-03-12 02:30:00'"])
        )
    kind = draw(st.sampled_from(["trunc", "castd", "casts", "castl", "greatest"]))
    if kind == "trunc":
        unit = draw(st.sampled_from(["YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND"]))
        return f"date_trunc('{unit}', {draw(times(depth - 1))})"
    if kind == "castd":
        return f"CAST({draw(dates(depth - 1))} AS TIMESTAMP)"
    if kind == "casts":
        return f"CAST({draw(st.sampled_from(['s', *_STRING_LITERALS]))} AS TIMESTAMP)"
    if kind == "castl":
        return "CAST(l AS TIMESTAMP)"
    return f"greatest({draw(times(depth - 1))}, {draw(times(depth - 1))})"


@st.composite
def bools(draw: st.DrawFn, depth: int = 2) -> str:
    """A BOOLEAN expression."""
    if depth == 0 or draw(st.integers(0, 4)) == 0:
        return draw(st.sampled_from(["f", "f", "TRUE", "CAST(NULL AS BOOLEAN)"]))
    kind = draw(
        st.sampled_from(
            ["cmp", "cmp", "cmp", "null", "isnan", "str", "like", "logic", "not", "in", "between"]
        )
    )
    if kind == "cmp":
        family = draw(st.sampled_from([ints, doubles, strings, dates, times]))
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "<=>", "IS DISTINCT FROM"]))
        return f"({draw(family(depth - 1))} {op} {draw(family(depth - 1))})"
    if kind == "null":
        negation = draw(st.sampled_from(["", "NOT "]))
        return f"({draw(st.one_of(ints(depth - 1), strings(depth - 1)))} IS {negation}NULL)"
    if kind == "isnan":
        return f"isnan({draw(doubles(depth - 1))})"
    if kind == "str":
        fn = draw(st.sampled_from(["startswith", "endswith", "contains"]))
        return f"{fn}({draw(strings(depth - 1))}, {draw(strings(depth - 1))})"
    if kind == "like":
        pattern = draw(st.sampled_from(["'%b%'", "'a\\\\_b%'", "'_'", "'%'", "'H%d'"]))
        op = draw(st.sampled_from(["LIKE", "NOT LIKE"]))
        if draw(st.booleans()):
            return f"({draw(strings(depth - 1))} {op} {pattern})"
        regex = draw(st.sampled_from(["'^a'", "'[0-9]+'", "'o W'", "'^$'", "'ü'"]))
        return f"({draw(strings(depth - 1))} RLIKE {regex})"
    if kind == "logic":
        return f"({draw(bools(depth - 1))} {draw(st.sampled_from(['AND', 'OR']))} {draw(bools(depth - 1))})"
    if kind == "not":
        return f"(NOT {draw(bools(depth - 1))})"
    if kind == "in":
        i = ints(depth - 1)
        return f"({draw(i)} {draw(st.sampled_from(['IN', 'NOT IN']))} ({draw(i)}, {draw(i)}, NULL))"
    x = doubles(depth - 1)
    return f"({draw(x)} BETWEEN {draw(x)} AND {draw(x)})"


ANY = st.one_of(ints(), doubles(), strings(), dates(), times(), bools())

# --------------------------------------------------------------------------- comparing


def _ours(text: str) -> list[Any]:
    binder = Binder(SCHEMA, text, ZONE)
    scalar = binder.scalars.bind(sqlglot.parse_one(text, read="spark"))
    values = evaluate(scalar, {n: ROWS.column(n) for n in SCHEMA.names}, ROWS.num_rows, ZONE)
    if values.type.equals(INSTANT):
        return [
            None if v is None else (v - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1)
            for v in values.to_pylist()
        ]
    return values.to_pylist()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return (bool(a == b) and type(a) is type(b)) or (a is None and b is None)


@pytest.fixture(scope="module")
def frame(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    path = os.path.join(tmp_path_factory.mktemp("differential"), "rows.parquet")
    pq.write_table(ROWS, path)
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", ZONE)
    spark.conf.set("spark.sql.ansi.enabled", "false")
    spark.read.parquet(path).createOrReplaceTempView("rows")
    yield spark
    spark.conf.set("spark.sql.session.timeZone", before)


def _spark_values(spark: SparkSession, texts: list[str]) -> list[list[Any]]:
    selected = []
    for i, text in enumerate(texts):
        binder = Binder(SCHEMA, text, ZONE)
        scalar = binder.scalars.bind(sqlglot.parse_one(text, read="spark"))
        value = f"unix_micros({text})" if scalar.type.equals(INSTANT) else text
        selected.append(f"{value} AS v{i}")
    rows = spark.sql(f"SELECT {', '.join(selected)} FROM rows ORDER BY id").collect()
    return [[r[f"v{i}"] for r in rows] for i in range(len(texts))]


@pytest.mark.spark
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(ANY, min_size=4, max_size=4))
def test_values_equal_spark(frame: SparkSession, texts: list[str]) -> None:
    ours = []
    for text in texts:
        try:
            ours.append(_ours(text))
        except QueryError as e:
            # The one refusal the trees can meet: a comparison Spark would coerce on its own.
            assert "cannot compare" in str(e) or "decimal" in str(e), (text, e)
            return
    theirs = _spark_values(frame, texts)
    for text, a, b in zip(texts, ours, theirs, strict=True):
        mismatched = [(i, x, y) for i, (x, y) in enumerate(zip(a, b, strict=True)) if not _same(x, y)]
        assert not mismatched, (text, mismatched)


@pytest.mark.spark
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=bools(3))
def test_filters_equal_spark_on_the_text_and_on_our_rendering(frame: SparkSession, where: str) -> None:
    try:
        pred = Predicate.parse(where, SCHEMA, ZONE)
    except QueryError as e:
        assert "cannot compare" in str(e) or "decimal" in str(e), (where, e)
        return
    ours = sorted(ROWS.filter(pred.to_pyarrow()).column("id").to_pylist())
    text = sorted(r["id"] for r in frame.sql(f"SELECT id FROM rows WHERE {where}").collect())
    rendered = sorted(
        r["id"] for r in frame.sql(f"SELECT id FROM rows WHERE {pred.to_spark_sql()}").collect()
    )
    assert ours == text == rendered, (where, pred.to_spark_sql())
