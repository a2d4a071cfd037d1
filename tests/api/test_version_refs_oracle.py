"""How a query names its table version (issue 6: ``version_as_of`` — Delta version, Iceberg
snapshot id / tag / branch — or ``timestamp_as_of``), through ``lookup``, ``locate``,
``explain`` and ``read(spark)``.

The expected version is resolved independently: Delta commit timestamps from deltalake's
``history()``, Iceberg tags, branches and the snapshot log from pyiceberg's metadata; the
expected rows are that version's read by deltalake / pyiceberg.
"""

from __future__ import annotations

import datetime as dt
import os
import time
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

KEYS: list[Any] = ["k0", "k3", None, "absent"]


def batch(b: int) -> pa.Table:
    ids = list(range(b * 100, b * 100 + 40))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([None if i % 9 == 4 else f"k{i % 5}" for i in ids], pa.string()),
        }
    )


def pairs(table: pa.Table) -> Counter[tuple[Any, int]]:
    return Counter((r["k"], r["id"]) for r in table.to_pylist() if r["k"] in set(KEYS))


def check(t: li.Table, want: pa.Table, **at: Any) -> None:
    expected = pairs(want)
    for name in ("by_k", "cov"):
        assert pairs(t.lookup(name, KEYS, columns=["k", "id"], **at)) == expected, (name, at)
    assert pairs(t.locate("by_k", KEYS, **at)) == expected, at
    assert t.explain("by_k", KEYS, **at).target.version == t.resolve_version(**at)


def make_indexes(t: li.Table, spark: Any) -> None:
    t.planner_config = li.PlannerConfig(force_index=True)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
    t.create_index(li.CoveringIndex("cov", indexed="k", included=["id"], num_buckets=2), spark=spark)


def test_delta_timestamp_as_of(tmp_path: Path, spark: Any) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, batch(0))
    t = li.open_table(path)
    make_indexes(t, spark)
    for b in range(1, 4):
        time.sleep(0.05)  # distinct commit timestamps, every commit
        write_deltalake(path, batch(b), mode="append")
        if b == 2:
            time.sleep(0.05)
            DeltaTable(path).delete("id % 3 = 0")
    t.refresh_index("by_k", "incremental", spark=spark)
    t.refresh_index("cov", "quick")
    # A Delta commit's time is its commit file's modification time (the protocol, without
    # in-commit timestamps); commitInfo's own timestamp is taken before the file is written and
    # may be older by more than a millisecond on a loaded machine.
    log = Path(path) / "_delta_log"
    commits = sorted(
        (os.stat(log / f"{h['version']:020d}.json").st_mtime_ns // 1_000_000, h["version"])
        for h in DeltaTable(path).history()
    )
    for ts, version in commits:
        want = DeltaTable(path, version=version).to_pyarrow_table()
        check(t, want, timestamp_as_of=ts)  # epoch ms, exactly at the commit
        check(t, want, timestamp_as_of=dt.datetime.fromtimestamp((ts + 0.5) / 1000, dt.timezone.utc))
    with pytest.raises(li.VersionNotFoundError):
        t.lookup("by_k", KEYS, timestamp_as_of=commits[0][0] - 1000)
    ts, version = commits[len(commits) // 2]
    df = t.read(spark, timestamp_as_of=ts, where="k IN ('k0', 'k3')")
    got = Counter((r["k"], r["id"]) for r in df.collect())
    want_rows = DeltaTable(path, version=version).to_pyarrow_table().to_pylist()
    assert got == Counter((r["k"], r["id"]) for r in want_rows if r["k"] in ("k0", "k3"))


def test_iceberg_tags_branches_and_timestamps(tmp_path: Path, spark: Any) -> None:
    from pyiceberg import expressions as X
    from pyiceberg.catalog.sql import SqlCatalog

    (tmp_path / "wh").mkdir()
    catalog = SqlCatalog("refs", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    ice = catalog.create_table("db.t", batch(0).schema, properties={"format-version": "2"})
    ice.append(batch(0))
    ice.append(batch(1))
    t = li.open_table("db.t", catalog=catalog)
    make_indexes(t, spark)
    tagged = ice.current_snapshot().snapshot_id
    ice.manage_snapshots().create_tag(tagged, "v1").create_branch(tagged, "dev").commit()
    ice = catalog.load_table("db.t")
    ice.append(batch(2), branch="dev")  # the branch moves on alone
    ice = catalog.load_table("db.t")
    ice.delete(X.EqualTo("id", 103), branch="dev")
    ice = catalog.load_table("db.t")
    ice.append(batch(3))  # main moves on
    ice = catalog.load_table("db.t")
    ice.delete(X.LessThan("id", 20))
    ice = catalog.load_table("db.t")
    t.refresh_index("by_k", "incremental", spark=spark)

    refs = ice.metadata.refs
    assert refs["v1"].snapshot_id == tagged and refs["dev"].snapshot_id != tagged
    for name in ("v1", "dev", "main"):
        sid = refs[name].snapshot_id
        check(t, ice.scan(snapshot_id=sid).to_arrow(), version_as_of=name)
    for entry in ice.metadata.snapshot_log:  # main's history by time
        want = ice.scan(snapshot_id=entry.snapshot_id).to_arrow()
        check(t, want, timestamp_as_of=entry.timestamp_ms)
    df = t.read(spark, version_as_of="dev", where="k = 'k3'")
    got = Counter((r["k"], r["id"]) for r in df.collect())
    dev_rows = ice.scan(snapshot_id=refs["dev"].snapshot_id).to_arrow().to_pylist()
    assert got == Counter((r["k"], r["id"]) for r in dev_rows if r["k"] == "k3")
    with pytest.raises(li.VersionNotFoundError):
        t.lookup("by_k", KEYS, version_as_of="no-such-ref")
