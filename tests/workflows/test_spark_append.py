"""The distributed append: Spark writes the data files and the index entries in one job.

``local_max_rows`` is set tiny so small frames take the distributed path. After each
append, lookup / locate / scan at every version equal the format library's own reader
(deltalake, pyiceberg), nulls in keys included; the reports say which indexes got their
entries from the write's job and why the others were refreshed instead.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.io.uri import local_path
from lakehouse_index.kinds.multicolumn.weights import weights
from lakehouse_index.workflows.direct_append import NOT_INCREMENTAL, NOT_WRITE_TIME
from lakehouse_index.workflows.reports import Action
from tests.api.iceberg_index_support import sql_catalog
from tests.workflows.helpers import SCHEMA, check_version, multiset, rows

pytestmark = pytest.mark.spark

#: The distributed append of this package (delta-spark, on the classpath, would write the Delta frames).
TINY = li.Config(
    executor=li.ExecutorConfig(local_max_rows=1, format_spark_writer=False),
    planner=li.PlannerConfig(force_index=True),
)
#: The same path with the default sizing (frames of more than ``cluster_local_max_rows`` rows).
OWN_PATH = li.Config(executor=li.ExecutorConfig(format_spark_writer=False))


def _records(n: int, seed: int) -> list[tuple[Any, ...]]:
    """(id, k, k2, v, p) rows; about one k in eight is null."""
    rnd = random.Random(seed)
    return [
        (
            seed * 1_000_000 + i,
            rnd.choice(["a", "b", "c", "d", None, "a", "b", "c"]),
            rnd.randrange(4),
            rnd.randrange(100),
            rnd.choice(["x", "y", "z"]),
        )
        for i in range(n)
    ]


def _indexes(t: li.Table) -> None:
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    t.create_index(li.SecondaryIndex("by_kk", key=["k", "k2"]))
    t.create_index(li.CoveringIndex("cov", indexed="k2", included=["v"], num_buckets=3))
    t.create_index(li.SkippingIndex("skip_v", columns=["v"]))
    t.create_index(li.SecondaryIndex("by_v_quick", key="v", auto_refresh="quick"))
    t.create_index(li.MultiColumnIndex("mc", columns=MC_INDEXED, included=["id"], block_rows=64))


#: The multi-column index's columns; its rows' weights hash these and ``id`` (its included column).
MC_INDEXED = ["v", "k2"]


def _frame(spark: Any, records: list[tuple[Any, ...]], partitions: int) -> Any:
    ddl = "id long, k string, k2 long, v long, p string"
    return spark.createDataFrame(records, ddl).repartition(partitions)


def _check(t: li.Table, version: Any, oracle: pa.Table) -> None:
    check_version(t, version, oracle)
    nulls = t.scan(version_as_of=version, where="k IS NULL")
    assert multiset(nulls, SCHEMA.names) == multiset(oracle.filter(pc.is_null(oracle["k"])), SCHEMA.names), (
        version
    )
    located = t.locate("by_k", ["a", "d"], version_as_of=version)
    want = oracle.filter(pc.is_in(oracle["k"], pa.array(["a", "d"])))
    assert multiset(located, ["k"]) == multiset(want, ["k"]), version
    # The multi-column index's sample: the rows whose weights (a hash of its columns) pass the
    # fraction. A sample by scanning hashes every column, so this equality holds only when the
    # index answers, with an entry (and the weight the build would give) for every live row.
    sampled = oracle.filter(pa.array(weights(oracle, (*MC_INDEXED, "id")) < 0.4))
    assert multiset(t.sample(0.4, version_as_of=version), SCHEMA.names) == multiset(sampled, SCHEMA.names)


def _index_files_sorted(t: li.Table) -> None:
    """Every index file the jobs wrote is in its layout's order (key or curve cell, then row address)."""
    for name, key in (("by_k", ["k"]), ("by_kk", ["k", "k2"]), ("cov", ["k2"]), ("mc", ["_cell"])):
        log = t.context.log(name)
        entry = log.latest_stable()
        assert entry is not None
        for f in entry.content.files:
            data = pq.read_table(str(Path(local_path(log.index_dir)) / f.path))
            order = [(c, "ascending") for c in (*key, "_file_id", "_row", "_version")]
            # Spark's executor (the build) sorts nulls first, pyarrow (the append's tasks) last.
            sorted_ = [
                data.take(pc.sort_indices(data, sort_keys=order, null_placement=nulls))
                for nulls in ("at_start", "at_end")
            ]
            assert data.equals(sorted_[0]) or data.equals(sorted_[1]), (name, f.path)


def _reports_ok(result: li.WriteResult) -> None:
    by = {r.name: r for r in result.indexes}
    for name in ("by_k", "by_kk", "cov", "mc"):
        assert by[name].action is Action.WRITE_JOB, by[name]
        assert by[name].indexed_version == result.table_version
        assert by[name].entries_written == result.rows_written
    assert by["skip_v"].action is Action.INCREMENTAL and NOT_WRITE_TIME in (by["skip_v"].note or "")
    assert by["by_v_quick"].action is Action.QUICK and NOT_INCREMENTAL in (by["by_v_quick"].note or "")


@pytest.mark.parametrize("partitioned", [True, False])
def test_delta_distributed_append_equals_reader(tmp_path: Path, spark: Any, partitioned: bool) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows(_records(20, 0)), partition_by=["p"] if partitioned else None)
    t = li.open_table(path, config=TINY)
    _indexes(t)
    versions = [0]
    for step in range(1, 3):
        result = t.append(_frame(spark, _records(300, step), partitions=3))
        assert result.ok and result.rows_written == 300
        _reports_ok(result)
        versions.append(result.table_version)
    _check_statistics(path, partitioned)
    _index_files_sorted(t)
    for v in versions:
        _check(t, v, DeltaTable(path, version=v).to_pyarrow_table())


def _check_statistics(path: str, partitioned: bool) -> None:
    """Every add action's statistics equal its file's contents (read back with pyarrow)."""
    adds = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
    assert sum(a["num_records"] for a in adds) == 620
    for a in adds:
        data = pq.read_table(str(Path(path) / a["path"]))
        assert data.num_rows == a["num_records"]
        assert ("p" in data.column_names) is not partitioned  # partition values live in the path
        for c in ("id", "k", "v"):
            mm = pc.min_max(data[c])
            assert (a[f"min.{c}"], a[f"max.{c}"]) == (mm["min"].as_py(), mm["max"].as_py()), (a["path"], c)
            assert a[f"null_count.{c}"] == data[c].null_count


def test_iceberg_distributed_append_equals_reader(tmp_path: Path, spark: Any) -> None:
    catalog = sql_catalog(str(tmp_path))
    tbl = catalog.create_table("db.t", schema=SCHEMA)
    with tbl.update_spec() as spec:
        spec.add_identity("p")
    tbl.append(rows(_records(20, 0)))
    t = li.open_table("db.t", catalog=catalog, config=TINY)
    _indexes(t)
    versions = [t.latest_version()]
    for step in range(1, 3):
        result = t.append(_frame(spark, _records(300, step), partitions=3))
        assert result.ok and result.rows_written == 300
        _reports_ok(result)
        versions.append(result.table_version)
    native = catalog.load_table("db.t")
    for v in versions:
        _check(t, v, native.scan(snapshot_id=v).to_arrow())
    _index_files_sorted(t)
    files = native.inspect.files().to_pylist()
    assert {f["partition"]["p"] for f in files} == {"x", "y", "z"}


def test_concurrent_commit_falls_back_to_refresh(tmp_path: Path, spark: Any) -> None:
    """A commit landing while the job runs moves the append's version: the job's entries
    (stamped for the version it expected) are dropped and the indexes follow by refresh,
    answering exactly at every version."""
    path = str(tmp_path / "t")
    write_deltalake(path, rows(_records(20, 0)))
    t = li.open_table(path, config=TINY)
    _indexes(t)
    extra = rows(_records(7, 9))
    frame = _frame(spark, _records(200, 1), partitions=2)

    def foreign_commit(batches: Any) -> Any:
        """In the first task, a native deltalake append commits while the job runs (a closure:
        Spark's workers pickle it by value, they cannot import test modules)."""
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is not None and context.partitionId() == 0:
            write_deltalake(path, extra, mode="append")
        yield from batches

    racing = frame.mapInArrow(foreign_commit, frame.schema)
    result = t.append(racing)
    assert result.ok and result.rows_written == 200 and result.table_version == 2
    by = {r.name: r for r in result.indexes}
    for name in ("by_k", "by_kk", "cov"):
        assert by[name].action is Action.INCREMENTAL and "concurrent commit" in (by[name].note or "")
        assert by[name].indexed_version == 2
    for v in range(3):
        _check(t, v, DeltaTable(path, version=v).to_pyarrow_table())


def test_millions_of_rows_then_lookup(tmp_path: Path, spark: Any) -> None:
    """2M rows through the distributed path on both formats (default local_max_rows), then
    lookups that equal the format library's own scan."""
    from pyspark.sql import functions as F

    n = 2_000_000
    frame = spark.range(n).select(
        F.col("id"),
        F.concat(F.lit("k"), (F.col("id") * 7919 % 400_000).cast("string")).alias("k"),
        (F.col("id") % 1000).alias("k2"),
        (F.col("id") * 31 % 100_000).alias("v"),
        F.when(F.col("id") % 2 == 0, "x").otherwise("y").alias("p"),
    )
    probe = ["k0", "k7919", "k123", "k399999"]
    delta_path = str(tmp_path / "d")
    first = rows(_records(10, 0))  # keys a-d: none of the probe's
    write_deltalake(delta_path, first, partition_by=["p"])
    catalog = sql_catalog(str(tmp_path / "ice"))
    catalog.create_table("db.t", schema=SCHEMA).append(first)
    tables = {
        "delta": (
            li.open_table(delta_path, config=OWN_PATH),
            lambda v: DeltaTable(delta_path, version=v).to_pyarrow_table(),
        ),
        "iceberg": (
            li.open_table("db.t", catalog=catalog, config=OWN_PATH),
            lambda v: catalog.load_table("db.t").scan(snapshot_id=v).to_arrow(),
        ),
    }
    for fmt, (t, native) in tables.items():
        t.create_index(li.SecondaryIndex("by_k", key="k"))
        result = t.append(frame)
        assert result.rows_written == n, fmt
        assert [r.action for r in result.indexes] == [Action.WRITE_JOB], fmt
        full = native(result.table_version)
        assert full.num_rows == n + first.num_rows
        want = full.filter(pc.is_in(full["k"], pa.array(probe)))
        assert want.num_rows == 20, fmt  # 5 rows per key
        got = t.lookup("by_k", probe)
        assert multiset(got, SCHEMA.names) == multiset(want, SCHEMA.names), fmt


def test_bad_input_changes_nothing(tmp_path: Path, spark: Any) -> None:
    """A refused writer feature or a schema mismatch stops the distributed path before its job:
    no data file, no index log entry, no commit."""
    from tests.workflows.test_writes_bad_input import _declare

    path = str(tmp_path / "t")
    write_deltalake(path, rows(_records(20, 0)))
    t = li.open_table(path, config=TINY)
    _indexes(t)

    def state() -> tuple[int, dict[str, int], list[str]]:
        logs = {name: len(t.context.log(name).entries()) for name in ("by_k", "by_kk", "cov", "skip_v")}
        data = sorted(p.name for p in Path(path).glob("*.parquet"))
        return t.latest_version(), logs, data

    before = state()
    bad = _frame(spark, _records(50, 1), partitions=2).drop("v")
    with pytest.raises(li.errors.SchemaMismatchError, match=r"missing columns \['v'\]"):
        t.append(bad)
    assert state() == before
    _declare(path, {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["rowTracking"]})
    before = state()  # the protocol change is a commit of its own
    with pytest.raises(li.errors.UnsupportedWriterFeatureError, match="rowTracking"):
        t.append(_frame(spark, _records(50, 1), partitions=2))
    assert state() == before
