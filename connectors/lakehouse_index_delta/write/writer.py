"""The Delta table writer: the write contract over deltalake and this package's own commits."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from lakehouse_index.errors import PurgeRefusedError, UnsupportedWriterFeatureError, WriteRefusedError
from lakehouse_index.expressions import Predicate
from lakehouse_index.expressions.datafusion import column_sql, sql_value, to_datafusion_sql
from lakehouse_index.io.parallel import each_file
from lakehouse_index.sink.conflicts import commit_rebasing
from lakehouse_index.sink.contract import (
    Commit,
    DataFileFormat,
    RowChangeCommit,
    RowChanges,
    RowChangesRefused,
    SparkWriterMissing,
    SparkWrites,
    TableWriter,
    Transaction,
    WriteMode,
    WriteOperation,
    WrittenFile,
)
from lakehouse_index.sink.history import HistoryPurge
from lakehouse_index.sink.read_set import ReadSet
from lakehouse_index.sink.rewrite import FileRewrite, Rewritten, plan_rewrite
from lakehouse_index.source import Snapshot
from lakehouse_index_delta.features import (
    MAX_WRITER_VERSION,
    declared_writer_features,
    refused_by_erase,
    refused_by_row_changes,
)
from lakehouse_index_delta.source import DeltaSource
from lakehouse_index_delta.write import deltalake_ops as ops
from lakehouse_index_delta.write import log_commit, new_files, purge, spark_writes
from lakehouse_index_delta.write.marks import FileMark, plan_mark


class DeltaWriter(TableWriter):
    """Writes a Delta table: deltalake for row writes, this package's commits for erases and purges,
    delta-spark for Spark DataFrames when their session has it."""

    @property
    def log(self) -> DeltaSource:
        """The source, as the Delta reader it is (the protocol and metaData actions it read)."""
        assert isinstance(self.source, DeltaSource)
        return self.source

    def spark_writes(self, spark: Any) -> SparkWrites | None:
        """delta-spark (:mod:`.spark_writes`) when ``spark`` has its classes and SQL extension;
        it enforces the table's writer features itself (append-only tables included)."""
        if not spark_writes.available(spark):
            raise SparkWriterMissing("delta-spark is not in the Spark session")
        snap = self.source.snapshot(self.source.latest_version())
        return spark_writes.DeltaSparkWrites(self.source, self.storage, spark, snap)

    def begin(self, operation: WriteOperation) -> Transaction:
        """A transaction on the latest version; refused here for writer features the commit
        cannot honour and for rewrites of an append-only table."""
        options = self.storage.options
        snap = self.source.snapshot(self.source.latest_version())
        if operation is WriteOperation.ERASE:
            dt = ops.open_deltalake(self.uri, options)
            return DeltaTransaction(self, snap, operation, dt, _erasable(self.uri, dt))
        if operation is WriteOperation.APPEND:  # always through deltalake: checked by it now
            dt = ops.open_for_write(self.uri, operation.value, options, self.source.table_id, snap.version)
            return DeltaTransaction(self, snap, operation, dt)
        # Other writes may take this package's own commit (index-planned): they are checked on
        # its reading of the log, and deltalake's table is opened only for a write through it.
        tx = DeltaTransaction(self, snap, operation)
        ops.check_operation(tx.config, self.uri, operation.value)
        return tx

    def purge_blockers(self) -> list[str]:
        """Retention settings that ask to keep history (``delta.logRetentionDuration``, ...)."""
        purge.check_supported(self)
        return purge.blockers(self)

    def purge_history(
        self, keep_version: int, *, dry_run: bool, refresh_indexes: Callable[[], None]
    ) -> HistoryPurge:
        """Checkpoint ``keep_version`` (the latest), then remove every older log and data file;
        the purge commits nothing, so ``refresh_indexes`` is not needed."""
        latest = self.source.latest_version()
        if keep_version != latest:
            raise PurgeRefusedError(
                f"{self.uri}: version {keep_version} is not the latest ({latest}); "
                "a purge keeps only the latest version"
            )
        return purge.purge(self, keep_version, dry_run)


def _erasable(uri: str, dt: Any) -> list[str]:
    """The table's writer features, after checking an erase commit can honour them."""
    protocol = dt.protocol()
    if protocol.min_writer_version > MAX_WRITER_VERSION:
        raise UnsupportedWriterFeatureError(
            f"{uri}: minWriterVersion {protocol.min_writer_version} is not supported"
        )
    refused = refused_by_erase(protocol.min_writer_version, protocol.writer_features)
    if refused:
        raise UnsupportedWriterFeatureError(
            f"{uri}: the table declares writer feature(s) {refused} that an erase commit cannot honour "
            "(icebergCompat: the Iceberg metadata would have to be regenerated); nothing was changed"
        )
    config = dict(dt.metadata().configuration)
    if str(config.get("delta.appendOnly", "false")).lower() == "true":
        raise WriteRefusedError(
            f"{uri}: the table is append-only (delta.appendOnly=true); rows cannot be erased. "
            "Unset the property first (ALTER TABLE ... SET TBLPROPERTIES ('delta.appendOnly'='false'))"
        )
    return declared_writer_features(protocol.min_writer_version, protocol.writer_features)


class DeltaTransaction(Transaction):
    """One write to a Delta table at ``snapshot``'s version: through deltalake's table ``dt`` (at
    that version or later, opened on first use) or this package's own commits.

    A commit deltalake's checker refuses is decided by the conflict rules
    (:func:`~lakehouse_index.sink.conflicts.commit_rebasing`): without a conflict, ``dt`` is
    brought up to date (only the new commits are read), checked again, and the operation runs
    again on it. After a successful commit ``dt`` is kept for the next write of this process
    (:func:`~.deltalake_ops.keep`).
    """

    def __init__(
        self,
        writer: DeltaWriter,
        snapshot: Snapshot,
        operation: WriteOperation,
        dt: Any = None,
        erase_features: Sequence[str] = (),
    ) -> None:
        self.writer = writer
        self.snapshot = snapshot
        self.operation = operation
        self._dt = dt
        self.erase_features = tuple(erase_features)
        self._protocol, self._metadata = writer.log.protocol_and_metadata(snapshot.version)

    @property
    def config(self) -> dict[str, str]:
        """The table configuration at the snapshot's version (its ``metaData`` action's)."""
        return self._metadata.config

    @property
    def dt(self) -> Any:
        """deltalake's table at the snapshot's version, opened (or a kept one caught up) and
        checked on first use. A commit that landed since then is left to the conflict rules,
        as when the table was opened with the snapshot."""
        if self._dt is None:
            w = self.writer
            dt = ops.open_for_write(
                w.uri, self.operation.value, w.storage.options, w.source.table_id, self.snapshot.version
            )
            if int(dt.version()) > self.snapshot.version:
                dt.load_as_version(self.snapshot.version)
            self._dt = dt
        return self._dt

    def _commit(
        self, operation: WriteOperation, reads: ReadSet, run: Callable[[Snapshot | None], Commit]
    ) -> Commit:
        """``run`` on the transaction's snapshot, again on newer versions after lost races the
        rules let through; ``dt`` kept after the commit."""
        w = self.writer

        def catch_up() -> int:
            self.dt.update_incremental()
            ops.check_writable(self.dt, w.uri, operation.value)
            return int(self.dt.version())

        ops.check_writable(self.dt, w.uri, operation.value)
        config = dict(self.dt.metadata().configuration)
        done = commit_rebasing(
            w.source, self.snapshot, reads, ops.isolation(config, w.uri), operation.value, run, catch_up
        )
        ops.keep(w.uri, w.storage.options, self.dt)
        return done

    def _refuse_nan(self, snap: Snapshot | None, predicate: Predicate | None, what: str) -> None:
        if snap is not None:
            ops.refuse_nan_rewrites(self.writer.source, snap, self.dt, predicate, what)

    def append(self, rows: pa.Table) -> Commit:
        """Append through deltalake."""
        return self._commit(WriteOperation.APPEND, ReadSet.nothing(), lambda _: ops.append(self.dt, rows))

    def overwrite(self, rows: pa.Table, predicate: Predicate | None) -> Commit:
        """Replace every row, or the rows where ``predicate`` holds (one MERGE: ``ops.overwrite``)."""
        target = to_datafusion_sql(predicate, "t") if predicate is not None else None

        def run(snap: Snapshot | None) -> Commit:
            self._refuse_nan(snap, predicate, "overwrite")
            return ops.overwrite(self.dt, rows, target)

        return self._commit(WriteOperation.OVERWRITE, ReadSet.where(predicate), run)

    def delete(self, predicate: Predicate) -> Commit:
        """Delete through deltalake, the predicate rendered as DataFusion SQL."""
        sql = to_datafusion_sql(predicate)

        def run(snap: Snapshot | None) -> Commit:
            self._refuse_nan(snap, predicate, "delete")
            return ops.delete(self.dt, sql)

        return self._commit(WriteOperation.DELETE, ReadSet.where(predicate), run)

    def update(self, predicate: Predicate | None, values: Mapping[str, Any]) -> Commit:
        """Update through deltalake, the values rendered as DataFusion SQL literals."""
        sql = to_datafusion_sql(predicate) if predicate is not None else "TRUE"
        schema = self.snapshot.schema
        # Quoted: deltalake reads an unquoted key with a dot as a path into a struct.
        updates = {column_sql(c): sql_value(v, schema.field(c).type) for c, v in values.items()}

        def run(snap: Snapshot | None) -> Commit:
            self._refuse_nan(snap, predicate, "update")
            return ops.update(self.dt, sql, updates)

        return self._commit(WriteOperation.UPDATE, ReadSet.where(predicate), run)

    def upsert(self, rows: pa.Table, on: Sequence[str]) -> Commit:
        """MERGE through deltalake on the ``on`` columns."""
        reads = ReadSet.matching(rows, tuple(on))
        return self._commit(WriteOperation.UPSERT, reads, lambda _: ops.upsert(self.dt, rows, on))

    def data_files(self) -> DataFileFormat:
        """Hive-style partition folders, Delta statistics (:mod:`.new_files`)."""
        w = self.writer
        return new_files.new_files(self.dt, w.storage, w.uri, self.snapshot.schema)

    def commit_files(self, files: Sequence[WrittenFile]) -> Commit:
        """One append of add actions through deltalake's write transaction."""
        rows = sum(f.rows for f in files)
        return self._commit(
            WriteOperation.APPEND,
            ReadSet.nothing(),
            lambda _: Commit(new_files.commit_files(self.dt, files), rows_written=rows),
        )

    def _deletion_vectors_writable(self) -> bool:
        """Whether the table takes new deletion vectors: the ``deletionVectors`` feature and
        ``delta.enableDeletionVectors=true`` (as Delta's own writers decide)."""
        protocol, config = self._protocol, self.config
        declared = declared_writer_features(protocol.min_writer_version, protocol.writer_features)
        return "deletionVectors" in declared and log_commit.is_true(config, "delta.enableDeletionVectors")

    def write_mode(self, operation: WriteOperation) -> WriteMode:
        """Merge-on-read (deletion vectors) when the table takes them, else copy-on-write."""
        return WriteMode.MERGE_ON_READ if self._deletion_vectors_writable() else WriteMode.COPY_ON_WRITE

    def commit_row_changes(self, changes: RowChanges) -> RowChangeCommit:
        """This package's own commit (:func:`.log_commit.commit_changes`): the files holding
        removed rows rewritten without them (copy-on-write) or given deletion vectors marking
        them (merge-on-read, :mod:`.marks`), the added rows in new files; after a lost race the
        same changes commit on the newer version when the conflict rules let them."""
        w = self.writer
        mor = changes.mode is WriteMode.MERGE_ON_READ
        if mor and not self._deletion_vectors_writable():
            raise RowChangesRefused(
                "the table takes no deletion vectors (it needs the deletionVectors feature and "
                "delta.enableDeletionVectors=true)"
            )
        protocol, config = self._protocol, self.config
        adds = changes.added is not None and changes.added.num_rows > 0
        refused = refused_by_row_changes(
            protocol.min_writer_version,
            protocol.writer_features,
            json.loads(self._metadata.schema_string),
            config,
            adds_rows=adds,
        )
        if refused:
            raise RowChangesRefused(f"its commit does not honour the table's writer feature(s) {refused}")
        tracking = "rowTracking" in declared_writer_features(
            protocol.min_writer_version, protocol.writer_features
        )
        base, removed = self.snapshot, sorted(changes.removed.items())
        cdf = log_commit.is_true(config, "delta.enableChangeDataFeed")
        marks: list[FileMark] = []
        rewrites: list[FileRewrite] = []
        if mor:
            marks = each_file(lambda i: plan_mark(w.source, base.files[i[0]], i[1], config, cdf=cdf), removed)
        else:
            rewrites = each_file(lambda i: plan_rewrite(w.source, base, base.files[i[0]], i[1]), removed)
        what = log_commit.LogCommit(
            _LOG_OPERATIONS[changes.operation], {"lakehouse-index": "indexed"}, changes.added
        )
        out: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {}

        def run(snap: Snapshot | None) -> Commit:
            assert snap is not None
            done, replaced, added = log_commit.commit_changes(
                w.source,
                w.storage,
                snapshot=snap,
                rewrites=rewrites,
                what=what,
                config=config,
                row_tracking=tracking,
                marks=marks,
            )
            out["last"] = (replaced, added)
            return done

        def catch_up() -> int:
            latest = w.source.latest_version()
            ops.check_operation(w.log.protocol_and_metadata(latest)[1].config, w.uri, changes.operation.value)
            return latest

        done = commit_rebasing(
            w.source,
            self.snapshot,
            changes.reads,
            ops.isolation(config, w.uri),
            changes.operation.value,
            run,
            catch_up,
        )
        if self._dt is not None:  # the next write through deltalake catches it up
            ops.keep(w.uri, w.storage.options, self._dt)
        replaced, added = out["last"]
        by_old = {r.entry.path: r for r in rewrites}
        rewritten = {new: Rewritten(old, by_old[old].kept_positions) for old, new in replaced.items()}
        marked = tuple(m.entry.path for m in marks if not m.removes_file)
        return RowChangeCommit(done, rewritten, marked, added)

    def commit_erase(self, rewrites: Sequence[FileRewrite], subjects: int) -> tuple[Commit, dict[str, str]]:
        """The erase's own commit (:func:`.log_commit.commit_changes`): no predicate, no key recorded."""
        w = self.writer
        what = log_commit.LogCommit("DELETE", {"erasure": "lakehouse-index", "subjects": str(subjects)})
        done, replaced, _ = log_commit.commit_changes(
            w.source,
            w.storage,
            snapshot=self.snapshot,
            rewrites=rewrites,
            what=what,
            config=self.config,
            row_tracking="rowTracking" in self.erase_features,
        )
        return done, replaced


#: How ``commitInfo`` names each operation the project commits itself (as delta-spark does).
_LOG_OPERATIONS = {
    WriteOperation.DELETE: "DELETE",
    WriteOperation.UPDATE: "UPDATE",
    WriteOperation.UPSERT: "MERGE",
    WriteOperation.OVERWRITE: "WRITE",
    WriteOperation.ERASE: "DELETE",
}
