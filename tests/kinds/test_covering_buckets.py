"""Spark and this process put every key in the same bucket, by Spark's own bucketing function.

The in-process Murmur3 (``kinds.murmur3``) must equal Spark's ``hash(v)`` and
``pmod(hash(v), n)`` for random values of every key type a covering index buckets, nulls,
-0.0, NaN, empty strings and multi-byte UTF-8 included: the values are written to Parquet
by pyarrow and read back by Spark, so Spark sees them in the types it reads a table's files
with. The legacy layout (crc32 of the string form) keeps agreeing for strings and integers.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_index.kinds import layout as cov
from lakehouse_index.kinds.murmur3 import spark_hash

pytestmark = pytest.mark.spark

_UTC = dt.timezone.utc
_INT = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}


def _ints(bits: int) -> st.SearchStrategy[int]:
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _decimals(precision: int, scale: int) -> st.SearchStrategy[decimal.Decimal]:
    bound = 10**precision - 1
    return st.integers(-bound, bound).map(
        lambda u: decimal.Decimal(f"{u}E-{scale}")
    )  # exact: no context rounding


#: Every key type with a strategy of its values (None mixed in by ``_column``).
TYPES: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "boolean": (pa.bool_(), st.booleans()),
    **{f"int{b}": (_INT[b], _ints(b)) for b in (8, 16, 32, 64)},
    "float": (pa.float32(), st.floats(width=32) | st.sampled_from([-0.0, 0.0, float("nan")])),
    "double": (pa.float64(), st.floats() | st.sampled_from([-0.0, 0.0, float("nan"), float("-inf")])),
    "string": (pa.string(), st.text(max_size=20)),
    "binary": (pa.binary(), st.binary(max_size=20)),
    "date": (pa.date32(), st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31))),
    "timestamp": (
        pa.timestamp("us", "UTC"),
        st.datetimes(dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30)).map(lambda d: d.replace(tzinfo=_UTC)),
    ),
    "timestamp_ntz": (pa.timestamp("us"), st.datetimes(dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30))),
    "decimal(9,2)": (pa.decimal128(9, 2), _decimals(9, 2)),
    "decimal(18,0)": (pa.decimal128(18, 0), _decimals(18, 0)),
    "decimal(38,10)": (pa.decimal128(38, 10), _decimals(38, 10)),
    "decimal(25,0)": (pa.decimal128(25, 0), _decimals(25, 0)),
}


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.fixed_dictionaries({name: st.none() | values for name, (_, values) in TYPES.items()}),
        min_size=1,
        max_size=25,
    ),
    n=st.integers(1, 300),
)
def test_in_process_hash_and_bucket_equal_sparks(
    spark: Any, tmp_path: Path, rows: list[dict[str, Any]], n: int
) -> None:
    from pyspark.sql import functions as F

    table = pa.table({name: pa.array([r[name] for r in rows], typ) for name, (typ, _) in TYPES.items()})
    path = tmp_path / "values.parquet"
    pq.write_table(table, path)
    df = spark.read.option("datetimeRebaseMode", "CORRECTED").parquet(str(path))  # no calendar rebase
    buckets = {name: cov.Buckets(name, n) for name in TYPES}
    got = df.select(
        *[F.hash(name).alias(f"h_{i}") for i, name in enumerate(TYPES)],
        *[cov.bucket_column(F.col(name), buckets[name]).alias(f"b_{i}") for i, name in enumerate(TYPES)],
    ).collect()  # a one-file, one-task read keeps the file's row order
    for i, (name, (typ, _)) in enumerate(TYPES.items()):
        values = table[name]
        assert spark_hash(values).tolist() == [r[f"h_{i}"] for r in got], name
        assert cov.bucket_ids(values, buckets[name]).tolist() == [r[f"b_{i}"] for r in got], name
        lookup = cov.key_buckets([r[name] for r in rows], typ, buckets[name])  # what a lookup reads
        assert lookup == {r[f"b_{i}"] for r in got}, name


@settings(max_examples=6, deadline=None)
@given(
    strings=st.lists(st.one_of(st.none(), st.text(max_size=12)), min_size=1, max_size=30),
    ints=st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=30),
    n=st.integers(1, 64),
)
def test_legacy_crc32_buckets_agree(spark: Any, strings: list[Any], ints: list[int], n: int) -> None:
    from pyspark.sql import functions as F

    legacy = cov.Buckets("v", n, spark=False)
    for values, typ, arrow in ((strings, "string", pa.string()), (ints, "bigint", pa.int64())):
        df = spark.createDataFrame([(v,) for v in values], f"v {typ}")
        got = df.select("v", cov.bucket_column(F.col("v"), legacy).alias("b")).collect()
        assert [r.b for r in got] == cov.bucket_ids(pa.array([r.v for r in got], arrow), legacy).tolist()


def test_bucket_from_path() -> None:
    assert cov.bucket_from_path("data/abc/bucket=7/part-0.parquet") == 7
    assert cov.bucket_from_path("data/abc/" + cov.bucket_file_name("0f3a", 12)) == 12
    assert cov.bucket_from_path("data/abc/part-0f3a.parquet") is None
