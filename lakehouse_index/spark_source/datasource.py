"""The ``lakehouse_index`` Python data source (pyspark ≥ 4.1; imported only by ``register_spark_source``).

Where each method runs: Spark creates the :class:`LakehouseIndexDataSource` and asks its
schema in a Python worker on the driver's host, pickles it, and plans the read in another
worker (``reader`` → ``pushFilters`` → ``partitions``); each task unpickles the reader and
calls ``read`` with one partition. The version is pinned when the source is created, so
every partition reads the same version even if the table moves on meanwhile.

Spark 4.1 to 4.3 keep the read planned with one query's pushed filters on the relation and
reuse it for a later query of the same DataFrame that pushes none (``df.where(f).show()``,
then ``df.count()`` reads only the rows of ``f``: ``PythonDataSourceV2.readInfo`` is shared by
every scan of the relation). So by default the pushed filters are all left to Spark and the
read is planned with the ``where`` option only, the same for every query of the DataFrame;
``pushFilters=true`` plans with the pushed ones as well, for a DataFrame queried once.
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from lakehouse_index.errors import QueryError, UnsupportedFeatureError
from lakehouse_index.expressions import Predicate
from lakehouse_index.expressions.pushed_filters import bind_filter
from lakehouse_index.read.spark_read import spark_schema
from lakehouse_index.spark_source.options import parse_options
from lakehouse_index.spark_source.planning import (
    Part,
    ReadShape,
    conjunction,
    plan_source_read,
    read_part,
    read_shape,
    resolve_version,
)
from lakehouse_index.spark_source.profiling import profiled

__all__ = ["SHORT_NAME", "LakehouseIndexDataSource", "LakehouseIndexReader"]

#: The format name: ``spark.read.format(SHORT_NAME)``, ``CREATE TEMPORARY VIEW v USING lakehouse_index``.
SHORT_NAME = "lakehouse_index"

_log = logging.getLogger("lakehouse_index.spark_source")


def _log_to_stderr() -> None:
    """Spark's Python workers configure no logging: show this source's INFO lines on stderr."""
    if not _log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        _log.addHandler(handler)
        _log.setLevel(logging.INFO)
        _log.propagate = False


def _arrow_schema(schema: StructType) -> pa.Schema:
    """``schema`` in Arrow, timestamps in UTC as the JVM expects them.

    pyspark 4.1 marks them UTC by default (``timestamp_utc=True``); later releases take the
    time zone by name (``timezone=``).
    """
    # Typed as pyspark 3.5's signature, which has neither keyword (this module needs 4.1+).
    convert: Any = to_arrow_schema
    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return convert(schema, timezone="UTC")
    return convert(schema, timestamp_utc=True)


class LakehouseIndexDataSource(DataSource):
    """``spark.read.format("lakehouse_index").load(path)``: a Delta or Iceberg table version, index-aware."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    @profiled("source")
    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.source_options = parse_options(dict(options))
        self.version = resolve_version(self.source_options)
        #: The version's columns and the data files' storage, for the reader and every task.
        self.shape: ReadShape = read_shape(self.source_options, self.version)
        #: The ``where`` option, bound to the version's schema: every row read satisfies it.
        self.where: Predicate | None = (
            None
            if self.source_options.where is None
            else Predicate.parse(self.source_options.where, self.shape.snapshot.schema)
        )

    @profiled("schema")
    def schema(self) -> StructType:
        """The version's logical schema (column mapping and Iceberg field ids applied)."""
        return spark_schema(self.shape.snapshot.schema)

    @profiled("reader")
    def reader(self, schema: StructType) -> LakehouseIndexReader:
        return LakehouseIndexReader(self, schema)

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        """Refused: writes go through the library, which commits and maintains the indexes."""
        raise UnsupportedFeatureError(
            "df.write.format('lakehouse_index') is not supported: write with "
            "li.open_table(path).append(df) / .overwrite(df), which maintain the indexes, or with "
            "the format's own writer followed by t.sync_indexes()"
        )


class LakehouseIndexReader(DataSourceReader):
    """Pushes filters into the read planner; one partition per file the plan keeps (or the index's rows)."""

    @profiled("reader_init")
    def __init__(self, source: LakehouseIndexDataSource, schema: StructType) -> None:
        self.options = source.source_options
        self.version = source.version
        self.shape = source.shape
        table_schema = self.shape.snapshot.schema
        self.columns: tuple[str, ...] = tuple(schema.fieldNames())
        unknown = [c for c in self.columns if c not in table_schema.names]
        if unknown:
            raise QueryError(f"the schema names column(s) {unknown} the table does not have")
        self.arrow_schema: pa.Schema = _arrow_schema(schema)
        self.where = source.where
        #: What the read is planned with and every row checked against (the where option,
        #: and the pushed filters with pushFilters=true).
        self.predicate: Predicate | None = source.where
        #: The pushed filters left to Spark (their text, for the log line).
        self.left_to_spark: tuple[str, ...] = ()

    @profiled("pushFilters")
    def pushFilters(self, filters: Sequence[Any]) -> list[Any]:
        """Bind each filter to the table schema; return those not applied exactly (Spark re-checks them).

        Without ``pushFilters=true`` every filter is returned and none is used (see the module).
        """
        if not self.options.push_filters:
            self.left_to_spark = tuple(repr(f) for f in filters)
            return list(filters)
        schema = self.shape.snapshot.schema
        bound, rest = [], []
        for f in filters:
            node = bind_filter(f, schema)
            if node is None:
                rest.append(f)
            else:
                bound.append(node)
        if self.where is not None:
            assert self.where.node is not None  # parsed from SQL text
            bound.insert(0, self.where.node)
        self.predicate = conjunction(bound, schema)
        self.left_to_spark = tuple(repr(f) for f in rest)
        return rest

    @profiled("partitions")
    def partitions(self) -> list[InputPartition]:
        """Plan the read (the only step that opens the table after the source's creation)."""
        read = plan_source_read(self.options, self.version, self.predicate, self.columns)
        _log_to_stderr()
        _log.info("%s\n  left to Spark: %s", read, ", ".join(self.left_to_spark) or "(none)")
        return [InputPartition(part) for part in read.parts]

    @profiled("read")
    def read(self, partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
        """The partition's rows; no table open, no log read, no planning (the partition carries its file)."""
        if partition is None:  # Spark reads once, with no partition, when the plan keeps none
            return
        part: Part = partition.value
        rows = read_part(self.shape, self.predicate, self.columns, part)
        yield from rows.cast(self.arrow_schema).to_batches()
