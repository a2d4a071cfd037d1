"""Writes through the API: check the input, commit through the format library, maintain indexes.

Every check runs before the commit, so bad input leaves the table and its indexes
unchanged: the table must be writable (not opened read-only, no writer feature the
format library cannot honour), ``data`` must fit the table schema, ``where`` may name
only table columns, ``upsert`` keys must be unique and not null in ``data``. After the
commit, each index applies its ``auto_refresh`` policy (:mod:`.sync`) to every commit it
has not seen, including foreign commits that landed in between. If that fails, the
commit stands and :class:`~lakehouse_index.errors.IndexMaintenanceError` says which
index failed and how to recover.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.errors import IndexMaintenanceError, ReadOnlyTableError, WriteRefusedError
from lakehouse_index.expressions import Predicate
from lakehouse_index.faults import crash_point
from lakehouse_index.io import join_uri
from lakehouse_index.log.store import INDEX_DIR_NAME
from lakehouse_index.read.datafiles import read_file
from lakehouse_index.source import Snapshot
from lakehouse_index.workflows import data as inputs
from lakehouse_index.workflows import predicates
from lakehouse_index.workflows.facade import IndexedTable
from lakehouse_index.workflows.reports import WriteResult, failure_message
from lakehouse_index.workflows.sync import sync_indexes


def check_writable(table: IndexedTable) -> None:
    """ReadOnlyTableError when ``table`` was opened with its indexes outside the table.

    A separate ``index_root`` is how a table is opened read-only: its indexes live
    elsewhere because this process may not write the table's location, so writes are
    refused (``sync_indexes`` and ``watch`` still maintain the indexes).
    """
    if table.index_root.rstrip("/") != join_uri(table.uri, INDEX_DIR_NAME):
        raise ReadOnlyTableError(
            f"{table.uri} is opened read-only (its indexes live under a separate index_root "
            f"{table.index_root}); writes are refused. Open it without index_root to write"
        )


def _where(where: Any, schema: pa.Schema, what: str) -> Predicate | None:
    if where is not None and not isinstance(where, str):
        raise WriteRefusedError(f"{what}: where must be SQL text, not {type(where).__name__}")
    return Predicate.of(where, schema)


def _refuse_nan_rewrites(
    table: IndexedTable, snap: Snapshot, handle: Any, predicate: Predicate | None, what: str
) -> None:
    """Refuse a Delta delete, update or overwrite(where) that deltalake would corrupt.

    deltalake (1.6) rewrites the files holding matching rows with the values of a float
    column the predicate reads taken from the file's statistics when they say it holds
    one value, and statistics leave NaN out: ``g = [1.5, NaN]`` under ``g IS NOT NULL``
    comes back ``[1.5, 1.5]``. When a file holds such a column with NaNs beside one other
    value, nothing is written. The files' float columns are read only when deltalake's
    statistics (``handle``'s add actions) say one of them holds a single value somewhere.
    """
    if predicate is None:
        return
    floats = sorted(c for c in predicate.columns if pa.types.is_floating(snap.schema.field(c).type))
    if not floats or not _statistics_say_constant(handle, floats):
        return
    for entry in snap.files.values():
        rows = read_file(table.source, snap, entry, floats)
        nan = [c for c in floats if _nan_beside_one_value(rows[c])]
        if nan:
            raise WriteRefusedError(
                f"{what} on {table.uri}: the where reads float column(s) {nan} holding NaN, whose "
                "values deltalake overwrites in the files it rewrites (a deltalake defect); nothing "
                "was written. Write with another engine (e.g. Spark with delta-spark), or name "
                "the rows by other columns"
            )


def _statistics_say_constant(handle: Any, columns: Sequence[str]) -> bool:
    """Whether deltalake's statistics of some file say a column of ``columns`` holds one value
    (min equal to max; -0.0 and 0.0 count as one), or cannot tell (no unambiguous statistics
    column for it)."""
    actions = pa.table(handle.get_add_actions(flatten=True))
    names = actions.column_names
    for c in columns:
        low, high = f"min.{c}", f"max.{c}"
        if names.count(low) != 1 or names.count(high) != 1:
            return True
        if pc.any(pc.equal(actions[low], actions[high])).as_py():
            return True
    return False


def _nan_beside_one_value(values: pa.ChunkedArray) -> bool:
    """Whether ``values`` hold NaN and, NaN and nulls aside, a single value (min == max)."""
    nan = pc.fill_null(pc.is_nan(values), False)
    if not pc.any(nan).as_py():
        return False
    rest = values.filter(pc.invert(pc.or_(nan, pc.is_null(values))))
    if len(rest) == 0:
        return False
    bounds = pc.min_max(rest)
    return bool(bounds["min"].as_py() == bounds["max"].as_py())


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


def _commit_and_sync(
    table: IndexedTable,
    operation: str,
    snap: Snapshot,
    commit: Callable[[], Any],
    start: float,
    handle: Any = None,
) -> WriteResult:
    """Run ``commit``, then every index's policy. ``handle``: a deltalake table the commit
    went through, kept for the next write once the commit succeeded."""
    crash_point("write.before_commit")
    done = commit()
    crash_point("write.after_commit")
    if handle is not None:
        from lakehouse_index.workflows import delta_commit

        delta_commit.keep(table.uri, table.storage.options, handle)
    sync = sync_indexes(table, raise_on_error=False)
    result = WriteResult(
        operation=operation,
        table_uri=table.uri,
        table_version=done.version,
        previous_version=snap.version,
        rows_written=done.rows_written,
        rows_deleted=done.rows_deleted,
        rows_updated=done.rows_updated,
        indexes=sync.indexes,
        seconds=time.perf_counter() - start,
    )
    if not result.ok:
        raise IndexMaintenanceError(
            failure_message(f"{operation} committed version {done.version} of {table.uri}", result.failed),
            result,
        )
    return result


def _open(table: IndexedTable, operation: str) -> tuple[Snapshot, Any]:
    """The latest snapshot and the format library's handle, after the writability checks."""
    check_writable(table)
    if table.format == "delta":
        from lakehouse_index.workflows import delta_commit

        snap = table.snapshot()
        handle = delta_commit.open_for_write(
            table.uri, operation, table.storage.options, table.source.table_id, snap.version
        )
        return snap, handle
    if table.format == "iceberg":
        from lakehouse_index.workflows import iceberg_commit

        handle = iceberg_commit.open_for_write(table.source, table.uri)
        return table.snapshot(), handle
    raise ReadOnlyTableError(f"writes to {table.format} tables are not supported")


def append(table: IndexedTable, data: Any) -> WriteResult:
    """Append ``data`` (pyarrow, pandas or Spark); see :meth:`lakehouse_index.Table.append`.

    A Spark DataFrame of more than ``local_max_rows`` rows is written by Spark, with the
    index entries computed in the same job (:mod:`.spark_append`). Other data goes through
    the format library, then each index refreshes; with
    ``ExecutorConfig.write_time_entries_in_process``, when an index takes entries computed
    by the write, this process writes it the distributed way, on threads
    (:func:`.direct_append.append_rows`).
    """
    start = time.perf_counter()
    snap, handle = _open(table, "append")
    config = table.config.executor
    if inputs.is_spark_frame(data) and not config.runs_locally(inputs.spark_rows_estimate(data, config)):
        from lakehouse_index.workflows import spark_append

        distributed = spark_append.append(table, data, snap, handle, start)
        if distributed is not None:
            return distributed
    rows = inputs.conform(inputs.to_arrow(data), snap.schema, table.uri)
    if rows.num_rows and config.write_time_entries_in_process:
        from lakehouse_index.workflows import direct_append

        direct = direct_append.append_rows(table, rows, snap, handle, start)
        if direct is not None:
            return direct
    if table.format == "delta":
        from lakehouse_index.workflows import delta_commit as dc

        return _commit_and_sync(table, "append", snap, lambda: dc.append(handle, rows), start, handle)
    from lakehouse_index.workflows import iceberg_commit as ic

    return _commit_and_sync(table, "append", snap, lambda: ic.append(handle, rows), start)


def overwrite(table: IndexedTable, data: Any, where: str | None = None) -> WriteResult:
    """Replace all rows, or those matching ``where``, with ``data``."""
    start = time.perf_counter()
    snap, handle = _open(table, "overwrite")
    predicate = _where(where, snap.schema, "overwrite")
    rows = inputs.conform(inputs.to_arrow(data), snap.schema, table.uri)
    if table.format == "delta":
        from lakehouse_index.workflows import delta_commit as dc

        _refuse_nan_rewrites(table, snap, handle, predicate, "overwrite")
        sql = predicates.to_datafusion_sql(predicate) if predicate is not None else None
        target = predicates.to_datafusion_sql(predicate, "t") if predicate is not None else None
        return _commit_and_sync(
            table, "overwrite", snap, lambda: dc.overwrite(handle, rows, sql, target), start, handle
        )
    from lakehouse_index.workflows import iceberg_commit as ic

    return _commit_and_sync(
        table,
        "overwrite",
        snap,
        lambda: ic.overwrite(handle, rows, predicate, table.source, table.storage),
        start,
    )


def delete(table: IndexedTable, where: str) -> WriteResult:
    """Delete the rows matching ``where``."""
    start = time.perf_counter()
    snap, handle = _open(table, "delete")
    if where is None:
        raise WriteRefusedError("delete needs where= (use where='TRUE' to delete every row)")
    predicate = _where(where, snap.schema, "delete")
    assert predicate is not None
    if table.format == "delta":
        from lakehouse_index.workflows import delta_commit as dc

        _refuse_nan_rewrites(table, snap, handle, predicate, "delete")
        sql = predicates.to_datafusion_sql(predicate)
        return _commit_and_sync(table, "delete", snap, lambda: dc.delete(handle, sql), start, handle)
    from lakehouse_index.workflows import iceberg_commit as ic

    return _commit_and_sync(
        table, "delete", snap, lambda: ic.delete(handle, predicate, table.source, table.storage), start
    )


def update(table: IndexedTable, where: str | None, values: Mapping[str, Any]) -> WriteResult:
    """Set columns to Python literals on the rows matching ``where`` (every row when None)."""
    start = time.perf_counter()
    snap, handle = _open(table, "update")
    predicate = _where(where, snap.schema, "update")
    checked = _set_values(values, snap.schema)
    if table.format == "delta":
        from lakehouse_index.workflows import delta_commit as dc

        _refuse_nan_rewrites(table, snap, handle, predicate, "update")
        sql = predicates.to_datafusion_sql(predicate) if predicate is not None else "TRUE"
        # Quoted: deltalake reads an unquoted key with a dot as a path into a struct.
        updates = {
            predicates.column_sql(c): predicates.sql_value(v, snap.schema.field(c).type)
            for c, v in checked.items()
        }
        return _commit_and_sync(table, "update", snap, lambda: dc.update(handle, sql, updates), start, handle)
    from lakehouse_index.workflows import iceberg_commit as ic

    return _commit_and_sync(
        table,
        "update",
        snap,
        lambda: ic.update(handle, predicate, checked, table.source, table.storage),
        start,
    )


def upsert(table: IndexedTable, data: Any, on: Sequence[str]) -> WriteResult:
    """Update the rows matching ``data`` on the ``on`` columns, insert the rest."""
    start = time.perf_counter()
    keys = [on] if isinstance(on, str) else list(on)
    snap, handle = _open(table, "upsert")
    if not keys:
        raise WriteRefusedError("upsert needs on=[key columns]")
    _columns_exist(keys, snap.schema, "upsert")
    rows = inputs.conform(inputs.to_arrow(data), snap.schema, table.uri)
    inputs.check_unique_keys(rows, keys)
    if table.format == "delta":
        from lakehouse_index.workflows import delta_commit as dc

        return _commit_and_sync(table, "upsert", snap, lambda: dc.upsert(handle, rows, keys), start, handle)
    from lakehouse_index.workflows import iceberg_commit as ic

    return _commit_and_sync(
        table, "upsert", snap, lambda: ic.upsert(handle, rows, keys, table.source, table.storage), start
    )
