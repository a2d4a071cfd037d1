"""Purge (GDPR erase step 4): after the erase's commit, remove every older trace of the data.

* :func:`purge_blockers`: the table's retention settings that forbid a purge (the caller
  refuses unless ``force``); raises ``UnsupportedFeatureError`` for tables no purge can
  handle safely, whatever ``force`` says.
* :func:`purge_history`: only the kept version stays readable; every older commit,
  checkpoint, snapshot, manifest, metadata file and unreferenced data/delete/change-data
  file is removed (:mod:`.purge_delta`, :mod:`.purge_iceberg`). A record under
  ``<index_root>/_erasure/purges/`` makes time travel to a purged version raise
  ``VersionPurgedError`` (:mod:`.purge_record`).
* :func:`purge_indexes`: every index rewritten without removed data (full optimize: no
  tombstones, no removed files), its log cut to the newest stable entry and every
  unreferenced index data file deleted, regardless of retention.

Every step can be killed and rerun; the purge assumes no other writer meanwhile (like a
VACUUM with zero retention). Example::

    reasons = purge_blockers(t)                     # [] or sentences naming each setting
    purge_history(t, keep_version=t.latest_version(), force=bool(reasons))
    purge_indexes(t)
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from lakehouse_index.errors import PurgeRefusedError
from lakehouse_index.io import join_uri
from lakehouse_index.log.entry import IndexState
from lakehouse_index.workflows import sync
from lakehouse_index.workflows.erasure import purge_delta, purge_iceberg
from lakehouse_index.workflows.erasure.history import HistoryPurge, pause_point
from lakehouse_index.workflows.facade import IndexedTable

__all__ = ["HistoryPurge", "IndexPurge", "IndexPurged", "purge_blockers", "purge_history", "purge_indexes"]


def _format(table: IndexedTable) -> ModuleType:
    return purge_iceberg if table.format == "iceberg" else purge_delta


def purge_blockers(table: IndexedTable) -> list[str]:
    """Reasons, one sentence each naming the setting, why the table's retention forbids a purge.

    Delta: ``delta.logRetentionDuration`` / ``delta.deletedFileRetentionDuration`` set on the
    table. Iceberg: ``history.expire.min-snapshots-to-keep`` > 1,
    ``history.expire.max-snapshot-age-ms`` set, tags and branches other than ``main``.
    Raises ``UnsupportedFeatureError`` (never overridable) for Delta tables with V2
    checkpoints the installed deltalake cannot checkpoint or whose latest checkpoint uses
    sidecars (:func:`.purge_delta.check_supported`) and Iceberg tables of format v1 or v3,
    and ``ReadOnlyTableError`` for an Iceberg table opened by path.
    """
    fmt = _format(table)
    fmt.check_supported(table)
    return list(fmt.blockers(table))


def purge_history(
    table: IndexedTable, *, keep_version: int, dry_run: bool = False, force: bool = False
) -> HistoryPurge:
    """Make ``keep_version`` (the table's latest version) the only readable one; remove every older trace.

    Refused with ``PurgeRefusedError`` when :func:`purge_blockers` names a reason and
    ``force`` is False, or when ``keep_version`` is not the latest version. ``dry_run``
    reports what would be removed and changes nothing. For Iceberg the readable version
    afterwards is a ``replace`` snapshot on top of ``keep_version`` with the same rows
    (``HistoryPurge.kept_version``). Rerunning after a crash completes the purge.
    """
    reasons = purge_blockers(table)
    if reasons and not force:
        raise PurgeRefusedError(
            f"{table.uri}: purge refused, nothing changed: "
            + "; ".join(reasons)
            + ". Pass force=True to purge anyway"
        )
    if table.format == "delta" and keep_version != table.latest_version():
        raise PurgeRefusedError(
            f"{table.uri}: version {keep_version} is not the latest ({table.latest_version()}); "
            "a purge keeps only the latest version"
        )
    try:
        return _format(table).purge(table, keep_version, dry_run)
    finally:
        if not dry_run:
            table.source.forget()  # this process must not answer from what it cached of purged versions


@dataclass(frozen=True)
class IndexPurged:
    """What :func:`purge_indexes` did to one index."""

    name: str
    #: The index's state afterwards: ACTIVE, or DOES_NOT_EXIST for a soft-deleted index
    #: (its data could hold removed rows: it is vacuumed away).
    state: IndexState
    #: Log entries removed (every one but the newest stable entry).
    log_entries_expired: tuple[int, ...]
    #: Index data files removed (URIs).
    files_removed: tuple[str, ...]
    #: Index data files written (the rewritten index: URIs).
    files_written: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The JSON form (camelCase keys)."""
        return {
            "name": self.name,
            "state": self.state.value,
            "logEntriesExpired": list(self.log_entries_expired),
            "filesRemoved": list(self.files_removed),
            "filesWritten": list(self.files_written),
        }


@dataclass(frozen=True)
class IndexPurge:
    """The result of :func:`purge_indexes`: one report per index."""

    indexes: tuple[IndexPurged, ...]

    def to_json(self) -> dict[str, Any]:
        """The JSON form (camelCase keys), as the erase's audit record stores it."""
        return {
            "indexes": [i.to_json() for i in self.indexes],
            "filesWritten": [f for i in self.indexes for f in i.files_written],
            "filesRemoved": [f for i in self.indexes for f in i.files_removed],
        }


def purge_indexes(table: IndexedTable) -> IndexPurge:
    """Rewrite every index of the table so nothing of removed data remains, and drop its history.

    For each index: an operation left in progress by a dead process of this host (a killed
    purge) is cancelled (a live one makes the index's operations raise ``IndexBusyError``); an ACTIVE
    index is refreshed to the latest version (nothing to do when the caller already did),
    optimized ``full`` (a new base of the live entries: no DEL entries, tombstones, moved
    or removed files; covering and skipping files rewritten) and vacuumed with zero
    retention; a DELETED index is vacuumed away. Then every log entry but the newest
    stable one is expired and no data file outside it remains.
    """
    out = []
    for info in table.indexes():
        log = table._log(info.name)
        index_dir = join_uri(table.index_root, info.name)
        before = {s.path for s in table.storage.list_tree(join_uri(index_dir, "data"))}
        sync.cancel_if_dead(table, log, info.name)  # left by a killed purge; a live operation is not
        stable = log.latest_stable()
        assert stable is not None
        if stable.state is IndexState.ACTIVE:
            table.refresh_index(info.name)
            table.optimize_index(info.name, "full")
            pause_point("index-optimized")
        table.vacuum_index(info.name, retention_hours=0)
        newest = log.latest_stable()
        assert newest is not None
        expired = log.expire([e.id for e in log.entries()], min_retention_s=0)
        after = {s.path for s in table.storage.list_tree(join_uri(index_dir, "data"))}
        out.append(
            IndexPurged(
                info.name,
                newest.state,
                tuple(expired),
                tuple(sorted(before - after)),
                tuple(sorted(after - before)),
            )
        )
    return IndexPurge(tuple(out))
