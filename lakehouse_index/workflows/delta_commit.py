"""Delta commits through deltalake (delta-rs), after checking the table's writer protocol.

deltalake makes each commit atomically (put-if-absent of the next log file, retried
by its conflict checker); this module only chooses the deltalake call, refuses tables
whose writer features a deltalake commit could break, and reads the row counts
deltalake reports.
"""

from __future__ import annotations

import datetime
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse_index.errors import UnsupportedWriterFeatureError, WriteConflictError, WriteRefusedError
from lakehouse_index.io import Storage, join_uri
from lakehouse_index.io.uri import local_path
from lakehouse_index.workflows.append_task import NotDistributable, WrittenFile
from lakehouse_index.workflows.reports import Commit

#: Writer features a deltalake commit honours whatever the table holds (appendOnly is
#: enforced here: only appends are allowed when ``delta.appendOnly`` is true).
HONOURED_FEATURES = frozenset(
    {
        "appendOnly",
        "changeDataFeed",
        "timestampNtz",
        "variantType",
        "variantType-preview",
        "vacuumProtocolCheck",
    }
)
#: Writer features that only constrain writers while the table uses them (schema or
#: configuration); refused when in use, tolerated when merely listed.
METADATA_FEATURES = ("invariants", "checkConstraints", "generatedColumns", "identityColumns", "columnMapping")
#: Legacy writer versions (before table features) and the features each one implies.
LEGACY_FEATURES = {
    2: ("appendOnly", "invariants"),
    3: ("checkConstraints",),
    4: ("changeDataFeed", "generatedColumns"),
    5: ("columnMapping",),
    6: ("identityColumns",),
}
MAX_WRITER_VERSION = 7


def _fields(schema: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every field of a Delta schema JSON, nested ones included."""
    for f in schema.get("fields", ()):
        yield f
        yield from _nested(f.get("type"))


def _nested(t: Any) -> Iterator[Mapping[str, Any]]:
    if not isinstance(t, Mapping):
        return
    if t.get("type") == "struct":
        yield from _fields(t)
    elif t.get("type") == "array":
        yield from _nested(t.get("elementType"))
    elif t.get("type") == "map":
        yield from _nested(t.get("keyType"))
        yield from _nested(t.get("valueType"))


def _in_use(feature: str, schema: Mapping[str, Any], config: Mapping[str, str]) -> bool:
    """Whether a metadata-driven writer feature is in use by this table version."""
    metas = [f.get("metadata") or {} for f in _fields(schema)]
    if feature == "invariants":
        return any("delta.invariants" in m for m in metas)
    if feature == "checkConstraints":
        return any(k.startswith("delta.constraints.") for k in config)
    if feature == "generatedColumns":
        return any("delta.generationExpression" in m for m in metas)
    if feature == "identityColumns":
        return any(any(k.startswith("delta.identity.") for k in m) for m in metas)
    if feature == "columnMapping":
        return config.get("delta.columnMapping.mode", "none").lower() != "none"
    raise AssertionError(feature)


def refused_features(
    min_writer_version: int,
    writer_features: Sequence[str] | None,
    schema: Mapping[str, Any],
    config: Mapping[str, str],
) -> list[str]:
    """The writer features (or version) of a table a deltalake commit cannot honour."""
    if min_writer_version > MAX_WRITER_VERSION:
        return [f"minWriterVersion {min_writer_version}"]
    if min_writer_version >= 7:
        declared = list(writer_features or ())
    else:
        declared = [f for v, fs in LEGACY_FEATURES.items() if v <= min_writer_version for f in fs]
    out = []
    for f in declared:
        if f in HONOURED_FEATURES:
            continue
        if f in METADATA_FEATURES and not _in_use(f, schema, config):
            continue
        out.append(f)
    return out


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
    """The deltalake DeltaTable at ``uri``, after checking that ``operation`` may commit to it.

    ``table_id`` (the reader's ``metaData`` id at a version) and ``version`` (the latest the
    reader sees): a table kept from an earlier write (:func:`keep`) is reused only if it
    agrees with the reader.
    """
    dt = _kept(uri, storage_options, table_id, version) or open_deltalake(uri, storage_options)
    protocol = dt.protocol()
    config = dict(dt.metadata().configuration)
    schema = json.loads(dt.schema().to_json())
    refused = refused_features(protocol.min_writer_version, protocol.writer_features, schema, config)
    if refused:
        raise UnsupportedWriterFeatureError(
            f"{uri}: the table declares writer feature(s) {refused} that a deltalake commit cannot "
            "honour; nothing was written. Write with an engine that supports them (e.g. Spark with "
            "delta-spark) and let `lakehouse-index watch` or `sync_indexes` maintain the indexes"
        )
    if operation != "append" and config.get("delta.appendOnly", "false").lower() == "true":
        raise WriteRefusedError(f"{uri}: the table is append-only (delta.appendOnly); {operation} refused")
    return dt


def _conflict(e: Exception) -> Exception:
    from deltalake.exceptions import CommitFailedError

    if isinstance(e, CommitFailedError):
        return WriteConflictError(f"the Delta commit lost to a concurrent writer: {e}")
    return e


def _run(dt: Any, fn: Any) -> Any:
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

    _run(dt, lambda: write_deltalake(dt, data, mode="append"))
    return Commit(dt.version(), rows_written=data.num_rows)


def overwrite(dt: Any, data: pa.Table, where_sql: str | None, where_target_sql: str | None) -> Commit:
    """Replace every row (``where_sql`` None) or the rows matching it with ``data``, in one commit.

    With a predicate, a MERGE ``ON FALSE`` deletes the target rows matching it (files
    without a matching row are kept as they are) and inserts every data row, so the
    data need not match the predicate (deltalake's replaceWhere would insist).
    """
    from deltalake import write_deltalake

    if where_sql is None:
        _run(dt, lambda: write_deltalake(dt, data, mode="overwrite"))
        return Commit(dt.version(), rows_written=data.num_rows)
    assert where_target_sql is not None
    metrics = _run(
        dt,
        lambda: (
            dt.merge(data, predicate="FALSE", source_alias="s", target_alias="t")
            .when_not_matched_by_source_delete(predicate=where_target_sql)
            .when_not_matched_insert_all()
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
    metrics = _run(dt, lambda: dt.delete(where_sql))
    return Commit(dt.version(), rows_deleted=metrics.get("num_deleted_rows"))


def update(dt: Any, where_sql: str, updates: Mapping[str, str]) -> Commit:
    """Set columns (DataFusion SQL literals) on the rows matching ``where_sql``."""
    metrics = _run(dt, lambda: dt.update(updates=dict(updates), predicate=where_sql))
    return Commit(dt.version(), rows_updated=metrics.get("num_updated_rows"))


def upsert(dt: Any, data: pa.Table, on: Sequence[str]) -> Commit:
    """MERGE ``data`` on the ``on`` columns: matched rows updated, the rest inserted."""
    from lakehouse_index.workflows.predicates import column_sql

    predicate = " AND ".join(f"{column_sql(c, 't')} = {column_sql(c, 's')}" for c in on)
    metrics = _run(
        dt,
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


# ---------------------------------------------------------------- distributed append


#: Characters Hive-style partition directories escape (as Spark does), besides controls.
_HIVE_ESCAPED = frozenset("\"#%'*/:=?\\\x7f{[]^")
#: The directory name of a null partition value.
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def hive_escape(value: str) -> str:
    """A partition value as a Hive-style directory name component (``%XX`` escapes)."""
    return "".join(f"%{ord(c):02X}" if c in _HIVE_ESCAPED or ord(c) < 0x20 else c for c in value)


def partition_string(value: Any) -> str | None:
    """A partition value in the Delta log's string form (None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, str)):
        return str(value)
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value.isoformat()
    raise WriteRefusedError(f"partition value {value!r} of type {type(value).__name__} is not supported")


def _partition_type_ok(typ: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(typ)
        or pa.types.is_string(typ)
        or pa.types.is_large_string(typ)
        or pa.types.is_boolean(typ)
        or pa.types.is_date32(typ)
    )


#: Longest string whose exact value goes into the statistics (longer ones get none).
MAX_STAT_STRING = 256


class _ColumnStats:
    """min, max and null count of one column over the batches of a file."""

    def __init__(self, typ: pa.DataType) -> None:
        self.bounded = (
            pa.types.is_integer(typ)
            or pa.types.is_floating(typ)
            or pa.types.is_string(typ)
            or pa.types.is_large_string(typ)
            or pa.types.is_date32(typ)
        )
        self.floating = pa.types.is_floating(typ)
        self.nulls = 0
        self.lo: Any = None
        self.hi: Any = None

    def add(self, col: pa.ChunkedArray) -> None:
        self.nulls += col.null_count
        if not self.bounded:
            return
        if self.floating and pc.any(pc.is_nan(col)).as_py():
            self.bounded = False  # NaN has no place in min/max: leave the column without bounds
            return
        mm = pc.min_max(col)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if lo is None:
            return
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)

    def bounds(self) -> tuple[Any, Any] | None:
        if not self.bounded or self.lo is None:
            return None
        if isinstance(self.hi, str) and (len(self.hi) > MAX_STAT_STRING or len(self.lo) > MAX_STAT_STRING):
            return None
        if isinstance(self.lo, datetime.date):
            return self.lo.isoformat(), self.hi.isoformat()
        return self.lo, self.hi


class _DeltaFile:
    """A Delta data file being written by a task (partition columns stay in the path)."""

    def __init__(self, files: DeltaFiles, partition: tuple[tuple[str, Any], ...]) -> None:
        values = tuple((c, partition_string(v)) for c, v in partition)
        dirs = [f"{c}={HIVE_NULL if v is None else hive_escape(v)}" for c, v in values]
        self.name = f"part-{uuid.uuid4().hex}.snappy.parquet"
        self.relative = "/".join([*dirs, self.name])
        self.values = values
        self.files = files
        self.uri = join_uri(files.table_uri, *dirs, self.name)
        fs, inner = files.storage.arrow(self.uri)
        fs.create_dir(inner.rsplit("/", 1)[0], recursive=True)
        self.schema = files.data_schema()
        # The offset index lets a lookup read only the pages of a large row group holding its rows.
        self.writer = pq.ParquetWriter(
            inner, self.schema, filesystem=fs, compression="snappy", write_page_index=True
        )
        self.stats = {f.name: _ColumnStats(f.type) for f in self.schema}
        self.rows = 0

    def write(self, rows: pa.Table) -> None:
        data = rows.select(self.schema.names)
        for name, st in self.stats.items():
            st.add(data[name])
        self.writer.write_table(data, row_group_size=data.num_rows)
        self.rows += data.num_rows

    def close(self) -> WrittenFile:
        self.writer.close()
        bounds = {n: b for n, st in self.stats.items() if (b := st.bounds()) is not None}
        stats = {
            "numRecords": self.rows,
            "minValues": {n: b[0] for n, b in bounds.items()},
            "maxValues": {n: b[1] for n, b in bounds.items()},
            "nullCount": {n: st.nulls for n, st in self.stats.items()},
        }
        size = self.files.storage.stat(self.uri).size
        return WrittenFile(self.name, self.relative, size, self.rows, self.values, json.dumps(stats).encode())


@dataclass(frozen=True)
class DeltaFiles:
    """New data files of a Delta table, as tasks write them (``append_task.DataFileFormat``)."""

    storage: Storage
    table_uri: str
    schema: pa.Schema
    partition_columns: tuple[str, ...]

    def data_schema(self) -> pa.Schema:
        """The columns stored in the files (partition values live in the path and the log)."""
        return pa.schema([f for f in self.schema if f.name not in self.partition_columns])

    def open(self, partition: tuple[tuple[str, Any], ...]) -> _DeltaFile:
        """A new data file for rows of ``partition``."""
        return _DeltaFile(self, partition)


def new_files(dt_handle: Any, storage: Storage, uri: str, schema: pa.Schema) -> DeltaFiles:
    """How tasks write data files into the table at ``uri``; NotDistributable for partition
    column types whose log form is not written here."""
    partitions = tuple(dt_handle.metadata().partition_columns)
    bad = [c for c in partitions if not _partition_type_ok(schema.field(c).type)]
    if bad:
        raise NotDistributable(
            f"{uri}: partition column(s) {bad} are not of integer, string, boolean or date type"
        )
    return DeltaFiles(storage, uri, schema, partitions)


def commit_files(dt_handle: Any, files: Sequence[WrittenFile]) -> int:
    """Commit ``files`` as one append (add actions with statistics); the table version after it.

    deltalake's conflict checker retries the commit past concurrent appends, so the
    version returned may not be this commit's own: callers find it by its files.
    """
    from deltalake.transaction import AddAction

    now = int(time.time() * 1000)
    actions = [
        AddAction(f.path, f.size, dict(f.partition_values), now, True, f.commit_info.decode()) for f in files
    ]
    partitions = list(dt_handle.metadata().partition_columns)
    _run(
        dt_handle,
        lambda: dt_handle.create_write_transaction(
            actions, mode="append", schema=dt_handle.schema(), partition_by=partitions or None
        ),
    )
    dt_handle.update_incremental()
    return int(dt_handle.version())
