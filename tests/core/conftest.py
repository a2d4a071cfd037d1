"""Fixtures for the core reader tests (the contract double lives in core_helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One real local Spark session (2 threads) for the core tests."""
    from lakehouse_index.spark import get_spark

    yield get_spark(master="local[2]")
