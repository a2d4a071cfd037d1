"""Shared fixtures: one local Spark session for the whole run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A real local Spark session (2 threads), shared by every test that needs Spark."""
    from lakehouse_index.spark import get_spark

    session = get_spark(master="local[2]")
    yield session
