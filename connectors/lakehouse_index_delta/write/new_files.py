"""New Delta data files written by the distributed append's tasks, and their commit.

Each task writes Parquet files into the table location (Hive-style partition folders,
statistics as the Delta log records them); the driver commits them as one append of add
actions through deltalake's write transaction.
"""

from __future__ import annotations

import datetime
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse_index.errors import WriteRefusedError
from lakehouse_index.io import Storage, join_uri
from lakehouse_index.sink.contract import NotDistributable, WrittenFile
from lakehouse_index.sink.rewrite import DICTIONARY_PAGE_BYTES
from lakehouse_index_delta.write.deltalake_ops import run

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
            inner,
            self.schema,
            filesystem=fs,
            compression="snappy",
            write_page_index=True,
            dictionary_pagesize_limit=DICTIONARY_PAGE_BYTES,
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
    run(
        lambda: dt_handle.create_write_transaction(
            actions, mode="append", schema=dt_handle.schema(), partition_by=partitions or None
        ),
    )
    dt_handle.update_incremental()
    return int(dt_handle.version())
