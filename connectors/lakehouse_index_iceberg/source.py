"""IcebergSource: the connector contract over Iceberg table metadata, manifests and deletes.

It composes the parts of the connector: :mod:`~lakehouse_index_iceberg.catalog` (where the
current metadata file is), :mod:`~lakehouse_index_iceberg.table_metadata` (its snapshots,
lineage, refs and ordinals), :mod:`~lakehouse_index_iceberg.table_files` (manifest lists,
manifests and delete files, cached), :mod:`~lakehouse_index_iceberg.states` (the live
files of a snapshot, and what one commit changed), :mod:`~lakehouse_index_iceberg.diff`
(two snapshots compared by their unshared manifests) and
:mod:`~lakehouse_index_iceberg.schema` (columns and partition values).

Versions are snapshot ids. A tailer whose position is no longer an ancestor of the
target (rollback, a snapshot on another branch) or whose snapshots expired gets
HistoryTruncatedError and must resync from :meth:`IcebergSource.snapshot`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyiceberg.table.snapshots import Snapshot as IcebergSnapshot
from pyroaring import BitMap64

from lakehouse_index.source import (
    Change,
    Column,
    Diff,
    EqualityDeletes,
    FileEntry,
    FileIO,
    HistoryTruncatedError,
    NotATableError,
    SizedCache,
    Snapshot,
    TableSource,
    UnsupportedFeatureError,
    VersionInfo,
    VersionNotFoundError,
)
from lakehouse_index_iceberg.catalog import catalog_locator, catalog_table, path_locator, table_uri
from lakehouse_index_iceberg.deletes import IcebergRowDeletes, normalize_path, read_equality_delete_rows
from lakehouse_index_iceberg.diff import unshared_diff
from lakehouse_index_iceberg.schema import ROW_ID_COLUMN, columns, name_mapping, partition_columns
from lakehouse_index_iceberg.states import LiveStates, row_lineage
from lakehouse_index_iceberg.table_files import TableFiles
from lakehouse_index_iceberg.table_metadata import History, MetadataLocator, has_metadata, read_history


class IcebergSource(TableSource):
    """An Iceberg table (format v1, v2 or v3), opened by path or through a pyiceberg catalog."""

    format_name = "iceberg"

    def __init__(self, io: FileIO, locator: MetadataLocator, name: str) -> None:
        self._locator = locator
        self._name = name
        self._catalog_ref: tuple[Any, str] | None = None
        #: Counts of metadata files read (manifest lists, manifests): the benchmark reports them.
        self.reads = {"metadata": 0, "manifest_list": 0, "manifest": 0}
        self._files = TableFiles(io, self.reads)
        self._states = LiveStates(self._files, self._hist)
        self.forget()

    def forget(self) -> None:
        """Drop every cached read of the metadata (after its history was rewritten, e.g. purged)."""
        self._history: History | None = None
        self._files.forget()
        self._states.forget()
        # Built snapshots per (snapshot id, metadata file), bounded by CacheConfig.iceberg_state_entries:
        # a lookup gets the same object back until the next commit, so what the core caches per
        # snapshot stays warm.
        self._snapshots: SizedCache[tuple[int, str], Snapshot] = SizedCache("iceberg_state_entries")

    # ------------------------------------------------------------------ opening

    @classmethod
    def detect(cls, uri: str, io: FileIO, **options: Any) -> bool:
        """True when a catalog is given, or ``<uri>/metadata`` holds a metadata JSON file."""
        if options.get("catalog") is not None:
            return True
        return has_metadata(io, table_uri(uri))

    @classmethod
    def open(cls, uri: str, io: FileIO, **options: Any) -> IcebergSource:
        """Open by catalog (``uri`` is ``"db.table"``, ``catalog`` a name or Catalog) or by path."""
        catalog = options.get("catalog")
        if catalog is not None:
            locator = catalog_locator(catalog, uri)
        else:
            root = table_uri(uri)
            if not has_metadata(io, root):
                raise NotATableError(f"{uri} is not an Iceberg table: no metadata/*.metadata.json")
            locator = path_locator(io, root)
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
        return catalog_table(*self._catalog_ref)

    def _refresh(self) -> History:
        location = self._locator()
        io = self._files.io.serving(location)  # a catalog's table may live on another store
        if io is not self._files.io:
            self._files.serve(io)
        if self._history is None or self._history.location != location:
            self.reads["metadata"] += 1
            self._history = read_history(self._files.io, location)
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
        return self._files.io

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

    def versions(self) -> list[VersionInfo]:
        """Main-branch lineage oldest first, then every other snapshot by ordinal."""
        h = self._refresh()
        return [h.version_info(s) for s in h.lineage()]

    def version_info(self, version: int) -> VersionInfo:
        """Ordinal, timestamp and parent of a snapshot."""
        s = self._snap(version)
        return self._hist().version_info(s)

    def version_at(self, timestamp_ms: int) -> int:
        """The main branch's snapshot at ``timestamp_ms``, from the snapshot log."""
        sid = self._refresh().main_at(timestamp_ms)
        if sid is None:
            raise VersionNotFoundError(
                f"Iceberg table {self._name} has no snapshot at or before {timestamp_ms}"
            )
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
        sid = h.resolve(ref)
        if sid is None:
            names = sorted(h.metadata.refs)
            raise VersionNotFoundError(
                f"Iceberg table {self._name} has no branch or tag {ref!r} (refs: {names})"
            )
        return sid

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
        state = self._states.state(snap)
        schema = h.schema_for(snap)
        return Snapshot(
            version=v,
            ordinal=h.ordinals()[v],
            timestamp_ms=snap.timestamp_ms,
            columns=columns(schema, name_mapping(h.metadata.properties)),
            files=dict(state.files),
            partition_columns=partition_columns(h.metadata.spec(), schema),
            row_id_column=ROW_ID_COLUMN if row_lineage(h, snap) else None,
        )

    # ------------------------------------------------------------------ tailing and diffs

    def changes(self, after: int | None, upto: int | None = None) -> Iterator[Change]:
        """One Change per snapshot on the lineage of ``upto`` (main head) after ``after``."""
        h = self._refresh()
        target = h.main_head if upto is None else upto
        if target is None:
            return iter(())
        self._snap(target)
        chain = self._hist().chain(after, target)
        if after is None and chain:
            # Expiry may clear the parent id of the oldest retained snapshot (pyiceberg does):
            # a true first commit lists only manifests it wrote itself.
            root = chain[0]
            if any(m.added_snapshot_id != root.snapshot_id for m in self._files.manifest_list(root)):
                raise HistoryTruncatedError(
                    f"history before snapshot {root.snapshot_id} has expired: resync from a snapshot"
                )
        return self._states.walk(after, chain)

    def diff(self, a: int, b: int) -> Diff:
        """Live-state difference from snapshot ``a`` to ``b``, reading only what is not shared.

        Any two snapshots: ancestors, two branches, across a rollback
        (:func:`~lakehouse_index_iceberg.diff.unshared_diff`).
        """
        snap_a, snap_b = self._snap(a), self._snap(b)
        return unshared_diff(self._hist(), snap_a, snap_b, self._files, self._states)

    # ------------------------------------------------------------------ row-level deletes

    def deleted_positions(self, entry: FileEntry) -> BitMap64:
        """Positions deleted by the entry's position-delete files or deletion vector."""
        if entry.deletes is None:
            return BitMap64()
        if not isinstance(entry.deletes, IcebergRowDeletes):
            raise UnsupportedFeatureError(f"not an Iceberg delete descriptor: {entry.deletes!r}")
        return self._files.reader.positions(entry.deletes)

    def equality_delete_rows(self, deletes: EqualityDeletes, columns: Sequence[Column]) -> pa.Table:
        """Rows of an equality-delete file, columns matched by field id, logical names."""
        f = self._files.equality_files.get(deletes.path)
        if f is None:
            raise VersionNotFoundError(f"unknown equality-delete file {deletes.path}: load a snapshot first")
        return read_equality_delete_rows(self._files.io, f.path, f.equality_ids, columns)
