"""Spark and Python put every key in the same bucket (lookups read only the key's bucket)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse_index.kinds import layout as cov

pytestmark = pytest.mark.spark


@settings(max_examples=6, deadline=None)
@given(
    strings=st.lists(st.one_of(st.none(), st.text(max_size=12)), min_size=1, max_size=30),
    ints=st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=30),
    n=st.integers(1, 64),
)
def test_spark_and_python_buckets_agree(spark: Any, strings: list[Any], ints: list[int], n: int) -> None:
    from pyspark.sql import functions as F

    for values, typ in ((strings, "string"), (ints, "bigint")):
        df = spark.createDataFrame([(v,) for v in values], f"v {typ}")
        got = df.select("v", cov.bucket_column(F.col("v"), n).alias("b")).collect()
        assert [r.b for r in got] == [cov.bucket_of(r.v, n) for r in got]


def test_bucket_from_path() -> None:
    assert cov.bucket_from_path("data/abc/bucket=7/part-0.parquet") == 7
    assert cov.bucket_from_path("data/abc/part-0.parquet") is None
