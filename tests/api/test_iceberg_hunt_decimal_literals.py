"""Numeric literals with more digits than a double holds, on decimal and bigint columns.

Spark reads an unsuffixed ``-312345678901234567890.0123456789`` as an exact DECIMAL(30, 10);
parsed as a double it rounds to -312345678901234570000 and the equality never holds (and
``id = 9007199254740993.0`` would match the row with id 9007199254740992). Unary minus on
a Python Decimal also rounds, to the default context's 28 digits.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakehouse_index as li
from lakehouse_index.expressions.predicate import Predicate

pytest.importorskip("pyiceberg")

BIG = [
    Decimal("-312345678901234567890.0123456789"),
    Decimal("1.5000000000"),
    Decimal("2012345678901234567890.0123456789"),
    Decimal("2012345678901234567890.0123456788"),
]
IDS = [9007199254740993, 9007199254740992, 3, 4]


@pytest.fixture()
def table(tmp_path: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import DecimalType, LongType, NestedField

    wh = tmp_path / "warehouse"
    wh.mkdir()
    cat = SqlCatalog("hunt", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{wh}")
    cat.create_namespace("db")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "big", DecimalType(38, 10), required=False),
    )
    pt = cat.create_table("db.t", schema, properties={"format-version": "2"})
    pt.append(pa.table({"id": pa.array(IDS, pa.int64()), "big": pa.array(BIG, pa.decimal128(38, 10))}))
    return li.open_table("db.t", catalog=cat)


@pytest.mark.parametrize(
    ("where", "ids"),
    [
        ("big = -312345678901234567890.0123456789", [9007199254740993]),
        ("big IN (-312345678901234567890.0123456789, 1.5)", [9007199254740992, 9007199254740993]),
        ("big = 2012345678901234567890.0123456788", [4]),
        ("big > 2012345678901234567890.0123456788", [3]),
        ("big <= 2012345678901234567890.0123456788", [4, 9007199254740992, 9007199254740993]),
        ("id = 9007199254740993.0", [9007199254740993]),
        ("id = 9007199254740992.0", [9007199254740992]),
        ("id > 9007199254740992.5", [9007199254740993]),
        ("big = 15E-1", [9007199254740992]),
    ],
)
def test_scan_with_wide_numeric_literal(table: Any, where: str, ids: list[int]) -> None:
    assert sorted(table.scan(where=where, use_indexes=False)["id"].to_pylist()) == ids
    table.create_index(li.SkippingIndex("skip", columns=["big", "id"]))
    table.create_index(li.CoveringIndex("cov", indexed="big", included=["id"]))
    assert sorted(table.scan(where=where)["id"].to_pylist()) == ids


def test_negated_decimal_literal_is_exact() -> None:
    schema = pa.schema([("big", pa.decimal128(38, 10))])
    pred = Predicate.parse("big = -312345678901234567890.0123456789", schema)
    assert pred.node is not None
    assert pred.node.right.value == Decimal("-312345678901234567890.0123456789")  # type: ignore[attr-defined]
