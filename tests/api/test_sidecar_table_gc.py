"""The tables' own garbage collection leaves a real index alone, and the index keeps answering.

``<table>/_lakehouse_index/<name>/`` lives inside the table directory. Here real indexes
(secondary, covering, skipping; built in process and on Spark, refreshed, optimized) sit
beside tables with plenty of garbage, and the formats' own cleanup runs for real:

* Delta: deltalake's ``DeltaTable.vacuum(retention_hours=0, enforce_retention_duration=False,
  dry_run=False)`` (``full`` off and on);
* Iceberg: Spark's ``DeleteOrphanFiles`` action with ``olderThan`` in the future (the
  ``remove_orphan_files`` procedure refuses intervals under 24 hours) and the
  ``remove_orphan_files`` procedure itself, after back-dating every file by three days.

Each run has positive controls (the cleanup really deletes unreferenced table files, and
an untracked folder NOT starting with ``_``); the side-car tree must be byte-for-byte
unchanged, and lookups afterwards equal the independent reader (deltalake / Spark).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from iceberg_index_support import index_snapshots, key_filter, locate_via

import lakehouse_index as li
from tests.support.oracle import rows_multiset

pytestmark = pytest.mark.spark

PROBE: list[Any] = ["k0", "k3", "k6", None, "absent"]
COLS = ["id", "k", "g"]


def tree(root: Path) -> dict[str, str]:
    """Relative path → sha256 of every file under ``root``."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def check(t: li.Table, full: pa.Table, version: int) -> None:
    """Secondary and covering lookups, and locate through every retained snapshot, equal ``full``."""
    want = key_filter(full, PROBE, ("k",))
    for name in ("by_k", "cov"):
        got = t.lookup(name, PROBE, version_as_of=version, columns=COLS)
        assert rows_multiset(got, COLS) == rows_multiset(want, COLS), (name, version)
    for entry in index_snapshots(t, "by_k"):
        via, _ = locate_via(t, entry, version, PROBE)
        assert rows_multiset(via, ["k", "id"]) == rows_multiset(want, ["k", "id"]), (version, entry.id)
    scanned = t.scan(version_as_of=version, where="g = 1", columns=COLS)  # pruned by the skipping index
    assert rows_multiset(scanned, COLS) == rows_multiset(full.filter(pa.compute.equal(full["g"], 1)), COLS)


def batch(lo: int, n: int) -> pa.Table:
    ids = list(range(lo, lo + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([None if i % 11 == 5 else f"k{i % 7}" for i in ids], pa.string()),
            "g": pa.array([i % 3 for i in ids], pa.int32()),
        }
    )


def make_indexes(t: li.Table, spark: Any) -> None:
    t.planner_config = li.PlannerConfig(force_index=True)  # small tables: answer through the index
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
    # Built on Spark: its data directories carry Spark's side files too.
    t.create_index(
        li.CoveringIndex("cov", indexed="k", included=["id", "g"], num_buckets=2),
        spark=spark,
        local_max_rows=0,
    )
    t.create_index(li.SkippingIndex("skip", columns=["g"]))


# ---------------------------------------------------------------------- Delta


def delta_rows(path: str, version: int | None = None) -> pa.Table:
    return DeltaTable(path, version=version).to_pyarrow_table(columns=COLS)


@pytest.mark.parametrize("full", [False, True])
def test_delta_vacuum_keeps_a_live_index(tmp_path: Path, spark: Any, full: bool) -> None:
    path = str(tmp_path / "t")
    for b in range(4):
        write_deltalake(path, batch(100 * b, 40), mode="append")
    t = li.open_table(path)
    make_indexes(t, spark)
    # Garbage for the vacuum: rewritten and overwritten files; index snapshots at several versions.
    DeltaTable(path).delete("id % 5 = 0")
    for name in ("by_k", "cov", "skip"):
        t.refresh_index(name, mode="incremental", spark=spark)
    write_deltalake(path, batch(1000, 40), mode="overwrite")
    write_deltalake(path, batch(2000, 40), mode="append")
    for name in ("by_k", "cov", "skip"):
        t.refresh_index(name, mode="incremental", spark=spark)
    t.optimize_index("by_k", mode="full", spark=spark)
    DeltaTable(path).update(predicate="id % 3 = 0", updates={"k": "'k3'"})
    t.refresh_index("by_k", mode="quick")  # pending changes: answered by hybrid scan

    root = Path(path)
    side_car = root / "_lakehouse_index"
    before = tree(side_car)
    assert any(p.endswith(".parquet") for p in before) and any("/_log/" in p for p in before)
    stray = root / "stray" / "part-x.parquet"  # positive control for full=True
    stray.parent.mkdir()
    stray.write_bytes(b"not referenced by the table")
    live_before = tree(root).keys() - before.keys()

    deleted = DeltaTable(path).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False, full=full
    )
    assert deleted, "the vacuum deleted nothing: no garbage to prove anything with"
    assert not [p for p in deleted if "_lakehouse_index" in p]
    assert tree(side_car) == before  # every side-car file survived, unchanged
    left = tree(root).keys()
    assert live_before - left  # unreferenced table files went
    assert ("stray/part-x.parquet" in left) is not full  # a non-hidden untracked folder does go

    latest = DeltaTable(path).version()
    check(t, delta_rows(path), latest)
    # The index keeps working after the table's vacuum.
    write_deltalake(path, batch(3000, 40), mode="append")
    for name in ("by_k", "cov", "skip"):
        t.refresh_index(name, mode="incremental", spark=spark)
    t.vacuum_index("by_k", retention_hours=0)
    check(t, delta_rows(path), latest + 1)


def _rewrite(path: str) -> None:
    DeltaTable(path).update(predicate="id % 4 = 1", updates={"k": "'k3'"})


def _added_then_rewritten(path: str) -> None:
    write_deltalake(path, batch(1000, 30), mode="append")
    DeltaTable(path).delete("id = 1003")  # rewrites the file just added


def _delete(path: str) -> None:
    DeltaTable(path).delete("id % 9 = 3")


VACUUMED_HISTORIES = {"rewrite": _rewrite, "added-then-rewritten": _added_then_rewritten, "delete": _delete}


@pytest.mark.parametrize("history", list(VACUUMED_HISTORIES))
@pytest.mark.parametrize("how", ["remap", "no-remap", "on-spark"])
def test_incremental_refresh_after_the_table_vacuumed_files_it_replays(
    tmp_path: Path, spark: Any, history: str, how: str
) -> None:
    """Commits after the indexed version removed files, and the table's VACUUM deleted them
    before the refresh: the refresh must still work (the files are not needed for the latest
    version), and a query at a version whose files are gone fails as deltalake's read does."""
    path = str(tmp_path / "t")
    for b in range(3):
        write_deltalake(path, batch(100 * b, 30), mode="append")
    t = li.open_table(path)
    make_indexes(t, spark)
    VACUUMED_HISTORIES[history](path)
    assert DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    head = DeltaTable(path).version()  # deltalake logs VACUUM START / END commits

    local = {"local_max_rows": 0} if how == "on-spark" else {}
    for name in ("by_k", "cov", "skip"):
        info = t.refresh_index(name, mode="incremental", spark=spark, remap=how != "no-remap", **local)
        assert info.indexed_version == head
    check(t, delta_rows(path), head)
    unreadable = 0
    for v in range(head):
        try:
            want = delta_rows(path, v)
        except FileNotFoundError:  # deltalake cannot read it: the vacuum deleted some of its files
            unreadable += 1
            with pytest.raises(li.TableFormatError, match="is missing"):
                t.lookup("by_k", PROBE, version_as_of=v)  # every file holds rows of these keys
        else:
            check(t, want, v)
    assert unreadable  # the vacuum really removed files of versions the refresh replayed


# ---------------------------------------------------------------------- Iceberg

CATALOG = "gcaudit"


@pytest.fixture(scope="module")
def iceberg_spark(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """The run's Spark session with a Hadoop Iceberg catalog of its own."""
    from tests.support.spark_iceberg import spark_session

    wh = tmp_path_factory.mktemp("gc_wh")
    return spark_session(wh, catalog=CATALOG), wh


def spark_rows(session: Any, table: str) -> pa.Table:
    rows = session.sql(f"SELECT id, k, g FROM {table}").collect()
    return pa.Table.from_pylist(
        [r.asDict() for r in rows],
        schema=pa.schema([("id", pa.int64()), ("k", pa.string()), ("g", pa.int32())]),
    )


def build_iceberg(session: Any, wh: Path, name: str, spark: Any) -> tuple[str, Path, li.Table]:
    table = f"{CATALOG}.db.{name}"
    session.sql(
        f"CREATE TABLE {table} (id bigint, k string, g int) USING iceberg "
        f"TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    k_expr = "CASE WHEN id % 11 = 5 THEN NULL ELSE CONCAT('k', CAST(id % 7 AS STRING)) END"
    for lo in (0, 100, 200):
        session.sql(
            f"INSERT INTO {table} SELECT id, {k_expr}, CAST(id % 3 AS INT) FROM range({lo}, {lo + 40})"
        )
    root = wh / "db" / name
    t = li.open_table(str(root))
    make_indexes(t, spark)
    session.sql(f"DELETE FROM {table} WHERE id % 5 = 0")  # position deletes
    session.sql(f"INSERT OVERWRITE {table} SELECT id, {k_expr}, CAST(id % 3 AS INT) FROM range(1000, 1040)")
    for n in ("by_k", "cov", "skip"):
        t.refresh_index(n, mode="incremental", spark=spark)
    # Snapshots expired (table maintenance; the index's snapshot is the one retained) ...
    session.sql(
        f"CALL {CATALOG}.system.expire_snapshots(table => 'db.{name}', "
        f"older_than => TIMESTAMP '{_ts(time.time() + 60)}', retain_last => 1)"
    )
    # ... then changes the index only knows as pending (quick refresh: hybrid scan).
    session.sql(f"INSERT INTO {table} SELECT id, {k_expr}, CAST(id % 3 AS INT) FROM range(2000, 2040)")
    t.refresh_index("by_k", mode="quick")
    return table, root, t


def _ts(epoch_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _controls(root: Path) -> list[str]:
    """Unreferenced files the cleanup must delete: an orphan data file, an untracked folder, and a
    non-hidden copy of a side-car layout (its ``_log`` stays: the name starts with ``_``)."""
    controls = ["data/orphan-x.parquet", "stray/part-x.parquet", "lakehouse_index/by_k/data/d/part-0.parquet"]
    for rel in [*controls, "lakehouse_index/by_k/_log/00000000000000000000.json"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"unreferenced")
    return controls


def _relative(root: Path, uris: list[str]) -> set[str]:
    return {os.path.relpath(u.removeprefix("file:").removeprefix("//"), root) for u in uris}


@pytest.mark.integration
@pytest.mark.iceberg_spark
def test_iceberg_delete_orphan_files_keeps_a_live_index(iceberg_spark: tuple[Any, Path], spark: Any) -> None:
    session, wh = iceberg_spark
    table, root, t = build_iceberg(session, wh, "orphans_action", spark)
    side_car = root / "_lakehouse_index"
    before = tree(side_car)
    assert any(p.endswith(".parquet") for p in before)
    controls = _controls(root)

    jvm = session._jvm
    ice = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(session._jsparkSession, table)
    result = (
        jvm.org.apache.iceberg.spark.actions.SparkActions.get(session._jsparkSession)
        .deleteOrphanFiles(ice)
        .olderThan(int((time.time() + 86400) * 1000))  # everything unreferenced, however new
        .execute()
    )
    deleted = _relative(root, list(result.orphanFileLocations()))
    assert set(controls) <= deleted, deleted  # the cleanup did run, over the whole table location
    assert not [p for p in deleted if p.startswith("_lakehouse_index")], deleted
    assert (root / "lakehouse_index/by_k/_log/00000000000000000000.json").exists()
    assert tree(side_car) == before

    check(t, spark_rows(session, table), t.latest_version())
    session.sql(f"DELETE FROM {table} WHERE id % 7 = 1")
    for n in ("by_k", "cov", "skip"):
        t.refresh_index(n, mode="incremental", spark=spark)
    check(t, spark_rows(session, table), t.latest_version())


@pytest.mark.integration
@pytest.mark.iceberg_spark
def test_iceberg_remove_orphan_files_procedure_keeps_a_live_index(
    iceberg_spark: tuple[Any, Path], spark: Any
) -> None:
    session, wh = iceberg_spark
    table, root, t = build_iceberg(session, wh, "orphans_proc", spark)
    side_car = root / "_lakehouse_index"
    controls = _controls(root)
    # The procedure only accepts older_than at least 24 hours ago: age every file by three days.
    old = time.time() - 3 * 86400
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, (old, old))
    before = tree(side_car)

    rows = session.sql(
        f"CALL {CATALOG}.system.remove_orphan_files(table => 'db.orphans_proc', "
        f"older_than => TIMESTAMP '{_ts(time.time() - 2 * 86400)}')"
    ).collect()
    deleted = _relative(root, [r[0] for r in rows])
    assert set(controls) <= deleted, deleted
    assert not [p for p in deleted if p.startswith("_lakehouse_index")], deleted
    assert tree(side_car) == before
    check(t, spark_rows(session, table), t.latest_version())
