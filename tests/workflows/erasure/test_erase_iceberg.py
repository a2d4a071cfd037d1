"""Erase on Iceberg tables (pyiceberg-written and Spark-written with deletes), pyiceberg as oracle."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

import lakehouse_index as li
from lakehouse_index.source import canonical_uri
from tests.api.iceberg_index_support import sql_catalog
from tests.workflows.erasure.helpers import unreadable

SUBJECTS = [f"subject-{i:04d}@example.com" for i in range(200)]
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "email", StringType(), required=False),
    NestedField(3, "country", StringType(), required=False),
    NestedField(4, "amount", LongType(), required=False),
)
COLS = ["id", "email", "country", "amount"]


def _batch(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "email": pa.array([SUBJECTS[i % len(SUBJECTS)] for i in ids], pa.string()),
            "country": pa.array([["de", "fr", "us"][i % 3] for i in ids], pa.string()),
            "amount": pa.array([i * 10 for i in ids], pa.int64()),
        }
    )


def _table(tmp_path: Path, partitioned: bool, files: int = 10, rows: int = 400) -> tuple[Any, Any]:
    catalog = sql_catalog(str(tmp_path))
    spec = (
        PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "country"))
        if partitioned
        else PartitionSpec()
    )
    tbl = catalog.create_table("db.t", schema=SCHEMA, partition_spec=spec)
    for f in range(files):
        tbl.append(_batch(f * rows, rows))
    return catalog, tbl


def _rows(catalog: Any, snapshot_id: int | None = None) -> Counter:
    t = catalog.load_table("db.t").scan(snapshot_id=snapshot_id).to_arrow()
    return Counter(zip(*(t[c].to_pylist() for c in COLS), strict=True))


def _live_files(catalog: Any) -> set[str]:
    return {canonical_uri(task.file.file_path) for task in catalog.load_table("db.t").scan().plan_files()}


@pytest.mark.parametrize("partitioned", [False, True])
@pytest.mark.parametrize("n_subjects", [1, 100])
def test_erase_removes_subjects_and_only_touches_their_files(
    tmp_path: Path, partitioned: bool, n_subjects: int
) -> None:
    catalog, _tbl = _table(tmp_path, partitioned)
    t = li.open_table("db.t", catalog=catalog)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    t.create_index(li.CoveringIndex("cov", indexed="id", included=["email"], num_buckets=2))
    indexed = _live_files(catalog)
    catalog.load_table("db.t").append(_batch(99_000, 300))  # not indexed yet: the hybrid scan finds it
    before = _rows(catalog)
    files_before = _live_files(catalog)
    subjects = SUBJECTS[:n_subjects]
    holding = set(t.locate("by_email", subjects)["_file"].to_pylist())

    with unreadable(indexed - holding):  # the erase reads no indexed file that holds no subject
        result = t.erase("by_email", subjects)

    assert _rows(catalog) == Counter({r: c for r, c in before.items() if r[1] not in subjects})
    assert {f.path for f in result.files} == holding
    assert files_before - _live_files(catalog) == holding
    assert not t.lookup("by_email", subjects).num_rows
    assert t.verify_index("by_email", sample=50).ok
    snap = catalog.load_table("db.t").current_snapshot()
    summary = str(snap.summary)
    assert all(s not in summary for s in subjects)
    assert result.version == snap.snapshot_id
    assert len(t.erasures()) == 1
    again = t.erase("by_email", subjects)
    assert again.version is None and not again.files


def test_erase_places_its_rewrites_without_aligning_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refresh takes the rewrite's alignment from the erase (no fingerprints); ``replaced_by``
    names each rewritten file's own replacement (the rewrites are written concurrently)."""
    from lakehouse_index.maintenance import lineage

    catalog, _tbl = _table(tmp_path, partitioned=False)
    t = li.open_table("db.t", catalog=catalog)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    before = _rows(catalog)
    subjects = SUBJECTS[:4]
    old_files = _live_files(catalog)

    def no_alignment(*_: object) -> None:
        raise AssertionError("the erase's rewrites were aligned by fingerprints")

    monkeypatch.setattr(lineage, "_fingerprints", no_alignment)
    result = t.erase("by_email", subjects)

    assert _rows(catalog) == Counter({r: c for r, c in before.items() if r[1] not in subjects})
    entry = t.context.log("by_email").latest_stable()
    assert entry is not None and len([f for f in entry.source.files if f.moves]) == len(result.files) > 1
    assert t.verify_index("by_email").ok
    new_files = _live_files(catalog) - old_files
    assert {f.replaced_by for f in result.files} == new_files
    for f in result.files:  # each replacement holds its own file's other rows, in order
        old, new = (pq.read_table(u.removeprefix("file://")) for u in (f.path, f.replaced_by))
        keep = pc.invert(pc.is_in(old["email"], value_set=pa.array(subjects)))
        assert new.select(COLS).equals(old.filter(keep).select(COLS))


def _spark_table(spark_wh: Any, name: str, version: int) -> tuple[Any, li.Table]:
    """A Spark-written table with merge-on-read deletes, registered in a pyiceberg SqlCatalog."""
    import glob

    spark, wh = spark_wh
    t = f"{CATALOG}.db.{name}"
    spark.sql(
        f"CREATE TABLE {t} (id bigint, email string, g int) USING iceberg PARTITIONED BY (g) "
        f"TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read')"
    )
    for lo in range(0, 2000, 250):
        spark.sql(
            f"INSERT INTO {t} SELECT id, concat('subject-', CAST(id % 40 AS STRING)), "
            f"CAST(id % 2 AS INT) FROM range({lo}, {lo + 250})"
        )
    spark.sql(f"DELETE FROM {t} WHERE id % 7 = 0")  # position deletes (v2) / deletion vectors (v3)
    metas = glob.glob(str(wh / "db" / name / "metadata" / "v*.metadata.json"))
    latest = max(metas, key=lambda p: int(p.rsplit("/v", 1)[1].split(".")[0]))
    catalog = sql_catalog(str(wh / f"catalog-{name}"))
    catalog.register_table("db.t", "file://" + latest)
    return catalog, li.open_table("db.t", catalog=catalog)


CATALOG = "erase"


@pytest.mark.spark
@pytest.mark.iceberg_spark
@pytest.mark.integration
def test_erase_on_a_spark_table_with_position_deletes(spark_wh: Any) -> None:
    catalog, t = _spark_table(spark_wh, "posdel", 2)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    before = catalog.load_table("db.t").scan().to_arrow()
    assert any(task.delete_files for task in catalog.load_table("db.t").scan().plan_files())
    subjects = [f"subject-{i}" for i in range(0, 40, 3)]
    result = t.erase("by_email", subjects)
    after = catalog.load_table("db.t").scan().to_arrow()
    keep = lambda tb: Counter(  # noqa: E731
        r for r in zip(tb["id"].to_pylist(), tb["email"].to_pylist(), strict=True) if r[1] not in subjects
    )
    assert Counter(zip(after["id"].to_pylist(), after["email"].to_pylist(), strict=True)) == keep(before)
    # rows the position deletes had removed did not come back with the rewrite
    assert after.num_rows == before.num_rows - result.rows_erased
    assert not t.lookup("by_email", subjects).num_rows


@pytest.mark.spark
@pytest.mark.iceberg_spark
@pytest.mark.integration
def test_erase_refuses_format_v3_before_changing_anything(spark_wh: Any) -> None:
    catalog, t = _spark_table(spark_wh, "v3", 3)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    snap = catalog.load_table("db.t").current_snapshot().snapshot_id
    with pytest.raises(li.errors.UnsupportedWriterFeatureError, match="format-version 3"):
        t.erase("by_email", ["subject-1"])
    assert catalog.load_table("db.t").current_snapshot().snapshot_id == snap
