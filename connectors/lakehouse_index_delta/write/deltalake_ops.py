"""Delta commits through deltalake (delta-rs), after checking the table's writer protocol.

deltalake makes each commit atomically (put-if-absent of the next log file, retried
by its conflict checker); this module only chooses the deltalake call, refuses tables
whose writer features a deltalake commit could break, and reads the row counts
deltalake reports. A commit deltalake's checker refuses is WriteConflictError, on which the
writer asks the exact rules of :mod:`lakehouse_index.sink.conflicts`.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.errors import UnsupportedWriterFeatureError, WriteConflictError, WriteRefusedError
from lakehouse_index.expressions import Predicate
from lakehouse_index.expressions.datafusion import column_sql, sql_value
from lakehouse_index.io.uri import local_path
from lakehouse_index.read.datafiles import read_file
from lakehouse_index.sink.conflicts import Isolation
from lakehouse_index.sink.contract import Commit
from lakehouse_index.source import Snapshot, TableSource
from lakehouse_index_delta.features import refused_by_deltalake


def deltalake_options(storage_options: Mapping[str, str]) -> dict[str, str]:
    """``storage_options`` as deltalake takes them: an ``http://`` endpoint (an S3-compatible
    store on a private network) needs ``AWS_ALLOW_HTTP``. Commits to S3 are safe without a
    locking provider: deltalake writes each log entry with a conditional PUT."""
    out = dict(storage_options)
    upper = {k.upper(): v for k, v in out.items()}
    if upper.get("AWS_ENDPOINT_URL", "").startswith("http://") and "AWS_ALLOW_HTTP" not in upper:
        out["AWS_ALLOW_HTTP"] = "true"
    return out


def open_deltalake(uri: str, storage_options: Mapping[str, str], version: int | None = None) -> Any:
    """deltalake's ``DeltaTable`` at ``uri`` (our canonical URI; ``version``: time travel),
    opened with the table's ``storage_options`` (:func:`deltalake_options`)."""
    from deltalake import DeltaTable

    path = local_path(uri) if uri.startswith("file:") else uri
    return DeltaTable(path, version=version, storage_options=deltalake_options(storage_options) or None)


#: deltalake tables of this process between writes, by (uri, storage options): loading a
#: ``DeltaTable`` replays the log (20-30 ms at 70 commits, growing with the history), while
#: bringing a kept one up to date reads only the new commits (2.5 ms). A write takes its table
#: out, so two threads never share one; it is put back only after a successful commit.
_IDLE: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
_IDLE_LOCK = threading.Lock()


def _idle_key(uri: str, storage_options: Mapping[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    return uri, tuple(sorted(storage_options.items()))


def _kept(
    uri: str, storage_options: Mapping[str, str], table_id: Callable[[int], str | None], version: int
) -> Any | None:
    """The table kept for ``uri``, brought up to date; None when there is none, or when it is
    not the table the reader sees (``table_id(v)``: the reader's ``metaData`` id at version
    v) or lags behind ``version``.

    Its identity is checked before it catches up and again after: the commits of a table
    deleted and created again at the same location would otherwise replay onto the old
    table's state, and a later ``metaData`` action among them carries the new table's id.
    """
    with _IDLE_LOCK:
        dt = _IDLE.pop(_idle_key(uri, storage_options), None)
    if dt is None:
        return None
    try:
        if table_id(dt.version()) != dt.metadata().id:
            return None
        dt.update_incremental()
        same = dt.metadata().id == table_id(version) and dt.version() >= version
    except Exception:  # any failure to check or catch up: load the table afresh instead
        return None
    return dt if same else None


def keep(uri: str, storage_options: Mapping[str, str], dt: Any) -> None:
    """Keep ``dt`` (just committed to, successfully) for the next write to ``uri``."""
    with _IDLE_LOCK:
        _IDLE[_idle_key(uri, storage_options)] = dt


def open_for_write(
    uri: str,
    operation: str,
    storage_options: Mapping[str, str],
    table_id: Callable[[int], str | None],
    version: int,
) -> Any:
    """The deltalake DeltaTable at ``uri``, after checking that ``operation`` may commit to it
    (:func:`check_operation`; an append also by deltalake: :func:`check_writable`).

    ``table_id`` (the reader's ``metaData`` id at a version) and ``version`` (the latest the
    reader sees): a table kept from an earlier write (:func:`keep`) is reused only if it
    agrees with the reader. Other operations are checked against deltalake's writer features
    when they go through deltalake (a write an index planned commits by this package instead).
    """
    dt = _kept(uri, storage_options, table_id, version) or open_deltalake(uri, storage_options)
    if operation == "append":
        check_writable(dt, uri, operation)
    else:
        check_operation(dict(dt.metadata().configuration), uri, operation)
    return dt


def check_operation(config: Mapping[str, str], uri: str, operation: str) -> None:
    """Refuse ``operation`` on a version with table configuration ``config`` whoever commits it:
    rewrites of an append-only table, an isolation level this project does not know."""
    if operation != "append" and config.get("delta.appendOnly", "false").lower() == "true":
        raise WriteRefusedError(f"{uri}: the table is append-only (delta.appendOnly); {operation} refused")
    isolation(config, uri)


def check_writable(dt: Any, uri: str, operation: str) -> None:
    """Refuse ``operation`` through deltalake on ``dt``'s version: writer features a deltalake
    commit could break, and everything :func:`check_operation` refuses."""
    protocol = dt.protocol()
    config = dict(dt.metadata().configuration)
    schema = json.loads(dt.schema().to_json())
    refused = refused_by_deltalake(protocol.min_writer_version, protocol.writer_features, schema, config)
    if refused:
        raise UnsupportedWriterFeatureError(
            f"{uri}: the table declares writer feature(s) {refused} that a deltalake commit cannot "
            "honour; nothing was written. Write with an engine that supports them (e.g. Spark with "
            "delta-spark) and let `lakehouse-index watch` or `sync_indexes` maintain the indexes"
        )
    check_operation(config, uri, operation)


#: ``delta.isolationLevel`` values (case-insensitive), as Delta defines them.
ISOLATION_LEVELS = {
    "serializable": Isolation.SERIALIZABLE,
    "writeserializable": Isolation.WRITE_SERIALIZABLE,
}
ISOLATION_PROPERTY = "delta.isolationLevel"


def isolation(config: Mapping[str, str], uri: str) -> Isolation:
    """The table's ``delta.isolationLevel`` (WriteSerializable when unset); WriteRefusedError for a
    value Delta does not define (its rules could not be honoured)."""
    raw = config.get(ISOLATION_PROPERTY)
    if raw is None:
        return Isolation.WRITE_SERIALIZABLE
    level = ISOLATION_LEVELS.get(raw.lower())
    if level is None:
        raise WriteRefusedError(
            f"{uri}: {ISOLATION_PROPERTY}={raw!r} is not one of Serializable, WriteSerializable; "
            "nothing was written"
        )
    return level


def _conflict(e: Exception) -> Exception:
    from deltalake.exceptions import CommitFailedError

    if isinstance(e, CommitFailedError):
        return WriteConflictError(f"the Delta commit lost to a concurrent writer: {e}")
    return e


def run(fn: Callable[[], Any]) -> Any:
    """``fn()``, a lost commit race raised as WriteConflictError (the caller then asks the
    conflict rules whether to run it again)."""
    try:
        return fn()
    except Exception as e:
        mapped = _conflict(e)
        if mapped is e:
            raise
        raise mapped from e


def append(dt: Any, data: pa.Table) -> Commit:
    """Append ``data`` (already in the table schema)."""
    from deltalake import write_deltalake

    run(lambda: write_deltalake(dt, data, mode="append"))
    return Commit(dt.version(), rows_written=data.num_rows)


#: The column that marks the MERGE source's sentinel row in an overwrite with a predicate.
SENTINEL = "__lakehouse_index_sentinel"


def _with_sentinel(data: pa.Table) -> tuple[pa.Table, str]:
    """``data`` (every column made nullable), a False marker column, and one more row: nulls
    marked True; the marker's name (one the table does not use)."""
    marker = SENTINEL
    while marker in data.column_names:
        marker += "_"
    schema = pa.schema([f.with_nullable(True) for f in data.schema])
    rows = data.cast(schema).append_column(marker, pa.array([False] * data.num_rows, pa.bool_()))
    sentinel = pa.table(
        {**{f.name: pa.nulls(1, f.type) for f in schema}, marker: pa.array([True])},
        schema=rows.schema,
    )
    return pa.concat_tables([rows, sentinel]), marker


def overwrite(dt: Any, data: pa.Table, where_target_sql: str | None) -> Commit:
    """Replace every row (``where_target_sql`` None) or the rows where it (the predicate on the
    target alias ``t``) is TRUE with ``data``, in one commit.

    With a predicate, one MERGE of the data plus a sentinel row: ``ON where(t) AND s.sentinel``
    matches every target row where the predicate is TRUE to the sentinel, and deletes it (files
    without a matching row are kept as they are); the data rows match nothing and are inserted
    (the sentinel is not), so the data need not match the predicate (deltalake's replaceWhere
    would insist). deltalake takes the predicate as the MERGE's read predicate: it scans only
    the files that may hold matching rows, and its conflict checker commits past concurrent
    appends whose statistics exclude them (a MERGE ``ON FALSE`` with a not-matched-by-source
    delete reads, and conflicts over, the whole table).
    """
    from deltalake import write_deltalake

    if where_target_sql is None:
        run(lambda: write_deltalake(dt, data, mode="overwrite"))
        return Commit(dt.version(), rows_written=data.num_rows)
    source, marker = _with_sentinel(data)
    mark = column_sql(marker, "s")
    values = {column_sql(c): column_sql(c, "s") for c in data.column_names}
    metrics = run(
        lambda: (
            dt.merge(source, predicate=f"({where_target_sql}) AND {mark}", source_alias="s", target_alias="t")
            .when_matched_delete()
            .when_not_matched_insert(updates=values, predicate=f"NOT {mark}")
            .execute()
        ),
    )
    return Commit(
        dt.version(),
        rows_written=int(metrics.get("num_target_rows_inserted", data.num_rows)),
        rows_deleted=metrics.get("num_target_rows_deleted"),
    )


def delete(dt: Any, where_sql: str) -> Commit:
    """Delete the rows matching ``where_sql``."""
    metrics = run(lambda: dt.delete(where_sql))
    return Commit(dt.version(), rows_deleted=metrics.get("num_deleted_rows"))


def update(dt: Any, where_sql: str, updates: Mapping[str, str]) -> Commit:
    """Set columns (DataFusion SQL literals) on the rows matching ``where_sql``."""
    metrics = run(lambda: dt.update(updates=dict(updates), predicate=where_sql))
    return Commit(dt.version(), rows_updated=metrics.get("num_updated_rows"))


#: Distinct values of a key column up to which an upsert names them in its MERGE condition
#: (beyond: their range).
KEYS_NAMED = 1000


_BOUNDED_KEY_TYPES = (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string, pa.types.is_date)


def _key_bounds(data: pa.Table, on: Sequence[str]) -> list[str]:
    """Conditions on the target's key columns that the MERGE's key equality implies: each key
    column among the data's values (their range beyond :data:`KEYS_NAMED` of them), for columns
    of integer, string and date types.

    deltalake derives the MERGE's read predicate from them: it scans only the files whose
    statistics may hold those keys, and its conflict checker commits past concurrent appends
    whose files' statistics exclude them. Without them the MERGE reads the whole table and
    conflicts with every concurrent append.
    """
    out = []
    for c in on:
        column = data.column(c)
        t = column.type
        if not any(is_type(t) for is_type in _BOUNDED_KEY_TYPES):
            continue
        target = column_sql(c, "t")
        values = [v for v in pc.unique(column).to_pylist() if v is not None]
        if len(values) <= KEYS_NAMED:
            out.append(f"{target} IN ({', '.join(sql_value(v, t) for v in values)})")
        else:
            bounds = pc.min_max(column)
            low, high = (sql_value(bounds[b].as_py(), t) for b in ("min", "max"))
            out.append(f"{target} >= {low} AND {target} <= {high}")
    return out


def upsert(dt: Any, data: pa.Table, on: Sequence[str]) -> Commit:
    """MERGE ``data`` on the ``on`` columns: matched rows updated, the rest inserted (the
    condition narrowed by :func:`_key_bounds`, which changes no match)."""
    equal = [f"{column_sql(c, 't')} = {column_sql(c, 's')}" for c in on]
    predicate = " AND ".join(equal + _key_bounds(data, on))
    metrics = run(
        lambda: (
            dt.merge(data, predicate=predicate, source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        ),
    )
    return Commit(
        dt.version(),
        rows_written=metrics.get("num_target_rows_inserted"),
        rows_updated=metrics.get("num_target_rows_updated"),
    )


def refuse_nan_rewrites(
    source: TableSource, snap: Snapshot, dt: Any, predicate: Predicate | None, what: str
) -> None:
    """Refuse a delete, update or overwrite(where) that deltalake would corrupt.

    deltalake (1.6) rewrites the files holding matching rows with the values of a float
    column the predicate reads taken from the file's statistics when they say it holds
    one value, and statistics leave NaN out: ``g = [1.5, NaN]`` under ``g IS NOT NULL``
    comes back ``[1.5, 1.5]``. When a file holds such a column with NaNs beside one other
    value, nothing is written. The files' float columns are read only when deltalake's
    statistics (``dt``'s add actions) say one of them holds a single value somewhere.
    """
    if predicate is None:
        return
    floats = sorted(c for c in predicate.columns if pa.types.is_floating(snap.schema.field(c).type))
    if not floats or not _statistics_say_constant(dt, floats):
        return
    for entry in snap.files.values():
        rows = read_file(source, snap, entry, floats)
        nan = [c for c in floats if _nan_beside_one_value(rows[c])]
        if nan:
            raise WriteRefusedError(
                f"{what} on {source.uri}: the where reads float column(s) {nan} holding NaN, whose "
                "values deltalake overwrites in the files it rewrites (a deltalake defect); nothing "
                "was written. Write with another engine (e.g. Spark with delta-spark), or name "
                "the rows by other columns"
            )


def _statistics_say_constant(dt: Any, columns: Sequence[str]) -> bool:
    """Whether deltalake's statistics of some file say a column of ``columns`` holds one value
    (min equal to max; -0.0 and 0.0 count as one), or cannot tell (no unambiguous statistics
    column for it)."""
    actions = pa.table(dt.get_add_actions(flatten=True))
    names = actions.column_names
    for c in columns:
        low, high = f"min.{c}", f"max.{c}"
        if names.count(low) != 1 or names.count(high) != 1:
            return True
        if pc.any(pc.equal(actions[low], actions[high])).as_py():
            return True
    return False


def _nan_beside_one_value(values: pa.ChunkedArray) -> bool:
    """Whether ``values`` hold NaN and, NaN and nulls aside, a single finite value (min == max).

    An infinite value gets no statistics (JSON has no infinity), so deltalake sees no constant
    there and keeps the NaNs: ``[NaN, inf]`` is written as it is."""
    nan = pc.fill_null(pc.is_nan(values), False)
    if not pc.any(nan).as_py():
        return False
    rest = values.filter(pc.invert(pc.or_(nan, pc.is_null(values))))
    if len(rest) == 0:
        return False
    bounds = pc.min_max(rest)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    return bool(low == high and math.isfinite(low))
