"""Full build of an index from one table snapshot: on Spark, or in process when small.

On Spark: reads the key (and payload) columns of every live file with their row
positions (``_row`` from Spark's ``_metadata``) and file ids (constant columns per file),
range-partitions and sorts by key, and writes Parquet under a fresh data directory
(pyarrow inside the tasks). Tables of at most ``LOCAL_MAX_ROWS`` rows are indexed in this process with pyarrow
instead (the same entries, one sorted file), which also needs no Hadoop S3 support. The
root index (per file: row count, size, per-column key bounds) is read back from the
written footers and recorded in the log entry.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_index.io import Storage, join_uri
from lakehouse_index.kinds import covering as cov
from lakehouse_index.kinds import secondary as sec
from lakehouse_index.kinds import skipping
from lakehouse_index.kinds.keys import file_bounds
from lakehouse_index.kinds.validation import validate_spec
from lakehouse_index.log.entry import Content, IndexFile, Level, SourceFile, SourceState
from lakehouse_index.maintenance.writer import ROWS_PER_FILE, TaskWriter, write_entries
from lakehouse_index.read.datafiles import ROW_COLUMN, read_file
from lakehouse_index.source import FileEntry, Snapshot, TableSource
from lakehouse_index.spec import CoveringIndex, IndexSpec, SkippingIndex

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


def qcol(name: str) -> Column:
    """A Spark column reference that survives dots and backticks in names."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def assign_file_ids(
    files: Mapping[str, FileEntry], previous: SourceState | None, ordinal: int
) -> tuple[tuple[SourceFile, ...], int]:
    """File-id map for ``files``: ids of paths the previous state knew are kept (stable lineage)."""
    known = previous.by_path() if previous else {}
    next_id = previous.next_file_id if previous else 0
    out = []
    for path in sorted(files):
        entry = files[path]
        old = known.get(path)
        if old is not None and old.removed_ordinal is None:
            fid, added = old.id, old.added_ordinal
        else:
            fid, added, next_id = next_id, ordinal, next_id + 1
        out.append(source_file(entry, fid, added))
    return tuple(out), next_id


def source_file(entry: FileEntry, file_id: int, added_ordinal: int) -> SourceFile:
    """The log's record of one covered data file."""
    return SourceFile(
        id=file_id,
        path=entry.path,
        size=entry.size,
        mtime_ms=entry.mtime_ms,
        num_records=entry.num_records,
        deletes_id=entry.deletes.id if entry.deletes else None,
        deleted_count=entry.deleted_count,
        added_ordinal=added_ordinal,
        # Entries are read with every delete of ``entry`` applied, equality deletes included.
        equality_applied=tuple(e.path for e in entry.equality_deletes),
    )


#: Index builds and refreshes whose files hold at most this many rows in all run in this
#: process with pyarrow (no JVM: a Spark job's fixed cost would dominate); larger ones on Spark.
LOCAL_MAX_ROWS = 1_000_000


@dataclass(frozen=True)
class IndexJob:
    """The rows of one data file to index: PUT entries stamped with ``ordinal``.

    ``entry`` is the file as it was when added (its deletes then apply).
    """

    entry: FileEntry
    file_id: int
    ordinal: int


def local_entries(source: TableSource, snapshot: Snapshot, spec: IndexSpec, job: IndexJob) -> pa.Table:
    """PUT entries for the live rows of one file, read with pyarrow (the job's deletes apply)."""
    rows = read_file(source, snapshot, job.entry, columns=list(spec.columns), with_positions=True)
    return sec.row_entries(rows, spec, snapshot, job.file_id, job.ordinal, sec.PUT)


def entries_frame(
    spark: SparkSession, source: TableSource, snapshot: Snapshot, spec: IndexSpec, jobs: Sequence[IndexJob]
) -> DataFrame:
    """PUT entries ``(columns…, _file_id, _row, _version, _op)`` for the live rows of the jobs' files.

    ``snapshot`` supplies the schema to read with (files are resolved by field id / name).
    File ids and versions ride along the read as constant columns per file; a path with
    several jobs (a file removed and re-added within one refresh) is read once per job.
    """
    from pyspark.sql import functions as F

    from lakehouse_index.read.spark_read import spark_frame

    reads: dict[int, list[IndexJob]] = {}  # the n-th job of each path goes to read n
    seen: Counter[str] = Counter()
    for job in jobs:
        reads.setdefault(seen[job.entry.path], []).append(job)
        seen[job.entry.path] += 1
    frames = []
    for group in reads.values():
        per_file = {
            sec.FILE_ID: (pa.int64(), {j.entry.path: j.file_id for j in group}),
            sec.VERSION: (pa.int64(), {j.entry.path: j.ordinal for j in group}),
        }
        rows = spark_frame(
            spark,
            source,
            snapshot,
            files=[j.entry for j in group],
            columns=list(spec.columns),
            with_lineage=True,
            file_columns=per_file,
        )
        frames.append(
            rows.select(
                *[qcol(c) for c in spec.columns],
                F.col(sec.FILE_ID),
                F.col(ROW_COLUMN).alias(sec.ROW),
                F.col(sec.VERSION),
                F.lit(sec.PUT).cast("byte").alias(sec.OP),
            )
        )
    return reduce(lambda a, b: a.unionByName(b), frames)


def write_sorted(
    df: DataFrame,
    spec: IndexSpec,
    schema: pa.Schema,
    storage: Storage,
    index_dir: str,
    data_dir: str,
    level: Level,
    est_rows: int,
) -> tuple[IndexFile, ...]:
    """Write entries sorted by key to ``data_dir`` (Spark computes, pyarrow writes); return the root index.

    Secondary indexes are range-partitioned by key (file key ranges do not overlap);
    covering indexes are hash-bucketed on the leading key (``bucket=<n>/`` directories).
    ``schema`` is the index schema the files get (``kinds.secondary.index_schema``).
    """
    df = df.select(*[qcol(c) for c in (*spec.columns, *sec.META_COLUMNS)])
    order = [qcol(c) for c in sec.sort_columns(spec)]
    bucket_col = None
    if isinstance(spec, CoveringIndex):
        bucket_col = cov.BUCKET_COLUMN
        bucket = cov.bucket_column(qcol(spec.key[0]), spec.num_buckets)
        laid_out = df.withColumn(bucket_col, bucket).repartition(spec.num_buckets, bucket_col)
        order = [qcol(bucket_col), *order]
    else:
        n_files = max(1, math.ceil(est_rows / ROWS_PER_FILE))
        laid_out = df.repartitionByRange(n_files, *[qcol(c) for c in spec.key])
    task = TaskWriter(storage, data_dir, schema, bucket_col)
    laid_out.sortWithinPartitions(*order).mapInArrow(task, "path string").collect()
    return read_root_index(spec, storage, index_dir, data_dir, level)


def read_root_index(
    spec: IndexSpec, storage: Storage, index_dir: str, data_dir: str, level: Level
) -> tuple[IndexFile, ...]:
    """Per written Parquet file: rows, size, key bounds and version bounds (from footers)."""
    out = []
    for status in sorted(storage.list_tree(data_dir), key=lambda s: s.path):
        if not status.path.endswith(".parquet"):
            continue
        fs, path = storage.arrow(status.path)
        meta = pq.read_metadata(path, filesystem=fs)
        if meta.num_rows == 0:
            continue
        lo, hi = file_bounds(meta, spec.key)
        vlo, vhi = file_bounds(meta, [sec.VERSION])
        out.append(
            IndexFile(
                path=relative_to(index_dir, status.path),
                rows=meta.num_rows,
                size=status.size,
                level=level,
                min_key=lo,
                max_key=hi,
                min_ordinal=int(vlo[0]) if vlo[0] is not None else None,
                max_ordinal=int(vhi[0]) if vhi[0] is not None else None,
                bucket=cov.bucket_from_path(status.path),
            )
        )
    return tuple(out)


def full_build(
    spark_factory: Callable[[], SparkSession],
    source: TableSource,
    snapshot: Snapshot,
    spec: IndexSpec,
    storage: Storage,
    index_dir: str,
    data_dir: str,
    previous: SourceState | None,
    local_max_rows: int = LOCAL_MAX_ROWS,
) -> tuple[SourceState, Content]:
    """Index every live row of ``snapshot``; the result answers exactly from its ordinal on.

    Secondary and covering indexes of at most ``local_max_rows`` rows are built in this
    process with pyarrow, larger ones on Spark (``spark_factory()``); a skipping index
    (one row per file) always with pyarrow. Either way without a JVM when it is not needed.
    """
    validate_spec(spec, snapshot)
    files, next_id = assign_file_ids(snapshot.files, previous, snapshot.ordinal)
    content_files: tuple[IndexFile, ...] = ()
    if files and isinstance(spec, SkippingIndex):
        jobs = [(snapshot.files[f.path], f.id) for f in files]
        rel = relative_to(index_dir, join_uri(data_dir, "skipping.parquet"))
        content_files = skipping.build_files(
            source, snapshot, spec, jobs, storage, index_dir, rel, Level.BASE
        )
    elif files:
        est_rows = sum((f.num_records or f.size // 64) - f.deleted_count for f in files)
        jobs_ = [IndexJob(snapshot.files[f.path], f.id, snapshot.ordinal) for f in files]
        if est_rows <= local_max_rows:
            entries = pa.concat_tables([local_entries(source, snapshot, spec, j) for j in jobs_])
            write_entries(entries, spec, storage, join_uri(data_dir, "part-0.parquet"))
            content_files = read_root_index(spec, storage, index_dir, data_dir, Level.BASE)
        else:
            df = entries_frame(spark_factory(), source, snapshot, spec, jobs_)
            schema = sec.index_schema(spec, snapshot)
            content_files = write_sorted(df, spec, schema, storage, index_dir, data_dir, Level.BASE, est_rows)
    state = SourceState(
        format=source.format_name,
        table_uri=source.uri,
        version=snapshot.version,
        ordinal=snapshot.ordinal,
        timestamp_ms=snapshot.timestamp_ms,
        files=files,
        next_file_id=next_id,
    )
    return state, Content(files=content_files, base_ordinal=snapshot.ordinal)


def relative_to(index_dir: str, uri: str) -> str:
    """``uri`` relative to the index directory (how the log names index files)."""
    return uri[len(index_dir.rstrip("/")) + 1 :]
