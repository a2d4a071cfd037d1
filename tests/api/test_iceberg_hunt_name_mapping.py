"""Iceberg data files without field ids are read through the table's name mapping.

``table.add_files`` registers existing Parquet files that carry no Iceberg field ids; readers
resolve their columns through ``schema.name-mapping.default`` (Iceberg spec, "Column
Projection": names → field id). After a rename, the mapping lists the old name too, so the
old files still hold the renamed column's values. pyiceberg (and Spark) read them; a reader that
matches files without field ids by the current column name reads nulls instead.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakehouse_index as li
from tests.api.iceberg_index_support import sql_catalog

pytest.importorskip("pyiceberg")


def _rows(t: pa.Table, names: list[str]) -> Counter[tuple[Any, ...]]:
    return Counter(zip(*[t[n].to_pylist() for n in names], strict=True))


@pytest.fixture()
def renamed_after_add_files(tmp_path: Path) -> Any:
    """A table whose second file came through add_files (no field ids, columns in another order),
    then ``country`` renamed to ``land``, then one more append."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    cat = sql_catalog(str(tmp_path))
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "email", StringType(), required=False),
        NestedField(3, "country", StringType(), required=False),
    )
    pt = cat.create_table("db.t", schema, properties={"format-version": "2"})
    pt.append(
        pa.table({"id": pa.array([1, 2], pa.int64()), "email": ["a@x", "b@x"], "country": ["DE", "FR"]})
    )
    path = f"{pt.location().removeprefix('file://')}/data/external.parquet"
    pq.write_table(
        pa.table({"country": ["US", "DE"], "email": ["c@x", "d@x"], "id": pa.array([3, 4], pa.int64())}), path
    )
    pt.add_files([f"file://{path}"])
    pt = cat.load_table("db.t")
    with pt.update_schema() as update:
        update.rename_column("country", "land")
    # a commit after the rename, so that the latest snapshot carries the renamed schema
    pt.append(pa.table({"id": pa.array([5], pa.int64()), "email": ["e@x"], "land": ["FR"]}))
    return cat


def test_plain_scan_reads_renamed_column_through_name_mapping(renamed_after_add_files: Any) -> None:
    cat = renamed_after_add_files
    want = cat.load_table("db.t").scan().to_arrow()
    assert sorted(want["land"].to_pylist()) == ["DE", "DE", "FR", "FR", "US"]
    t = li.open_table("db.t", catalog=cat)
    got = t.scan(use_indexes=False)
    assert _rows(got, ["id", "email", "land"]) == _rows(want, ["id", "email", "land"])


def test_index_on_renamed_column_finds_added_files_rows(renamed_after_add_files: Any) -> None:
    cat = renamed_after_add_files
    t = li.open_table("db.t", catalog=cat)
    t.create_index(li.SecondaryIndex("by_land", key="land"))
    assert sorted(t.lookup("by_land", ["DE"])["id"].to_pylist()) == [1, 4]
    assert t.locate("by_land", ["US"]).num_rows == 1
    assert t.scan(where="land = 'US'")["id"].to_pylist() == [3]


def test_lookup_returns_renamed_column_of_added_files(renamed_after_add_files: Any) -> None:
    cat = renamed_after_add_files
    t = li.open_table("db.t", catalog=cat)
    t.create_index(li.SecondaryIndex("by_email", key="email", record_key="id"))
    assert t.lookup("by_email", ["c@x"])["land"].to_pylist() == ["US"]
