"""Locates and lookups of a Spark DataFrame of keys, run on Spark as joins against the index.

For key sets too large to hand to the driver (millions of keys, themselves the output of a
Spark job). The same index snapshot and repair as an in-process locate (the planner's
choice and its :class:`~lakehouse_index.query.coverage.Coverage`), the same rules, on Spark:

* the snapshot's index files are read as Parquet (delta files entirely above the cap left
  out), entries above the cap dropped, and the rest semi-joined with the keys on the key
  columns, null-safely (``<=>``: a null key matches rows whose key is null);
* the LSM merge, moved rows and the files the target still holds are the Spark executor's
  compaction (:meth:`~lakehouse_index.executors.spark.SparkExecutor.compact`): per row
  address the entry with the highest ``(_version, _op)`` wins, the winning PUTs are the rows;
* entries of files whose deletes changed since indexing keep only the rows the target
  still holds (their live positions, read on Spark with the target's deletes applied);
* files the snapshot does not answer for are read on Spark and joined with the keys.

Nothing is collected to the driver except the located files' paths a lookup reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

from lakehouse_index.config import ExecutorConfig, ReadConfig
from lakehouse_index.errors import QueryError, UnsupportedFeatureError
from lakehouse_index.executors.spark import SparkExecutor, qcol, stored_column
from lakehouse_index.io import Storage
from lakehouse_index.kinds.base import kind_of
from lakehouse_index.kinds.derived import IndexedColumns, indexed_columns
from lakehouse_index.kinds.entries import FILE_ID, ROW, VERSION
from lakehouse_index.log.entry import LogEntry
from lakehouse_index.query.coverage import Coverage
from lakehouse_index.query.lookup import FILE, returns_row_ids
from lakehouse_index.read.datafiles import ROW_COLUMN
from lakehouse_index.read.spark_read import FILE_PATH_COLUMN, arrow_to_spark_type, spark_frame
from lakehouse_index.source import Snapshot, TableSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["locate", "lookup"]

_KEY = "__key_"


def _keys(keys: DataFrame, key_columns: Sequence[str], stored: IndexedColumns) -> DataFrame:
    """The key columns of ``keys`` cast to the index's types, renamed apart (``__key_<column>``)."""
    missing = [c for c in key_columns if c not in keys.columns]
    if missing:
        raise QueryError(f"the DataFrame of keys lacks the key column(s) {missing}; it has {keys.columns}")
    return keys.select(
        *(qcol(c).cast(arrow_to_spark_type(stored.schema.field(c).type)).alias(_KEY + c) for c in key_columns)
    )


def _with_stored(rows: DataFrame, stored: IndexedColumns, names: Sequence[str]) -> DataFrame:
    """``rows`` (which hold their sources) with the indexed expressions among ``names`` computed."""
    exprs = [n for n in dict.fromkeys(names) if stored.tree(n) is not None]
    return rows.select("*", *(stored_column(stored, n) for n in exprs)) if exprs else rows


def _matching(rows: DataFrame, keys: DataFrame, key_columns: Sequence[str]) -> DataFrame:
    """The rows of ``rows`` whose key columns equal a key of ``keys`` (null-safe semi join)."""
    condition = reduce(lambda a, b: a & b, (qcol(c).eqNullSafe(qcol(_KEY + c)) for c in key_columns))
    return rows.join(keys, condition, "left_semi")


def locate(
    source: TableSource,
    storage: Storage,
    index_dir: str,
    entry: LogEntry,
    target: Snapshot,
    cov: Coverage,
    keys: DataFrame,
    read: ReadConfig = ReadConfig(),
) -> DataFrame:
    """Key, record key, ``_file`` and ``_row`` of every live row of ``target`` whose key is in
    the DataFrame ``keys`` (columns named as the key columns), as a Spark DataFrame.

    Through the index snapshot ``entry`` repaired by ``cov`` (see the module). The stable
    row ids an in-process locate adds without a record key are not computed here:
    UnsupportedFeatureError then.
    """
    from pyspark.sql import functions as F

    spec = entry.spec
    kind_of(spec).validate(spec, target)
    if returns_row_ids(spec, target):
        raise UnsupportedFeatureError(
            "a locate of a DataFrame of keys does not compute stable row ids: declare a record key "
            "on the index, or locate the keys in process (Table.locate with a list or Arrow keys)"
        )
    spark = keys.sparkSession
    stored = indexed_columns(spec, target)
    wanted = _keys(keys, spec.key, stored)
    cols = [*spec.key, *spec.record_key]
    out = [*(qcol(c) for c in cols), qcol(FILE), qcol(ROW)]
    parts: list[DataFrame] = []
    files = [f for f in entry.content.files if not f.newer_than(cov.cap)]
    if cov.answered and files:
        executor = SparkExecutor(spark, ExecutorConfig())
        raw = executor.read_index(storage, index_dir, files).filter(F.col(VERSION) <= cov.cap)
        live = executor.compact(_matching(raw, wanted, spec.key), cov.moves, sorted(cov.answered))
        paths = F.broadcast(
            spark.createDataFrame(
                [(fid, fe.path) for fid, fe in cov.answered.items()], f"{FILE_ID} long, {FILE} string"
            )
        )
        located = live.join(paths, FILE_ID)
        changed = sorted(cov.filter_deletes)
        if changed:
            # Rows of files whose deletes changed since indexing: only those the target holds.
            kept = spark_frame(
                spark,
                source,
                target,
                files=[cov.answered[fid] for fid in changed],
                columns=stored.sources_of([spec.key[0]]),
                with_lineage=True,
                config=read,
            ).select(qcol(FILE_PATH_COLUMN).alias("__path"), qcol(ROW_COLUMN).alias("__row"))
            in_changed = F.col(FILE_ID).isin(changed)
            alive = located.join(
                kept, (F.col(FILE) == F.col("__path")) & (F.col(ROW) == F.col("__row")), "left_semi"
            )
            located = located.filter(~in_changed).unionByName(alive.filter(in_changed))
        parts.append(located.select(*out))
    if cov.scan:
        scanned = spark_frame(
            spark,
            source,
            target,
            files=cov.scan,
            columns=stored.sources_of(cols),
            with_lineage=True,
            config=read,
        ).withColumnRenamed(FILE_PATH_COLUMN, FILE)
        parts.append(_matching(_with_stored(scanned, stored, cols), wanted, spec.key).select(*out))
    if not parts:
        return _empty(spark, stored, cols)
    return reduce(lambda a, b: a.unionByName(b), parts)


def lookup(
    source: TableSource,
    storage: Storage,
    index_dir: str,
    entry: LogEntry,
    target: Snapshot,
    cov: Coverage,
    keys: DataFrame,
    columns: Sequence[str] | None = None,
    read: ReadConfig = ReadConfig(),
) -> DataFrame:
    """The rows (``columns``, default all) of ``target`` whose key is in the DataFrame ``keys``,
    as a Spark DataFrame: the files :func:`locate` names are read on Spark (deletes applied)
    and joined with the keys; no other file holds one."""
    spec = entry.spec
    spark = keys.sparkSession
    names = list(columns) if columns is not None else [c.name for c in target.columns]
    unknown = [c for c in names if c not in target.schema.names]
    if unknown:
        raise QueryError(f"unknown columns {unknown}; the table has {target.schema.names}")
    found = locate(source, storage, index_dir, entry, target, cov, keys.select(*spec.key), read)
    paths = {r[0] for r in found.select(FILE).distinct().collect()}
    files = [fe for p, fe in target.files.items() if p in paths]
    stored = indexed_columns(spec, target)
    read_cols = stored.sources_of([*names, *spec.key])
    rows = _with_stored(
        spark_frame(spark, source, target, files=files, columns=read_cols, config=read), stored, spec.key
    )
    return _matching(rows, _keys(keys, spec.key, stored), spec.key).select(*(qcol(c) for c in names))


def _empty(spark: Any, stored: IndexedColumns, cols: Sequence[str]) -> DataFrame:
    """An empty locate answer (no index file, no file to scan)."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    fields = [StructField(c, arrow_to_spark_type(stored.schema.field(c).type)) for c in cols]
    schema = StructType([*fields, StructField(FILE, StringType()), StructField(ROW, LongType())])
    return spark.createDataFrame([], schema)
