"""``diff(a, b)`` of any two snapshots reads only the manifests the two do not share.

Histories are written with pyiceberg (branches, a rollback, copy-on-write deletes); row-level
deletes on either side of a fork are crafted (a position-delete or equality-delete Parquet
file committed on a branch with pyiceberg's manifest writers, which cannot write them
otherwise). The oracle is the full comparison of both snapshots (``diff_snapshots`` over
``snapshot(a)`` and ``snapshot(b)`` of a separate connector): the diff must equal it exactly,
and it must also agree with pyiceberg's planned files. Manifests read are counted by the
connector's own counter on a fresh connector (empty caches).
"""

from __future__ import annotations

import itertools
import os
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from iceberg_oracle import open_path, pyiceberg_files
from lakehouse_index_iceberg.deletes import normalize_path
from pyiceberg.expressions import LessThan
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

from lakehouse_index.source import diff_snapshots
from tests.support.iceberg_manifests import DeleteManifestWriter

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "cat", StringType(), required=False),
)
ARROW = pa.schema([pa.field("id", pa.int64(), False), ("cat", pa.string())])
POS_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), False, metadata={b"PARQUET:field_id": b"2147483546"}),
        pa.field("pos", pa.int64(), False, metadata={b"PARQUET:field_id": b"2147483545"}),
    ]
)


def rows(ids, cat: str = "a") -> pa.Table:
    """Rows with ids ``ids``, all in partition ``cat``."""
    ids = list(ids)
    return pa.table({"id": ids, "cat": [cat] * len(ids)}, schema=ARROW)


def head(table, branch: str = "main") -> int:
    """Snapshot id at the head of ``branch``."""
    return table.metadata.refs[branch].snapshot_id


def commit_delete_file(table, branch: str, content: DataFileContent, data: pa.Table, partition=()) -> None:
    """Write ``data`` as a position- or equality-delete file and commit it on ``branch``."""
    meta = table.metadata
    parent = table.snapshot_by_id(head(table, branch))
    new_id = abs(uuid.uuid4().int) >> 65
    seq = meta.last_sequence_number + 1
    loc = table.location().removeprefix("file://")
    path = f"{loc}/data/delete-{uuid.uuid4().hex}.parquet"
    pq.write_table(data, path)
    data_file = DataFile.from_args(
        content=content,
        file_path=f"file://{path}",
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        record_count=data.num_rows,
        file_size_in_bytes=os.path.getsize(path),
        equality_ids=[1] if content == DataFileContent.EQUALITY_DELETES else None,
    )
    data_file.spec_id = table.spec().spec_id
    io = table.io
    manifest_path = f"file://{loc}/metadata/{uuid.uuid4()}-m-deletes.avro"
    with DeleteManifestWriter(
        table.spec(), table.schema(), io.new_output(manifest_path), new_id, "deflate"
    ) as w:
        w.add(
            ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=new_id, data_file=data_file)
        )
    list_path = f"file://{loc}/metadata/snap-{new_id}-{uuid.uuid4()}.avro"
    with write_manifest_list(2, io.new_output(list_path), new_id, parent.snapshot_id, seq, "deflate") as lw:
        lw.add_manifests([w.to_manifest_file(), *parent.manifests(io)])
    snap = Snapshot(
        snapshot_id=new_id,
        parent_snapshot_id=parent.snapshot_id,
        sequence_number=seq,
        timestamp_ms=max(s.timestamp_ms for s in meta.snapshots) + 1,
        manifest_list=list_path,
        summary=Summary(Operation.DELETE),
        schema_id=table.schema().schema_id,
    )
    table.catalog.commit_table(
        table,
        (AssertRefSnapshotId(snapshot_id=parent.snapshot_id, ref=branch),),
        (
            AddSnapshotUpdate(snapshot=snap),
            SetSnapshotRefUpdate(ref_name=branch, type=SnapshotRefType.BRANCH, snapshot_id=new_id),
        ),
    )


def position_deletes(data_path: str, positions: list[int]) -> pa.Table:
    """A position-delete file's rows deleting ``positions`` of ``data_path``."""
    return pa.table({"file_path": [data_path] * len(positions), "pos": positions}, schema=POS_SCHEMA)


def equality_deletes(ids: list[int]) -> pa.Table:
    """An equality-delete file's rows on ``id``."""
    return pa.table(
        {"id": ids}, schema=pa.schema([pa.field("id", pa.int64(), False, {b"PARQUET:field_id": b"1"})])
    )


def second_data_file(table) -> str:
    """Raw path of the data file of the table's second append (ids 10-19, partition ``b``)."""
    second = table.snapshots()[1]
    manifest = next(m for m in second.manifests(table.io) if m.added_snapshot_id == second.snapshot_id)
    return next(iter(manifest.fetch_manifest_entry(table.io))).data_file.file_path


def manifest_paths(table, snapshot_id: int) -> list[str]:
    """Manifest paths of a snapshot, in manifest-list order, per pyiceberg."""
    return [m.manifest_path for m in table.snapshot_by_id(snapshot_id).manifests(table.io)]


def check(table, a: int, b: int, planned: bool = True) -> int:
    """Assert ``diff(a, b)`` equals the full comparison and (``planned``: no equality deletes,
    which pyiceberg cannot plan) pyiceberg's files; return the manifests it read."""
    src = open_path(table.location())
    d = src.diff(a, b)
    full = open_path(table.location())
    assert d == diff_snapshots(full.snapshot(a), full.snapshot(b))
    if planned:
        files_a, files_b = pyiceberg_files(table, a), pyiceberg_files(table, b)
        assert {f.path for f in d.added} == files_b - files_a
        assert {f.path for f in d.removed} == files_a - files_b
    assert src.reads["manifest_list"] == (1 if a == b else 2)
    return src.reads["manifest"]


def unshared(table, a: int, b: int) -> int:
    """How many manifests one of the snapshots lists and the other does not."""
    pa_, pb = set(manifest_paths(table, a)), set(manifest_paths(table, b))
    return len(pa_ ^ pb)


@pytest.fixture()
def forked(catalog):
    """A 12-append main history (with a copy-on-write delete), a branch ``dev`` off it
    with 3 appends, then 2 more appends on main and a rollback of main by one."""
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "cat"))
    table = catalog.create_table("db.t", SCHEMA, partition_spec=spec, properties={"format-version": "2"})
    for i in range(12):
        table.append(rows(range(i * 10, i * 10 + 10), "ab"[i % 2]))
    table.delete(LessThan("id", 3))
    table.manage_snapshots().create_branch(head(table), "dev").commit()
    for i in range(3):
        table.append(rows(range(1000 + i * 10, 1010 + i * 10)), branch="dev")
    for i in range(2):
        table.append(rows(range(2000 + i * 10, 2010 + i * 10), "b"))
    rolled_from = head(table)
    table.manage_snapshots().rollback_to_snapshot(
        table.snapshot_by_id(rolled_from).parent_snapshot_id
    ).commit()
    table.manage_snapshots().create_tag(rolled_from, "before-rollback").commit()
    return table


def test_branches_and_rollback_read_only_unshared_manifests(forked):
    table = forked
    main, dev, gone = head(table), head(table, "dev"), head(table, "before-rollback")
    fork = table.snapshot_by_id(dev)
    while fork.snapshot_id not in {s.snapshot_id for s in table.snapshots()[:14]}:
        fork = table.snapshot_by_id(fork.parent_snapshot_id)
    pairs = [(main, dev), (dev, main), (gone, dev), (gone, main), (main, gone), (fork.snapshot_id, dev)]
    for a, b in pairs:
        assert check(table, a, b) == unshared(table, a, b)
        assert unshared(table, a, b) < len(set(manifest_paths(table, a)) | set(manifest_paths(table, b)))
    assert check(table, main, main) == 0
    # The branch off a 13-snapshot history: 3 manifests on dev, 1 on main after the rollback.
    assert unshared(table, main, dev) == 4


def test_every_pair_equals_the_full_comparison(forked):
    table = forked
    ids = [s.snapshot_id for s in table.snapshots()]
    for a, b in itertools.combinations(ids[-8:], 2):
        assert check(table, a, b) == unshared(table, a, b)


def test_position_deletes_on_one_side_read_the_shared_files_they_name(forked):
    """A position delete on dev of a file both sides share (in a shared manifest) is a delete
    change; finding that file reads shared data manifests, the others are not compared."""
    table = forked
    target = second_data_file(table)
    commit_delete_file(
        table, "dev", DataFileContent.POSITION_DELETES, position_deletes(target, [3, 4]), ("a",)
    )
    table = table.catalog.load_table("db.t")
    main, dev = head(table), head(table, "dev")
    src = open_path(table.location())
    d = src.diff(main, dev)
    [change] = d.delete_changes
    assert change.before.deletes is None and change.after.deleted_count == 2
    assert change.path == open_path(table.location()).snapshot(dev).files[change.path].path
    read = check(table, main, dev)
    shared_data = [p for p in manifest_paths(table, dev) if p in set(manifest_paths(table, main))]
    assert unshared(table, main, dev) < read <= unshared(table, main, dev) + len(shared_data)
    back = open_path(table.location()).diff(dev, main)
    assert [(c.before, c.after) for c in back.delete_changes] == [(change.after, change.before)]


def test_deletes_in_shared_history_and_on_both_sides(forked):
    """A position delete before the fork applies on both sides; a second one on main and an
    equality delete on dev change different files. Appends after the fork do not read the
    shared delete manifest (too old to apply to them)."""
    table = forked
    target = second_data_file(table)
    table.manage_snapshots().create_branch(head(table), "fork").commit()
    commit_delete_file(table, "fork", DataFileContent.POSITION_DELETES, position_deletes(target, [5]), ("b",))
    table = table.catalog.load_table("db.t")
    table.manage_snapshots().create_branch(head(table, "fork"), "side").commit()
    table = table.catalog.load_table("db.t")
    table.append(rows(range(3000, 3005)), branch="fork")
    table.append(rows(range(4000, 4005), "b"), branch="side")
    table = table.catalog.load_table("db.t")
    fork, side = head(table, "fork"), head(table, "side")
    # Appends only on each side: the shared delete manifest is not read.
    assert check(table, fork, side) == unshared(table, fork, side) == 2
    commit_delete_file(
        table, "fork", DataFileContent.POSITION_DELETES, position_deletes(target, [6, 7]), ("a",)
    )
    table = table.catalog.load_table("db.t")
    commit_delete_file(table, "side", DataFileContent.EQUALITY_DELETES, equality_deletes([15, 4001]), ("b",))
    table = table.catalog.load_table("db.t")
    fork, side = head(table, "fork"), head(table, "side")
    for a, b in [(fork, side), (side, fork)]:
        check(table, a, b, planned=False)
    d = open_path(table.location()).diff(fork, side)
    by_path = {c.path: c for c in d.delete_changes}
    assert by_path[normalize_path(target)].before.deleted_count == 3
    assert sum(bool(c.after.equality_deletes) for c in d.delete_changes) >= 1
