"""Writes through the API: check the input, commit through the format library, maintain indexes.

Every check runs before the commit, so bad input leaves the table and its indexes
unchanged: the table must be writable (not opened read-only, no writer feature the
format's writer cannot honour: :meth:`~lakehouse_index.sink.contract.TableWriter.begin`),
``data`` must fit the table schema, ``where`` may name only table columns, ``upsert``
keys must be unique and not null in ``data``. After the
commit, each index applies its ``auto_refresh`` policy (:mod:`.sync`) to every commit it
has not seen, including foreign commits that landed in between. If that fails, the
commit stands and :class:`~lakehouse_index.errors.IndexMaintenanceError` says which
index failed and how to recover.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from lakehouse_index.context import IndexContext
from lakehouse_index.errors import IndexMaintenanceError, SchemaMismatchError, WriteRefusedError
from lakehouse_index.executors.sizing import entry_bytes, runs_locally
from lakehouse_index.expressions import Predicate
from lakehouse_index.faults import crash_point
from lakehouse_index.sink.contract import (
    Commit,
    RowChangesRefused,
    SparkWriterMissing,
    SparkWrites,
    Transaction,
    WriteMode,
    WriteOperation,
    open_writer,
)
from lakehouse_index.sink.rewrite import WriteLineage
from lakehouse_index.workflows import data as inputs
from lakehouse_index.workflows import indexed_writes as indexed
from lakehouse_index.workflows.reports import WritePath, WriteResult, failure_message
from lakehouse_index.workflows.sync import sync_indexes

_log = logging.getLogger(__name__)


def begin(ctx: IndexContext, operation: WriteOperation) -> Transaction:
    """A transaction of the table's format writer for ``operation``, after the writability checks."""
    ctx.check_writable()
    return open_writer(ctx.source, ctx.storage, ctx.index_root).begin(operation)


def _where(where: Any, schema: pa.Schema, what: str) -> Predicate | None:
    if where is not None and not isinstance(where, str):
        raise WriteRefusedError(f"{what}: where must be SQL text, not {type(where).__name__}")
    return Predicate.of(where, schema)


def _columns_exist(names: Sequence[str], schema: pa.Schema, what: str) -> None:
    missing = [c for c in names if c not in schema.names]
    if missing:
        raise WriteRefusedError(f"{what}: no column(s) {missing} in the table (columns: {schema.names})")


def _set_values(values: Mapping[str, Any], schema: pa.Schema) -> dict[str, Any]:
    if not values:
        raise WriteRefusedError("update needs set={column: value, ...}")
    _columns_exist(list(values), schema, "update")
    out = {}
    for name, value in values.items():
        field = schema.field(name)
        if value is None and not field.nullable:
            raise WriteRefusedError(f"update: column {name!r} is NOT NULL; cannot set it to null")
        try:
            pa.array([value], field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as e:
            raise WriteRefusedError(
                f"update: {value!r} is not a value of column {name!r} ({field.type}): {e}"
            ) from e
        out[name] = value
    return out


def _finish(ctx: IndexContext, operation: WriteOperation, result: WriteResult) -> WriteResult:
    if not result.ok:
        what = f"{operation.value} committed version {result.table_version} of {ctx.uri}"
        raise IndexMaintenanceError(failure_message(what, result.failed), result)
    return result


def _commit_and_sync(
    ctx: IndexContext,
    operation: WriteOperation,
    previous: int,
    commit: Callable[[], Commit],
    start: float,
    note: str | None = None,
) -> WriteResult:
    """Run ``commit`` (the format library's write on version ``previous``), then every index's policy."""
    crash_point("write.before_commit")
    done = commit()
    crash_point("write.after_commit")
    sync = sync_indexes(ctx, raise_on_error=False)
    result = WriteResult(
        operation=operation.value,
        table_uri=ctx.uri,
        table_version=done.version,
        previous_version=previous,
        rows_written=done.rows_written,
        rows_deleted=done.rows_deleted,
        rows_updated=done.rows_updated,
        indexes=sync.indexes,
        seconds=time.perf_counter() - start,
        note=note,
        retries=done.retries,
    )
    return _finish(ctx, operation, result)


def _through_index(
    ctx: IndexContext,
    operation: WriteOperation,
    tx: Transaction,
    planned: indexed.PlannedWrite | None,
    fallback: Callable[[], Commit],
    start: float,
) -> WriteResult:
    """Commit the rows ``planned`` found through an index (then every index follows, placing the
    rewritten files by the commit's own lineage), or, without a plan or when the format's writer
    refuses its row changes, the format library's write ``fallback``."""
    if planned is None:
        return _commit_and_sync(ctx, operation, tx.snapshot.version, fallback, start)
    crash_point("write.before_commit")
    try:
        done = tx.commit_row_changes(planned.changes)
    except RowChangesRefused as e:  # before anything was written
        if planned.located.index is None:
            raise WriteRefusedError(
                f"{operation.value}: a where with expressions commits the rows this library's reader "
                f"finds, but {e}"
            ) from e
        note = f"index {planned.located.index!r} located the rows, but {e}"
        return _commit_and_sync(ctx, operation, tx.snapshot.version, fallback, start, note)
    crash_point("write.after_commit")
    # Removed rows matter to the refresh only as tombstones: those of rows marked deleted.
    marked = planned.changes.mode is WriteMode.MERGE_ON_READ
    lineage = WriteLineage(
        done.rewritten, planned.located.by_file() if marked else {}, frozenset(done.added_files)
    )
    sync = sync_indexes(ctx, raise_on_error=False, lineage=lineage)
    removed = planned.changes.rows_removed
    result = WriteResult(
        operation=operation.value,
        table_uri=ctx.uri,
        table_version=done.commit.version,
        previous_version=tx.snapshot.version,
        rows_written=planned.rows_written,
        rows_deleted=removed if planned.rows_updated is None else None,
        rows_updated=planned.rows_updated,
        indexes=sync.indexes,
        seconds=time.perf_counter() - start,
        path=WritePath.INDEX if planned.located.index is not None else WritePath.SCAN,
        index=planned.located.index,
        mode=planned.changes.mode.value,
        files_rewritten=tuple(planned.changes.removed)
        if planned.changes.mode is WriteMode.COPY_ON_WRITE
        else (),
        files_marked=done.marked,
        files_added=done.added_files,
        retries=done.commit.retries,
    )
    return _finish(ctx, operation, result)


def _format_spark_writes(ctx: IndexContext, frame: Any) -> tuple[SparkWrites | None, str | None]:
    """The format's own Spark writer for the Spark DataFrame ``frame`` (after the writability
    checks; unless ``ExecutorConfig.format_spark_writer`` is off), or None and the note saying
    what the session lacks for it (logged)."""
    ctx.check_writable()
    if not ctx.config.executor.format_spark_writer:
        return None, None
    writer = open_writer(ctx.source, ctx.storage, ctx.index_root)
    try:
        return writer.spark_writes(frame.sparkSession), None
    except SparkWriterMissing as e:  # before anything was written
        note = (
            f"{e}: the frame was written without the format's Spark writer (by this package's "
            "Spark tasks, or collected and written by the format library), which honours fewer "
            "writer features"
        )
    _log.info("%s: %s", ctx.uri, note)
    return None, note


def _by_format_spark(
    ctx: IndexContext,
    operation: WriteOperation,
    writes: SparkWrites,
    commit: Callable[[], Commit],
    start: float,
) -> WriteResult:
    """A Spark DataFrame written by the format's own Spark writer, then every index's policy
    (the indexes refresh from the commit's changes)."""
    note = f"written by {writes.name}"
    return _commit_and_sync(ctx, operation, writes.snapshot.version, commit, start, note)


def _frame_fits(ctx: IndexContext, frame: Any, schema: pa.Schema, keys: Sequence[str] = ()) -> None:
    """Refuse a Spark DataFrame with columns the table does not have (a MERGE's ``UPDATE SET *``
    would drop them silently) or without the upsert's key columns; the format's own Spark writer
    checks the rest (types, missing columns, what its writer features ask)."""
    extra = [c for c in frame.columns if c not in schema.names]
    if extra:
        raise SchemaMismatchError(
            f"data does not match the schema of {ctx.uri}: columns not in the table {extra} "
            f"(table columns: {schema.names})"
        )
    missing = [c for c in keys if c not in frame.columns]
    if missing:
        raise WriteRefusedError(f"upsert: no key column(s) {missing} in the data (columns: {frame.columns})")


def _noted(result: WriteResult, note: str | None) -> WriteResult:
    return result if note is None else dataclasses.replace(result, note=note)


def append(ctx: IndexContext, data: Any) -> WriteResult:
    """Append ``data`` (pyarrow, pandas or Spark); see :meth:`lakehouse_index.Table.append`.

    A Spark DataFrame is appended by the format's own Spark writer when its session has it
    (delta-spark, Iceberg's Spark runtime: the table's writer features are enforced by it),
    else, when it has more than ``cluster_local_max_rows`` rows (``local_max_rows`` when set),
    written by Spark with the index entries computed in the same job (:mod:`.spark_append`;
    the result's ``note`` says what was missing).
    Other data goes through the format library, then each index refreshes; with
    ``ExecutorConfig.write_time_entries_in_process``, when an index takes entries computed
    by the write, this process writes it the distributed way, on threads
    (:func:`.direct_append.append_rows`).
    """
    start = time.perf_counter()
    note = None
    if inputs.is_spark_frame(data):
        writes, note = _format_spark_writes(ctx, data)
        if writes is not None:
            _frame_fits(ctx, data, writes.snapshot.schema)
            return _by_format_spark(ctx, WriteOperation.APPEND, writes, lambda: writes.append(data), start)
    tx = begin(ctx, WriteOperation.APPEND)
    config = ctx.config.executor
    # Rows already in Spark stay there unless they are few: bringing them to this process
    # costs a transfer a Spark write does not, so they are sized as work beside a cluster.
    if inputs.is_spark_frame(data) and not runs_locally(
        config,
        inputs.spark_rows_estimate(data, config),
        row_bytes=entry_bytes(tx.snapshot.schema),
        cluster=True,
    ):
        from lakehouse_index.workflows import spark_append

        distributed = spark_append.append(ctx, tx, data, start)
        if distributed is not None:
            return _noted(distributed, note)
    rows = inputs.conform(inputs.to_arrow(data), tx.snapshot.schema, ctx.uri)
    if rows.num_rows and config.write_time_entries_in_process:
        from lakehouse_index.workflows import direct_append

        direct = direct_append.append_rows(ctx, tx, rows, start)
        if direct is not None:
            return _noted(direct, note)
    version = tx.snapshot.version
    return _commit_and_sync(ctx, WriteOperation.APPEND, version, lambda: tx.append(rows), start, note)


def _mode(mode: WriteMode | str | None) -> WriteMode | None:
    if mode is None:
        return None
    try:
        return WriteMode(mode)
    except ValueError:
        choices = tuple(m.value for m in WriteMode)
        raise WriteRefusedError(f"write mode must be one of {choices}, got {mode!r}") from None


def overwrite(
    ctx: IndexContext,
    data: Any,
    where: str | None = None,
    *,
    mode: WriteMode | str | None = None,
    use_indexes: bool = True,
) -> WriteResult:
    """Replace all rows, or those matching ``where``, with ``data``."""
    start = time.perf_counter()
    how = _mode(mode)
    tx = begin(ctx, WriteOperation.OVERWRITE)
    predicate = _where(where, tx.snapshot.schema, "overwrite")
    rows = inputs.conform(inputs.to_arrow(data), tx.snapshot.schema, ctx.uri)
    planned = None
    if predicate is not None:
        planned = indexed.plan_overwrite(ctx, tx, rows, predicate, how, use_indexes)
    return _through_index(
        ctx, WriteOperation.OVERWRITE, tx, planned, lambda: tx.overwrite(rows, predicate), start
    )


def delete(
    ctx: IndexContext, where: str, *, mode: WriteMode | str | None = None, use_indexes: bool = True
) -> WriteResult:
    """Delete the rows matching ``where``."""
    start = time.perf_counter()
    how = _mode(mode)
    tx = begin(ctx, WriteOperation.DELETE)
    if where is None:
        raise WriteRefusedError("delete needs where= (use where='TRUE' to delete every row)")
    predicate = _where(where, tx.snapshot.schema, "delete")
    assert predicate is not None
    planned = indexed.plan_delete(ctx, tx, predicate, how, use_indexes)
    return _through_index(ctx, WriteOperation.DELETE, tx, planned, lambda: tx.delete(predicate), start)


def update(
    ctx: IndexContext,
    where: str | None,
    values: Mapping[str, Any],
    *,
    mode: WriteMode | str | None = None,
    use_indexes: bool = True,
) -> WriteResult:
    """Set columns to Python literals on the rows matching ``where`` (every row when None)."""
    start = time.perf_counter()
    how = _mode(mode)
    tx = begin(ctx, WriteOperation.UPDATE)
    predicate = _where(where, tx.snapshot.schema, "update")
    checked = _set_values(values, tx.snapshot.schema)
    planned = None
    if predicate is not None:
        planned = indexed.plan_update(ctx, tx, predicate, checked, how, use_indexes)
    return _through_index(
        ctx, WriteOperation.UPDATE, tx, planned, lambda: tx.update(predicate, checked), start
    )


def upsert(
    ctx: IndexContext,
    data: Any,
    on: Sequence[str],
    *,
    mode: WriteMode | str | None = None,
    use_indexes: bool = True,
) -> WriteResult:
    """Update the rows matching ``data`` on the ``on`` columns, insert the rest.

    A Spark DataFrame is merged by the format's own Spark writer when its session has it
    (delta-spark's or Iceberg's MERGE INTO), else collected to this process (the result's ``note`` says so).
    """
    start = time.perf_counter()
    how = _mode(mode)
    keys = [on] if isinstance(on, str) else list(on)
    if not keys:
        raise WriteRefusedError("upsert needs on=[key columns]")
    note = None
    if inputs.is_spark_frame(data):
        writes, note = _format_spark_writes(ctx, data)
        if writes is not None:
            _columns_exist(keys, writes.snapshot.schema, "upsert")
            _frame_fits(ctx, data, writes.snapshot.schema, keys)
            inputs.check_unique_spark_keys(data, keys)
            return _by_format_spark(
                ctx, WriteOperation.UPSERT, writes, lambda: writes.upsert(data, keys), start
            )
    tx = begin(ctx, WriteOperation.UPSERT)
    _columns_exist(keys, tx.snapshot.schema, "upsert")
    rows = inputs.conform(inputs.to_arrow(data), tx.snapshot.schema, ctx.uri)
    inputs.check_unique_keys(rows, keys)
    planned = indexed.plan_upsert(ctx, tx, rows, keys, how) if use_indexes else None
    result = _through_index(ctx, WriteOperation.UPSERT, tx, planned, lambda: tx.upsert(rows, keys), start)
    return _noted(result, note)
