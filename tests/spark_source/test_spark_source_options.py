"""Options of the source: bad ones fail with a clear message; SQL views; pyspark 3.5 refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import write_deltalake
from source_support import batch, source_available

import lakehouse_index as li
from lakehouse_index.spark_source.options import parse_options


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("opts") / "t")
    for i in range(3):
        write_deltalake(path, batch(i * 10, 10), mode="append")
    return path


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"versionAsof": "1", "colour": "red"}, "unknown option 'colour'"),
        ({"versionAsOf": "1", "timestampAsOf": "2024-01-01"}, "not both"),
        ({"useIndexes": "maybe"}, "useIndexes must be true or false"),
        ({"timestampAsOf": "yesterday"}, "timestampAsOf is no timestamp"),
        ({"where": "  "}, "option where is empty"),
        ({"pushFilters": "yes"}, "pushFilters must be true or false"),
    ],
)
def test_bad_options_are_refused_before_opening(options: dict[str, str], message: str) -> None:
    with pytest.raises(li.QueryError, match=message):
        parse_options({"path": "/nowhere", **options})


def test_options_are_case_insensitive_and_storage_options_kept() -> None:
    opts = parse_options({"path": "/t", "versionasof": "3", "storage.aws_region": "eu-west-1"})
    assert opts.version_as_of == 3
    assert opts.storage_options == (("aws_region", "eu-west-1"),)
    assert parse_options({"path": "/t", "VERSIONASOF": "tag1"}).version_as_of == "tag1"


@pytest.mark.spark
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"colour": "red"}, "unknown option 'colour'"),
        ({"versionAsOf": "1", "timestampAsOf": "2024-01-01"}, "versionAsOf or timestampAsOf, not both"),
        ({"versionAsOf": "99"}, "VersionNotFoundError"),
        ({"timestampAsOf": "2000-01-01"}, "VersionNotFoundError"),
        ({"where": "nope = 1"}, "nope"),
        ({"where": "id = "}, "QueryError"),
    ],
)
def test_bad_options_fail_the_read(
    source_spark: Any, table: str, options: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception, match=message):
        source_spark.read.format("lakehouse_index").options(**options).load(table).collect()


@pytest.mark.spark
def test_not_a_table_and_unknown_columns(source_spark: Any, tmp_path: Path, table: str) -> None:
    with pytest.raises(Exception, match="NotATableError"):
        source_spark.read.format("lakehouse_index").load(str(tmp_path)).collect()
    with pytest.raises(Exception, match="lakehouse_index needs a table"):
        source_spark.read.format("lakehouse_index").load().collect()
    with pytest.raises(Exception, match=r"column\(s\) \['nope'\]"):
        source_spark.read.format("lakehouse_index").schema("nope string").load(table).collect()


@pytest.mark.spark
def test_sql_view_with_options(source_spark: Any, table: str) -> None:
    source_spark.sql(
        "CREATE OR REPLACE TEMPORARY VIEW li_v1 USING lakehouse_index "
        f"OPTIONS (path '{table}', versionAsOf '1')"
    )
    assert source_spark.sql("SELECT count(*) FROM li_v1").collect()[0][0] == 20
    got = source_spark.sql("SELECT id FROM li_v1 WHERE k = 'k4'").collect()
    assert sorted(r[0] for r in got) == [12, 13, 14]


@pytest.mark.spark
def test_writes_are_refused_with_the_library_path(source_spark: Any, table: str) -> None:
    df = source_spark.read.format("lakehouse_index").load(table)
    with pytest.raises(Exception, match=r"UnsupportedFeatureError.*append\(df\)"):
        df.write.format("lakehouse_index").mode("append").save(table)
    assert source_spark.read.format("lakehouse_index").load(table).count() == 30  # nothing written


def test_pyspark_35_is_refused_with_the_library_path() -> None:
    if source_available():
        pytest.skip("this pyspark has Python data sources with filter pushdown")
    with pytest.raises(li.UnsupportedFeatureError, match=r"pyspark >= 4.1.*\.read\(spark"):
        li.register_spark_source()
