"""Spark-native, index-aware reads: the ``lakehouse_index`` data source (pyspark ≥ 4.1).

Example::

    import lakehouse_index as li

    li.register_spark_source(spark)
    df = (spark.read.format("lakehouse_index").option("versionAsOf", 12)
          .option("where", "email = 'ada@example.com'").load("/data/events"))
    print(li.explain_spark_source("/data/events", "email = 'ada@example.com'", versionAsOf="12"))

The modules: :mod:`.options` (the reader options), :mod:`.time_travel` (the version they pin,
as the formats' own sources pick it), :mod:`.planning` (the plan and the reads of its
partitions, without pyspark), :mod:`.datasource` (the pyspark classes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from lakehouse_index.errors import UnsupportedFeatureError
from lakehouse_index.spark_source.planning import SourceRead, explain_spark_source

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["MIN_PYSPARK", "SourceRead", "explain_spark_source", "register_spark_source"]

#: Python data sources gained filter pushdown (``DataSourceReader.pushFilters``) in Spark 4.1.
MIN_PYSPARK = (4, 1)

_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def _release(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def register_spark_source(spark: SparkSession | None = None) -> None:
    """Make ``spark.read.format("lakehouse_index")`` (and ``USING lakehouse_index`` in SQL) available.

    Also turns on Python data source filter pushdown for the session. On pyspark older than
    4.1 this raises UnsupportedFeatureError: read with ``li.open_table(path).read(spark, ...)``
    there, which uses the same planner. ``spark`` defaults to the active (or a new) session.
    """
    import pyspark

    from lakehouse_index.spark import get_spark

    if _release(pyspark.__version__) < MIN_PYSPARK:
        raise UnsupportedFeatureError(
            f"the lakehouse_index Spark data source needs pyspark >= 4.1 (Python data sources with "
            f"filter pushdown); this is pyspark {pyspark.__version__}. Read through the library instead: "
            "li.open_table(path).read(spark, version_as_of=..., where=...)"
        )
    from lakehouse_index.spark_source.datasource import LakehouseIndexDataSource

    session = get_spark(spark)
    session.conf.set(_PUSHDOWN_CONF, "true")
    # ``dataSource`` is pyspark 4 API (mypy checks against 3.5's stubs).
    cast(Any, session).dataSource.register(LakehouseIndexDataSource)
