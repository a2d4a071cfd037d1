"""IcebergSource: the connector contract over Iceberg table metadata, manifests and deletes.

Reading model
-------------
* A snapshot's live files are the ADDED/EXISTING entries of every manifest in its
  manifest list; manifests are immutable, so parsed manifests are cached by path and
  shared between snapshots.
* Tailing (``changes``) walks the parent chain of the target snapshot and, per
  snapshot, reads only the manifest list and the manifests whose
  ``added_snapshot_id`` is that snapshot: their ADDED entries were added and their
  DELETED entries removed by it (EXISTING entries are carried over). Keying on the
  manifest, not on the entry's snapshot id, sidesteps two pyiceberg bugs: 0.12 carries
  a deleted-only manifest into later snapshots, and <=0.11 stamped DELETED entries
  with the adding snapshot's id.
* ``diff(a, b)`` of any two snapshots reads only the manifests one of them lists and
  the other does not (plus what one-sided delete files need, see :meth:`IcebergSource.diff`).
* Versions are snapshot ids. A tailer whose position is no longer an ancestor of the
  target (rollback, a snapshot on another branch) or whose snapshots expired gets
  HistoryTruncatedError and must resync from :meth:`snapshot`.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table.name_mapping import parse_mapping_from_json
from pyiceberg.table.snapshots import Snapshot as IcebergSnapshot
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    DateType,
    IcebergType,
    ListType,
    MapType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
)
from pyroaring import BitMap64

from lakehouse_index import source as contract
from lakehouse_index.source import (
    ELEMENT,
    KEY,
    VALUE,
    Change,
    Column,
    DeleteChange,
    Diff,
    EqualityDeletes,
    FileEntry,
    FileIO,
    HistoryTruncatedError,
    NotATableError,
    Snapshot,
    Subfield,
    TableFormatError,
    TableSource,
    UnsupportedFeatureError,
    VersionInfo,
    VersionNotFoundError,
    canonical_uri,
)
from lakehouse_index_iceberg.deletes import (
    DeleteIndex,
    DeleteReader,
    IcebergRowDeletes,
    normalize_path,
    read_equality_delete_rows,
)
from lakehouse_index_iceberg.manifests import (
    ContentFile,
    EntryStatus,
    FileContent,
    ManifestContent,
    ManifestEntry,
    ManifestFile,
    live,
    read_manifest,
    read_manifest_list,
    read_manifests,
)
from lakehouse_index_iceberg.table_metadata import (
    History,
    MetadataLocator,
    find_metadata_file,
    has_metadata,
    operation_of,
    parse_metadata,
)

#: Name under which v3 row lineage is exposed (Iceberg's reserved ``_row_id`` column).
ROW_ID_COLUMN = "_row_id"
#: Field id of the materialized ``_row_id`` column in v3 data files.
ROW_ID_FIELD_ID = 2147483540
_EPOCH = dt.datetime(1970, 1, 1)

#: Manifests a snapshot's replay reads together (``FileIO.read_many``; concurrently on an object store).
_PREFETCH = 64


@dataclass(frozen=True)
class _DiffScope:
    """What a diff reads: manifests listed by one side only (``unshared``), the shared data
    manifests that may hold files ``touching`` (the one-sided delete files) applies to."""

    unshared: frozenset[str]
    shared_read: frozenset[str]
    touching: DeleteIndex


@dataclass(frozen=True)
class _State:
    """Live content of one snapshot: data entries by raw path, delete index, file entries."""

    snapshot_id: int
    schema_id: int | None
    data: dict[str, ManifestEntry]
    deletes: DeleteIndex
    files: dict[str, FileEntry]


class IcebergSource(TableSource):
    """An Iceberg table (format v1, v2 or v3), opened by path or through a pyiceberg catalog."""

    format_name = "iceberg"

    def __init__(self, io: FileIO, locator: MetadataLocator, name: str) -> None:
        self._io = io
        self._locator = locator
        self._name = name
        self._catalog_ref: tuple[Any, str] | None = None
        #: Counts of metadata files read (manifest lists, manifests): the benchmark reports them.
        self.reads = {"metadata": 0, "manifest_list": 0, "manifest": 0}
        self.forget()

    def forget(self) -> None:
        """Drop every cached read of the metadata (after its history was rewritten, e.g. purged)."""
        self._history: History | None = None
        # Bounded caches, sized by CacheConfig.iceberg_*.
        self._manifest_lists: contract.SizedCache[str, tuple[ManifestFile, ...]]
        self._manifests: contract.SizedCache[tuple[str, int | None], tuple[ManifestEntry, ...]]
        self._manifest_lists = contract.SizedCache("iceberg_manifest_entries")
        self._manifests = contract.SizedCache("iceberg_manifest_entries")
        self._states: contract.SizedCache[int, _State] = contract.SizedCache("iceberg_state_entries")
        # Built snapshots per (snapshot id, metadata file): a lookup gets the same object back
        # until the next commit, so what the core caches per snapshot stays warm.
        self._snapshots: contract.SizedCache[tuple[int, str], Snapshot] = contract.SizedCache(
            "iceberg_state_entries"
        )
        self._reader = DeleteReader(self._io)
        self._eq_files: dict[str, ContentFile] = {}

    # ------------------------------------------------------------------ opening

    @classmethod
    def detect(cls, uri: str, io: FileIO, **options: Any) -> bool:
        """True when a catalog is given, or ``<uri>/metadata`` holds a metadata JSON file."""
        if options.get("catalog") is not None:
            return True
        return has_metadata(io, _table_uri(uri))

    @classmethod
    def open(cls, uri: str, io: FileIO, **options: Any) -> IcebergSource:
        """Open by catalog (``uri`` is ``"db.table"``, ``catalog`` a name or Catalog) or by path."""
        catalog = options.get("catalog")
        if catalog is not None:
            locator = _catalog_locator(catalog, uri)
        else:
            root = _table_uri(uri)
            if not has_metadata(io, root):
                raise NotATableError(f"{uri} is not an Iceberg table: no metadata/*.metadata.json")

            def locator() -> str:
                return find_metadata_file(io, root)

        src = cls(io, locator, uri)
        src._catalog_ref = (catalog, uri) if catalog is not None else None
        src._refresh()
        return src

    def catalog_table(self) -> Any | None:
        """The pyiceberg Table, freshly loaded through the catalog the source was opened with.

        For writers (pyiceberg commits through the catalog); None when opened by path,
        which has no atomic commit.
        """
        if self._catalog_ref is None:
            return None
        from pyiceberg.catalog import load_catalog

        catalog, identifier = self._catalog_ref
        cat = load_catalog(catalog) if isinstance(catalog, str) else catalog
        return cat.load_table(identifier)

    def _refresh(self) -> History:
        location = self._locator()
        io = self._io.serving(location)  # a catalog's table may live on another store
        if io is not self._io:
            self._io, self._reader = io, DeleteReader(io)
        if self._history is None or self._history.location != location:
            self.reads["metadata"] += 1
            meta = parse_metadata(self._io, location)
            if int(meta.format_version) > 3:
                raise UnsupportedFeatureError(f"Iceberg format version {meta.format_version} in {location}")
            self._history = History(meta, location)
        return self._history

    def _hist(self) -> History:
        return self._history if self._history is not None else self._refresh()

    def _snap(self, version: int) -> IcebergSnapshot:
        """The snapshot, re-reading the metadata once if it is not known yet."""
        h = self._hist()
        if version not in h.snapshots():
            h = self._refresh()
        return h.get(version)

    @property
    def uri(self) -> str:
        """The table location recorded in its metadata, as a canonical URI."""
        return normalize_path(self._hist().metadata.location.rstrip("/"))

    @property
    def io(self) -> FileIO:
        """Storage access for data and delete files."""
        return self._io

    @property
    def format_version(self) -> int:
        """Iceberg table format version of the current metadata."""
        return self._hist().format_version

    @property
    def metadata_location(self) -> str:
        """The metadata file currently read."""
        return self._hist().location

    # ------------------------------------------------------------------ versions

    def latest_version(self) -> int:
        """Head of the main branch, from freshly read metadata."""
        head = self._refresh().main_head
        if head is None:
            raise VersionNotFoundError(f"Iceberg table {self._name} has no snapshot yet")
        return head

    def _info(self, h: History, s: IcebergSnapshot) -> VersionInfo:
        return VersionInfo(s.snapshot_id, h.ordinals()[s.snapshot_id], s.timestamp_ms, s.parent_snapshot_id)

    def versions(self) -> list[VersionInfo]:
        """Main-branch lineage oldest first, then every other snapshot by ordinal."""
        h = self._refresh()
        head = h.main_head
        lineage = list(reversed(h.ancestors(head))) if head is not None else []
        on_main = {s.snapshot_id for s in lineage}
        others = sorted(
            (s for s in h.metadata.snapshots if s.snapshot_id not in on_main),
            key=lambda s: h.ordinals()[s.snapshot_id],
        )
        return [self._info(h, s) for s in lineage + others]

    def version_info(self, version: int) -> VersionInfo:
        """Ordinal, timestamp and parent of a snapshot."""
        s = self._snap(version)
        return self._info(self._hist(), s)

    def version_at(self, timestamp_ms: int) -> int:
        """The main branch's snapshot at ``timestamp_ms``, from the snapshot log."""
        h = self._refresh()
        log = [e for e in h.metadata.snapshot_log if e.timestamp_ms <= timestamp_ms]
        if not log:
            raise VersionNotFoundError(
                f"Iceberg table {self._name} has no snapshot at or before {timestamp_ms}"
            )
        sid = log[-1].snapshot_id
        if sid not in h.snapshots():
            raise VersionNotFoundError(f"snapshot {sid}, current at {timestamp_ms}, has expired")
        return sid

    def resolve_version(self, ref: int | str | None) -> int:
        """None → main head; int → snapshot id; str → tag or branch name (or a numeric id).

        Answered from the current metadata, as :meth:`latest_version` is: branches and tags
        move and snapshots expire under a long-lived source (the metadata file is parsed
        again only when the catalog names another one).
        """
        if ref is None:
            return self.latest_version()
        h = self._refresh()
        if isinstance(ref, int):
            h.get(ref)  # VersionNotFoundError once expired, as a freshly opened source says
            return ref
        sid = h.ref(ref)
        if sid is None and ref.lstrip("-").isdigit():
            sid = int(ref)
        if sid is None:
            names = sorted(h.metadata.refs)
            raise VersionNotFoundError(
                f"Iceberg table {self._name} has no branch or tag {ref!r} (refs: {names})"
            )
        h.get(sid)
        return sid

    # ------------------------------------------------------------------ manifests

    def _manifest_list(self, snap: IcebergSnapshot) -> tuple[ManifestFile, ...]:
        path = snap.manifest_list
        if not path:
            raise UnsupportedFeatureError(
                f"snapshot {snap.snapshot_id} lists manifests inline (v1 'manifests' field); not supported"
            )
        hit = self._manifest_lists.get(path)
        if hit is None:
            self.reads["manifest_list"] += 1
            hit = read_manifest_list(self._io, path)
            self._manifest_lists[path] = hit
        return hit

    def _manifest(self, m: ManifestFile) -> tuple[ManifestEntry, ...]:
        # Keyed by the list row's first_row_id too: the entries inherit it, and a manifest
        # written before an upgrade to v3 gets one only in the lists written after it.
        key = (m.path, m.first_row_id)
        hit = self._manifests.get(key)
        if hit is None:
            self.reads["manifest"] += 1
            hit = read_manifest(self._io, m)
            self._manifests[key] = hit
        return hit

    def _prefetch_manifests(self, manifests: Sequence[ManifestFile]) -> None:
        """Read the manifests not cached yet together (up to ``_PREFETCH`` per ``read_many``),
        into the cache: on an object store a snapshot of many manifests then waits a round
        trip per batch, not one per manifest."""
        keyed = {(m.path, m.first_row_id): m for m in manifests}
        missing = [m for key, m in keyed.items() if key not in self._manifests]
        if len(missing) < 2:
            return
        for at in range(0, len(missing), _PREFETCH):
            part = missing[at : at + _PREFETCH]
            for m, hit in zip(part, read_manifests(self._io, part), strict=True):
                self.reads["manifest"] += 1
                self._manifests[(m.path, m.first_row_id)] = hit

    # ------------------------------------------------------------------ snapshots

    def snapshot(self, version: int | None = None) -> Snapshot:
        """Schema and every live data file (with its row-level deletes) at ``version``."""
        v = self.latest_version() if version is None else version
        snap = self._snap(v)
        h = self._hist()
        key = (v, h.location)
        hit = self._snapshots.get(key)
        if hit is not None:
            return hit
        built = self._build_snapshot(h, snap)
        self._snapshots[key] = built
        return built

    def _build_snapshot(self, h: History, snap: IcebergSnapshot) -> Snapshot:
        v = snap.snapshot_id
        state = self._state(snap)
        schema = h.schema_for(snap)
        return Snapshot(
            version=v,
            ordinal=h.ordinals()[v],
            timestamp_ms=snap.timestamp_ms,
            columns=_columns(schema, _name_mapping(h.metadata.properties)),
            files=dict(state.files),
            partition_columns=self._partition_columns(schema),
            row_id_column=ROW_ID_COLUMN if self._row_lineage(snap) else None,
        )

    def _row_lineage(self, snap: IcebergSnapshot | None) -> bool:
        """Whether ``snap`` has row ids: a v3 snapshot. One committed before the table was
        upgraded to v3 has no ``first-row-id`` and its rows no ids (Spark reads them null)."""
        return snap is not None and self._hist().format_version >= 3 and snap.first_row_id is not None

    def _partition_columns(self, schema: Schema) -> tuple[str, ...]:
        spec = self._hist().metadata.spec()
        out = []
        for pf in spec.fields:
            if isinstance(pf.transform, IdentityTransform):
                f = schema.find_field(pf.source_id) if pf.source_id in schema.field_ids else None
                if f is not None:
                    out.append(f.name)
        return tuple(out)

    def _state(self, snap: IcebergSnapshot) -> _State:
        hit = self._states.get(snap.snapshot_id)
        if hit is not None:
            return hit
        state = self._full_state(snap)
        self._remember(state)
        return state

    def _full_state(self, snap: IcebergSnapshot) -> _State:
        """A state from every manifest of ``snap`` (nothing reused)."""
        data: dict[str, ManifestEntry] = {}
        deletes: list[ManifestEntry] = []
        manifests = self._manifest_list(snap)
        self._prefetch_manifests(manifests)
        for m in manifests:
            for e in live(self._manifest(m)):
                if e.file.content == FileContent.DATA:
                    data[e.file.path] = e
                else:
                    deletes.append(e)
        return self._build_state(snap, data, deletes, None)

    def _remember(self, state: _State) -> None:
        self._states[state.snapshot_id] = state

    def _build_state(
        self,
        snap: IcebergSnapshot,
        data: dict[str, ManifestEntry],
        deletes: Sequence[ManifestEntry],
        prev: _State | None,
        added: Sequence[str] = (),
        removed: Sequence[str] = (),
    ) -> _State:
        """A state from its live entries (reusing ``prev``'s file entries if deletes and schema match)."""
        h = self._hist()
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
                files[normalize_path(p)] = self._file_entry(data[p], index, schema)
        else:
            index = self._delete_index(schema, deletes)
            files = {normalize_path(p): self._file_entry(e, index, schema) for p, e in data.items()}
        return _State(snap.snapshot_id, schema.schema_id, data, index, files)

    def _delete_index(self, schema: Schema, deletes: Sequence[ManifestEntry]) -> DeleteIndex:
        """The delete index of live delete entries (equality-delete files remembered for reads)."""
        names = {f.field_id: f.name for f in schema.fields}
        specs = self._hist().metadata.specs()
        unpartitioned = frozenset(sid for sid, spec in specs.items() if not spec.fields)
        index = DeleteIndex(deletes, self._reader, unpartitioned, names)
        for e in index.entries:
            if e.file.content == FileContent.EQUALITY_DELETES:
                self._eq_files[normalize_path(e.file.path)] = e.file
        return index

    def _file_entry(self, e: ManifestEntry, index: DeleteIndex, schema: Schema) -> FileEntry:
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
            partition_values=self._partition_values(f, schema),
            deletes=index.row_deletes(e),
            equality_deletes=index.equality_deletes(e, f.spec_id),
            first_row_id=f.first_row_id if self._hist().format_version >= 3 else None,
        )

    def _partition_values(self, f: ContentFile, schema: Schema) -> tuple[tuple[str, Any], ...]:
        """Identity-partition values keyed by the source column's current name, typed."""
        spec = self._hist().metadata.specs().get(f.spec_id)
        if spec is None:
            return ()
        out = []
        for i, pf in enumerate(spec.fields):
            if not isinstance(pf.transform, IdentityTransform) or i >= len(f.partition):
                continue
            if pf.source_id not in schema.field_ids:
                continue
            col = schema.find_field(pf.source_id)
            out.append((col.name, _typed(f.partition[i], col.field_type)))
        return tuple(out)

    # ------------------------------------------------------------------ tailing

    def changes(self, after: int | None, upto: int | None = None) -> Iterator[Change]:
        """One Change per snapshot on the lineage of ``upto`` (main head) after ``after``."""
        h = self._refresh()
        target = h.main_head if upto is None else upto
        if target is None:
            return iter(())
        self._snap(target)
        h = self._hist()
        snaps = h.snapshots()
        chain: list[IcebergSnapshot] = []
        cur: int | None = target
        while cur is not None and cur != after:
            s = snaps.get(cur)
            if s is None:
                raise HistoryTruncatedError(
                    f"snapshot {cur}, an ancestor of {target}, has expired: resync from a snapshot"
                )
            chain.append(s)
            cur = s.parent_snapshot_id
        if after is not None and cur != after:
            if after in snaps:
                raise HistoryTruncatedError(
                    f"snapshot {after} is not an ancestor of {target} (rollback or another branch): resync"
                )
            raise HistoryTruncatedError(
                f"snapshot {after} has expired or never existed: resync from a snapshot"
            )
        chain.reverse()
        if after is None and chain:
            # Expiry may clear the parent id of the oldest retained snapshot (pyiceberg does):
            # a true first commit lists only manifests it wrote itself.
            root = chain[0]
            if any(m.added_snapshot_id != root.snapshot_id for m in self._manifest_list(root)):
                raise HistoryTruncatedError(
                    f"history before snapshot {root.snapshot_id} has expired: resync from a snapshot"
                )
        return self._walk(after, chain)

    def _walk(self, after: int | None, chain: list[IcebergSnapshot]) -> Iterator[Change]:
        prev = self._state(self._hist().get(after)) if after is not None else self._empty_state()
        for s in chain:
            hit = self._states.get(s.snapshot_id)
            state, change = self._advance(prev, s)
            if hit is None:
                self._remember(state)
            yield change
            prev = state

    def _empty_state(self) -> _State:
        schema = self._hist().metadata.schema()
        return _State(-1, schema.schema_id, {}, DeleteIndex((), self._reader, frozenset(), {}), {})

    def _advance(self, prev: _State, snap: IcebergSnapshot) -> tuple[_State, Change]:
        """The state after ``snap`` from its parent's, reading only manifests ``snap`` added."""
        added_data: dict[str, ManifestEntry] = {}
        removed_data: list[str] = []
        added_del: list[ManifestEntry] = []
        removed_del: set[tuple[str, int | None]] = set()
        manifests = self._manifest_list(snap)
        self._prefetch_manifests([m for m in manifests if m.added_snapshot_id == snap.snapshot_id])
        for m in manifests:
            if m.added_snapshot_id != snap.snapshot_id:
                continue
            for e in self._manifest(m):
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
        if self._row_lineage(snap) and not self._row_lineage(self._hist().snapshots().get(prev.snapshot_id)):
            # The upgrade to v3 gave the files it carried over their first row ids (in the
            # new manifest list): take them from there, not from the parent's entries.
            state = self._full_state(snap)
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
                if _deletes_key(before) != _deletes_key(after_entry):
                    changed.append(DeleteChange(before=before, after=after_entry))
        op = operation_of(snap)
        change = Change(
            version=snap.snapshot_id,
            ordinal=self._hist().ordinals()[snap.snapshot_id],
            timestamp_ms=snap.timestamp_ms,
            added=added,
            removed=removed,
            delete_changes=tuple(changed),
            data_change=op != "replace",
            operation=op,
        )
        return state, change

    # ------------------------------------------------------------------ diff

    def diff(self, a: int, b: int) -> Diff:
        """Live-state difference from snapshot ``a`` to ``b``, reading only what is not shared.

        Any two snapshots: ancestors, two branches, across a rollback. Manifests are
        immutable and named by path, so a manifest listed by both snapshots holds the same
        live files in both and is not read; the manifests listed by one side only are.
        Row-level deletes of a file in a shared manifest differ only if a delete file live
        on one side only applies to it: the shared data manifests that may hold such a
        file are read too (all of them for an equality delete; for position deletes and
        deletion vectors, in list order until every file they name is found), and of their
        files only those such a delete applies to are compared. Shared delete manifests
        are read only when new enough to apply to a compared file (a manifest's entries are
        no newer than its sequence number). The result equals comparing both full
        snapshots (assuming, as the spec requires, a data file is live in one manifest of a
        snapshot at most).
        """
        snap_a, snap_b = self._snap(a), self._snap(b)
        list_a, list_b = self._manifest_list(snap_a), self._manifest_list(snap_b)
        paths_a, paths_b = {m.path for m in list_a}, {m.path for m in list_b}
        unshared = frozenset((paths_a - paths_b) | (paths_b - paths_a))
        one_sided = [
            e
            for m in (*list_a, *list_b)
            if m.path in unshared and m.content == ManifestContent.DELETES
            for e in live(self._manifest(m))
        ]
        touching = self._delete_index(self._hist().schema_for(snap_b), one_sided)
        scope = _DiffScope(unshared, self._shared_to_read(list_a, list_b, unshared, touching), touching)
        files_a = self._scoped_files(snap_a, list_a, scope)
        files_b = self._scoped_files(snap_b, list_b, scope)
        changed = tuple(
            DeleteChange(before=files_a[p], after=f)
            for p, f in files_b.items()
            if p in files_a and _deletes_key(files_a[p]) != _deletes_key(f)
        )
        return Diff(
            from_version=a,
            to_version=b,
            added=tuple(f for p, f in files_b.items() if p not in files_a),
            removed=tuple(f for p, f in files_a.items() if p not in files_b),
            delete_changes=changed,
        )

    def _shared_to_read(
        self,
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
                missing -= {e.file.path for e in live(self._manifest(m))}
        out = set()
        for m in shared:
            if not missing:
                break
            out.add(m.path)
            missing -= {e.file.path for e in live(self._manifest(m))}
        return frozenset(out)

    def _scoped_files(
        self, snap: IcebergSnapshot, manifests: Sequence[ManifestFile], scope: _DiffScope
    ) -> dict[str, FileEntry]:
        """File entries of ``snap``'s live data files in the diff's scope, as in its full state.

        In scope: every data file of an unshared manifest, and the files of the shared
        manifests read that a one-sided delete applies to. Their deletes come from every
        delete file of ``snap`` that may apply to them (in list order, as the full state's).
        """
        data: dict[str, ManifestEntry] = {}
        for m in manifests:
            if m.path in scope.unshared:
                entries = [e for e in live(self._manifest(m)) if e.file.content == FileContent.DATA]
            elif m.path in scope.shared_read:
                entries = [e for e in live(self._manifest(m)) if scope.touching.touches(e)]
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
            if m.path in scope.unshared
            or (m.content == ManifestContent.DELETES and m.sequence_number >= oldest)
            for e in live(self._manifest(m))
            if e.file.content != FileContent.DATA
        ]
        schema = self._hist().schema_for(snap)
        index = self._delete_index(schema, deletes)
        return {normalize_path(p): self._file_entry(e, index, schema) for p, e in data.items()}

    # ------------------------------------------------------------------ row-level deletes

    def deleted_positions(self, entry: FileEntry) -> BitMap64:
        """Positions deleted by the entry's position-delete files or deletion vector."""
        if entry.deletes is None:
            return BitMap64()
        if not isinstance(entry.deletes, IcebergRowDeletes):
            raise UnsupportedFeatureError(f"not an Iceberg delete descriptor: {entry.deletes!r}")
        return self._reader.positions(entry.deletes)

    def equality_delete_rows(self, deletes: EqualityDeletes, columns: Sequence[Column]) -> pa.Table:
        """Rows of an equality-delete file, columns matched by field id, logical names."""
        f = self._eq_files.get(deletes.path)
        if f is None:
            raise VersionNotFoundError(f"unknown equality-delete file {deletes.path}: load a snapshot first")
        return read_equality_delete_rows(self._io, f.path, f.equality_ids, columns)


# ---------------------------------------------------------------------- helpers


def _deletes_key(f: FileEntry) -> tuple[str | None, tuple[str, ...]]:
    return (f.deletes.id if f.deletes else None, tuple(e.path for e in f.equality_deletes))


#: The table property holding the names of fields in data files without field ids.
NAME_MAPPING = "schema.name-mapping.default"


def _name_mapping(properties: Mapping[str, str]) -> dict[int, tuple[str, ...]]:
    """Field id → the names the table's name mapping gives it (empty without a mapping)."""
    text = properties.get(NAME_MAPPING)
    if not text:
        return {}
    try:
        mapping = parse_mapping_from_json(text)
    except ValueError as e:
        raise TableFormatError(f"table property {NAME_MAPPING} is not a valid name mapping: {e}") from e
    out: dict[int, tuple[str, ...]] = {}
    pending = list(mapping)
    while pending:
        f = pending.pop()
        if f.field_id is not None:
            out[f.field_id] = tuple(f.names)
        pending.extend(f.fields)
    return out


def _columns(schema: Schema, mapped: Mapping[int, tuple[str, ...]]) -> tuple[Column, ...]:
    """The schema's top-level columns, with the field ids of every nested field and the names
    ``mapped`` (the name mapping) gives fields in data files without ids."""
    arrow = schema_to_pyarrow(schema, include_field_ids=False)
    return tuple(
        Column(
            name=f.name,
            type=_plain(arrow.field(f.name).type),
            nullable=not f.required,
            field_id=f.field_id,
            subfields=_subfields(f.field_type, mapped),
            file_names=mapped.get(f.field_id, ()),
        )
        for f in schema.fields
    )


def _subfields(t: IcebergType, mapped: Mapping[int, tuple[str, ...]]) -> tuple[Subfield, ...]:
    """Struct fields, list elements, map keys and values of ``t`` with their field ids (and
    mapped names: :func:`_columns`)."""

    def sub(name: str, field_id: int, inner: IcebergType) -> Subfield:
        return Subfield(
            name, field_id=field_id, children=_subfields(inner, mapped), file_names=mapped.get(field_id, ())
        )

    if isinstance(t, StructType):
        return tuple(sub(f.name, f.field_id, f.field_type) for f in t.fields)
    if isinstance(t, ListType):
        return (sub(ELEMENT, t.element_id, t.element_type),)
    if isinstance(t, MapType):
        return (sub(KEY, t.key_id, t.key_type), sub(VALUE, t.value_id, t.value_type))
    return ()


def _plain(t: pa.DataType) -> pa.DataType:
    """pyiceberg maps strings/binaries/lists to Arrow's large variants; use the plain ones."""
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_plain(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_plain(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(_plain(t.key_type)), t.item_field.with_type(_plain(t.item_type)))
    return t


def _typed(value: Any, t: IcebergType) -> Any:
    """A partition value as decoded from Avro, as the Python value of the column type."""
    if value is None:
        return None
    if isinstance(t, DateType):
        return (_EPOCH + dt.timedelta(days=value)).date()
    if isinstance(t, TimeType):
        return (_EPOCH + dt.timedelta(microseconds=value)).time()
    if isinstance(t, TimestampType):
        return _EPOCH + dt.timedelta(microseconds=value)
    if isinstance(t, TimestamptzType):
        return (_EPOCH + dt.timedelta(microseconds=value)).replace(tzinfo=dt.timezone.utc)
    if isinstance(t, (TimestampNanoType, TimestamptzNanoType)):
        # Python datetimes stop at microseconds: keep nanoseconds exactly as an int.
        return int(value)
    if isinstance(value, bytes) and str(t) == "uuid":
        return uuid.UUID(bytes=value)
    return value


def _table_uri(uri: str) -> str:
    """A table folder as a canonical URI (the core hands it over decoded: not decoded again)."""
    return canonical_uri(uri, decoded=True)


def _catalog_locator(catalog: Any, identifier: str) -> MetadataLocator:
    from pyiceberg.catalog import Catalog, load_catalog
    from pyiceberg.exceptions import NoSuchTableError

    cat = load_catalog(catalog) if isinstance(catalog, str) else catalog
    if not isinstance(cat, Catalog):
        raise TypeError(
            f"catalog must be a catalog name or a pyiceberg Catalog, got {type(catalog).__name__}"
        )

    row = _sql_metadata_location(cat, identifier)

    def locate() -> str:
        try:
            location = row() if row is not None else None
            return location if location is not None else str(cat.load_table(identifier).metadata_location)
        except NoSuchTableError as e:
            raise NotATableError(f"catalog {cat.name!r} has no Iceberg table {identifier!r}") from e

    return locate


def _sql_metadata_location(cat: Any, identifier: str) -> Callable[[], str | None] | None:
    """For a pyiceberg ``SqlCatalog``: a query of the table's current metadata location alone.

    ``load_table`` reads and parses the whole metadata file on every call, only for the source
    to learn whether it changed; the catalog's table row names it. None for other catalogs
    (their ``load_table`` is the only portable way); the query returns None when the row is
    missing or has no location (``load_table`` then raises the catalog's own error).
    """
    try:
        from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
        from sqlalchemy import select
    except ImportError:  # the SQL catalog's dependencies are optional
        return None
    if not isinstance(cat, SqlCatalog):
        return None
    from pyiceberg.catalog import Catalog

    namespace = Catalog.namespace_to_string(Catalog.namespace_from(identifier))
    stmt = select(IcebergTables.metadata_location).where(
        IcebergTables.catalog_name == cat.name,
        IcebergTables.table_namespace == namespace,
        IcebergTables.table_name == Catalog.table_name_from(identifier),
    )
    # Rows of views share the table; the filter is None on catalogs of the old schema.
    type_filter = getattr(cat, "_iceberg_type_filter", lambda: None)()
    if type_filter is not None:
        stmt = stmt.where(type_filter)

    def query() -> str | None:
        with cat.engine.connect() as conn:  # Core, not an ORM session: a third of the cost
            return conn.execute(stmt).scalar()

    return query
