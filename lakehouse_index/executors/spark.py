"""The Spark executor: index entries computed by Spark (local or a cluster), written by pyarrow in tasks.

Reads the key (and payload) columns of every file with their row positions (``_row``
from Spark's ``_metadata``) and file ids (constant columns per file), lays them out
(range-partitioned by key, or hash-bucketed), sorts within partitions and writes them
with :class:`~lakehouse_index.executors.writer.FileWriter` inside the tasks.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse_index.config import ExecutorConfig
from lakehouse_index.executors.writer import read_root_index, writer_for
from lakehouse_index.expressions.spark import scalar_sql
from lakehouse_index.io import Storage, join_uri
from lakehouse_index.kinds.base import Executor, IndexJob, WriteTarget
from lakehouse_index.kinds.derived import IndexedColumns
from lakehouse_index.kinds.entries import FILE_ID, OP, PUT, ROW, VERSION
from lakehouse_index.kinds.layout import BUCKET_COLUMN, bucket_column
from lakehouse_index.kinds.moves import MoveMap
from lakehouse_index.log.entry import IndexFile
from lakehouse_index.read.datafiles import ROW_COLUMN
from lakehouse_index.read.spark_read import spark_frame, spark_schema
from lakehouse_index.source import Snapshot, TableSource

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


def qcol(name: str) -> Column:
    """A Spark column reference that survives dots and backticks in names."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def stored_column(columns: IndexedColumns, name: str) -> Column:
    """The Spark column of stored column ``name``: a table column, or an indexed expression's value."""
    from pyspark.sql import functions as F

    tree = columns.tree(name)
    return qcol(name) if tree is None else F.expr(scalar_sql(tree)).alias(name)


def collect_arrow(frame: DataFrame) -> pa.Table:
    """The rows of ``frame`` as one Arrow table in this process (``toArrow`` from pyspark 4)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    collect = getattr(frame, "toArrow", None)
    if collect is not None:
        return collect()
    batches = frame._collect_as_arrow()
    return pa.Table.from_batches(batches, schema=to_arrow_schema(frame.schema))


@dataclass(frozen=True)
class _BatchMap:
    """A ``mapInArrow`` function: ``fn`` of each batch as a table (picklable when ``fn`` is)."""

    fn: Callable[[pa.Table], pa.Table]

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield from self.fn(pa.Table.from_batches([batch])).to_batches()


class SparkExecutor(Executor):
    """Computes entries on Spark: for work above ``local_max_rows`` rows."""

    name = "spark"

    def __init__(self, spark: SparkSession, config: ExecutorConfig) -> None:
        self.spark = spark
        self.config = config

    def entries(
        self, source: TableSource, snapshot: Snapshot, columns: IndexedColumns, jobs: Sequence[IndexJob]
    ) -> DataFrame:
        """File ids and versions ride along the read as constant columns per file; a path with
        several jobs (a file removed and re-added within one refresh) is read once per job. An
        indexed expression is computed by Spark from its Spark SQL rendering (the tree the
        in-process evaluator computes, in the session's UTC and non-ANSI mode)."""
        from pyspark.sql import functions as F

        reads: dict[int, list[IndexJob]] = {}  # the n-th job of each path goes to read n
        seen: Counter[str] = Counter()
        for job in jobs:
            reads.setdefault(seen[job.entry.path], []).append(job)
            seen[job.entry.path] += 1
        frames = []
        for group in reads.values():
            per_file = {
                FILE_ID: (pa.int64(), {j.entry.path: j.file_id for j in group}),
                VERSION: (pa.int64(), {j.entry.path: j.ordinal for j in group}),
            }
            rows = spark_frame(
                self.spark,
                source,
                snapshot,
                files=[j.entry for j in group],
                columns=columns.sources,
                with_lineage=True,
                file_columns=per_file,
            )
            frames.append(
                rows.select(
                    *[stored_column(columns, c) for c in columns.names],
                    F.col(FILE_ID),
                    F.col(ROW_COLUMN).alias(ROW),
                    F.col(VERSION),
                    F.lit(PUT).cast("byte").alias(OP),
                )
            )
        return reduce(lambda a, b: a.unionByName(b), frames)

    def map_batches(
        self, frame: DataFrame, fn: Callable[[pa.Table], pa.Table], schema: pa.Schema
    ) -> DataFrame:
        """``fn`` of every Arrow batch in the tasks (``mapInArrow``)."""
        return frame.mapInArrow(_BatchMap(fn), spark_schema(schema))

    def sample(self, frame: DataFrame, columns: Sequence[str], fraction: float) -> pa.Table:
        """Spark's Bernoulli sample (seed 0) of ``columns``, collected as Arrow."""
        rows = frame.select(*[qcol(c) for c in columns])
        if fraction < 1.0:
            rows = rows.sample(withReplacement=False, fraction=fraction, seed=0)
        return collect_arrow(rows)

    def read_index(self, storage: Storage, index_dir: str, files: Sequence[IndexFile]) -> DataFrame:
        return self.spark.read.parquet(*[join_uri(index_dir, f.path) for f in files])

    def compact(self, entries: DataFrame, moves: MoveMap, live_ids: Sequence[int]) -> DataFrame:
        from pyspark.sql import Window
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StructField, StructType

        ids = self.spark.createDataFrame(
            [(i,) for i in live_ids], StructType([StructField(FILE_ID, LongType(), False)])
        )
        newest = Window.partitionBy(FILE_ID, ROW).orderBy(F.desc(VERSION), F.desc(OP))
        return (
            self.relocate(entries, moves)
            .join(F.broadcast(ids), FILE_ID)
            .withColumn("__rank", F.row_number().over(newest))
            .filter((F.col("__rank") == 1) & (F.col(OP) == PUT))
            .drop("__rank")
        )

    def relocate(self, entries: DataFrame, moves: MoveMap) -> DataFrame:
        """``entries`` with moved rows at their new address (one range join per link of the longest chain).

        Entries of rows in no move keep the removed file's id and are dropped with it.
        """
        if not moves:
            return entries
        from pyspark.sql import functions as F

        runs = F.broadcast(
            self.spark.createDataFrame(
                moves.spark_rows(), "__from long, __start long, __end long, __to_file long, __to_row long"
            )
        )
        fid, row = F.col(FILE_ID), F.col(ROW)
        moved = F.col("__to_file").isNotNull()
        for _ in range(moves.depth):
            joined = entries.join(
                runs, (fid == F.col("__from")) & (row >= F.col("__start")) & (row < F.col("__end")), "left"
            )
            entries = joined.select(
                *(
                    F.when(moved, F.col("__to_file")).otherwise(fid).alias(c)
                    if c == FILE_ID
                    else F.when(moved, F.col("__to_row") + row - F.col("__start")).otherwise(row).alias(c)
                    if c == ROW
                    else F.col(c)
                    for c in entries.columns
                )
            )
        return entries

    def write(self, entries: DataFrame, target: WriteTarget, rows: int = 0) -> tuple[IndexFile, ...]:
        layout = target.layout
        df = entries.select(*[qcol(f.name) for f in target.schema])
        order = [qcol(c) for c in layout.sort]
        bucket_col = None
        if layout.buckets is not None:
            bucket_col = BUCKET_COLUMN
            bucket = bucket_column(qcol(layout.buckets.column), layout.buckets)
            laid_out = df.withColumn(bucket_col, bucket).repartition(layout.buckets.count, bucket_col)
            order = [qcol(bucket_col), *order]
        else:
            n_files = max(1, math.ceil(rows / self.config.rows_per_index_file))
            laid_out = df.repartitionByRange(n_files, *[qcol(c) for c in layout.range_columns])
        task = writer_for(target, self.config, bucket_col)
        laid_out.sortWithinPartitions(*order).mapInArrow(task, "path string").collect()
        return read_root_index(target)
