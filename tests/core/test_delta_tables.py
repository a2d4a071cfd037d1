"""The readers on real Delta tables: deltalake is the independent oracle.

* Peer tables (written by Spark, Databricks, delta-rs; deletion vectors, column mapping,
  checkpoints, partition encodings, INT96): scan_snapshot at every version equals
  ``DeltaTable(path, version=v).scan()``; spark_frame equals it on a chosen subset.
* Random histories written with deltalake: scan_snapshot and spark_frame at every version
  equal ``DeltaTable(path, version=v).to_pyarrow_table()`` as multisets.
"""

from __future__ import annotations

import collections
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import deltalake
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lakehouse_index_delta import DeltaSource

from lakehouse_index.io import Storage
from lakehouse_index.read.scan import scan_snapshot
from lakehouse_index.read.spark_read import spark_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

from tests.support.delta_peers import (
    check_minimum_cases,
    compared_schema,
    copy_peer_tables,
    multiset,
    oracle_scan,
    peer_tables,
    readable_versions,
)

#: Read with Spark too (one per feature, to keep the run short).
SPARK_TABLES = [
    "table-with-dv-small",
    "table_with_column_mapping",
    "delta-0.8.0-null-partition",
    "delta-2.2.0-partitioned-types",
    "table_with_edge_timestamps",
    "delta-0.8.0-partitioned",
    "table_with_partitioning_mapping",
]


@pytest.fixture(scope="module")
def peer_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_peer_tables(tmp_path_factory.mktemp("peer"))


def open_source(path: str) -> DeltaSource:
    return DeltaSource.open(path, Storage.for_uri(path))


def same_rows(a: pa.Table, b: pa.Table, schema: pa.Schema) -> bool:
    """Multiset equality; large tables of sortable columns are compared sorted, in Arrow."""
    nested = any(pa.types.is_nested(f.type) for f in schema)
    if nested or a.num_rows < 10_000:
        return multiset(a, schema) == multiset(b, schema)
    keys = [(f.name, "ascending") for f in schema]
    a2 = a.select(schema.names).cast(schema).sort_by(keys)
    b2 = b.select(schema.names).cast(schema).sort_by(keys)
    return bool(a2.equals(b2))


def spark_rows(df: DataFrame, schema: pa.Schema) -> collections.Counter[str]:
    """Spark rows through Arrow types, so both sides print values the same way."""
    rows = df.collect()
    cols = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
    table = pa.table(
        [pa.array(list(c), type=f.type) for c, f in zip(cols, schema, strict=True)], schema=schema
    )
    return multiset(table, schema)


def test_peer_oracle_cases_at_least_minimum() -> None:
    """The parametrised oracle test below cannot shrink silently: the tables and versions load."""
    check_minimum_cases()


@pytest.mark.parametrize("name", peer_tables())
def test_scan_snapshot_on_peer_tables(name: str, peer_copy: Path) -> None:
    path = str(peer_copy / name)
    src = open_source(path)
    for version, theirs in readable_versions(name, path, (i.version for i in src.versions())):
        snap = src.snapshot(version)
        mine = scan_snapshot(src, snap)
        assert mine.schema == snap.schema
        schema = compared_schema(name, snap)
        assert mine.num_rows == theirs.num_rows, f"{name}@{version}"
        assert same_rows(mine, theirs, schema), f"{name}@{version}"


@pytest.mark.spark
@pytest.mark.parametrize("name", SPARK_TABLES)
def test_spark_frame_on_peer_tables(name: str, peer_copy: Path, spark: SparkSession) -> None:
    path = str(peer_copy / name)
    src = open_source(path)
    snap = src.snapshot()
    schema = compared_schema(name, snap)
    theirs = oracle_scan(path, snap.version)
    df = spark_frame(spark, src, snap, columns=schema.names)
    assert spark_rows(df, schema) == multiset(theirs, schema)


# --------------------------------------------------------------------------- random histories

OPS = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 12)),
    st.tuples(st.just("overwrite"), st.integers(0, 8)),
    st.tuples(st.just("delete"), st.sampled_from(["k < 2", "s = 'b'", "p = 'y'", "k IS NULL"])),
)


def _batch(start: int, n: int, rnd: st.DataObject) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "k": pa.array([rnd.draw(st.one_of(st.none(), st.integers(0, 4))) for _ in range(n)], pa.int32()),
            "s": pa.array([rnd.draw(st.sampled_from(["a", "b", "é", None])) for _ in range(n)], pa.string()),
            "p": pa.array([rnd.draw(st.sampled_from(["x", "y", "z z"])) for _ in range(n)], pa.string()),
        }
    )


@pytest.mark.spark
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(partitioned=st.booleans(), ops=st.lists(OPS, min_size=1, max_size=5), rnd=st.data())
def test_random_histories(
    spark: SparkSession, partitioned: bool, ops: list[tuple[str, Any]], rnd: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as root:
        path = str(Path(root) / "t")
        next_id = 0
        first = True
        for kind, arg in ops:
            if kind == "delete" and not first:
                deltalake.DeltaTable(path).delete(arg)
                continue
            n = arg if kind != "delete" else 3
            batch = _batch(next_id, n, rnd)
            next_id += n
            deltalake.write_deltalake(
                path,
                batch,
                mode="overwrite" if kind == "overwrite" else "append",
                partition_by=["p"] if partitioned else None,
            )
            first = False
        src = open_source(path)
        spark_versions = {src.latest_version()}
        for info in src.versions():
            v = info.version
            snap = src.snapshot(v)
            theirs = deltalake.DeltaTable(path, version=v).to_pyarrow_table()
            mine = scan_snapshot(src, snap)
            assert multiset(mine, snap.schema) == multiset(theirs, snap.schema), f"version {v}"
            if v in spark_versions:
                df = spark_frame(spark, src, snap, where="k IS NULL OR k >= 1 OR s = 'é'")
                want = scan_snapshot(src, snap, where="k IS NULL OR k >= 1 OR s = 'é'")
                assert spark_rows(df, snap.schema) == multiset(want, snap.schema), f"version {v}"
                filtered = [r for r in theirs.to_pylist() if r["k"] is None or r["k"] >= 1 or r["s"] == "é"]
                assert len(filtered) == want.num_rows
