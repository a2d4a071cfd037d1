"""Index use through the source: a key predicate plans one partition per file holding the key,
an unindexed predicate one per live file; both answers equal the format's own reader.

Counted against files found independently (each live data file read with pyarrow), on a
Delta table whose index is stale (appends after the last refresh, answered by hybrid
scan), on delta-rs's peer table with deletion vectors at versions across its history, on a
pyiceberg-written Iceberg table with a stale index and an equality delete, and on a Spark-written
Iceberg format-v3 table with deletion vectors (``tests/data/iceberg-v3-dv``, written by Spark
3.5 with the Iceberg runtime: ``tests/support/make_iceberg_v3_dv.py``) whose index is stale.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from source_support import COLS, batch, partitions, source_frame, source_rows

import lakehouse_index as li

pytestmark = pytest.mark.spark

PEER_DV = Path(__file__).resolve().parents[1] / "data/peer-tables/delta-rs/cdf-table-with-cdc-and-dvs"
ICEBERG_V3_DV = Path(__file__).resolve().parents[1] / "data/iceberg-v3-dv"


def files_holding(dt: DeltaTable, column: str, value: Any) -> int:
    """Live data files of ``dt`` whose stored rows include ``value`` in ``column`` (deleted or not)."""
    return sum(1 for uri in dt.file_uris() if holds(uri, column, value))


def holds(uri: str, column: str, value: Any) -> bool:
    """Whether the data file at ``uri`` stores ``value`` in ``column`` (pyarrow, deletes ignored)."""
    stored = pq.read_table(uri.removeprefix("file://"), columns=[column])[column]
    return bool(pc.any(pc.equal(stored, value)).as_py())


def live_rows(dt: DeltaTable) -> pa.Table:
    """Every live row, deletion vectors applied (deltalake's scan)."""
    return pa.RecordBatchReader.from_stream(dt.scan()).read_all()


@pytest.mark.parametrize("push", ["false", "true"])
def test_stale_index_reads_only_the_located_files(source_spark: Any, tmp_path: Path, push: str) -> None:
    """The where option, or Spark's pushed WHERE with pushFilters=true, plans only the files
    holding the key."""
    path = str(tmp_path / "t")
    for i in range(4):
        write_deltalake(path, batch(i * 30, 30), mode="append")
    li.open_table(path).create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
    for i in range(4, 6):
        write_deltalake(path, batch(i * 30, 30), mode="append")  # not indexed: hybrid scan
    dt = DeltaTable(path)
    rows = dt.to_pyarrow_table()
    assert len(dt.file_uris()) == 6
    for key in ("k12", "k50", "k52"):  # an indexed file, an appended one, an id split over two files
        where = f"k = '{key}'"
        holding = files_holding(dt, "k", key)
        assert 1 <= holding < 6
        assert partitions(source_spark, path, where, forceIndex="true", pushFilters=push) == holding
        want = Counter(tuple(r[c] for c in COLS) for r in rows.to_pylist() if r["k"] == key)
        assert source_rows(source_spark, path, where, forceIndex="true", pushFilters=push) == want
    # a predicate no index answers: every live file, and the same rows
    assert partitions(source_spark, path, "v = 'v7'", forceIndex="true", pushFilters=push) == 6
    assert partitions(source_spark, path, "k = 'k12'", useIndexes="false", pushFilters=push) == 6
    want = Counter(tuple(r[c] for c in COLS) for r in rows.to_pylist() if r["v"] == "v7")
    assert source_rows(source_spark, path, "v = 'v7'", pushFilters=push) == want


def test_deletion_vectors_at_every_version(source_spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "dv")
    shutil.copytree(PEER_DV, path)
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_id", key="id"))
    checked = 0
    latest = t.latest_version()
    for version in sorted({*range(0, latest, 4), latest}):  # every 4th version of 26, and the last
        dt = DeltaTable(path, version=version)
        live = live_rows(dt)
        files = len(dt.file_uris())
        for key in sorted(set(live["id"].to_pylist()))[:2]:
            where = f"id = {key}"
            pairs = zip(live["id"].to_pylist(), live["comment"].to_pylist(), strict=True)
            assert source_rows_dv(source_spark, path, where, version) == Counter(
                p for p in pairs if p[0] == key
            )
            planned = partitions(source_spark, path, where, versionAsOf=version, forceIndex="true")
            assert 1 <= planned <= files_holding(dt, "id", key)  # deleted copies are not located
            checked += 1
        unindexed = partitions(source_spark, path, "comment = 'x'", versionAsOf=version, forceIndex="true")
        assert unindexed == files
    assert checked >= 10


def source_rows_dv(spark: Any, path: str, where: str, version: int) -> Counter[tuple[Any, ...]]:
    df = source_frame(spark, path, where, versionAsOf=version, forceIndex="true")
    return Counter((r["id"], r["comment"]) for r in df.collect())


def test_covering_answer_reads_the_index_alone(source_spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "c")
    for i in range(3):
        write_deltalake(path, batch(i * 30, 30), mode="append")
    t = li.open_table(path)
    t.create_index(li.CoveringIndex("cov", indexed=["k"], included=["id"], num_buckets=2))
    plan = li.explain_spark_source(path, "k = 'k12'", columns=["k", "id"], forceIndex="true")
    assert "alone" in plan.answer, str(plan)
    # Proof that no data file is read: remove the one holding the key.
    for uri in DeltaTable(path).file_uris():
        if holds(uri, "k", "k12"):
            Path(uri.removeprefix("file://")).unlink()
    df = (
        source_spark.read.format("lakehouse_index")
        .schema("k string, id long")
        .option("forceIndex", "true")
        .option("where", "k = 'k12'")
        .load(path)
    )
    assert sorted(tuple(r) for r in df.collect()) == [("k12", 36), ("k12", 37), ("k12", 38)]
    assert df.rdd.getNumPartitions() == 1


def test_iceberg_equality_deletes_through_the_source(source_spark: Any, tmp_path: Path) -> None:
    """An Iceberg table (pyiceberg-written) with a stale index and an equality delete on ``v``.

    pyiceberg cannot scan equality deletes: the oracle is its scan of the version before the
    delete, minus the deleted values, filtered in Python.
    """
    from tests.api.iceberg_index_support import commit_equality_delete, sql_catalog

    catalog = sql_catalog(str(tmp_path))
    ice = catalog.create_table("db.eq", schema=batch(0, 1).schema)
    for i in range(3):
        ice.append(batch(i * 30, 30))
    t = li.open_table("db.eq", catalog=catalog)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
    ice.append(batch(90, 30))  # not indexed: hybrid scan
    before = catalog.load_table("db.eq").scan().to_arrow()
    deleted = ["v37", "v38", "v100"]
    commit_equality_delete(catalog.load_table("db.eq"), "v", deleted, pa.string())
    location = catalog.load_table("db.eq").metadata.location
    live = [r for r in before.to_pylist() if r["v"] not in deleted]
    for key in ("k12", "k33", "k20"):  # in an indexed file (two rows deleted), appended (one deleted), intact
        where = f"k = '{key}'"
        want = Counter(tuple(r[c] for c in COLS) for r in live if r["k"] == key)
        assert source_rows(source_spark, location, where, forceIndex="true") == want
        assert partitions(source_spark, location, where, forceIndex="true") == 1
    want = Counter(tuple(r[c] for c in COLS) for r in live if r["g"] == 3)
    assert source_rows(source_spark, location, "g = 3", forceIndex="true") == want
    assert partitions(source_spark, location, "g = 3", forceIndex="true") == 4


@pytest.fixture
def iceberg_v3_dv() -> Iterator[tuple[Path, list[dict[str, Any]]]]:
    """The v3 fixture at the absolute path its metadata names, and Spark-Iceberg's reads of
    each snapshot (rows, live data files)."""
    from tests.support.make_iceberg_v3_dv import FIXTURE_ROOT, TABLE

    shutil.rmtree(FIXTURE_ROOT, ignore_errors=True)
    shutil.copytree(ICEBERG_V3_DV / "table", TABLE)
    snapshots = json.loads((ICEBERG_V3_DV / "expected.json").read_text())["snapshots"]
    yield TABLE, snapshots
    shutil.rmtree(FIXTURE_ROOT, ignore_errors=True)


def _metadata_number(path: Path) -> int:
    found = re.match(r"v(\d+)\.metadata\.json$", path.name)
    assert found is not None
    return int(found.group(1))


def test_iceberg_v3_deletion_vectors_with_a_stale_index(
    source_spark: Any, iceberg_v3_dv: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """Indexed at the first deletion-vector snapshot, read at every snapshot after an append,
    a second DV delete and a DV update: key predicates plan only files holding the key, an
    unindexed one every live file, and both return Spark-Iceberg's rows."""
    table, snapshots = iceberg_v3_dv
    meta = table / "metadata"
    later = sorted(meta.glob("v*.metadata.json"), key=_metadata_number)[4:]  # after s3 (create + 3)
    aside = tmp_path / "later"
    aside.mkdir()
    for f in later:
        f.rename(aside / f.name)
    t = li.open_table(str(table))
    assert t.latest_version() == snapshots[2]["snapshot"]
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
    for f in later:
        (aside / f.name).rename(f)
    t = li.open_table(str(table))
    assert t.latest_version() == snapshots[-1]["snapshot"]
    assert any(s["deleteFiles"] for s in snapshots[2:])

    checked = 0
    for snap in snapshots:
        version, live = snap["snapshot"], snap["rows"]
        data_files = [f.removeprefix("file:") for f in snap["dataFiles"]]
        # k0: every row deleted by s5; k7: rows in several files, some deleted; k13: updated by s6
        for key in ("k0", "k7", "k13", "k39"):
            where = f"k = '{key}'"
            want = Counter((r[0], r[1], r[2]) for r in live if r[1] == key)
            df = source_frame(source_spark, str(table), where, versionAsOf=version, forceIndex="true")
            assert Counter((r["id"], r["k"], r["v"]) for r in df.collect()) == want
            holding = sum(1 for f in data_files if holds(f, "k", key))
            planned = df.rdd.getNumPartitions()
            assert planned <= holding  # only files holding the key (deleted copies need not be read)
            if want:
                assert planned >= 1
            checked += 1
        unindexed = source_frame(source_spark, str(table), "v = 'v3'", versionAsOf=version, forceIndex="true")
        assert unindexed.rdd.getNumPartitions() == len(data_files)
        assert sorted(r["id"] for r in unindexed.collect()) == [r[0] for r in live if r[2] == "v3"]
    assert checked == 4 * len(snapshots)
