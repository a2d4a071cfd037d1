"""An Iceberg key column widened after the index was built (int -> long): index files keep the
old type while files appended since hold values only the new type fits. Every query answers
like pyiceberg at every snapshot, before and after the index catches up."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import IntegerType, LongType, NestedField

import lakehouse_index as li

BIG = 2**40


def _expected(catalog: SqlCatalog, snapshot: int, keys: list[int]) -> list[int]:
    rows = catalog.load_table("db.t").scan(snapshot_id=snapshot).to_arrow()
    return sorted(rows.filter(pc.is_in(rows["k"], pa.array(keys, pa.int64())))["id"].to_pylist())


def test_queries_across_an_int_to_long_widening(tmp_path: Path) -> None:
    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    table = catalog.create_table(
        "db.t", schema=Schema(NestedField(1, "id", LongType()), NestedField(2, "k", IntegerType()))
    )
    table.append(pa.table({"id": range(50), "k": range(50)}).cast(table.schema().as_arrow()))
    t = li.open_table("db.t", catalog=catalog)
    t.planner_config = li.PlannerConfig(force_index=True)
    t.create_index(li.SecondaryIndex("by_k", key="k", auto_refresh="off"))
    with catalog.load_table("db.t").update_schema() as update:
        update.update_column("k", LongType())
    table = catalog.load_table("db.t")
    table.append(pa.table({"id": [50, 51], "k": [BIG, 1]}).cast(table.schema().as_arrow()))
    snapshots = [s.snapshot_id for s in catalog.load_table("db.t").snapshots()]
    keys = [1, 7, BIG]
    for refreshed in (False, True):
        if refreshed:
            t.refresh_index("by_k", mode="incremental")
        for snap in snapshots:
            want = _expected(catalog, snap, keys)
            assert sorted(t.lookup("by_k", keys, version_as_of=snap)["id"].to_pylist()) == want
            assert t.locate("by_k", keys, version_as_of=snap).num_rows == len(want)
            where = " OR ".join(f"k = {k}" for k in keys)
            assert sorted(t.scan(where=where, version_as_of=snap)["id"].to_pylist()) == want
