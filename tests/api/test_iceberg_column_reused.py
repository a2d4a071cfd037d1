"""An indexed Iceberg column whose name comes to mean another column: renamed over (a rename
swap) or dropped and added again. Entries computed from the old column must never answer for
the new one: queries leave those index snapshots out, quick refreshes are refused with a
clear error, incremental refreshes (and so sync) rebuild. At every snapshot, before and
after, lookups, locates and scans equal pyiceberg's rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.catalog.sql import SqlCatalog

import lakehouse_index as li
from lakehouse_index.errors import InvalidIndexSpecError
from lakehouse_index.query.planner import Reason

N = 40


def _catalog(tmp_path: Path) -> tuple[SqlCatalog, li.Table]:
    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    schema = pa.schema([("id", pa.int64()), ("k", pa.string()), ("a", pa.string())])
    table = catalog.create_table("db.t", schema=schema)
    table.append(
        pa.table(
            {"id": range(N), "k": [f"k{i % 7}" for i in range(N)], "a": [f"k{i % 5}" for i in range(N)]},
            schema=schema,
        )
    )
    t = li.open_table("db.t", catalog=catalog)
    t.planner_config = li.PlannerConfig(force_index=True)  # a tiny table: use the index anyway
    t.create_index(li.SecondaryIndex("by_k", key="k", auto_refresh="off"))
    t.create_index(li.CoveringIndex("cov", indexed="k", included=["id"], auto_refresh="off"))
    return catalog, t


def _check_every_snapshot(catalog: SqlCatalog, t: li.Table) -> None:
    keys = ["k1", "k4", "k6", "x"]
    for snap in (s.snapshot_id for s in catalog.load_table("db.t").snapshots()):
        rows = catalog.load_table("db.t").scan(snapshot_id=snap).to_arrow()
        if "k" not in rows.column_names:  # the column is gone at this snapshot
            continue
        want = sorted(rows.filter(pc.is_in(rows["k"], pa.array(keys)))["id"].to_pylist())
        for index in ("by_k", "cov"):
            assert sorted(t.lookup(index, keys, version_as_of=snap)["id"].to_pylist()) == want
            assert t.locate(index, keys, version_as_of=snap).num_rows == len(want)
        where = "k IN ('k1', 'k4', 'k6', 'x')"
        assert sorted(t.scan(where=where, version_as_of=snap)["id"].to_pylist()) == want


def _rename_swap(catalog: SqlCatalog) -> None:
    with catalog.load_table("db.t").update_schema() as update:
        update.rename_column("k", "k_old")
    with catalog.load_table("db.t").update_schema() as update:
        update.rename_column("a", "k")  # `k` is now the old `a` (another field id)


def _drop_and_add(catalog: SqlCatalog) -> None:
    from pyiceberg.types import StringType

    with catalog.load_table("db.t").update_schema() as update:
        update.delete_column("k")
    with catalog.load_table("db.t").update_schema() as update:
        update.add_column("k", StringType())


@pytest.mark.parametrize("change", [_rename_swap, _drop_and_add], ids=["rename-swap", "drop-and-add"])
def test_an_index_never_answers_for_the_column_that_took_its_columns_name(
    tmp_path: Path, change: Callable[[SqlCatalog], None]
) -> None:
    catalog, t = _catalog(tmp_path)
    change(catalog)
    table = catalog.load_table("db.t")
    more = {"id": [100, 101], "k": ["k1", "k6"]}
    if "k_old" in table.schema().column_names:
        more["k_old"] = ["k2", "k3"]
    table.append(pa.table(more).cast(pa.schema([table.schema().as_arrow().field(c) for c in more])))
    _check_every_snapshot(catalog, t)  # the index lags: its snapshot is left out at new versions
    plan = t.explain("by_k", ["k1"])
    assert {c.reason for c in plan.candidates if c.entry is not None} == {Reason.COLUMN_CHANGED}

    with pytest.raises(InvalidIndexSpecError, match="mode='full'"):
        t.refresh_index("by_k", mode="quick")
    reports = {r.name: r for r in t.sync_indexes().indexes}  # policy off: only reported
    assert not reports["by_k"].error
    t.refresh_index("by_k", mode="incremental")  # rebuilds from the new column
    t.refresh_index("cov", mode="incremental")
    _check_every_snapshot(catalog, t)
    plan = t.explain("by_k", ["k1"])
    assert plan.chosen.entry is not None  # the rebuilt snapshot answers the latest version
