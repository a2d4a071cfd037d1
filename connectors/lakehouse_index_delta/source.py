"""DeltaSource: the Delta Lake implementation of the connector contract.

It composes the parts of the connector: :mod:`~lakehouse_index_delta.log` (listings and
commit files of ``_delta_log``), :mod:`~lakehouse_index_delta.replay` (the live state of a
version, from a checkpoint or a cached state plus commits),
:mod:`~lakehouse_index_delta.timestamps` (when each version was committed),
:mod:`~lakehouse_index_delta.schema` (columns and typed partition values) and
:mod:`~lakehouse_index_delta.entries` (the contract's entries, changes and diffs).

Tailing
-------
``changes(after, upto)`` reads only the commit files after ``after`` (by name; the log
is listed only to tell "no new commit" from "cleaned up" or a gap) and keeps the live
state it reached, so a watcher polling with the last version it saw does O(new
commits) work. Parsed commits, snapshot states and DV files are cached (bounded LRUs).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any, ClassVar

from pyroaring import BitMap64

from lakehouse_index.source import (
    Change,
    Diff,
    FileEntry,
    FileIO,
    NotATableError,
    SizedCache,
    Snapshot,
    TableFormatError,
    TableSource,
    VersionInfo,
    VersionNotFoundError,
)
from lakehouse_index_delta.actions import Actions, Metadata, Protocol, add_record
from lakehouse_index_delta.deletion_vectors import DeletionVectorDescriptor, read_deletion_vector
from lakehouse_index_delta.domains import domain_configuration
from lakehouse_index_delta.entries import commit_change, diff_files, row_id_column, snapshot_files
from lakehouse_index_delta.log import DeltaLog
from lakehouse_index_delta.paths import canonical_root
from lakehouse_index_delta.replay import Replay, State
from lakehouse_index_delta.schema import Schemas
from lakehouse_index_delta.timestamps import VersionTimes


class DeltaSource(TableSource):
    """A Delta Lake table read from its ``_delta_log`` (no JVM, no delta-rs).

    Row ids: when row tracking is enabled (``delta.enableRowTracking``), every
    :class:`FileEntry` carries ``first_row_id`` (the add action's ``baseRowId``) and
    :attr:`Snapshot.row_id_column` names the column through which row ids are exposed:
    the materialized column named by ``delta.rowTracking.materializedRowIdColumnName``
    (a physical column of the data files, absent from the logical schema) or ``_row_id``
    when none is configured. The stable row id of the row at position ``i`` of a file is
    the materialized column's value when the file has that column and the value is not
    null, else ``first_row_id + i`` (Delta protocol, "Row Tracking").

    Timestamps are in-commit timestamps where enabled, else monotonic commit file times
    (:mod:`~lakehouse_index_delta.timestamps`). The log is trusted to grow only by new
    commits: when a listing shows it was replaced (the table deleted and created again at
    the same location) everything cached is dropped; versions the latest listing can no
    longer rebuild (cleaned up) are refused, as a fresh source does
    (:mod:`~lakehouse_index_delta.log`).
    """

    format_name: ClassVar[str] = "delta"

    #: A tailer re-lists ``_delta_log`` at most this often when probing finds no new commit.
    LISTING_MAX_AGE_S = 10.0

    def __init__(self, uri: str, io: FileIO) -> None:
        self._uri = canonical_root(uri)
        self._io = io
        self._log = DeltaLog(io, self._uri, on_replaced=self._forget_built)
        self._replay = Replay(self._log)
        self._times = VersionTimes(self._log)
        self._forget_built()

    def forget(self) -> None:
        """Drop every cached read of the log (after its history was rewritten, e.g. purged)."""
        self._log.forget()
        self._forget_built()

    def _forget_built(self) -> None:
        """Drop what was built from the log: states, snapshots, schemas and DV files."""
        self._replay.forget()
        # Bounded caches (sizes: CacheConfig.delta_*).
        self._snapshots: SizedCache[int, Snapshot] = SizedCache("delta_state_entries")
        self._schemas = Schemas(self._log.uri)
        self._dv_cache: SizedCache[str, bytes] = SizedCache("delta_dv_bytes", getsizeof=len)

    # ------------------------------------------------------------------ opening

    @classmethod
    def detect(cls, uri: str, io: FileIO, **options: Any) -> bool:
        """True when ``<uri>/_delta_log`` exists."""
        try:
            return io.exists(canonical_root(uri) + "/_delta_log")
        except (OSError, ValueError):
            return False

    @classmethod
    def open(cls, uri: str, io: FileIO, **options: Any) -> DeltaSource:
        """Open the table and check that its latest protocol is readable."""
        src = cls(uri, io)
        listing = src._log.relist()
        if listing.latest_version is None:
            raise NotATableError(f"{src._log.uri} holds no Delta commit or checkpoint")
        src._replay.state_at(listing.latest_version)  # validates protocol, schema, log continuity
        return src

    @property
    def uri(self) -> str:
        """``file:///abs/path`` for local tables, the table URI otherwise."""
        return self._uri

    @property
    def io(self) -> FileIO:
        """Storage access for data files and DVs."""
        return self._io

    # ------------------------------------------------------------------ snapshots

    def snapshot(self, version: int | None = None) -> Snapshot:
        """The live files, schema and row-id column at ``version`` (latest when None)."""
        v = self.latest_version() if version is None else version
        self._log.check_not_cleaned_up(v)
        snap = self._snapshots.get(v)
        if snap is not None:
            return snap
        snap = self._build_snapshot(self._replay.state_at(v))
        self._snapshots[v] = snap
        return snap

    def _build_snapshot(self, state: State) -> Snapshot:
        assert state.metadata is not None
        schema = self._schemas.of(state.metadata)
        files = snapshot_files(state.files, schema, f"{self._log.uri} at version {state.version}")
        return Snapshot(
            version=state.version,
            ordinal=state.version,
            timestamp_ms=self._times.timestamp(state.version, None, state.metadata),
            columns=schema.columns,
            files=files,
            partition_columns=schema.partition_columns,
            row_id_column=row_id_column(state.metadata),
        )

    def latest_version(self) -> int:
        """The newest version: sees commits by other engines.

        With a listing younger than LISTING_MAX_AGE_S, only the next commits are probed
        (one read of an absent object when nothing is new: lookups call this every time);
        otherwise ``_delta_log`` is listed again.
        """
        return self._log.latest_version(self.LISTING_MAX_AGE_S)

    # ------------------------------------------------------------------ versions & time

    def versions(self) -> list[VersionInfo]:
        """Every version that can still be read, oldest first."""
        self._log.relist()
        metadata = self._replay.latest_metadata()
        return [
            VersionInfo(v, v, self._times.timestamp(v, None, metadata), v - 1 if v > 0 else None)
            for v in self._log.readable()
        ]

    def version_info(self, version: int) -> VersionInfo:
        """Ordinal (= version), timestamp and parent of ``version``."""
        if version < 0:
            raise VersionNotFoundError(f"version {version} does not exist")
        self._log.check_not_cleaned_up(version)
        timestamp_ms = self._times.timestamp(version, None, self._replay.latest_metadata())
        return VersionInfo(version, version, timestamp_ms, version - 1 if version > 0 else None)

    def version_at(self, timestamp_ms: int) -> int:
        """The latest version committed at or before ``timestamp_ms`` (:meth:`VersionTimes.version_at`)."""
        listing = self._log.relist()
        readable = self._log.readable()
        metadata = self._replay.latest_metadata() if readable else None
        return self._times.version_at(timestamp_ms, listing, readable, metadata)

    # ------------------------------------------------------------------ changes & diffs

    def changes(self, after: int | None, upto: int | None = None) -> Iterator[Change]:
        """One Change per commit in (after, upto]; reads only the commit files after ``after``.

        With ``upto=None`` it reads commits after ``after`` until the next one does not
        exist yet. Raises HistoryTruncatedError when commits after ``after`` were
        cleaned up (resync from ``snapshot()``), TableFormatError on a gap.
        """
        start = -1 if after is None else after
        if upto is not None and upto < start:
            raise VersionNotFoundError(f"changes: upto {upto} is before after {after}")
        return self._changes(start, upto)

    def _changes(self, start: int, upto: int | None) -> Iterator[Change]:
        state = self._replay.start_state(start)
        v = start + 1
        while upto is None or v <= upto:
            actions = self._log.read_commit(v)
            if actions is None:
                if upto is None and not self._log.may_exist_later(v, start, self.LISTING_MAX_AGE_S):
                    return  # commit v is not written yet
                err = self._log.missing_commit(v)
                if upto is None and type(err) is VersionNotFoundError:
                    return  # the fresh listing confirms: no newer commit yet
                raise err
            if state.version != v - 1:
                # Another iterator advanced the shared tail state: rebuild ours.
                state = self._replay.state_at(v - 1).copy()
            change = self._apply(state, v, actions)
            self._replay.tail = state
            yield change
            v += 1

    def _apply(self, state: State, version: int, actions: Actions) -> Change:
        """Advance ``state`` by one commit and describe what the commit changed."""
        before = state.metadata
        removed, added = self._replay.advance(state, version, actions)
        assert state.metadata is not None
        after_schema = self._schemas.of(state.metadata)
        before_schema = self._schemas.of(before) if before is not None else after_schema
        timestamp_ms = self._times.timestamp(version, actions, state.metadata)
        return commit_change(version, actions, removed, added, before_schema, after_schema, timestamp_ms)

    def diff(self, a: int, b: int) -> Diff:
        """Live-state difference from ``a`` to ``b`` (either direction).

        Compares the two live states' logical file keys and builds entries only for the files
        that differ. Backward, the state at ``b`` is the state at ``a`` with the commits
        (b, a] undone when that reads less than rebuilding it (:meth:`Replay.undo`).
        """
        sa = self._replay.state_at(a)
        sb = self._replay.undo(sa, b) if b < a and self._replay.undo_reads_less(a, b) else None
        if sb is None:
            sb = self._replay.state_at(b)
        if sa.metadata is None or sb.metadata is None:
            raise TableFormatError(f"{self._log.uri}: no metaData at version {a} or {b}")
        schema_a, schema_b = self._schemas.of(sa.metadata), self._schemas.of(sb.metadata)
        return diff_files(a, b, sa.files, sb.files, schema_a, schema_b)

    # ------------------------------------------------------------------ for writers

    def table_id(self, version: int) -> str:
        """The table's id at ``version`` (its ``metaData`` action's): a table deleted and created
        again at the same location gets a new one."""
        state = self._replay.state_at(version)
        assert state.metadata is not None
        return state.metadata.id

    def protocol_and_metadata(self, version: int) -> tuple[Protocol, Metadata]:
        """The ``protocol`` and ``metaData`` actions in force at ``version``."""
        state = self._replay.state_at(version)
        assert state.protocol is not None and state.metadata is not None
        return state.protocol, state.metadata

    def domain_metadata(self, version: int, domain: str) -> str | None:
        """The configuration of ``domain`` at ``version`` (read from the log on demand)."""
        self._replay.state_at(version)  # the version exists and its log is readable
        return domain_configuration(self._io, self._log.listing(), version, domain)

    def file_records(self, version: int, paths: Collection[str]) -> dict[str, dict[str, Any]]:
        """The ``add`` action of each live file of ``paths`` at ``version``, as a new commit repeats it."""
        live = self._replay.state_at(version).files.live_adds(set(paths))
        return {a.path: add_record(a, self._uri) for a in live}

    # ------------------------------------------------------------------ deletion vectors

    def deleted_positions(self, entry: FileEntry) -> BitMap64:
        """Row positions deleted by the entry's deletion vector (empty when it has none)."""
        d = entry.deletes
        if d is None:
            return BitMap64()
        if not isinstance(d, DeletionVectorDescriptor):
            raise TypeError(f"{entry.path}: deletes {d!r} do not come from a Delta table")
        return read_deletion_vector(d, self._io, self._dv_cache)
