"""An incremental refresh whose indexed version left the table's history (Delta log cleanup,
Iceberg snapshot expiry) cannot replay commits from it: it rebuilds from the latest version
(instead of failing with ``VersionNotFoundError``), and every index kind then answers like
the format's own reader; older versions still in the history too.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:Delete operation did not match any records"),
]

KEYS: list[Any] = ["k1", "k5", None, "absent"]


def batch(b: int) -> pa.Table:
    ids = list(range(b * 100, b * 100 + 50))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([None if i % 11 == 2 else f"k{i % 7}" for i in ids], pa.string()),
            "g": pa.array([i % 3 for i in ids], pa.int32()),
        }
    )


def check(t: li.Table, full: pa.Table, version: int) -> None:
    want = Counter((r["k"], r["id"]) for r in full.to_pylist() if r["k"] in set(KEYS))
    for name in ("by_k", "cov"):
        got = t.lookup(name, KEYS, version_as_of=version, columns=["k", "id"])
        assert Counter(zip(got["k"].to_pylist(), got["id"].to_pylist(), strict=True)) == want, (name, version)
    scanned = t.scan(version_as_of=version, where="g = 1", columns=["id"])
    assert sorted(scanned["id"].to_pylist()) == sorted(r["id"] for r in full.to_pylist() if r["g"] == 1)


def make_indexes(t: li.Table, spark: Any) -> None:
    t.planner_config = li.PlannerConfig(force_index=True)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
    t.create_index(li.CoveringIndex("cov", indexed="k", included=["id"], num_buckets=2), spark=spark)
    t.create_index(li.SkippingIndex("skip", columns=["g"]))


@pytest.mark.parametrize("mode", ["incremental", "incremental-no-remap"])
def test_delta_refresh_after_log_cleanup(tmp_path: Path, spark: Any, mode: str) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, batch(0), configuration={"delta.logRetentionDuration": "interval 0 days"})
    write_deltalake(path, batch(1), mode="append")
    t = li.open_table(path)
    make_indexes(t, spark)  # at v1
    for b in range(2, 5):
        write_deltalake(path, batch(b), mode="append")
    DeltaTable(path).delete("id % 4 = 0")
    dt = DeltaTable(path)
    dt.create_checkpoint()
    dt.cleanup_metadata()
    assert not (Path(path) / "_delta_log" / f"{1:020d}.json").exists()  # the indexed version is gone

    t = li.open_table(path)
    t.planner_config = li.PlannerConfig(force_index=True)
    head = DeltaTable(path).version()
    for name in ("by_k", "cov", "skip"):
        info = t.refresh_index(name, "incremental", spark=spark, remap=mode == "incremental")
        assert info.indexed_version == head
    check(t, DeltaTable(path).to_pyarrow_table(), head)
    # Incremental refreshes work again from the rebuilt snapshot.
    write_deltalake(path, batch(9), mode="append")
    DeltaTable(path).update(predicate="id % 5 = 1", updates={"k": "'k5'"})
    for name in ("by_k", "cov", "skip"):
        t.refresh_index(name, "incremental", spark=spark)
    for v in (head, DeltaTable(path).version()):
        check(t, DeltaTable(path, version=v).to_pyarrow_table(), v)


def test_iceberg_refresh_after_snapshot_expiry(tmp_path: Path, spark: Any) -> None:
    from pyiceberg import expressions as X
    from pyiceberg.catalog.sql import SqlCatalog

    (tmp_path / "wh").mkdir()
    catalog = SqlCatalog("exp", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    ice = catalog.create_table("db.t", batch(0).schema, properties={"format-version": "2"})
    ice.append(batch(0))
    t = li.open_table("db.t", catalog=catalog)
    make_indexes(t, spark)
    indexed = ice.current_snapshot().snapshot_id
    for b in range(1, 4):
        ice.append(batch(b))
    ice.delete(X.EqualTo("g", 2))
    ice = catalog.load_table("db.t")
    ice.maintenance.expire_snapshots().by_id(indexed).commit()
    ice = catalog.load_table("db.t")
    assert indexed not in {s.snapshot_id for s in ice.snapshots()}

    head = ice.current_snapshot().snapshot_id
    for name in ("by_k", "cov", "skip"):
        info = t.refresh_index(name, "incremental", spark=spark)
        assert info.indexed_version == head
    for snap in ice.snapshots():
        check(t, ice.scan(snapshot_id=snap.snapshot_id).to_arrow(), snap.snapshot_id)
