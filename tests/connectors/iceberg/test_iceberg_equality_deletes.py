"""Equality deletes, crafted: a Parquet delete file written with pyarrow and committed with
pyiceberg's low-level manifest / manifest-list writers (pyiceberg cannot write or read them).

The expected rows are derived independently: pyiceberg's scan of the snapshot before the
delete, minus rows whose key is in the delete file, only in the delete's partition (or
everywhere for an unpartitioned spec), never in files committed after the delete.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from iceberg_oracle import live_rows, open_path, pyiceberg_rows
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from tests.support.iceberg_manifests import DeleteManifestWriter

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "cat", StringType(), required=False),
    NestedField(3, "val", StringType(), required=False),
)
ARROW = pa.schema([pa.field("id", pa.int64(), False), ("cat", pa.string()), ("val", pa.string())])
NAMES = ["id", "cat", "val"]


def batch(ids, cats, tag):
    return pa.table({"id": ids, "cat": cats, "val": [f"{tag}{i}" for i in ids]}, schema=ARROW)


def commit_equality_delete(table, keys: list[int], partition: tuple) -> str:
    """Write an equality-delete file on ``id`` and commit it as a new snapshot of main."""
    cur = table.current_snapshot()
    meta = table.metadata
    new_id = abs(uuid.uuid4().int) >> 65
    seq = meta.last_sequence_number + 1
    loc = table.location().removeprefix("file://")
    path = f"{loc}/data/eq-delete-{uuid.uuid4().hex}.parquet"
    del_schema = pa.schema([pa.field("id", pa.int64(), False, metadata={b"PARQUET:field_id": b"1"})])
    pq.write_table(pa.table({"id": keys}, schema=del_schema), path)
    spec = table.spec()
    data_file = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=f"file://{path}",
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        record_count=len(keys),
        file_size_in_bytes=os.path.getsize(path),
        equality_ids=[1],
    )
    data_file.spec_id = spec.spec_id
    io = table.io
    manifest_path = f"file://{loc}/metadata/{uuid.uuid4()}-m-deletes.avro"
    with DeleteManifestWriter(spec, table.schema(), io.new_output(manifest_path), new_id, "deflate") as w:
        w.add(
            ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=new_id, data_file=data_file)
        )
    delete_manifest = w.to_manifest_file()
    list_path = f"file://{loc}/metadata/snap-{new_id}-{uuid.uuid4()}.avro"
    with write_manifest_list(2, io.new_output(list_path), new_id, cur.snapshot_id, seq, "deflate") as lw:
        lw.add_manifests([*cur.manifests(io), delete_manifest])
    snap = Snapshot(
        snapshot_id=new_id,
        parent_snapshot_id=cur.snapshot_id,
        sequence_number=seq,
        timestamp_ms=cur.timestamp_ms + 1,
        manifest_list=list_path,
        summary=Summary(Operation.DELETE),
        schema_id=table.schema().schema_id,
    )
    table.catalog.commit_table(
        table,
        (AssertRefSnapshotId(snapshot_id=cur.snapshot_id, ref="main"),),
        (
            AddSnapshotUpdate(snapshot=snap),
            SetSnapshotRefUpdate(ref_name="main", type=SnapshotRefType.BRANCH, snapshot_id=new_id),
        ),
    )
    return f"file://{path}"


@pytest.mark.parametrize("partitioned", [True, False])
def test_crafted_equality_delete(catalog, partitioned):
    spec = (
        PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "cat")) if partitioned else PartitionSpec()
    )
    table = catalog.create_table("db.eq", SCHEMA, partition_spec=spec, properties={"format-version": "2"})
    table.append(batch([1, 2, 3, 4], ["a", "a", "b", "b"], "x"))
    table.append(batch([1, 5, 3], ["a", "a", "b"], "y"))
    table = catalog.load_table("db.eq")
    before = table.current_snapshot().snapshot_id
    keys = [1, 3, 9]
    del_path = commit_equality_delete(table, keys, ("a",) if partitioned else ())
    table = catalog.load_table("db.eq")
    deleted_at = table.current_snapshot().snapshot_id
    table.append(batch([1, 3], ["a", "b"], "z"))  # newer than the delete: untouched
    table = catalog.load_table("db.eq")
    head = table.current_snapshot().snapshot_id

    src = open_path(table.location())
    base = pyiceberg_rows(table, before, NAMES)

    def hit(row):
        return row[0] in keys and (not partitioned or row[1] == "a")

    expected = Counter({r: n for r, n in base.items() if not hit(r)})
    snap = src.snapshot(deleted_at)
    assert live_rows(src, snap) == expected
    applied = {f.path for f in snap.files.values() if f.equality_deletes}
    assert all(
        e.columns == ("id",) and e.path == del_path and e.record_count == 3
        for f in snap.files.values()
        for e in f.equality_deletes
    )
    if partitioned:
        assert applied and all(snap.files[p].partition_dict == {"cat": "a"} for p in applied)
    else:
        assert len(applied) == 2
    newest = src.snapshot(head)
    late = Counter(tuple(r.values()) for r in batch([1, 3], ["a", "b"], "z").to_pylist())
    assert live_rows(src, newest) == expected + late
    # The commit shows up as delete changes of the files it applies to, not as added files.
    ch = list(src.changes(before, deleted_at))
    assert len(ch) == 1 and not ch[0].added and not ch[0].removed
    assert {d.path for d in ch[0].delete_changes} == applied
    rows = src.equality_delete_rows(snap.files[next(iter(applied))].equality_deletes[0], snap.columns)
    assert rows.column_names == ["id"] and sorted(rows["id"].to_pylist()) == keys
    assert src.diff(deleted_at, before).delete_changes
