"""Index-accelerated Spark joins: a covering index snapshot read as a bucketed Spark table.

A covering index in layout 2 (``kinds.layout``) is bucketed exactly as Spark buckets a table:
``pmod(hash(k), n)`` on its leading indexed column, files named with Spark's bucket ids,
sorted by key. Spark learns that from its session catalog: the snapshot's files are
registered as an external table ``USING parquet CLUSTERED BY (k) SORTED BY (k) INTO n
BUCKETS``, partitioned by one string column whose partitions are the snapshot's data
directories (each written by one operation: base and LSM deltas; a directory must hold
exactly the snapshot's files, which is checked by listing it). A join of two such frames
on their keys with equal bucket counts then plans no Exchange (Spark's bucketed scan reports
``HashPartitioning(k, n)``); a join with an unindexed frame shuffles only that side.

Exact at the target version (``query.coverage``):

* entries above the coverage's cap are dropped; entries of files a copy-on-write commit
  rewrote are moved to their new address (``moves``, the lineage remap: a broadcast range
  join); when the snapshot has delta files, the LSM
  is merged by a window over ``(k, _file_id, _row)``: the bucketed scan's partitioning already
  satisfies it (a row's PUT and DEL entries carry the same key), so no Exchange;
* entries of files not live at the target are dropped (a filter on the file id), rows
  deleted since indexing (deletion vectors, position deletes) removed (broadcast anti join
  on the row address): filters and broadcast joins keep the bucketed side's partitioning;
* files the snapshot does not cover (appended since, or whose equality deletes must be
  re-checked) are read from the data files, written once into Spark's bucket files by the
  index's own writer (the in-process or Spark executor, as the sizing policy says) in a
  scratch directory, and added to the table as one more partition. Spark's ``Union`` does
  not keep its children's partitioning (3.5), and a Python library cannot add a physical
  operator like Hyperspace's ``BucketUnion``; a partition of the same bucketed table is the
  union Spark already knows is bucketed. Only the uncovered rows are shuffled.

Not used (the plain read instead, each reason in :class:`BucketedPlan`): layout-1 indexes,
indexes missing a needed column, no usable snapshot (table version gone, column changed)
and a data directory holding files of another snapshot.
The catalog tables are external (dropping one deletes nothing) and named after the index
directory, log entry and data directories; in a session with a persistent (Hive) catalog they persist there.
"""

from __future__ import annotations

import hashlib
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_index.context import IndexContext
from lakehouse_index.executors import executor_for
from lakehouse_index.executors.sizing import cluster_configured
from lakehouse_index.executors.spark import SparkExecutor, qcol
from lakehouse_index.io import join_uri
from lakehouse_index.io.uri import canonical_uri
from lakehouse_index.kinds.base import IndexJob, WriteTarget
from lakehouse_index.kinds.covering import CoveringKind
from lakehouse_index.kinds.derived import indexed_columns
from lakehouse_index.kinds.entries import FILE_ID, OP, PUT, ROW, VERSION
from lakehouse_index.log.entry import IndexState, Level, LogEntry
from lakehouse_index.query import planner
from lakehouse_index.query.coverage import Coverage
from lakehouse_index.read.spark_read import hadoop_path, local_frame
from lakehouse_index.source import FileEntry, Snapshot
from lakehouse_index.spec import CoveringIndex

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse_index.expressions import Predicate

#: The catalog table's partition column: one partition per data directory of the snapshot.
PART_COLUMN = "_lakehouse_index_part"


@dataclass(frozen=True)
class BucketedPlan:
    """Whether ``Table.read`` answers through a covering index as a bucketed table, and why (not).

    ``str(plan)`` is the explain text: the chosen index snapshot, how many bucket files it
    reads and how many data files it shuffles into the buckets, and each index not used with
    its reason.
    """

    target: Snapshot
    index: str | None = None
    entry: LogEntry | None = None
    coverage: Coverage | None = None
    #: The snapshot's data directories (relative to the index directory), one partition each.
    directories: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def scan(self) -> tuple[FileEntry, ...]:
        """Data files read and shuffled into the index's buckets (not covered, or re-checked)."""
        if self.coverage is None:
            return ()
        again = [self.coverage.answered[i] for i in sorted(_rechecked(self.coverage))]
        return (*self.coverage.scan, *again)

    def __str__(self) -> str:
        lines = [f"bucketed read of version {self.target.version}"]
        if self.entry is None:
            lines.append("  plain read: no covering index can answer as a bucketed table")
        else:
            spec = self.entry.spec
            assert isinstance(spec, CoveringIndex)
            lines.append(
                f"  index {self.index!r} snapshot {self.entry.id} (table version "
                f"{self.entry.source.version}): bucketed by {spec.key[0]!r} into {spec.num_buckets} "
                f"buckets, {len(self.entry.content.files)} index files in {len(self.directories)} "
                f"directories; {len(self.scan)} data files shuffled into the buckets"
            )
        lines += [f"  {n}" for n in self.notes]
        return "\n".join(lines)


def _rechecked(cov: Coverage) -> set[int]:
    """Covered file ids whose rows equality deletes must re-check: read from the data files."""
    return {i for i in cov.filter_deletes if cov.answered[i].equality_deletes}


def plan_bucketed(
    ctx: IndexContext, target: Snapshot, columns: Sequence[str] | None, predicate: Predicate | None
) -> BucketedPlan:
    """The covering index snapshot (if any) that answers a read of ``columns`` (and ``predicate``)
    at ``target`` as a bucketed table; the snapshot is the planner's choice as for a lookup
    (the index forced)."""
    needed = set(columns if columns is not None else target.schema.names)
    if predicate is not None:
        needed |= set(predicate.columns)
    notes: list[str] = []
    best: BucketedPlan | None = None
    # A join gains from the buckets whatever a scan would cost: the cheapest usable snapshot
    # (least to shuffle into the buckets), as a lookup with the index forced picks it.
    forced = replace(ctx.config, planner=replace(ctx.config.planner, force_index=True))
    for info in ctx.indexes():
        spec = info.spec
        if not isinstance(spec, CoveringIndex) or info.state is not IndexState.ACTIVE:
            continue
        name = spec.name
        if spec.layout_version < 2:
            notes.append(
                f"{name!r}: layout 1 (crc32 buckets), which Spark cannot read as bucketed: recreate it"
            )
            continue
        missing = sorted(needed - set(spec.columns))
        if missing:
            notes.append(f"{name!r}: does not hold {', '.join(missing)}")
            continue
        chosen = planner.plan(ctx.source, name, ctx.log(name).active_snapshots(), target, 0, forced).chosen
        if chosen.entry is None or chosen.coverage is None:
            notes.append(f"{name!r}: no snapshot of it answers version {target.version} (see explain)")
            continue
        dirs = _directories(ctx, name, chosen.entry)
        if isinstance(dirs, str):
            notes.append(f"{name!r}: {dirs}")
            continue
        found = BucketedPlan(target, name, chosen.entry, chosen.coverage, dirs)
        if best is None or len(found.scan) < len(best.scan):
            if best is not None:
                notes.append(f"{best.index!r}: usable, but shuffles more data files")
            best = found
        else:
            notes.append(f"{name!r}: usable, but shuffles more data files")
    if best is None:
        return BucketedPlan(target, notes=tuple(notes))
    return BucketedPlan(target, best.index, best.entry, best.coverage, best.directories, tuple(notes))


def _directories(ctx: IndexContext, name: str, entry: LogEntry) -> tuple[str, ...] | str:
    """The snapshot's data directories, each holding exactly its files (else why not)."""
    by_dir: dict[str, set[str]] = {}
    for f in entry.content.files:
        parent, _, _ = f.path.rpartition("/")
        by_dir.setdefault(parent, set()).add(f.path)
    index_dir = ctx.index_dir(name)
    for parent, files in by_dir.items():
        root = join_uri(index_dir, parent)
        listed = {
            s.path[len(index_dir.rstrip("/")) + 1 :]
            for s in ctx.storage.list_tree(root)
            if not s.path.rsplit("/", 1)[-1].startswith(("_", "."))
        }
        if listed != files:
            return f"directory {parent} holds files of another snapshot"
    return tuple(sorted(by_dir))


def bucketed_frame(
    spark: SparkSession,
    ctx: IndexContext,
    plan: BucketedPlan,
    columns: Sequence[str] | None,
    predicate: Predicate | None,
) -> DataFrame:
    """The rows of ``plan.target`` (``columns``, ``predicate`` applied) from the index of ``plan``,
    as a DataFrame Spark knows is bucketed by the index's leading key."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    entry, cov = plan.entry, plan.coverage
    assert entry is not None and cov is not None and plan.index is not None
    spec = entry.spec
    assert isinstance(spec, CoveringIndex)
    index_dir = ctx.index_dir(plan.index)
    locations = {d: hadoop_path(join_uri(index_dir, d)) for d in plan.directories}
    scan = plan.scan
    scratch_ids: list[int] = []
    if scan:
        scratch, scratch_ids = _write_scratch(spark, ctx, entry, plan.target, scan)
        locations["scratch"] = hadoop_path(scratch)
    table = _register(spark, index_dir, entry, locations, unique=bool(scan))
    key = qcol(spec.key[0])
    # Each filter below is left out when the snapshot's metadata proves it keeps every row:
    # the three bookkeeping columns then are not even read.
    df = spark.table(table)
    files = entry.content.files
    if any(f.max_ordinal is None or f.max_ordinal > cov.cap for f in files):
        df = df.filter(F.col(VERSION) <= cov.cap)
    # Rows of files rewritten up to the cap at their new address: a broadcast range join, so
    # the bucketed partitioning stays (a moved row keeps its key, hence its bucket).
    df = SparkExecutor(spark, ctx.config.executor).relocate(df, cov.moves)
    if any(f.level is Level.DELTA for f in files):  # base files hold PUTs only
        newest = Window.partitionBy(key, F.col(FILE_ID), F.col(ROW)).orderBy(F.desc(VERSION), F.desc(OP))
        df = df.withColumn("__rank", F.row_number().over(newest)).filter(F.col("__rank") == 1).drop("__rank")
        df = df.filter(F.col(OP) == PUT)
    rechecked = _rechecked(cov)
    live = set(cov.answered) - rechecked
    if not {f.id for f in entry.source.files} <= live:  # the file-id map names every indexed file
        df = df.filter(F.col(FILE_ID).isin(sorted(live) + scratch_ids))  # keeps the scan's partitioning
    deleted = [
        (fid, int(pos))
        for fid in sorted(cov.filter_deletes - rechecked)
        for pos in ctx.source.deleted_positions(cov.answered[fid])
    ]
    if deleted:
        gone = local_frame(spark, deleted, [(FILE_ID, pa.int64()), (ROW, pa.int64())], ctx.config.read)
        df = df.join(F.broadcast(gone), [FILE_ID, ROW], "left_anti")
    if predicate is not None:
        df = df.filter(F.expr(predicate.to_spark_sql()))
    out = list(columns) if columns is not None else list(plan.target.schema.names)
    return df.select(*[qcol(c) for c in dict.fromkeys(out)])


def _write_scratch(
    spark: SparkSession, ctx: IndexContext, entry: LogEntry, target: Snapshot, files: Sequence[FileEntry]
) -> tuple[str, list[int]]:
    """Index entries of ``files`` (rows of ``target``, deletes applied) written as bucket files in
    a fresh scratch directory, in the index's layout and stored types; the directory and the
    file ids given to the files (negative: no index file id is)."""
    spec = entry.spec
    ids = [-(i + 1) for i in range(len(files))]
    jobs = [IndexJob(f, fid, 0) for f, fid in zip(files, ids, strict=True)]
    root = canonical_uri(
        ctx.config.read.spark_scratch_dir or tempfile.mkdtemp(prefix="lakehouse-index-scratch-")
    )
    data_dir = join_uri(root, uuid.uuid4().hex)
    storage = ctx.storage.serving(root)
    fs, path = ctx.storage.arrow(join_uri(ctx.index_dir(spec.name), entry.content.files[-1].path))
    schema = pq.read_schema(path, filesystem=fs)  # the types the index files have
    layout = CoveringKind().layout(spec)
    cfg = ctx.config.executor
    rows = cfg.estimate_rows(files)
    ex = executor_for(rows, schema, cfg, lambda: spark, cluster=cluster_configured(spark))
    entries = ex.entries(ctx.source, target, indexed_columns(spec, target), jobs)
    if isinstance(entries, pa.Table):
        entries = entries.cast(schema)
    ex.write(entries, WriteTarget(storage, root, data_dir, layout, schema, Level.DELTA), rows)
    return data_dir, ids


def _register(
    spark: SparkSession, index_dir: str, entry: LogEntry, locations: dict[str, str], *, unique: bool
) -> str:
    """An external bucketed catalog table over the snapshot's directories (one partition each)."""
    spec = entry.spec
    assert isinstance(spec, CoveringIndex)
    # Named by what it reads: the same snapshot reuses its table, a recreated index gets another.
    digest = hashlib.sha1("\0".join([index_dir, str(entry.id), *locations.values()]).encode()).hexdigest()[
        :16
    ]
    name = f"lakehouse_index_{digest}" + (f"_{uuid.uuid4().hex[:8]}" if unique else "")
    if spark.catalog.tableExists(name):
        return name
    first = next(iter(locations.values()))
    fields = spark.read.parquet(first).schema.fields
    ddl = ", ".join(f"{_ident(f.name)} {f.dataType.simpleString()}" for f in fields)
    key = _ident(spec.key[0])
    spark.sql(
        f"CREATE TABLE {name} ({ddl}, {PART_COLUMN} string) USING parquet PARTITIONED BY ({PART_COLUMN}) "
        f"CLUSTERED BY ({key}) SORTED BY ({key}) INTO {spec.num_buckets} BUCKETS LOCATION {_lit(first)}"
    )
    for i, location in enumerate(locations.values()):
        spark.sql(f"ALTER TABLE {name} ADD PARTITION ({PART_COLUMN}='{i}') LOCATION {_lit(location)}")
    return name


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _lit(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
