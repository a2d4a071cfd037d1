"""Live content of Iceberg snapshots: built from every manifest, or advanced from the parent's.

* A snapshot's live files are the ADDED/EXISTING entries of every manifest in its
  manifest list (:meth:`LiveStates.state`).
* Tailing advances the parent's state by reading only the manifests whose
  ``added_snapshot_id`` is the snapshot: their ADDED entries were added and their
  DELETED entries removed by it (EXISTING entries are carried over). Keying on the
  manifest, not on the entry's snapshot id, sidesteps two pyiceberg bugs: 0.12 carries
  a deleted-only manifest into later snapshots, and <=0.11 stamped DELETED entries
  with the adding snapshot's id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Snapshot as IcebergSnapshot

from lakehouse_index.source import Change, DeleteChange, FileEntry, SizedCache, UnsupportedFeatureError
from lakehouse_index_iceberg.deletes import DeleteIndex, normalize_path
from lakehouse_index_iceberg.manifests import EntryStatus, FileContent, ManifestEntry, live
from lakehouse_index_iceberg.schema import partition_values
from lakehouse_index_iceberg.table_files import TableFiles
from lakehouse_index_iceberg.table_metadata import History, operation_of


@dataclass(frozen=True)
class State:
    """Live content of one snapshot: data entries by raw path, delete index, file entries."""

    snapshot_id: int
    schema_id: int | None
    data: dict[str, ManifestEntry]
    deletes: DeleteIndex
    files: dict[str, FileEntry]


def row_lineage(h: History, snap: IcebergSnapshot | None) -> bool:
    """Whether ``snap`` has row ids: a v3 snapshot. One committed before the table was
    upgraded to v3 has no ``first-row-id`` and its rows no ids (Spark reads them null)."""
    return snap is not None and h.format_version >= 3 and snap.first_row_id is not None


def deletes_key(f: FileEntry) -> tuple[str | None, tuple[str, ...]]:
    """What identifies the row-level deletes of an entry (equal keys: the same rows deleted)."""
    return (f.deletes.id if f.deletes else None, tuple(e.path for e in f.equality_deletes))


class LiveStates:
    """The states of one table's snapshots (bounded cache: CacheConfig.iceberg_state_entries)."""

    def __init__(self, files: TableFiles, history: Callable[[], History]) -> None:
        """``history`` gives the table's current metadata (it may move on between calls)."""
        self._files = files
        self._history = history
        self.forget()

    def forget(self) -> None:
        """Drop every state."""
        self._states: SizedCache[int, State] = SizedCache("iceberg_state_entries")

    def state(self, snap: IcebergSnapshot) -> State:
        """The state of ``snap`` (cached)."""
        hit = self._states.get(snap.snapshot_id)
        if hit is not None:
            return hit
        state = self.full_state(snap)
        self._remember(state)
        return state

    def full_state(self, snap: IcebergSnapshot) -> State:
        """A state from every manifest of ``snap`` (nothing reused)."""
        data: dict[str, ManifestEntry] = {}
        deletes: list[ManifestEntry] = []
        manifests = self._files.manifest_list(snap)
        self._files.prefetch(manifests)
        for m in manifests:
            for e in live(self._files.manifest(m)):
                if e.file.content == FileContent.DATA:
                    data[e.file.path] = e
                else:
                    deletes.append(e)
        return self._build_state(snap, data, deletes, None)

    def _remember(self, state: State) -> None:
        self._states[state.snapshot_id] = state

    def _build_state(
        self,
        snap: IcebergSnapshot,
        data: dict[str, ManifestEntry],
        deletes: Sequence[ManifestEntry],
        prev: State | None,
        added: Sequence[str] = (),
        removed: Sequence[str] = (),
    ) -> State:
        """A state from its live entries (reusing ``prev``'s file entries if deletes and schema match)."""
        h = self._history()
        schema = h.schema_for(snap)
        reuse = (
            prev is not None and prev.schema_id == schema.schema_id and prev.deletes.entries == tuple(deletes)
        )
        if reuse and prev is not None:
            index = prev.deletes
            files = dict(prev.files)
            for p in removed:
                files.pop(normalize_path(p), None)
            for p in added:
                files[normalize_path(p)] = self.file_entry(data[p], index, schema)
        else:
            index = self.delete_index(schema, deletes)
            files = {normalize_path(p): self.file_entry(e, index, schema) for p, e in data.items()}
        return State(snap.snapshot_id, schema.schema_id, data, index, files)

    def delete_index(self, schema: Schema, deletes: Sequence[ManifestEntry]) -> DeleteIndex:
        """The delete index of live delete entries (equality-delete files remembered for reads)."""
        names = {f.field_id: f.name for f in schema.fields}
        specs = self._history().metadata.specs()
        unpartitioned = frozenset(sid for sid, spec in specs.items() if not spec.fields)
        index = DeleteIndex(deletes, self._files.reader, unpartitioned, names)
        for e in index.entries:
            if e.file.content == FileContent.EQUALITY_DELETES:
                self._files.equality_files[normalize_path(e.file.path)] = e.file
        return index

    def file_entry(self, e: ManifestEntry, index: DeleteIndex, schema: Schema) -> FileEntry:
        """The contract's entry of a live data file; ORC and Avro data files are refused."""
        f = e.file
        if f.file_format.upper() != "PARQUET":
            raise UnsupportedFeatureError(
                f"Iceberg data file {f.path} is in {f.file_format.upper()} format: only Parquet data "
                "files are supported (ORC and Avro data files are refused)"
            )
        return FileEntry(
            path=normalize_path(f.path),
            size=f.size,
            mtime_ms=0,  # Iceberg records no modification time; paths are never reused
            num_records=f.record_count,
            partition_values=partition_values(self._history().metadata.specs().get(f.spec_id), f, schema),
            deletes=index.row_deletes(e),
            equality_deletes=index.equality_deletes(e, f.spec_id),
            first_row_id=f.first_row_id if self._history().format_version >= 3 else None,
        )

    # ------------------------------------------------------------------ tailing

    def walk(self, after: int | None, chain: list[IcebergSnapshot]) -> Iterator[Change]:
        """One Change per snapshot of ``chain`` (the lineage after ``after``, oldest first)."""
        prev = self.state(self._history().get(after)) if after is not None else self._empty_state()
        for s in chain:
            hit = self._states.get(s.snapshot_id)
            state, change = self._advance(prev, s)
            if hit is None:
                self._remember(state)
            yield change
            prev = state

    def _empty_state(self) -> State:
        schema = self._history().metadata.schema()
        return State(-1, schema.schema_id, {}, DeleteIndex((), self._files.reader, frozenset(), {}), {})

    def _advance(self, prev: State, snap: IcebergSnapshot) -> tuple[State, Change]:
        """The state after ``snap`` from its parent's, reading only manifests ``snap`` added."""
        added_data: dict[str, ManifestEntry] = {}
        removed_data: list[str] = []
        added_del: list[ManifestEntry] = []
        removed_del: set[tuple[str, int | None]] = set()
        manifests = self._files.manifest_list(snap)
        self._files.prefetch([m for m in manifests if m.added_snapshot_id == snap.snapshot_id])
        for m in manifests:
            if m.added_snapshot_id != snap.snapshot_id:
                continue
            for e in self._files.manifest(m):
                if e.status == EntryStatus.EXISTING:
                    continue
                is_data = e.file.content == FileContent.DATA
                if e.status == EntryStatus.ADDED:
                    if is_data:
                        added_data[e.file.path] = e
                    else:
                        added_del.append(e)
                elif is_data:
                    removed_data.append(e.file.path)
                else:
                    removed_del.add((e.file.path, e.file.content_offset))
        data = dict(prev.data)
        for p in removed_data:
            data.pop(p, None)
        data.update(added_data)
        deletes = [e for e in prev.deletes.entries if (e.file.path, e.file.content_offset) not in removed_del]
        deletes += added_del
        h = self._history()
        if row_lineage(h, snap) and not row_lineage(h, h.snapshots().get(prev.snapshot_id)):
            # The upgrade to v3 gave the files it carried over their first row ids (in the
            # new manifest list): take them from there, not from the parent's entries.
            state = self.full_state(snap)
        else:
            state = self._build_state(snap, data, deletes, prev, tuple(added_data), removed_data)
        removed = tuple(
            prev.files[normalize_path(p)]
            for p in removed_data
            if normalize_path(p) in prev.files and p not in added_data
        )
        added = tuple(state.files[normalize_path(p)] for p in added_data)
        changed = []
        if state.deletes is not prev.deletes or state.schema_id != prev.schema_id:
            skip = {normalize_path(p) for p in added_data}
            for path, after_entry in state.files.items():
                before = prev.files.get(path)
                if before is None or path in skip:
                    continue
                if deletes_key(before) != deletes_key(after_entry):
                    changed.append(DeleteChange(before=before, after=after_entry))
        op = operation_of(snap)
        change = Change(
            version=snap.snapshot_id,
            ordinal=self._history().ordinals()[snap.snapshot_id],
            timestamp_ms=snap.timestamp_ms,
            added=added,
            removed=removed,
            delete_changes=tuple(changed),
            data_change=op != "replace",
            operation=op,
        )
        return state, change
