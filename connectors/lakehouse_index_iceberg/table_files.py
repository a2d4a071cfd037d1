"""The files below an Iceberg metadata file, as a source reads them: manifest lists,
manifests and delete files.

They are immutable and named by path, so each is parsed once and cached (bounded:
CacheConfig.iceberg_manifest_entries) and shared between snapshots. The number of files
read is counted (the benchmark and tests report it).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyiceberg.table.snapshots import Snapshot as IcebergSnapshot

from lakehouse_index.source import FileIO, SizedCache, UnsupportedFeatureError
from lakehouse_index_iceberg.deletes import DeleteReader
from lakehouse_index_iceberg.manifests import (
    ContentFile,
    ManifestEntry,
    ManifestFile,
    read_manifest,
    read_manifest_list,
    read_manifests,
)

#: Manifests a snapshot's replay reads together (``FileIO.read_many``; concurrently on an object store).
PREFETCH = 64


class TableFiles:
    """Manifest lists, manifests and delete files read through one :class:`FileIO` (cached)."""

    def __init__(self, io: FileIO, reads: dict[str, int]) -> None:
        """``reads`` counts the ``manifest_list`` and ``manifest`` files read."""
        self.io = io
        self._reads = reads
        self.forget()

    def forget(self) -> None:
        """Drop every file read."""
        self._manifest_lists: SizedCache[str, tuple[ManifestFile, ...]]
        self._manifests: SizedCache[tuple[str, int | None], tuple[ManifestEntry, ...]]
        self._manifest_lists = SizedCache("iceberg_manifest_entries")
        self._manifests = SizedCache("iceberg_manifest_entries")
        #: Position-delete files and deletion vectors read (cached by the reader).
        self.reader = DeleteReader(self.io)
        #: The equality-delete files of the states built, by canonical path.
        self.equality_files: dict[str, ContentFile] = {}

    def serve(self, io: FileIO) -> None:
        """Read through ``io`` from now on (the table's metadata moved to another store)."""
        self.io, self.reader = io, DeleteReader(io)

    def manifest_list(self, snap: IcebergSnapshot) -> tuple[ManifestFile, ...]:
        """The manifests ``snap`` lists."""
        path = snap.manifest_list
        if not path:
            raise UnsupportedFeatureError(
                f"snapshot {snap.snapshot_id} lists manifests inline (v1 'manifests' field); not supported"
            )
        hit = self._manifest_lists.get(path)
        if hit is None:
            self._reads["manifest_list"] += 1
            hit = read_manifest_list(self.io, path)
            self._manifest_lists[path] = hit
        return hit

    def manifest(self, m: ManifestFile) -> tuple[ManifestEntry, ...]:
        """Every entry of manifest ``m``."""
        # Keyed by the list row's first_row_id too: the entries inherit it, and a manifest
        # written before an upgrade to v3 gets one only in the lists written after it.
        key = (m.path, m.first_row_id)
        hit = self._manifests.get(key)
        if hit is None:
            self._reads["manifest"] += 1
            hit = read_manifest(self.io, m)
            self._manifests[key] = hit
        return hit

    def prefetch(self, manifests: Sequence[ManifestFile]) -> None:
        """Read the manifests not cached yet together (up to ``PREFETCH`` per ``read_many``),
        into the cache: on an object store a snapshot of many manifests then waits a round
        trip per batch, not one per manifest."""
        keyed = {(m.path, m.first_row_id): m for m in manifests}
        missing = [m for key, m in keyed.items() if key not in self._manifests]
        if len(missing) < 2:
            return
        for at in range(0, len(missing), PREFETCH):
            part = missing[at : at + PREFETCH]
            for m, hit in zip(part, read_manifests(self.io, part), strict=True):
                self._reads["manifest"] += 1
                self._manifests[(m.path, m.first_row_id)] = hit
