"""Spark on an object store: an index built, refreshed and read by Spark over ``s3a://`` (moto on loopback).

The shared session reaches the moto server through Hadoop's S3A connector (hadoop-aws and its
AWS SDK, among the run's jars), configured per bucket so no other test's S3A use is touched.
The Delta table is written by delta-spark over ``s3a://`` and by deltalake over ``s3://``; the
index is built and refreshed on Spark (``local_max_rows=0``: Spark reads the data files over
S3A, its tasks write index files to S3 with pyarrow). The oracles are delta-spark's read of each
version over S3A and deltalake's over the S3 API.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from tests.support.moto import moto_s3

pytestmark = [pytest.mark.spark, pytest.mark.delta_spark, pytest.mark.integration]

BUCKET = "spark-s3a"
KEYS = ["k0", "rare", "absent"]
WHERE = "k IN ('k0', 'rare', 'absent')"


def _s3a_settings(options: dict[str, str]) -> dict[str, str]:
    """Hadoop S3A settings for the moto server behind ``options``, for :data:`BUCKET` only."""
    per_bucket = {
        "endpoint": options["AWS_ENDPOINT_URL"],
        "endpoint.region": options["AWS_REGION"],
        "path.style.access": "true",
        "connection.ssl.enabled": "false",
        "access.key": options["AWS_ACCESS_KEY_ID"],
        "secret.key": options["AWS_SECRET_ACCESS_KEY"],
        "aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }
    return {f"fs.s3a.bucket.{BUCKET}.{k}": v for k, v in per_bucket.items()}


@pytest.fixture(scope="module")
def s3(spark: Any) -> Iterator[dict[str, str]]:
    with moto_s3(BUCKET) as options:
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        settings = _s3a_settings(options)
        for key, value in settings.items():
            hadoop.set(key, value)
        try:
            yield options
        finally:
            for key in settings:
                hadoop.unset(key)


def _writer(s3: dict[str, str]) -> dict[str, str]:
    # deltalake on moto: plain HTTP, and the test is the table's only writer.
    return {**s3, "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}


def batch(b: int, n: int = 300) -> pa.Table:
    """Batch ``b``: keys k0..k6 and one ``rare`` key; ids unique."""
    keys = [f"k{i % 7}" for i in range(n)]
    keys[b] = "rare"
    return pa.table({"id": pa.array([b * 10_000 + i for i in range(n)], pa.int64()), "k": keys})


def _pairs(rows: Any) -> list[tuple[str, int]]:
    if isinstance(rows, pa.Table):
        return sorted(zip(rows["k"].to_pylist(), rows["id"].to_pylist(), strict=True))
    return sorted((r["k"], r["id"]) for r in rows)


def _delta_spark(spark: Any, uri: str, version: int) -> list[tuple[str, int]]:
    """delta-spark's answer at ``version``, read over S3A."""
    df = spark.read.format("delta").option("versionAsOf", version).load(uri)
    return _pairs(df.where(WHERE).select("k", "id").collect())


def _deltalake(s3: dict[str, str], version: int) -> list[tuple[str, int]]:
    dt = DeltaTable(f"s3://{BUCKET}/t", storage_options=_writer(s3), version=version)
    rows = dt.to_pyarrow_table(columns=["k", "id"]).to_pylist()
    return sorted((r["k"], r["id"]) for r in rows if r["k"] in KEYS)


def test_build_refresh_and_read_on_spark_over_s3a(spark: Any, s3: dict[str, str]) -> None:
    uri = f"s3a://{BUCKET}/t"
    frame = spark.createDataFrame(batch(0).to_pylist(), "id long, k string")
    frame.write.format("delta").save(uri)
    for b in (1, 2):
        write_deltalake(f"s3://{BUCKET}/t", batch(b), mode="append", storage_options=_writer(s3))
    t = li.open_table(uri, storage_options=s3)
    spec = li.SecondaryIndex("by_k", key="k", record_key="id")
    t.create_index(spec, spark=spark, local_max_rows=0)
    built = t.latest_version()

    frame = spark.createDataFrame(batch(3).to_pylist(), "id long, k string")
    frame.write.format("delta").mode("append").save(uri)
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE id % 10 = 3")
    t.refresh_index("by_k", "incremental", spark=spark, local_max_rows=0)
    [info] = t.indexes()
    assert info.indexed_version == t.latest_version() > built

    for version in (built, t.latest_version()):
        want = _delta_spark(spark, uri, version)
        assert want == _deltalake(s3, version), version
        assert _pairs(t.lookup("by_k", KEYS, columns=["k", "id"], version_as_of=version)) == want, version
        got = t.read(spark, version_as_of=version, where=WHERE).select("k", "id").collect()
        assert _pairs(got) == want, version
