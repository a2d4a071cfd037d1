"""``where`` means the same rows for scan, deltalake and pyiceberg: SQL three-valued logic
(nulls never match a comparison, NOT of unknown is unknown) and exact types."""

from __future__ import annotations

import datetime as dt
import decimal
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import write_deltalake

import lakehouse_index as li
from lakehouse_index.expressions import Predicate
from tests.api.iceberg_index_support import sql_catalog

UTC = dt.timezone.utc
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("i32", pa.int32()),
        pa.field("f", pa.float64()),
        pa.field("d", pa.date32()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("ntz", pa.timestamp("us")),
        pa.field("dec", pa.decimal128(10, 2)),
        pa.field("s", pa.string()),
        pa.field("b", pa.bool_()),
    ]
)
DATA = pa.table(
    {
        "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
        "i32": pa.array([1, 2, None, 4, 5], pa.int32()),
        "f": [1.5, None, 3.5, 4.5, 0.0],
        "d": pa.array([dt.date(2024, 1, i) for i in (1, 2, 3)] + [None, dt.date(2024, 2, 1)]),
        "ts": pa.array(
            [dt.datetime(2024, 1, i, 12, tzinfo=UTC) for i in (1, 2, 3, 4)] + [None],
            pa.timestamp("us", "UTC"),
        ),
        "ntz": pa.array([dt.datetime(2024, 1, i, 6) for i in (1, 2, 3, 4, 5)], pa.timestamp("us")),
        "dec": pa.array(
            [decimal.Decimal(x) if x else None for x in ("1.10", "2.25", None, "4.00", "5.5")],
            pa.decimal128(10, 2),
        ),
        "s": ["apple", None, "apricot", "banana", "b%x"],
        "b": [True, False, None, True, False],
    },
    schema=SCHEMA,
)
WHERES = [
    "i32 = 2",
    "i32 != 2",
    "NOT (i32 = 2)",
    "i32 IN (1, 4)",
    "i32 NOT IN (1, 4)",
    "f > 2.0",
    "NOT (f > 2.0)",
    "d >= DATE '2024-01-02'",
    "ts < TIMESTAMP '2024-01-03 00:00:00+00:00'",
    "ntz BETWEEN TIMESTAMP '2024-01-02 00:00:00' AND TIMESTAMP '2024-01-03 23:00:00'",
    "dec = 2.25",
    "s LIKE 'ap%'",
    "s NOT LIKE 'ap%'",
    "s IS NULL",
    "b AND i32 > 1",
    "b = false OR s = 'banana'",
    "NOT (s = 'apple' OR i32 IS NULL)",
    "id NOT BETWEEN 2 AND 4",
]


def _matching(where: str) -> pa.Table:
    mask = DATA.filter(Predicate.parse(where, SCHEMA).to_pyarrow())
    return mask


def _bag(t: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r.values()) for r in t.select(SCHEMA.names).to_pylist())


def _expected_after_delete(where: str) -> Counter[tuple[Any, ...]]:
    return _bag(DATA) - _bag(_matching(where))


def _delta(tmp_path: Path) -> li.Table:
    path = str(tmp_path / "t")
    write_deltalake(path, DATA)
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_s", key="s"))
    return t


def _iceberg(tmp_path: Path) -> li.Table:
    catalog = sql_catalog(str(tmp_path))
    tbl = catalog.create_table("db.t", schema=SCHEMA)
    tbl.append(DATA)
    t = li.open_table("db.t", catalog=catalog)
    t.create_index(li.SecondaryIndex("by_s", key="s"))
    return t


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
@pytest.mark.parametrize("where", WHERES)
def test_delete_removes_exactly_the_rows_where_the_predicate_is_true(
    tmp_path: Path, fmt: str, where: str
) -> None:
    t = _delta(tmp_path) if fmt == "delta" else _iceberg(tmp_path)
    result = t.delete(where)
    assert result.ok
    assert _bag(t.scan(use_indexes=False)) == _expected_after_delete(where)
    if result.rows_deleted is not None:
        assert result.rows_deleted == _matching(where).num_rows
    for s in ["apple", "apricot", "banana", "b%x"]:
        want = t.scan(use_indexes=False).filter(pc.equal(pc.field("s"), s))
        assert _bag(t.lookup("by_s", [s])) == _bag(want)


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_update_sets_typed_literals(tmp_path: Path, fmt: str) -> None:
    t = _delta(tmp_path) if fmt == "delta" else _iceberg(tmp_path)
    values = {
        "i32": 7,
        "f": 0.25,
        "d": dt.date(2030, 1, 1),
        "ts": dt.datetime(2030, 1, 1, 1, tzinfo=UTC),
        "ntz": dt.datetime(2030, 1, 1, 2),
        "dec": decimal.Decimal("9.99"),
        "s": "it's",
        "b": None,
    }
    result = t.update("s LIKE 'ap%'", set=values)
    assert result.ok and result.rows_updated == 2
    after = t.scan(use_indexes=False).sort_by("id").to_pylist()
    for row in after:
        if row["id"] in (1, 3):
            assert {k: row[k] for k in values} == values
    assert [r["id"] for r in t.lookup("by_s", ["it's"]).to_pylist()] in ([1, 3], [3, 1])
