"""Shared fixtures: one local Spark session for the whole run.

Every Spark session this test process starts carries Iceberg's Spark runtime (built once
by ``tests.support.spark_iceberg`` and cached): jars can only be added when the JVM
starts, and several test modules share one JVM.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


def pytest_configure(config: pytest.Config) -> None:
    from tests.support.spark_iceberg import spark_jars

    jars = ",".join(str(p) for p in spark_jars())
    os.environ["PYSPARK_SUBMIT_ARGS"] = (
        f"--jars {jars} --conf spark.sql.extensions={ICEBERG_EXTENSIONS} pyspark-shell"
    )


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A real local Spark session (2 threads), shared by every test that needs Spark."""
    from lakehouse_index.spark import get_spark

    session = get_spark(master="local[2]")
    yield session
