"""Iceberg commits through pyiceberg, loaded through the table's catalog.

pyiceberg commits each transaction atomically through the catalog (the commit asserts
that the branch head did not move); a lost race raises ``CommitFailedException`` and
the operation is redone on the reloaded table, up to :data:`ATTEMPTS` times. Every
operation here is a function of the table state it runs on, so redoing it is the
format's rule for a retry. ``update`` (pyiceberg has none) reads the matching rows,
sets the columns and commits delete + append in one transaction.
"""

from __future__ import annotations

import datetime as dt
import functools
import pickle
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakehouse_index.errors import ReadOnlyTableError, WriteConflictError
from lakehouse_index.workflows.append_task import NotDistributable, WrittenFile
from lakehouse_index.workflows.reports import Commit

ATTEMPTS = 4


def open_for_write(source: Any, uri: str) -> Any:
    """The pyiceberg Table to commit to; ReadOnlyTableError for a table opened by path."""
    load = getattr(source, "catalog_table", None)
    tbl = load() if load is not None else None
    if tbl is None:
        raise ReadOnlyTableError(
            f"{uri}: an Iceberg table opened by path has no atomic commit; open it through its "
            "catalog (open_table(identifier, catalog=...)) to write"
        )
    return tbl


def _live_total(snapshot: Any) -> int | None:
    """Live rows of a snapshot from its summary (None when row-level deletes make it unknown)."""
    if snapshot is None:
        return 0
    summary = snapshot.summary
    if summary is None:
        return None
    props = summary.additional_properties if hasattr(summary, "additional_properties") else dict(summary)
    if int(props.get("total-position-deletes", 0)) or int(props.get("total-equality-deletes", 0)):
        return None
    total = props.get("total-records")
    return None if total is None else int(total)


def _in_table_schema(tbl: Any, data: pa.Table) -> pa.Table:
    target = tbl.schema().as_arrow()
    return data.select(target.names).cast(target)


def _with_retries(tbl: Any, op: Callable[[Any], Commit]) -> Commit:
    from pyiceberg.exceptions import CommitFailedException

    for attempt in range(ATTEMPTS):
        try:
            return op(tbl)
        except CommitFailedException as e:
            if attempt == ATTEMPTS - 1:
                raise WriteConflictError(
                    f"the Iceberg commit lost to concurrent writers {ATTEMPTS} times: {e}"
                ) from e
            tbl = tbl.catalog.load_table(tbl.name())
    raise AssertionError("unreachable")


def _head(tbl: Any) -> Any:
    return tbl.current_snapshot()


def _version(tbl: Any, before: Any) -> int:
    head = _head(tbl)
    if head is None:
        assert before is not None
        return int(before.snapshot_id)
    return int(head.snapshot_id)


def append(tbl: Any, data: pa.Table) -> Commit:
    """Append ``data``."""

    def op(t: Any) -> Commit:
        before = _head(t)
        t.append(_in_table_schema(t, data))
        return Commit(_version(t, before), rows_written=data.num_rows)

    return _with_retries(tbl, op)


def overwrite(tbl: Any, data: pa.Table, row_filter: Any | None) -> Commit:
    """Replace every row (``row_filter`` None) or the rows matching it with ``data``."""
    from pyiceberg.expressions import AlwaysTrue

    def op(t: Any) -> Commit:
        before = _head(t)
        total_before = _live_total(before)
        t.overwrite(_in_table_schema(t, data), overwrite_filter=row_filter or AlwaysTrue())
        total_after = _live_total(_head(t))
        deleted = None
        if total_before is not None and total_after is not None:
            deleted = total_before - (total_after - data.num_rows)
        return Commit(_version(t, before), rows_written=data.num_rows, rows_deleted=deleted)

    return _with_retries(tbl, op)


def delete(tbl: Any, row_filter: Any) -> Commit:
    """Delete the rows matching ``row_filter``."""

    def op(t: Any) -> Commit:
        before = _head(t)
        total_before = _live_total(before)
        t.delete(row_filter)
        total_after = _live_total(_head(t))
        deleted = None
        if total_before is not None and total_after is not None:
            deleted = total_before - total_after
        return Commit(_version(t, before), rows_deleted=deleted)

    return _with_retries(tbl, op)


def update(tbl: Any, row_filter: Any, values: Mapping[str, Any]) -> Commit:
    """Set ``values`` (Python literals) on the rows matching ``row_filter`` (delete + append, one commit)."""

    def op(t: Any) -> Commit:
        before = _head(t)
        if before is None:
            return Commit(0, rows_updated=0)
        rows = t.scan(row_filter=row_filter, snapshot_id=before.snapshot_id).to_arrow()
        if rows.num_rows == 0:
            return Commit(int(before.snapshot_id), rows_updated=0)
        schema = t.schema().as_arrow()
        for name, value in values.items():
            field = schema.field(name)
            rows = rows.set_column(
                rows.schema.get_field_index(name), field, pa.array([value] * rows.num_rows, field.type)
            )
        with t.transaction() as tx:
            tx.delete(row_filter)
            tx.append(_in_table_schema(t, rows))
        return Commit(_version(t, before), rows_updated=rows.num_rows)

    return _with_retries(tbl, op)


def _literal(value: Any) -> Any:
    """A Python value as pyiceberg binds it (dates and timestamps through ISO text)."""
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


def upsert(tbl: Any, data: pa.Table, on: Sequence[str]) -> Commit:
    """Rows matching a data row on ``on`` become that data row, other data rows are inserted.

    One transaction: the target rows whose key columns take the data's values are read
    (an ``IN`` filter per key column, a superset for composite keys), deleted, and
    appended back, each matched one replaced by its data row, together with the
    unmatched data rows. Like a SQL MERGE (and deltalake), every matching target row is
    updated, duplicates included; pyiceberg 0.12's own ``upsert`` refuses a target with
    duplicate keys, so it is not used. Keys are unique and not null in ``data``.
    """
    from pyiceberg import expressions

    ie: Any = expressions  # pyiceberg's expression classes are pydantic models mypy reads badly

    def op(t: Any) -> Commit:
        before = _head(t)
        incoming = _in_table_schema(t, data)
        if before is None:
            t.append(incoming)
            return Commit(_version(t, before), rows_written=incoming.num_rows, rows_updated=0)
        filters = [ie.In(c, {_literal(v) for v in incoming[c].to_pylist()}) for c in on]
        key_filter = functools.reduce(ie.And, filters)
        current = _in_table_schema(
            t, t.scan(row_filter=key_filter, snapshot_id=before.snapshot_id).to_arrow()
        )
        position = {key: i for i, key in enumerate(zip(*(incoming[c].to_pylist() for c in on), strict=True))}
        current_keys = zip(*(current[c].to_pylist() for c in on), strict=True) if current.num_rows else []
        matched_from: list[int] = []  # data row replacing each matched target row
        kept: list[bool] = []
        for key in current_keys:
            i = position.get(key)
            kept.append(i is None)
            if i is not None:
                matched_from.append(i)
        used = set(matched_from)
        inserted = [i for i in range(incoming.num_rows) if i not in used]
        parts = [
            current.filter(pa.array(kept, pa.bool_())) if current.num_rows else current,
            incoming.take(pa.array(matched_from, pa.int64())),
            incoming.take(pa.array(inserted, pa.int64())),
        ]
        with t.transaction() as tx:
            if current.num_rows:
                tx.delete(key_filter)
            tx.append(pa.concat_tables(parts))
        return Commit(_version(t, before), rows_written=len(inserted), rows_updated=len(matched_from))

    return _with_retries(tbl, op)


# ---------------------------------------------------------------- distributed append


class _IcebergFile:
    """An Iceberg data file being written by a task: the table's field ids in its schema,
    statistics (metrics) from its footer by pyiceberg's own helpers."""

    def __init__(self, files: IcebergFiles, partition: tuple[tuple[str, Any], ...]) -> None:
        from pyiceberg.io import load_file_io
        from pyiceberg.io.fileformat import FileFormatFactory
        from pyiceberg.io.pyarrow import schema_to_pyarrow
        from pyiceberg.manifest import FileFormat
        from pyiceberg.schema import sanitize_column_names
        from pyiceberg.table.locations import load_location_provider

        meta = files.metadata
        self.files = files
        self.file_schema = sanitize_column_names(meta.schema())
        self.arrow = schema_to_pyarrow(self.file_schema, include_field_ids=True)
        self.name = f"{uuid.uuid4().hex}.parquet"
        provider = load_location_provider(table_location=meta.location, table_properties=meta.properties)
        self.key = files.partition_key(partition)
        self.path = provider.new_data_location(data_file_name=self.name, partition_key=self.key)
        self.output = load_file_io(dict(files.io_properties), meta.location).new_output(self.path)
        model = FileFormatFactory.get(FileFormat.PARQUET)
        self.writer = model.create_writer(self.output, self.file_schema, meta.properties)
        self.rows = 0

    def write(self, rows: pa.Table) -> None:
        # Columns by position: the file schema's names may be sanitized versions of the table's.
        names = [f.name for f in self.files.metadata.schema().fields]
        columns = [rows[n].cast(f.type) for n, f in zip(names, self.arrow, strict=True)]
        self.writer.write(pa.Table.from_arrays(columns, schema=self.arrow))
        self.rows += rows.num_rows

    def close(self) -> WrittenFile:
        from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
        from pyiceberg.typedef import Record

        stats = self.writer.close()
        meta = self.files.metadata
        size = len(self.output)
        data_file = DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=self.path,
            file_format=FileFormat.PARQUET,
            partition=self.key.partition if self.key is not None else Record(),
            file_size_in_bytes=size,
            sort_order_id=None,
            spec_id=meta.default_spec_id,
            equality_ids=None,
            key_metadata=None,
            **stats.to_serialized_dict(),
        )
        return WrittenFile(self.name, self.path, size, self.rows, (), pickle.dumps(data_file))


@dataclass(frozen=True)
class IcebergFiles:
    """New data files of an Iceberg table partitioned by identity transforms (or not at
    all), as tasks write them (``append_task.DataFileFormat``)."""

    metadata: Any  # pyiceberg TableMetadata (pickles)
    io_properties: Mapping[str, str]
    partition_columns: tuple[str, ...]

    def partition_key(self, partition: tuple[tuple[str, Any], ...]) -> Any:
        """pyiceberg's PartitionKey of one partition's values (None: unpartitioned)."""
        if not partition:
            return None
        from pyiceberg.partitioning import PartitionFieldValue, PartitionKey

        spec, schema = self.metadata.spec(), self.metadata.schema()
        values = dict(partition)
        fields = [PartitionFieldValue(f, values[schema.find_column_name(f.source_id)]) for f in spec.fields]
        return PartitionKey(field_values=fields, partition_spec=spec, schema=schema)

    def open(self, partition: tuple[tuple[str, Any], ...]) -> _IcebergFile:
        """A new data file for rows of ``partition``."""
        return _IcebergFile(self, partition)


def new_files(tbl: Any, uri: str) -> IcebergFiles:
    """How tasks write data files into ``tbl``; NotDistributable for what they cannot write
    (partition transforms other than identity, format version 3)."""
    from pyiceberg.transforms import IdentityTransform

    meta = tbl.metadata
    spec, schema = meta.spec(), meta.schema()
    if any(not isinstance(f.transform, IdentityTransform) for f in spec.fields):
        raise NotDistributable(f"{uri} has partition transforms other than identity ({spec})")
    if meta.format_version > 2:
        raise NotDistributable(f"{uri} is format version {meta.format_version}")
    columns = tuple(schema.find_column_name(f.source_id) for f in spec.fields)
    return IcebergFiles(meta, dict(tbl.io.properties), columns)


def append_data_files(tbl: Any, files: Sequence[WrittenFile]) -> Commit:
    """One fast append of the data files tasks wrote (redone on the reloaded table after a lost race)."""
    data_files = [pickle.loads(f.commit_info) for f in files]
    rows = sum(f.rows for f in files)

    def op(t: Any) -> Commit:
        before = _head(t)
        with t.transaction() as tx, tx.update_snapshot().fast_append() as append:
            for d in data_files:
                append.append_data_file(d)
        return Commit(_version(t, before), rows_written=rows)

    return _with_retries(tbl, op)
