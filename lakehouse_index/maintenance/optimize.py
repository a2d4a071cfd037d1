"""Optimize: compact the LSM of an index (on Spark).

* ``quick`` merges the delta files into one delta file (tombstones and versions kept,
  so the exact window is unchanged);
* ``full`` merges everything into a new base: entries of rewritten files are first moved
  to their new address (lineage remap), then per row address the newest entry wins,
  tombstones and entries of removed files are dropped, removed files (and their moves)
  leave the file-id map. The new snapshot answers exactly from its own version on; older snapshots (and
  their data) stay for time travel until vacuum.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_index.io import Storage, join_uri
from lakehouse_index.kinds import secondary as sec
from lakehouse_index.kinds import skipping
from lakehouse_index.kinds.moves import MoveMap
from lakehouse_index.log.entry import Content, Level, LogEntry, SourceState
from lakehouse_index.maintenance.build import relative_to, write_sorted
from lakehouse_index.spec import SkippingIndex

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def needs_optimize(stable: LogEntry, mode: str) -> bool:
    """Whether ``optimize(mode)`` would change anything (else it is a no-op)."""
    if isinstance(stable.spec, SkippingIndex):
        removed = any(f.removed_ordinal is not None for f in stable.source.files)
        return len(stable.content.files) > 1 or removed
    deltas = [f for f in stable.content.files if f.level is Level.DELTA]
    if mode == "quick":
        return len(deltas) > 1
    removed = any(f.removed_ordinal is not None for f in stable.source.files)
    return bool(deltas) or removed


def _read(spark: SparkSession, index_dir: str, stable: LogEntry, level: Level | None) -> DataFrame:
    paths = [join_uri(index_dir, f.path) for f in stable.content.files if level is None or f.level is level]
    return spark.read.parquet(*paths)


def _schema(storage: Storage, index_dir: str, stable: LogEntry) -> pa.Schema:
    """The index schema, as the snapshot's newest index file has it."""
    fs, path = storage.arrow(join_uri(index_dir, stable.content.files[-1].path))
    return pq.read_schema(path, filesystem=fs)


def optimize_quick(
    spark: SparkSession, stable: LogEntry, storage: Storage, index_dir: str, data_dir: str
) -> Content:
    """One delta file instead of many."""
    deltas = [f for f in stable.content.files if f.level is Level.DELTA]
    merged = write_sorted(
        _read(spark, index_dir, stable, Level.DELTA),
        stable.spec,
        _schema(storage, index_dir, stable),
        storage,
        index_dir,
        data_dir,
        Level.DELTA,
        sum(f.rows for f in deltas),
    )
    bases = tuple(f for f in stable.content.files if f.level is Level.BASE)
    return Content(bases + merged, stable.content.base_ordinal)


def optimize_full(
    spark: SparkSession, stable: LogEntry, storage: Storage, index_dir: str, data_dir: str
) -> tuple[SourceState, Content]:
    """A new base holding exactly the live entries of the snapshot."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    src = stable.source
    live_ids = [(f.id,) for f in src.files if f.removed_ordinal is None]
    state = _live_state(src)
    if not stable.content.files or not live_ids:
        return state, Content((), src.ordinal)
    ids = spark.createDataFrame(live_ids, StructType([StructField(sec.FILE_ID, LongType(), False)]))
    newest = Window.partitionBy(sec.FILE_ID, sec.ROW).orderBy(F.desc(sec.VERSION), F.desc(sec.OP))
    entries = (
        _relocate(spark, _read(spark, index_dir, stable, None), MoveMap.of(src.files, src.ordinal))
        .join(F.broadcast(ids), sec.FILE_ID)
        .withColumn("__rank", F.row_number().over(newest))
        .filter((F.col("__rank") == 1) & (F.col(sec.OP) == sec.PUT))
        .drop("__rank")
    )
    schema = _schema(storage, index_dir, stable)
    files = write_sorted(
        entries, stable.spec, schema, storage, index_dir, data_dir, Level.BASE, stable.content.rows
    )
    return state, Content(files, src.ordinal)


def _relocate(spark: SparkSession, entries: DataFrame, moves: MoveMap) -> DataFrame:
    """``entries`` with moved rows at their new address (one range join per link of the longest chain).

    Entries of rows in no move keep the removed file's id and are dropped with it.
    """
    if not moves:
        return entries
    from pyspark.sql import functions as F

    runs = F.broadcast(
        spark.createDataFrame(
            moves.spark_rows(), "__from long, __start long, __end long, __to_file long, __to_row long"
        )
    )
    fid, row = F.col(sec.FILE_ID), F.col(sec.ROW)
    moved = F.col("__to_file").isNotNull()
    for _ in range(moves.depth):
        joined = entries.join(
            runs, (fid == F.col("__from")) & (row >= F.col("__start")) & (row < F.col("__end")), "left"
        )
        entries = joined.select(
            *(
                F.when(moved, F.col("__to_file")).otherwise(fid).alias(c)
                if c == sec.FILE_ID
                else F.when(moved, F.col("__to_row") + row - F.col("__start")).otherwise(row).alias(c)
                if c == sec.ROW
                else F.col(c)
                for c in entries.columns
            )
        )
    return entries


def optimize_skipping(
    stable: LogEntry, storage: Storage, index_dir: str, data_dir: str
) -> tuple[SourceState, Content]:
    """Both modes for a skipping index: one file with the rows of the live files (pyarrow, no JVM)."""
    state = _live_state(stable.source)
    live = [f.id for f in state.files]
    data = skipping.load(storage, index_dir, stable.content.files, live)
    rel = relative_to(index_dir, join_uri(data_dir, "skipping.parquet"))
    files = (skipping.write_skipping_file(data.rows, storage, index_dir, rel, Level.BASE),) if live else ()
    return state, Content(files, stable.source.ordinal)


def _live_state(src: SourceState) -> SourceState:
    """The file-id map without files that left the table."""
    return SourceState(
        src.format,
        src.table_uri,
        src.version,
        src.ordinal,
        src.timestamp_ms,
        tuple(f for f in src.files if f.removed_ordinal is None),
        src.next_file_id,
    )
