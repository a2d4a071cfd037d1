"""The session factory's settings for the formats' Spark runtimes (no JVM: settings only)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lakehouse_index.spark import runtime_settings

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"  # as delta-spark's docs name them
ICEBERG_EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def test_no_runtime_no_settings(tmp_path: Path) -> None:
    assert runtime_settings({"spark.jars": "/opt/jars/postgresql-42.7.4.jar"}, tmp_path) == {}


def test_delta_and_iceberg_jars_on_spark_jars() -> None:
    jars = ",".join(
        [
            "/j/delta-spark_2.12-3.3.3.jar",
            "/j/delta-storage-3.3.3.jar",
            "/j/iceberg-spark-runtime-3.5_2.12-1.12.0.jar",
        ]
    )
    got = runtime_settings({"spark.jars": jars, "spark.sql.warehouse.dir": "/lake/wh"})
    assert got["spark.sql.extensions"].split(",") == [DELTA_EXTENSION, ICEBERG_EXTENSION]
    assert got["spark.sql.catalog.spark_catalog"] == DELTA_CATALOG
    assert got["spark.sql.catalog.iceberg"] == "org.apache.iceberg.spark.SparkCatalog"
    assert got["spark.sql.catalog.iceberg.type"] == "hadoop"
    assert got["spark.sql.catalog.iceberg.warehouse"] == "/lake/wh"


def test_packages_and_class_path_count(tmp_path: Path) -> None:
    got = runtime_settings({"spark.jars.packages": "io.delta:delta-spark_2.13:4.0.0"}, tmp_path)
    assert got["spark.sql.extensions"] == DELTA_EXTENSION
    classpath = os.pathsep.join(["/x/hadoop-aws-3.3.4.jar", "/x/iceberg-spark-runtime-4.1_2.13-1.12.0.jar"])
    got = runtime_settings({"spark.driver.extraClassPath": classpath})
    assert got["spark.sql.extensions"] == ICEBERG_EXTENSION
    assert "spark.sql.catalog.spark_catalog" not in got


def test_jars_spark_ships(tmp_path: Path) -> None:
    (tmp_path / "delta-spark_2.13-4.0.0.jar").touch()
    assert runtime_settings({}, tmp_path)["spark.sql.extensions"] == DELTA_EXTENSION


def test_the_conf_wins(tmp_path: Path) -> None:
    """A user's extensions are kept (ours appended once); a catalog the user configures is left alone."""
    conf = {
        "spark.jars": "/j/delta-spark_2.12-3.3.3.jar,/j/iceberg-spark-runtime-3.5_2.12-1.12.0.jar",
        "spark.sql.extensions": f"com.example.Mine,{ICEBERG_EXTENSION}",
        "spark.sql.catalog.spark_catalog": "com.example.Catalog",
        "spark.sql.catalog.iceberg.type": "rest",
    }
    got = runtime_settings(conf, tmp_path)
    assert got == {"spark.sql.extensions": f"com.example.Mine,{ICEBERG_EXTENSION},{DELTA_EXTENSION}"}


@pytest.mark.parametrize("warehouse", [None, "rel/wh"])
def test_warehouse_is_absolute(
    warehouse: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    conf = {"spark.jars": "/j/iceberg-spark-runtime-3.5_2.12-1.12.0.jar"}
    if warehouse:
        conf["spark.sql.warehouse.dir"] = warehouse
    got = runtime_settings(conf, tmp_path / "no-jars")
    assert got["spark.sql.catalog.iceberg.warehouse"] == str(tmp_path / (warehouse or "spark-warehouse"))
