"""Predicate parsing, renderings and analyses, against DuckDB and brute force."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from core_helpers import duckdb_filter, where_clauses
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse_index.errors import QueryError
from lakehouse_index.expressions import Predicate

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("k", pa.int64()),
        ("s", pa.string()),
        ("x", pa.float64()),
        ("p", pa.string()),
    ]
)
K = st.one_of(st.none(), st.integers(-3, 3))
S = st.one_of(st.none(), st.sampled_from(["a", "b", "ab", "ü", ""]))


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(0, 30))
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "k": pa.array([draw(K) for _ in range(n)], pa.int64()),
            "s": pa.array([draw(S) for _ in range(n)], pa.string()),
            "x": pa.array([draw(st.one_of(st.none(), st.sampled_from([0.0, 0.5, -1.25]))) for _ in range(n)]),
            "p": pa.array([draw(st.sampled_from(["a", "b", "c d"])) for _ in range(n)], pa.string()),
        },
        schema=SCHEMA,
    )


@settings(max_examples=150, deadline=None)
@given(table=tables(), where=where_clauses(partitioned=True, depth=3))
def test_pyarrow_rendering_matches_duckdb(table: pa.Table, where: str) -> None:
    pred = Predicate.parse(where, SCHEMA)
    got = table.filter(pred.to_pyarrow())
    assert got.column("id").to_pylist() == sorted(duckdb_filter(table, where).column("id").to_pylist())


@settings(max_examples=150, deadline=None)
@given(table=tables(), where=where_clauses(partitioned=True, depth=3), p=st.sampled_from(["a", "b", "c d"]))
def test_might_match_never_prunes_a_matching_file(table: pa.Table, where: str, p: str) -> None:
    """A 'file' whose rows all have p = value is pruned only if no row of it matches."""
    pred = Predicate.parse(where, SCHEMA)
    rows = table.filter(pc.equal(table["p"], p))
    if not pred.might_match({"p": p}):
        assert rows.filter(pred.to_pyarrow()).num_rows == 0


@settings(max_examples=150, deadline=None)
@given(table=tables(), where=where_clauses(partitioned=True, depth=3))
def test_key_values_cover_every_match(table: pa.Table, where: str) -> None:
    pred = Predicate.parse(where, SCHEMA)
    matched = table.filter(pred.to_pyarrow())
    for keys in (["k"], ["s"], ["k", "s"], ["p", "k"]):
        found = pred.key_values(keys)
        if found is None:
            continue
        allowed = set(found)
        for row in zip(*[matched.column(c).to_pylist() for c in keys], strict=True):
            assert row in allowed, (where, keys, row, found)


def test_key_values_shapes() -> None:
    def kv(where: str, keys: list[str]) -> object:
        return Predicate.parse(where, SCHEMA).key_values(keys)

    assert kv("k = 1", ["k"]) == [(1,)]
    assert kv("k IN (3, 1, 3) AND x > 0", ["k"]) == [(1,), (3,)]
    assert kv("(k = 1 AND s = 'a') OR (k = 2 AND s IN ('b', 'c'))", ["k", "s"]) == [
        (1, "a"),
        (2, "b"),
        (2, "c"),
    ]
    assert kv("k = 1 AND s IN ('a', 'b')", ["s", "k"]) == [("a", 1), ("b", 1)]
    assert kv("k = 1 OR s = 'a'", ["k"]) is None
    assert kv("k > 1", ["k"]) is None
    assert kv("NOT (k = 1)", ["k"]) is None
    assert kv("k = 1", ["k", "s"]) is None
    assert kv("k = 1 AND k = 2", ["k"]) == []


def test_literals_are_typed_for_their_column() -> None:
    schema = pa.schema(
        [
            ("d", pa.date32()),
            ("t", pa.timestamp("us", tz="UTC")),
            ("n", pa.timestamp("us")),
            ("m", pa.decimal128(10, 2)),
            ("f", pa.float32()),
            ("b", pa.bool_()),
            ("i", pa.int8()),
        ]
    )
    table = pa.table(
        {
            "d": [dt.date(2024, 1, 1), dt.date(2024, 1, 2)],
            "t": pa.array(
                [dt.datetime(2024, 1, 1, 10, tzinfo=dt.timezone.utc), None], schema.field("t").type
            ),
            "n": [dt.datetime(2024, 1, 1, 10), dt.datetime(2024, 1, 1, 11)],
            "m": pa.array([decimal.Decimal("1.50"), decimal.Decimal("2.00")], schema.field("m").type),
            "f": pa.array([0.5, 0.1], pa.float32()),
            "b": [True, False],
            "i": pa.array([1, 100], pa.int8()),
        },
        schema=schema,
    )
    cases = {
        "d = '2024-01-02'": 1,
        "d >= DATE '2024-01-01'": 2,
        "t = TIMESTAMP '2024-01-01 10:00:00'": 1,
        "t < '2024-01-01T11:00:00Z'": 1,
        "n > '2024-01-01 10:30'": 1,
        "m = 1.5": 1,
        "m IN (1, 2, 1.555)": 1,
        "m > 1": 2,
        "f = 0.5": 1,
        "f IN (0.1, 0.5)": 1,  # 0.1 is no float32 value (compared as double, as Spark)
        "b": 1,
        "NOT b": 1,
        "b IS TRUE": 1,
        "b IS NOT TRUE": 1,
        "i IN (1, 1000)": 1,
        "i < 1000": 2,
        "i = 1.5": 0,
    }
    for where, n in cases.items():
        pred = Predicate.parse(where, schema)
        assert table.filter(pred.to_pyarrow()).num_rows == n, where


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("k ==", "cannot parse"),
        ("zz = 1", "unknown column 'zz'"),
        ("k = 'x'", "cannot compare column 'k'"),
        ("s = 1", "cannot compare column 's'"),
        ("k = NULL", "IS NULL"),
        ("k IN (1, NULL)", "IS NULL"),
        ("k = s", "cannot compare BIGINT with STRING; cast one of them"),
        ("k", "not boolean"),
        ("k IN (SELECT 1)", "subquery"),
        ("upper(k) = 'A'", "upper needs STRING arguments, not BIGINT"),
        ("", "empty"),
    ],
)
def test_bad_predicates(where: str, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        Predicate.parse(where, SCHEMA)


def test_spark_sql_rendering_quotes_and_escapes() -> None:
    schema = pa.schema([("we`ird col", pa.string()), ("n", pa.int64())])
    pred = Predicate.parse("`we``ird col` = 'it\\'s \\\\ x' AND n NOT IN (1, 2)", schema)
    # Generated by sqlglot: Spark escapes, every literal typed by a CAST.
    assert pred.to_spark_sql() == (
        "((`we``ird col` = 'it\\'s \\\\ x') AND (NOT (`n` IN (CAST(1 AS BIGINT), CAST(2 AS BIGINT)))))"
    )
    assert pred.columns == frozenset(["we`ird col", "n"])


def test_pyarrow_expression_predicates() -> None:
    pred = Predicate.of(pc.field("k") > 1, SCHEMA)
    assert pred is not None
    assert pred.columns == frozenset(["k"])
    assert pred.might_match({"p": "a"})
    assert pred.key_values(["k"]) is None
    with pytest.raises(QueryError, match="SQL string"):
        pred.to_spark_sql()
    with pytest.raises(QueryError, match="does not fit"):
        Predicate.of(pc.field("nope") > 1, SCHEMA)
    # a predicate bound to another schema is re-bound (and re-checked)
    sql = Predicate.parse("k = 1", SCHEMA)
    other = pa.schema([("k", pa.int32())])
    rebound = Predicate.of(sql, other)
    assert rebound is not None and rebound.schema == other
    with pytest.raises(QueryError, match="unknown column"):
        Predicate.of(Predicate.parse("s = 'a'", SCHEMA), other)


def test_three_valued_partition_evaluation_is_exhaustive() -> None:
    """might_match equals brute force over every value the unknown column can take."""
    schema = pa.schema([("p", pa.string()), ("k", pa.int64())])
    wheres = [
        "NOT (p = 'a' AND k = 1)",
        "p = 'a' OR k = 1",
        "NOT (p IN ('a') OR k IS NULL)",
        "p IS NULL AND k = 1",
        "NOT (p <> 'a')",
        "NOT (p = 'b')",
    ]
    for where, pv in itertools.product(wheres, ["a", "b", None]):
        pred = Predicate.parse(where, schema)
        rows = pa.table({"p": pa.array([pv] * 3, pa.string()), "k": pa.array([1, 2, None], pa.int64())})
        can = rows.filter(pred.to_pyarrow()).num_rows > 0
        assert pred.might_match({"p": pv}) == can, (where, pv)
