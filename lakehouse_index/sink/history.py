"""What a purge of table history removes (:class:`HistoryPurge`), and its crash-test pause points.

Every format writer's purge (``TableWriter.purge_history``) lists the files it removes
here, by category, so a dry run and a real run report the same thing.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from lakehouse_index.faults import crash_point
from lakehouse_index.io import Storage
from lakehouse_index.source import FileStatus

#: Set to ``"<step>:<marker file>"`` to make a purge write the marker file and sleep when it
#: reaches ``<step>`` (the crash tests kill -9 the process there). Steps: see :data:`STEPS`.
PAUSE_ENV = "LAKEHOUSE_INDEX_PURGE_PAUSE"

#: Every pause point, in the order a purge reaches them.
STEPS = {
    "delta": (
        "recorded",
        "checkpointed",
        "tombstones-dropped",
        "log-half-removed",
        "log-removed",
        "commit-scrubbed",
        "files-half-removed",
    ),
    "iceberg": ("recorded", "replaced", "indexes-refreshed", "expired", "files-half-removed"),
    "indexes": ("index-optimized",),
}


def pause_point(step: str) -> None:
    """Stop here forever if :data:`PAUSE_ENV` names ``step`` (after writing its marker file).

    Also the crash point ``purge.<step>`` (:func:`lakehouse_index.faults.crash_point`).
    """
    crash_point(f"purge.{step}")
    spec = os.environ.get(PAUSE_ENV)
    if not spec:
        return
    wanted, _, marker = spec.partition(":")
    if wanted != step:
        return
    with open(marker, "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(60)


def outside_purge(rel: str) -> bool:
    """Whether a path relative to the table root is left alone: a top-level name starting
    with ``_`` or ``.`` other than ``_change_data`` (``_delta_log``, ``_lakehouse_index``,
    other tools' folders and marker files) and everything below it."""
    top = rel.split("/", 1)[0]
    return top[:1] in ("_", ".") and top != "_change_data"


def remove_files(storage: Storage, root: str, index_root: str, files: list[str]) -> None:
    """Delete ``files`` (pause point ``files-half-removed`` half-way), then every directory
    below ``root`` that holds no file, outside the index root and the folders left alone (a
    partition directory's name holds a value; a killed run may have emptied some already)."""
    for i, path in enumerate(files):
        storage.delete(path)
        if i == len(files) // 2:
            pause_point("files-half-removed")
    fs, base = storage.arrow(root)
    base = base.rstrip("/")
    skip = storage.arrow(index_root)[1].rstrip("/") + "/"
    infos = fs.get_file_info(pafs.FileSelector(base, allow_not_found=True, recursive=True))
    holding = set()  # directories with a file somewhere below
    for info in infos:
        if info.type == pafs.FileType.File:
            parent = info.path.rsplit("/", 1)[0]
            while parent.startswith(base + "/") and parent not in holding:
                holding.add(parent)
                parent = parent.rsplit("/", 1)[0]
    empty = [
        info.path
        for info in infos
        if info.type == pafs.FileType.Directory
        and info.path not in holding
        and not (info.path + "/").startswith(skip)
        and not outside_purge(info.path[len(base) + 1 :])
    ]
    for path in sorted(empty, key=len):  # outermost first: delete_dir takes the empty ones below
        if fs.get_file_info(path).type == pafs.FileType.Directory:
            fs.delete_dir(path)


@dataclass(frozen=True)
class RemovedFiles:
    """Files a purge removes (or would remove, in a dry run), by category; full URIs."""

    #: Data files no longer referenced by the kept version.
    data: tuple[str, ...] = ()
    #: Delta deletion-vector files; Iceberg position-delete files and Puffin deletion vectors.
    deletes: tuple[str, ...] = ()
    #: Delta ``_change_data/`` files (change data feed).
    change_data: tuple[str, ...] = ()
    #: Delta ``_delta_log`` commits, checkpoints, checksums and compactions of older versions.
    log: tuple[str, ...] = ()
    #: Iceberg manifests.
    manifests: tuple[str, ...] = ()
    #: Iceberg manifest lists.
    manifest_lists: tuple[str, ...] = ()
    #: Iceberg ``*.metadata.json`` files other than the current one.
    metadata: tuple[str, ...] = ()
    #: Total size of the files above.
    bytes: int = 0

    def all(self) -> tuple[str, ...]:
        """Every removed file."""
        return (
            self.data
            + self.deletes
            + self.change_data
            + self.log
            + self.manifests
            + self.manifest_lists
            + self.metadata
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON form (camelCase keys): file **counts** per category and bytes. No paths: a
        removed file's path can spell a subject's partition value, and this form goes into
        the erase's audit record."""
        return {
            "data": len(self.data),
            "deletes": len(self.deletes),
            "changeData": len(self.change_data),
            "log": len(self.log),
            "manifests": len(self.manifests),
            "manifestLists": len(self.manifest_lists),
            "metadata": len(self.metadata),
            "bytes": self.bytes,
        }

    @staticmethod
    def of(files: list[tuple[str, FileStatus]]) -> RemovedFiles:
        """From ``(category, file)`` pairs; the category is a field name."""
        groups: dict[str, list[str]] = {}
        for category, status in files:
            groups.setdefault(category, []).append(status.path)
        return RemovedFiles(
            **{k: tuple(sorted(v)) for k, v in groups.items()},
            bytes=sum(s.size for _, s in files),
        )


@dataclass(frozen=True)
class PurgedVersion:
    """One table version (Delta version, Iceberg snapshot id) a purge removes, with its commit time."""

    version: int
    timestamp_ms: int


@dataclass(frozen=True)
class HistoryPurge:
    """The result of :func:`~lakehouse_index.workflows.erasure.purge.purge_history`."""

    format: str
    #: The version the caller asked to keep (the erase's commit).
    keep_version: int
    #: The only readable version afterwards: ``keep_version`` for Delta; for Iceberg the
    #: ``replace`` snapshot committed on top of it (same rows, manifests without removed entries).
    kept_version: int
    #: Versions (Delta) or snapshot ids (Iceberg) no longer readable, oldest first.
    purged: tuple[PurgedVersion, ...]
    #: Iceberg tags and branches removed (they pointed at purged snapshots).
    refs_removed: tuple[str, ...]
    removed: RemovedFiles
    dry_run: bool
    #: The purge record under ``<index_root>/_erasure/purges/`` (None in a dry run).
    record: str | None = field(default=None)

    @property
    def versions_purged(self) -> tuple[int, ...]:
        """The purged versions / snapshot ids."""
        return tuple(p.version for p in self.purged)

    def to_json(self) -> dict[str, Any]:
        """The JSON form (camelCase keys), as the erase's audit record stores it."""
        return {
            "format": self.format,
            "keepVersion": self.keep_version,
            "keptVersion": self.kept_version,
            "versionsPurged": [{"version": p.version, "timestampMs": p.timestamp_ms} for p in self.purged],
            "refsRemoved": list(self.refs_removed),
            "removed": self.removed.to_json(),
            "dryRun": self.dry_run,
            "record": self.record,
        }
