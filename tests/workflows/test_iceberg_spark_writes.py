"""Spark DataFrames written to Iceberg tables through Iceberg's own Spark writer.

The tables are pyiceberg tables in a SQL catalog on SQLite, as users open them for writes; the
Spark session reaches them through Iceberg's JDBC catalog on the same database, under the
pyiceberg catalog's name. ``t.append(df)`` is ``df.writeTo(...).append()`` and ``t.upsert(df)`` a
``MERGE INTO`` (merge-on-read: position deletes), the result says so, the indexes follow from
the commit, and at every snapshot lookups, locates and scans equal pyiceberg's read, which equals
Spark's Iceberg reader of the same snapshot (by its metadata file, not through the catalog).
A format-version 3 table in the session's own catalog of that name takes deletion vectors
(Spark's reader the oracle: pyiceberg writes no v3). Bad input commits nothing; a commit another
writer makes while Spark writes is not taken for the write's; a catalog Spark cannot reach leaves
the write to this package, and the result says why.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakehouse_index as li
from lakehouse_index.errors import WriteRefusedError
from tests.workflows.helpers import SCHEMA, check_version, create_indexes, index_state, multiset, rows

pytestmark = [pytest.mark.spark, pytest.mark.iceberg_spark]

DDL = "id long, k string, k2 long, v long, p string"
WRITTEN = "written by Iceberg's Spark writer"
MOR = {"format-version": "2", "write.merge.mode": "merge-on-read"}


def _catalog(directory: Path, uri: str | None = None) -> Any:
    """A pyiceberg SQL catalog of a name no other test uses (Spark keeps a catalog per name)."""
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = directory / "warehouse"
    warehouse.mkdir(parents=True, exist_ok=True)
    name = f"c{uuid.uuid4().hex[:12]}"
    catalog = SqlCatalog(name, uri=uri or f"sqlite:///{directory}/catalog.db", warehouse=warehouse.as_uri())
    catalog.create_namespace("db")
    return catalog


def _table(catalog: Any, properties: dict[str, str] | None = None) -> li.Table:
    tbl = catalog.create_table("db.t", schema=SCHEMA, properties=properties or {})
    tbl.append(rows([(1, "a", 0, 10, "x"), (2, "b", 1, 20, "y"), (3, "c", 2, 30, "x")]))
    t = li.open_table("db.t", catalog=catalog, config=li.Config(planner=li.PlannerConfig(force_index=True)))
    create_indexes(t)
    return t


def _frame(spark: Any, records: list[tuple[int, str, int, int, str]]) -> Any:
    return spark.createDataFrame(records, DDL)


def _pyiceberg_rows(catalog: Any, version: int) -> pa.Table:
    return catalog.load_table("db.t").scan(snapshot_id=version).to_arrow().select(SCHEMA.names)


def _spark_rows(spark: Any, catalog: Any, version: int) -> Counter[tuple[Any, ...]]:
    """Spark's Iceberg reader of the snapshot, by the table's metadata file (no catalog)."""
    location = catalog.load_table("db.t").metadata_location
    df = spark.read.format("iceberg").option("versionAsOf", version).load(location)
    return Counter(tuple(r[c] for c in SCHEMA.names) for r in df.collect())


def _check_every_version(spark: Any, catalog: Any, t: li.Table) -> None:
    for snap in catalog.load_table("db.t").snapshots():
        oracle = _pyiceberg_rows(catalog, snap.snapshot_id)
        assert multiset(oracle, SCHEMA.names) == _spark_rows(spark, catalog, snap.snapshot_id)
        check_version(t, snap.snapshot_id, oracle)


def _summary(catalog: Any, version: int) -> dict[str, str]:
    return dict(catalog.load_table("db.t").snapshot_by_id(version).summary.additional_properties)


def test_appends_and_merge_on_read_upserts_go_through_icebergs_writer(spark: Any, tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    t = _table(catalog, MOR)
    first = t.append(_frame(spark, [(4, "a", 1, 40, "y"), (5, "b", 2, 50, "x")]))
    assert first.note == WRITTEN and first.rows_written == 2 and first.ok
    assert first.table_version == t.latest_version()
    assert _summary(catalog, first.table_version)["engine-name"] == "spark"
    by_k = {i.name: i.indexed_version for i in t.indexes()}["by_k"]
    assert by_k == first.table_version
    up = t.upsert(_frame(spark, [(1, "b", 1, 11, "x"), (4, "c", 0, 41, "y"), (6, "a", 1, 60, "x")]), on="id")
    assert up.note == WRITTEN and up.ok and up.previous_version == first.table_version
    summary = _summary(catalog, up.table_version)
    # merge-on-read: the matched rows are marked deleted by position-delete files, not rewritten
    assert int(summary["added-position-deletes"]) == 2 and "deleted-data-files" not in summary
    assert {i.name: i.indexed_version for i in t.indexes()}["by_k"] == up.table_version
    _check_every_version(spark, catalog, t)
    got = t.lookup("by_k", ["a"]).to_pylist()
    assert sorted(r["id"] for r in got) == [6]  # 1 moved to "b", 4 to "c"


def test_copy_on_write_upsert_rewrites_files(spark: Any, tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    t = _table(catalog)
    up = t.upsert(_frame(spark, [(2, "a", 0, 21, "y"), (7, "c", 1, 70, "x")]), on="id")
    assert up.note == WRITTEN and "deleted-data-files" in _summary(catalog, up.table_version)
    _check_every_version(spark, catalog, t)


@pytest.mark.parametrize(
    ("ddl", "records", "refusal"),
    [
        # checked before Spark runs (a MERGE's UPDATE SET * would drop the column silently)
        (
            "id long, k string, k2 long, v long, p string, extra long",
            [(8, "a", 0, 80, "x", 1)],
            "not in the table",
        ),
        # refused by Iceberg's writer (a missing column is too on Spark 3.5; Spark 4 writes nulls
        # into a missing nullable column of an append)
        ("id long, k string, k2 long, v string, p string", [(8, "a", 0, "many", "x")], "refused the {}"),
        ("id long, k array<string>, k2 long, v long, p string", [(8, ["a"], 0, 80, "x")], "refused the {}"),
    ],
)
def test_frames_that_do_not_fit_commit_nothing(
    spark: Any, tmp_path: Path, ddl: str, records: list[tuple[Any, ...]], refusal: str
) -> None:
    catalog = _catalog(tmp_path)
    t = _table(catalog)
    head, state = t.latest_version(), index_state(t)
    frame = spark.createDataFrame(records, ddl)
    with pytest.raises(WriteRefusedError, match=refusal.format("append")):
        t.append(frame)
    with pytest.raises(WriteRefusedError, match=refusal.format("upsert")):
        t.upsert(frame, on="id")
    assert t.latest_version() == head and index_state(t) == state
    assert len(catalog.load_table("db.t").snapshots()) == 1


def test_upsert_keys_are_checked_before_icebergs_writer_runs(spark: Any, tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    t = _table(catalog)
    head = t.latest_version()
    with pytest.raises(WriteRefusedError, match=r"no key column\(s\) \['id'\] in the data"):
        t.upsert(spark.createDataFrame([("a", 1)], "k string, v long"), on="id")
    with pytest.raises(WriteRefusedError, match=r"no column\(s\) \['nope'\] in the table"):
        t.upsert(_frame(spark, [(1, "a", 0, 1, "x")]), on="nope")
    with pytest.raises(li.errors.DuplicateKeyError, match="not unique"):
        t.upsert(_frame(spark, [(9, "a", 0, 1, "x"), (9, "b", 0, 2, "x")]), on="id")
    assert t.latest_version() == head


def test_a_commit_made_while_spark_writes_is_not_taken_for_the_writes(spark: Any, tmp_path: Path) -> None:
    """A Python UDF of the frame commits a pyiceberg append (once) while Spark computes the frame:
    Iceberg's writer commits after it, and the result is the write's own snapshot."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    catalog = _catalog(tmp_path)
    t = _table(catalog)
    marker, name, db = str(tmp_path / "foreign-done"), catalog.name, f"sqlite:///{tmp_path}/catalog.db"
    foreign = rows([(100, "a", 1, 100, "y")])

    def commit_once(v: int) -> int:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return v
        from pyiceberg.catalog.sql import SqlCatalog

        SqlCatalog(name, uri=db).load_table("db.t").append(foreign)
        return v

    frame = _frame(spark, [(10, "a", 0, 10, "x")]).withColumn("v", F.udf(commit_once, LongType())("v"))
    base = t.latest_version()
    result = t.append(frame)
    assert result.note == WRITTEN and result.previous_version == base
    lineage = [s.snapshot_id for s in catalog.load_table("db.t").snapshots()]
    assert len(lineage) == 3 and lineage[-1] == result.table_version  # base, the other writer's, the write's
    assert _summary(catalog, lineage[1])["added-records"] == "1" and "engine-name" not in _summary(
        catalog, lineage[1]
    )
    assert {i.name: i.indexed_version for i in t.indexes()}["by_k"] == result.table_version
    assert sorted(r["id"] for r in t.lookup("by_k", ["a"]).to_pylist()) == [1, 10, 100]
    _check_every_version(spark, catalog, t)


def test_without_a_spark_catalog_for_the_table_this_package_writes_and_says_why(
    spark: Any, tmp_path: Path
) -> None:
    # An in-memory SQLite catalog is not reachable from Spark's JVM.
    memory = _catalog(tmp_path / "memory", uri="sqlite:///:memory:")
    t = _table(memory)
    result = t.append(_frame(spark, [(4, "a", 1, 40, "y")]))
    assert result.note is not None and "only a SQL catalog on a SQLite file" in result.note
    assert "Iceberg's Spark writer" not in result.note and "fewer writer features" in result.note
    assert sorted(r["id"] for r in t.lookup("by_k", ["a"]).to_pylist()) == [1, 4]
    # The session's own catalog of that name holds another table under the identifier: not used.
    catalog = _catalog(tmp_path / "sql")
    other = tmp_path / "other"
    spark.conf.set(f"spark.sql.catalog.{catalog.name}", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"spark.sql.catalog.{catalog.name}.type", "hadoop")
    spark.conf.set(f"spark.sql.catalog.{catalog.name}.warehouse", str(other))
    spark.sql(f"CREATE TABLE {catalog.name}.db.t ({DDL}) USING iceberg").collect()
    mine = _table(catalog)
    result = mine.upsert(_frame(spark, [(2, "a", 1, 21, "y")]), on="id")
    assert result.note is not None and "holds another table" in result.note
    assert sorted(r["id"] for r in mine.lookup("by_k", ["a"]).to_pylist()) == [1, 2]
    assert spark.table(f"{catalog.name}.db.t").count() == 0
    _check_every_version(spark, catalog, mine)


def test_format_version_3_through_the_sessions_own_catalog_takes_deletion_vectors(
    spark: Any, tmp_path: Path
) -> None:
    """A v3 table (pyiceberg writes no v3 metadata: Spark creates it) in the session's own JDBC
    catalog of the pyiceberg catalog's name: the merge-on-read upsert writes a deletion vector."""
    catalog = _catalog(tmp_path)
    key = f"spark.sql.catalog.{catalog.name}"
    spark.conf.set(key, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"{key}.type", "jdbc")
    spark.conf.set(f"{key}.uri", f"jdbc:sqlite:{tmp_path}/catalog.db")
    spark.conf.set(f"{key}.warehouse", (tmp_path / "warehouse").as_uri())
    spark.sql(
        f"CREATE TABLE {catalog.name}.db.t ({DDL}) USING iceberg "
        "TBLPROPERTIES ('format-version'='3', 'write.merge.mode'='merge-on-read')"
    ).collect()
    spark.sql(f"INSERT INTO {catalog.name}.db.t VALUES (1, 'a', 0, 10, 'x'), (2, 'b', 1, 20, 'y')").collect()
    t = li.open_table("db.t", catalog=catalog, config=li.Config(planner=li.PlannerConfig(force_index=True)))
    create_indexes(t)
    first = t.append(_frame(spark, [(3, "a", 1, 30, "x")]))
    up = t.upsert(_frame(spark, [(1, "c", 2, 11, "y"), (4, "a", 0, 40, "x")]), on="id")
    assert first.note == up.note == WRITTEN
    assert _summary(catalog, up.table_version)["added-dvs"] == "1"
    assert {i.name: i.indexed_version for i in t.indexes()}["by_k"] == up.table_version
    for snap in catalog.load_table("db.t").snapshots():
        want = _spark_rows(spark, catalog, snap.snapshot_id)
        oracle = pa.Table.from_pylist(
            [dict(zip(SCHEMA.names, r, strict=True)) for r in want.elements()], SCHEMA
        )
        check_version(t, snap.snapshot_id, oracle)
    assert sorted(r["id"] for r in t.lookup("by_k", ["a"]).to_pylist()) == [3, 4]
