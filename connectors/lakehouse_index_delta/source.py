"""DeltaSource: the Delta Lake implementation of the connector contract.

How a version is read
---------------------
``snapshot(v)`` starts from the best *base* at or below ``v`` (a snapshot state already
in memory, the tailer's state, or the newest complete checkpoint with version <= v,
never a newer one) and replays the commits after it, using a log compaction file when
one covers a run of commits that is not cached. Replay follows the protocol's action
reconciliation: logical files are keyed by (path, deletion-vector unique id) and the
newest reference wins.

Tailing
-------
``changes(after, upto)`` reads only the commit files after ``after`` (by name; the log
is listed only to tell "no new commit" from "cleaned up" or a gap) and keeps the live
state it reached, so a watcher polling with the last version it saw does O(new
commits) work. Parsed commits, snapshot states and DV files are cached (bounded LRUs).
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from lakehouse_index.source import (
    Change,
    DeleteChange,
    Diff,
    FileEntry,
    FileIO,
    HistoryTruncatedError,
    NotATableError,
    SizedCache,
    Snapshot,
    TableFormatError,
    TableSource,
    VersionInfo,
    VersionNotFoundError,
    relative_log_path,
)
from lakehouse_index_delta.actions import Actions, AddFile, Metadata, Protocol, parse_json_lines
from lakehouse_index_delta.checkpoints import read_checkpoint
from lakehouse_index_delta.deletion_vectors import (
    DeletionVectorDescriptor,
    descriptor_json,
    read_deletion_vector,
)
from lakehouse_index_delta.domains import domain_configuration
from lakehouse_index_delta.features import check_protocol
from lakehouse_index_delta.live_files import LiveFiles, PartitionRaw, SnapshotFiles
from lakehouse_index_delta.log_files import Checkpoint, LogListing, list_log
from lakehouse_index_delta.paths import canonical_root
from lakehouse_index_delta.schema import TableSchema, table_schema

#: Name under which row ids are exposed when row tracking is on but no materialized
#: column is configured (see :attr:`Snapshot.row_id_column` and DeltaSource docs).
DEFAULT_ROW_ID_COLUMN = "_row_id"

_Key = tuple[str, str | None]

#: Commit files a replay reads together (``FileIO.read_many``; concurrently on an object store).
_PREFETCH = 64


@dataclass
class _State:
    """The live state after ``version`` (mutable while being built; frozen once cached)."""

    version: int
    protocol: Protocol | None
    metadata: Metadata | None
    files: LiveFiles = field(default_factory=LiveFiles)

    def copy(self) -> _State:
        return _State(self.version, self.protocol, self.metadata, self.files.copy())


def _check_file_actions(actions: Actions, source: str) -> None:
    """Reject commits the protocol calls invalid because their outcome depends on action order.

    Actions in a commit are unordered, so a path may appear at most once among the adds
    and once among the removes, and an add and a remove of one path must name different
    deletion vectors.
    """
    for kind, files in (("add", actions.adds), ("remove", actions.removes)):
        paths = [f.path for f in files]
        if len(paths) != len(set(paths)):
            dup = next(p for p in paths if paths.count(p) > 1)
            raise TableFormatError(f"{source}: invalid commit, {dup} appears in two {kind} actions")
    if actions.adds and actions.removes:
        both = {a.key for a in actions.adds} & {r.key for r in actions.removes}
        if both:
            path, dv = next(iter(both))
            raise TableFormatError(
                f"{source}: invalid commit, {path} is added and removed with the same deletion vector ({dv})"
            )


def _positions_not_in(keys: pa.Array, others: pa.Array) -> list[int]:
    """Positions of ``keys`` whose value is not among ``others``."""
    return list(pc.indices_nonzero(pc.invert(pc.is_in(keys, value_set=others))).to_pylist())


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

    Timestamps: with in-commit timestamps enabled (``delta.enableInCommitTimestamps``),
    versions from ``delta.inCommitTimestampEnablementVersion`` on (all versions when the
    table was created with it) use ``commitInfo.inCommitTimestamp``; other versions use
    the commit file's modification time, made monotonic as Delta's reference implementation
    does (Spark's ``DeltaHistoryManager``): a version's time is the later of its file's
    modification time and one millisecond after the previous version's time, so clock skew
    between writers (or a log copied file by file) cannot put a version before an older one.

    The log is trusted to grow only by new commits: a listing in which a commit file seen
    before has another size or modification time, or which ends before the newest commit
    seen, means the log was replaced (the table deleted and created again at the same
    location), and everything cached is dropped. Versions below the oldest one the latest
    listing can still rebuild (the log was cleaned up) are refused, as a fresh source does.
    """

    format_name: ClassVar[str] = "delta"

    #: A tailer re-lists ``_delta_log`` at most this often when probing finds no new commit.
    LISTING_MAX_AGE_S = 10.0

    def __init__(self, uri: str, io: FileIO) -> None:
        self._uri = canonical_root(uri)
        self._log = self._uri + "/_delta_log"
        self._io = io
        self.forget()

    def forget(self) -> None:
        """Drop every cached read of the log (after its history was rewritten, e.g. purged)."""
        self._listing: LogListing | None = None
        self._listed_at = 0.0
        self._probed_latest = -1  # newest commit seen by probing since the last listing
        # Bounded caches (sizes: CacheConfig.delta_*): parsed commits, snapshot states,
        # built snapshots, DV files.
        self._commits: SizedCache[int, Actions] = SizedCache("delta_commit_entries")
        self._commit_mtime: dict[int, int] = {}
        # Per listing: the versions it can rebuild, and their monotonic file-time timestamps.
        self._readable_versions: list[int] | None = None
        self._file_times: dict[int, int] | None = None
        self._states: SizedCache[int, _State] = SizedCache("delta_state_entries")
        self._snapshots: SizedCache[int, Snapshot] = SizedCache("delta_state_entries")
        self._tail: _State | None = None
        self._schemas: dict[Metadata, TableSchema] = {}
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
        listing = src._list()
        if listing.latest_version is None:
            raise NotATableError(f"{src._log} holds no Delta commit or checkpoint")
        src._state_at(listing.latest_version)  # validates protocol, schema, log continuity
        return src

    @property
    def uri(self) -> str:
        """``file:///abs/path`` for local tables, the table URI otherwise."""
        return self._uri

    @property
    def io(self) -> FileIO:
        """Storage access for data files and DVs."""
        return self._io

    # ------------------------------------------------------------------ log files

    def _list(self) -> LogListing:
        listing = list_log(self._io, self._log)
        if self._replaced(listing):
            self.forget()
        self._listing = listing
        self._listed_at = time.monotonic()
        self._probed_latest = -1
        self._readable_versions = None
        self._file_times = None
        for v, st in listing.commits.items():
            self._commit_mtime[v] = st.mtime_ms
        return listing

    def _replaced(self, listing: LogListing) -> bool:
        """Whether ``listing`` shows another log than the previous listing did.

        Commit files are never rewritten or removed newest first, so a commit file listed
        before with another size or modification time, or a log ending before the newest
        commit seen, means the table was deleted and created again at the same location.
        Compares two listings: no request of its own.
        """
        before = self._listing
        if before is None:
            return False
        seen = max(before.latest_version if before.latest_version is not None else -1, self._probed_latest)
        if listing.latest_version is None or listing.latest_version < seen:
            return True
        for v, st in listing.commits.items():
            old = before.commits.get(v)
            if old is not None and (old.size != st.size or old.mtime_ms != st.mtime_ms):
                return True
        return False

    def _readable_now(self) -> list[int]:
        """The versions the latest listing can rebuild (see :meth:`_readable`), oldest first."""
        if self._readable_versions is None:
            listing = self._listing if self._listing is not None else self._list()
            self._readable_versions = self._readable(listing)
        return self._readable_versions

    def _check_not_cleaned_up(self, version: int) -> None:
        """HistoryTruncatedError when the latest listing shows ``version`` was cleaned up.

        What was cached of it is not served: a freshly opened source could not read it.
        Uses the listing at hand (no request).
        """
        if self._listing is None:
            return
        readable = self._readable_now()
        if readable and version < readable[0]:
            raise HistoryTruncatedError(
                f"version {version} was cleaned up from {self._log}; resync from version {readable[0]}, "
                "the oldest readable one"
            )

    def _commit_uri(self, version: int) -> str:
        return f"{self._log}/{version:020d}.json"

    def _read_commit(self, version: int) -> Actions | None:
        """Parsed commit ``version`` (cached), or None when its file does not exist."""
        cached = self._commits.get(version)
        if cached is not None:
            return cached
        uri = self._commit_uri(version)
        try:
            data = self._io.read_bytes(uri)
        except FileNotFoundError:
            return None
        actions = parse_json_lines(data, self._uri, uri)
        self._commits[version] = actions
        return actions

    def _missing_commit(self, version: int) -> Exception:
        """The error for a commit file that is not there, decided from a fresh listing."""
        listing = self._list()
        latest = listing.latest_version
        if latest is None or version > latest:
            return VersionNotFoundError(f"version {version} does not exist (latest is {latest})")
        later_cp = [c.version for c in listing.checkpoints if c.version >= version]
        earliest_commit = min(listing.commits) if listing.commits else None
        if earliest_commit is None or version < earliest_commit:
            return HistoryTruncatedError(
                f"commit {self._commit_uri(version)} was cleaned up"
                + (f"; resync from the checkpoint at version {later_cp[0]}" if later_cp else "")
            )
        return TableFormatError(
            f"gap in the Delta log: {self._commit_uri(version)} is missing but later commits exist"
        )

    # ------------------------------------------------------------------ replay

    def _schema(self, metadata: Metadata) -> TableSchema:
        s = self._schemas.get(metadata)
        if s is None:
            s = table_schema(
                metadata.schema_string,
                metadata.partition_columns,
                metadata.config,
                f"{self._log} (table {metadata.id})",
            )
            self._schemas[metadata] = s
        return s

    def _advance_metadata(self, state: _State, version: int, actions: Actions, source: str | None) -> None:
        """Check one commit (or a compaction file, given as ``source``) and take its protocol and metadata.

        The file actions are applied by the caller (:meth:`LiveFiles.apply`).
        """
        is_commit = source is None
        source = source or self._commit_uri(version)
        if actions.protocol is not None:
            check_protocol(actions.protocol, source)
        if is_commit:  # compaction files legitimately hold several tombstones of one path
            _check_file_actions(actions, source)
        if actions.protocol is not None:
            state.protocol = actions.protocol
        if actions.metadata is not None:
            state.metadata = actions.metadata
        state.version = version
        if state.protocol is None or state.metadata is None:
            raise TableFormatError(f"{source}: no protocol or metaData action at or before this commit")

    def _apply(self, state: _State, version: int, actions: Actions) -> Change:
        """Advance ``state`` by one commit and describe what the commit changed."""
        before_meta = state.metadata
        self._advance_metadata(state, version, actions, None)
        removed, added = state.files.apply([actions], report=True)
        assert state.metadata is not None
        after_schema = self._schema(state.metadata)
        before_schema = self._schema(before_meta) if before_meta is not None else after_schema
        removed_by_path = {gone.path: gone for gone in removed}
        delete_changes: list[DeleteChange] = []
        plain_added: list[FileEntry] = []
        for a in added:
            old = removed_by_path.pop(a.path, None)
            if old is None:
                plain_added.append(self._entry(a, after_schema))
            else:
                # Same data file, new deletion vector: a row-level change, not add + remove.
                delete_changes.append(
                    DeleteChange(self._entry(old, before_schema), self._entry(a, after_schema))
                )
        file_actions = list(actions.adds) + list(actions.removes)
        return Change(
            version=version,
            ordinal=version,
            timestamp_ms=self._timestamp(version, actions, state.metadata),
            added=tuple(plain_added),
            removed=tuple(self._entry(gone, before_schema) for gone in removed_by_path.values()),
            delete_changes=tuple(delete_changes),
            data_change=any(f.data_change for f in file_actions) if file_actions else True,
            operation=actions.operation,
            blind_append=actions.blind_append,
        )

    def _load_checkpoint(self, cp: Checkpoint) -> _State:
        protocol, metadata, files = read_checkpoint(self._io, cp, self._log, self._uri)
        check_protocol(protocol, cp.files[0].path)
        return _State(cp.version, protocol, metadata, files)

    def _cache_state(self, state: _State) -> None:
        self._states[state.version] = state

    def _state_at(self, version: int) -> _State:
        """The live state at ``version`` (cached; callers must copy before mutating)."""
        self._check_not_cleaned_up(version)
        cached = self._states.get(version)
        if cached is not None:
            return cached
        if self._tail is not None and self._tail.version == version:
            state = self._tail.copy()
            self._cache_state(state)
            return state
        listing = self._listing if self._listing is not None else self._list()
        if listing.latest_version is None or version > listing.latest_version:
            listing = self._list()
        if version < 0 or listing.latest_version is None or version > listing.latest_version:
            raise VersionNotFoundError(
                f"version {version} does not exist (latest is {listing.latest_version})"
            )
        base: _State | None = None
        for s in [*self._states.values(), self._tail]:
            if s is not None and s.version <= version and (base is None or s.version > base.version):
                base = s
        failed: set[Checkpoint] = set()
        while True:
            cp = listing.checkpoint_at_or_below(version, excluding=frozenset(failed))
            start_from_cp = cp is not None and (base is None or cp.version > base.version)
            if start_from_cp:
                assert cp is not None
                try:
                    state = self._load_checkpoint(cp)
                except TableFormatError:
                    # A corrupt checkpoint: an older one (or the commits) may still rebuild the version.
                    if self._can_replay(listing, version, exclude=failed | {cp}, base=base):
                        failed.add(cp)
                        continue
                    raise
            elif base is not None:
                state = base.copy()
            else:
                state = _State(-1, None, None)
            break
        self._replay(state, version, listing)
        if state.protocol is None:
            raise TableFormatError(f"{self._log}: version {version} has no protocol action")
        check_protocol(state.protocol, f"{self._log} at version {version}")
        self._cache_state(state)
        return state

    def _can_replay(
        self, listing: LogListing, version: int, exclude: set[Checkpoint], base: _State | None
    ) -> bool:
        cp = listing.checkpoint_at_or_below(version, excluding=frozenset(exclude))
        start = max(cp.version if cp else -1, base.version if base else -1)
        return all(v in listing.commits for v in range(start + 1, version + 1))

    def _replay(self, state: _State, version: int, listing: LogListing) -> None:
        """Advance ``state`` to ``version``: metadata commit by commit, file actions in one batch."""
        batch: list[Actions] = []
        self._replay_into(state, version, listing, batch)
        state.files.apply(batch, report=False)

    def _replay_into(self, state: _State, version: int, listing: LogListing, batch: list[Actions]) -> None:
        v = state.version + 1
        while v <= version:
            if v not in self._commits:
                comp = self._compaction(listing, v, version)
                if comp is not None:
                    actions = parse_json_lines(self._io.read_bytes(comp.file.path), self._uri, comp.file.path)
                    self._advance_metadata(state, comp.end, actions, comp.file.path)
                    batch.append(actions)
                    v = comp.end + 1
                    continue
            if v not in self._commits:
                self._prefetch_commits(listing, v, version)
            actions_or_none = self._read_commit(v)
            if actions_or_none is None:
                if state.version < 0 and v == 0:
                    incomplete = [i for i in listing.incomplete_checkpoints if i <= version]
                    hint = (
                        f" (incomplete multi-part checkpoints at versions {incomplete})" if incomplete else ""
                    )
                    raise VersionNotFoundError(
                        f"version {version} cannot be reconstructed: no complete checkpoint at or below it "
                        f"and {self._commit_uri(0)} is missing{hint}"
                    )
                raise self._missing_commit(v)
            self._advance_metadata(state, v, actions_or_none, None)
            batch.append(actions_or_none)
            v += 1

    def _prefetch_commits(self, listing: LogListing, start: int, upto: int) -> None:
        """Read the listed commits from ``start`` (up to ``_PREFETCH`` of them, not past ``upto``
        nor a compaction file's start) in one ``read_many``, into the commit cache: on an
        object store a replay then waits one round trip per batch, not one per commit."""
        compacted = {c.start for c in listing.compactions}
        wanted: list[int] = []
        v = start
        while v <= upto and len(wanted) < _PREFETCH and v in listing.commits and v not in self._commits:
            if v in compacted and v != start:
                break
            wanted.append(v)
            v += 1
        if len(wanted) < 2:
            return
        uris = [self._commit_uri(w) for w in wanted]
        for w, uri, data in zip(wanted, uris, self._io.read_many(uris), strict=True):
            if data is not None:
                self._commits[w] = parse_json_lines(data, self._uri, uri)

    @staticmethod
    def _compaction(listing: LogListing, start: int, upto: int) -> Any:
        """The compaction file starting at ``start`` that reaches furthest without passing ``upto``."""
        best = None
        for c in listing.compactions:
            if c.start == start and c.end <= upto and (best is None or c.end > best.end):
                best = c
        return best

    # ------------------------------------------------------------------ snapshots

    @staticmethod
    def _entry(
        a: AddFile, schema: TableSchema, typed: dict[PartitionRaw, tuple[tuple[str, Any], ...]] | None = None
    ) -> FileEntry:
        """The contract's entry for an add; ``typed`` caches typed partition values by raw ones."""
        pv: tuple[tuple[str, Any], ...] = ()
        if schema.partition_fields:
            known = typed.get(a.partition_values) if typed is not None else None
            pv = known if known is not None else schema.partition_values(a.partition_values, a.path)
            if typed is not None:
                typed[a.partition_values] = pv
        return FileEntry(
            a.path, a.size, a.modification_time, a.num_records, pv, a.deletion_vector, (), a.base_row_id
        )

    def _build_snapshot(self, state: _State) -> Snapshot:
        assert state.metadata is not None
        schema = self._schema(state.metadata)
        typed: dict[PartitionRaw, tuple[tuple[str, Any], ...]] = {}
        files = SnapshotFiles(state.files, partial(self._entry, schema=schema, typed=typed))
        dup = files.duplicate_path()
        if dup is not None:
            raise TableFormatError(f"{self._log} at version {state.version}: two live entries for {dup}")
        if schema.partition_fields:
            # Typed eagerly (a bad value fails here, not on first access); distinct values are few.
            for raw, path in state.files.distinct_partitions().items():
                typed[raw] = schema.partition_values(raw, path)
        config = state.metadata.config
        row_id_column = None
        if config.get("delta.enableRowTracking", "false").lower() == "true":
            row_id_column = (
                config.get("delta.rowTracking.materializedRowIdColumnName") or DEFAULT_ROW_ID_COLUMN
            )
        return Snapshot(
            version=state.version,
            ordinal=state.version,
            timestamp_ms=self._timestamp(state.version, None, state.metadata),
            columns=schema.columns,
            files=files,
            partition_columns=schema.partition_columns,
            row_id_column=row_id_column,
        )

    def snapshot(self, version: int | None = None) -> Snapshot:
        """The live files, schema and row-id column at ``version`` (latest when None)."""
        v = self.latest_version() if version is None else version
        self._check_not_cleaned_up(v)
        snap = self._snapshots.get(v)
        if snap is not None:
            return snap
        snap = self._build_snapshot(self._state_at(v))
        self._snapshots[v] = snap
        return snap

    def latest_version(self) -> int:
        """The newest version: sees commits by other engines.

        With a listing younger than LISTING_MAX_AGE_S, only the next commits are probed
        (one read of an absent object when nothing is new: lookups call this every time);
        otherwise ``_delta_log`` is listed again.
        """
        listing = self._listing
        if (
            listing is None
            or listing.latest_version is None
            or (time.monotonic() - self._listed_at > self.LISTING_MAX_AGE_S)
        ):
            listing = self._list()
        latest = listing.latest_version
        if latest is None:
            raise NotATableError(f"{self._log} holds no Delta commit or checkpoint")
        probed = max(latest, self._probed_latest)
        # The probe reads the next commit (kept: the new version's replay needs it): one
        # request when it is absent, where an existence check on an object store costs two
        # (a HEAD, then a listing to tell a missing object from a directory).
        while self._read_commit(probed + 1) is not None:
            probed += 1
        self._probed_latest = probed
        return probed

    # ------------------------------------------------------------------ versions & time

    def _ict_start(self, metadata: Metadata | None) -> int | None:
        """First version whose timestamp is its in-commit timestamp, or None."""
        if metadata is None:
            return None
        config = metadata.config
        if config.get("delta.enableInCommitTimestamps", "false").lower() != "true":
            return None
        return int(config.get("delta.inCommitTimestampEnablementVersion", "0"))

    def _timestamp(self, version: int, actions: Actions | None, metadata: Metadata | None) -> int:
        ict_from = self._ict_start(metadata)
        if ict_from is not None and version >= ict_from:
            if actions is None:
                actions = self._read_commit(version)
            if actions is not None and actions.in_commit_timestamp is not None:
                return actions.in_commit_timestamp
            raise TableFormatError(
                f"{self._commit_uri(version)}: in-commit timestamps are enabled but commitInfo has none"
            )
        return self._file_time(version)

    def _file_time(self, version: int) -> int:
        """The version's timestamp from file modification times, made monotonic.

        The later of the commit file's modification time and one millisecond after the
        previous version's timestamp, from the oldest version the latest listing can
        rebuild on (Spark's ``DeltaHistoryManager.monotonizeCommitTimestamps``; deltalake
        agrees where its binary search over raw times happens to). Versions the listing
        covers cost nothing; a newer one found by probing costs a ``stat`` per version.
        """
        times = self._file_times
        if times is None:
            listing = self._listing if self._listing is not None else self._list()
            times = {}
            previous: int | None = None
            checkpoint_times = {c.version: c.files[0].mtime_ms for c in listing.checkpoints}
            for v in self._readable_now():
                st = listing.commits.get(v)
                raw = st.mtime_ms if st is not None else checkpoint_times[v]
                previous = raw if previous is None else max(raw, previous + 1)
                times[v] = previous
            self._file_times = times
        found = times.get(version)
        if found is not None:
            return found
        last = next(reversed(times), None)
        end = self._listing.latest_version if self._listing is not None else None
        if last is None or end is None or version <= end or last < end:
            # Not on a chain of readable versions (below the oldest, or after a gap).
            return self._raw_mtime(version)
        previous = times[last]
        for v in range(last + 1, version + 1):
            previous = max(self._raw_mtime(v), previous + 1)
            times[v] = previous
        return previous

    def _raw_mtime(self, version: int) -> int:
        """The commit file's modification time (a checkpoint's when only that is left)."""
        mtime = self._commit_mtime.get(version)
        if mtime is None:
            mtime = self._stat_mtime(self._commit_uri(version))
            if mtime is None:
                listing = self._listing or self._list()
                cps = [c for c in listing.checkpoints if c.version == version]
                if not cps:
                    raise self._missing_commit(version)
                mtime = cps[0].files[0].mtime_ms
            self._commit_mtime[version] = mtime
        return mtime

    def _stat_mtime(self, uri: str) -> int | None:
        try:
            return self._io.stat(uri).mtime_ms
        except FileNotFoundError:
            return None

    def _latest_metadata(self) -> Metadata | None:
        listing = self._listing or self._list()
        latest = listing.latest_version
        if latest is None:
            return None
        if self._tail is not None and self._tail.version == latest:
            return self._tail.metadata
        return self._state_at(latest).metadata

    def versions(self) -> list[VersionInfo]:
        """Every version that can still be read, oldest first."""
        self._list()
        metadata = self._latest_metadata()
        return [
            VersionInfo(v, v, self._timestamp(v, None, metadata), v - 1 if v > 0 else None)
            for v in self._readable_now()
        ]

    @staticmethod
    def _readable(listing: LogListing) -> list[int]:
        """Versions that can be rebuilt: a complete checkpoint, or a commit on top of a readable one."""
        latest = listing.latest_version
        if latest is None:
            return []
        cps = {c.version for c in listing.checkpoints}
        lowest = min([*listing.commits, *cps])
        out = []
        previous = False
        for v in range(lowest, latest + 1):
            readable = v in cps or (v in listing.commits and (v == 0 or previous))
            if readable:
                out.append(v)
            previous = readable
        return out

    def version_info(self, version: int) -> VersionInfo:
        """Ordinal (= version), timestamp and parent of ``version``."""
        if version < 0:
            raise VersionNotFoundError(f"version {version} does not exist")
        self._check_not_cleaned_up(version)
        metadata = self._latest_metadata()
        return VersionInfo(
            version, version, self._timestamp(version, None, metadata), version - 1 if version > 0 else None
        )

    def version_at(self, timestamp_ms: int) -> int:
        """The latest version committed at or before ``timestamp_ms``.

        Timestamps are those of :meth:`version_info` (monotonic), so this is a binary search
        over one listing: file times cost nothing, and with in-commit timestamps only
        O(log n) commit files are read. With in-commit timestamps enabled after the table was
        created, a time at or after ``delta.inCommitTimestampEnablementTimestamp`` is looked
        for among the versions from ``delta.inCommitTimestampEnablementVersion`` on, an older
        one among the versions before it (the Delta protocol's rule).
        """
        listing = self._list()
        readable = self._readable_now()
        metadata = self._latest_metadata() if readable else None
        ict_from = self._ict_start(metadata)
        by_file = [v for v in readable if ict_from is None or v < ict_from]
        # An in-commit timestamp is in the commit file: a version left only as a checkpoint has none.
        by_ict = [v for v in readable if ict_from is not None and v >= ict_from and v in listing.commits]
        if by_ict and (not by_file or timestamp_ms >= self._ict_enabled_at(metadata, by_ict[0])):
            candidates = by_ict
            i = bisect_right(by_ict, timestamp_ms, key=lambda v: self._timestamp(v, None, metadata))
        else:
            candidates = by_file
            i = bisect_right(by_file, timestamp_ms, key=self._file_time)
        if i == 0:
            raise VersionNotFoundError(f"no version was committed at or before {timestamp_ms} ms")
        return candidates[i - 1]

    def _ict_enabled_at(self, metadata: Metadata | None, first_ict_version: int) -> int:
        """When in-commit timestamps were enabled: the table property, else the first one's ICT."""
        raw = metadata.config.get("delta.inCommitTimestampEnablementTimestamp") if metadata else None
        try:
            return int(raw) if raw is not None else self._timestamp(first_ict_version, None, metadata)
        except ValueError:
            return self._timestamp(first_ict_version, None, metadata)

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
        state = self._start_state(start)
        v = start + 1
        while upto is None or v <= upto:
            actions = self._read_commit(v)
            if actions is None:
                if upto is None and not self._may_exist_later(v, start):
                    return  # commit v is not written yet
                err = self._missing_commit(v)
                if upto is None and type(err) is VersionNotFoundError:
                    return  # the fresh listing confirms: no newer commit yet
                raise err
            if state.version != v - 1:
                # Another iterator advanced the shared tail state: rebuild ours.
                state = self._state_at(v - 1).copy()
            change = self._apply(state, v, actions)
            self._tail = state
            yield change
            v += 1

    def _may_exist_later(self, v: int, start: int) -> bool:
        """Whether a missing commit ``v`` might be a gap or cleaned up rather than not yet written.

        Answered without listing the log when possible, so an idle poll costs one probe:
        a listing that already shows a newer version means a gap or cleanup; a listing
        older than LISTING_MAX_AGE_S is refreshed (bounding how long a gap can go
        unnoticed); otherwise commit v-1 being present (just read, or checked) means v
        is simply not written yet, since cleanup deletes commits oldest first.
        """
        listing = self._listing
        if listing is None or time.monotonic() - self._listed_at > self.LISTING_MAX_AGE_S:
            return True
        if listing.latest_version is not None and listing.latest_version >= v:
            return True
        if v - 1 > start:
            return False
        return v == 0 or not self._io.exists(self._commit_uri(v - 1))

    def _start_state(self, start: int) -> _State:
        if self._tail is not None and self._tail.version == start:
            return self._tail
        if start == -1:
            return _State(-1, None, None)
        if start in self._states:
            return self._states[start].copy()
        return self._state_at(start).copy()

    def diff(self, a: int, b: int) -> Diff:
        """Live-state difference from ``a`` to ``b`` (either direction).

        Compares the two live states' logical file keys as Arrow columns and builds
        entries only for the files that differ.
        """
        sa = self._state_at(a)
        sb = self._undo(sa, b) if b < a and self._undo_reads_less(a, b) else None
        if sb is None:
            sb = self._state_at(b)
        if sa.metadata is None or sb.metadata is None:
            raise TableFormatError(f"{self._log}: no metaData at version {a} or {b}")
        schema_a, schema_b = self._schema(sa.metadata), self._schema(sb.metadata)
        keys_a, rows_a = sa.files.key_strings()
        keys_b, rows_b = sb.files.key_strings()
        only_b = sb.files.files_at(_positions_not_in(keys_b, keys_a), rows_b)
        only_a = sa.files.files_at(_positions_not_in(keys_a, keys_b), rows_a)
        a_by_path = {f.path: f for f in only_a}
        added, changed = [], []
        for f in only_b:
            before = a_by_path.pop(f.path, None)
            if before is None:
                added.append(self._entry(f, schema_b))
            else:
                changed.append(DeleteChange(self._entry(before, schema_a), self._entry(f, schema_b)))
        removed = tuple(self._entry(f, schema_a) for f in a_by_path.values())
        return Diff(a, b, tuple(added), removed, tuple(changed))

    def _undo_reads_less(self, a: int, b: int) -> bool:
        """Whether undoing the commits (b, a] reads fewer bytes than rebuilding ``b`` forward.

        Forward: from the newest checkpoint or cached state at or below ``b``. Cached
        commits cost nothing; sizes come from the listing.
        """
        if b in self._states:
            return False
        listing = self._listing if self._listing is not None else self._list()

        def commits(first: int, last: int) -> int:
            return sum(
                listing.commits[v].size
                for v in range(first, last + 1)
                if v not in self._commits and v in listing.commits
            )

        forward = [commits(0, b)]
        cp = listing.checkpoint_at_or_below(b)
        if cp is not None:
            forward.append(sum(f.size for f in cp.files) + commits(cp.version + 1, b))
        forward += [commits(st.version + 1, b) for st in self._states.values() if st.version <= b]
        return commits(b + 1, a) < min(forward)

    def _undo(self, newer: _State, b: int) -> _State | None:
        """The state at ``b`` from the newer state, by taking back the adds of the commits after ``b``.

        None (rebuild forward instead) when the commits cannot be undone exactly: one is
        missing or changes the protocol or metadata; a file live at ``b`` was removed (a
        ``remove`` lacks the add's modification time and statistics); or a
        ``dataChange=false`` add may have replaced a live file (whose add is not at hand).
        Every other add of a logical file not seen before in (b, newer] is a data-changing
        add, which makes a file live that was not.
        """
        first_is_add: dict[_Key, bool] = {}
        for v in range(b + 1, newer.version + 1):
            actions = self._read_commit(v)
            if actions is None or actions.metadata is not None or actions.protocol is not None:
                return None
            for r in actions.removes:
                first_is_add.setdefault(r.key, False)
            for add in actions.adds:
                if add.key not in first_is_add:
                    if not add.data_change:
                        return None
                    first_is_add[add.key] = True
        if not all(first_is_add.values()):
            return None
        state = _State(b, newer.protocol, newer.metadata, newer.files.copy())
        state.files.discard(first_is_add)
        self._cache_state(state)
        return state

    def table_id(self, version: int) -> str:
        """The table's id at ``version`` (its ``metaData`` action's): a table deleted and created
        again at the same location gets a new one."""
        state = self._state_at(version)
        assert state.metadata is not None
        return state.metadata.id

    def domain_metadata(self, version: int, domain: str) -> str | None:
        """The configuration of ``domain`` at ``version`` (read from the log on demand)."""
        self._state_at(version)  # the version exists and its log is readable
        listing = self._listing if self._listing is not None else self._list()
        return domain_configuration(self._io, listing, version, domain)

    def file_records(self, version: int, paths: Collection[str]) -> dict[str, dict[str, Any]]:
        """The ``add`` action of each live file of ``paths`` at ``version``, as a new commit repeats it."""
        out: dict[str, dict[str, Any]] = {}
        for a in self._state_at(version).files.live_adds(set(paths)):
            rec: dict[str, Any] = {
                "path": relative_log_path(self._uri, a.path),
                "partitionValues": dict(a.partition_values),
                "size": a.size,
                "modificationTime": a.modification_time,
                "dataChange": a.data_change,
            }
            if a.deletion_vector is not None:
                rec["deletionVector"] = descriptor_json(a.deletion_vector)
            if a.base_row_id is not None:
                rec["baseRowId"] = a.base_row_id
            if a.default_row_commit_version is not None:
                rec["defaultRowCommitVersion"] = a.default_row_commit_version
            if a.num_records is not None:
                rec["numRecords"] = a.num_records
            out[a.path] = rec
        return out

    # ------------------------------------------------------------------ deletion vectors

    def deleted_positions(self, entry: FileEntry) -> BitMap64:
        """Row positions deleted by the entry's deletion vector (empty when it has none)."""
        d = entry.deletes
        if d is None:
            return BitMap64()
        if not isinstance(d, DeletionVectorDescriptor):
            raise TypeError(f"{entry.path}: deletes {d!r} do not come from a Delta table")
        return read_deletion_vector(d, self._io, self._dv_cache)
