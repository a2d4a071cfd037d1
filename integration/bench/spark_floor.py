"""The floor of a Spark Python data source: what any such source pays per query, doing no work.

:func:`register` adds a Python data source (pyspark >= 4.1) that opens no table and plans
nothing: for the option ``where`` (``email = '<address>'``) it plans one partition and returns
the generator's row of that address (:mod:`integration.bench.datagen`), so its answers are
checked like every method's. Its time is Spark's own per-query cost of the protocol: a Python
worker for the schema, one for the planning, and a one-task job. The classes are defined
inside :func:`register`, so Spark's workers get them by value (cloudpickle) and need not
import this module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from integration.bench import datagen

__all__ = ["FORMAT", "read", "register"]

#: The floor source's format name.
FORMAT = "li_bench_floor"


def register(spark: Any) -> None:
    """Register the floor source with ``spark``."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    from pyspark.sql.pandas.types import from_arrow_schema

    class FloorReader(DataSourceReader):
        def __init__(self, where: str) -> None:
            self.where = where

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(0)]

        def read(self, partition: InputPartition) -> Any:
            address = self.where.split("'")[1]
            yield from datagen.rows_for(np.array([datagen.id_of(address)])).to_batches()

    class FloorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return FORMAT

        def schema(self) -> Any:
            return from_arrow_schema(datagen.SCHEMA)

        def reader(self, schema: Any) -> FloorReader:
            return FloorReader(self.options["where"])

    spark.dataSource.register(FloorSource)


def read(spark: Any, where: str) -> list[Any]:
    """The floor's rows for ``where``, collected on the driver."""
    return spark.read.format(FORMAT).option("where", where).load().collect()
