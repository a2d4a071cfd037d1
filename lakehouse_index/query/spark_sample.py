"""Samples as Spark DataFrames: the rows ``Table.sample`` returns, read on Spark.

The same choice (``index_queries.sample_plan``), weights and rules as the in-process sample
(:mod:`lakehouse_index.query.index_scan`), so the frame holds exactly the rows of
``Table.sample`` for the same arguments:

* **through a multi-column index** (:func:`index_sample`): the snapshot's index files are
  read as Parquet with ``_weight < fraction`` (and the predicate) pushed down, so Spark's
  reader skips every row group whose ``_weight`` statistics (the weight tiers sort small
  weights into their own row groups) or column statistics exclude it; entries above the
  coverage's cap are dropped, and the LSM merge, moved rows and the files the target still
  holds are the Spark executor's compaction
  (:meth:`~lakehouse_index.executors.spark.SparkExecutor.compact`). When the index holds
  every column asked for, entries of files whose deletes changed since indexing keep only
  the rows the target still holds; otherwise the rows are read from the answered data
  files (deletes applied) and semi-joined with the entries' addresses;
* **files the snapshot does not cover** (the hybrid scan), and every live file without an
  index (:func:`scan_sample`), are read on Spark and filtered by each row's weight,
  computed in the tasks by the same code as the index's (:class:`InSample`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse_index.config import ExecutorConfig, ReadConfig
from lakehouse_index.executors.spark import SparkExecutor, qcol
from lakehouse_index.expressions import Predicate
from lakehouse_index.io import Storage
from lakehouse_index.kinds.entries import FILE_ID, ROW, VERSION
from lakehouse_index.kinds.multicolumn.weights import WEIGHT, in_sample
from lakehouse_index.log.entry import LogEntry
from lakehouse_index.query.coverage import Coverage
from lakehouse_index.read.datafiles import ROW_COLUMN
from lakehouse_index.read.spark_read import arrow_to_spark_type, local_frame, spark_frame
from lakehouse_index.source import FileEntry, Snapshot, TableSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["InSample", "index_sample", "scan_sample"]


@dataclass(frozen=True)
class InSample:
    """A ``mapInArrow`` function keeping the rows whose weight is below ``fraction``: the weight
    of the ``identity`` columns cast to ``types`` (the table's), as an index stores it."""

    identity: tuple[str, ...]
    types: tuple[pa.DataType, ...]
    fraction: float

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = pa.Table.from_batches([batch])
            typed = [rows[c].cast(t) for c, t in zip(self.identity, self.types, strict=True)]
            values = pa.table(typed, names=list(self.identity))
            yield from rows.filter(in_sample(values, self.identity, self.fraction)).to_batches()


def _columns(target: Snapshot, columns: Sequence[str] | None) -> list[str]:
    return list(dict.fromkeys(columns)) if columns is not None else list(target.schema.names)


def _typed(frame: DataFrame, target: Snapshot, out_cols: Sequence[str]) -> DataFrame:
    """``out_cols`` of ``frame`` as the target's types (index files keep the types they were built with)."""
    return frame.select(
        *(qcol(c).cast(arrow_to_spark_type(target.schema.field(c).type)).alias(c) for c in out_cols)
    )


def scan_sample(
    spark: SparkSession,
    source: TableSource,
    target: Snapshot,
    files: Sequence[FileEntry],
    fraction: float,
    identity: Sequence[str],
    predicate: Predicate | None,
    columns: Sequence[str] | None,
    read: ReadConfig = ReadConfig(),
) -> DataFrame:
    """The rows of ``files`` of ``target`` matching ``predicate`` whose weight (of ``identity``)
    is below ``fraction``: read on Spark, weights computed in the tasks."""
    out_cols = _columns(target, columns)
    need = list(dict.fromkeys([*out_cols, *identity]))
    rows = spark_frame(spark, source, target, files=files, columns=need, where=predicate, config=read)
    types = tuple(target.schema.field(c).type for c in identity)
    kept = rows.mapInArrow(InSample(tuple(identity), types, fraction), rows.schema)
    return _typed(kept, target, out_cols)


def index_sample(
    spark: SparkSession,
    source: TableSource,
    storage: Storage,
    index_dir: str,
    entry: LogEntry,
    target: Snapshot,
    cov: Coverage,
    predicate: Predicate | None,
    fraction: float,
    columns: Sequence[str] | None,
    identity: Sequence[str],
    read: ReadConfig = ReadConfig(),
) -> DataFrame:
    """The sample of ``fraction`` of ``target`` (matching ``predicate``) through the index
    snapshot ``entry`` repaired by ``cov`` (see the module), as a Spark DataFrame."""
    from pyspark.sql import functions as F

    out_cols = _columns(target, columns)
    parts: list[DataFrame] = []
    files = [f for f in entry.content.files if not f.newer_than(cov.cap)]
    if cov.answered and files:
        executor = SparkExecutor(spark, ExecutorConfig())
        raw = executor.read_index(storage, index_dir, files).filter(
            (F.col(WEIGHT) < F.lit(fraction)) & (F.col(VERSION) <= cov.cap)
        )
        if predicate is not None:
            raw = raw.filter(F.expr(predicate.to_spark_sql()))
        live = executor.compact(raw, cov.moves, sorted(cov.answered))
        ids = {fe.path: fid for fid, fe in cov.answered.items()}
        if set(out_cols) <= set(entry.spec.columns):
            changed = sorted(cov.filter_deletes)
            if changed:  # rows of files whose deletes changed since indexing: those the target holds
                kept = _addresses(spark, source, target, [cov.answered[f] for f in changed], ids, read)
                alive = live.join(kept, [FILE_ID, ROW], "left_semi")
                in_changed = F.col(FILE_ID).isin(changed)
                live = live.filter(~in_changed).unionByName(alive.filter(in_changed))
            parts.append(_typed(live, target, out_cols))
        else:
            rows = spark_frame(
                spark,
                source,
                target,
                files=list(cov.answered.values()),
                columns=out_cols,
                where=predicate,
                with_lineage=True,
                file_columns={FILE_ID: (pa.int64(), ids)},
                config=read,
            )
            addresses = live.select(qcol(FILE_ID), qcol(ROW).alias(ROW_COLUMN))
            parts.append(_typed(rows.join(addresses, [FILE_ID, ROW_COLUMN], "left_semi"), target, out_cols))
    if cov.scan:
        scanned = scan_sample(spark, source, target, cov.scan, fraction, identity, predicate, out_cols, read)
        parts.append(scanned)
    if not parts:
        return local_frame(spark, [], [(c, target.schema.field(c).type) for c in out_cols], read)
    return reduce(lambda a, b: a.unionByName(b), parts)


def _addresses(
    spark: SparkSession,
    source: TableSource,
    target: Snapshot,
    files: Sequence[FileEntry],
    ids: dict[str, int],
    read: ReadConfig,
) -> DataFrame:
    """``(_file_id, _row)`` of every live row of ``files`` (the target's deletes applied)."""
    first = target.schema.names[0]
    rows = spark_frame(
        spark,
        source,
        target,
        files=files,
        columns=[first],
        with_lineage=True,
        file_columns={FILE_ID: (pa.int64(), {fe.path: ids[fe.path] for fe in files})},
        config=read,
    )
    return rows.select(qcol(FILE_ID), qcol(ROW_COLUMN).alias(ROW))
