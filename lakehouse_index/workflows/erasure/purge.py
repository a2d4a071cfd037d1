"""Purge (GDPR erase step 4): after the erase's commit, remove every older trace of the data.

* :func:`purge_blockers`: the table's retention settings that forbid a purge (the caller
  refuses unless ``force``); raises ``UnsupportedFeatureError`` for tables no purge can
  handle safely, whatever ``force`` says.
* :func:`purge_history`: only the kept version stays readable; every older commit,
  checkpoint, snapshot, manifest, metadata file and unreferenced data/delete/change-data
  file is removed (the format writer's ``purge_history``). A record under
  ``<index_root>/_erasure/purges/`` makes time travel to a purged version raise
  ``VersionPurgedError`` (:mod:`lakehouse_index.sink.purge_record`).
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
from typing import Any

from lakehouse_index.actions.optimize_index import optimize_index, purge_index
from lakehouse_index.actions.refresh_index import refresh_index
from lakehouse_index.actions.vacuum_index import vacuum_index
from lakehouse_index.context import IndexContext
from lakehouse_index.errors import PurgeRefusedError
from lakehouse_index.io import join_uri
from lakehouse_index.log.entry import IndexState
from lakehouse_index.sink.contract import TableWriter, open_writer
from lakehouse_index.sink.history import HistoryPurge, pause_point
from lakehouse_index.workflows import sync

__all__ = ["HistoryPurge", "IndexPurge", "IndexPurged", "purge_blockers", "purge_history", "purge_indexes"]


def _writer(ctx: IndexContext) -> TableWriter:
    return open_writer(ctx.source, ctx.storage, ctx.index_root)


def purge_blockers(ctx: IndexContext) -> list[str]:
    """Reasons, one sentence each naming the setting, why the table's retention forbids a purge.

    Delta: ``delta.logRetentionDuration`` / ``delta.deletedFileRetentionDuration`` set on the
    table. Iceberg: ``history.expire.min-snapshots-to-keep`` > 1,
    ``history.expire.max-snapshot-age-ms`` set, tags and branches other than ``main``.
    Raises ``UnsupportedFeatureError`` (never overridable) for Delta tables with V2
    checkpoints the installed deltalake cannot checkpoint or whose latest checkpoint uses
    sidecars and Iceberg tables of format v1 or v3, and ``ReadOnlyTableError`` for an Iceberg
    table opened by path (each format's writer: ``TableWriter.purge_blockers``).
    """
    return _writer(ctx).purge_blockers()


def purge_history(
    ctx: IndexContext, *, keep_version: int, dry_run: bool = False, force: bool = False
) -> HistoryPurge:
    """Make ``keep_version`` (the table's latest version) the only readable one; remove every older trace.

    Refused with ``PurgeRefusedError`` when :func:`purge_blockers` names a reason and
    ``force`` is False, or when ``keep_version`` is not the latest version. ``dry_run``
    reports what would be removed and changes nothing. For Iceberg the readable version
    afterwards is a ``replace`` snapshot on top of ``keep_version`` with the same rows
    (``HistoryPurge.kept_version``). Rerunning after a crash completes the purge.
    """
    writer = _writer(ctx)
    reasons = writer.purge_blockers()
    if reasons and not force:
        raise PurgeRefusedError(
            f"{ctx.uri}: purge refused, nothing changed: "
            + "; ".join(reasons)
            + ". Pass force=True to purge anyway"
        )
    try:
        refresh = lambda: _refresh_active(ctx)  # noqa: E731 - the format's purge calls it mid-way
        return writer.purge_history(keep_version, dry_run=dry_run, refresh_indexes=refresh)
    finally:
        if not dry_run:
            ctx.source.forget()  # this process must not answer from what it cached of purged versions


def _refresh_active(ctx: IndexContext) -> None:
    """Every active index onto the latest version (a purge's own commit: no data change)."""
    for info in ctx.indexes():
        if info.state is IndexState.ACTIVE:
            refresh_index(ctx, info.name)


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


def purge_indexes(ctx: IndexContext, *, targeted: bool = False) -> IndexPurge:
    """Rewrite every index of the table so nothing of removed data remains, and drop its history.

    For each index: an operation left in progress by a dead process of this host (a killed
    purge) is cancelled (a live one makes the index's operations raise ``IndexBusyError``); an ACTIVE
    index is refreshed to the latest version (nothing to do when the caller already did),
    then rewritten: ``targeted``, only the index files holding an entry of a row no longer live
    (``purge_index``: the erase has removed every file physically holding a subject, so every
    entry of a subject's row is such an entry); else ``optimize full`` (a new base of the live
    entries: no DEL entries, tombstones, moved or removed files; covering and skipping files
    rewritten). Then it is
    vacuumed with zero retention; a DELETED index is vacuumed away. Then every log entry but the
    newest stable one is expired and no data file outside it remains.
    """
    out = []
    for info in ctx.indexes():
        log = ctx.log(info.name)
        index_dir = ctx.index_dir(info.name)
        before = {s.path for s in ctx.storage.list_tree(join_uri(index_dir, "data"))}
        sync.cancel_if_dead(ctx, log, info.name)  # left by a killed purge; a live operation is not
        stable = log.latest_stable()
        assert stable is not None
        if stable.state is IndexState.ACTIVE:
            refresh_index(ctx, info.name)
            if targeted:
                purge_index(ctx, info.name)
            else:
                optimize_index(ctx, info.name, "full")
            pause_point("index-optimized")
        vacuum_index(ctx, info.name, retention_hours=0)
        newest = log.latest_stable()
        assert newest is not None
        expired = log.expire([e.id for e in log.entries()], min_retention_s=0)
        after = {s.path for s in ctx.storage.list_tree(join_uri(index_dir, "data"))}
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
