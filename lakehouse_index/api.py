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
from typing import TYPE_CHECKING, Any, overload

import pyarrow as pa

from lakehouse_index.actions.cancel_index import cancel_index
from lakehouse_index.actions.create_index import create_index
from lakehouse_index.actions.delete_index import delete_index
from lakehouse_index.actions.modes import OptimizeMode, RefreshMode
from lakehouse_index.actions.optimize_index import optimize_index
from lakehouse_index.actions.refresh_index import refresh_index
from lakehouse_index.actions.restore_index import restore_index
from lakehouse_index.actions.vacuum_index import vacuum_index
from lakehouse_index.config import Config, PlannerConfig
from lakehouse_index.context import IndexContext, IndexInfo, IndexStatus
from lakehouse_index.errors import QueryError
from lakehouse_index.io import Storage, join_uri, normalize_uri
from lakehouse_index.kinds.keys import ArrowKeys
from lakehouse_index.kinds.multicolumn.weights import check_fraction
from lakehouse_index.log.store import INDEX_DIR_NAME
from lakehouse_index.query import index_queries, planner
from lakehouse_index.query.bucketed_read import BucketedPlan
from lakehouse_index.query.index_queries import Keys, Where
from lakehouse_index.read.scan import scan_files, scan_snapshot
from lakehouse_index.registry import open_source
from lakehouse_index.sink.contract import WriteMode
from lakehouse_index.sink.rewrite import Rewritten, WriteLineage
from lakehouse_index.source import Snapshot, TableSource
from lakehouse_index.spec import IndexSpec
from lakehouse_index.workflows import sync, verify, versions, writes
from lakehouse_index.workflows import watch as watcher
from lakehouse_index.workflows.erasure import audit as erasure_audit
from lakehouse_index.workflows.erasure import erase as erasure
from lakehouse_index.workflows.erasure.audit import AuditRecord
from lakehouse_index.workflows.erasure.erase import EraseResult
from lakehouse_index.workflows.reports import SyncResult, WriteResult
from lakehouse_index.workflows.verify import VerifyReport

__all__ = ["IndexInfo", "IndexStatus", "OptimizeMode", "RefreshMode", "Table", "open_table", "watch"]

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


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
    """A table with its side-car indexes. Obtain one with :func:`open_table`.

    The methods are the public surface; their work is done below the facade, over the
    table's :attr:`context`: index lifecycle actions (:mod:`lakehouse_index.actions`),
    queries (:mod:`lakehouse_index.query.index_queries`) and workflows (writes, sync,
    watch, verify, erase).
    """

    def __init__(
        self, source: TableSource, storage: Storage, index_root: str, config: Config = Config()
    ) -> None:
        self.context = IndexContext.open(source, storage, index_root, config)

    @property
    def source(self) -> TableSource:
        """The table's connector (its log reader)."""
        return self.context.source

    @property
    def storage(self) -> Storage:
        """The storage of the table and its indexes."""
        return self.context.storage

    @property
    def index_root(self) -> str:
        """Where the table's side-car indexes live."""
        return self.context.index_root

    @property
    def config(self) -> Config:
        """Every tuning knob (``docs/CONFIG.md``); assign a new one to tune this table object."""
        return self.context.config

    @config.setter
    def config(self, value: Config) -> None:
        self.context = self.context.with_config(value)

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
        return versions.resolve_version(self.context, version_as_of, timestamp_as_of)

    def snapshot(self, version_as_of: int | str | None = None, timestamp_as_of: Any = None) -> Snapshot:
        """The table state at a version (latest by default)."""
        return versions.snapshot(self.context, version_as_of, timestamp_as_of)

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
        :meth:`read` and :meth:`explain`), or a multi-column index answers from its own row
        groups (index only when it holds ``columns``); ``use_indexes=False`` reads every live file.
        """
        snap = self.snapshot(version_as_of, timestamp_as_of)
        if use_indexes and where is not None:
            found = index_queries.scan(self.context, snap, where, columns)
            if found is not None:
                return found
        files = (
            index_queries.files_for(self.context, snap, where) if use_indexes and where is not None else None
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
        sample: float | None = None,
    ) -> DataFrame:
        """A Spark DataFrame of a table version (data files read directly; deletes applied).

        With ``where``, the planner (:meth:`explain` with ``where=``) weighs every index: a
        secondary or covering index whose key ``where`` pins to a finite set of values
        (``=`` / ``IN``, under AND / OR) locates the files holding those keys, one whose
        columns hold every column of ``where`` (ranges, included columns) filters its rows,
        a skipping index prunes files by its statistics, or every live file is read,
        whichever is estimated cheapest; Spark re-checks the predicate. Works with no index.

        When a covering index (layout 2) holds every column of ``columns`` and ``where``, the
        frame is read from it as a table Spark knows is bucketed (and sorted) by the index's
        leading key: a join of two such frames on their keys with equal bucket counts plans no
        Exchange (:meth:`explain_read` says which index answers, or why none does; rows of
        files the index does not cover are shuffled into its buckets; see the Spark guide).

        ``sample=fraction``: exactly the rows :meth:`sample` returns for the same arguments, read
        on Spark from the index row groups the fraction needs (and files the index does not
        cover), or by a plain scan computing the weights (``explain(sample=...)`` says which).
        """
        from lakehouse_index.spark import get_spark

        snap = self.snapshot(version_as_of, timestamp_as_of)
        fraction = check_fraction(sample) if sample is not None else None
        return index_queries.read_frame(
            self.context, get_spark(spark), snap, where, columns, use_indexes, fraction
        )

    def sample(
        self,
        fraction: float,
        *,
        where: Where | None = None,
        version_as_of: int | str | None = None,
        timestamp_as_of: dt.datetime | int | None = None,
        columns: Sequence[str] | None = None,
        use_indexes: bool = True,
    ) -> pa.Table:
        """A uniform sample of a table version's rows (matching ``where``): pyarrow, no JVM.

        Each row is in with probability ``fraction``, independently of its values (its weight,
        ``kinds.multicolumn.weights``, is below it): deterministic, nested across fractions,
        stable across versions. A multi-column index answers reading about ``fraction`` of it;
        else every live file is scanned for the same weights (``explain(sample=...)``).
        """
        snap = self.snapshot(version_as_of, timestamp_as_of)
        return index_queries.sample(self.context, snap, check_fraction(fraction), where, columns, use_indexes)

    def explain_read(
        self,
        *,
        version_as_of: int | str | None = None,
        timestamp_as_of: dt.datetime | int | None = None,
        where: Where | None = None,
        columns: Sequence[str] | None = None,
    ) -> BucketedPlan:
        """Whether :meth:`read` answers through a covering index as a bucketed table, and why (not)."""
        snap = self.snapshot(version_as_of, timestamp_as_of)
        return index_queries.bucketed_plan(self.context, snap, columns, where)

    # ------------------------------------------------------------------ index lifecycle

    def create_index(
        self, spec: IndexSpec, *, spark: SparkSession | None = None, local_max_rows: int | None = None
    ) -> IndexInfo:
        """Create an index and build it from the latest table version.

        Work of at most ``local_max_rows`` rows (default ``config.executor.local_max_rows``,
        counted net of deleted rows) runs in this process with pyarrow, larger work on Spark
        (``spark``, or a local session); a skipping index is always built in process. The
        spec is checked against the table schema before anything is written.
        """
        return self.context.info(create_index(self.context, spec, spark=spark, local_max_rows=local_max_rows))

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
          :class:`~lakehouse_index.sink.rewrite.Rewritten`: the old file and the
          positions its rows came from) and those files are placed
          without reading them (the GDPR erase does);
        * ``quick`` only records what changed (no index data written); queries repair
          the difference by hybrid scan.

        ``mode`` is a :class:`RefreshMode` or its value. A refresh with nothing to do writes nothing.
        """
        entry = refresh_index(
            self.context,
            name,
            mode,
            spark=spark,
            remap=remap,
            local_max_rows=local_max_rows,
            lineage=WriteLineage(rewritten=rewritten or {}),
        )
        return self.context.info(entry)

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
        entry = optimize_index(self.context, name, mode, spark=spark, local_max_rows=local_max_rows)
        return self.context.info(entry)

    def delete_index(self, name: str) -> IndexInfo:
        """Soft-delete: queries stop using the index; ``restore_index`` brings it back."""
        return self.context.info(delete_index(self.context, name))

    def restore_index(self, name: str) -> IndexInfo:
        """Undo a soft delete."""
        return self.context.info(restore_index(self.context, name))

    def cancel_index(self, name: str) -> IndexInfo:
        """Return an index stuck in a transient state (a crashed operation) to its last stable state."""
        return self.context.info(cancel_index(self.context, name))

    def vacuum_index(self, name: str, *, retention_hours: float | None = None) -> IndexInfo:
        """Remove data physically.

        A deleted index loses all its data and ceases to exist. An active index drops
        snapshots older than ``retention_hours`` (default ``config.log.vacuum_retention_hours``;
        never the latest) and every data file no retained snapshot names (including
        leftovers of crashed operations).
        """
        return self.context.info(vacuum_index(self.context, name, retention_hours=retention_hours))

    def indexes(self) -> list[IndexInfo]:
        """Every index on the table that exists (vacuumed ones are not listed)."""
        return self.context.indexes()

    def index_status(self) -> list[IndexStatus]:
        """Every index (as :meth:`indexes`) against the latest table version: lag and quick-refresh backlog.

        Reads the table's latest version once (``indexes()`` reads only the index logs).
        Example: ``[(s.info.name, s.lag, s.pending_files) for s in t.index_status()]``.
        """
        return self.context.index_status()

    # ------------------------------------------------------------------ queries

    def _target(self, version_as_of: int | str | None, timestamp_as_of: Any) -> Callable[[], Snapshot]:
        return lambda: self.snapshot(version_as_of, timestamp_as_of)

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
        return index_queries.plan(self.context, name, keys, self._target(version_as_of, timestamp_as_of))

    @overload
    def lookup(
        self,
        name: str,
        keys: DataFrame,
        *,
        version_as_of: int | str | None = None,
        timestamp_as_of: dt.datetime | int | None = None,
        columns: Sequence[str] | None = None,
    ) -> DataFrame: ...

    @overload
    def lookup(
        self,
        name: str,
        keys: Sequence[Any] | ArrowKeys,
        *,
        version_as_of: int | str | None = None,
        timestamp_as_of: dt.datetime | int | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table: ...

    def lookup(
        self,
        name: str,
        keys: Keys,
        *,
        version_as_of: int | str | None = None,
        timestamp_as_of: dt.datetime | int | None = None,
        columns: Sequence[str] | None = None,
    ) -> Any:
        """Rows of the table version whose index key equals one of ``keys`` (tuples for composite keys).

        A ``None`` key matches rows whose key is null. Deletes of the version are applied.

        ``keys`` may be a list (or set) of values, Arrow data (a ``pyarrow.Array`` for a
        one-column key, or a ``pyarrow.Table`` with the key columns by name: converted without
        a Python step per key), or a **Spark DataFrame** with the key columns by name, for key
        sets too large for this process: the answer is then a Spark DataFrame, computed on
        Spark as a join of the keys with the index files and then with the data files that
        hold them. A batch of keys is sorted once and every index file, row group and data
        file is read once for all the keys it holds.
        """
        target = self._target(version_as_of, timestamp_as_of)
        return index_queries.lookup(self.context, name, keys, target, columns)

    @overload
    def locate(
        self,
        name: str,
        keys: DataFrame,
        *,
        version_as_of: int | str | None = None,
        timestamp_as_of: dt.datetime | int | None = None,
    ) -> DataFrame: ...

    @overload
    def locate(
        self,
        name: str,
        keys: Sequence[Any] | ArrowKeys,
        *,
        version_as_of: int | str | None = None,
        timestamp_as_of: dt.datetime | int | None = None,
    ) -> pa.Table: ...

    def locate(
        self,
        name: str,
        keys: Keys,
        *,
        version_as_of: int | str | None = None,
        timestamp_as_of: dt.datetime | int | None = None,
    ) -> Any:
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

        ``keys`` as for :meth:`lookup`. Given a Spark DataFrame of keys, the answer is a Spark
        DataFrame (key, record key, ``_file``, ``_row``) computed on Spark: the index files read
        as Parquet and joined with the keys (null-safely), the LSM merge and the repair of the
        snapshot to the version applied there. It does not compute ``_row_id``: an index
        without a record key on a table with row ids raises UnsupportedFeatureError.
        """
        return index_queries.locate(self.context, name, keys, self._target(version_as_of, timestamp_as_of))

    def explain(
        self,
        name: str | None = None,
        keys: Sequence[Any] | None = None,
        *,
        where: Where | None = None,
        version_as_of: int | str | None = None,
        timestamp_as_of: dt.datetime | int | None = None,
        sample: float | None = None,
    ) -> planner.Plan:
        """The plan of a query: every candidate with its cost, the choice, and why the others lost.

        A lookup through one index: ``print(t.explain("by_email", ["a@x"], version_as_of=3))``
        lists that index's snapshots and the plain scan. A read with a predicate:
        ``print(t.explain(where="email = 'a@x' AND country = 'DE'"))`` weighs every index of
        the table (the ones that cannot answer are listed with the reason) and the plain scan,
        as :meth:`read` and :meth:`scan` do. ``sample=fraction``: the plan of :meth:`sample`.
        """
        if sample is not None:
            snap = self.snapshot(version_as_of, timestamp_as_of)
            return index_queries.sample_plan(self.context, snap, check_fraction(sample), where)
        if where is not None:
            return index_queries.read_plan(self.context, self.snapshot(version_as_of, timestamp_as_of), where)
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
        return writes.append(self.context, data)

    def overwrite(
        self,
        data: Any,
        where: str | None = None,
        *,
        mode: WriteMode | str | None = None,
        use_indexes: bool = True,
    ) -> WriteResult:
        """Replace every row (``where`` None) or the rows matching ``where`` with ``data``, in one commit.

        A ``where`` an index pins is planned by the index, as for :meth:`delete`.
        """
        return writes.overwrite(self.context, data, where, mode=mode, use_indexes=use_indexes)

    def delete(
        self, where: str, *, mode: WriteMode | str | None = None, use_indexes: bool = True
    ) -> WriteResult:
        """Delete the rows matching ``where`` (SQL text, as :meth:`scan` accepts).

        When an active secondary or covering index answers lookups on a key ``where`` pins
        (``=`` / ``IN`` on the index key, under AND / OR), the index locates the rows and
        only the files holding them are touched: rewritten without them
        (``mode="copy-on-write"``) or, where the table's own settings ask for it, the rows
        marked deleted (``"merge-on-read"``: Delta deletion vectors, Iceberg position
        deletes). ``mode`` overrides the table's choice; ``use_indexes=False`` hands the
        write to the format library. ``WriteResult.path`` says which path the write took and
        which files it touched (docs/guide/writes-and-watcher.md).
        """
        return writes.delete(self.context, where, mode=mode, use_indexes=use_indexes)

    def update(
        self,
        where: str | None,
        set: Mapping[str, Any],
        *,
        mode: WriteMode | str | None = None,
        use_indexes: bool = True,
    ) -> WriteResult:
        """Set columns to Python literals (``set={"status": "closed"}``) on the rows matching ``where``.

        A ``where`` an index pins is planned by the index, as for :meth:`delete`.
        """
        return writes.update(self.context, where, set, mode=mode, use_indexes=use_indexes)

    def upsert(
        self,
        data: Any,
        on: str | Sequence[str],
        *,
        mode: WriteMode | str | None = None,
        use_indexes: bool = True,
    ) -> WriteResult:
        """Update the rows whose ``on`` columns match a row of ``data``, insert the others.

        Keys must be unique and not null in ``data``. With an active secondary or covering index
        keyed on ``on``, the index locates the target rows and only their files are touched
        (``mode`` and ``use_indexes`` as for :meth:`delete`).
        """
        keys = [on] if isinstance(on, str) else list(on)
        return writes.upsert(self.context, data, keys, mode=mode, use_indexes=use_indexes)

    def sync_indexes(self, *, raise_on_error: bool = True) -> SyncResult:
        """Apply every index's ``auto_refresh`` policy to the table commits it has not seen.

        ``incremental`` and ``quick`` refresh to the latest version; ``off`` indexes are
        only reported with their lag. One report per index; with ``raise_on_error`` a
        failed index raises ``IndexMaintenanceError`` (after every index was tried).
        """
        return sync.sync_indexes(self.context, raise_on_error=raise_on_error)

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
        return verify.verify_index(self.context, name, sample=sample, versions=versions, seed=seed)

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
        deep_verify: bool = False,
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
        5. with ``purge``: verifies that no trace is left, and fails with
           :class:`~lakehouse_index.errors.ErasureVerificationError` on any: by default it
           decodes every file under the table and the index root that is not a live data or
           index file (logs, metadata, deletion vectors, leftovers) and checks the key columns
           of the data files the erase wrote, of live data files with row-level deletes and of
           the index files whose statistics may hold a subject (the index has proved that no
           other live row holds one); ``deep_verify`` decodes every file whole instead;
        6. writes an audit record (subjects as salted hashes) unless ``retain_audit=False``.

        ``dry_run`` only reports what would change. ``column``, when given, must be the
        index's key column. Returns an :class:`EraseResult`.
        """
        return erasure.erase(
            self.context,
            index,
            keys,
            purge=purge,
            dry_run=dry_run,
            retain_audit=retain_audit,
            force=force,
            column=column,
            progress=progress,
            deep_verify=deep_verify,
        )

    def erasures(self) -> list[AuditRecord]:
        """The audit records of this table's erases, oldest first."""
        return erasure_audit.list_records(self.storage, self.index_root)


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
        [t.context for t in opened],
        interval=interval,
        once=once,
        on_event=on_event,
        stop=stop,
        handle_signals=handle_signals,
    )
