"""The ``lakehouse_index`` Spark data source needs pyspark >= 4.1: run by ``make test-spark4``."""

from __future__ import annotations

from typing import Any

import pytest
from source_support import source_available

import lakehouse_index as li


@pytest.fixture(scope="session")
def source_spark(spark: Any) -> Any:
    """The shared session with ``format("lakehouse_index")`` registered."""
    if not source_available():
        pytest.skip("the lakehouse_index data source needs pyspark >= 4.1 (run by make test-spark4)")
    li.register_spark_source(spark)
    return spark
