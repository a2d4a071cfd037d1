"""Scalar expressions in every ``where`` of the API, on both formats, against DuckDB's own evaluation.

The same SQL (transpiled from Spark's dialect by sqlglot) runs in DuckDB over the same rows;
the expressions chosen are those whose meaning DuckDB shares with Spark SQL. Writes are read
back with the format's own library (deltalake, pyiceberg).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
import sqlglot
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.errors import QueryError
from lakehouse_index.workflows.reports import WritePath
from tests.api.iceberg_index_support import sql_catalog

UTC = dt.timezone.utc
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("email", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("k", pa.string()),
        ("n", pa.int32()),
    ]
)


def _batch(lo: int, hi: int) -> pa.Table:
    rows = []
    for i in range(lo, hi):
        rows.append(
            {
                "id": i,
                "email": None if i % 11 == 0 else f"{'User' if i % 2 else 'user'}{i % 5}@Example.com",
                "ts": None
                if i % 13 == 0
                else dt.datetime(2023, 11, 13, 20, tzinfo=UTC) + dt.timedelta(hours=3 * i),
                "k": None if i % 17 == 0 else f"k{i}",
                "n": None if i % 7 == 3 else i - 20,
            }
        )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


WHERES = [
    "id % 7 = 1",
    "lower(email) = 'user3@example.com'",
    "upper(email) LIKE 'USER1%'",
    "date(ts) = '2023-11-14'",
    "year(ts) = 2023 AND month(ts) = 11 AND day(ts) >= 16",
    "hour(ts) = 5 OR minute(ts) != 0",
    "cast(id AS STRING) = '5'",
    "substring(k, 1, 2) = 'k5'",
    "id + 1 = 5",
    "id * 2 - n > 30",
    "n * 3 < id",
    "abs(n) <= 3",
    "coalesce(n, -100) = -100",
    "CASE WHEN n > 0 THEN 'pos' WHEN n < 0 THEN 'neg' ELSE 'zero' END = 'neg'",
    "length(k) = 2 AND k IS NOT NULL",
    "concat(k, '-', email) LIKE 'k2%'",
    "startswith(k, 'k3') OR endswith(email, '4@Example.com')",
    "id IN (1, n + 30, 40)",
    "NOT (n BETWEEN id - 30 AND id / 2)",
    "greatest(id, n) = id AND least(id, 10) = 10",
    "n IS DISTINCT FROM 5",
    "nullif(n, 0) IS NULL",
    "id = 8 AND id % 7 = 1",
]


def _duckdb_ids(rows: pa.Table, where: str) -> list[int]:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", rows)
    sql = sqlglot.transpile(f"SELECT id FROM t WHERE {where}", read="spark", write="duckdb")[0]
    return sorted(r[0] for r in con.execute(sql).fetchall())


def _open(tmp_path: Path, fmt: str) -> tuple[li.Table, Callable[[], pa.Table]]:
    files = [_batch(0, 30), _batch(30, 60)]
    if fmt == "delta":
        path = str(tmp_path / "t")
        for b in files:
            write_deltalake(path, b, mode="append")
        return li.open_table(path), lambda: DeltaTable(path).to_pyarrow_table()
    catalog = sql_catalog(str(tmp_path))
    tbl = catalog.create_table("db.t", schema=SCHEMA)
    for b in files:
        tbl.append(b)
    return li.open_table("db.t", catalog=catalog), lambda: catalog.load_table("db.t").scan().to_arrow()


def _ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_scan_and_explain_equal_duckdb(tmp_path: Path, fmt: str) -> None:
    t, read_back = _open(tmp_path, fmt)
    t.create_index(li.SecondaryIndex("by_id", key="id"))
    rows = read_back()
    for where in WHERES:
        want = _duckdb_ids(rows, where)
        assert _ids(t.scan(where=where)) == want, where
        assert _ids(t.scan(where=where, use_indexes=False)) == want, where
        assert str(t.explain(where=where))
    plan = t.explain(where="id = 8 AND id % 7 = 1")
    assert plan.chosen.label.startswith("by_id"), str(plan)


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
@pytest.mark.parametrize("use_indexes", [True, False])
def test_delete_update_overwrite_with_expressions(tmp_path: Path, fmt: str, use_indexes: bool) -> None:
    t, read_back = _open(tmp_path, fmt)
    t.create_index(li.SecondaryIndex("by_id", key="id"))
    before = read_back()
    where = "id % 7 = 1 AND lower(email) LIKE 'user%'"
    gone = set(_duckdb_ids(before, where))
    result = t.delete(where, use_indexes=use_indexes)
    assert result.path is WritePath.SCAN
    assert _ids(read_back()) == sorted(set(before.column("id").to_pylist()) - gone)

    rows = read_back()
    changed = set(_duckdb_ids(rows, "date(ts) = '2023-11-15'"))
    t.update("date(ts) = '2023-11-15'", {"k": "updated"}, use_indexes=use_indexes)
    after = read_back()
    updated = {r["id"] for r in after.to_pylist() if r["k"] == "updated"}
    assert updated == changed and after.num_rows == rows.num_rows

    replaced = set(_duckdb_ids(after, "substring(k, 1, 2) = 'k5'"))
    new = _batch(100, 103)
    t.overwrite(new, where="substring(k, 1, 2) = 'k5'", use_indexes=use_indexes)
    final = read_back()
    assert _ids(final) == sorted((set(after.column("id").to_pylist()) - replaced) | {100, 101, 102})
    # Indexes follow the writes: the index's answer equals a plain read.
    assert _ids(t.scan(where="id IN (8, 50, 101)")) == _ids(
        t.scan(where="id IN (8, 50, 101)", use_indexes=False)
    )


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("foo(id) = 1", "unknown function 'foo'; supported: abs"),
        ("current_date() = date(ts)", "not deterministic"),
        ("rand() > 0.5", "not deterministic"),
        ("lower(id) = 'a'", "lower needs STRING arguments"),
        ("id + email = 1", "+ needs numbers"),
        ("substring(k, 1, 2)", "is not a condition"),
    ],
)
def test_bad_expressions_are_refused_by_name(tmp_path: Path, where: str, message: str) -> None:
    t, _ = _open(tmp_path, "delta")
    with pytest.raises(QueryError, match=message.replace("+", r"\+").replace("(", r"\(")):
        t.scan(where=where)


def test_expressions_on_index_columns_filter_the_rows_read(tmp_path: Path) -> None:
    t, read_back = _open(tmp_path, "delta")
    t.create_index(li.CoveringIndex("cov", indexed="id", included=["email", "n"]))
    t.create_index(li.SkippingIndex("skip", columns=["id", "ts"]))
    rows = read_back()
    for where in ["id IN (3, 4, 5) AND n * 2 < -30", "id > 40 AND id % 3 = 0", "hour(ts) = 2 AND id < 50"]:
        assert _ids(t.scan(where=where)) == _duckdb_ids(rows, where), where


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_spark_read_with_expressions_equals_scan(spark: Any, tmp_path: Path, fmt: str) -> None:
    t, _ = _open(tmp_path, fmt)
    t.create_index(li.SecondaryIndex("by_id", key="id"))
    for where in [*WHERES[:12], "id = 8 AND id % 7 = 1"]:
        got = sorted(r["id"] for r in t.read(spark, where=where).select("id").collect())
        assert got == _ids(t.scan(where=where)), where


@pytest.mark.parametrize("column", ["comment", "set", "use", "describe"])
def test_columns_named_like_statement_keywords(tmp_path: Path, column: str) -> None:
    """A where starting with a column named like a SQL statement keyword is a condition, not a
    statement: the rows DuckDB's own filter returns (delete too)."""
    path = str(tmp_path / "t")
    values = ["x", None, "y", "x", "z"]
    write_deltalake(path, pa.table({"id": pa.array(range(5), pa.int64()), column: values}))
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_c", key=column))
    where = f"{column} = 'x' OR id > 3"
    rows = DeltaTable(path).to_pyarrow_table()  # noqa: F841 - DuckDB reads it by name
    want = sorted(
        r[0] for r in duckdb.sql(f"SELECT id FROM rows WHERE \"{column}\" = 'x' OR id > 3").fetchall()
    )
    assert sorted(t.scan(where=where).column("id").to_pylist()) == want
    assert sorted(t.scan(where=f"{column} = 'x'").column("id").to_pylist()) == [0, 3]
    t.delete(where=f"{column} = 'x'")
    assert sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == [1, 2, 4]
