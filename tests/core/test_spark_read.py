"""spark_frame against DuckDB on independently computed live rows, on real local Spark."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from core_helpers import CaseSpec, FileSpec, build_case, case_specs, duckdb_filter, rows_of, where_clauses
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_index.config import ReadConfig
from lakehouse_index.errors import QueryError
from lakehouse_index.read.spark_read import spark_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

SETTINGS = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def collect(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def live(expected: pa.Table) -> pa.Table:
    return expected.filter(pc.invert(expected["_deleted"]))


@SETTINGS
@given(spec=case_specs(max_files=3), data=st.data())
def test_spark_frame_matches_duckdb(spark: SparkSession, spec: CaseSpec, data: st.DataObject) -> None:
    where = data.draw(st.one_of(st.none(), where_clauses(spec.partitioned)))
    lineage = data.draw(st.booleans())
    with tempfile.TemporaryDirectory() as root:
        source, expected = build_case(root, spec)
        snap = source.snapshot()
        names = snap.schema.names
        cols = data.draw(st.one_of(st.none(), st.lists(st.sampled_from(names), min_size=1, unique=True)))
        out = list(cols or names)
        df = spark_frame(spark, source, snap, columns=cols, where=where, with_lineage=lineage)
        if lineage:
            out += ["_file_path", "_row"]
        assert df.columns == out
        want = duckdb_filter(live(expected), where)
        assert collect(df) == rows_of(want, out)


def test_spark_frame_file_subset_and_types(spark: SparkSession, tmp_path: os.PathLike[str]) -> None:
    spec = CaseSpec(
        "id",
        True,
        [
            FileSpec(rows=[(1, "a", 0.5), (2, None, None)], part="a", deleted={1}),
            FileSpec(rows=[(3, "b", 1.0)], part="b", old=True),
            FileSpec(rows=[(None, "c", 2.0)], part="c d"),
        ],
        equality_keys=[],
    )
    source, expected = build_case(str(tmp_path), spec)
    snap = source.snapshot()
    entries = [e for e in snap.files.values() if e.partition_dict["p"] != "a"]
    df = spark_frame(spark, source, snap, files=entries, with_lineage=True)
    assert [f.dataType.simpleString() for f in df.schema.fields] == [
        "bigint",
        "bigint",
        "string",
        "double",
        "string",
        "string",
        "bigint",
    ]
    want = live(expected).filter(pc.not_equal(expected.filter(pc.invert(expected["_deleted"]))["p"], "a"))
    assert collect(df) == rows_of(want, df.columns)
    # only partition columns: no data column is read, rows still come from the files
    only_p = spark_frame(spark, source, snap, columns=["p"], where="p <> 'c d'")
    assert collect(only_p) == rows_of(live(expected).filter(pc.not_equal(live(expected)["p"], "c d")), ["p"])


def test_spark_frame_special_paths(spark: SparkSession, tmp_path: os.PathLike[str]) -> None:
    """File and partition names with spaces, %, %XX, +, #, ?, unicode and glob characters."""
    names = ["a b.parquet", "100% x+y%20z.parquet", "gl*ob é[1]{x}#h?q.parquet"]
    spec = CaseSpec(
        "name",
        True,
        [
            FileSpec(rows=[(i, f"s{i}", None)], part=part, name=n, deleted=set())
            for i, (n, part) in enumerate(zip(names, ["a", "c d", "%2F+é=1"], strict=True))
        ],
    )
    source, expected = build_case(str(tmp_path), spec)
    snap = source.snapshot()
    df = spark_frame(spark, source, snap, columns=["id", "p"], with_lineage=True)
    got = collect(df)
    assert got == rows_of(expected, ["id", "p", "_file_path", "_row"])
    assert {r[2] for r in got} == set(snap.files)


def test_spark_frame_file_columns(spark: SparkSession, tmp_path: os.PathLike[str]) -> None:
    """Constant columns per file reach every row of exactly that file, whatever its path."""
    names = ["a b.parquet", "100% x+y%20z.parquet", "gl*ob é[1]{x}#h?q.parquet"]
    spec = CaseSpec(
        "name",
        True,
        [
            FileSpec(
                rows=[(i, f"s{i}", None), (i + 10, "t", None)], part=part, name=n, deleted={1} if i else set()
            )
            for i, (n, part) in enumerate(zip(names, ["a", "c d", "%2F+é=1"], strict=True))
        ],
    )
    source, expected = build_case(str(tmp_path), spec)
    snap = source.snapshot()
    number = {path: i * 1000 for i, path in enumerate(sorted(snap.files))}
    tag = {path: f"t{i}" for i, path in enumerate(sorted(snap.files))}
    df = spark_frame(
        spark,
        source,
        snap,
        columns=["id"],
        with_lineage=True,
        file_columns={"n": (pa.int64(), number), "tag": (pa.string(), tag)},
    )
    assert df.columns == ["id", "_file_path", "_row", "n", "tag"]
    got = collect(df)
    assert sorted((r[:3] for r in got), key=repr) == rows_of(live(expected), ["id", "_file_path", "_row"])
    assert all(r[3] == number[r[1]] and r[4] == tag[r[1]] for r in got)
    with pytest.raises(QueryError, match="clash"):
        spark_frame(spark, source, snap, file_columns={"id": (pa.int64(), number)})


def test_spark_frame_fails_on_a_file_it_cannot_attribute(
    spark: SparkSession, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows of a file whose Spark path matches no listed file fail the query, never vanish."""
    import lakehouse_index.read.spark_read as sr

    spec = CaseSpec("id", False, [FileSpec(rows=[(1, "a", 0.5)])])
    source, _ = build_case(str(tmp_path), spec)
    snap = source.snapshot()
    locations = {path: sr._spark_location(path) for path in snap.files}
    monkeypatch.setattr(sr, "_spark_location", locations.__getitem__)
    monkeypatch.setattr(sr, "hadoop_path", lambda path: "file:/elsewhere/x.parquet")
    with pytest.raises(Exception, match="missing from the snapshot"):
        spark_frame(spark, source, snap, columns=["id"]).collect()


def test_spark_frame_empty_and_errors(spark: SparkSession, tmp_path: os.PathLike[str]) -> None:
    source, _ = build_case(str(tmp_path), CaseSpec("id", True, []))
    snap = source.snapshot()
    df = spark_frame(spark, source, snap, where="k = 1", with_lineage=True)
    assert df.columns == [*snap.schema.names, "_file_path", "_row"]
    assert df.collect() == []
    with pytest.raises(QueryError, match="unknown column"):
        spark_frame(spark, source, snap, columns=["zz"])
    with pytest.raises(QueryError, match="SQL string"):
        spark_frame(spark, source, snap, where=pc.field("k") == 1)


def test_spark_is_not_imported_by_pyarrow_paths() -> None:
    code = (
        "import sys, lakehouse_index.read.scan, lakehouse_index.read.datafiles, lakehouse_index.expressions, "
        "lakehouse_index.spark, lakehouse_index.read.spark_read\n"
        "assert not [m for m in sys.modules if m.startswith('pyspark') or m == 'py4j'], 'pyspark imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_get_spark_without_java_says_what_to_install(tmp_path: os.PathLike[str]) -> None:
    code = (
        "from lakehouse_index.spark import get_spark\n"
        "from lakehouse_index.errors import SparkUnavailableError\n"
        "try:\n    get_spark(master='local[1]')\n"
        "except SparkUnavailableError as e:\n    print('ERR', e)\n"
    )
    env = {"PATH": os.path.dirname(sys.executable), "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "ERR" in out.stdout and "JDK 17" in out.stdout


def test_java_version_parsing(tmp_path: os.PathLike[str]) -> None:
    from lakehouse_index.errors import SparkUnavailableError
    from lakehouse_index.spark import java_major_version

    fake = os.path.join(str(tmp_path), "java")
    with open(fake, "w") as f:
        f.write("#!/bin/sh\necho 'openjdk version \"1.8.0_392\"' >&2\n")
    os.chmod(fake, 0o755)
    assert java_major_version(fake) == 8
    with open(fake, "w") as f:
        f.write("#!/bin/sh\necho 'openjdk version \"21.0.2\" 2024-01-16' >&2\n")
    assert java_major_version(fake) == 21
    with pytest.raises(SparkUnavailableError):
        java_major_version(os.path.join(str(tmp_path), "missing-java"))


@pytest.mark.parametrize("limit", [0, 200_000])
def test_driver_tables_values_and_rdd_paths(
    spark: SparkSession, tmp_path: os.PathLike[str], limit: int
) -> None:
    """Partition values, position and equality deletes through both ways of shipping them."""
    config = ReadConfig(spark_local_values_limit=limit)
    spec = CaseSpec(
        "name",
        True,
        [
            FileSpec(
                rows=[(1, "a", 0.5), (2, None, None), (None, "q'\\\\", 1.0)],
                part="it's \\ é",
                deleted={1},
                equality=True,
            ),
            FileSpec(rows=[(3, "b", 1.0), (None, "c", 2.0)], part="b", equality=True),
            FileSpec(rows=[(None, "d", 2.0)], part="c d"),
        ],
        equality_keys=[3, None],
    )
    source, expected = build_case(str(tmp_path / f"t{limit}"), spec)  # type: ignore[operator]
    snap = source.snapshot()
    df = spark_frame(spark, source, snap, with_lineage=True, config=config)
    assert collect(df) == rows_of(live(expected), df.columns)


def test_spark_frame_refuses_a_path_listed_twice(spark: SparkSession, tmp_path: os.PathLike[str]) -> None:
    source, _ = build_case(str(tmp_path), CaseSpec("id", False, [FileSpec(rows=[(1, "a", 0.5)])]))
    snap = source.snapshot()
    (entry,) = snap.files.values()
    with pytest.raises(QueryError, match="same path"):
        spark_frame(spark, source, snap, files=[entry, entry])
