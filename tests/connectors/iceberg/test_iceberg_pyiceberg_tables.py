"""The connector on pyiceberg-written v1/v2 tables, checked against pyiceberg's own scans."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest
from iceberg_oracle import live_rows, open_path, pyiceberg_files, pyiceberg_rows
from lakehouse_index_iceberg import IcebergSource
from pyiceberg.expressions import EqualTo, LessThan
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from lakehouse_index.io import Storage
from lakehouse_index.source import HistoryTruncatedError, VersionNotFoundError

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "cat", StringType(), required=False),
    NestedField(3, "val", StringType(), required=False),
)
ARROW = pa.schema([pa.field("id", pa.int64(), False), ("cat", pa.string()), ("val", pa.string())])
NAMES = ["id", "cat", "val"]


def batch(ids, tag="v"):
    ids = list(ids)
    return pa.table(
        {"id": ids, "cat": [["a", "b", "c"][i % 3] for i in ids], "val": [f"{tag}{i}" for i in ids]},
        schema=ARROW,
    )


def make_history(catalog, version: int, partitioned: bool, name: str = "t"):
    """A table with appends, CoW deletes, filtered overwrites and an upsert."""
    spec = (
        PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "cat")) if partitioned else PartitionSpec()
    )
    t = catalog.create_table(
        f"db.{name}", SCHEMA, partition_spec=spec, properties={"format-version": str(version)}
    )
    t.append(batch(range(0, 30)))
    t.append(batch(range(30, 50)))
    t.delete(LessThan("id", 5))
    t.overwrite(batch(range(100, 110), "o"), overwrite_filter=EqualTo("cat", "b"))
    t.append(batch(range(50, 60)))
    t.upsert(batch(range(55, 65), "u"), join_cols=["id"])
    t.delete(EqualTo("val", "v33"))
    return catalog.load_table(f"db.{name}")


@pytest.mark.parametrize(("version", "partitioned"), [(1, False), (1, True), (2, False), (2, True)])
def test_every_snapshot_matches_pyiceberg(catalog, version, partitioned):
    table = make_history(catalog, version, partitioned)
    src = open_path(table.location())
    assert src.format_version == version
    snaps = table.snapshots()
    assert [v.version for v in src.versions()] == [s.snapshot_id for s in snaps]
    assert src.latest_version() == table.current_snapshot().snapshot_id
    for s in snaps:
        snap = src.snapshot(s.snapshot_id)
        assert set(snap.files) == pyiceberg_files(table, s.snapshot_id)
        assert live_rows(src, snap) == pyiceberg_rows(table, s.snapshot_id, NAMES)
        assert snap.timestamp_ms == s.timestamp_ms
        for f in snap.files.values():
            assert f.size == os.path.getsize(f.path.removeprefix("file://"))
            if partitioned:
                assert f.partition_dict == {"cat": f.partition_dict["cat"]}
                assert f.path.split("/")[-2] == f"cat={f.partition_dict['cat']}"
    ordinals = [v.ordinal for v in src.versions()]
    assert ordinals == sorted(set(ordinals))
    snap = src.snapshot()
    assert [(c.name, c.field_id, c.in_data_files) for c in snap.columns] == [
        ("id", 1, True),
        ("cat", 2, True),
        ("val", 3, True),
    ]
    assert snap.schema == ARROW
    assert snap.partition_columns == (("cat",) if partitioned else ())
    assert snap.row_id_column is None


@pytest.mark.parametrize("version", [1, 2])
def test_changes_rebuild_every_snapshot(catalog, version):
    """Applying the changes one by one yields each snapshot's file set, in commit order."""
    table = make_history(catalog, version, partitioned=True)
    src = open_path(table.location())
    live: dict[str, object] = {}
    seen = []
    for ch in src.changes(None):
        for f in ch.removed:
            assert live.pop(f.path) == f
        for f in ch.added:
            assert f.path not in live
            live[f.path] = f
        assert not ch.delete_changes  # pyiceberg writes copy-on-write only
        assert live == dict(src.snapshot(ch.version).files)
        assert ch.ordinal == src.version_info(ch.version).ordinal
        seen.append(ch.version)
    assert seen == [s.snapshot_id for s in table.snapshots()]
    # Tailing from the middle with a fresh instance gives the same suffix.
    fresh = open_path(table.location())
    mid = seen[2]
    assert [c.version for c in fresh.changes(mid)] == seen[3:]
    assert list(fresh.changes(seen[-1])) == []
    ops = [c.operation for c in src.changes(None)]
    assert ops[0] == "append" and "delete" in ops and "overwrite" in ops


def test_tail_reads_only_new_manifests(catalog):
    table = make_history(catalog, 2, partitioned=False)
    src = open_path(table.location())
    head = src.latest_version()
    list(src.changes(None))
    table.append(batch(range(200, 210)))
    table = catalog.load_table("db.t")
    new = table.current_snapshot()
    before = dict(src.reads)
    changes = list(src.changes(head))
    assert [c.version for c in changes] == [new.snapshot_id]
    added_manifests = [m for m in new.manifests(table.io) if m.added_snapshot_id == new.snapshot_id]
    assert src.reads["manifest"] - before["manifest"] == len(added_manifests) == 1
    assert src.reads["manifest_list"] - before["manifest_list"] == 1
    assert {f.path for f in changes[0].added} == pyiceberg_files(table, new.snapshot_id) - set(
        src.snapshot(head).files
    )


@pytest.mark.parametrize("version", [1, 2])
def test_diff_any_pair_matches_pyiceberg(catalog, version):
    table = make_history(catalog, version, partitioned=True)
    src = open_path(table.location())
    ids = [s.snapshot_id for s in table.snapshots()]
    files = {i: pyiceberg_files(table, i) for i in ids}
    for a, b in itertools.permutations(ids, 2):
        d = src.diff(a, b)
        assert {f.path for f in d.added} == files[b] - files[a]
        assert {f.path for f in d.removed} == files[a] - files[b]
        assert d.delete_changes == ()
    assert src.diff(ids[1], ids[1]).is_empty


def test_refs_and_time_travel(catalog):
    table = make_history(catalog, 2, partitioned=False)
    snaps = table.snapshots()
    table.manage_snapshots().create_tag(snaps[1].snapshot_id, "v1-tag").create_branch(
        snaps[2].snapshot_id, "dev"
    ).commit()
    table = catalog.load_table("db.t")
    table.append(batch(range(300, 305)), branch="dev")
    table = catalog.load_table("db.t")
    src = open_path(table.location())
    dev_head = table.metadata.refs["dev"].snapshot_id
    assert src.resolve_version("v1-tag") == snaps[1].snapshot_id
    assert src.resolve_version("dev") == dev_head
    assert src.resolve_version("main") == table.current_snapshot().snapshot_id
    assert src.resolve_version(str(snaps[0].snapshot_id)) == snaps[0].snapshot_id
    assert src.resolve_version(None) == src.latest_version()
    with pytest.raises(VersionNotFoundError, match="no branch or tag"):
        src.resolve_version("nope")
    with pytest.raises(VersionNotFoundError):
        src.resolve_version(12345)
    # The branch snapshot is listed after the main lineage; its rows match pyiceberg.
    versions = [v.version for v in src.versions()]
    assert versions[: len(snaps)] == [s.snapshot_id for s in snaps]
    assert versions[-1] == dev_head
    assert live_rows(src, src.snapshot(dev_head)) == pyiceberg_rows(table, dev_head, NAMES)
    # changes along the branch lineage; main's head is not an ancestor of the branch.
    assert [c.version for c in src.changes(snaps[2].snapshot_id, dev_head)] == [dev_head]
    with pytest.raises(HistoryTruncatedError, match="not an ancestor"):
        list(src.changes(snaps[-1].snapshot_id, dev_head))
    # version_at follows the main snapshot log.
    for s in snaps:
        assert src.version_at(s.timestamp_ms) == s.snapshot_id
    with pytest.raises(VersionNotFoundError):
        src.version_at(snaps[0].timestamp_ms - 1)


def test_rollback_and_expiry(catalog):
    table = make_history(catalog, 2, partitioned=False)
    snaps = table.snapshots()
    head = snaps[-1].snapshot_id
    target = snaps[3].snapshot_id
    table.manage_snapshots().rollback_to_snapshot(target).commit()
    table = catalog.load_table("db.t")
    src = open_path(table.location())
    assert src.latest_version() == target
    with pytest.raises(HistoryTruncatedError, match="not an ancestor"):
        src.changes(head)
    # Rows that were deleted after the rollback target are live again.
    back = src.diff(head, target)
    assert {f.path for f in back.added} == pyiceberg_files(table, target) - pyiceberg_files(table, head)
    table.append(batch(range(400, 403)))
    table = catalog.load_table("db.t")
    new_head = table.current_snapshot().snapshot_id
    assert [c.version for c in src.changes(target)] == [new_head]
    assert src.version_info(new_head).ordinal > src.version_info(head).ordinal
    # Expire the oldest snapshots: tailing from them is refused, later ones still work.
    table.maintenance.expire_snapshots().by_ids([snaps[0].snapshot_id, snaps[1].snapshot_id]).commit()
    table = catalog.load_table("db.t")
    with pytest.raises(HistoryTruncatedError):
        src.changes(snaps[0].snapshot_id)
    with pytest.raises(HistoryTruncatedError, match="expired"):
        src.changes(None)
    with pytest.raises(VersionNotFoundError):
        src.snapshot(snaps[0].snapshot_id)
    assert [c.version for c in src.changes(snaps[2].snapshot_id, target)] == [snaps[3].snapshot_id]
    assert live_rows(src, src.snapshot(target)) == pyiceberg_rows(table, target, NAMES)


def test_open_by_catalog_object_and_detect(catalog):
    table = make_history(catalog, 2, partitioned=False)
    io = Storage.for_uri(table.location())
    src = IcebergSource.open("db.t", io, catalog=catalog)
    assert src.uri == table.location()
    assert src.latest_version() == table.current_snapshot().snapshot_id
    assert IcebergSource.detect("db.t", io, catalog=catalog)
    assert IcebergSource.detect(table.location(), io)
    assert not IcebergSource.detect(table.location() + "/data", io)
    # A commit through the catalog is seen by latest_version.
    table.append(batch(range(500, 502)))
    assert src.latest_version() == catalog.load_table("db.t").current_snapshot().snapshot_id


def test_open_by_catalog_name_uses_pyiceberg_configuration(catalog, tmp_path):
    """``catalog="name"`` goes through pyiceberg's own configuration (env vars here)."""
    table = make_history(catalog, 2, partitioned=False)
    env = dict(os.environ)
    env["PYICEBERG_CATALOG__TEST__TYPE"] = "sql"
    env["PYICEBERG_CATALOG__TEST__URI"] = f"sqlite:///{tmp_path}/catalog.db"
    code = textwrap.dedent(
        """
        from lakehouse_index_iceberg import IcebergSource
        from lakehouse_index.io import Storage
        src = IcebergSource.open("db.t", Storage.for_uri("/"), catalog="test")
        print(src.latest_version(), len(src.snapshot().files))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    sid, nfiles = out.stdout.split()
    assert int(sid) == table.current_snapshot().snapshot_id
    assert int(nfiles) == len(pyiceberg_files(table, int(sid)))


def test_schema_evolution_by_field_id(catalog):
    table = make_history(catalog, 2, partitioned=False)
    with table.update_schema() as upd:
        upd.rename_column("val", "value")
        upd.add_column("extra", LongType())
    table = catalog.load_table("db.t")
    arrow = pa.schema(
        [
            pa.field("id", pa.int64(), False),
            ("cat", pa.string()),
            ("value", pa.string()),
            ("extra", pa.int64()),
        ]
    )
    table.append(pa.table({"id": [900], "cat": ["a"], "value": ["new"], "extra": [7]}, schema=arrow))
    table = catalog.load_table("db.t")
    src = open_path(table.location())
    snap = src.snapshot()
    assert [c.name for c in snap.columns] == ["id", "cat", "value", "extra"]
    assert snap.column("value").field_id == 3
    names = ["id", "cat", "value", "extra"]
    assert live_rows(src, snap) == pyiceberg_rows(table, snap.version, names)
    # The old snapshot keeps the schema it was written with.
    old = src.snapshot(table.snapshots()[0].snapshot_id)
    assert [c.name for c in old.columns] == ["id", "cat", "val"]
