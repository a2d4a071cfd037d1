"""The public facade: :func:`open_table` and :class:`Table`.

Example::

    import lakehouse_index as li

    t = li.open_table("/data/events")                       # Delta or Iceberg, auto-detected
    t.create_index(li.SecondaryIndex("by_email", key="email", record_key="id"))
    t.lookup("by_email", ["ada@example.com"])               # pyarrow.Table, no JVM
    t.locate("by_email", ["ada@example.com"])               # key, record key, _file, _row
    # (no record key declared: key, _row_id (stable row id, where the table has them), _file, _row)

Control-plane calls (opening, listing, lookups, explain) never start a JVM; building and
refreshing indexes and :meth:`Table.read` run on Spark (local by default).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from lakehouse_index import expressions as expr
from lakehouse_index.config import Config, PlannerConfig
from lakehouse_index.errors import (
    IllegalIndexStateError,
    IndexNotFoundError,
    QueryError,
    VersionNotFoundError,
)
from lakehouse_index.executors import LocalExecutor, executor_for
from lakehouse_index.io import Storage, join_uri, normalize_uri
from lakehouse_index.io.parallel import shared_pool
from lakehouse_index.kinds.base import BuildContext, kind_of
from lakehouse_index.kinds.columns import require_same_columns
from lakehouse_index.log.entry import Content, IndexState, LogEntry, Operation, SourceState
from lakehouse_index.log.lifecycle import OpContext, OpResult, run_operation
from lakehouse_index.log.store import INDEX_DIR_NAME, IndexCatalog, IndexLog
from lakehouse_index.maintenance import refresh, vacuum
from lakehouse_index.maintenance.build import full_build
from lakehouse_index.maintenance.lineage import Rewritten
from lakehouse_index.query import lookup as lk
from lakehouse_index.query import planner
from lakehouse_index.query.coverage import plain_scan
from lakehouse_index.read.scan import scan_files, scan_snapshot
from lakehouse_index.registry import open_source
from lakehouse_index.source import FileEntry, Snapshot, TableSource
from lakehouse_index.spec import IndexSpec, validate_index_name
from lakehouse_index.workflows import sync, verify, writes
from lakehouse_index.workflows import watch as watcher
from lakehouse_index.workflows.erasure import audit as erasure_audit
from lakehouse_index.workflows.erasure import erase as erasure
from lakehouse_index.workflows.erasure import purge_record
from lakehouse_index.workflows.erasure.audit import AuditRecord
from lakehouse_index.workflows.erasure.erase import EraseResult
from lakehouse_index.workflows.reports import SyncResult, WriteResult
from lakehouse_index.workflows.verify import VerifyReport

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


_M = TypeVar("_M", bound=Enum)
_R = TypeVar("_R")


class RefreshMode(str, Enum):
    """How ``refresh_index`` brings an index up to date."""

    FULL = "full"
    INCREMENTAL = "incremental"
    QUICK = "quick"


class OptimizeMode(str, Enum):
    """How ``optimize_index`` compacts an index."""

    QUICK = "quick"
    FULL = "full"


def _mode(enum: type[_M], value: _M | str, what: str) -> _M:
    """``value`` as a member of ``enum`` (its string value is accepted); a clear error otherwise."""
    try:
        return enum(value)
    except ValueError:
        choices = tuple(m.value for m in enum)
        raise ValueError(f"{what} mode must be one of {choices}, got {value!r}") from None


Where = str | expr.Predicate | Any  # SQL text, a parsed predicate, or a pyarrow Expression


@dataclass(frozen=True)
class IndexInfo:
    """What ``Table.indexes()`` reports about one index."""

    name: str
    #: The kind's name (``"secondary"``, ``"covering"``, ``"skipping"``, or a plug-in's).
    kind: str
    state: IndexState
    indexed_version: int | None
    size_bytes: int
    rows: int
    files: int
    spec: IndexSpec
    log_entry: int


@dataclass(frozen=True)
class IndexStatus:
    """One index against the table's latest version: what :meth:`Table.index_status` reports."""

    info: IndexInfo
    #: The table's latest version.
    table_version: int
    #: Table commits after the indexed version (None while a first build has no data yet).
    lag: int | None
    #: The table version quick refreshes recorded changes up to, not yet applied to the index
    #: data (None: nothing pending).
    pending_version: int | None
    #: Data files those quick refreshes recorded: appended (scanned at query time), removed,
    #: or with new row-level deletes.
    pending_files: int


def open_table(
    uri: str,
    *,
    catalog: Any = None,
    storage_options: Mapping[str, str] | None = None,
    index_root: str | None = None,
    config: Config | None = None,
) -> Table:
    """Open a Delta or Iceberg table (format auto-detected through the installed connectors).

    ``catalog`` (Iceberg): a pyiceberg catalog name or object; ``uri`` is then a table
    identifier. ``index_root`` puts the side-car indexes elsewhere (for read-only tables);
    by default they live in ``<table>/_lakehouse_index/``. ``config``: tuning knobs
    (``docs/CONFIG.md``), the defaults otherwise.
    """
    source = open_source(uri, catalog=catalog, storage_options=storage_options)
    root = normalize_uri(index_root) if index_root else join_uri(source.uri, INDEX_DIR_NAME)
    return Table(source, Storage.for_uri(root, storage_options), root, config or Config())


class Table:
    """A table with its side-car indexes. Obtain one with :func:`open_table`."""

    def __init__(
        self, source: TableSource, storage: Storage, index_root: str, config: Config = Config()
    ) -> None:
        self.source = source
        self.storage = storage
        self.index_root = index_root
        #: Every tuning knob (``docs/CONFIG.md``); replace it to tune this table object.
        self.config = config
        self._catalog = IndexCatalog(storage, index_root, source.uri, config.log)
        self._logs: dict[str, IndexLog] = {}

    @property
    def planner_config(self) -> PlannerConfig:
        """The planner's section of :attr:`config` (assignable: ``t.planner_config = PlannerConfig(...)``)."""
        return self.config.planner

    @planner_config.setter
    def planner_config(self, value: PlannerConfig) -> None:
        self.config = self.config.replace(planner=value)

    def __repr__(self) -> str:
        return f"Table({self.source.uri!r}, format={self.format!r})"

    # ------------------------------------------------------------------ table

    @property
    def format(self) -> str:
        """``"delta"`` or ``"iceberg"`` (the connector's name)."""
        return self.source.format_name

    @property
    def uri(self) -> str:
        """The table root URI."""
        return self.source.uri

    def latest_version(self) -> int:
        """The newest table version (re-reads the table's log)."""
        return self.source.latest_version()

    def resolve_version(
        self, version_as_of: int | str | None = None, timestamp_as_of: dt.datetime | int | None = None
    ) -> int:
        """The table version a query at (``version_as_of`` | ``timestamp_as_of``) reads."""
        if version_as_of is not None and timestamp_as_of is not None:
            raise ValueError("give version_as_of or timestamp_as_of, not both")
        ts = _epoch_ms(timestamp_as_of) if timestamp_as_of is not None else None
        try:
            version = self.source.resolve_version(version_as_of) if ts is None else self.source.version_at(ts)
            if version_as_of is not None:
                self.source.version_info(version)  # a snapshot id is checked here, not on first read
        except VersionNotFoundError:
            # A version purged for erasure says so (never a wrong answer, never a bare "not found").
            purged = purge_record.purged_error(self.storage, self.index_root, version_as_of, ts)
            if purged is None:
                raise
            raise purged from None
        if version_as_of is not None or timestamp_as_of is not None:
            self._warn_if_erased_later(version)
        return version

    def _warn_if_erased_later(self, version: int) -> None:
        """ErasedSubjectsWarning when a later erase (without purge of this version) removed subjects."""
        records = self.erasures()
        if not records:
            return
        later = erasure_audit.erased_after(records, self.source.version_info(version).ordinal)
        if later:
            import warnings

            from lakehouse_index.errors import ErasedSubjectsWarning

            firsts = sorted(v for r in later for v in r.versions_created)
            warnings.warn(
                ErasedSubjectsWarning(
                    f"version {version} of {self.uri} still holds {sum(len(r.subjects) for r in later)} "
                    f"data subject(s) erased by version(s) {firsts}; erase with purge=True to remove them "
                    "from the history"
                ),
                stacklevel=3,
            )

    def snapshot(self, version_as_of: int | str | None = None, timestamp_as_of: Any = None) -> Snapshot:
        """The table state at a version (latest by default)."""
        return self.source.snapshot(self.resolve_version(version_as_of, timestamp_as_of))

    def scan(
        self,
        *,
        version_as_of: int | str | None = None,
        timestamp_as_of: dt.datetime | int | None = None,
        columns: Sequence[str] | None = None,
        where: Where | None = None,
        use_indexes: bool = True,
    ) -> pa.Table:
        """The rows of a table version matching ``where``, deletes applied (pyarrow, no JVM).

        With ``where``, the files read are narrowed by the cheapest index that applies (see
        :meth:`read` and :meth:`explain`); ``use_indexes=False`` reads every live file.
        """
        snap = self.snapshot(version_as_of, timestamp_as_of)
        files = (
            self._relisting(lambda: self._files_for(snap, where))
            if use_indexes and where is not None
            else None
        )
        if files is None:
            return scan_snapshot(self.source, snap, columns=columns, where=where)
        return scan_files(self.source, snap, files, columns=columns, where=where)

    def read(
        self,
        spark: SparkSession | None = None,
        *,
        version_as_of: int | str | None = None,
        timestamp_as_of: dt.datetime | int | None = None,
        where: Where | None = None,
        columns: Sequence[str] | None = None,
        use_indexes: bool = True,
    ) -> DataFrame:
        """A Spark DataFrame of a table version (data files read directly; deletes applied).

        With ``where``, the planner (:meth:`explain` with ``where=``) weighs every index: a
        secondary or covering index whose key ``where`` pins to a finite set of values
        (``=`` / ``IN``, under AND / OR) locates the files holding those keys, one whose
        columns hold every column of ``where`` (ranges, included columns) filters its rows,
        a skipping index prunes files by its statistics, or every live file is read,
        whichever is estimated cheapest; Spark re-checks the predicate. Works with no index.
        """
        from lakehouse_index.read.spark_read import spark_frame
        from lakehouse_index.spark import get_spark

        snap = self.snapshot(version_as_of, timestamp_as_of)
        files = (
            self._relisting(lambda: self._files_for(snap, where))
            if use_indexes and where is not None
            else None
        )
        return spark_frame(
            get_spark(spark),
            self.source,
            snap,
            files=files,
            columns=columns,
            where=where,
            config=self.config.read,
        )

    def _read_plan(self, snap: Snapshot, where: Where) -> planner.Plan:
        """The planner's choice among every active index (and a plain scan) for ``where`` at ``snap``."""
        predicate = expr.Predicate.of(where, snap.schema)
        assert predicate is not None
        indexes = [
            planner.IndexHandle(
                info.name,
                kind_of(info.spec),
                self._index_dir(info.name),
                tuple(self._log(info.name).active_snapshots()),
            )
            for info in self.indexes()
            if info.state is IndexState.ACTIVE
        ]
        text = where if isinstance(where, str) else str(where)
        return planner.plan_read(
            self.source, self.storage, f"read where {text}", indexes, snap, predicate, self.config
        )

    def _relisting(self, query: Callable[[], _R]) -> _R:
        """Run ``query``; if an index data file it needs is gone, relist the index logs and run it again.

        This process's view of a log is relisted only every ``relist_after_s``; meanwhile
        another process's zero-retention vacuum or erase purge may have expired the snapshot
        the view still ends at, and deleted its data. The full listing finds the newer entries.
        """
        try:
            return query()
        except FileNotFoundError:
            for log in self._logs.values():
                log.refresh(full=True)
            return query()

    def _files_for(self, snap: Snapshot, where: Where) -> list[FileEntry] | None:
        """The files the planner's choice of index says may hold rows matching ``where`` (None: all)."""
        files = self._read_plan(snap, where).chosen.files
        return None if files is None else list(files)

    # ------------------------------------------------------------------ index lifecycle

    def _log(self, name: str) -> IndexLog:
        validate_index_name(name)
        log = self._logs.get(name)
        if log is None:
            log = self._logs[name] = self._catalog.log(name)
        return log

    def _index_dir(self, name: str) -> str:
        return join_uri(self.index_root, name)

    def _build_context(
        self, log: IndexLog, data_dir: str, spark: SparkSession | None, local_max_rows: int | None
    ) -> BuildContext:
        """What a kind needs to write index data for one operation (the executors sized by config)."""
        from lakehouse_index.spark import get_spark

        cfg = self.config.executor
        if local_max_rows is not None:  # an explicit bound governs every part of the operation
            cfg = replace(cfg, local_max_rows=local_max_rows, local_max_entries=local_max_rows)
        return BuildContext(
            self.source,
            self.storage,
            log.index_dir,
            data_dir,
            cfg,
            executor_for=lambda rows: executor_for(rows, cfg, lambda: get_spark(spark)),
            compactor_for=lambda rows: executor_for(rows, cfg, lambda: get_spark(spark), compaction=True),
            local=LocalExecutor(cfg),
        )

    def create_index(
        self, spec: IndexSpec, *, spark: SparkSession | None = None, local_max_rows: int | None = None
    ) -> IndexInfo:
        """Create an index and build it from the latest table version.

        Work of at most ``local_max_rows`` rows (default ``config.executor.local_max_rows``,
        counted net of deleted rows) runs in this process with pyarrow, larger work on Spark
        (``spark``, or a local session); a skipping index is always built in process. The
        spec is checked against the table schema before anything is written.
        """
        log = self._log(spec.name)
        snap = self.source.snapshot(self.source.latest_version())
        kind_of(spec).validate(spec, snap)
        start = SourceState(self.format, self.uri, snap.version, snap.ordinal, snap.timestamp_ms)

        def body(ctx: OpContext) -> OpResult:
            build = self._build_context(log, ctx.data_uri, spark, local_max_rows)
            state, content = full_build(build, spec, snap, None)
            return OpResult(state, content)

        return self._info(run_operation(log, Operation.CREATE, body, spec=spec, source=start))

    def refresh_index(
        self,
        name: str,
        mode: RefreshMode | str = RefreshMode.INCREMENTAL,
        *,
        spark: SparkSession | None = None,
        remap: bool = True,
        local_max_rows: int | None = None,
        rewritten: Mapping[str, Rewritten] | None = None,
    ) -> IndexInfo:
        """Bring an index up to the latest table version.

        * ``full`` rebuilds from the latest snapshot;
        * ``incremental`` applies each commit since the indexed version, stamped with its
          own version, so every version in between stays exactly answerable; appended
          files are indexed (in process up to ``local_max_rows`` rows, else on Spark),
          row-level deletes without a JVM; files rewritten by copy-on-write commits are
          aligned with the files they replace and only their changed rows indexed (the
          lineage remap; ``remap=False`` indexes them whole); a caller that rewrote files
          itself may pass ``rewritten`` (added file path →
          :class:`~lakehouse_index.maintenance.lineage.Rewritten`: the old file and the
          positions its rows came from) and those files are placed
          without reading them (the GDPR erase does);
        * ``quick`` only records what changed (no index data written); queries repair
          the difference by hybrid scan.

        ``mode`` is a :class:`RefreshMode` or its value. A refresh with nothing to do writes nothing.
        """
        how = _mode(RefreshMode, mode, "refresh")
        log = self._log(name)
        target = self.source.snapshot(self.source.latest_version())

        def precheck(stable: LogEntry) -> bool:
            # Runs before anything is written: a spec the table no longer fits is refused here.
            kind = kind_of(stable.spec)
            kind.validate(stable.spec, target)
            if how is RefreshMode.QUICK and kind.tracks_column_identity:
                # An indexed column renamed over or added again: only a full refresh follows it.
                require_same_columns(stable.spec.name, stable.source.columns, target)
            pending = stable.pending if how is RefreshMode.QUICK else None
            indexed = pending.ordinal if pending else stable.source.ordinal
            # Another writer may have refreshed past the version read above: nothing to do then.
            return target.ordinal > indexed or (how is not RefreshMode.QUICK and stable.pending is not None)

        def body(ctx: OpContext) -> OpResult:
            stable = ctx.stable
            assert stable is not None
            if how is RefreshMode.QUICK:
                return OpResult(stable.source, stable.content, refresh.quick(self.source, stable, target))
            build = self._build_context(log, ctx.data_uri, spark, local_max_rows)
            if how is RefreshMode.INCREMENTAL:
                state, content = refresh.incremental(build, stable, target, remap=remap, rewritten=rewritten)
            else:
                state, content = full_build(build, stable.spec, target, stable.source)
            return OpResult(state, content)

        op = {
            RefreshMode.FULL: Operation.REFRESH_FULL,
            RefreshMode.INCREMENTAL: Operation.REFRESH_INCREMENTAL,
            RefreshMode.QUICK: Operation.REFRESH_QUICK,
        }[how]
        return self._info(run_operation(log, op, body, precheck=precheck))

    def optimize_index(
        self,
        name: str,
        mode: OptimizeMode | str = OptimizeMode.QUICK,
        *,
        spark: SparkSession | None = None,
        local_max_rows: int | None = None,
    ) -> IndexInfo:
        """Compact an index: ``quick`` merges delta files; ``full`` writes a new base without tombstones.

        Indexes of at most ``config.executor.local_max_entries`` entries (``local_max_rows``
        when given) are compacted in this process, larger ones on Spark. Older snapshots keep
        their data for time travel until ``vacuum_index``. ``mode`` is an :class:`OptimizeMode` or its value.
        """
        how = _mode(OptimizeMode, mode, "optimize")
        log = self._log(name)

        def body(ctx: OpContext) -> OpResult:
            stable = ctx.stable
            assert stable is not None
            build = self._build_context(log, ctx.data_uri, spark, local_max_rows)
            state, content = kind_of(stable.spec).optimize(build, stable, how.value)
            return OpResult(state, content, stable.pending)

        op = Operation.OPTIMIZE_QUICK if how is OptimizeMode.QUICK else Operation.OPTIMIZE_FULL
        return self._info(
            run_operation(
                log, op, body, precheck=lambda stable: kind_of(stable.spec).needs_optimize(stable, how.value)
            )
        )

    def delete_index(self, name: str) -> IndexInfo:
        """Soft-delete: queries stop using the index; ``restore_index`` brings it back."""
        return self._info(run_operation(self._log(name), Operation.DELETE))

    def restore_index(self, name: str) -> IndexInfo:
        """Undo a soft delete."""
        return self._info(run_operation(self._log(name), Operation.RESTORE))

    def cancel_index(self, name: str) -> IndexInfo:
        """Return an index stuck in a transient state (a crashed operation) to its last stable state."""
        return self._info(run_operation(self._log(name), Operation.CANCEL))

    def vacuum_index(self, name: str, *, retention_hours: float | None = None) -> IndexInfo:
        """Remove data physically.

        A deleted index loses all its data and ceases to exist. An active index drops
        snapshots older than ``retention_hours`` (default ``config.log.vacuum_retention_hours``;
        never the latest) and every data file no retained snapshot names (including
        leftovers of crashed operations).
        """
        log = self._log(name)
        if retention_hours is None:
            retention_hours = self.config.log.vacuum_retention_hours

        deleted_since: list[int] = []  # a deleted index: when its vacuum started

        def body(ctx: OpContext) -> OpResult | None:
            if ctx.stable is not None and ctx.stable.state is IndexState.DELETED:
                deleted_since.append(ctx.transient.timestamp_ms)
                # No file map either: its paths (partition values) are table data the index no longer needs.
                return OpResult(replace(ctx.stable.source, files=()), Content(), None)
            vacuum.vacuum_active(log, retention_hours, ctx.transient.timestamp_ms)
            return None

        final = run_operation(log, Operation.VACUUM, body)
        if deleted_since:
            # Only once the final entry stands: a vacuum cancelled while it ran must not delete
            # the data of an index restored meanwhile (found by the race harness on S3).
            vacuum.vacuum_deleted(log, deleted_since[0])
        return self._info(final)

    def indexes(self) -> list[IndexInfo]:
        """Every index on the table that exists (vacuumed ones are not listed)."""
        return [self._info(e) for e in self._latest_entries()]

    def index_status(self) -> list[IndexStatus]:
        """Every index (as :meth:`indexes`) against the latest table version: lag and quick-refresh backlog.

        Reads the table's latest version once (``indexes()`` reads only the index logs).
        Example: ``[(s.info.name, s.lag, s.pending_files) for s in t.index_status()]``.
        """
        entries = self._latest_entries()
        if not entries:
            return []
        version = self.latest_version()
        ordinal = self.source.version_info(version).ordinal
        out = []
        for entry in entries:
            stable = self._stable(entry)
            built = stable.state is not IndexState.DOES_NOT_EXIST
            pending = stable.pending
            out.append(
                IndexStatus(
                    info=self._info(entry),
                    table_version=version,
                    lag=max(0, ordinal - stable.source.ordinal) if built else None,
                    pending_version=pending.version if pending else None,
                    pending_files=(
                        len(pending.appended) + len(pending.removed) + len(pending.delete_changed)
                        if pending
                        else 0
                    ),
                )
            )
        return out

    def _latest_entries(self) -> list[LogEntry]:
        """The latest log entry of every index that exists."""
        out = []
        for name in self._catalog.names():
            latest = self._log(name).latest()
            if latest is not None and latest.state is not IndexState.DOES_NOT_EXIST:
                out.append(latest)
        return out

    def _stable(self, entry: LogEntry) -> LogEntry:
        """``entry`` if stable, else the stable entry its index's operation in progress started from."""
        return entry if entry.state.is_stable else self._log(entry.name).latest_stable() or entry

    def _info(self, entry: LogEntry) -> IndexInfo:
        stable = self._stable(entry)
        return IndexInfo(
            name=entry.name,
            kind=entry.spec.kind,
            state=entry.state,
            indexed_version=stable.source.version if stable.state is not IndexState.DOES_NOT_EXIST else None,
            size_bytes=stable.content.size,
            rows=stable.content.rows,
            files=len(stable.content.files),
            spec=entry.spec,
            log_entry=entry.id,
        )

    # ------------------------------------------------------------------ queries

    def _snapshots(self, name: str) -> list[LogEntry]:
        """The retained ACTIVE snapshots of an index; clear errors when it cannot answer."""
        log = self._log(name)
        snapshots = log.active_snapshots()  # one probe of the log when warm
        if not snapshots:
            stable = log.latest_stable()
            if stable is None or stable.state is IndexState.DOES_NOT_EXIST:
                raise IndexNotFoundError(f"no index {name!r} on {self.uri}")
            raise IllegalIndexStateError(f"index {name!r} is {stable.state.value}; restore it to query it")
        spec = snapshots[-1].spec
        if not kind_of(spec).answers_lookups:
            raise IllegalIndexStateError(
                f"index {name!r} is a {spec.kind} index: it prunes scans, it has no lookups"
            )
        return snapshots

    def plan(
        self,
        name: str,
        keys: Sequence[Any],
        *,
        version_as_of: int | str | None = None,
        timestamp_as_of: dt.datetime | int | None = None,
    ) -> planner.Plan:
        """The planner's choice of snapshot for a lookup (``str(plan)`` explains it).

        On an object store the index log and the table's log are read concurrently (one
        round trip instead of two when warm); on local files, where a read costs less than
        handing work to a thread, one after the other (``LogConfig.concurrent_reads``).
        """
        if not self.config.log.reads_concurrently(self.storage.concurrent_reads):
            snapshots = self._snapshots(name)
            target = self.snapshot(version_as_of, timestamp_as_of)
            return planner.plan(self.source, name, snapshots, target, len(keys), self.config)
        # The index's log is read while the table's log is (``IndexLog`` is thread-safe; the
        # table source stays on the caller's thread).
        pending = shared_pool("lakehouse-index-log", 4).submit(self._snapshots, name)
        try:
            target = self.snapshot(version_as_of, timestamp_as_of)
        except BaseException:
            pending.result()  # the index's own error (no such index...) comes first
            raise
        return planner.plan(self.source, name, pending.result(), target, len(keys), self.config)

    def _lookup_plan(
        self, name: str, keys: Sequence[Any], version_as_of: int | str | None, timestamp_as_of: Any
    ) -> lk.LookupPlan:
        chosen = self.plan(name, keys, version_as_of=version_as_of, timestamp_as_of=timestamp_as_of)
        best = chosen.chosen
        entry = best.entry or self._log(name).latest_stable()
        assert entry is not None
        cov = best.coverage or plain_scan(chosen.target)
        return lk.plan_lookup(self.source, entry, chosen.target, keys, cov, self.config.read)

    def lookup(
        self,
        name: str,
        keys: Sequence[Any],
        *,
        version_as_of: int | str | None = None,
        timestamp_as_of: dt.datetime | int | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """Rows of the table version whose index key equals one of ``keys`` (tuples for composite keys).

        A ``None`` key matches rows whose key is null. Deletes of the version are applied.
        """

        def query() -> pa.Table:
            plan = self._lookup_plan(name, keys, version_as_of, timestamp_as_of)
            return lk.lookup(self.source, self.storage, self._index_dir(name), plan, columns)

        return self._relisting(query)

    def locate(
        self,
        name: str,
        keys: Sequence[Any],
        *,
        version_as_of: int | str | None = None,
        timestamp_as_of: dt.datetime | int | None = None,
    ) -> pa.Table:
        """Where the rows with ``keys`` live: key columns, record key columns, ``_file``, ``_row``.

        ``_file`` is the data file's URI and ``_row`` the row's position in it (deleted rows
        count). When the index declares no record key and the table version has stable row
        ids (Delta row tracking, Iceberg v3 row lineage), a ``_row_id`` column (int64) takes
        the record key's place: the row id as the format defines it, i.e. the data file's
        materialized row-id column at that position when present and not null, else the
        file's first row id (Delta ``baseRowId``, Iceberg ``first_row_id``) plus the
        position; null for a file with neither. It is computed from ``(_file, _row)`` at
        query time (the index stores no row ids), reading only the materialized column at
        the located positions. Without row ids, the row address is the record key.
        """

        def query() -> pa.Table:
            plan = self._lookup_plan(name, keys, version_as_of, timestamp_as_of)
            return lk.locate(self.source, self.storage, self._index_dir(name), plan)

        return self._relisting(query)

    def explain(
        self,
        name: str | None = None,
        keys: Sequence[Any] | None = None,
        *,
        where: Where | None = None,
        version_as_of: int | str | None = None,
        timestamp_as_of: dt.datetime | int | None = None,
    ) -> planner.Plan:
        """The plan of a query: every candidate with its cost, the choice, and why the others lost.

        A lookup through one index: ``print(t.explain("by_email", ["a@x"], version_as_of=3))``
        lists that index's snapshots and the plain scan. A read with a predicate:
        ``print(t.explain(where="email = 'a@x' AND country = 'DE'"))`` weighs every index of
        the table (the ones that cannot answer are listed with the reason) and the plain scan,
        as :meth:`read` and :meth:`scan` do.
        """
        if where is not None:
            return self._read_plan(self.snapshot(version_as_of, timestamp_as_of), where)
        if name is None:
            raise QueryError("explain needs an index name (a lookup) or where= (a read)")
        return self.plan(
            name, list(keys or [None]), version_as_of=version_as_of, timestamp_as_of=timestamp_as_of
        )

    # ---- writes and sync
    # Thin wrappers over lakehouse_index.workflows (see docs/guide/writes-and-watcher.md).

    def append(self, data: Any) -> WriteResult:
        """Append ``data`` and maintain every index by its ``auto_refresh`` policy.

        ``data``: a pyarrow Table or RecordBatchReader, a pandas DataFrame or a Spark
        DataFrame holding exactly the table's columns. Delta commits go through deltalake,
        Iceberg commits through pyiceberg (the table must be opened through its catalog).
        A Spark DataFrame of more than ``config.executor.local_max_rows`` rows is written by
        Spark tasks, which also compute the entries of secondary and covering indexes with
        policy ``incremental`` in the same job (see docs/guide/writes-and-watcher.md);
        smaller ones are collected to this process. Bad input raises before anything is written; if an
        index fails after the commit, ``IndexMaintenanceError`` names it and the recovery.
        """
        return writes.append(self, data)

    def overwrite(self, data: Any, where: str | None = None) -> WriteResult:
        """Replace every row (``where`` None) or the rows matching ``where`` with ``data``, in one commit."""
        return writes.overwrite(self, data, where)

    def delete(self, where: str) -> WriteResult:
        """Delete the rows matching ``where`` (SQL text, as :meth:`scan` accepts)."""
        return writes.delete(self, where)

    def update(self, where: str | None, set: Mapping[str, Any]) -> WriteResult:
        """Set columns to Python literals (``set={"status": "closed"}``) on the rows matching ``where``."""
        return writes.update(self, where, set)

    def upsert(self, data: Any, on: str | Sequence[str]) -> WriteResult:
        """Update the rows whose ``on`` columns match a row of ``data``, insert the others.

        Keys must be unique and not null in ``data``.
        """
        return writes.upsert(self, data, [on] if isinstance(on, str) else list(on))

    def sync_indexes(self, *, raise_on_error: bool = True) -> SyncResult:
        """Apply every index's ``auto_refresh`` policy to the table commits it has not seen.

        ``incremental`` and ``quick`` refresh to the latest version; ``off`` indexes are
        only reported with their lag. One report per index; with ``raise_on_error`` a
        failed index raises ``IndexMaintenanceError`` (after every index was tried).
        """
        return sync.sync_indexes(self, raise_on_error=raise_on_error)

    def verify_index(
        self,
        name: str,
        *,
        sample: int = 100,
        versions: Sequence[int | str] | None = None,
        seed: int | None = None,
    ) -> VerifyReport:
        """Prove an index on your own data: sampled index answers against a plain scan.

        ``sample`` keys drawn from the table's rows are looked up (``lookup`` and
        ``locate``; a pruning index: ``scan`` with ``key IN (...)``) through the index at
        each of ``versions`` (default: the indexed and the latest version) and compared with
        a plain scan of that version. ``report.ok`` is False, and ``str(report)`` lists
        them, when any answer differs. Example::

            report = t.verify_index("by_email", sample=500)
            assert report.ok, str(report)
        """
        return verify.verify_index(self, name, sample=sample, versions=versions, seed=seed)

    # ---- GDPR erasure (see docs/guide/erasure.md)

    def erase(
        self,
        index: str,
        keys: Sequence[Any],
        *,
        purge: bool = False,
        dry_run: bool = False,
        retain_audit: bool = True,
        force: bool = False,
        column: str | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> EraseResult:
        """Erase every row whose ``index`` key is one of ``keys`` (data subjects), on Delta or Iceberg.

        1. locates the subjects' live rows through the index (the hybrid scan covers files
           it has not indexed), reading nothing else;
        2. commits one targeted delete: exactly the files holding subjects are removed and
           rewritten without those rows (and without rows their deletes had removed); no key
           is written in plaintext to the commit;
        3. refreshes every index of the table (lineage remap of the rewritten files);
        4. with ``purge``: removes every older table version and every index file and log
           entry that may still hold the subjects (refused when the table's retention
           settings forbid it, unless ``force``);
        5. with ``purge``: decodes every file under the table and the index root and fails
           with :class:`~lakehouse_index.errors.ErasureVerificationError` on any trace;
        6. writes an audit record (subjects as salted hashes) unless ``retain_audit=False``.

        ``dry_run`` only reports what would change. ``column``, when given, must be the
        index's key column. Returns an :class:`EraseResult`.
        """
        return erasure.erase(
            self,
            index,
            keys,
            purge=purge,
            dry_run=dry_run,
            retain_audit=retain_audit,
            force=force,
            column=column,
            progress=progress,
        )

    def erasures(self) -> list[AuditRecord]:
        """The audit records of this table's erases, oldest first."""
        return erasure_audit.list_records(self.storage, self.index_root)


def _epoch_ms(ts: dt.datetime | int) -> int:
    if isinstance(ts, dt.datetime):
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=dt.timezone.utc)
        return int(ts.timestamp() * 1000)
    return int(ts)


def watch(
    tables: Iterable[Table | str],
    *,
    catalog: Any = None,
    interval: float = 5.0,
    once: bool = False,
    on_event: Callable[[watcher.WatchEvent], None] | None = None,
    stop: watcher.StopFlag | None = None,
    handle_signals: bool = True,
) -> list[watcher.WatchEvent]:
    """Keep the indexes of ``tables`` in step with their commits, whoever makes them.

    ``tables``: Table objects or URIs/identifiers (opened with ``catalog``). See
    :func:`lakehouse_index.workflows.watch.watch` for the loop, events and stopping.
    """
    opened = [t if isinstance(t, Table) else open_table(t, catalog=catalog) for t in tables]
    return watcher.watch(
        opened, interval=interval, once=once, on_event=on_event, stop=stop, handle_signals=handle_signals
    )
