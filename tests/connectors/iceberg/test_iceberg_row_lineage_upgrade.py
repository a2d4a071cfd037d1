"""Row lineage is a property of each snapshot, not of the table's current format version.

A Spark table written as v2, upgraded to v3, then appended to: snapshots committed before
the upgrade have no ``first-row-id`` and Spark reads their ``_row_id`` as null, so they
expose no row-id column; after the upgrade the files carried over get first row ids
through the new manifest list (Spark numbers their rows after the new file's), which
must win over the parent's entries and over manifests cached from the older snapshot,
whichever order snapshots are loaded or tailed in.
"""

from __future__ import annotations

from typing import Any

import pytest
from iceberg_oracle import open_path

import lakehouse_index as li
from lakehouse_index.read.datafiles import read_file
from lakehouse_index.read.row_ids import row_ids

pytestmark = [pytest.mark.spark, pytest.mark.iceberg_spark, pytest.mark.integration]


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str, dict[int, dict[int, Any]]]:
    """(spark, table folder, per snapshot id: Spark's ``id`` → ``_row_id``)."""
    from tests.support.spark_iceberg import spark_session

    wh = tmp_path_factory.mktemp("upgrade_wh")
    # A catalog of its own: Spark keeps a catalog's first warehouse, so sharing "local"
    # would move the other modules' tables.
    spark = spark_session(wh, catalog="upgrade")
    t = "upgrade.db.upgraded"
    spark.sql(f"CREATE TABLE {t} (id bigint) USING iceberg TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO {t} SELECT id FROM range(5)")
    spark.sql(f"INSERT INTO {t} SELECT id FROM range(5, 7)")
    spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('format-version'='3')")
    spark.sql(f"INSERT INTO {t} SELECT id FROM range(7, 10)")
    spark.sql(f"DELETE FROM {t} WHERE id = 2")
    snapshots = [
        r[0] for r in spark.sql(f"SELECT snapshot_id FROM {t}.snapshots ORDER BY committed_at").collect()
    ]
    ids = {
        sid: {r[0]: r[1] for r in spark.sql(f"SELECT id, _row_id FROM {t} VERSION AS OF {sid}").collect()}
        for sid in snapshots
    }
    return spark, str(wh / "db" / "upgraded"), ids


def _our_row_ids(src: Any, sid: int) -> dict[int, Any]:
    snap = src.snapshot(sid)
    out: dict[int, Any] = {}
    for entry in snap.files.values():
        data = read_file(src, snap, entry, ["id"], with_positions=True)
        ids = row_ids(src, snap, entry, data["_row"].to_numpy())
        out.update(zip(data["id"].to_pylist(), ids.to_pylist(), strict=True))
    return out


@pytest.mark.parametrize("order", ["oldest first", "newest first", "tailed"])
def test_row_ids_per_snapshot_across_the_upgrade(upgraded: tuple[Any, str, Any], order: str) -> None:
    _, path, spark_ids = upgraded
    src = open_path(path)
    sids = list(spark_ids)
    if order == "tailed":
        list(src.changes(None))  # states built commit by commit, then read back
    for sid in sids if order != "newest first" else reversed(sids):
        snap = src.snapshot(sid)
        pre_upgrade = all(v is None for v in spark_ids[sid].values())
        assert (snap.row_id_column is None) == pre_upgrade, sid
        if pre_upgrade:
            assert all(f.first_row_id is None for f in snap.files.values())
        assert _our_row_ids(src, sid) == spark_ids[sid], sid


def test_locate_exposes_row_ids_only_after_the_upgrade(upgraded: tuple[Any, str, Any]) -> None:
    _, path, spark_ids = upgraded
    table = li.open_table(path)
    table.create_index(li.SecondaryIndex("by_id", key="id"))
    for sid, ids in spark_ids.items():
        located = table.locate("by_id", [0, 8], version_as_of=sid)
        if all(v is None for v in ids.values()):
            assert "_row_id" not in located.column_names, sid
            continue
        got = dict(zip(located["id"].to_pylist(), located["_row_id"].to_pylist(), strict=True))
        assert got == {k: ids[k] for k in (0, 8) if k in ids}, sid
