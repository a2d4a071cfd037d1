"""The Iceberg table writer: the write contract over pyiceberg, through the table's catalog."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from lakehouse_index.errors import UnsupportedWriterFeatureError
from lakehouse_index.expressions import Predicate
from lakehouse_index.sink.contract import (
    Commit,
    DataFileFormat,
    RowChangeCommit,
    RowChanges,
    RowChangesRefused,
    SparkWrites,
    TableWriter,
    Transaction,
    WriteMode,
    WriteOperation,
    WrittenFile,
)
from lakehouse_index.sink.history import HistoryPurge
from lakehouse_index.sink.rewrite import FileRewrite
from lakehouse_index.source import Snapshot
from lakehouse_index_iceberg.write import erase_commit, new_files, purge, spark_writes
from lakehouse_index_iceberg.write import pyiceberg_ops as ops


class IcebergWriter(TableWriter):
    """Writes an Iceberg table opened through its catalog (a table opened by path has no atomic commit):
    pyiceberg and this package's commits, Iceberg's Spark runtime for Spark DataFrames when their
    session has it."""

    def spark_writes(self, spark: Any) -> SparkWrites | None:
        """Iceberg's Spark writer (:mod:`.spark_writes`) when ``spark`` has the runtime and a Spark
        catalog of the table's pyiceberg catalog's name (configured there for a SQLite SQL catalog);
        ReadOnlyTableError for a table opened by path."""
        tbl = ops.open_for_write(self.source, self.uri)
        return spark_writes.open_writes(spark, self.source, tbl)

    def begin(self, operation: WriteOperation) -> Transaction:
        """A transaction on the latest snapshot; ReadOnlyTableError for a table opened by path,
        and an erase of a format-version 3 table is refused (pyiceberg cannot write its manifests)."""
        tbl = ops.open_for_write(self.source, self.uri)
        if operation is WriteOperation.ERASE and tbl.format_version >= 3:
            raise UnsupportedWriterFeatureError(
                f"{self.uri}: erase of Iceberg format-version 3 tables is not supported yet: pyiceberg "
                f"cannot write their manifests (table format-version {tbl.format_version}); nothing "
                "was changed"
            )
        return IcebergTransaction(self, self.source.snapshot(self.source.latest_version()), tbl)

    def purge_blockers(self) -> list[str]:
        """Retention settings that ask to keep history (minimum snapshots, maximum age, refs)."""
        purge.check_supported(self)
        return purge.blockers(self)

    def purge_history(
        self, keep_version: int, *, dry_run: bool, refresh_indexes: Callable[[], None]
    ) -> HistoryPurge:
        """A ``replace`` snapshot of ``keep_version`` becomes the only snapshot (the indexes are
        refreshed onto it before the others expire)."""
        return purge.purge(self, keep_version, dry_run, refresh_indexes)


class IcebergTransaction(Transaction):
    """One write to an Iceberg table through ``tbl`` (pyiceberg's table, loaded through the catalog)."""

    def __init__(self, writer: IcebergWriter, snapshot: Snapshot, tbl: Any) -> None:
        self.writer = writer
        self.snapshot = snapshot
        self.tbl = tbl

    def append(self, rows: pa.Table) -> Commit:
        """A pyiceberg append."""
        return ops.append(self.tbl, rows, self.writer.source)

    def overwrite(self, rows: pa.Table, predicate: Predicate | None) -> Commit:
        """Every row (pyiceberg's overwrite), or the matching rows' files rewritten without
        them, plus ``rows``."""
        return ops.overwrite(
            self.tbl, rows, predicate, self.writer.source, self.writer.storage, self.writer.uri
        )

    def delete(self, predicate: Predicate) -> Commit:
        """The matching rows' files rewritten without them."""
        return ops.delete(self.tbl, predicate, self.writer.source, self.writer.storage, self.writer.uri)

    def update(self, predicate: Predicate | None, values: Mapping[str, Any]) -> Commit:
        """The matching rows' files rewritten without them, the updated rows written anew."""
        return ops.update(
            self.tbl, predicate, values, self.writer.source, self.writer.storage, self.writer.uri
        )

    def upsert(self, rows: pa.Table, on: Sequence[str]) -> Commit:
        """The matched rows' files rewritten without them, ``rows`` written anew."""
        return ops.upsert(self.tbl, rows, on, self.writer.source, self.writer.storage, self.writer.uri)

    def data_files(self) -> DataFileFormat:
        """pyiceberg's file layout (identity partitions, format version ≤ 2)."""
        return new_files.new_files(self.tbl, self.writer.uri)

    def commit_files(self, files: Sequence[WrittenFile]) -> Commit:
        """One fast append of the tasks' data files."""
        return new_files.append_data_files(self.tbl, files, self.writer.source)

    def write_mode(self, operation: WriteOperation) -> WriteMode:
        """The table's ``write.delete.mode`` / ``write.update.mode`` / ``write.merge.mode``
        (copy-on-write when unset)."""
        return ops.write_mode(self.tbl, operation.value, self.writer.uri)

    def commit_row_changes(self, changes: RowChanges) -> RowChangeCommit:
        """The files holding removed rows rewritten without them (copy-on-write) or given
        position-delete files (merge-on-read; format v2 only: v3 tables take deletion vectors,
        which this writer does not write), the added rows appended, in one snapshot
        (:func:`.pyiceberg_ops.row_changes`)."""
        if changes.mode is WriteMode.MERGE_ON_READ and self.tbl.format_version != 2:
            raise RowChangesRefused(
                f"merge-on-read of format-version {self.tbl.format_version} tables is not written here "
                "(v3 takes deletion vectors)"
            )
        w = self.writer
        return ops.row_changes(self.tbl, changes, w.source, w.storage, w.uri)

    def commit_erase(self, rewrites: Sequence[FileRewrite], subjects: int) -> tuple[Commit, dict[str, str]]:
        """The erase's overwrite snapshot on the table as the catalog has it now."""
        w = self.writer
        tbl = ops.open_for_write(w.source, w.uri)
        return erase_commit.commit_erase(
            tbl, w.source, w.storage, version=self.snapshot.version, rewrites=rewrites, subjects=subjects
        )
