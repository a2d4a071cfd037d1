"""Spark with Apache Iceberg for integration tests: a Hadoop catalog on a local warehouse.

The Iceberg Spark runtime of the installed pyspark's line is among the jars every test
session starts with (:mod:`tests.support.jvm`); the session factory turns on Iceberg's SQL
extensions when it sees it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.support.jvm import fetched_jars

__all__ = ["runtime_jar", "spark_session"]


def runtime_jar() -> Path:
    """The Iceberg Spark runtime jar of the installed pyspark's line."""
    jars = sorted(fetched_jars().glob("iceberg-spark-runtime-*.jar"))
    if len(jars) != 1:
        raise RuntimeError(f"expected one Iceberg Spark runtime jar in {fetched_jars()}, found {jars}")
    return jars[0]


def spark_session(warehouse: str | Path, catalog: str = "local") -> Any:
    """The run's local Spark session with a Hadoop catalog ``catalog`` on ``warehouse``.

    Tables of ``<catalog>.db.t`` live in ``<warehouse>/db/t`` with ``metadata/vN.metadata.json``
    and ``version-hint.text``. Reuses (and reconfigures) an active session's catalog; a session
    started here gets the run's jars (as the test run's ``conftest`` hands them to every session).
    """
    from lakehouse_index.spark import JARS_ENV, get_spark

    runtime_jar()  # fail here, saying how to fetch the jars, rather than on a missing class
    os.environ.setdefault(JARS_ENV, str(fetched_jars()))
    spark = get_spark(
        master="local[2]",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "1g",
        },
    )
    spark.conf.set(f"spark.sql.catalog.{catalog}", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"spark.sql.catalog.{catalog}.type", "hadoop")
    spark.conf.set(f"spark.sql.catalog.{catalog}.warehouse", str(warehouse))
    return spark
