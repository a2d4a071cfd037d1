"""New Iceberg data files written by the distributed append's tasks, and their commit.

Each task writes Parquet files with the table's field ids where pyiceberg's location
provider puts them, with the metrics pyiceberg computes from the footer; the driver commits
them as one fast append (redone on the reloaded table after a lost race).
"""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakehouse_index.sink.conflicts import Isolation
from lakehouse_index.sink.contract import Commit, NotDistributable, WrittenFile
from lakehouse_index.sink.read_set import ReadSet
from lakehouse_index.source import TableSource
from lakehouse_index_iceberg.write.pyiceberg_ops import head, version_after, with_retries


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


def append_data_files(tbl: Any, files: Sequence[WrittenFile], source: TableSource) -> Commit:
    """One fast append of the data files tasks wrote (redone on the reloaded table after a lost race)."""
    data_files = [pickle.loads(f.commit_info) for f in files]
    rows = sum(f.rows for f in files)

    def op(t: Any) -> Commit:
        before = head(t)
        with t.transaction() as tx, tx.update_snapshot().fast_append() as append:
            for d in data_files:
                append.append_data_file(d)
        return Commit(version_after(t, before), rows_written=rows)

    return with_retries(tbl, source, ReadSet.nothing(), Isolation.SERIALIZABLE, "append", op)
