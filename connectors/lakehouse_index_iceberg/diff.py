"""The difference between two Iceberg snapshots, reading only the manifests they do not share.

Any two snapshots: ancestors, two branches, across a rollback. Manifests are immutable
and named by path, so a manifest listed by both snapshots holds the same live files in
both and is not read; the manifests listed by one side only are. Row-level deletes of a
file in a shared manifest differ only if a delete file live on one side only applies to
it: the shared data manifests that may hold such a file are read too (all of them for an
equality delete; for position deletes and deletion vectors, in list order until every
file they name is found), and of their files only those such a delete applies to are
compared. Shared delete manifests are read only when new enough to apply to a compared
file (a manifest's entries are no newer than its sequence number). The result equals
comparing both full snapshots (assuming, as the spec requires, a data file is live in one
manifest of a snapshot at most).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyiceberg.table.snapshots import Snapshot as IcebergSnapshot

from lakehouse_index.source import DeleteChange, Diff, FileEntry
from lakehouse_index_iceberg.deletes import DeleteIndex, normalize_path
from lakehouse_index_iceberg.manifests import FileContent, ManifestContent, ManifestEntry, ManifestFile, live
from lakehouse_index_iceberg.states import LiveStates, deletes_key
from lakehouse_index_iceberg.table_files import TableFiles
from lakehouse_index_iceberg.table_metadata import History


@dataclass(frozen=True)
class _DiffScope:
    """What a diff reads: manifests listed by one side only (``unshared``), the shared data
    manifests that may hold files ``touching`` (the one-sided delete files) applies to."""

    unshared: frozenset[str]
    shared_read: frozenset[str]
    touching: DeleteIndex


def unshared_diff(
    h: History, snap_a: IcebergSnapshot, snap_b: IcebergSnapshot, files: TableFiles, states: LiveStates
) -> Diff:
    """Live-state difference from ``snap_a`` to ``snap_b`` of history ``h`` (see the module docstring)."""
    list_a, list_b = files.manifest_list(snap_a), files.manifest_list(snap_b)
    paths_a, paths_b = {m.path for m in list_a}, {m.path for m in list_b}
    unshared = frozenset((paths_a - paths_b) | (paths_b - paths_a))
    one_sided = [
        e
        for m in (*list_a, *list_b)
        if m.path in unshared and m.content == ManifestContent.DELETES
        for e in live(files.manifest(m))
    ]
    touching = states.delete_index(h.schema_for(snap_b), one_sided)
    scope = _DiffScope(unshared, _shared_to_read(files, list_a, list_b, unshared, touching), touching)
    files_a = _scoped_files(h, snap_a, list_a, scope, files, states)
    files_b = _scoped_files(h, snap_b, list_b, scope, files, states)
    changed = tuple(
        DeleteChange(before=files_a[p], after=f)
        for p, f in files_b.items()
        if p in files_a and deletes_key(files_a[p]) != deletes_key(f)
    )
    return Diff(
        from_version=snap_a.snapshot_id,
        to_version=snap_b.snapshot_id,
        added=tuple(f for p, f in files_b.items() if p not in files_a),
        removed=tuple(f for p, f in files_a.items() if p not in files_b),
        delete_changes=changed,
    )


def _shared_to_read(
    files: TableFiles,
    list_a: Sequence[ManifestFile],
    list_b: Sequence[ManifestFile],
    unshared: frozenset[str],
    touching: DeleteIndex,
) -> frozenset[str]:
    """Shared data manifests that may hold a file a one-sided delete applies to."""
    if touching.is_empty:
        return frozenset()
    shared = [m for m in list_b if m.path not in unshared and m.content == ManifestContent.DATA]
    if touching.has_equality_deletes:
        return frozenset(m.path for m in shared)
    missing = set(touching.position_targets)
    for m in (*list_a, *list_b):
        if m.path in unshared:
            missing -= {e.file.path for e in live(files.manifest(m))}
    out = set()
    for m in shared:
        if not missing:
            break
        out.add(m.path)
        missing -= {e.file.path for e in live(files.manifest(m))}
    return frozenset(out)


def _scoped_files(
    h: History,
    snap: IcebergSnapshot,
    manifests: Sequence[ManifestFile],
    scope: _DiffScope,
    files: TableFiles,
    states: LiveStates,
) -> dict[str, FileEntry]:
    """File entries of ``snap``'s live data files in the diff's scope, as in its full state.

    In scope: every data file of an unshared manifest, and the files of the shared
    manifests read that a one-sided delete applies to. Their deletes come from every
    delete file of ``snap`` that may apply to them (in list order, as the full state's).
    """
    data: dict[str, ManifestEntry] = {}
    for m in manifests:
        if m.path in scope.unshared:
            entries = [e for e in live(files.manifest(m)) if e.file.content == FileContent.DATA]
        elif m.path in scope.shared_read:
            entries = [e for e in live(files.manifest(m)) if scope.touching.touches(e)]
        else:
            continue
        for e in entries:
            data[e.file.path] = e
    if not data:
        return {}
    oldest = min(e.sequence_number for e in data.values())
    deletes = [
        e
        for m in manifests
        if m.path in scope.unshared or (m.content == ManifestContent.DELETES and m.sequence_number >= oldest)
        for e in live(files.manifest(m))
        if e.file.content != FileContent.DATA
    ]
    schema = h.schema_for(snap)
    index = states.delete_index(schema, deletes)
    return {normalize_path(p): states.file_entry(e, index, schema) for p, e in data.items()}
