"""Spark-written merge-on-read tables: v2 position deletes, v3 deletion vectors and row lineage.

Every snapshot's live rows (the connector's files, read by field id, its deletes applied)
must equal Spark's ``VERSION AS OF`` read; each commit's row-level change (rows of added
files and rows that came back, minus rows of removed files and newly deleted rows) must
equal the difference of Spark's reads before and after it.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from iceberg_oracle import live_file_rows, live_rows, open_path, read_by_field_id, row_ids
from lakehouse_index_iceberg import IcebergRowDeletes

from lakehouse_index.source import Change, FileEntry, TableFormatError, diff_snapshots

pytestmark = [pytest.mark.spark, pytest.mark.iceberg_spark, pytest.mark.integration]

MOR = (
    "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
    "'write.merge.mode'='merge-on-read'"
)


@pytest.fixture(scope="module")
def spark_wh(tmp_path_factory):
    from tests.support.spark_iceberg import spark_session

    wh = tmp_path_factory.mktemp("spark_wh")
    spark = spark_session(wh)  # the run's shared session (its JVM has the Iceberg jars)
    yield spark, wh


def build(spark, name: str, version: int) -> dict[str, int]:
    """A history with every kind of commit; returns named snapshot ids."""
    t = f"local.db.{name}"
    marks: dict[str, int] = {}

    def head() -> int:
        return spark.sql(f"SELECT snapshot_id FROM {t}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[
            0
        ]

    spark.sql(
        f"CREATE TABLE {t} (id bigint, cat string, v string) USING iceberg PARTITIONED BY (cat) "
        f"TBLPROPERTIES ('format-version'='{version}', {MOR})"
    )
    spark.sql(f"INSERT INTO {t} SELECT id, CAST(id % 3 AS STRING), CONCAT('v', id) FROM range(60)")
    spark.sql(f"INSERT INTO {t} SELECT id, CAST(id % 3 AS STRING), CONCAT('w', id) FROM range(60, 90)")
    spark.sql(f"DELETE FROM {t} WHERE id % 7 = 0")
    marks["after_delete"] = head()
    spark.sql(f"UPDATE {t} SET v = CONCAT(v, '-u') WHERE id % 5 = 0")
    spark.sql(f"DELETE FROM {t} WHERE id % 11 = 0")  # second delete on the same files: DV/deletes replaced
    spark.sql(
        f"MERGE INTO {t} d USING (SELECT id, CAST(id % 3 AS STRING) AS cat, CONCAT('m', id) AS v "
        f"FROM range(80, 100)) s ON d.id = s.id "
        f"WHEN MATCHED AND s.id % 2 = 0 THEN UPDATE SET v = s.v "
        f"WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *"
    )
    marks["before_rewrite"] = head()
    spark.sql(
        f"CALL local.system.rewrite_data_files(table => 'db.{name}', "
        f"where => 'cat = \"1\"', options => map('min-input-files', '1'))"
    )
    marks["rewrite"] = head()
    spark.sql(f"ALTER TABLE {t} CREATE BRANCH dev")
    spark.sql(f"DELETE FROM {t}.branch_dev WHERE id < 10")
    spark.sql(f"ALTER TABLE {t} CREATE TAG keep AS OF VERSION {marks['rewrite']}")
    spark.sql(f"DELETE FROM {t} WHERE id BETWEEN 20 AND 40")
    marks["rolled_away"] = head()
    spark.sql(f"CALL local.system.rollback_to_snapshot('db.{name}', {marks['rewrite']})")
    spark.sql(f"INSERT INTO {t} VALUES (1000, '1', 'after-rollback')")
    spark.sql(f"DELETE FROM {t} WHERE id = 1 OR id = 1000")
    return marks


_READS: dict[tuple[str, int, str], Counter] = {}


def spark_rows(spark, table: str, sid: int, cols: str = "id, cat, v") -> Counter:
    """Spark's read of a snapshot (memoized: snapshots are immutable)."""
    key = (table, sid, cols)
    if key not in _READS:
        rows = spark.sql(f"SELECT {cols} FROM {table} VERSION AS OF {sid}").collect()
        _READS[key] = Counter(tuple(r) for r in rows)
    return _READS[key]


def _rows(src, snap, entry: FileEntry, positions=None) -> Counter:
    t = live_file_rows(src, snap, entry, with_positions=True)
    if positions is not None:  # only these positions, deleted or not
        full = read_by_field_id(src, entry, list(snap.columns))
        return Counter(tuple(full[c][p].as_py() for c in full.column_names) for p in positions)
    return Counter(zip(*[t[c].to_pylist() for c in t.column_names if c != "_pos"], strict=True))


def net_change(src, change: Change) -> tuple[Counter, Counter]:
    """Rows that appeared and disappeared in one commit, according to the connector."""
    after = src.snapshot(change.version)
    parent = src.version_info(change.version).parent
    before = src.snapshot(parent) if parent is not None else None
    plus: Counter = Counter()
    minus: Counter = Counter()
    for f in change.added:
        plus += _rows(src, after, f)
    for f in change.removed:
        assert before is not None
        minus += _rows(src, before, f)
    for dc in change.delete_changes:
        was = src.deleted_positions(dc.before)
        now = src.deleted_positions(dc.after)
        minus += _rows(src, after, dc.after, sorted(now - was))
        plus += _rows(src, after, dc.after, sorted(was - now))
    return plus - minus, minus - plus


@pytest.mark.parametrize("version", [2, 3])
def test_spark_merge_on_read_table(spark_wh, version):
    spark, wh = spark_wh
    name = f"mor_v{version}"
    marks = build(spark, name, version)
    table = f"local.db.{name}"
    src = open_path(str(wh / "db" / name))
    assert src.format_version == version
    assert src.metadata_location.endswith(".metadata.json") and "/v" in src.metadata_location
    kinds = set()
    for info in src.versions():
        snap = src.snapshot(info.version)
        assert live_rows(src, snap) == spark_rows(spark, table, info.version), info
        for f in snap.files.values():
            if f.deletes is not None:
                assert isinstance(f.deletes, IcebergRowDeletes)
                kinds.update("dv" if s.is_deletion_vector else "pos" for s in f.deletes.sources)
    assert kinds == ({"dv"} if version == 3 else {"pos"})

    # One change per main-lineage commit; each equals the difference of Spark's reads.
    changes = list(src.changes(None))
    lineage = [v.version for v in src.versions() if v.version in {c.version for c in changes}]
    assert [c.version for c in changes] == lineage
    assert marks["rolled_away"] not in lineage and marks["rewrite"] in lineage
    for ch in changes:
        parent = src.version_info(ch.version).parent
        before = spark_rows(spark, table, parent) if parent is not None else Counter()
        after = spark_rows(spark, table, ch.version)
        plus, minus = net_change(src, ch)
        assert (plus, minus) == (after - before, before - after), ch.operation
        if ch.version == marks["rewrite"]:
            assert not ch.data_change and ch.removed and ch.added and not plus and not minus
    assert any(ch.delete_changes for ch in changes)

    # Refs and the rollback.
    assert src.resolve_version("keep") == marks["rewrite"]
    dev = src.resolve_version("dev")
    assert live_rows(src, src.snapshot(dev)) == spark_rows(spark, table, dev)
    back = src.diff(marks["rolled_away"], marks["rewrite"])  # rows deleted then rolled back
    assert back.delete_changes or back.added
    assert src.diff(marks["rewrite"], marks["rewrite"]).is_empty
    # Every pair (branch, rollback, merge-on-read deletes / DVs on either side): the diff
    # equals the full comparison, and a fresh connector reads fewer manifests than both lists.
    path = str(wh / "db" / name)
    saved = 0
    for a, b in itertools.permutations([v.version for v in src.versions()], 2):
        fresh = open_path(path)
        assert fresh.diff(a, b) == diff_snapshots(src.snapshot(a), src.snapshot(b)), (a, b)
        lists = [{m.path for m in fresh._files.manifest_list(fresh._snap(v))} for v in (a, b)]
        assert len(lists[0] ^ lists[1]) <= fresh.reads["manifest"] <= len(lists[0] | lists[1])
        saved += fresh.reads["manifest"] < len(lists[0] | lists[1])
    assert saved

    if version == 3:
        snap = src.snapshot()
        assert snap.row_id_column == "_row_id"
        mine: Counter = Counter()
        for f in snap.files.values():
            assert f.first_row_id is not None
            t = live_file_rows(src, snap, f, with_positions=True)
            ids = row_ids(src, f, t["_pos"].to_pylist())
            mine.update(zip(ids, t["id"].to_pylist(), strict=True))
        theirs = spark_rows(spark, table, snap.version, "_row_id, id")
        assert mine == theirs
        assert len({r for r, _ in mine}) == sum(mine.values())  # row ids are unique


def test_spark_deletion_vector_with_bad_crc(spark_wh):
    spark, wh = spark_wh
    spark.sql(
        f"CREATE TABLE local.db.dvbad (id bigint) USING iceberg TBLPROPERTIES ('format-version'='3', {MOR})"
    )
    spark.sql("INSERT INTO local.db.dvbad SELECT id FROM range(20)")
    spark.sql("DELETE FROM local.db.dvbad WHERE id % 3 = 0")
    src = open_path(str(wh / "db" / "dvbad"))
    snap = src.snapshot()
    assert live_rows(src, snap) == spark_rows(spark, "local.db.dvbad", snap.version, "id")
    entry = next(f for f in snap.files.values() if f.deletes is not None)
    dv = entry.deletes.sources[0]
    assert dv.is_deletion_vector
    with open(dv.path.removeprefix("file:"), "r+b") as fh:  # flip a byte inside the bitmap
        fh.seek(dv.content_offset + dv.content_size - 6)
        b = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([b[0] ^ 0xFF]))
    fresh = open_path(str(wh / "db" / "dvbad"))
    bad = fresh.snapshot().files[entry.path]
    with pytest.raises(TableFormatError, match="CRC"):
        fresh.deleted_positions(bad)
