"""Purge of an Iceberg table's history (pyiceberg, through the table's catalog).

The current snapshot's manifests still list removed files as DELETED entries, with their
column bounds (a subject's key), and pyiceberg 0.12 has no ``rewrite_manifests``. Steps,
each safe to kill and to redo (every commit is atomic through the catalog, and the head
always holds the kept rows):

1. commit a snapshot of operation ``replace`` on top of the kept one whose manifests list
   only the live entries, as EXISTING with their snapshot ids, sequence numbers and metrics
   copied (one manifest per content and partition spec; pyiceberg's manifest and manifest-list
   writers). Its id is chosen before anything is written and kept in the purge record, and
   its summary says ``lakehouse-index.purge-of``, so a rerun recognises it;
2. refresh every active index onto it (a commit without data change: nothing is indexed), so
   the indexes need no rebuild once the kept snapshot expires;
3. remove every tag and branch other than ``main``, then expire every other snapshot;
4. delete every file under the table location the current metadata does not reach: data and
   delete files, manifests, manifest lists, older ``*.metadata.json`` files. Top-level folders
   starting with ``_`` or ``.`` (``_lakehouse_index``) and the index root are not touched.

Format v3 tables are refused: pyiceberg 0.12 writes no v3 manifests (row lineage's
``first_row_id``, deletion-vector offsets would be lost).
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from lakehouse_index.errors import PurgeRefusedError, UnsupportedFeatureError
from lakehouse_index.io.uri import canonical_uri
from lakehouse_index.sink import purge_record
from lakehouse_index.sink.contract import TableWriter
from lakehouse_index.sink.history import (
    HistoryPurge,
    PurgedVersion,
    RemovedFiles,
    outside_purge,
    pause_point,
    remove_files,
)
from lakehouse_index.source import FileStatus
from lakehouse_index_iceberg.write.pyiceberg_ops import open_for_write

#: The summary property marking a purge's ``replace`` snapshot (value: the kept snapshot id).
PURGE_OF = "lakehouse-index.purge-of"
MIN_SNAPSHOTS = "history.expire.min-snapshots-to-keep"
MAX_SNAPSHOT_AGE = "history.expire.max-snapshot-age-ms"


def _table(table: TableWriter) -> Any:
    return open_for_write(table.source, table.uri)


#: Table properties that put files outside the table location, where the purge does not look.
OUTSIDE_LOCATION = (
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)


def check_supported(table: TableWriter) -> None:
    """UnsupportedFeatureError for a table this purge cannot rewrite (format v1 or v3) or
    cannot clean completely (files written outside the table location)."""
    tbl = _table(table)
    outside = [key for key in OUTSIDE_LOCATION if key in tbl.metadata.properties]
    if outside:
        raise UnsupportedFeatureError(
            f"{table.uri}: the table property {outside[0]} puts files outside the table location, "
            "where the purge does not look for files older snapshots left; nothing was changed"
        )
    version = tbl.metadata.format_version
    if version != 2:
        raise UnsupportedFeatureError(
            f"{table.uri}: Iceberg format version {version}; the purge rewrites manifests with "
            "pyiceberg 0.12, which writes correct v2 manifests only (v3 row lineage and deletion "
            "vector offsets would be lost), so nothing was changed"
        )


def blockers(table: TableWriter) -> list[str]:
    """Retention settings and references that ask to keep the snapshots a purge expires."""
    tbl = _table(table)
    props = tbl.metadata.properties
    out = []
    if int(props.get(MIN_SNAPSHOTS, "1")) > 1:
        out.append(
            f"the table property {MIN_SNAPSHOTS} is {props[MIN_SNAPSHOTS]}: it asks to keep that many "
            "snapshots, and a purge keeps one"
        )
    if MAX_SNAPSHOT_AGE in props:
        out.append(
            f"the table property {MAX_SNAPSHOT_AGE} is set to {props[MAX_SNAPSHOT_AGE]}: it asks to keep "
            "snapshots for that long, and a purge expires them now"
        )
    for name, ref in sorted(tbl.metadata.refs.items()):
        if name != "main":
            out.append(
                f"the {ref.snapshot_ref_type.value} {name!r} references snapshot {ref.snapshot_id}: "
                "a purge removes it with every snapshot but the kept one"
            )
    return out


def _is_replace_of(snapshot: Any, keep: int) -> bool:
    """Whether ``snapshot`` is a purge's ``replace`` of ``keep`` (or ``keep`` is itself one: a
    rerun that names the latest version after the first run's replace commit)."""
    props = snapshot.summary.additional_properties if snapshot.summary is not None else {}
    return PURGE_OF in props and (props[PURGE_OF] == str(keep) or snapshot.snapshot_id == keep)


def _commit_replace(tbl: Any, keep: int, snapshot_id: int) -> None:
    """Step 1: the ``replace`` snapshot listing the kept snapshot's live entries as EXISTING."""
    from pyiceberg.manifest import ManifestContent, ManifestWriterV2, write_manifest_list
    from pyiceberg.table import TableProperties, snapshots

    from lakehouse_index_iceberg.write.delete_manifests import DeleteManifestWriter
    from lakehouse_index_iceberg.write.snapshot_commit import commit_on_main

    # pyiceberg's metadata classes are pydantic models with aliased fields, which mypy reads badly.
    sn: Any = snapshots

    meta, io = tbl.metadata, tbl.io
    head = tbl.current_snapshot()
    compression = meta.properties.get(
        TableProperties.WRITE_AVRO_COMPRESSION, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT
    )
    groups: dict[tuple[int, int], list[Any]] = defaultdict(list)
    for m in head.manifests(io):
        groups[(int(m.content), m.partition_spec_id)].extend(m.fetch_manifest_entry(io, discard_deleted=True))
    commit = uuid.uuid4()
    locations = tbl.location_provider()
    manifests = []
    for i, ((content, spec_id), entries) in enumerate(sorted(groups.items())):
        if not entries:
            continue
        out = io.new_output(locations.new_metadata_location(f"{commit}-m{i}.avro"))
        args = (meta.specs()[spec_id], meta.schema(), out, snapshot_id, compression)
        data = content == ManifestContent.DATA
        writer = (ManifestWriterV2 if data else DeleteManifestWriter)(*args)
        with writer:
            for e in entries:
                writer.existing(e)
        manifests.append(writer.to_manifest_file())
    sequence = meta.next_sequence_number()
    list_path = locations.new_metadata_location(f"snap-{snapshot_id}-0-{commit}.avro")
    out = io.new_output(list_path)
    with write_manifest_list(2, out, snapshot_id, head.snapshot_id, sequence, compression) as w:
        w.add_manifests(manifests)
    totals = {k: v for k, v in head.summary.additional_properties.items() if k.startswith("total-")}
    snapshot = sn.Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=head.snapshot_id,
        sequence_number=sequence,
        timestamp_ms=int(time.time() * 1000),
        manifest_list=list_path,
        summary=sn.Summary(sn.Operation.REPLACE, **totals, **{PURGE_OF: str(keep)}),
        schema_id=head.schema_id,
    )
    commit_on_main(tbl, head.snapshot_id, snapshot)


def _expire(tbl: Any) -> Any:
    """Step 3: every reference but ``main`` removed, every snapshot but the head expired."""
    refs = sorted(name for name in tbl.metadata.refs if name != "main")
    if refs:
        manage = tbl.manage_snapshots()
        for name in refs:
            ref = tbl.metadata.refs[name]
            is_tag = ref.snapshot_ref_type.value == "tag"
            manage = manage.remove_tag(name) if is_tag else manage.remove_branch(name)
        manage.commit()
        tbl = tbl.catalog.load_table(tbl.name())
    head = tbl.current_snapshot().snapshot_id
    old = [s.snapshot_id for s in tbl.metadata.snapshots if s.snapshot_id != head]
    if old:
        tbl.maintenance.expire_snapshots().by_ids(old).commit()
        tbl = tbl.catalog.load_table(tbl.name())
    return tbl


def _reachable(tbl: Any) -> set[str]:
    """Every file the current metadata reaches (canonical URIs)."""
    meta, io = tbl.metadata, tbl.io
    out = {tbl.metadata_location}
    for s in meta.snapshots:
        out.add(s.manifest_list)
        for m in s.manifests(io):
            out.add(m.manifest_path)
            out.update(e.data_file.file_path for e in m.fetch_manifest_entry(io, discard_deleted=False))
    out.update(f.statistics_path for f in meta.statistics)
    out.update(f.statistics_path for f in meta.partition_statistics)
    return {canonical_uri(p, decoded=True) for p in out}


def _category(name: str) -> str:
    name = name[1:-4] if name.startswith(".") and name.endswith(".crc") else name
    if name.endswith(".metadata.json"):
        return "metadata"
    if name.startswith("snap-") and name.endswith(".avro"):
        return "manifest_lists"
    if name.endswith(".avro"):
        return "manifests"
    if name.endswith(".puffin") or "delete" in name:
        return "deletes"
    return "data"


def _unreachable(table: TableWriter, reachable: set[str]) -> list[tuple[str, FileStatus]]:
    root = table.uri.rstrip("/") + "/"
    index_root = table.index_root.rstrip("/") + "/"
    out = []
    for status in table.storage.list_tree(table.uri):
        if status.path.startswith(index_root) or not status.path.startswith(root):
            continue
        if outside_purge(status.path[len(root) :]):
            continue
        directory, _, name = status.path.rpartition("/")
        if status.path in reachable or name == "version-hint.text":
            continue
        if name.startswith(".") and name.endswith(".crc") and f"{directory}/{name[1:-4]}" in reachable:
            continue
        out.append((_category(name), status))
    return sorted(out, key=lambda c: c[1].path)


def purge(table: TableWriter, keep: int, dry_run: bool, refresh_indexes: Callable[[], None]) -> HistoryPurge:
    """Make a ``replace`` copy of snapshot ``keep`` (the main head) the only snapshot; remove the rest.

    ``refresh_indexes`` brings the active indexes onto the replace snapshot (no data change:
    nothing indexed) before the older snapshots expire."""
    check_supported(table)
    tbl = _table(table)
    head = tbl.current_snapshot()
    replaced = head is not None and _is_replace_of(head, keep)
    if head is None or (head.snapshot_id != keep and not replaced):
        raise PurgeRefusedError(
            f"{table.uri}: snapshot {keep} is not the head of main ({head and head.snapshot_id}); "
            "a purge keeps only the latest version"
        )
    refs = tuple(sorted(name for name in tbl.metadata.refs if name != "main"))
    purged = [
        PurgedVersion(s.snapshot_id, s.timestamp_ms)
        for s in sorted(tbl.metadata.snapshots, key=lambda s: s.timestamp_ms)
        if s.snapshot_id != head.snapshot_id or not replaced
    ]
    if dry_run:
        # Everything but the live data and delete files goes (the purge writes new manifests,
        # a manifest list and metadata files of its own).
        live = {
            canonical_uri(e.data_file.file_path, decoded=True)
            for m in head.manifests(tbl.io)
            for e in m.fetch_manifest_entry(tbl.io, discard_deleted=True)
        }
        removed = RemovedFiles.of(_unreachable(table, live))
        return HistoryPurge("iceberg", keep, keep, tuple(purged), refs, removed, True)
    new_id = head.snapshot_id if replaced else tbl.metadata.new_snapshot_id()
    record, path = purge_record.write_record(
        table.storage,
        table.index_root,
        purge_record.new_record("iceberg", table.uri, keep, new_id, purged, refs),
    )
    pause_point("recorded")
    if not replaced:
        _commit_replace(tbl, keep, record.kept_version)
        tbl = tbl.catalog.load_table(tbl.name())
    pause_point("replaced")
    refresh_indexes()
    pause_point("indexes-refreshed")
    tbl = _expire(tbl)
    pause_point("expired")
    files = _unreachable(table, _reachable(tbl))
    remove_files(table.storage, table.uri, table.index_root, [status.path for _, status in files])
    return HistoryPurge(
        "iceberg",
        keep,
        record.kept_version,
        record.purged,
        record.refs_removed,
        RemovedFiles.of(files),
        False,
        path,
    )
