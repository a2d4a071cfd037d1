"""``locate``'s ``_row_id`` on Spark-written Iceberg v3 tables against Spark's own ``_row_id`` (issue 5).

A v3 table is written by Spark (Iceberg 1.10) over several commits and indexed without a
record key; then row ids move and get materialized: copy-on-write UPDATE and MERGE,
merge-on-read UPDATE, MERGE and DELETE (deletion vectors), ``rewrite_data_files`` and a
last INSERT. After every statement, for every snapshot of the main lineage, ``locate``
equals Spark's ``SELECT k, _row_id, _file, _pos ... VERSION AS OF`` for the probed keys —
through an index refreshed incrementally after each statement and through one never
refreshed (its answers combine index entries with scans of the files it does not cover).
At the end every retained snapshot of the refreshed index is forced for every version.

Tables without row ids (v2) and indexes with a declared record key keep the old columns.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

import lakehouse_index as li
from lakehouse_index.io import join_uri
from lakehouse_index.log.store import IndexCatalog
from lakehouse_index.query import lookup as lk

pytestmark = [pytest.mark.spark, pytest.mark.iceberg_spark, pytest.mark.integration]

CATALOG = "rowids"
PROBE: list[Any] = ["a", "ü", None, "", "日本", "missing"]
#: k: duplicates, unicode, empty string and nulls.
K_EXPR = (
    "CASE WHEN id % 9 = 4 THEN NULL "
    "ELSE element_at(array('a', 'b', 'c', 'ü', '', '日本'), CAST(id % 6 AS INT) + 1) END"
)
COW = ", ".join(f"'write.{op}.mode'='copy-on-write'" for op in ("delete", "update", "merge"))
MOR = ", ".join(f"'write.{op}.mode'='merge-on-read'" for op in ("delete", "update", "merge"))


@pytest.fixture(scope="module")
def spark_wh(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.support.spark_iceberg import spark_session

    wh = tmp_path_factory.mktemp("rowid_wh")
    session = spark_session(wh, catalog=CATALOG)  # the run's shared session (its JVM has the Iceberg jars)
    return session, wh


def statements(t: str, name: str) -> list[str]:
    """Row ids move (copy-on-write rewrites) and get materialized, then compaction and an insert."""
    return [
        f"UPDATE {t} SET k = 'ü' WHERE id % 5 = 0",
        f"MERGE INTO {t} d USING (SELECT id, CAST(NULL AS STRING) AS k, CAST(id % 3 AS INT) AS g "
        f"FROM range(60, 100)) s ON d.id = s.id "
        f"WHEN MATCHED AND s.id % 2 = 0 THEN UPDATE SET k = s.k "
        f"WHEN MATCHED AND s.id % 3 = 0 THEN DELETE WHEN NOT MATCHED THEN INSERT *",
        f"ALTER TABLE {t} SET TBLPROPERTIES ({MOR})",
        f"UPDATE {t} SET k = 'a' WHERE id % 7 = 1",
        f"MERGE INTO {t} d USING (SELECT id, 'ü' AS k, CAST(id % 3 AS INT) AS g "
        f"FROM range(90, 120)) s ON d.id = s.id "
        f"WHEN MATCHED AND s.id % 2 = 1 THEN UPDATE SET k = s.k "
        f"WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *",
        f"DELETE FROM {t} WHERE id % 11 = 0",
        f"CALL {CATALOG}.system.rewrite_data_files(table => 'db.{name}', where => 'g = 1', "
        f"options => map('min-input-files', '1'))",
        f"INSERT INTO {t} SELECT id, {K_EXPR}, CAST(id % 3 AS INT) FROM range(500, 520)",
    ]


def located(t: pa.Table) -> Counter[tuple[Any, ...]]:
    assert t.column_names == ["k", "_row_id", "_file", "_row"], t.column_names
    names = [f.rsplit("/", 1)[-1] for f in t["_file"].to_pylist()]
    return Counter(
        zip(t["k"].to_pylist(), t["_row_id"].to_pylist(), names, t["_row"].to_pylist(), strict=True)
    )


def test_locate_row_ids_equal_spark_on_iceberg_v3(spark_wh: Any) -> None:
    spark, wh = spark_wh
    name = "v3"
    t = f"{CATALOG}.db.{name}"
    spark.sql(
        f"CREATE TABLE {t} (id bigint, k string, g int) USING iceberg PARTITIONED BY (g) "
        f"TBLPROPERTIES ('format-version'='3', {COW})"
    )
    for lo, hi in ((0, 40), (40, 70), (70, 90)):
        spark.sql(f"INSERT INTO {t} SELECT id, {K_EXPR}, CAST(id % 3 AS INT) FROM range({lo}, {hi})")
    table = li.open_table(str(wh / "db" / name))
    table.planner_config = li.PlannerConfig(force_index=True)  # tiny tables: test the index path
    assert table.snapshot().row_id_column == "_row_id"
    table.create_index(li.SecondaryIndex("by_k", key="k"), spark=spark)
    table.create_index(li.SecondaryIndex("stale", key="k"), spark=spark)  # never refreshed
    table.create_index(li.CoveringIndex("cov", indexed="k", included="g", num_buckets=2), spark=spark)
    table.create_index(li.SecondaryIndex("by_k_id", key="k", record_key="id"), spark=spark)

    reads: dict[int, Counter[tuple[Any, ...]]] = {}

    def spark_located(sid: int) -> Counter[tuple[Any, ...]]:
        """Spark's (k, _row_id, file name, _pos) of the probed rows at ``sid`` (memoized)."""
        if sid not in reads:
            rows = spark.sql(
                f"SELECT k, _row_id, _file, _pos FROM {t} VERSION AS OF {sid} "
                f"WHERE k IN ('a', 'ü', '', '日本', 'missing') OR k IS NULL"
            ).collect()
            reads[sid] = Counter((r[0], r[1], r[2].rsplit("/", 1)[-1], r[3]) for r in rows)
            assert all(r[1] is not None for r in rows)
        return reads[sid]

    def lineage() -> list[int]:
        rows = spark.sql(
            f"SELECT snapshot_id FROM {t}.history WHERE is_current_ancestor ORDER BY made_current_at"
        ).collect()
        return [r[0] for r in rows]

    def check(every_snapshot: bool) -> bool:
        """Every version's answers; True when some answer repaired uncovered files by scanning."""
        repaired = False
        logs = IndexCatalog(table.storage, table.index_root)
        entries = logs.log("by_k").active_snapshots()
        stale_entry = logs.log("stale").latest_stable()
        for sid in lineage():
            want = spark_located(sid)
            for index in ("by_k", "stale", "cov"):
                assert located(table.locate(index, PROBE, version_as_of=sid)) == want, (index, sid)
            stale = lk.plan_lookup(table.source, stale_entry, table.snapshot(sid), PROBE)
            repaired |= bool(stale.coverage.scan)
            for entry in entries if every_snapshot else ():
                plan = lk.plan_lookup(table.source, entry, table.snapshot(sid), PROBE)
                got = lk.locate(table.source, table.storage, join_uri(table.index_root, "by_k"), plan)
                assert located(got) == want, (sid, entry.id)
            assert table.locate("by_k_id", PROBE, version_as_of=sid).column_names == [
                "k",
                "id",
                "_file",
                "_row",
            ]
            rows = table.lookup("by_k", PROBE, version_as_of=sid)
            assert rows.column_names == ["id", "k", "g"]  # lookup unchanged
            assert sorted(map(str, rows["k"].to_pylist())) == sorted(str(k) for k, *_ in want.elements())
        return repaired

    check(every_snapshot=False)
    materialized = False
    repaired = False
    for statement in statements(t, name):
        spark.sql(statement)
        for index in ("by_k", "cov"):
            info = table.refresh_index(index, mode="incremental", spark=spark)
            assert info.indexed_version == table.latest_version()
        repaired |= check(every_snapshot=False)
        materialized |= _has_materialized_row_ids(table)
    assert repaired  # the never-refreshed index answered by index entries plus scans
    assert materialized  # the history really wrote the _row_id column into data files
    check(every_snapshot=True)


def _has_materialized_row_ids(table: li.Table) -> bool:
    """Whether some live data file of the latest version stores non-null ``_row_id`` values."""
    import pyarrow.parquet as pq

    from lakehouse_index.read.footers import file_layout
    from lakehouse_index.read.row_ids import row_id_column

    snap = table.snapshot()
    for fe in snap.files.values():
        stored = row_id_column(snap, file_layout(table.source, fe))
        if stored is not None:
            fs, path = table.source.io.arrow(fe.path)
            if pq.read_table(path, filesystem=fs, columns=[stored])[stored].null_count < fe.num_records:
                return True
    return False


def test_iceberg_v2_locate_is_unchanged(spark_wh: Any) -> None:
    spark, wh = spark_wh
    t = f"{CATALOG}.db.v2"
    spark.sql(f"CREATE TABLE {t} (id bigint, k string) USING iceberg TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO {t} SELECT id, {K_EXPR} FROM range(30)")
    table = li.open_table(str(wh / "db" / "v2"))
    table.planner_config = li.PlannerConfig(force_index=True)
    assert table.snapshot().row_id_column is None
    table.create_index(li.SecondaryIndex("by_k", key="k"), spark=spark)
    table.create_index(li.SecondaryIndex("by_k_id", key="k", record_key="id"), spark=spark)
    spark.sql(f"INSERT INTO {t} SELECT id, {K_EXPR} FROM range(30, 40)")  # not indexed: scanned
    want = spark.sql(f"SELECT count(*) FROM {t} WHERE k = 'a'").first()[0]
    got = table.locate("by_k", ["a"])
    assert got.column_names == ["k", "_file", "_row"] and got.num_rows == want
    assert table.locate("by_k_id", ["a"]).column_names == ["k", "id", "_file", "_row"]
